//! One session in memory: its events, summaries and calls, with the indexes
//! derived from them (the pairing of tool calls and results, steps, the
//! events each model call saw).

use super::{Event, Eviction, Kind, ModelCall, Session, Summary, Text, found};

/// A tool call and its result, by index into the session's events.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Pair {
    pub call: Option<usize>,
    pub result: Option<usize>,
}

/// Everything one session holds, with the indexes derived from it.
#[derive(Clone, Debug, Default)]
pub struct SessionLog {
    pub session: Session,
    /// In the order the log stores them (seq order in a well-formed log).
    /// Only ever added to, by `push_event`: the indexes below and what
    /// `holding` keeps stand on the events before them staying as they are.
    pub events: Vec<Event>,
    pub summaries: Vec<Summary>,
    pub calls: Vec<ModelCall>,
    /// The step each event belongs to, parallel to `events`; `None` for events
    /// outside any step (system prompt, user messages, compaction markers).
    steps: Vec<Option<u32>>,
    step_count: u32,
    step_open: bool,
    /// False once an event arrives out of seq order (only in a broken log);
    /// lookups by seq then scan instead of searching.
    in_seq_order: bool,
    /// Each call id's first tool call and first result, by index into
    /// `events` (`NONE` where there is none yet), found by the id's hash:
    /// eight bytes an id, not a copy of it.
    pairs: hashbrown::HashTable<(u32, u32)>,
    /// The seed of `pairs`' hashes (see `pair_hash`).
    pair_seed: foldhash::fast::RandomState,
    /// The other half of each event's pair, parallel to `events`.
    partners: Vec<Option<u32>>,
    /// Each event's tool as an index into `tool_names`, parallel to `events`.
    tools: Vec<Option<u16>>,
    tool_names: Vec<String>,
    /// How the loaded user messages whose texts stay in the log open, by
    /// index (see `Opening`).
    openings: Vec<(u32, Opening)>,
    /// Which events hold the texts asked for so far (see `holding`).
    pub(super) found: found::Found,
}

/// No event, in `SessionLog::pairs`.
const NONE: u32 = u32::MAX;

/// A call id's hash in `SessionLog::pairs`, seeded per session (a
/// transcript's ids cannot be made to collide).
fn pair_hash(seed: &foldhash::fast::RandomState, call_id: &str) -> u64 {
    use std::hash::BuildHasher;
    seed.hash_one(call_id)
}

/// The call id of a pair in `SessionLog::pairs`: that of its first event.
fn pair_id(events: &[Event], (call, result): (u32, u32)) -> &str {
    let ix = if call == NONE { result } else { call };
    let event = events.get(ix as usize);
    event.and_then(|e| e.call_id.as_deref()).unwrap_or_default()
}

/// The first bytes of a text (all of it, when shorter), kept as it is
/// loaded: what a message opens with says what it cannot be without
/// reading it back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Opening {
    bytes: [u8; Opening::BYTES],
    len: u8,
}

impl Opening {
    const BYTES: usize = 12;

    pub fn of(text: &str) -> Opening {
        let len = text.len().min(Opening::BYTES);
        let mut bytes = [0; Opening::BYTES];
        bytes[..len].copy_from_slice(&text.as_bytes()[..len]);
        Opening {
            bytes,
            len: len as u8,
        }
    }

    pub fn bytes(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }
}

impl SessionLog {
    pub fn new(session: Session) -> SessionLog {
        SessionLog {
            session,
            in_seq_order: true,
            ..SessionLog::default()
        }
    }

    pub fn id(&self) -> &str {
        &self.session.id
    }

    /// Adds an event at the end, keeping steps and pairs up to date.
    pub fn push_event(&mut self, event: Event) {
        let ix = self.events.len();
        let step = match event.kind {
            Kind::Assistant | Kind::Reasoning | Kind::ToolCall => {
                if !self.step_open {
                    self.step_count += 1;
                    self.step_open = true;
                }
                Some(self.step_count - 1)
            }
            // A result answers the step that is open; the next agent event opens a new one.
            Kind::ToolResult => {
                let step = self.step_count.checked_sub(1);
                self.step_open = false;
                step
            }
            _ => {
                self.step_open = false;
                None
            }
        };
        let mut partner = None;
        if let (Some(call_id), Kind::ToolCall | Kind::ToolResult) = (&event.call_id, event.kind) {
            let (events, seed) = (&self.events, &self.pair_seed);
            let (call, result) = self
                .pairs
                .entry(
                    pair_hash(seed, call_id),
                    |&pair| pair_id(events, pair) == &**call_id,
                    |&pair| pair_hash(seed, pair_id(events, pair)),
                )
                .or_insert((NONE, NONE))
                .into_mut();
            match event.kind {
                Kind::ToolCall if *call == NONE => *call = ix as u32,
                Kind::ToolResult if *result == NONE => {
                    *result = ix as u32;
                    // The call learns its partner now that the result has arrived.
                    if *call != NONE {
                        self.partners[*call as usize] = Some(ix as u32);
                        partner = Some(*call);
                    }
                }
                _ => {}
            }
        }
        if self.events.last().is_some_and(|last| last.seq >= event.seq) {
            self.in_seq_order = false;
        }
        let tool = event.tool_name.as_deref().map(|name| {
            match self.tool_names.iter().position(|t| t == name) {
                Some(at) => at as u16,
                None => {
                    self.tool_names.push(name.to_string());
                    (self.tool_names.len() - 1) as u16
                }
            }
        });
        self.tools.push(tool);
        self.steps.push(step);
        self.partners.push(partner);
        self.events.push(event);
    }

    /// `push_event`, for a loaded event whose text stays in the log: how a
    /// user message opens (the loader's `opening`) is kept (see `opening`).
    pub fn push_loaded(&mut self, event: Event, opening: Option<Opening>) {
        if let Some(opening) = opening {
            self.openings.push((self.events.len() as u32, opening));
        }
        self.push_event(event);
    }

    /// How the loaded user message at `ix` opens, where its text stays in
    /// the log (a held text is read at no cost).
    pub fn opening(&self, ix: usize) -> Option<Opening> {
        let at = self
            .openings
            .binary_search_by_key(&ix, |&(at, _)| at as usize);
        at.ok().map(|at| self.openings[at].1)
    }

    /// `f` of each event's text (with its index), made on all cores, the
    /// texts stored in a log read back a batch at a time (see `Text::par_map`).
    pub fn map_texts<T: Send>(&self, f: impl Fn(usize, &str) -> T + Sync) -> Vec<T> {
        let texts: Vec<&Text> = self.events.iter().map(|e| &e.content).collect();
        Text::par_map(&texts, f)
    }

    /// The event with this seq.
    pub fn event(&self, seq: i64) -> Option<&Event> {
        self.index_of(seq).map(|ix| &self.events[ix])
    }

    /// The entries of `call`'s `evictions` column, one per event: a range
    /// (`to_seq`) stands for each event of this session inside it.
    pub fn evictions(&self, call: &ModelCall) -> serde_json::Result<Vec<Eviction>> {
        let entries = call.parsed_evictions()?;
        if entries.iter().all(|e| e.to_seq.is_none()) {
            return Ok(entries);
        }
        let mut out = Vec::with_capacity(entries.len());
        for entry in entries {
            let Some(to) = entry.to_seq else {
                out.push(entry);
                continue;
            };
            out.extend(self.seqs_between(entry.seq, to).map(|seq| Eviction {
                seq,
                to_seq: None,
                ..entry.clone()
            }));
        }
        Ok(out)
    }

    /// The seqs of this session's events from `from` to `to` inclusive.
    fn seqs_between(&self, from: i64, to: i64) -> impl Iterator<Item = i64> + '_ {
        let events: &[Event] = if self.in_seq_order {
            let start = self.events.partition_point(|e| e.seq < from);
            let end = self.events.partition_point(|e| e.seq <= to);
            &self.events[start..end.max(start)]
        } else {
            &self.events
        };
        events
            .iter()
            .map(|e| e.seq)
            .filter(move |seq| (from..=to).contains(seq))
    }

    /// The position of the event with this seq in `events`.
    pub fn index_of(&self, seq: i64) -> Option<usize> {
        if self.in_seq_order {
            self.events.binary_search_by_key(&seq, |e| e.seq).ok()
        } else {
            self.events.iter().position(|e| e.seq == seq)
        }
    }

    /// The step of the event at `ix`, numbered from 0 per session.
    pub fn step_of(&self, ix: usize) -> Option<u32> {
        self.steps.get(ix).copied().flatten()
    }

    /// How many steps the session has so far.
    pub fn step_count(&self) -> u32 {
        self.step_count
    }

    /// The tool call and result sharing `call_id` (the first of each).
    pub fn pair(&self, call_id: &str) -> Pair {
        let found = (self.pairs).find(pair_hash(&self.pair_seed, call_id), |&pair| {
            pair_id(&self.events, pair) == call_id
        });
        let at = |ix: u32| (ix != NONE).then_some(ix as usize);
        found.map_or_else(Pair::default, |&(call, result)| Pair {
            call: at(call),
            result: at(result),
        })
    }

    /// The other half of the pair the event at `ix` belongs to.
    pub fn partner_of(&self, ix: usize) -> Option<usize> {
        self.partners.get(ix).copied().flatten().map(|p| p as usize)
    }

    /// The tool of the event at `ix`, as a small number: the same for every
    /// event naming the same tool (see `tool_names`).
    pub fn tool_of(&self, ix: usize) -> Option<u16> {
        self.tools.get(ix).copied().flatten()
    }

    /// Every tool name the session uses, indexed by `tool_of`.
    pub fn tool_names(&self) -> &[String] {
        &self.tool_names
    }

    /// The number of turns (the highest turn number plus one).
    pub fn turn_count(&self) -> i64 {
        self.events.iter().map(|e| e.turn + 1).max().unwrap_or(0)
    }

    /// The events a model call saw: every event with `seq <= last_seq`.
    pub fn seen_by(&self, call: &ModelCall) -> &[Event] {
        let end = self.events.partition_point(|e| e.seq <= call.last_seq);
        &self.events[..end]
    }

    /// `seen_by`, searched from `from` (as the next call of a walk saw a
    /// few events more than the last): a few steps, not a bisection of
    /// every event (see `partition_near`).
    pub fn seen_by_from(&self, call: &ModelCall, from: usize) -> &[Event] {
        let end = partition_near(&self.events, from, |e| e.seq <= call.last_seq);
        &self.events[..end]
    }

    /// The model call with this id: a binary search, as the loader keeps
    /// calls in id order (a scan when they are not).
    pub fn call(&self, id: i64) -> Option<&ModelCall> {
        by_id(&self.calls, id, |c| c.id)
    }

    /// The summary with this id, found as `call` finds a call.
    pub fn summary(&self, id: i64) -> Option<&Summary> {
        by_id(&self.summaries, id, |s| s.id)
    }
}

/// `list.partition_point(pred)`, searched out from `near` in steps that
/// double: a few steps where the point is near it (the events a walk's
/// next call adds, the newest turns a window or retention rule keeps),
/// where a bisection of a long session's events misses the cache at nearly
/// every step.
pub fn partition_near<T>(list: &[T], near: usize, pred: impl Fn(&T) -> bool) -> usize {
    let at = near.min(list.len());
    let mut step = 1;
    let (low, high) = if at > 0 && !pred(&list[at - 1]) {
        // Back: nothing from `high` on holds.
        let mut high = at - 1;
        loop {
            let probe = high.saturating_sub(step);
            if probe == high {
                break (0, high);
            }
            if pred(&list[probe]) {
                break (probe + 1, high);
            }
            (high, step) = (probe, step * 2);
        }
    } else {
        // On: everything before `low` holds.
        let mut low = at;
        loop {
            if low + step > list.len() {
                break (low, list.len());
            }
            if !pred(&list[low + step - 1]) {
                break (low, low + step - 1);
            }
            (low, step) = (low + step, step * 2);
        }
    };
    low + list[low..high].partition_point(pred)
}

/// The item with this id in a list kept in id order, by binary search; by a
/// scan when the search misses, in case the list is not in order.
fn by_id<T>(items: &[T], id: i64, key: impl Fn(&T) -> i64) -> Option<&T> {
    match items.binary_search_by_key(&id, &key) {
        Ok(at) => Some(&items[at]),
        Err(_) => items.iter().find(|item| key(item) == id),
    }
}
