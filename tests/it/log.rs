//! The writer and the store: round trips, refusals, incremental loads.

use ctxlens::log::{LogError, Store, Writer};
use ctxlens::model::{
    Event, HELD_BYTES, Kind, Measure, ModelCall, Session, SessionLog, Summary, Text, Usage,
    partition_near,
};
use tempfile::TempDir;

fn session(id: &str) -> Session {
    Session {
        id: id.to_string(),
        created_at: "2026-01-01T00:00:00Z".to_string(),
        title: Some(format!("title of {id}")),
        meta: Some(r#"{"model":"m","context_window":1000}"#.to_string()),
    }
}

fn event(seq: i64, turn: i64, kind: Kind, tool: Option<(&str, &str)>, content: &str) -> Event {
    Event {
        seq,
        session_id: "s1".to_string().into(),
        turn,
        ts: format!("2026-01-01T00:00:{:02}Z", seq % 60).into(),
        kind,
        tool_name: tool.map(|(name, _)| name.into()),
        call_id: tool.map(|(_, id)| id.into()),
        content: content.into(),
        meta: (kind == Kind::ToolResult).then(|| r#"{"is_error":false}"#.into()),
    }
}

/// One event of every kind, in a valid order.
fn every_kind() -> Vec<Event> {
    vec![
        event(1, 0, Kind::System, None, "system prompt"),
        event(2, 0, Kind::User, None, "hello"),
        event(3, 0, Kind::Reasoning, None, "thinking"),
        event(4, 0, Kind::Assistant, None, "let me look"),
        event(
            5,
            0,
            Kind::ToolCall,
            Some(("read_file", "c1")),
            r#"{"path":"a"}"#,
        ),
        event(
            6,
            0,
            Kind::ToolResult,
            Some(("read_file", "c1")),
            "file body",
        ),
        event(7, 0, Kind::Compaction, None, ""),
        event(8, 1, Kind::User, None, "next"),
    ]
}

fn new_log(dir: &TempDir) -> (std::path::PathBuf, Writer) {
    let path = dir.path().join("log.db");
    let mut writer = Writer::create(&path).unwrap();
    writer.add_session(&session("s1")).unwrap();
    (path, writer)
}

#[test]
fn every_row_round_trips_through_writer_and_store() {
    let dir = TempDir::new().unwrap();
    let (path, mut writer) = new_log(&dir);
    let events = every_kind();
    writer.append(&events).unwrap();
    let summary = Summary {
        id: 0,
        session_id: "s1".into(),
        version: 1,
        from_seq: 2,
        to_seq: 6,
        content: "the user said hello; a file was read".into(),
        created_at: "2026-01-01T00:01:00Z".into(),
        created_by: Some("test".into()),
        meta: Some("{}".into()),
    };
    let summary_id = writer.add_summary(&summary).unwrap();
    let call = ModelCall {
        session_id: "s1".into(),
        turn: 1,
        last_seq: 8,
        ts: "2026-01-01T00:02:00Z".into(),
        model: Some("m".into()),
        policy: Some(r#"{"preset":"pipeline"}"#.into()),
        summary_id: Some(summary_id),
        evictions: r#"[{"seq":6,"action":"stubbed","reducer":"tool_results"}]"#.into(),
        injections: r#"[{"hook":"date","content":"today","tokens":2}]"#.into(),
        rendered: Some("[]".into()),
        usage: Usage {
            input_tokens: Some(100),
            cache_read_tokens: Some(50),
            cache_write_tokens: Some(10),
            output_tokens: Some(7),
            reasoning_tokens: Some(3),
            cache_write_1h_tokens: Some(6),
        },
        ..ModelCall::default()
    };
    let call_id = writer.record_call(&call).unwrap();
    drop(writer);

    let log = Store::open(&path).unwrap().load().unwrap();
    assert!(log.notes.is_empty(), "{:?}", log.notes);
    let s = log.pick_session(None).unwrap();
    assert_eq!(s.session, session("s1"));
    assert_eq!(s.events, events);
    assert_eq!(
        s.summaries,
        vec![Summary {
            id: summary_id,
            ..summary
        }]
    );
    assert_eq!(
        s.calls,
        vec![ModelCall {
            id: call_id,
            ..call
        }]
    );
    let evictions = s.calls[0].parsed_evictions().unwrap();
    assert_eq!(
        (evictions[0].seq, evictions[0].action.as_str()),
        (6, "stubbed")
    );
    assert_eq!(s.calls[0].parsed_injections().unwrap()[0].hook, "date");
}

#[test]
fn a_log_whose_usage_table_lacks_the_1h_writes_loads_and_takes_them_when_appended_to() {
    let dir = TempDir::new().unwrap();
    let (path, mut writer) = new_log(&dir);
    writer.append(&every_kind()).unwrap();
    let call = |reasoning, written_1h| ModelCall {
        session_id: "s1".into(),
        turn: 1,
        last_seq: 8,
        ts: "2026-01-01T00:02:00Z".into(),
        usage: Usage {
            input_tokens: Some(100),
            cache_write_tokens: Some(40),
            output_tokens: Some(7),
            reasoning_tokens: reasoning,
            cache_write_1h_tokens: written_1h,
            ..Usage::default()
        },
        ..ModelCall::default()
    };
    let first = writer.record_call(&call(Some(3), None)).unwrap();
    drop(writer);
    // The table as a ctxlens before the 1-hour writes made it.
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch(
        "DROP TABLE ctxlens_usage;
         CREATE TABLE ctxlens_usage (
             call_id          INTEGER PRIMARY KEY REFERENCES model_calls(id),
             reasoning_tokens INTEGER);",
    )
    .unwrap();
    conn.execute(
        "INSERT INTO ctxlens_usage (call_id, reasoning_tokens) VALUES (?1, 3)",
        [first],
    )
    .unwrap();
    drop(conn);
    let log = Store::open(&path).unwrap().load().unwrap();
    assert_eq!(log.sessions[0].calls[0].usage, call(Some(3), None).usage);

    let mut writer = Writer::open(&path).unwrap();
    writer.record_call(&call(None, Some(30))).unwrap();
    drop(writer);
    let log = Store::open(&path).unwrap().load().unwrap();
    let usages: Vec<Usage> = log.sessions[0].calls.iter().map(|c| c.usage).collect();
    assert_eq!(
        usages,
        [call(Some(3), None).usage, call(None, Some(30)).usage]
    );
}

#[test]
fn a_loaded_events_text_is_read_back_from_the_log_and_says_so_when_the_row_changed() {
    let dir = TempDir::new().unwrap();
    let (path, mut writer) = new_log(&dir);
    // Every text but the last two longer than what a stored text weighs.
    let mut events = every_kind();
    for e in events.iter_mut().take(6) {
        e.content = format!("{} {}", e.content, "and more ".repeat(8)).into();
    }
    writer.append(&events).unwrap();
    drop(writer);
    let log = Store::open(&path).unwrap().load().unwrap();
    let s = log.pick_session(None).unwrap();
    for (loaded, written) in s.events.iter().zip(&events) {
        assert_eq!(
            loaded.content.is_held(),
            written.content.len() <= HELD_BYTES,
            "seq {} of {} bytes",
            loaded.seq,
            written.content.len()
        );
        assert_eq!(loaded.content.get(), written.content.get());
        assert_eq!(loaded.content.measure(), written.content.measure());
    }
    let all = Text::get_all(s.events.iter().rev().map(|e| &e.content));
    let want: Vec<String> = events.iter().rev().map(|e| e.content.to_string()).collect();
    assert_eq!(all, want);

    // The log rewritten under a loaded model: the text says so, not another's.
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute("UPDATE events SET content = 'goodbye' WHERE seq = 2", [])
        .unwrap();
    let said = s.events[1].content.get();
    assert!(
        said.contains("row 2") && said.contains("changed after it was loaded"),
        "{said}"
    );
    assert!(said.contains(path.to_str().unwrap()), "{said}");
    assert_eq!(s.events[0].content.get(), events[0].content.get());
}

#[test]
fn texts_wanted_here_and_there_are_read_back_whole_and_in_their_places() {
    let dir = TempDir::new().unwrap();
    let (path, mut writer) = new_log(&dir);
    let long = |seq: i64| {
        format!(
            "text of event {seq}: {}",
            "words ".repeat(seq as usize % 7 + 10)
        )
    };
    let events: Vec<Event> = (1..=300)
        .map(|seq| event(seq, seq / 10, Kind::Assistant, None, &long(seq)))
        .collect();
    writer.append(&events).unwrap();
    drop(writer);
    let log = Store::open(&path).unwrap().load().unwrap();
    let s = log.pick_session(None).unwrap();
    // Few and far apart (looked up), many (one pass), one asked for twice.
    for step in [37, 5, 1] {
        let mut picked: Vec<usize> = (0..300).step_by(step).collect();
        picked.push(picked[1]);
        let read = Text::get_all(picked.iter().map(|&ix| &s.events[ix].content));
        let want: Vec<String> = picked.iter().map(|&ix| long(ix as i64 + 1)).collect();
        assert_eq!(read, want, "every {step}th text");
    }
}

#[test]
fn a_column_of_the_wrong_type_is_named_in_the_load_error() {
    for column in ["session_id", "ts", "kind", "tool_name", "content"] {
        let dir = TempDir::new().unwrap();
        let (path, mut writer) = new_log(&dir);
        writer.append(&every_kind()).unwrap();
        drop(writer);
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.pragma_update(None, "foreign_keys", false).unwrap();
        let sql = format!("UPDATE events SET {column} = x'00ff' WHERE kind = 'tool_result'");
        conn.execute(&sql, []).unwrap();
        drop(conn);
        let error = Store::open(&path).unwrap().load().unwrap_err().to_string();
        assert!(
            error.contains(&format!("name: {column}")) && error.contains("Blob"),
            "{column}: {error}"
        );
    }
}

#[test]
fn the_model_derives_turns_steps_and_pairs() {
    let dir = TempDir::new().unwrap();
    let (path, mut writer) = new_log(&dir);
    let mut events = every_kind();
    events.extend([
        event(9, 1, Kind::ToolCall, Some(("grep", "c2")), "{}"),
        event(10, 1, Kind::ToolCall, Some(("grep", "c3")), "{}"),
        event(11, 1, Kind::ToolResult, Some(("grep", "c2")), "hits"),
        event(12, 1, Kind::ToolResult, Some(("grep", "c3")), "hits"),
        event(13, 1, Kind::Assistant, None, "done"),
    ]);
    writer.append(&events).unwrap();
    drop(writer);
    let log = Store::open(&path).unwrap().load().unwrap();
    let s = &log.sessions[0];
    assert_eq!(s.turn_count(), 2);
    let steps: Vec<Option<u32>> = (0..s.events.len()).map(|ix| s.step_of(ix)).collect();
    // system, user: no step; reasoning..result: step 0; compaction, user: none;
    // two calls and their results: step 1; the answer after results: step 2.
    let expected = [None, None, Some(0), Some(0), Some(0), Some(0), None, None];
    assert_eq!(&steps[..8], expected);
    assert_eq!(&steps[8..], [Some(1), Some(1), Some(1), Some(1), Some(2)]);
    assert_eq!(s.step_count(), 3);
    let call = s.index_of(10).unwrap();
    let result = s.index_of(12).unwrap();
    assert_eq!(s.partner_of(call), Some(result));
    assert_eq!(s.partner_of(result), Some(call));
    assert_eq!(s.partner_of(s.index_of(2).unwrap()), None);
    let seen = s.seen_by(&ModelCall {
        last_seq: 6,
        ..ModelCall::default()
    });
    assert_eq!(seen.last().map(|e| e.seq), Some(6));
}

#[test]
fn a_point_searched_from_anywhere_is_the_bisections() {
    // Every sorted list of up to 40 turns from 0..6, every turn, every start.
    for len in 0..40usize {
        for seed in 0..50usize {
            let mut turns: Vec<i64> = (0..len).map(|i| ((i * 7 + seed * 13) % 6) as i64).collect();
            turns.sort_unstable();
            for turn in -1..8 {
                let pred = |t: &i64| *t < turn;
                for near in 0..=len + 2 {
                    assert_eq!(
                        partition_near(&turns, near, pred),
                        turns.partition_point(pred),
                        "{turns:?} below {turn} from {near}"
                    );
                }
            }
        }
    }
}

#[test]
fn what_a_call_saw_is_the_same_searched_from_anywhere() {
    let mut s = SessionLog::new(session("s1"));
    // Seqs with gaps, as a log shared by sessions has.
    for seq in (1..=40).map(|n| n * 3 - n % 2) {
        s.push_event(event(seq, seq / 10, Kind::Assistant, None, "x"));
    }
    for last_seq in -1..=125 {
        let call = ModelCall {
            last_seq,
            ..ModelCall::default()
        };
        let whole = s.seen_by(&call).len();
        for from in 0..=45 {
            assert_eq!(
                s.seen_by_from(&call, from).len(),
                whole,
                "{last_seq} {from}"
            );
        }
    }
}

fn refusal(result: Result<(), LogError>) -> String {
    match result {
        Err(e @ LogError::Refused { .. }) => e.to_string(),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[test]
fn the_writer_refuses_what_would_break_the_log_and_writes_nothing_of_the_batch() {
    let dir = TempDir::new().unwrap();
    let (path, mut writer) = new_log(&dir);
    writer.append(&every_kind()[..6]).unwrap();

    let seq_back = refusal(writer.append(&[event(6, 0, Kind::Assistant, None, "x")]));
    assert!(
        seq_back.contains("seq 6") && seq_back.contains("greater than"),
        "{seq_back}"
    );

    let turn_back = [
        event(7, 2, Kind::User, None, "x"),
        event(8, 1, Kind::Assistant, None, "y"),
    ];
    let message = refusal(writer.append(&turn_back));
    assert!(
        message.contains("turn 1 goes back from turn 2"),
        "{message}"
    );

    let orphan = [event(7, 0, Kind::ToolResult, Some(("grep", "nope")), "x")];
    let message = refusal(writer.append(&orphan));
    assert!(message.contains("no earlier tool_call"), "{message}");

    let mut stranger = event(7, 0, Kind::User, None, "x");
    stranger.session_id = "s2".into();
    let message = refusal(writer.append(&[stranger]));
    assert!(message.contains("never added"), "{message}");

    // A call and its result in the same batch are fine.
    writer
        .append(&[
            event(7, 0, Kind::ToolCall, Some(("grep", "c9")), "{}"),
            event(8, 0, Kind::ToolResult, Some(("grep", "c9")), "hits"),
        ])
        .unwrap();
    drop(writer);
    let log = Store::open(&path).unwrap().load().unwrap();
    let seqs: Vec<i64> = log.sessions[0].events.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, [1, 2, 3, 4, 5, 6, 7, 8]);

    // Reopened, the writer remembers the log's state.
    let mut writer = Writer::open(&path).unwrap();
    assert_eq!(writer.last_seq(), 8);
    let message = refusal(writer.append(&[event(
        9,
        0,
        Kind::ToolResult,
        Some(("read_file", "c1")),
        "again",
    )]));
    assert!(message.contains("already has its tool_result"), "{message}");
    let message =
        refusal(writer.append(&[event(9, 0, Kind::ToolCall, Some(("grep", "c9")), "{}")]));
    assert!(message.contains("already used"), "{message}");
    writer
        .append(&[event(9, 0, Kind::ToolCall, Some(("grep", "c10")), "{}")])
        .unwrap();
    refusal(writer.append(&[event(10, 0, Kind::ToolResult, Some(("grep", "zzz")), "")]));
    assert!(matches!(Writer::create(&path), Err(LogError::Exists(_))));
}

#[test]
fn an_incremental_load_sees_what_a_second_connection_appends_in_wal_mode() {
    let dir = TempDir::new().unwrap();
    let (path, mut writer) = new_log(&dir);
    let events = every_kind();
    writer.append(&events[..4]).unwrap();

    let mut store = Store::open(&path).unwrap();
    let mut log = store.load().unwrap();
    assert_eq!(log.sessions[0].events.len(), 4);
    let version = store.data_version().unwrap();

    writer.append(&events[4..]).unwrap();
    writer
        .record_call(&ModelCall {
            session_id: "s1".into(),
            turn: 1,
            last_seq: 8,
            ts: "2026-01-01T00:02:00Z".into(),
            ..ModelCall::default()
        })
        .unwrap();
    assert_ne!(
        store.data_version().unwrap(),
        version,
        "a commit changes data_version"
    );

    let changes = store.load_new(&mut log).unwrap();
    assert_eq!((changes.events, changes.calls, changes.sessions), (4, 1, 0));
    assert_eq!(log.sessions[0].events, events);
    assert!(store.load_new(&mut log).unwrap().is_empty());

    let mut second = session("s2");
    second.title = None;
    writer.add_session(&second).unwrap();
    let changes = store.load_new(&mut log).unwrap();
    assert_eq!(changes.sessions, 1);
    assert_eq!(log.sessions.len(), 2);
}

#[test]
fn a_pair_is_the_first_call_and_the_first_result_of_its_id() {
    let mut s = SessionLog::new(session("s1"));
    let mut seq = 0;
    let mut push = |s: &mut SessionLog, kind: Kind, id: &str| {
        seq += 1;
        s.push_event(event(seq, 1, kind, Some(("grep", id)), "x"));
        s.events.len() - 1
    };
    // Enough ids for the index to grow many times over.
    let mut expected = Vec::new();
    for n in 0..3000 {
        let id = format!("c{n}");
        let (call, result) = match n % 4 {
            // A result before its call, then the call: they pair.
            0 => {
                let result = push(&mut s, Kind::ToolResult, &id);
                (push(&mut s, Kind::ToolCall, &id), Some(result))
            }
            // A call answered twice, then called again: the first of each.
            1 => {
                let call = push(&mut s, Kind::ToolCall, &id);
                let result = push(&mut s, Kind::ToolResult, &id);
                push(&mut s, Kind::ToolResult, &id);
                push(&mut s, Kind::ToolCall, &id);
                (call, Some(result))
            }
            // Never answered.
            2 => (push(&mut s, Kind::ToolCall, &id), None),
            _ => {
                let call = push(&mut s, Kind::ToolCall, &id);
                (call, Some(push(&mut s, Kind::ToolResult, &id)))
            }
        };
        expected.push((id, call, result));
    }
    for (id, call, result) in &expected {
        let pair = s.pair(id);
        assert_eq!((pair.call, pair.result), (Some(*call), *result), "{id}");
        // The partner is learnt when the result arrives after its call.
        let after = result.filter(|&r| r > *call);
        assert_eq!(s.partner_of(*call), after, "{id}");
    }
    assert_eq!(s.pair("c3000"), Default::default());
}

#[test]
fn what_a_session_finds_is_what_a_scan_finds_as_it_grows() {
    let texts = [
        "Deploy key is ÄRGER-42",
        "nothing here",
        "the deploy KEY moved",
        "",
        "ärger-42 and deploy key",
        "Ünïcode ÄRGER",
    ];
    let scan = |s: &SessionLog, needle: &str| -> Vec<u32> {
        (0..s.events.len() as u32)
            .filter(|&ix| {
                let text = s.events[ix as usize].content.get().to_lowercase();
                text.contains(needle)
            })
            .collect()
    };
    let mut s = SessionLog::new(session("s1"));
    let mut seq = 0;
    let needles: Vec<String> = ["deploy key", "ärger-42", "", "absent", "deploy key"]
        .map(String::from)
        .to_vec();
    for round in 0..4 {
        for text in texts.iter().cycle().skip(round).take(7) {
            seq += 1;
            s.push_event(event(seq, round as i64, Kind::Assistant, None, text));
        }
        // The first needles were asked before (kept, grown by the new
        // events), the last one is new this round.
        let mut asked = needles[..2 + round].to_vec();
        asked.push(format!("key{round}"));
        let found = s.holding(&asked);
        assert_eq!(found.len(), asked.len());
        for (needle, held) in asked.iter().zip(&found) {
            assert_eq!(**held, scan(&s, needle), "round {round}: {needle:?}");
        }
        // Asked again with nothing new: the same.
        assert_eq!(s.holding(&asked), found);
    }
}

#[test]
fn a_text_that_could_not_be_read_back_is_looked_for_again() {
    let dir = TempDir::new().unwrap();
    let (path, mut writer) = new_log(&dir);
    let long = |what: &str| format!("{what} {}", "x".repeat(HELD_BYTES));
    let mut events = every_kind();
    events.push(event(9, 1, Kind::Assistant, None, &long("the deploy key")));
    writer.append(&events).unwrap();
    drop(writer);
    let log = Store::open(&path).unwrap().load().unwrap();
    let s = &log.sessions[0];
    let at = s.index_of(9).unwrap() as u32;
    let needle = vec!["deploy key".to_string()];
    // The log is away: its text cannot be read back, and nothing holds it.
    let away = dir.path().join("away.db");
    std::fs::rename(&path, &away).unwrap();
    assert!(s.holding(&needle)[0].is_empty());
    // Back, it is read and found.
    std::fs::rename(&away, &path).unwrap();
    assert_eq!(*s.holding(&needle)[0], vec![at]);
}

proptest::proptest! {
    /// A text's measures are what the standard library counts of it.
    #[test]
    fn a_texts_measures_are_what_std_counts(
        text in "(\\PC|[\r\n\t ]|\u{1F600}|\u{10FFFF}|\u{80}|\u{7FF}|\u{FFFF}){0,80}"
    ) {
        let m = Measure::of(&text);
        proptest::prop_assert_eq!(m.bytes as usize, text.len());
        proptest::prop_assert_eq!(m.chars as usize, text.chars().count());
        proptest::prop_assert_eq!(m.utf16 as usize, text.encode_utf16().count());
        proptest::prop_assert_eq!(m.lines as usize, text.lines().count());
    }
}
