//! `ctxlens record` between a client and a fake provider on 127.0.0.1:
//! what reaches either side, what is recorded, and what is not.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use serde_json::{Value, json};
use tempfile::TempDir;

const KEY: &str = "sk-test-SECRET123";

/// One HTTP/1.1 message read off a stream: head lines and body.
fn read_message(reader: &mut BufReader<TcpStream>) -> Option<(Vec<String>, Vec<u8>)> {
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
    let header = |name: &str| {
        head.iter().find_map(|h| {
            let (k, v) = h.split_once(':')?;
            k.eq_ignore_ascii_case(name).then(|| v.trim().to_string())
        })
    };
    let mut body = Vec::new();
    if let Some(length) = header("content-length") {
        body.resize(length.parse().ok()?, 0);
        reader.read_exact(&mut body).ok()?;
    } else if header("transfer-encoding").is_some_and(|t| t.contains("chunked")) {
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
    } else {
        reader.read_to_end(&mut body).ok()?;
    }
    Some((head, body))
}

/// What the fake provider received: request heads and bodies.
type Received = Arc<Mutex<Vec<(Vec<String>, Vec<u8>)>>>;

/// A provider on 127.0.0.1 answering every request with `answer(body)`:
/// a JSON body, or server-sent events when the request asks to stream.
fn provider() -> (String, Received) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let received: Received = Arc::default();
    let seen = Arc::clone(&received);
    thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            let seen = Arc::clone(&seen);
            thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let Some((head, body)) = read_message(&mut reader) else {
                    return;
                };
                seen.lock().unwrap().push((head, body.clone()));
                let request: Value = serde_json::from_slice(&body).unwrap_or_default();
                let mut out = stream;
                if request["stream"] == true {
                    let events = [
                        json!({"id":"c1","object":"chat.completion.chunk","created":1767225600,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"Hel"}}]}),
                        json!({"id":"c1","object":"chat.completion.chunk","created":1767225600,"model":"m","choices":[{"index":0,"delta":{"content":"lo."},"finish_reason":"stop"}]}),
                        json!({"id":"c1","object":"chat.completion.chunk","created":1767225600,"model":"m","choices":[],"usage":{"prompt_tokens":21,"completion_tokens":2,"total_tokens":23}}),
                    ];
                    let _ = write!(
                        out,
                        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"
                    );
                    for e in events {
                        let _ = write!(out, "data: {e}\n\n");
                        let _ = out.flush();
                        thread::sleep(Duration::from_millis(20));
                    }
                    let _ = write!(out, "data: [DONE]\n\n");
                } else {
                    let n = request["messages"].as_array().map_or(0, Vec::len);
                    let reply = json!({"id":"c2","object":"chat.completion","created":1767225600,"model":"m",
                        "choices":[{"index":0,"message":{"role":"assistant","content":format!("Seen {n}.")},"finish_reason":"stop"}],
                        "usage":{"prompt_tokens":10 * n,"completion_tokens":3,"total_tokens":10 * n + 3}});
                    let body = reply.to_string();
                    let _ = write!(
                        out,
                        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                        body.len()
                    );
                }
            });
        }
    });
    (url, received)
}

/// `ctxlens record` on a free port, and the address it says it listens on.
fn recorder(log: &Path, upstream: &str, extra: &[&str]) -> (Child, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_ctxlens"))
        .args(["record", "-o"])
        .arg(log)
        .args(["--listen", "127.0.0.1:0", "--openai-upstream", upstream])
        .args(["--anthropic-upstream", upstream])
        .args(extra)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    stderr.read_line(&mut line).unwrap();
    let addr = line
        .split("http://")
        .nth(1)
        .and_then(|rest| rest.split(',').next())
        .unwrap_or_else(|| panic!("no address in {line:?}"))
        .to_string();
    thread::spawn(move || {
        let mut rest = String::new();
        let _ = stderr.read_to_string(&mut rest);
    });
    (child, addr)
}

/// Posts `body` to the proxy at `addr` as a client with a key does.
fn post(addr: &str, path: &str, body: &str) -> (Vec<String>, Vec<u8>) {
    let mut stream = TcpStream::connect(addr).unwrap();
    write!(
        stream,
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {KEY}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    read_message(&mut BufReader::new(stream)).unwrap()
}

fn stop(mut child: Child) -> Option<i32> {
    // SAFETY: a signal to a child this test started.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGINT);
    }
    child.wait().unwrap().code()
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
fn each_request_is_a_call_and_what_was_sent_and_answered_passes_unchanged() {
    let (upstream, received) = provider();
    let dir = TempDir::new().unwrap();
    let log = dir.path().join("rec.db");
    let (child, addr) = recorder(&log, &upstream, &[]);
    let first = json!({"model":"m","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"My deploy key is K-123."}]});
    let (head, body) = post(&addr, "/v1/chat/completions", &first.to_string());
    assert!(head[0].contains("200"), "{head:?}");
    let reply: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(reply["choices"][0]["message"]["content"], "Seen 2.");
    // The next request extends the first: the same session.
    let mut second = first.clone();
    let messages = second["messages"].as_array_mut().unwrap();
    messages.push(json!({"role":"assistant","content":"Seen 2."}));
    messages.push(json!({"role":"user","content":"Stream the answer.","name":"u"}));
    second["stream"] = json!(true);
    second["stream_options"] = json!({"include_usage": true});
    let (head, body) = post(&addr, "/v1/chat/completions", &second.to_string());
    assert!(
        head.iter()
            .any(|h| h.to_lowercase().contains("text/event-stream")),
        "{head:?}"
    );
    let text = String::from_utf8(body).unwrap();
    assert!(
        text.starts_with("data: {") && text.ends_with("data: [DONE]\n\n"),
        "{text}"
    );
    // A path that is not a model call passes through, unrecorded.
    let (head, _) = post(&addr, "/v1/embeddings", r#"{"input":"x"}"#);
    assert!(head[0].contains("200"));
    assert_eq!(stop(child), Some(0));

    // The provider got the bodies byte for byte, with the key; the log has neither key nor header.
    let got = received.lock().unwrap();
    assert_eq!(got.len(), 3);
    assert_eq!(got[0].1, first.to_string().into_bytes());
    assert!(
        got[0].0.iter().any(|h| h.contains(KEY)),
        "the key reaches the provider"
    );
    for file in [log.clone(), dir.path().join("rec.db-wal")] {
        if let Ok(bytes) = std::fs::read(&file) {
            let bytes = String::from_utf8_lossy(&bytes);
            assert!(
                !bytes.contains(KEY) && !bytes.contains("Bearer"),
                "{}",
                file.display()
            );
        }
    }
    use std::os::unix::fs::PermissionsExt;
    for file in [
        log.clone(),
        dir.path().join("rec.db-wal"),
        dir.path().join("rec.db-shm"),
    ] {
        if let Ok(meta) = std::fs::metadata(&file) {
            assert_eq!(
                meta.permissions().mode() & 0o777,
                0o600,
                "{}",
                file.display()
            );
        }
    }
    assert!(log.exists());

    // Two calls of one session, each recorded as sent, with its usage.
    let replay = json_of(&["replay", "--json"], &log);
    assert_eq!(replay["calls"].as_array().unwrap().len(), 2, "{replay}");
    assert_eq!(replay["matching"], 2);
    assert_eq!(replay["calls"][0]["session"], replay["calls"][1]["session"]);
    assert_eq!(replay["calls"][0]["reported_input_tokens"], 20);
    assert_eq!(replay["calls"][1]["reported_input_tokens"], 21);
    let sent = json_of(&["project", "--json", "--record", "--call", "2"], &log);
    let texts: Vec<&str> = sent["context"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["text"].as_str().unwrap())
        .collect();
    assert_eq!(
        texts,
        [
            "Be brief.",
            "My deploy key is K-123.",
            "Seen 2.",
            "Stream the answer."
        ]
    );
}

#[test]
fn the_command_runs_against_the_proxy_and_its_exit_status_passes_through() {
    let (upstream, _) = provider();
    let dir = TempDir::new().unwrap();
    let log = dir.path().join("rec.db");
    let out = Command::new(env!("CARGO_BIN_EXE_ctxlens"))
        .args(["record", "-o"])
        .arg(&log)
        .args([
            "--listen",
            "127.0.0.1:0",
            "--openai-upstream",
            &upstream,
            "--",
        ])
        .args([
            "sh",
            "-c",
            "case \"$OPENAI_BASE_URL\" in http://127.0.0.1:*/v1) exit 7;; *) exit 3;; esac",
        ])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(7),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn faults_answer_the_client_and_keep_the_log_whole() {
    let dir = TempDir::new().unwrap();
    let log = dir.path().join("rec.db");
    // Nothing listens there.
    let dead = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", l.local_addr().unwrap())
    };
    let (child, addr) = recorder(&log, &dead, &[]);
    let (head, body) = post(
        &addr,
        "/v1/chat/completions",
        r#"{"model":"m","messages":[{"role":"user","content":"hi"}]}"#,
    );
    assert!(head[0].contains("502"), "{head:?}");
    let error: Value = serde_json::from_slice(&body).unwrap();
    assert!(
        error["error"]["message"]
            .as_str()
            .unwrap()
            .contains("did not answer")
    );
    // A body that is not JSON is passed on, not recorded.
    let (head, _) = post(&addr, "/v1/chat/completions", "not json");
    assert!(head[0].contains("502"));
    assert_eq!(stop(child), Some(0));
    let replay = json_of(&["replay", "--json"], &log);
    assert_eq!(replay["calls"].as_array().unwrap().len(), 1, "{replay}");
    // The call keeps what went wrong.
    let out = Command::new(env!("CARGO_BIN_EXE_ctxlens"))
        .args(["project", "--call", "1"])
        .arg(&log)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("the upstream did not answer"), "{text}");
    // A loopback address only, unless asked.
    let out = Command::new(env!("CARGO_BIN_EXE_ctxlens"))
        .args(["record", "-o"])
        .arg(dir.path().join("other.db"))
        .args(["--listen", "0.0.0.0:0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--allow-remote"));
}

#[test]
fn redacted_text_never_reaches_the_log() {
    let (upstream, received) = provider();
    let dir = TempDir::new().unwrap();
    let log = dir.path().join("rec.db");
    let (child, addr) = recorder(&log, &upstream, &["--redact", "K-[0-9]+"]);
    post(
        &addr,
        "/v1/chat/completions",
        r#"{"model":"m","messages":[{"role":"user","content":"My deploy key is K-123."}]}"#,
    );
    assert_eq!(stop(child), Some(0));
    assert!(String::from_utf8_lossy(&received.lock().unwrap()[0].1).contains("K-123"));
    let bytes = String::from_utf8_lossy(&std::fs::read(&log).unwrap()).into_owned();
    assert!(!bytes.contains("K-123") && bytes.contains("[redacted]"));
}

/// A stream reaches the client as the provider sends it: the provider sends
/// its last event only once the client has read the first.
#[test]
fn a_stream_is_relayed_as_it_comes() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let upstream = format!("http://{}", listener.local_addr().unwrap());
    let (release, gate) = std::sync::mpsc::channel::<()>();
    thread::spawn(move || {
        let (stream, _) = listener.accept().unwrap();
        let mut reader = BufReader::new(stream.try_clone().unwrap());
        read_message(&mut reader).unwrap();
        let mut out = stream;
        write!(
            out,
            "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        write!(
            out,
            "data: {}\n\n",
            json!({"choices":[{"index":0,"delta":{"content":"first"}}]})
        )
        .unwrap();
        out.flush().unwrap();
        // Held until the client has the first event.
        gate.recv_timeout(Duration::from_secs(20)).unwrap();
        write!(
            out,
            "data: {}\n\n",
            json!({"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":1}})
        )
        .unwrap();
        write!(out, "data: [DONE]\n\n").unwrap();
    });
    let dir = TempDir::new().unwrap();
    let log = dir.path().join("rec.db");
    let (child, addr) = recorder(&log, &upstream, &[]);
    let mut stream = TcpStream::connect(&addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let body = r#"{"model":"m","stream":true,"messages":[{"role":"user","content":"go"}]}"#;
    write!(
        stream,
        "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut seen = Vec::new();
    let mut buf = [0u8; 512];
    while !String::from_utf8_lossy(&seen).contains("first") {
        let n = stream
            .read(&mut buf)
            .expect("the first event before the last is sent");
        assert!(n > 0, "closed before the first event");
        seen.extend_from_slice(&buf[..n]);
    }
    release.send(()).unwrap();
    while !String::from_utf8_lossy(&seen).contains("[DONE]") {
        let n = stream.read(&mut buf).unwrap();
        assert!(n > 0);
        seen.extend_from_slice(&buf[..n]);
    }
    drop(stream);
    assert_eq!(stop(child), Some(0));
    let replay = json_of(&["replay", "--json"], &log);
    assert_eq!(replay["calls"][0]["reported_input_tokens"], 3, "{replay}");
}

#[test]
fn thirty_two_clients_at_once_are_all_answered_and_recorded() {
    let (upstream, received) = provider();
    let dir = TempDir::new().unwrap();
    let log = dir.path().join("rec.db");
    let (child, addr) = recorder(&log, &upstream, &[]);
    let clients: Vec<_> = (0..32)
        .map(|c| {
            let addr = addr.clone();
            thread::spawn(move || {
                let mut messages =
                    vec![json!({"role":"user","content":format!("client {c} asks")})];
                for r in 0..5 {
                    let body = json!({"model":"m","messages":messages}).to_string();
                    let (head, body) = post(&addr, "/v1/chat/completions", &body);
                    assert!(head[0].contains("200"), "client {c} request {r}: {head:?}");
                    let reply: Value = serde_json::from_slice(&body).unwrap();
                    messages.push(reply["choices"][0]["message"].clone());
                    messages.push(json!({"role":"user","content":format!("client {c} again {r}")}));
                }
            })
        })
        .collect();
    for client in clients {
        client.join().unwrap();
    }
    assert_eq!(stop(child), Some(0));
    assert_eq!(received.lock().unwrap().len(), 160);
    let replay = json_of(&["replay", "--json"], &log);
    let calls = replay["calls"].as_array().unwrap();
    assert_eq!(calls.len(), 160);
    assert_eq!(replay["matching"], 160);
    // One session per client's conversation.
    let mut sessions: Vec<&str> = calls
        .iter()
        .map(|c| c["session"].as_str().unwrap())
        .collect();
    sessions.sort_unstable();
    sessions.dedup();
    assert_eq!(sessions.len(), 32);
}
