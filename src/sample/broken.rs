//! broken: a log with every problem `check` knows, planted with plain SQL.

use std::path::Path;

use crate::log::LogError;

/// A log with every problem `check` knows, each planted once, so `check` has
/// something real to find. Written with plain SQL: the writer refuses all of it.
pub(super) fn broken(path: &Path) -> Result<(), LogError> {
    let err = crate::log::sqlite_err(path);
    let conn = rusqlite::Connection::open(path).map_err(&err)?;
    conn.pragma_update(None, "foreign_keys", false)
        .map_err(&err)?;
    // `seq` is not the rowid here, so rows can be stored out of seq order.
    let schema = crate::log::SCHEMA.replace(
        "seq         INTEGER PRIMARY KEY",
        "seq         INTEGER NOT NULL",
    );
    conn.execute_batch(&schema).map_err(&err)?;
    conn.pragma_update(None, "user_version", crate::log::SCHEMA_VERSION)
        .map_err(&err)?;
    conn.execute_batch(BROKEN_SQL).map_err(&err)?;
    conn.close().map_err(|(_, e)| err(e))
}

/// The problems planted in broken.db, as (seq, kind): what `check` must find.
pub const BROKEN_PROBLEMS: [(Option<i64>, &str); 18] = [
    (Some(15), "bad_event"),
    (Some(16), "bad_event"),
    (None, "bad_json"),
    (Some(3), "bad_json"),
    (Some(14), "bad_json"),
    (Some(6), "seq_order"),
    (Some(8), "turn_order"),
    (Some(9), "orphan_call"),
    (Some(11), "orphan_result"),
    (Some(12), "duplicate_call_id"),
    (Some(14), "tool_name_mismatch"),
    (Some(5), "summary_span"),
    (Some(2), "summary_span"),
    (Some(5), "summary_span"),
    (Some(5), "summary_order"),
    (Some(99), "call_last_seq"),
    (Some(14), "call_summary"),
    (Some(14), "call_turn"),
];

const BROKEN_SQL: &str = r#"
INSERT INTO sessions VALUES ('broken', '2026-03-02T09:00:00Z', 'every problem check knows', '{"model": "x",');
INSERT INTO events VALUES (1, 'broken', 0, '2026-03-02T09:00:00Z', 'system', NULL, NULL, 'You are an agent.', NULL);
INSERT INTO events VALUES (2, 'broken', 0, '2026-03-02T09:00:01Z', 'user', NULL, NULL, 'Read the config.', NULL);
INSERT INTO events VALUES (3, 'broken', 0, '2026-03-02T09:00:02Z', 'tool_call', 'read_file', 'c1', '{"path":"config.toml"}', '{bad json');
INSERT INTO events VALUES (4, 'broken', 0, '2026-03-02T09:00:03Z', 'tool_result', 'read_file', 'c1', 'port = 8080', NULL);
INSERT INTO events VALUES (7, 'broken', 1, '2026-03-02T09:00:04Z', 'user', NULL, NULL, 'Now the logs.', NULL);
INSERT INTO events VALUES (6, 'broken', 1, '2026-03-02T09:00:05Z', 'assistant', NULL, NULL, 'Stored after seq 7 although it is smaller.', NULL);
INSERT INTO events VALUES (8, 'broken', 0, '2026-03-02T09:00:06Z', 'assistant', NULL, NULL, 'My turn went backwards.', NULL);
INSERT INTO events VALUES (9, 'broken', 1, '2026-03-02T09:00:07Z', 'tool_call', 'grep', 'c2', '{"pattern":"ERROR"}', NULL);
INSERT INTO events VALUES (10, 'broken', 1, '2026-03-02T09:00:08Z', 'assistant', NULL, NULL, 'I moved on without the grep result.', NULL);
INSERT INTO events VALUES (11, 'broken', 1, '2026-03-02T09:00:09Z', 'tool_result', 'grep', 'c-none', 'no call asked for this', NULL);
INSERT INTO events VALUES (12, 'broken', 1, '2026-03-02T09:00:10Z', 'tool_call', 'read_file', 'c1', '{"path":"again.toml"}', NULL);
INSERT INTO events VALUES (13, 'broken', 1, '2026-03-02T09:00:11Z', 'tool_call', 'read_file', 'c3', '{"path":"other.toml"}', NULL);
INSERT INTO events VALUES (14, 'broken', 1, '2026-03-02T09:00:12Z', 'tool_result', 'write_file', 'c3', 'a result naming another tool', NULL);
INSERT INTO events VALUES (15, 'broken', 1, '2026-03-02T09:00:13Z', 'tool_use', NULL, NULL, 'a kind from another tool', NULL);
INSERT INTO events VALUES (16, 'ghost', 0, '2026-03-02T09:00:14Z', 'user', NULL, NULL, 'a session that does not exist', NULL);
INSERT INTO summaries VALUES (1, 'broken', 1, 5, 3, 'reversed span', '2026-03-02T09:01:00Z', 'sample', NULL);
INSERT INTO summaries VALUES (2, 'broken', 2, 2, 40, 'reaches past the last event', '2026-03-02T09:01:01Z', 'sample', NULL);
INSERT INTO summaries VALUES (3, 'broken', 3, 5, 5, 'covers no event and ends before v2', '2026-03-02T09:01:02Z', 'sample', NULL);
INSERT INTO model_calls (id, session_id, turn, last_seq, ts, evictions) VALUES (1, 'broken', 1, 14, '2026-03-02T09:02:00Z', '[{"seq": 4,');
INSERT INTO model_calls (id, session_id, turn, last_seq, ts) VALUES (2, 'broken', 1, 99, '2026-03-02T09:02:01Z');
INSERT INTO model_calls (id, session_id, turn, last_seq, ts, summary_id) VALUES (3, 'broken', 1, 14, '2026-03-02T09:02:02Z', 42);
INSERT INTO model_calls (id, session_id, turn, last_seq, ts) VALUES (4, 'broken', 0, 14, '2026-03-02T09:02:03Z');
"#;
