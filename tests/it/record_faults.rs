//! `ctxlens record` when things go wrong: redirects, compressed answers,
//! hung and cut exchanges, a log locked by another process, hostile text,
//! clients that misbehave. Every upstream is a fake on 127.0.0.1; nothing
//! waits on a guessed time: a test waits for what it needs to see (a line on
//! stderr, a byte on a socket, a row in the log), with a long deadline that
//! only a broken build reaches.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tempfile::TempDir;

const KEY: &str = "sk-test-SECRET123";
/// What only a broken build waits for.
const DEADLINE: Duration = Duration::from_secs(60);

/// One HTTP/1.1 message read off a stream: head lines and body.
fn read_message(reader: &mut impl BufRead) -> Option<(Vec<String>, Vec<u8>)> {
    let mut head = Vec::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).ok()? == 0 {
            return None;
        }
        let line = line.trim_end().to_string();
        if line.is_empty() {
            break;
        }
        head.push(line);
    }
    let mut body = Vec::new();
    if let Some(length) = header(&head, "content-length") {
        body.resize(length.parse().ok()?, 0);
        reader.read_exact(&mut body).ok()?;
    } else if header(&head, "transfer-encoding").is_some_and(|t| t.contains("chunked")) {
        loop {
            let mut size = String::new();
            reader.read_line(&mut size).ok()?;
            let size = usize::from_str_radix(size.trim(), 16).ok()?;
            let mut chunk = vec![0; size + 2];
            reader.read_exact(&mut chunk).ok()?;
            if size == 0 {
                break;
            }
            body.extend_from_slice(&chunk[..size]);
        }
    } else if !head[0].starts_with("POST") && !head[0].starts_with("GET") {
        reader.read_to_end(&mut body).ok()?;
    }
    Some((head, body))
}

fn header(head: &[String], name: &str) -> Option<String> {
    head.iter().skip(1).find_map(|h| {
        let (k, v) = h.split_once(':')?;
        k.eq_ignore_ascii_case(name).then(|| v.trim().to_string())
    })
}

/// A request the fake upstream got: head, body, and the body as JSON.
struct Got {
    head: Vec<String>,
    json: Value,
}

type Received = Arc<Mutex<Vec<(Vec<String>, Vec<u8>)>>>;

/// A fake upstream on 127.0.0.1 whose `answer` writes each reply itself,
/// and what it received.
fn upstream(answer: impl Fn(Got, TcpStream) + Send + Sync + 'static) -> (String, Received) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let received: Received = Arc::default();
    let seen = Arc::clone(&received);
    let answer = Arc::new(answer);
    thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            // Its own writes go out at once: only the proxy's delays count.
            stream.set_nodelay(true).unwrap();
            let (seen, answer) = (Arc::clone(&seen), Arc::clone(&answer));
            thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let Some((head, body)) = read_message(&mut reader) else {
                    return;
                };
                seen.lock().unwrap().push((head.clone(), body.clone()));
                let json = serde_json::from_slice(&body).unwrap_or_default();
                answer(Got { head, json }, stream);
            });
        }
    });
    (url, received)
}

/// The answer of a chat provider: `Seen N.` for N messages, as JSON or as
/// server-sent events when the request asks to stream.
fn chat_answer(request: &Value) -> (&'static str, Vec<u8>) {
    let n = request["messages"].as_array().map_or(0, Vec::len);
    let text = format!("Seen {n}.");
    if request["stream"] == true {
        let events = [
            json!({"id":"c1","object":"chat.completion.chunk","created":1767225600,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":&text[..3]}}]}),
            json!({"id":"c1","object":"chat.completion.chunk","created":1767225600,"model":"m","choices":[{"index":0,"delta":{"content":&text[3..]},"finish_reason":"stop"}]}),
            json!({"id":"c1","object":"chat.completion.chunk","created":1767225600,"model":"m","choices":[],"usage":{"prompt_tokens":7,"completion_tokens":2,"total_tokens":9}}),
        ];
        let mut sse: String = events.iter().map(|e| format!("data: {e}\n\n")).collect();
        sse.push_str("data: [DONE]\n\n");
        ("text/event-stream", sse.into_bytes())
    } else {
        let reply = json!({"id":"c2","object":"chat.completion","created":1767225600,"model":"m",
            "choices":[{"index":0,"message":{"role":"assistant","content":text},"finish_reason":"stop"}],
            "usage":{"prompt_tokens":7,"completion_tokens":3,"total_tokens":10}});
        ("application/json", reply.to_string().into_bytes())
    }
}

fn reply(out: &mut TcpStream, status: &str, headers: &[(&str, &str)], body: &[u8]) {
    let mut head = format!("HTTP/1.1 {status}\r\nContent-Length: {}\r\n", body.len());
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("Connection: close\r\n\r\n");
    let mut message = head.into_bytes();
    message.extend_from_slice(body);
    let _ = out.write_all(&message);
}

/// A fake chat provider answering every request.
fn chat_provider() -> (String, Received) {
    upstream(|got, mut out| {
        let (kind, body) = chat_answer(&got.json);
        reply(&mut out, "200 OK", &[("Content-Type", kind)], &body);
    })
}

/// `ctxlens record` on a free port; its stderr is read line by line.
struct Recorder {
    child: Child,
    addr: String,
    lines: Receiver<String>,
    stderr: Arc<Mutex<Vec<String>>>,
    stopped: bool,
}

impl Drop for Recorder {
    /// A test that failed leaves no recorder behind.
    fn drop(&mut self) {
        if !self.stopped {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

impl Recorder {
    fn start(log: &Path, upstream: &str, extra: &[&str]) -> Recorder {
        Recorder::spawn(
            Command::new(env!("CARGO_BIN_EXE_ctxlens"))
                .args(["record", "-o"])
                .arg(log)
                .args(["--listen", "127.0.0.1:0", "--openai-upstream", upstream])
                .args(["--anthropic-upstream", upstream])
                .args(extra),
        )
    }

    fn spawn(command: &mut Command) -> Recorder {
        let mut child = command.stderr(Stdio::piped()).spawn().unwrap();
        let stderr = BufReader::new(child.stderr.take().unwrap());
        let (send, lines) = channel();
        let all: Arc<Mutex<Vec<String>>> = Arc::default();
        let kept = Arc::clone(&all);
        thread::spawn(move || {
            for line in stderr.split(b'\n') {
                let Ok(line) = line else { break };
                let line = String::from_utf8_lossy(&line).into_owned();
                kept.lock().unwrap().push(line.clone());
                let _ = send.send(line);
            }
        });
        let mut recorder = Recorder {
            child,
            addr: String::new(),
            lines,
            stderr: all,
            stopped: false,
        };
        let line = recorder.wait_for("listening on");
        recorder.addr = line
            .split("http://")
            .nth(1)
            .and_then(|rest| rest.split(',').next())
            .unwrap_or_else(|| panic!("no address in {line:?}"))
            .to_string();
        recorder
    }

    /// The next stderr line holding `needle`; panics if stderr ends first.
    fn wait_for(&self, needle: &str) -> String {
        loop {
            match self.lines.recv_timeout(DEADLINE) {
                Ok(line) if line.contains(needle) => return line,
                Ok(_) => {}
                Err(_) => panic!(
                    "no line with {needle:?} on stderr: {:?}",
                    self.stderr.lock().unwrap()
                ),
            }
        }
    }

    fn interrupt(&self) {
        // SAFETY: a signal to a child this test started.
        unsafe {
            libc::kill(self.child.id() as i32, libc::SIGINT);
        }
    }

    /// Ctrl-C; its exit status and all it wrote on stderr.
    fn stop(mut self) -> (Option<i32>, Vec<String>) {
        self.interrupt();
        let status = self.child.wait().unwrap().code();
        self.stopped = true;
        // Whatever is left of stderr, to its end.
        while self.lines.recv_timeout(DEADLINE).is_ok() {}
        let lines = self.stderr.lock().unwrap().clone();
        (status, lines)
    }
}

/// Posts `body` to `path` at `addr` with `headers`, as a client with a key
/// does, on a connection of its own.
fn post(addr: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> (Vec<String>, Vec<u8>) {
    let mut stream = connect(addr);
    send(&mut stream, path, headers, body, true);
    read_message(&mut BufReader::new(stream)).expect("an answer")
}

/// A connection to `addr` that gives up reading after the deadline.
fn connect(addr: &str) -> TcpStream {
    let stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(DEADLINE)).unwrap();
    stream.set_nodelay(true).unwrap();
    stream
}

fn send(stream: &mut TcpStream, path: &str, headers: &[(&str, &str)], body: &[u8], close: bool) {
    let mut head = format!(
        "POST {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    if close {
        head.push_str("Connection: close\r\n");
    }
    head.push_str("\r\n");
    let mut message = head.into_bytes();
    message.extend_from_slice(body);
    stream.write_all(&message).unwrap();
}

fn chat(text: &str) -> Vec<u8> {
    json!({"model":"m","messages":[{"role":"user","content":text}]})
        .to_string()
        .into_bytes()
}

/// Each call of the log in order: its session, its meta (or null).
fn calls(log: &Path) -> Vec<(String, Value)> {
    let conn = rusqlite::Connection::open(log).unwrap();
    let has_meta: bool = conn
        .query_row(
            "SELECT count(*) FROM sqlite_master WHERE name = 'ctxlens_call_meta'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    let sql = if has_meta {
        "SELECT c.session_id, m.meta FROM model_calls c LEFT JOIN ctxlens_call_meta m ON m.call_id = c.id ORDER BY c.id"
    } else {
        "SELECT session_id, NULL FROM model_calls ORDER BY id"
    };
    let mut stmt = conn.prepare(sql).unwrap();
    stmt.query_map([], |r| {
        let meta: Option<String> = r.get(1)?;
        Ok((
            r.get(0)?,
            meta.map_or(Value::Null, |m| serde_json::from_str(&m).unwrap()),
        ))
    })
    .unwrap()
    .map(Result::unwrap)
    .collect()
}

/// The texts of the log's events of `kind`, in order.
fn texts(log: &Path, kind: &str) -> Vec<String> {
    let conn = rusqlite::Connection::open(log).unwrap();
    let mut stmt = conn
        .prepare("SELECT content FROM events WHERE kind = ?1 ORDER BY seq")
        .unwrap();
    stmt.query_map([kind], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

/// Waits until the log holds `n` calls (the recorder writes after relaying).
fn wait_for_calls(log: &Path, n: usize) {
    let start = Instant::now();
    while calls(log).len() < n {
        assert!(
            start.elapsed() < DEADLINE,
            "{n} calls never reached the log"
        );
        thread::sleep(Duration::from_millis(20));
    }
}

fn json_of(args: &[&str], log: &Path) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_ctxlens"))
        .args(args)
        .arg(log)
        .output()
        .unwrap();
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{args:?}: {e}: {}", String::from_utf8_lossy(&out.stderr)))
}

#[test]
fn a_redirect_is_passed_back_and_never_followed() {
    let (elsewhere, reached) = chat_provider();
    let location = format!("{elsewhere}/v1/chat/completions");
    let to = location.clone();
    let (first, _) = upstream(move |_, mut out| {
        reply(
            &mut out,
            "307 Temporary Redirect",
            &[("Location", &to), ("Content-Type", "text/plain")],
            b"moved",
        );
    });
    let dir = TempDir::new().unwrap();
    let log = dir.path().join("rec.db");
    let recorder = Recorder::start(&log, &first, &[]);
    for path in ["/v1/chat/completions", "/v1/models"] {
        let (head, body) = post(&recorder.addr, path, &[("x-api-key", KEY)], &chat("hi"));
        assert!(head[0].contains("307"), "{head:?}");
        assert_eq!(header(&head, "location").as_deref(), Some(&*location));
        assert_eq!(body, b"moved");
    }
    // Had the proxy followed, the other host would have had the prompt and
    // the key before the client had its answer.
    assert!(
        reached.lock().unwrap().is_empty(),
        "the redirect was followed"
    );
    recorder.stop();
    assert_eq!(calls(&log)[0].1["error"]["status"], 307);
}

/// `body` compressed as `encoding` names.
fn compress(encoding: &str, body: &[u8]) -> Vec<u8> {
    use flate2::write::{GzEncoder, ZlibEncoder};
    let level = flate2::Compression::default();
    match encoding {
        "gzip" => {
            let mut e = GzEncoder::new(Vec::new(), level);
            e.write_all(body).unwrap();
            e.finish().unwrap()
        }
        "deflate" => {
            let mut e = ZlibEncoder::new(Vec::new(), level);
            e.write_all(body).unwrap();
            e.finish().unwrap()
        }
        "br" => {
            let mut out = Vec::new();
            {
                let mut e = brotli::CompressorWriter::new(&mut out, 4096, 5, 22);
                e.write_all(body).unwrap();
            }
            out
        }
        "zstd" => zstd::encode_all(body, 3).unwrap(),
        other => panic!("{other}"),
    }
}

#[test]
fn compressed_answers_reach_the_client_as_sent_and_the_log_decoded() {
    let sent: Received = Arc::default();
    let kept = Arc::clone(&sent);
    let (url, received) = upstream(move |got, mut out| {
        let encoding = header(&got.head, "accept-encoding").unwrap();
        let (kind, body) = chat_answer(&got.json);
        let body = compress(&encoding, &body);
        kept.lock()
            .unwrap()
            .push((vec![encoding.clone()], body.clone()));
        if got.json["stream"] == true {
            // Streamed: chunked, in two pieces.
            let _ = write!(
                out,
                "HTTP/1.1 200 OK\r\nContent-Type: {kind}\r\nContent-Encoding: {encoding}\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
            );
            let (a, b) = body.split_at(body.len() / 2);
            for piece in [a, b] {
                let _ = write!(out, "{:x}\r\n", piece.len());
                let _ = out.write_all(piece);
                let _ = write!(out, "\r\n");
                let _ = out.flush();
            }
            let _ = write!(out, "0\r\n\r\n");
        } else {
            reply(
                &mut out,
                "200 OK",
                &[("Content-Type", kind), ("Content-Encoding", &encoding)],
                &body,
            );
        }
    });
    let dir = TempDir::new().unwrap();
    let log = dir.path().join("rec.db");
    let recorder = Recorder::start(&log, &url, &[]);
    let mut asked = 0;
    for encoding in ["gzip", "deflate", "br", "zstd"] {
        for stream in [false, true] {
            let body = json!({"model":"m","stream":stream,"messages":[{"role":"user","content":format!("{encoding} {stream}")}]});
            let (head, got) = post(
                &recorder.addr,
                "/v1/chat/completions",
                &[("Accept-Encoding", encoding)],
                body.to_string().as_bytes(),
            );
            assert_eq!(header(&head, "content-encoding").as_deref(), Some(encoding));
            // The bytes the provider sent, unchanged.
            assert_eq!(got, sent.lock().unwrap()[asked].1, "{encoding} {stream}");
            asked += 1;
        }
    }
    // The client's Accept-Encoding reached the provider.
    assert_eq!(received.lock().unwrap().len(), 8);
    recorder.stop();
    let replay = json_of(&["replay", "--json"], &log);
    let recorded = replay["calls"].as_array().unwrap();
    assert_eq!(recorded.len(), 8, "{replay}");
    for call in recorded {
        assert_eq!(call["reported_input_tokens"], 7, "{call}");
    }
    assert_eq!(texts(&log, "assistant"), vec!["Seen 1."; 8]);
}

#[test]
fn a_previous_response_id_continues_its_session() {
    let (url, _) = upstream(|got, mut out| {
        let answer = if got.json["input"][0]["content"] == "Something else." {
            json!({"id":"resp_other","object":"response","created_at":1767225600,"model":"m",
                "output":[{"type":"message","id":"msg_0","role":"assistant","content":[{"type":"output_text","text":"Else."}]}],
                "usage":{"input_tokens":4,"output_tokens":1}})
        } else if got.json["previous_response_id"] == "resp_1" {
            json!({"id":"resp_2","object":"response","created_at":1767225601,"model":"m",
                "output":[{"type":"message","id":"msg_2","role":"assistant","content":[{"type":"output_text","text":"One file."}]}],
                "usage":{"input_tokens":9,"output_tokens":3}})
        } else {
            json!({"id":"resp_1","object":"response","created_at":1767225600,"model":"m",
                "output":[{"type":"function_call","id":"fc_1","call_id":"call_1","name":"ls","arguments":"{}"}],
                "usage":{"input_tokens":5,"output_tokens":1}})
        };
        reply(
            &mut out,
            "200 OK",
            &[("Content-Type", "application/json")],
            answer.to_string().as_bytes(),
        );
    });
    let dir = TempDir::new().unwrap();
    let log = dir.path().join("rec.db");
    let recorder = Recorder::start(&log, &url, &[]);
    let first = json!({"model":"m","instructions":"Be brief.","input":[{"role":"user","content":"What is here?"}]});
    // Another conversation between the two, so the newest session is not the answer.
    let other = json!({"model":"m","input":[{"role":"user","content":"Something else."}]});
    let second = json!({"model":"m","previous_response_id":"resp_1",
        "input":[{"type":"function_call_output","call_id":"call_1","output":"a.txt"}]});
    for body in [first, other, second] {
        let (head, _) = post(
            &recorder.addr,
            "/v1/responses",
            &[],
            body.to_string().as_bytes(),
        );
        assert!(head[0].contains("200"), "{head:?}");
    }
    recorder.stop();
    let recorded = calls(&log);
    assert_eq!(recorded.len(), 3, "{recorded:?}");
    assert_eq!(recorded[0].0, recorded[2].0, "{recorded:?}");
    assert_ne!(recorded[0].0, recorded[1].0);
    // The result pairs with the call the first response made.
    let check = json_of(&["check", "--json"], &log);
    assert_eq!(check["ok"], true, "{check}");
}

#[test]
fn the_summary_counts_what_is_in_the_log_and_says_what_is_not() {
    let (url, _) = chat_provider();
    let dir = TempDir::new().unwrap();
    let log = dir.path().join("rec.db");
    let recorder = Recorder::start(&log, &url, &[]);
    post(&recorder.addr, "/v1/chat/completions", &[], &chat("fine"));
    wait_for_calls(&log, 1);
    // A call of an id used twice is kept (under a new id) and counted.
    let call = json!({"id":"dup","type":"function","function":{"name":"ls","arguments":"{}"}});
    let twice = json!({"model":"m","messages":[
        {"role":"user","content":"twice"},
        {"role":"assistant","content":null,"tool_calls":[call]},
        {"role":"tool","tool_call_id":"dup","content":"a"},
        {"role":"assistant","content":null,"tool_calls":[call]},
        {"role":"tool","tool_call_id":"dup","content":"b"}]});
    post(
        &recorder.addr,
        "/v1/chat/completions",
        &[],
        twice.to_string().as_bytes(),
    );
    wait_for_calls(&log, 2);
    // A log another process never lets go of: the last call cannot be written.
    let lock = rusqlite::Connection::open(&log).unwrap();
    lock.execute_batch("BEGIN EXCLUSIVE").unwrap();
    post(&recorder.addr, "/v1/chat/completions", &[], &chat("held"));
    let (status, stderr) = recorder.stop();
    lock.execute_batch("COMMIT").unwrap();
    assert_eq!(status, Some(0));
    assert_eq!(calls(&log).len(), 2);
    assert!(
        stderr
            .iter()
            .any(|l| l.contains("'dup' was already used: kept as 'dup~2'")),
        "{stderr:?}"
    );
    let summary = stderr
        .iter()
        .find(|l| l.contains(" recorded to "))
        .unwrap_or_else(|| panic!("{stderr:?}"));
    assert!(
        summary.contains(": 2 calls in 2 sessions recorded to"),
        "{summary}"
    );
    assert!(
        stderr
            .iter()
            .any(|l| l.contains("1 call could not be written")),
        "{stderr:?}"
    );
}

#[test]
fn text_from_a_request_or_an_answer_reaches_stderr_inert_on_one_line() {
    let hostile = format!("\u{1b}]0;title\u{7}\u{1b}[2J{}", "\n".repeat(40));
    let (url, _) = upstream(|_, mut out| {
        let body = "{\"error\":\"\u{1b}]0;pwned\u{7}\u{1b}[2J\nsecond line\"}";
        reply(
            &mut out,
            "500 Internal Server Error",
            &[("Content-Type", "application/json")],
            body.as_bytes(),
        );
    });
    let dir = TempDir::new().unwrap();
    let log = dir.path().join("rec.db");
    let recorder = Recorder::start(&log, &url, &[]);
    // A tool result whose call the history does not hold, under a hostile id.
    let body = json!({"model":"m","messages":[
        {"role":"user","content":"go"},
        {"role":"tool","tool_call_id":hostile,"content":"out"}]});
    post(
        &recorder.addr,
        "/v1/chat/completions",
        &[],
        body.to_string().as_bytes(),
    );
    let (_, stderr) = recorder.stop();
    for line in &stderr {
        assert!(
            !line.contains(['\u{1b}', '\u{7}']),
            "a raw escape on stderr: {line:?}"
        );
        assert!(
            line.starts_with("ctxlens record:"),
            "not one line: {stderr:?}"
        );
    }
}

/// The median time of `n` requests on one kept-alive connection.
fn keep_alive_median(addr: &str, body: &[u8], n: usize) -> Duration {
    let stream = connect(addr);
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut writer = stream;
    let mut times: Vec<Duration> = (0..n)
        .map(|_| {
            let start = Instant::now();
            send(&mut writer, "/v1/chat/completions", &[], body, false);
            let (head, _) = read_message(&mut reader).expect("an answer");
            assert!(head[0].contains("200"), "{head:?}");
            start.elapsed()
        })
        .collect();
    times.sort();
    times[n / 2]
}

/// Nagle's algorithm holds a small write back until the last one is
/// acknowledged, which a client delays by 40 ms: a kept-alive request
/// through the proxy took 43 ms. The client and the upstream here write
/// each message at once, so only the proxy's writes can be held. It is a
/// timing, measured: a median of 15 far below 40 ms.
#[test]
fn a_kept_alive_connection_is_not_held_back_by_nagle() {
    let (url, _) = chat_provider();
    let dir = TempDir::new().unwrap();
    let log = dir.path().join("rec.db");
    let recorder = Recorder::start(&log, &url, &[]);
    let body = json!({"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]});
    let median = keep_alive_median(&recorder.addr, body.to_string().as_bytes(), 15);
    recorder.stop();
    assert!(median < Duration::from_millis(25), "median {median:?}");
}

/// What a test's upstream saw: a request came, a stream began.
enum Seen {
    Asked(String),
}

/// An upstream that takes every request and hangs: a prompt `stream` gets
/// its first event and no more; any other prompt no answer at all. Each
/// request it holds is said on `seen`.
fn hanging_upstream(seen: Sender<Seen>) -> String {
    let held: Arc<Mutex<Vec<TcpStream>>> = Arc::default();
    let seen = Mutex::new(seen);
    let (url, _) = upstream(move |got, mut out| {
        let prompt = got.json["messages"][0]["content"]
            .as_str()
            .or_else(|| got.json["input"][0]["content"].as_str())
            .unwrap_or("")
            .to_string();
        if prompt == "stream" {
            let first =
                json!({"choices":[{"index":0,"delta":{"role":"assistant","content":"Hel"}}]});
            let _ = write!(
                out,
                "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
            );
            let event = format!("data: {first}\n\n");
            let _ = write!(out, "{:x}\r\n{event}\r\n", event.len());
            let _ = out.flush();
        }
        held.lock().unwrap().push(out);
        let _ = seen.lock().unwrap().send(Seen::Asked(prompt));
    });
    url
}

#[test]
fn ctrl_c_records_what_is_in_flight_and_says_it_ended_incomplete() {
    let (tell, seen) = channel();
    let url = hanging_upstream(tell);
    let dir = TempDir::new().unwrap();
    let log = dir.path().join("rec.db");
    let recorder = Recorder::start(&log, &url, &[]);
    let addr = recorder.addr.clone();
    // A call the upstream never answers.
    thread::spawn(move || {
        let mut stream = connect(&addr);
        send(
            &mut stream,
            "/v1/chat/completions",
            &[],
            &chat("hang"),
            true,
        );
        let mut rest = Vec::new();
        let _ = stream.read_to_end(&mut rest);
    });
    // And a stream that stops after its first event.
    let mut stream = connect(&recorder.addr);
    let body = json!({"model":"m","stream":true,"messages":[{"role":"user","content":"stream"}]});
    send(
        &mut stream,
        "/v1/chat/completions",
        &[],
        body.to_string().as_bytes(),
        true,
    );
    let mut got = Vec::new();
    let mut buf = [0; 512];
    while !String::from_utf8_lossy(&got).contains("Hel") {
        let n = stream.read(&mut buf).unwrap();
        assert!(n > 0, "closed before the first event");
        got.extend_from_slice(&buf[..n]);
    }
    let mut asked: Vec<String> = (0..2)
        .map(|_| match seen.recv_timeout(DEADLINE).unwrap() {
            Seen::Asked(prompt) => prompt,
        })
        .collect();
    asked.sort();
    assert_eq!(asked, ["hang", "stream"]);
    // Ctrl-C waits for what is in flight; a second one stops the wait.
    recorder.interrupt();
    recorder.wait_for("in flight");
    let (status, stderr) = recorder.stop();
    assert_eq!(status, Some(0));
    let recorded = calls(&log);
    assert_eq!(recorded.len(), 2, "{recorded:?} {stderr:?}");
    for (_, meta) in &recorded {
        assert_eq!(meta["incomplete"], "shutdown", "{recorded:?}");
    }
    assert!(recorded.iter().any(|(_, meta)| meta["partial"] == true));
    assert_eq!(texts(&log, "assistant"), ["Hel"]);
    assert!(
        stderr
            .iter()
            .any(|l| l.contains("2 calls ended incomplete")),
        "{stderr:?}"
    );
}

#[test]
fn a_client_that_goes_away_while_the_upstream_hangs_is_still_recorded() {
    let (tell, seen) = channel();
    let url = hanging_upstream(tell);
    let dir = TempDir::new().unwrap();
    let log = dir.path().join("rec.db");
    let recorder = Recorder::start(&log, &url, &[]);
    let mut stream = connect(&recorder.addr);
    send(
        &mut stream,
        "/v1/chat/completions",
        &[],
        &chat("hang"),
        true,
    );
    assert!(matches!(seen.recv_timeout(DEADLINE), Ok(Seen::Asked(_))));
    // The client gives up.
    stream.shutdown(Shutdown::Both).unwrap();
    drop(stream);
    wait_for_calls(&log, 1);
    let (status, _) = recorder.stop();
    assert_eq!(status, Some(0));
    let recorded = calls(&log);
    assert_eq!(recorded[0].1["incomplete"], "client gone", "{recorded:?}");
}

#[test]
fn a_responses_stream_cut_short_keeps_the_text_it_got() {
    let (url, _) = upstream(|_, mut out| {
        let events = [
            json!({"type":"response.created","response":{"id":"resp_9","object":"response","created_at":1767225600,"model":"m","output":[]}}),
            json!({"type":"response.output_item.added","output_index":0,"item":{"type":"message","id":"msg_9","role":"assistant","content":[]}}),
            json!({"type":"response.output_text.delta","item_id":"msg_9","output_index":0,"content_index":0,"delta":"Hel"}),
            json!({"type":"response.output_text.delta","item_id":"msg_9","output_index":0,"content_index":0,"delta":"lo"}),
        ];
        let _ = write!(
            out,
            "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
        );
        for e in events {
            let event = format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap());
            let _ = write!(out, "{:x}\r\n{event}\r\n", event.len());
        }
        // Cut: no last chunk.
        let _ = out.flush();
        let _ = out.shutdown(Shutdown::Both);
    });
    let dir = TempDir::new().unwrap();
    let log = dir.path().join("rec.db");
    let recorder = Recorder::start(&log, &url, &[]);
    let body = json!({"model":"m","stream":true,"input":[{"role":"user","content":"hi"}]});
    let mut stream = connect(&recorder.addr);
    send(
        &mut stream,
        "/v1/responses",
        &[],
        body.to_string().as_bytes(),
        true,
    );
    let mut rest = Vec::new();
    let _ = stream.read_to_end(&mut rest);
    wait_for_calls(&log, 1);
    recorder.stop();
    assert_eq!(texts(&log, "assistant"), ["Hello"]);
    assert_eq!(calls(&log)[0].1["partial"], true);
}

#[test]
fn an_error_status_is_an_answered_call_never_one_in_flight() {
    let (url, _) = upstream(|_, mut out| {
        reply(
            &mut out,
            "529 Overloaded",
            &[("Content-Type", "application/json")],
            br#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
        );
    });
    let dir = TempDir::new().unwrap();
    let log = dir.path().join("rec.db");
    let recorder = Recorder::start(&log, &url, &[]);
    for (path, body) in [
        ("/v1/chat/completions", chat("hi")),
        (
            "/v1/messages",
            json!({"model":"m","max_tokens":9,"messages":[{"role":"user","content":"hello"}]})
                .to_string()
                .into_bytes(),
        ),
    ] {
        let (head, _) = post(&recorder.addr, path, &[], &body);
        assert!(head[0].contains("529"), "{head:?}");
    }
    wait_for_calls(&log, 2);
    // While the session is live: nothing in flight.
    let check = json_of(&["check", "--json"], &log);
    assert_eq!(check["in_flight"], json!([]), "{check}");
    recorder.stop();
    let check = json_of(&["check", "--json"], &log);
    assert_eq!(check["ok"], true, "{check}");
    for (_, meta) in calls(&log) {
        assert_eq!(meta["error"]["status"], 529);
    }
    // Nor is the error taken for the assistant's words.
    assert!(texts(&log, "assistant").is_empty());
}

#[test]
fn a_locked_log_holds_up_no_answer_and_loses_no_call() {
    let (url, _) = chat_provider();
    let dir = TempDir::new().unwrap();
    let log = dir.path().join("rec.db");
    let recorder = Recorder::start(&log, &url, &[]);
    let lock = rusqlite::Connection::open(&log).unwrap();
    lock.execute_batch("BEGIN EXCLUSIVE").unwrap();
    // Every answer arrives while another process holds the log.
    for n in 0..3 {
        let (head, body) = post(
            &recorder.addr,
            "/v1/chat/completions",
            &[],
            &chat(&format!("call {n}")),
        );
        assert!(head[0].contains("200"), "{head:?}");
        assert!(String::from_utf8_lossy(&body).contains("Seen 1."));
    }
    assert!(calls_while_locked(&log));
    lock.execute_batch("COMMIT").unwrap();
    wait_for_calls(&log, 3);
    let (status, stderr) = recorder.stop();
    assert_eq!(status, Some(0));
    assert_eq!(calls(&log).len(), 3, "{stderr:?}");
}

/// Whether the log is still held (a reader sees no call yet).
fn calls_while_locked(log: &Path) -> bool {
    calls(log).is_empty()
}

#[test]
fn half_sent_headers_are_not_held_forever() {
    let (url, _) = chat_provider();
    let dir = TempDir::new().unwrap();
    let log = dir.path().join("rec.db");
    let recorder = Recorder::start(&log, &url, &[]);
    let mut stream = connect(&recorder.addr);
    write!(stream, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n").unwrap();
    stream.set_read_timeout(Some(DEADLINE)).unwrap();
    let mut rest = Vec::new();
    // Closed by the proxy (an answer, if any, then the end), not timed out here.
    let read = stream.read_to_end(&mut rest);
    assert!(
        read.is_ok()
            || read
                .as_ref()
                .is_err_and(|e| e.kind() == std::io::ErrorKind::ConnectionReset),
        "{read:?}"
    );
    recorder.stop();
}

/// The CPU time, in clock ticks, a process has used.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // After the command's name, in parentheses: utime and stime are the
    // 12th and 13th fields.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .unwrap()
        .1
        .split_whitespace()
        .collect();
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}

/// With no file descriptor left, accept() fails at once every time: the
/// proxy must not spin on it. A rate, measured over one second.
#[test]
fn running_out_of_file_descriptors_does_not_spin() {
    use std::os::unix::process::CommandExt;
    let (url, _) = chat_provider();
    let dir = TempDir::new().unwrap();
    let log = dir.path().join("rec.db");
    const LIMIT: u64 = 48;
    let mut command = Command::new(env!("CARGO_BIN_EXE_ctxlens"));
    command.args(["record", "-o"]).arg(&log).args([
        "--listen",
        "127.0.0.1:0",
        "--openai-upstream",
        &url,
    ]);
    // SAFETY: setrlimit is async-signal-safe.
    unsafe {
        command.pre_exec(|| {
            let limit = libc::rlimit {
                rlim_cur: LIMIT,
                rlim_max: LIMIT,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let recorder = Recorder::spawn(&mut command);
    let pid = recorder.child.id();
    let open = || {
        std::fs::read_dir(format!("/proc/{pid}/fd"))
            .unwrap()
            .count() as u64
    };
    let clients: Vec<TcpStream> = (0..LIMIT + 16).map(|_| connect(&recorder.addr)).collect();
    let start = Instant::now();
    while open() < LIMIT - 1 {
        assert!(start.elapsed() < DEADLINE, "{} descriptors open", open());
        thread::sleep(Duration::from_millis(10));
    }
    let before = cpu_ticks(pid);
    thread::sleep(Duration::from_secs(1));
    let used = cpu_ticks(pid) - before;
    drop(clients);
    recorder.stop();
    // A spinning accept loop takes a whole core: about 100 ticks a second.
    assert!(used < 30, "{used} ticks in one second");
}

/// The most memory the process has held, in bytes.
fn peak_memory(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    let kb: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kb * 1024
}

#[test]
fn a_hundred_megabyte_request_is_held_a_few_times_at_most() {
    let (url, received) = chat_provider();
    let dir = TempDir::new().unwrap();
    let log = dir.path().join("rec.db");
    let recorder = Recorder::start(&log, &url, &[]);
    let size = 100_000_000;
    let body = chat(&"lorem ipsum ".repeat(size / 12));
    let (head, _) = post(&recorder.addr, "/v1/chat/completions", &[], &body);
    assert!(head[0].contains("200"), "{head:?}");
    assert_eq!(received.lock().unwrap()[0].1.len(), body.len());
    wait_for_calls(&log, 1);
    let peak = peak_memory(recorder.child.id());
    recorder.stop();
    eprintln!("peak {} MB for a {} MB request", peak >> 20, size >> 20);
    assert!(
        peak < 6 * size as u64,
        "peak {} MB for a {} MB request",
        peak >> 20,
        size >> 20
    );
}

#[test]
fn the_exit_status_of_a_killed_command_is_a_shells() {
    let (url, _) = chat_provider();
    let dir = TempDir::new().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_ctxlens"))
        .args(["record", "-o"])
        .arg(dir.path().join("rec.db"))
        .args(["--listen", "127.0.0.1:0", "--openai-upstream", &url, "--"])
        .args(["sh", "-c", "kill -TERM $$"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(128 + 15),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn redaction_covers_the_session_name() {
    let (url, _) = chat_provider();
    let dir = TempDir::new().unwrap();
    let log = dir.path().join("rec.db");
    let recorder = Recorder::start(&log, &url, &["--redact", "K-[0-9]+"]);
    post(
        &recorder.addr,
        "/v1/chat/completions",
        &[("x-ctxlens-session", "deploy K-123")],
        &chat("hi"),
    );
    recorder.stop();
    let bytes = String::from_utf8_lossy(&std::fs::read(&log).unwrap()).into_owned();
    assert!(!bytes.contains("K-123"), "the session name is not redacted");
    assert_eq!(calls(&log)[0].0, "deploy [redacted]");
}

#[test]
fn a_lone_surrogate_is_recorded_and_passed_on_unchanged() {
    let (url, received) = chat_provider();
    let dir = TempDir::new().unwrap();
    let log = dir.path().join("rec.db");
    let recorder = Recorder::start(&log, &url, &[]);
    let body = br#"{"model":"m","messages":[{"role":"user","content":"half \ud83d a pair"}]}"#;
    let (head, _) = post(&recorder.addr, "/v1/chat/completions", &[], body);
    assert!(head[0].contains("200"), "{head:?}");
    assert_eq!(received.lock().unwrap()[0].1, body);
    recorder.stop();
    assert_eq!(texts(&log, "user"), ["half \u{fffd} a pair"]);
}

/// Ctrl-C sent to the recorder alone is passed on to the command, which
/// decides how it ends; the recorder exits as the command did.
#[test]
fn ctrl_c_is_passed_on_to_the_command() {
    let (url, _) = chat_provider();
    let dir = TempDir::new().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_ctxlens"))
        .args(["record", "-o"])
        .arg(dir.path().join("rec.db"))
        .args(["--listen", "127.0.0.1:0", "--openai-upstream", &url, "--"])
        .args([
            "sh",
            "-c",
            "trap 'exit 5' INT; echo ready; while :; do sleep 1 & wait; done",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut ready = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut ready)
        .unwrap();
    assert_eq!(ready, "ready\n");
    // SAFETY: a signal to a child this test started.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGINT);
    }
    assert_eq!(child.wait().unwrap().code(), Some(5));
}
