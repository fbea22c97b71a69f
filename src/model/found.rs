//! Which events' texts hold a piece of text, case aside: what `why` traces a
//! fact by and a policy's `pin.text` pins by. A session keeps what it has
//! found, so a term asked for again costs nothing, and one asked for call
//! after call as the log grows costs only the events added since.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};

use super::{SessionLog, Text};

/// What is kept past its last ask is let go beyond this weight: an index
/// weighs one, a text asked for `ENTRY` more (some 4 MB in all).
const KEPT: usize = 1 << 20;
const ENTRY: usize = 16;

/// What a session has found: for each text (lower case), its holders among
/// the session's first `upto` events (only ever added to: see
/// `SessionLog::events`). A clone starts empty.
#[derive(Default)]
pub(super) struct Found(Mutex<HashMap<String, Holders>>);

#[derive(Clone)]
struct Holders {
    upto: usize,
    at: Arc<Vec<u32>>,
}

impl Clone for Found {
    fn clone(&self) -> Found {
        Found::default()
    }
}

impl fmt::Debug for Found {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("Found")
    }
}

impl SessionLog {
    /// For each of `needles` (lower case), the events whose text, lower
    /// case (`str::to_lowercase`), holds it, by index, in order. What is not
    /// known yet is found in one pass over the texts, on all cores.
    pub fn holding(&self, needles: &[String]) -> Vec<Arc<Vec<u32>>> {
        let n = self.events.len();
        // Not held while the texts are read: the pass runs on rayon's
        // threads, where another ask may wait for the lock.
        let known: Vec<Option<Holders>> = {
            let found = self.found.0.lock().unwrap_or_else(|e| e.into_inner());
            let known = |needle: &String| found.get(needle).filter(|h| h.upto <= n).cloned();
            needles.iter().map(known).collect()
        };
        let from: Vec<usize> = known
            .iter()
            .map(|k| k.as_ref().map_or(0, |h| h.upto))
            .collect();
        let start = from.iter().copied().min().unwrap_or(n);
        if start == n {
            let at = |k: Option<Holders>| k.map_or_else(Arc::default, |h| h.at);
            return known.into_iter().map(at).collect();
        }
        let texts: Vec<&Text> = self.events[start..].iter().map(|e| &e.content).collect();
        let held = Text::par_map(&texts, |at, text| {
            let ix = start + at;
            let lower = text.to_lowercase();
            let holds =
                |&(i, needle): &(usize, &String)| ix >= from[i] && lower.contains(needle.as_str());
            let holds: Vec<u32> = (needles.iter().enumerate())
                .filter(holds)
                .map(|(i, _)| i as u32)
                .collect();
            // A text that could not be read back is a line saying so, of
            // another length: what it holds is not kept, to be read again.
            (holds, text.len() == texts[at].len())
        });
        let read = held
            .iter()
            .position(|(_, read)| !read)
            .unwrap_or(held.len());
        let mut lists: Vec<Vec<u32>> = known
            .iter()
            .map(|k| k.as_ref().map_or_else(Vec::new, |h| h.at.to_vec()))
            .collect();
        for (at, (holds, _)) in held.into_iter().enumerate() {
            for i in holds {
                lists[i as usize].push((start + at) as u32);
            }
        }
        let lists: Vec<Arc<Vec<u32>>> = lists.into_iter().map(Arc::new).collect();
        // Kept up to the first text not read back; what this ask found is
        // kept whatever it weighs (a pin asks again at every call), what
        // earlier asks found only within `KEPT`.
        let upto = start + read;
        let keep: Vec<Arc<Vec<u32>>> = (lists.iter())
            .map(|at| match upto == n {
                true => Arc::clone(at),
                false => Arc::new(at[..at.partition_point(|&ix| (ix as usize) < upto)].to_vec()),
            })
            .collect();
        let weight = |at: &Arc<Vec<u32>>| at.len() + ENTRY;
        let mut found = self.found.0.lock().unwrap_or_else(|e| e.into_inner());
        for needle in needles {
            found.remove(needle);
        }
        let kept: usize = found.values().map(|h| weight(&h.at)).sum();
        if kept + keep.iter().map(weight).sum::<usize>() > KEPT {
            found.clear();
        }
        for (needle, at) in needles.iter().zip(keep) {
            found.insert(needle.clone(), Holders { upto, at });
        }
        lists
    }
}
