//! Preset `executive`: adaptive's shape with a fixed keep window; the
//! summary item opens with state computed from the log: plan progress (the
//! newest plan or todo tool call's items), working files (paths in tool
//! arguments) and tool-usage counts.

use std::collections::{BTreeMap, HashMap};
use std::ops::Range;

use crate::engine::Span;
use crate::engine::context::Context;
use crate::engine::split::{self, Split};
use crate::engine::{Carry, State};
use crate::model::{Event, Kind, Text};
use crate::policy::{Budget, Policy};

pub fn project<'a>(
    ctx: Context<'a>,
    budget: &Budget,
    policy: &Policy,
    state: &mut State,
    carry: &mut Carry,
    fired: &mut Vec<&'static str>,
) -> Context<'a> {
    let split = Split {
        tail_start,
        touch: state_first,
        touched: split::nothing,
        whole_turns: false,
    };
    split::project(ctx, budget, policy, state, carry, fired, &split)
}

fn tail_start(ctx: &Context, policy: &Policy) -> usize {
    let first = ctx.first_dialogue();
    let n = ctx.events.len();
    let keep = policy.executive.keep_recent.max(1) as usize;
    split::snap_back(ctx, n.saturating_sub(keep).max(first))
}

/// The summary opens with the span's state, made once per split: it
/// depends on the span alone.
fn state_first(
    ctx: &mut Context,
    span: Span,
    _: &Budget,
    _: &Policy,
    state: &mut State,
    carry: &mut Carry,
) {
    let made = match state.made.take() {
        Some((at, text)) if at == span => text,
        _ => {
            // A split moves forward from the same start: the tally of the
            // span before goes on with the events since.
            let (from, tally) = match carry.own::<Carried>().take() {
                Some((at, tally)) if at.from_seq == span.from_seq && at.to_seq <= span.to_seq => {
                    (at.to_seq + 1, tally)
                }
                _ => (span.from_seq, Tally::default()),
            };
            let tally = tally.go_on(ctx, from, span.to_seq);
            let text = tally.text(span);
            *carry.own() = Some((span, tally));
            text
        }
    };
    ctx.made_text = Some(made.clone());
    state.made = Some((span, made));
}

/// The tally of the span compacted so far.
type Carried = Option<(Span, Tally)>;

/// What the tool calls of a span say: the newest plan's progress, the
/// working files (most recent last), and how often each tool was called.
#[derive(Clone, Debug, Default)]
pub struct Tally {
    plan: Option<String>,
    files: Vec<String>,
    usage: BTreeMap<String, u64>,
}

impl Tally {
    /// The tally with the tool calls of seqs `from..=to` added, in log order.
    fn go_on(mut self, ctx: &Context, from: i64, to: i64) -> Tally {
        let start = ctx.events.partition_point(|e| e.seq < from);
        let end = start + ctx.events[start..].partition_point(|e| e.seq <= to);
        let calls: Vec<usize> = (start..end)
            .filter(|&ix| ctx.events[ix].kind == Kind::ToolCall)
            .collect();
        for (&ix, said) in calls.iter().zip(said(ctx, &calls, start..end)) {
            let tool = ctx.events[ix].tool_name.as_deref().unwrap_or("tool");
            *self.usage.entry(tool.to_string()).or_default() += 1;
            self.plan = said.plan.or(self.plan);
            for path in said.paths {
                self.files.retain(|f| *f != path);
                self.files.push(path);
            }
        }
        self
    }

    /// Plan progress, working files and tool-usage counts of the span, from
    /// the log itself: what a continuing coding agent needs (the executive
    /// summary).
    fn text(&self, span: Span) -> String {
        let listed = |items: Vec<String>| {
            if items.is_empty() {
                "none".to_string()
            } else {
                items.join(", ")
            }
        };
        let files = self.files.iter().rev().take(20).cloned().collect();
        let mut counts: Vec<(&str, u64)> =
            self.usage.iter().map(|(t, n)| (t.as_str(), *n)).collect();
        counts.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        let counts = counts.iter().map(|(t, n)| format!("{t} {n}")).collect();
        format!(
            "[state of seqs {}..{}, from the log]\nplan: {}\nworking files: {}\ntool usage: {}",
            span.from_seq,
            span.to_seq,
            self.plan.as_deref().unwrap_or("none recorded"),
            listed(files),
            listed(counts)
        )
    }
}

/// What a tool call's arguments give the tally: a plan or todo tool's
/// progress, and the paths it names, in the order of their keys.
#[derive(Clone, Debug, Default)]
struct Said {
    plan: Option<String>,
    paths: Vec<String>,
}

impl Said {
    fn of(event: &Event, text: &str) -> Said {
        let Ok(args) = serde_json::from_str::<serde_json::Value>(text) else {
            return Said::default();
        };
        let tool = event.tool_name.as_deref().unwrap_or("tool").to_lowercase();
        let plan = (tool.contains("plan") || tool.contains("todo"))
            .then(|| plan_progress(&args))
            .flatten();
        let paths = ["path", "file_path", "filename", "file", "notebook_path"]
            .iter()
            .filter_map(|key| args.get(key).and_then(|v| v.as_str()).map(String::from))
            .collect();
        Said { plan, paths }
    }
}

/// What the session's tool calls said, kept with its counts so that a walk
/// after the first reads no arguments: every call before `through` was
/// read, and those that said anything are held.
#[derive(Debug, Default)]
pub struct Read {
    through: usize,
    said: HashMap<usize, Said>,
}

/// What each of `calls` (tool calls among the events `range`, in order)
/// said: from what was read before, the others read now in one pass and
/// kept.
fn said(ctx: &Context, calls: &[usize], range: Range<usize>) -> Vec<Said> {
    // What is held stays whole whatever panicked meanwhile.
    let found = ctx.counts.memo.found::<Read>();
    let memo = || {
        found
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    };
    let through = memo().through;
    let (known, unread) = calls.split_at(calls.partition_point(|&ix| ix < through));
    let texts = Text::get_all(unread.iter().map(|&ix| &ctx.events[ix].content));
    let fresh: Vec<Said> = (unread.iter())
        .zip(texts)
        .map(|(&ix, text)| Said::of(&ctx.events[ix], &text))
        .collect();
    let mut read = memo();
    let mut out: Vec<Said> = (known.iter())
        .map(|ix| read.said.get(ix).cloned().unwrap_or_default())
        .collect();
    // Kept where it goes on from what was read before.
    let mut gap = ctx.events[read.through.min(range.start)..range.start].iter();
    if read.through < range.end && !gap.any(|e| e.kind == Kind::ToolCall) {
        read.through = range.end;
        let said = (unread.iter().copied())
            .zip(fresh.iter().cloned())
            .filter(|(_, s)| s.plan.is_some() || !s.paths.is_empty());
        read.said.extend(said);
    }
    out.extend(fresh);
    out
}

/// "2 of 5 done" and the steps, from a plan or todo tool's arguments.
fn plan_progress(args: &serde_json::Value) -> Option<String> {
    let items = ["plan", "todos", "steps", "items"]
        .iter()
        .find_map(|key| args.get(key).and_then(|v| v.as_array()))?;
    let mut done = 0;
    let mut lines = Vec::new();
    for item in items {
        let text = ["step", "content", "title", "text"]
            .iter()
            .find_map(|key| item.get(key).and_then(|v| v.as_str()))
            .or(item.as_str())
            .unwrap_or("?");
        let status = item.get("status").and_then(|v| v.as_str()).unwrap_or("");
        let mark = match status {
            "completed" | "done" => {
                done += 1;
                "x"
            }
            "in_progress" | "in-progress" | "active" => ">",
            _ => " ",
        };
        lines.push(format!("  [{mark}] {text}"));
    }
    Some(format!(
        "{done} of {} done\n{}",
        items.len(),
        lines.join("\n")
    ))
}
