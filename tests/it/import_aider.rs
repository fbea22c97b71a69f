//! Aider's histories imported, and replayed under the preset `aider`.
//!
//! The fixtures (tests/fixtures/aider/) are written in the shapes Aider
//! writes: `summarized/` a project with a model of 8,192 input tokens
//! whose `.aider.llm.history` (Aider 0.72's) holds two summaries of its
//! chat (one of all of it, answered "Ok.", one of its head), a reminder
//! after the newest message, a file added mid-turn and a `/clear`, beside
//! its `.aider.chat.history.md` (with `/tokens` saying the window);
//! `chat-only/` a chat history alone in Aider 0.50's shape (`Models:`
//! with the weak model, tokens with commas and `cached`).

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use ctxlens::log::Store;
use ctxlens::model::{Kind, Log};
use serde_json::Value;
use tempfile::TempDir;

use crate::common::{compaction_pairs, json_run};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/aider")
        .join(name)
}

/// The model of the fixture `summarized/` takes 8,192 input tokens (its
/// chat history's `/tokens` says so): Aider's budget for its done messages
/// is then 1,024. The LLM history alone does not say it.
const SMALL_MODEL: [&str; 2] = ["--set", "aider.max_input_tokens=8192"];

fn ctxlens(cache: &Path) -> Command {
    let mut command = Command::cargo_bin("ctxlens").unwrap();
    command.env("XDG_CACHE_HOME", cache);
    command
}

/// Imports `src` as Aider's into a new log; its load and the command's output.
fn import(src: &Path) -> (Log, String, TempDir) {
    let dir = TempDir::new().unwrap();
    let out = dir.path().join("aider.db");
    let run = ctxlens(dir.path())
        .args(["import", "aider"])
        .arg(src)
        .arg("-o")
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let log = Store::open(&out).unwrap().load().unwrap();
    let said =
        String::from_utf8_lossy(&run.stdout).into_owned() + &String::from_utf8_lossy(&run.stderr);
    (log, said, dir)
}

fn meta(text: Option<&str>) -> Value {
    text.and_then(|m| serde_json::from_str(m).ok())
        .unwrap_or(Value::Null)
}

#[test]
fn a_project_imports_a_call_per_request_and_each_summary_where_aider_made_it() {
    let (log, said, _dir) = import(&fixture("summarized"));
    assert!(said.contains("2 sessions"), "{said}");
    // The /clear starts a chat of its own.
    let [chat, cleared] = &log.sessions[..] else {
        panic!("two sessions: {said}")
    };
    assert_eq!(chat.calls.len(), 9);
    assert_eq!(cleared.calls.len(), 1);
    assert_eq!(
        chat.session.title.as_deref(),
        Some("how should tally treat apostrophes and hyphens?")
    );
    // Two summaries: the first of all four messages, answered "Ok.", the
    // second of its head; each in force from the request that sent it.
    assert_eq!(chat.summaries.len(), 2);
    for s in &chat.summaries {
        assert!(
            s.content
                .starts_with("I spoke to you previously about a number of things.\n")
        );
        assert_eq!(s.created_by.as_deref(), Some("ollama_chat/llama3"));
    }
    let versions: Vec<Option<i64>> = (chat.calls.iter())
        .map(|c| {
            c.summary_id
                .and_then(|id| chat.summary(id))
                .map(|s| s.version)
        })
        .collect();
    assert_eq!(
        versions,
        [
            None,
            None,
            None,
            Some(1),
            Some(1),
            Some(1),
            Some(2),
            Some(2),
            Some(2)
        ]
    );
    // Each marked where Aider made it, with its text, never sent.
    let markers: Vec<_> = chat
        .events
        .iter()
        .filter(|e| e.kind == Kind::Compaction)
        .collect();
    assert_eq!(markers.len(), 2);
    assert_eq!(markers[0].content.get(), chat.summaries[0].content.as_str());
    let ack = (chat.events.iter())
        .find(|e| meta(e.meta.as_deref())["ack"] == 1)
        .expect("Aider's Ok. after the first summary");
    assert_eq!((ack.kind, &*ack.content.get()), (Kind::Assistant, "Ok."));
    // Each call's record is its request exactly: system prompt, repo map,
    // chat, files, the newest message with Aider's reminder after it.
    let first: Value = serde_json::from_str(chat.calls[0].rendered.as_deref().unwrap()).unwrap();
    let roles: Vec<&str> = (first.as_array().unwrap().iter())
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(
        roles,
        ["system", "user", "assistant", "user", "assistant", "user"]
    );
    let newest = first[5]["content"].as_str().unwrap();
    assert!(newest.starts_with("how should tally treat apostrophes and hyphens?\n\nTo suggest"));
    // The message is what the user said; the reminder Aider appended while
    // it was the newest is kept beside it, and sent with it then only.
    let asked = (chat.events.iter())
        .find(|e| e.kind == Kind::User && e.content.get().starts_with("how should"))
        .unwrap();
    assert_eq!(
        &*asked.content.get(),
        "how should tally treat apostrophes and hyphens?"
    );
    let suffix = meta(asked.meta.as_deref())["suffix"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(suffix.starts_with("\n\nTo suggest changes to a file you MUST"));
    let evicted = |c: usize| -> Vec<(i64, String)> {
        let list: Value = serde_json::from_str(&chat.calls[c].evictions).unwrap();
        (list.as_array().unwrap().iter())
            .map(|e| {
                (
                    e["seq"].as_i64().unwrap(),
                    e["action"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    };
    assert!(!evicted(1).iter().any(|e| e.0 == asked.seq));
    assert!(evicted(3).contains(&(asked.seq, "summarized".into())));
    // Aider's parts are its own, not the user's words.
    let repo = chat
        .events
        .iter()
        .find(|e| meta(e.meta.as_deref())["aider"] == "repo")
        .unwrap();
    assert_eq!(meta(repo.meta.as_deref())["synthetic"], true);
    // The usage Aider printed after each answer, and the models it announced.
    let sent: Vec<Option<i64>> = chat.calls.iter().map(|c| c.usage.input_tokens).collect();
    assert_eq!(
        sent,
        [320, 702, 1200, 489, 903, 1300, 915, 1300, 1400].map(Some)
    );
    assert_eq!(chat.calls[0].usage.output_tokens, Some(438));
    assert_eq!(chat.calls[0].model.as_deref(), Some("ollama_chat/llama3"));
    let policy = meta(chat.calls[0].policy.as_deref());
    assert_eq!(policy["preset"], "aider");
    assert_eq!(policy["aider"]["weak_model"], "ollama_chat/llama3");
    assert_eq!(policy["aider"]["max_input_tokens"], 8192);
}

#[test]
fn replay_under_aider_matches_every_request_and_each_summary_at_its_call() {
    // The project: its chat history says the model's input limit, which
    // each call records.
    let src = fixture("summarized");
    let replayed = json_run("replay", &src, &[]);
    assert_eq!(replayed["diverging"], 0, "{:#}", replayed["calls"]);
    assert_eq!(replayed["matching"], 10);
    let both = [(Some(4), Some(4), Some(0)), (Some(7), Some(7), Some(0))];
    assert_eq!(compaction_pairs(&replayed), both);
    assert!((replayed["compactions"].as_array().unwrap().iter()).all(|c| c["kind"] == "auto"));
    // The LLM history alone does not: Aider's budget is then that of a
    // model of 200,000 input tokens, 8,192, which the chat never reached.
    let alone = src.join(".aider.llm.history");
    let replayed = json_run("replay", &alone, &[]);
    assert_eq!(
        compaction_pairs(&replayed),
        [(Some(4), None, None), (Some(7), None, None)]
    );
    let replayed = json_run("replay", &alone, &SMALL_MODEL);
    assert_eq!(compaction_pairs(&replayed), both);
    assert_eq!(replayed["matching"], 10);
}

#[test]
fn what_the_summary_covers_is_summarized_and_the_parts_of_other_requests_dropped() {
    let cache = TempDir::new().unwrap();
    let src = fixture("summarized");
    let run = ctxlens(cache.path())
        .args(["project", "--call", "7", "--json"])
        .arg(&src)
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let p: Value = serde_json::from_slice(&run.stdout).unwrap();
    assert_eq!(p["summary_version"], 2);
    let kinds: Vec<&str> = (p["context"].as_array().unwrap().iter())
        .map(|i| i["kind"].as_str().unwrap())
        .collect();
    // System prompt, repo map and its answer, the summary, the newest
    // exchange kept, the files and their answer, the new message.
    assert_eq!(
        kinds,
        [
            "system",
            "user",
            "assistant",
            "summary",
            "user",
            "assistant",
            "user",
            "assistant",
            "user"
        ]
    );
    let reasons: Vec<&str> = (p["events"].as_array().unwrap().iter())
        .filter_map(|e| e["reason"].as_str())
        .collect();
    assert!(
        reasons
            .iter()
            .any(|r| r.starts_with("covered by summary v2"))
    );
    assert!(
        reasons
            .iter()
            .any(|r| r.starts_with("Aider sends this part anew"))
    );
}

#[test]
fn a_file_of_either_history_opens_directly() {
    let src = fixture("summarized");
    // The LLM history alone: the same calls, without the usage.
    let replayed = json_run("replay", &src.join(".aider.llm.history"), &SMALL_MODEL);
    assert_eq!(replayed["matching"], 10);
    assert_eq!(replayed["calls"][0]["reported_input_tokens"], Value::Null);
    // The chat history alone: a call per answer, with no record.
    let replayed = json_run("replay", &src.join(".aider.chat.history.md"), &[]);
    assert_eq!(replayed["calls"].as_array().unwrap().len(), 10);
    assert_eq!(replayed["calls"][0]["reported_input_tokens"], 320);
}

#[test]
fn an_older_chat_history_alone_gives_the_chat_its_usage_and_its_models() {
    let (log, said, _dir) = import(&fixture("chat-only"));
    // Two runs, the first cleared once: three chats.
    assert_eq!(log.sessions.len(), 3, "{said}");
    let first = &log.sessions[0];
    let texts: Vec<String> = first
        .events
        .iter()
        .map(|e| e.content.get().into_owned())
        .collect();
    assert_eq!(texts[0], "what does parse_args in cli.py return?");
    assert_eq!(
        texts[2],
        "make limit default to 20\nand say so in the help text"
    );
    assert!(texts[3].starts_with("cli.py\n```python"));
    // Aider's own lines (the commit after the edit) are not the chat.
    assert!(!texts.iter().any(|t| t.contains("Commit 5d1c2e3")));
    let calls = &first.calls;
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0].usage.input_tokens, Some(1812));
    assert_eq!(calls[1].usage.input_tokens, Some(2950));
    assert_eq!(calls[1].usage.cache_read_tokens, Some(1024));
    assert_eq!(calls[1].model.as_deref(), Some("gpt-4o"));
    assert_eq!(
        meta(calls[1].policy.as_deref())["aider"]["weak_model"],
        "gpt-4o-mini"
    );
    assert!(calls.iter().all(|c| c.rendered.is_none()));
    // The second run's /tokens is a command: counted, not a message.
    let third = &log.sessions[2];
    assert_eq!(
        meta(third.session.meta.as_deref())["unmapped"]["command"],
        1
    );
    assert_eq!(third.events.len(), 2);
}

#[test]
fn a_folder_of_projects_imports_each() {
    let dir = TempDir::new().unwrap();
    for (name, from) in [("one", "summarized"), ("two/deeper", "chat-only")] {
        let to = dir.path().join(name);
        std::fs::create_dir_all(&to).unwrap();
        for file in [".aider.llm.history", ".aider.chat.history.md"] {
            if fixture(from).join(file).exists() {
                std::fs::copy(fixture(from).join(file), to.join(file)).unwrap();
            }
        }
    }
    let (log, said, _out) = import(dir.path());
    assert_eq!(log.sessions.len(), 5, "{said}");
    let ids: Vec<&str> = log.sessions.iter().map(|s| s.id()).collect();
    assert_eq!(ids, ["one-1", "one-2", "deeper-3", "deeper-4", "deeper-5"]);
}

#[test]
fn bad_input_is_named_and_the_rest_imported() {
    let dir = TempDir::new().unwrap();
    let cache = dir.path();
    // Not Aider's at all.
    let foreign = dir.path().join("notes.txt");
    std::fs::write(&foreign, "just some notes\n").unwrap();
    let run = ctxlens(cache)
        .args(["import", "aider"])
        .arg(&foreign)
        .arg("-o")
        .arg(dir.path().join("a.db"))
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(2));
    let err = String::from_utf8_lossy(&run.stderr);
    assert!(
        err.contains("notes.txt") && err.contains("neither Aider's LLM history"),
        "{err}"
    );
    assert!(err.lines().count() <= 2, "{err}");
    // A folder without Aider's files.
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let run = ctxlens(cache)
        .args(["import", "aider"])
        .arg(&empty)
        .arg("-o")
        .arg(dir.path().join("b.db"))
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&run.stderr).contains("without Aider's histories"));
    // A history cut short, with a line that is no history's in it: the
    // line is named, the requests imported, the last one without its answer.
    let text = std::fs::read_to_string(fixture("summarized").join(".aider.llm.history")).unwrap();
    let cut = &text[..text.find("LLM RESPONSE 2025-03-02T10:06:21").unwrap() + 100];
    let cut = cut.replacen("USER how should tally", "how should tally", 1);
    let torn = dir.path().join(".aider.llm.history");
    std::fs::write(&torn, cut).unwrap();
    let (log, said, _out) = import(&torn);
    let line = text
        .lines()
        .position(|l| l.starts_with("USER how should tally"))
        .unwrap()
        + 1;
    assert!(
        said.contains(&format!(
            ".aider.llm.history:{line}: not a line of Aider's LLM history"
        )),
        "{said}"
    );
    assert_eq!(log.sessions.iter().map(|s| s.calls.len()).sum::<usize>(), 3);
}

/// The real history of an Aider project (an architect and its editor, ask
/// and code chats), where it is beside the repository.
#[test]
fn a_real_llm_history_imports_and_replays_to_its_record() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/data/aider/friendly_names/.aider.llm.history");
    if !src.exists() {
        eprintln!("skipped: {} is not here", src.display());
        return;
    }
    let (log, said, _dir) = import(&src);
    assert_eq!(log.sessions.len(), 16, "{said}");
    assert_eq!(
        log.sessions.iter().map(|s| s.calls.len()).sum::<usize>(),
        33
    );
    // Each editor Aider handed an architect's answer to is a session of the
    // architect's.
    let editors = (log.sessions.iter())
        .filter(|s| meta(s.session.meta.as_deref())["coder"] == "editor")
        .count();
    assert_eq!(editors, 10);
    let replayed = json_run("replay", &src, &[]);
    assert_eq!(replayed["matching"], 33, "{:#}", replayed["calls"]);
    // Aider never summarized: its architect appended to the done messages
    // after every check, so each summary was dropped; replay says so.
    assert_eq!(compaction_pairs(&replayed), []);
    let discarded = (replayed["calls"].as_array().unwrap().iter())
        .filter(|c| {
            c["triggers"]
                .as_array()
                .unwrap()
                .contains(&"summary_discarded".into())
        })
        .count();
    assert!(discarded > 0);
}

/// A request in Aider's LLM history: its time, messages and answer.
fn request(ts: &str, messages: &[(&str, &str)], answer: &str) -> String {
    let mut out = format!("TO LLM {ts}\n");
    for (role, text) in messages {
        out.push_str("-------\n");
        for line in text.split('\n') {
            out.push_str(&format!("{} {line}\n", role.to_uppercase()));
        }
    }
    out.push_str(&format!("LLM RESPONSE {ts}\n"));
    for line in answer.split('\n') {
        out.push_str(&format!("ASSISTANT {line}\n"));
    }
    out
}

#[test]
fn switching_to_a_coder_of_another_edit_format_summarizes_all_and_is_followed() {
    // `/chat-mode architect` after an ask: Aider summarizes the whole chat
    // for the new coder, whatever its size.
    let repo = [
        (
            "user",
            "Here are summaries of some files present in my git repository.\ntally/count.py",
        ),
        (
            "assistant",
            "Ok, I won't try and edit those files without asking first.",
        ),
    ];
    let no_files = [
        (
            "user",
            "I am not sharing the full contents of any files with you yet.",
        ),
        ("assistant", "Ok."),
    ];
    let ask = [("system", "Act as an expert code analyst.")];
    let architect = [("system", "Act as an expert architect engineer.")];
    let q1 = ("user", "what does count_words return?");
    let summary = "I spoke to you previously about a number of things.\nI asked you what count_words returns.";
    let first: Vec<_> = [&ask[..], &repo, &no_files, &[q1]].concat();
    let second: Vec<_> = [
        &architect[..],
        &repo,
        &[("user", summary)],
        &no_files,
        &[("user", "now make it skip digits")],
    ]
    .concat();
    let text = request("2025-03-03T09:00:00", &first, "A Counter of words.")
        + &request(
            "2025-03-03T09:01:00",
            &second,
            "Change the pattern to letters only.",
        );
    let dir = TempDir::new().unwrap();
    let src = dir.path().join(".aider.llm.history");
    std::fs::write(&src, text).unwrap();
    let (log, said, _out) = import(&src);
    assert_eq!(log.sessions.len(), 1, "{said}");
    let s = &log.sessions[0];
    assert_eq!(s.summaries.len(), 1);
    assert_eq!(meta(s.summaries[0].meta.as_deref())["switch"], true);
    let replayed = json_run("replay", &src, &[]);
    assert_eq!(replayed["matching"], 2, "{:#}", replayed["calls"]);
    assert_eq!(compaction_pairs(&replayed), [(Some(2), Some(2), Some(0))]);
    // The user's command, not Aider's budget: a manual compaction.
    assert_eq!(replayed["compactions"][0]["kind"], "manual");
    assert_eq!(replayed["calls"][1]["triggers"][0], "coder_switch");
}
