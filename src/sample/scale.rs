//! The generators of large logs: `write_synthetic` for benchmarks and
//! `write_scale` for a long run over several sessions.

use std::path::Path;

use serde_json::json;

use super::SYSTEM_PROMPT;
use super::builder::timestamp;
use super::tool_output::{IDENTS, Lcg, filler, tool_edit, tool_grep, tool_read, tool_tests};
use crate::log::{LogError, Writer};
use crate::model::{Event, Kind, ModelCall, Session, Summary};

/// Writes a large synthetic log for benchmarks: one session of `events` events
/// in turns of a user message, steps of reasoning, a read_file call and a
/// result of about `result_bytes`, and an answer; `calls` model calls spread
/// evenly over the steps; and a summary of all but the last few turns every
/// 500 turns, as a host that compacts would write them.
pub fn write_synthetic(
    path: &Path,
    events: usize,
    result_bytes: usize,
    calls: usize,
) -> Result<(), LogError> {
    let mut writer = Writer::create(path)?;
    let id = "synthetic";
    writer.add_session(&Session {
        id: id.to_string(),
        created_at: timestamp(0),
        title: Some(format!("{events} synthetic events")),
        meta: Some(json!({"model": "bench", "context_window": 200000}).to_string()),
    })?;
    let mut rng = Lcg(7);
    let mut turn = 0;
    let mut seq = 0;
    let mut steps: Vec<(i64, i64)> = Vec::new();
    let mut turn_ends: Vec<i64> = Vec::new();
    let mut summaries = 0;
    let mut event = |turn: i64, kind: Kind, call_id: Option<String>, content: String| {
        seq += 1;
        Event {
            seq,
            session_id: id.into(),
            turn,
            ts: timestamp(seq).into(),
            kind,
            tool_name: call_id.as_ref().map(|_| "read_file".into()),
            call_id: call_id.map(Into::into),
            content: content.into(),
            meta: None,
        }
    };
    writer.append(&[event(0, Kind::System, None, SYSTEM_PROMPT.to_string())])?;
    while (writer.last_seq() as usize) < events {
        if writer.last_seq() > 1 {
            turn += 1;
        }
        let mut batch = vec![event(turn, Kind::User, None, filler(rng.next(), 2))];
        for _ in 0..(2 + rng.next() % 3) {
            steps.push((turn, batch.last().map_or(0, |e| e.seq)));
            batch.push(event(turn, Kind::Reasoning, None, filler(rng.next(), 2)));
            let call_id = format!("c{}", batch.last().map_or(0, |e| e.seq));
            let arguments = json!({"path": "src/lib.rs"}).to_string();
            batch.push(event(
                turn,
                Kind::ToolCall,
                Some(call_id.clone()),
                arguments,
            ));
            let body = tool_read("src/lib.rs", rng.next(), result_bytes / 40).result;
            batch.push(event(turn, Kind::ToolResult, Some(call_id), body));
        }
        steps.push((turn, batch.last().map_or(0, |e| e.seq)));
        batch.push(event(turn, Kind::Assistant, None, filler(rng.next(), 3)));
        writer.append(&batch)?;
        turn_ends.push(writer.last_seq());
        if turn > 0 && turn % 500 == 0 {
            summaries += 1;
            let to_seq = turn_ends[turn_ends.len() - 4];
            writer.add_summary(&Summary {
                session_id: id.to_string(),
                version: summaries,
                from_seq: 2,
                to_seq,
                content: format!(
                    "Summary v{summaries} of turns 0..{}. {}",
                    turn - 3,
                    filler(rng.next(), 6)
                ),
                created_at: timestamp(writer.last_seq()),
                ..Summary::default()
            })?;
        }
    }
    let stride = steps.len().div_ceil(calls.max(1)).max(1);
    for &(turn, last_seq) in steps.iter().step_by(stride) {
        writer.record_call(&ModelCall {
            session_id: id.to_string(),
            turn,
            last_seq,
            ts: timestamp(last_seq),
            ..ModelCall::default()
        })?;
    }
    let end = timestamp(writer.last_seq() + 1);
    writer.finish_at(&end)
}

/// Writes a log at scale for benchmarks and for trying ctxlens on a long
/// run: `events` events over `sessions` sessions (several share the file, as
/// a host's do), turns of a user message, two to five steps of reasoning and
/// a tool (read_file, grep, run_tests or edit_file, with results of their
/// usual sizes: about 740 bytes of text per event on average), and an answer;
/// a model call at the first step past each 50th event; a summary of all but
/// the last few turns every 200 turns. The same arguments write the same bytes.
pub fn write_scale(path: &Path, events: usize, sessions: usize) -> Result<(), LogError> {
    let mut writer = Writer::create(path)?;
    let sessions = sessions.max(1);
    let mut rng = Lcg(0x5ca1e);
    for s in 0..sessions {
        let id = format!("scale-{s}");
        let share = (events / sessions + usize::from(s < events % sessions)) as i64;
        let start = writer.last_seq();
        writer.add_session(&Session {
            id: id.clone(),
            created_at: timestamp(start),
            title: Some(format!("session {} of {sessions}: {share} events", s + 1)),
            meta: Some(json!({"model": "gpt-5", "context_window": 200000}).to_string()),
        })?;
        let event =
            |seq: i64, turn: i64, kind: Kind, tool: Option<(&str, &str)>, content: String| Event {
                seq,
                session_id: id.as_str().into(),
                turn,
                ts: timestamp(seq).into(),
                kind,
                tool_name: tool.map(|(name, _)| name.into()),
                call_id: tool.map(|(_, call_id)| call_id.into()),
                content: content.into(),
                meta: None,
            };
        let mut batch = vec![event(
            start + 1,
            0,
            Kind::System,
            None,
            SYSTEM_PROMPT.into(),
        )];
        let mut turn_ends: Vec<i64> = Vec::new();
        let (mut turn, mut summaries, mut next_call) = (0, 0, start + 50);
        while writer.last_seq() + (batch.len() as i64) < start + share {
            if !turn_ends.is_empty() {
                turn += 1;
            }
            let mut seq = writer.last_seq() + batch.len() as i64;
            let mut next = || {
                seq += 1;
                seq
            };
            batch.push(event(
                next(),
                turn,
                Kind::User,
                None,
                filler(rng.next(), 1 + rng.below(3)),
            ));
            let mut step_ends = Vec::new();
            for _ in 0..(2 + rng.next() % 4) {
                batch.push(event(
                    next(),
                    turn,
                    Kind::Reasoning,
                    None,
                    filler(rng.next(), 2),
                ));
                let file = format!("src/{}.rs", rng.pick(&IDENTS));
                let tool = match rng.next() % 10 {
                    0..=3 => tool_read(&file, rng.next(), 26 + rng.below(80)),
                    4..=6 => tool_grep(rng.pick(&IDENTS), rng.next()),
                    7 | 8 => tool_tests(rng.next(), rng.next().is_multiple_of(3)),
                    _ => tool_edit(&file, rng.next()),
                };
                let call_seq = next();
                let call_id = format!("call-{call_seq}");
                let tool_ref = Some((tool.name, call_id.as_str()));
                batch.push(event(
                    call_seq,
                    turn,
                    Kind::ToolCall,
                    tool_ref,
                    tool.arguments,
                ));
                let result_seq = next();
                batch.push(event(
                    result_seq,
                    turn,
                    Kind::ToolResult,
                    tool_ref,
                    tool.result,
                ));
                step_ends.push(result_seq);
            }
            let last = next();
            batch.push(event(
                last,
                turn,
                Kind::Assistant,
                None,
                filler(rng.next(), 2 + rng.below(3)),
            ));
            writer.append(&batch)?;
            batch.clear();
            turn_ends.push(last);
            for step_end in step_ends {
                if step_end < next_call {
                    continue;
                }
                next_call = step_end + 50;
                writer.record_call(&ModelCall {
                    session_id: id.clone(),
                    turn,
                    last_seq: step_end,
                    ts: timestamp(step_end),
                    model: Some("gpt-5".into()),
                    ..ModelCall::default()
                })?;
            }
            if turn % 200 == 0 && turn_ends.len() > 4 {
                summaries += 1;
                writer.add_summary(&Summary {
                    session_id: id.clone(),
                    version: summaries,
                    from_seq: start + 2,
                    to_seq: turn_ends[turn_ends.len() - 4],
                    content: format!(
                        "Summary v{summaries} of turns 0..{}. {}",
                        turn - 3,
                        filler(rng.next(), 8)
                    ),
                    created_at: timestamp(last),
                    ..Summary::default()
                })?;
            }
        }
    }
    let end = timestamp(writer.last_seq() + 1);
    writer.finish_at(&end)
}
