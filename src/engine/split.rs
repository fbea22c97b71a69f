//! The presets that collapse the oldest span into one summary at a split
//! point: three split strategies (preserve-user, token-fraction,
//! recent-turns) and the adaptive and executive summaries.
//!
//! The split moves only when the policy's trigger fires, and only forward;
//! between firings every call keeps the same split, so the tail stays
//! byte-stable (docs/contract.md §6.6).

use std::collections::BTreeMap;

use super::context::{Context, Cut, Why};
use super::reducers::{applicable, apply_summary, with_placeholder};
use super::{ReducerName, Span, State, Status, trigger};
use crate::model::Kind;
use crate::policy::{Budget, Policy, Preset};

pub fn project<'a>(
    ctx: Context<'a>,
    budget: &Budget,
    policy: &Policy,
    state: &mut State,
    fired: &mut Vec<&'static str>,
) -> Context<'a> {
    let mut ctx = match state.split {
        Some(span) => apply(ctx, span, budget, policy, state),
        None => ctx,
    };
    ctx.before_summary = ctx.event_tokens();
    *fired = trigger::fired(&ctx, budget, policy, state);
    if fired.is_empty() {
        return ctx;
    }
    let Some(span) = wanted(&ctx, policy) else {
        return ctx;
    };
    if state.split.is_some_and(|old| old.to_seq >= span.to_seq) {
        return ctx;
    }
    state.split = Some(span);
    let before = ctx.before_summary;
    let mut ctx = apply(ctx.fresh(), span, budget, policy, state);
    ctx.before_summary = before;
    ctx
}

/// The first event of the call's own turn (the dialogue's end if none).
pub(super) fn own_turn_start(ctx: &Context) -> usize {
    turn_start(ctx, ctx.call.turn)
}

/// Where the preset puts the split, measured on the context as it is sent
/// now (an earlier split applied): the span from the first dialogue event to
/// just before the new tail. `None` when the tail would be everything.
fn wanted(ctx: &Context, policy: &Policy) -> Option<Span> {
    let first = ctx.first_dialogue();
    let n = ctx.events.len();
    if first >= n {
        return None;
    }
    let own_turn = own_turn_start(ctx);
    let tail_start = match policy.preset {
        Preset::PreserveUser => own_turn,
        Preset::RecentTurns => {
            let keep = policy.recent_turns.keep_turns.max(1) as i64;
            turn_start(ctx, ctx.call.turn - keep + 1)
        }
        Preset::TokenFraction => {
            let total: u64 = ctx.slots[first..].iter().map(|s| s.tokens).sum();
            let goal = (total as f64 * policy.token_fraction.keep_fraction).ceil() as u64;
            let mut kept = 0;
            let mut point = n - 1;
            for ix in (first..n).rev() {
                kept += ctx.slots[ix].tokens;
                point = ix;
                if kept >= goal {
                    break;
                }
            }
            // Snapped forward to the next user message, so the tail starts a turn.
            (point..n)
                .find(|&ix| ctx.events[ix].kind == Kind::User)
                .unwrap_or(own_turn)
        }
        Preset::Adaptive => {
            let a = &policy.adaptive;
            let mut tokens = 0;
            let mut fit = 0;
            for slot in ctx.slots[first..]
                .iter()
                .rev()
                .filter(|s| s.status.is_sent())
            {
                tokens += slot.tokens;
                if tokens > a.target_tokens {
                    break;
                }
                fit += 1;
            }
            let keep = (fit as u64).clamp(a.min_keep.max(1), a.max_keep.max(1)) as usize;
            snap_back(ctx, n.saturating_sub(keep).max(first))
        }
        Preset::Executive => {
            let keep = policy.executive.keep_recent.max(1) as usize;
            snap_back(ctx, n.saturating_sub(keep).max(first))
        }
        _ => return None,
    };
    let tail_start = tail_start.min(n - 1);
    (tail_start > first).then(|| Span {
        from_seq: ctx.events[first].seq,
        to_seq: ctx.events[tail_start - 1].seq,
    })
}

/// The first event of `turn` or a later one (the dialogue's end if none).
fn turn_start(ctx: &Context, turn: i64) -> usize {
    let first = ctx.first_dialogue();
    (first..ctx.events.len())
        .find(|&ix| ctx.events[ix].turn >= turn)
        .unwrap_or(ctx.events.len())
}

/// A cut at a tool call or result moves back to the start of its step, so the
/// assistant message that owns it rides in the kept window.
fn snap_back(ctx: &Context, mut cut: usize) -> usize {
    let first = ctx.first_dialogue();
    if cut >= ctx.events.len() || !matches!(ctx.events[cut].kind, Kind::ToolCall | Kind::ToolResult)
    {
        return cut;
    }
    let step = ctx.session.step_of(cut);
    while step.is_some() && cut > first && ctx.session.step_of(cut - 1) == step {
        cut -= 1;
    }
    cut
}

/// Collapses `span` into its recorded summary, or a placeholder when the log
/// has none for exactly this span; then the preset's own touches.
fn apply<'a>(
    ctx: Context<'a>,
    span: Span,
    budget: &Budget,
    policy: &Policy,
    state: &mut State,
) -> Context<'a> {
    let mut ctx = collapse(ctx, span, policy.summary.use_recorded);
    match policy.preset {
        Preset::PreserveUser => keep_users(&mut ctx, span, policy.preserve_user.max_user_tokens),
        Preset::RecentTurns => cap_turns(&mut ctx, budget, policy),
        Preset::Executive => {
            // Made once per split: it depends on the span alone.
            let made = match state.made.take() {
                Some((at, text)) if at == span => text,
                _ => executive_state(&ctx, span),
            };
            ctx.made_text = Some(made.clone());
            state.made = Some((span, made));
        }
        _ => {}
    }
    ctx
}

/// Collapses `span` into the newest applicable recorded summary that ends
/// where it ends, or, when the log has none, a placeholder and `needs_summary`.
pub(super) fn collapse(ctx: Context, span: Span, use_recorded: bool) -> Context {
    let first_seq = ctx.events[ctx.first_dialogue()].seq;
    let recorded = ctx
        .session
        .summaries
        .iter()
        .enumerate()
        .filter(|(_, s)| {
            use_recorded
                && applicable(s, ctx.call)
                && s.from_seq <= first_seq
                && s.to_seq == span.to_seq
        })
        .max_by_key(|(_, s)| (s.version, s.id))
        .map(|(ix, _)| ix);
    match recorded {
        Some(ix) => apply_summary(ctx, ix),
        None => with_placeholder(ctx, span),
    }
}

/// Walking newest-first, the span's user messages stay verbatim up to `cap` tokens.
fn keep_users(ctx: &mut Context, span: Span, cap: u64) {
    let mut used = 0;
    for ix in (ctx.first_dialogue()..ctx.events.len()).rev() {
        let event = &ctx.events[ix];
        if event.seq > span.to_seq || event.kind != Kind::User {
            continue;
        }
        if event.seq < span.from_seq {
            break;
        }
        let tokens = ctx.raw_tokens(ix);
        if used + tokens > cap {
            break;
        }
        used += tokens;
        let why = Why::UserKept {
            span,
            max_user_tokens: cap,
        };
        ctx.set(ix, Status::Pinned, ReducerName::PreserveUser, why, tokens);
    }
}

/// Each kept turn over its cap (turn_fraction of usable, clamped to
/// [turn_min, turn_max]) has its tool results and assistant text truncated,
/// newest kept longest, until the turn fits (about: markers take a few tokens).
fn cap_turns(ctx: &mut Context, budget: &Budget, policy: &Policy) {
    let r = &policy.recent_turns;
    let cap = ((budget.usable as f64 * r.turn_fraction) as u64).clamp(r.turn_min, r.turn_max);
    let first = ctx.first_dialogue();
    let mut start = first;
    while start < ctx.events.len() {
        let turn = ctx.events[start].turn;
        let end = (start..ctx.events.len())
            .find(|&ix| ctx.events[ix].turn != turn)
            .unwrap_or(ctx.events.len());
        let kept = |ctx: &Context, ix: usize| ctx.slots[ix].status == Status::Verbatim;
        let tokens: u64 = (start..end)
            .filter(|&ix| kept(ctx, ix))
            .map(|ix| ctx.slots[ix].tokens)
            .sum();
        if tokens > cap {
            let cuttable =
                |kind: Kind| matches!(kind, Kind::ToolResult | Kind::Assistant | Kind::Reasoning);
            let fixed: u64 = (start..end)
                .filter(|&ix| kept(ctx, ix))
                .filter(|&ix| !cuttable(ctx.events[ix].kind))
                .map(|ix| ctx.slots[ix].tokens)
                .sum();
            let mut left = cap.saturating_sub(fixed);
            for ix in (start..end).rev() {
                if !kept(ctx, ix) || !cuttable(ctx.events[ix].kind) {
                    continue;
                }
                let own = ctx.slots[ix].tokens;
                let allowed = own.min(left);
                left -= allowed;
                if allowed < own {
                    // The marker takes its share of what the event may keep.
                    let chars = u64::from(ctx.counts.chars[ix]);
                    let marker = ctx
                        .counts
                        .text(&format!("\n[… {chars} of {chars} characters cut]"));
                    let keep = (chars * allowed.saturating_sub(marker) / own.max(1)) as u32;
                    ctx.truncate(
                        ix,
                        Cut::Head(keep),
                        ReducerName::TurnCap,
                        Why::TurnCap { turn, cap },
                    );
                }
            }
        }
        start = end;
    }
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
