//! Sums of a growing list of numbers by prefix, where a number deep in the
//! list may change (a Fenwick tree): each change, each sum and each search
//! takes a few steps, not a pass over everything after the change.

/// Node `i` (counted from 1) holds the sum of the numbers `i - low(i)..i`,
/// where `low(i)` is the lowest set bit of `i`. Sums wrap: a number may go
/// down, and the sums of the numbers, none of them negative, come out right.
#[derive(Clone, Debug, Default)]
pub struct PrefixSums {
    nodes: Vec<u64>,
}

/// The lowest set bit of `i`.
fn low(i: usize) -> usize {
    i & i.wrapping_neg()
}

impl PrefixSums {
    /// How many numbers it holds.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Adds `n` at the end.
    pub fn push(&mut self, n: u64) {
        let i = self.nodes.len() + 1;
        let (mut sum, mut j) = (n, i - 1);
        while j > i - low(i) {
            sum = sum.wrapping_add(self.nodes[j - 1]);
            j -= low(j);
        }
        self.nodes.push(sum);
    }

    /// Keeps the first `len` numbers.
    pub fn truncate(&mut self, len: usize) {
        self.nodes.truncate(len);
    }

    /// Changes the number at `ix` by `delta` (wrapping: a decrease is its
    /// two's complement).
    pub fn add(&mut self, ix: usize, delta: u64) {
        let mut i = ix + 1;
        while i <= self.nodes.len() {
            self.nodes[i - 1] = self.nodes[i - 1].wrapping_add(delta);
            i += low(i);
        }
    }

    /// The sum of the numbers before `end`.
    pub fn before(&self, end: usize) -> u64 {
        let mut i = end.min(self.nodes.len());
        let mut sum = 0u64;
        while i > 0 {
            sum = sum.wrapping_add(self.nodes[i - 1]);
            i -= low(i);
        }
        sum
    }

    /// The fewest first numbers whose sum reaches `goal`: the least `end`
    /// with `before(end) >= goal` (`len() + 1` when even all fall short).
    pub fn reaching(&self, goal: u64) -> usize {
        if goal == 0 {
            return 0;
        }
        // Down the tree: the most numbers whose sum stays under the goal.
        let (mut end, mut left) = (0, goal);
        let mut step = match self.nodes.len() {
            0 => 0,
            n => 1 << n.ilog2(),
        };
        while step > 0 {
            if end + step <= self.nodes.len() && self.nodes[end + step - 1] < left {
                end += step;
                left -= self.nodes[end - 1];
            }
            step >>= 1;
        }
        end + 1
    }
}

#[cfg(test)]
mod tests {
    use super::PrefixSums;
    use proptest::prelude::*;

    proptest! {
        /// Every sum and search, after pushes, changes and cuts, is what
        /// adding the numbers up gives.
        #[test]
        fn sums_are_the_numbers_added_up(
            numbers in prop::collection::vec(0u64..50, 0..80),
            changes in prop::collection::vec((0usize..80, 0u64..50), 0..20),
            cut in 0usize..90,
            more in prop::collection::vec(0u64..50, 0..20),
        ) {
            let mut plain = numbers.clone();
            let mut sums = PrefixSums::default();
            for &n in &numbers {
                sums.push(n);
            }
            for &(ix, now) in &changes {
                if let Some(was) = plain.get_mut(ix) {
                    sums.add(ix, now.wrapping_sub(*was));
                    *was = now;
                }
            }
            plain.truncate(cut);
            sums.truncate(cut);
            for &n in &more {
                plain.push(n);
                sums.push(n);
            }
            prop_assert_eq!(sums.len(), plain.len());
            let before = |end: usize| plain[..end].iter().sum::<u64>();
            for end in 0..=plain.len() {
                prop_assert_eq!(sums.before(end), before(end));
            }
            let total = before(plain.len());
            for goal in 0..=total + 1 {
                let least = (0..=plain.len()).find(|&end| before(end) >= goal);
                prop_assert_eq!(sums.reaching(goal), least.unwrap_or(plain.len() + 1));
            }
        }
    }
}
