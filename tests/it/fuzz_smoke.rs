//! The fuzz targets of `ctxlens::fuzzing` on the stable toolchain: each over
//! a few thousand inputs mutated from the repository's sample logs and
//! fixtures by a seeded generator (the same inputs every run), and every
//! crash input the fuzzer found (tests/fixtures/fuzz-crashes/TARGET-NAME)
//! replayed through its target. A panic in a target fails its test, naming
//! the input, which is kept under target/fuzz-smoke/.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};

use ctxlens::fuzzing::{self, Harness};
use tempfile::TempDir;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// xorshift64*: small, seeded, the same sequence everywhere.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number below `n` (0 when `n` is 0).
    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
}

/// Bytes that matter to the readers: separators, quotes, brackets, and
/// numbers at the edges of their types.
const TOKENS: &[&[u8]] = &[
    b"\n",
    b"\t",
    b"\0",
    b"\"",
    b"{",
    b"}",
    b"[",
    b"]",
    b":",
    b",",
    b"=",
    b".",
    b"\\",
    b"null",
    b"true",
    b"-1",
    b"0",
    b"1e309",
    b"9223372036854775807",
    b"-9223372036854775808",
    b"18446744073709551616",
    b"NaN",
    b"\xff\xfe",
    b"\xe2\x80\xae",
    b"#load",
    b"N",
    b"I-1",
    b"Rnan",
    b"X00ff",
];

/// One input: a seed changed by one to four edits.
fn mutate(rng: &mut Rng, seeds: &[Vec<u8>]) -> Vec<u8> {
    let mut data = seeds[rng.below(seeds.len())].clone();
    for _ in 0..=rng.below(4) {
        let at = rng.below(data.len() + 1);
        match rng.below(8) {
            // Flip a bit.
            0 if !data.is_empty() => {
                let i = rng.below(data.len());
                data[i] ^= 1 << rng.below(8);
            }
            // A random byte in place.
            1 if !data.is_empty() => {
                let i = rng.below(data.len());
                data[i] = rng.next() as u8;
            }
            // Truncate.
            2 => data.truncate(at),
            // Insert a token, or random bytes.
            3 => {
                let token = TOKENS[rng.below(TOKENS.len())];
                data.splice(at..at, token.iter().copied());
            }
            4 => {
                let bytes: Vec<u8> = (0..=rng.below(8)).map(|_| rng.next() as u8).collect();
                data.splice(at..at, bytes);
            }
            // Remove a stretch.
            5 => {
                let end = (at + 1 + rng.below(64)).min(data.len());
                if at < end {
                    data.drain(at..end);
                }
            }
            // Repeat a stretch.
            6 => {
                let end = (at + 1 + rng.below(64)).min(data.len());
                if at < end {
                    let copy = data[at..end].repeat(1 + rng.below(3));
                    data.splice(at..at, copy);
                }
            }
            // Splice: this input's start with another seed's end.
            _ => {
                let other = &seeds[rng.below(seeds.len())];
                let from = rng.below(other.len() + 1);
                data.truncate(at);
                data.extend_from_slice(&other[from..]);
            }
        }
    }
    data
}

/// Runs `target` over every seed (each must be read without an error, or
/// the harness is not reaching the reader) and `count` mutated inputs, at
/// least one in a hundred of which must be read too; a panic fails the test
/// and keeps its input.
fn smoke(target: &str, seeds: Vec<Vec<u8>>, count: usize, seed: u64) {
    assert!(!seeds.is_empty(), "{target}: no seeds");
    let harness = fuzzing::target(target).expect("a known target");
    for (i, input) in seeds.iter().enumerate() {
        assert!(
            run(harness, target, &format!("seed-{i}"), input),
            "{target}: seed {i} was not read"
        );
    }
    let mut rng = Rng(seed);
    let mut read = 0;
    for i in 0..count {
        let input = mutate(&mut rng, &seeds);
        read += usize::from(run(harness, target, &format!("input-{i}"), &input));
    }
    assert!(
        read >= count / 100,
        "{target}: only {read} of {count} mutated inputs were read"
    );
}

/// Whether `harness` read `input`; a panic fails the test, naming the input,
/// which is kept under target/fuzz-smoke/.
fn run(harness: Harness, target: &str, name: &str, input: &[u8]) -> bool {
    match catch_unwind(AssertUnwindSafe(|| harness(input))) {
        Ok(read) => read,
        Err(_) => {
            let kept = root().join("target/fuzz-smoke");
            std::fs::create_dir_all(&kept).unwrap();
            let file = kept.join(format!("{target}-{name}"));
            std::fs::write(&file, input).unwrap();
            panic!("{target} panicked on {name}, kept in {}", file.display());
        }
    }
}

fn read(path: impl AsRef<Path>) -> Vec<u8> {
    let path = root().join(path);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The files of `fuzz/seeds/TARGET/`.
fn fuzz_seeds(target: &str) -> Vec<Vec<u8>> {
    let dir = root().join("fuzz/seeds").join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    files.iter().map(read).collect()
}

/// Each sample log copied into `dir` (a reader may leave files beside it).
fn sample_logs(dir: &Path) -> Vec<PathBuf> {
    let mut logs: Vec<PathBuf> = std::fs::read_dir(root().join("sample-sessions"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "db"))
        .collect();
    logs.sort();
    logs.iter()
        .map(|log| {
            let copy = dir.join(log.file_name().unwrap());
            std::fs::copy(log, &copy).unwrap();
            copy
        })
        .collect()
}

const LOG_TABLES: [&str; 4] = ["sessions", "events", "summaries", "model_calls"];

/// The first rows of `log` in a file of 512-byte pages: a log a few KB long.
fn small_log(log: &Path, out: &Path) -> Vec<u8> {
    let conn = rusqlite::Connection::open(out).unwrap();
    conn.execute_batch(
        "PRAGMA page_size = 512; PRAGMA user_version = 1; PRAGMA foreign_keys = OFF;",
    )
    .unwrap();
    conn.execute_batch(ctxlens::log::SCHEMA).unwrap();
    conn.execute("ATTACH ?1 AS src", [log.to_str().unwrap()])
        .unwrap();
    for table in LOG_TABLES {
        conn.execute_batch(&format!(
            "INSERT INTO main.{table} SELECT * FROM src.{table} LIMIT 12"
        ))
        .unwrap();
    }
    conn.execute_batch("DETACH src; VACUUM;").unwrap();
    drop(conn);
    std::fs::read(out).unwrap()
}

#[test]
fn log_file() {
    let dir = TempDir::new().unwrap();
    let mut seeds = Vec::new();
    for (i, log) in sample_logs(dir.path()).iter().enumerate() {
        seeds.push(small_log(log, &dir.path().join(format!("small-{i}.db"))));
    }
    seeds.push(read("sample-sessions/broken.db"));
    smoke("log_file", seeds, 400, 1);
}

#[test]
fn log_rows() {
    let dir = TempDir::new().unwrap();
    let mut seeds = Vec::new();
    for log in sample_logs(dir.path()) {
        let rows = fuzzing::rows_text(&log, &LOG_TABLES, 12, 120).unwrap();
        assert!(!rows.is_empty(), "{}: no rows", log.display());
        // Loaded halfway through too, as a live view does, and without types.
        let half = rows.len() / 2;
        let cut = half + rows[half..].iter().position(|&b| b == b'\n').unwrap_or(0);
        let live = [&rows[..cut], b"\n#load", &rows[cut..]].concat();
        let relaxed = [b"#relaxed\n".as_slice(), &rows].concat();
        seeds.extend([rows, live, relaxed]);
    }
    smoke("log_rows", seeds, 1000, 2);
}

#[test]
fn import_claude_code() {
    let seeds = vec![read("tests/fixtures/claude-code-microcompact.jsonl")];
    smoke("import_claude_code", seeds, 3000, 3);
}

#[test]
fn import_codex() {
    let seeds = vec![read("tests/fixtures/codex-compacted.jsonl")];
    smoke("import_codex", seeds, 3000, 4);
}

#[test]
fn import_aider() {
    let dir = root().join("tests/fixtures/aider");
    let llm = read("tests/fixtures/aider/summarized/.aider.llm.history");
    let chat = read("tests/fixtures/aider/summarized/.aider.chat.history.md");
    let older = std::fs::read(dir.join("chat-only/.aider.chat.history.md")).unwrap();
    let both = [llm.as_slice(), b"\0", &chat].concat();
    smoke(
        "import_aider",
        vec![llm, both, [b"\0".as_slice(), &older].concat()],
        1500,
        6,
    );
}

#[test]
fn import_opencode() {
    let packed = fuzzing::pack_folder(&root().join("tests/fixtures/opencode")).unwrap();
    assert!(
        packed.starts_with(b"storage/"),
        "packed from the storage folder"
    );
    let as_db = [b"opencode.db\n\0".as_slice(), &packed].concat();
    smoke("import_opencode", vec![packed, as_db], 2500, 5);
}

#[test]
fn import_llm() {
    smoke("import_llm", fuzz_seeds("import_llm"), 2500, 6);
}

#[test]
fn import_api() {
    smoke("import_api", fuzz_seeds("import_api"), 3000, 7);
}

#[test]
fn import_otel() {
    let seeds = [
        "current.json",
        "legacy.json",
        "lines.jsonl",
        "anthropic-blocks.json",
    ]
    .iter()
    .map(|f| read(format!("tests/fixtures/otel/{f}")))
    .collect();
    smoke("import_otel", seeds, 3000, 11);
}

#[test]
fn policy_toml() {
    let mut seeds = fuzz_seeds("policy_toml");
    seeds.push(read("assets/policy.toml"));
    smoke("policy_toml", seeds, 4000, 8);
}

#[test]
fn policy_set() {
    let mut seeds = fuzz_seeds("policy_set");
    // Every key with each value it allows, and with values of other types,
    // one a line: those a policy builds with are seeds too.
    let mut lines = Vec::new();
    for (key, _) in ctxlens::policy::key_docs() {
        for value in ["0", "1", "0.5", "true", "\"x\""] {
            lines.push(format!("{key}={value}"));
        }
        for value in ctxlens::policy::allowed_values(&key).unwrap_or_default() {
            lines.push(format!("{key}={value}"));
        }
    }
    let valid: Vec<Vec<u8>> = lines
        .iter()
        .map(|l| l.as_bytes().to_vec())
        .filter(|l| fuzzing::policy_set(l))
        .collect();
    assert!(
        valid.len() * 4 >= lines.len(),
        "only {} of {} lines built a policy",
        valid.len(),
        lines.len()
    );
    seeds.extend(valid);
    smoke("policy_set", seeds, 4000, 9);
}

/// Every crash input the fuzzer found, minimized and kept, through its
/// target: the file's name up to its first `-` names it.
#[test]
fn fuzz_crashes_replay() {
    let dir = root().join("tests/fixtures/fuzz-crashes");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return;
    };
    let mut files: Vec<PathBuf> = entries.map(|e| e.unwrap().path()).collect();
    files.sort();
    for file in files {
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        let target = name.split('-').next().unwrap_or_default();
        let harness = fuzzing::target(target)
            .unwrap_or_else(|| panic!("{name}: no fuzz target named {target:?}"));
        run(harness, target, &name, &read(&file));
    }
}
