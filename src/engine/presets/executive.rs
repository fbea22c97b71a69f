//! Preset `executive`: adaptive's shape with a fixed keep window; the
//! summary item opens with state computed from the log: plan progress (the
//! newest plan or todo tool call's items), working files (paths in tool
//! arguments) and tool-usage counts.

use std::collections::BTreeMap;

use crate::engine::Span;
use crate::engine::State;
use crate::engine::context::Context;
use crate::engine::split::{self, Split};
use crate::model::Kind;
use crate::policy::{Budget, Policy};

pub fn project<'a>(
    ctx: Context<'a>,
    budget: &Budget,
    policy: &Policy,
    state: &mut State,
    fired: &mut Vec<&'static str>,
) -> Context<'a> {
    let split = Split {
        tail_start,
        touch: state_first,
    };
    split::project(ctx, budget, policy, state, fired, &split)
}

fn tail_start(ctx: &Context, policy: &Policy) -> usize {
    let first = ctx.first_dialogue();
    let n = ctx.events.len();
    let keep = policy.executive.keep_recent.max(1) as usize;
    split::snap_back(ctx, n.saturating_sub(keep).max(first))
}

/// The summary opens with the span's state, made once per split: it
/// depends on the span alone.
fn state_first(ctx: &mut Context, span: Span, _: &Budget, _: &Policy, state: &mut State) {
    let made = match state.made.take() {
        Some((at, text)) if at == span => text,
        _ => executive_state(ctx, span),
    };
    ctx.made_text = Some(made.clone());
    state.made = Some((span, made));
}

/// Plan progress, working files and tool-usage counts of the span, from the
/// log itself: what a continuing coding agent needs (the executive summary).
fn executive_state(ctx: &Context, span: Span) -> String {
    let mut plan: Option<String> = None;
    let mut files: Vec<String> = Vec::new();
    let mut usage: BTreeMap<&str, u64> = BTreeMap::new();
    for event in ctx
        .events
        .iter()
        .filter(|e| e.kind == Kind::ToolCall && (span.from_seq..=span.to_seq).contains(&e.seq))
    {
        let tool = event.tool_name.as_deref().unwrap_or("tool");
        *usage.entry(tool).or_default() += 1;
        let Ok(args) = serde_json::from_str::<serde_json::Value>(&event.content) else {
            continue;
        };
        let lower = tool.to_lowercase();
        if lower.contains("plan") || lower.contains("todo") {
            plan = plan_progress(&args).or(plan);
        }
        for key in ["path", "file_path", "filename", "file", "notebook_path"] {
            if let Some(path) = args.get(key).and_then(|v| v.as_str()) {
                files.retain(|f| f != path);
                files.push(path.to_string());
            }
        }
    }
    let mut out = format!(
        "[state of seqs {}..{}, from the log]\nplan: {}",
        span.from_seq,
        span.to_seq,
        plan.unwrap_or_else(|| "none recorded".into())
    );
    files.reverse();
    files.truncate(20);
    out.push_str(&format!(
        "\nworking files: {}",
        if files.is_empty() {
            "none".to_string()
        } else {
            files.join(", ")
        }
    ));
    let mut counts: Vec<(&str, u64)> = usage.into_iter().collect();
    counts.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    let counts: Vec<String> = counts.iter().map(|(t, n)| format!("{t} {n}")).collect();
    out.push_str(&format!(
        "\ntool usage: {}",
        if counts.is_empty() {
            "none".to_string()
        } else {
            counts.join(", ")
        }
    ));
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
