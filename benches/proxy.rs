//! `ctxlens record`'s added latency: a 100 kB chat request answered by a
//! fake provider on 127.0.0.1, sent directly and through the recorder, one
//! at a time, by the clients agents use: Rust on a fresh connection each
//! time and on one kept-alive connection; Python's urllib (fresh) and
//! http.client on one kept-alive connection; and the OpenAI SDK (httpx,
//! kept alive) where it is installed. Prints, for each, the median and p99
//! both ways and the median added, as rows of the README's table.
//! `CTXLENS_BENCH_BIN=path` measures another build of ctxlens.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

const REPLY: &str = r#"{"id":"c","object":"chat.completion","created":1767225600,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":25000,"completion_tokens":1,"total_tokens":25001}}"#;

/// A provider that keeps connections alive and writes each answer at once
/// (no delay of its own to measure).
fn provider() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            thread::spawn(move || {
                stream.set_nodelay(true).unwrap();
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut out = stream;
                while let Some(close) = read_request(&mut reader) {
                    let connection = if close { "close" } else { "keep-alive" };
                    let answer = format!(
                        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: {connection}\r\n\r\n{REPLY}",
                        REPLY.len()
                    );
                    if out.write_all(answer.as_bytes()).is_err() || close {
                        break;
                    }
                }
            });
        }
    });
    addr
}

/// Reads one request; whether it asks to close the connection after.
fn read_request(reader: &mut impl BufRead) -> Option<bool> {
    let (mut length, mut close) = (0, false);
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).ok()? == 0 {
            return None;
        }
        let line = line.to_ascii_lowercase();
        if line.trim().is_empty() {
            break;
        }
        if let Some(v) = line.strip_prefix("content-length:") {
            length = v.trim().parse().ok()?;
        }
        close |= line.starts_with("connection:") && line.contains("close");
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    Some(close)
}

fn request(body: &str, close: bool) -> Vec<u8> {
    let connection = if close { "close" } else { "keep-alive" };
    format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: {connection}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// Reads one answer's head and body off a kept-alive connection.
fn read_answer(reader: &mut impl BufRead) {
    let mut length = 0;
    let mut status = String::new();
    reader.read_line(&mut status).unwrap();
    assert!(status.starts_with("HTTP/1.1 200"), "{status}");
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        if line.trim().is_empty() {
            break;
        }
        if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
            length = v.trim().parse().unwrap();
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).unwrap();
}

/// `n` requests from Rust, each on a fresh connection.
fn rust_fresh(addr: &str, body: &str, n: usize) -> Vec<Duration> {
    let message = request(body, true);
    (0..n)
        .map(|_| {
            let start = Instant::now();
            let mut stream = TcpStream::connect(addr).unwrap();
            stream.set_nodelay(true).unwrap();
            stream.write_all(&message).unwrap();
            let mut out = Vec::new();
            stream.read_to_end(&mut out).unwrap();
            assert!(out.starts_with(b"HTTP/1.1 200"));
            start.elapsed()
        })
        .collect()
}

/// `n` requests from Rust on one kept-alive connection.
fn rust_kept(addr: &str, body: &str, n: usize) -> Vec<Duration> {
    let message = request(body, false);
    let stream = TcpStream::connect(addr).unwrap();
    stream.set_nodelay(true).unwrap();
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut out = stream;
    (0..n)
        .map(|_| {
            let start = Instant::now();
            out.write_all(&message).unwrap();
            read_answer(&mut reader);
            start.elapsed()
        })
        .collect()
}

/// A Python client: prints the seconds of each of `n` requests.
const PYTHON: &str = r#"
import sys, time, json
kind, base, n, size = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
text = "lorem ipsum " * (size // 12)
messages = [{"role": "user", "content": text}]
body = json.dumps({"model": "m", "messages": messages}).encode()
headers = {"Content-Type": "application/json", "Authorization": "Bearer sk-bench"}
if kind == "urllib":
    import urllib.request
    def once():
        req = urllib.request.Request(base + "/v1/chat/completions", data=body, headers=headers)
        with urllib.request.urlopen(req) as r:
            r.read()
elif kind == "http.client":
    import http.client, urllib.parse
    u = urllib.parse.urlsplit(base)
    conn = http.client.HTTPConnection(u.hostname, u.port)
    def once():
        conn.request("POST", "/v1/chat/completions", body=body, headers=headers)
        r = conn.getresponse()
        r.read()
else:
    from openai import OpenAI
    client = OpenAI(base_url=base + "/v1", api_key="sk-bench", max_retries=0)
    def once():
        client.chat.completions.create(model="m", messages=messages)
for _ in range(n):
    start = time.perf_counter()
    once()
    print(time.perf_counter() - start)
"#;

/// `n` requests from a Python client of `kind`; `None` where Python or the
/// client's package is missing.
fn python(kind: &str, addr: &str, size: usize, n: usize) -> Option<Vec<Duration>> {
    let out = Command::new("python3")
        .args(["-c", PYTHON, kind, &format!("http://{addr}")])
        .args([n.to_string(), size.to_string()])
        .stderr(Stdio::null())
        .output()
        .ok()?;
    let times: Vec<Duration> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.trim().parse::<f64>().ok())
        .map(Duration::from_secs_f64)
        .collect();
    (out.status.success() && times.len() == n).then_some(times)
}

/// Median and p99, in ms.
fn spread(mut times: Vec<Duration>) -> (f64, f64) {
    times.sort();
    let at = |q: f64| times[((times.len() - 1) as f64 * q).round() as usize].as_secs_f64() * 1e3;
    (at(0.5), at(0.99))
}

fn main() {
    let upstream = provider();
    let dir = tempfile::TempDir::new().unwrap();
    // Another build to compare with, where one is named.
    let binary = std::env::var_os("CTXLENS_BENCH_BIN")
        .unwrap_or_else(|| env!("CARGO_BIN_EXE_ctxlens").into());
    let mut child = Command::new(binary)
        .args(["record", "-o"])
        .arg(dir.path().join("bench.db"))
        .args(["--listen", "127.0.0.1:0", "--openai-upstream"])
        .arg(format!("http://{upstream}"))
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    stderr.read_line(&mut line).unwrap();
    let proxy = line
        .split("http://")
        .nth(1)
        .and_then(|r| r.split(',').next())
        .unwrap()
        .to_string();
    thread::spawn(move || {
        let mut rest = String::new();
        let _ = stderr.read_to_string(&mut rest);
    });
    let size = 100_000;
    let body = format!(
        r#"{{"model":"m","messages":[{{"role":"user","content":"{}"}}]}}"#,
        "lorem ipsum ".repeat(size / 12)
    );
    let n = 200;
    type Client<'a> = Box<dyn Fn(&str, usize) -> Option<Vec<Duration>> + 'a>;
    let clients: Vec<(&str, Client)> = vec![
        (
            "Rust, fresh connections",
            Box::new(|a, n| Some(rust_fresh(a, &body, n))),
        ),
        (
            "Rust, one kept-alive connection",
            Box::new(|a, n| Some(rust_kept(a, &body, n))),
        ),
        (
            "Python urllib, fresh connections",
            Box::new(|a, n| python("urllib", a, size, n)),
        ),
        (
            "Python http.client, kept alive",
            Box::new(|a, n| python("http.client", a, size, n)),
        ),
        (
            "OpenAI Python SDK (httpx), kept alive",
            Box::new(|a, n| python("openai", a, size, n)),
        ),
    ];
    println!("100 kB request, {n} each way, one at a time:");
    println!(
        "| client | direct median / p99 | through the recorder median / p99 | added (median) |"
    );
    println!("|---|---|---|---|");
    for (name, client) in &clients {
        // A warm-up each way: connections, caches, the Python interpreter's imports.
        let (Some(_), Some(_)) = (client(&upstream, 20), client(&proxy, 20)) else {
            println!("| {name} | not run (not installed) | | |");
            continue;
        };
        let (Some(direct), Some(through)) = (client(&upstream, n), client(&proxy, n)) else {
            println!("| {name} | failed | | |");
            continue;
        };
        let (d50, d99) = spread(direct);
        let (t50, t99) = spread(through);
        println!(
            "| {name} | {d50:.2} / {d99:.2} ms | {t50:.2} / {t99:.2} ms | {:.2} ms |",
            t50 - d50
        );
    }
    // SAFETY: a signal to the child this bench started.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGINT);
    }
    let _ = child.wait();
}
