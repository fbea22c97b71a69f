//! `ctxlens record`'s added latency: a 100 kB chat request answered by a
//! fake provider on 127.0.0.1, sent directly and through the recorder, one
//! at a time; prints the medians and their difference.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

/// One request on a fresh connection; the whole response read.
fn post(addr: &str, body: &str) {
    let mut stream = TcpStream::connect(addr).unwrap();
    write!(
        stream,
        "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut out = Vec::new();
    stream.read_to_end(&mut out).unwrap();
    assert!(out.starts_with(b"HTTP/1.1 200"));
}

fn provider() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut length = 0;
                loop {
                    let mut line = String::new();
                    reader.read_line(&mut line).unwrap();
                    if line.trim().is_empty() {
                        break;
                    }
                    if let Some(v) = line.to_lowercase().strip_prefix("content-length:") {
                        length = v.trim().parse().unwrap();
                    }
                }
                let mut body = vec![0; length];
                reader.read_exact(&mut body).unwrap();
                let reply = r#"{"id":"c","object":"chat.completion","created":1767225600,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":25000,"completion_tokens":1,"total_tokens":25001}}"#;
                let mut out = stream;
                let _ = write!(
                    out,
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{reply}",
                    reply.len()
                );
            });
        }
    });
    addr
}

fn median(addr: &str, body: &str, n: usize) -> Duration {
    let mut times: Vec<Duration> = (0..n)
        .map(|_| {
            let start = Instant::now();
            post(addr, body);
            start.elapsed()
        })
        .collect();
    times.sort();
    times[n / 2]
}

fn main() {
    let upstream = provider();
    let dir = tempfile::TempDir::new().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_ctxlens"))
        .args(["record", "-o"])
        .arg(dir.path().join("bench.db"))
        .args(["--listen", "127.0.0.1:0", "--openai-upstream"])
        .arg(format!("http://{upstream}"))
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stderr.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    let proxy = line
        .split("http://")
        .nth(1)
        .and_then(|r| r.split(',').next())
        .unwrap()
        .to_string();
    // One conversation growing by a 100 kB user message a request.
    let text = "lorem ipsum ".repeat(100_000 / 12);
    let body = format!(r#"{{"model":"m","messages":[{{"role":"user","content":"{text}"}}]}}"#);
    let n = 200;
    median(&upstream, &body, 20);
    let direct = median(&upstream, &body, n);
    let through = median(&proxy, &body, n);
    println!(
        "100 kB request, median of {n}: direct {:.2} ms, through ctxlens record {:.2} ms, added {:.2} ms",
        direct.as_secs_f64() * 1e3,
        through.as_secs_f64() * 1e3,
        (through.as_secs_f64() - direct.as_secs_f64()) * 1e3
    );
    // SAFETY: a signal to the child this bench started.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGINT);
    }
    let _ = child.wait();
}
