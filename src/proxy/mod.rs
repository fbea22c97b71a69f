//! `ctxlens record`: a local proxy between an agent and its LLM provider
//! that records every request as a model call of a log, as it arrives (see
//! the README, "Recording an agent").
//!
//! Requests reach the provider and responses the client byte for byte
//! (hop-by-hop headers aside), a streamed response chunk by chunk as it
//! comes; a copy is kept and, once the exchange ends, rebuilt into the
//! log as an import of a recording does: one call per request, its record
//! the request's messages, the history the union of what requests carried.
//! Headers are never written, so keys and tokens stay out of the log.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use anyhow::Context as _;
use bytes::Bytes;
use futures_util::StreamExt;
use http_body_util::{BodyExt, Full, StreamBody, combinators::BoxBody};
use hyper::body::{Frame, Incoming};
use hyper::{Request, Response, StatusCode};
use regex::Regex;
use serde_json::{Value, json};

use crate::import::api::{self, Exchange};
use crate::import::{Draft, Flushed, Format};
use crate::log::Writer;
use crate::model::Kind;

/// What `ctxlens record` is asked to do.
pub struct Options {
    pub out: PathBuf,
    pub listen: String,
    pub openai: String,
    pub anthropic: String,
    pub session: Option<String>,
    pub redact: Vec<Regex>,
    pub allow_remote: bool,
    pub command: Vec<String>,
}

/// Records until the command ends (its exit status is returned) or, without
/// one, until Ctrl-C (0).
pub fn run(options: Options) -> anyhow::Result<i32> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the recorder")?;
    runtime.block_on(serve(options))
}

/// One conversation being recorded: its draft, what of it is written, and
/// what tells its next request (the last request's messages, its system
/// prompt and first user message).
struct Live {
    format: Format,
    draft: Draft,
    done: Flushed,
    last: Vec<Value>,
    key: (Option<String>, Option<String>),
    named: Option<String>,
}

struct Recorder {
    writer: Option<Writer>,
    sessions: Vec<Live>,
    exchanges: usize,
}

struct Shared {
    recorder: Mutex<Recorder>,
    client: reqwest::Client,
    openai: String,
    anthropic: String,
    session: Option<String>,
    redact: Vec<Regex>,
    log: PathBuf,
    in_flight: AtomicUsize,
    idle: tokio::sync::Notify,
}

async fn serve(o: Options) -> anyhow::Result<i32> {
    let addr: SocketAddr = o
        .listen
        .parse()
        .with_context(|| format!("--listen {}: not an address (HOST:PORT)", o.listen))?;
    if !addr.ip().is_loopback() && !o.allow_remote {
        anyhow::bail!(
            "--listen {addr}: not a loopback address; anyone who can reach it could use your keys (give --allow-remote to mean it)"
        );
    }
    // Ctrl-C is ours from before anyone can send a request.
    let mut interrupt = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())
        .context("cannot take Ctrl-C")?;
    let writer = create_log(&o.out)?;
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen on {addr}"))?;
    let addr = listener.local_addr()?;
    if !addr.ip().is_loopback() {
        eprintln!("ctxlens record: warning: listening on {addr}, reachable from other machines");
    }
    eprintln!(
        "ctxlens record: listening on http://{addr}, recording to {}",
        o.out.display()
    );
    let shared = Arc::new(Shared {
        recorder: Mutex::new(Recorder {
            writer: Some(writer),
            sessions: Vec::new(),
            exchanges: 0,
        }),
        client: reqwest::Client::builder()
            .build()
            .context("cannot make an HTTP client")?,
        openai: o.openai.trim_end_matches('/').to_string(),
        anthropic: o.anthropic.trim_end_matches('/').to_string(),
        session: o.session.clone(),
        redact: o.redact.clone(),
        log: o.out.clone(),
        in_flight: AtomicUsize::new(0),
        idle: tokio::sync::Notify::new(),
    });
    let accept = tokio::spawn(accept_loop(listener, Arc::clone(&shared)));
    let status = match o.command.split_first() {
        Some((program, args)) => {
            let mut child = tokio::process::Command::new(program)
                .args(args)
                .env("OPENAI_BASE_URL", format!("http://{addr}/v1"))
                .env("ANTHROPIC_BASE_URL", format!("http://{addr}"))
                .spawn()
                .with_context(|| format!("cannot start {program}"))?;
            let status = tokio::select! {
                status = child.wait() => status?,
                _ = interrupt.recv() => {
                    let _ = child.kill().await;
                    child.wait().await?
                }
            };
            status.code().unwrap_or(130)
        }
        None => {
            interrupt.recv().await;
            0
        }
    };
    accept.abort();
    // What is in flight finishes (a few seconds at most), then the log ends.
    let wait = async {
        loop {
            // Registered before the count is read, so the last one's news is not missed.
            let idle = shared.idle.notified();
            if shared.in_flight.load(Ordering::SeqCst) == 0 {
                break;
            }
            idle.await;
        }
    };
    let _ = tokio::time::timeout(std::time::Duration::from_secs(10), wait).await;
    let mut recorder = shared.recorder.lock().expect("the recorder");
    let calls = recorder.exchanges;
    if let Some(writer) = recorder.writer.take() {
        writer
            .finish()
            .with_context(|| format!("{}: cannot finish the log", o.out.display()))?;
    }
    eprintln!(
        "ctxlens record: {calls} calls in {} sessions recorded to {}",
        recorder.sessions.len(),
        o.out.display()
    );
    Ok(status)
}

/// A new log, readable by its owner only: so are its -wal and -shm.
fn create_log(path: &Path) -> anyhow::Result<Writer> {
    if path.exists() {
        anyhow::bail!("{}: exists; record into a new log", path.display());
    }
    // SAFETY: umask is set and put back around the files' creation; no
    // other file of this process is made meanwhile.
    let previous = unsafe { libc::umask(0o077) };
    let writer = Writer::create(path);
    unsafe { libc::umask(previous) };
    Ok(writer?)
}

async fn accept_loop(listener: tokio::net::TcpListener, shared: Arc<Shared>) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let shared = Arc::clone(&shared);
        tokio::spawn(async move {
            let io = hyper_util::rt::TokioIo::new(stream);
            let service = hyper::service::service_fn(move |req| handle(Arc::clone(&shared), req));
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(io, service)
                .await;
        });
    }
}

type Body = BoxBody<Bytes, std::io::Error>;

/// Headers that belong to one connection, not to the message.
const HOP_BY_HOP: [&str; 8] = [
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

/// The API a recorded path is, where it is one.
fn format_of(path: &str) -> Option<Format> {
    let path = path.split('?').next().unwrap_or("");
    if path.ends_with("/chat/completions") {
        Some(Format::OpenaiChat)
    } else if path.ends_with("/responses") {
        Some(Format::OpenaiResponses)
    } else if path.ends_with("/messages") {
        Some(Format::Anthropic)
    } else {
        None
    }
}

/// The upstream URL of `path`: Anthropic's for its messages, OpenAI's for
/// the rest; an upstream ending in `/v1` takes the path without its own.
fn upstream_url(shared: &Shared, path: &str) -> String {
    let anthropic = path.starts_with("/v1/messages") || path.starts_with("/messages");
    let base = if anthropic {
        &shared.anthropic
    } else {
        &shared.openai
    };
    match path.strip_prefix("/v1") {
        Some(rest) if base.ends_with("/v1") => format!("{base}{rest}"),
        _ => format!("{base}{path}"),
    }
}

async fn handle(shared: Arc<Shared>, req: Request<Incoming>) -> Result<Response<Body>, Infallible> {
    shared.in_flight.fetch_add(1, Ordering::SeqCst);
    let response = forward(Arc::clone(&shared), req).await;
    // A streamed response's task ends the request itself, once relayed.
    if !response.1 {
        done(&shared);
    }
    Ok(response.0)
}

fn done(shared: &Shared) {
    if shared.in_flight.fetch_sub(1, Ordering::SeqCst) == 1 {
        shared.idle.notify_waiters();
    }
}

/// The response for the client, and whether a relaying task still holds
/// the request in flight.
async fn forward(shared: Arc<Shared>, req: Request<Incoming>) -> (Response<Body>, bool) {
    let (parts, body) = req.into_parts();
    let path = parts
        .uri
        .path_and_query()
        .map_or("/".to_string(), |p| p.as_str().to_string());
    let session = parts
        .headers
        .get("x-ctxlens-session")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let body = match body.collect().await {
        Ok(body) => body.to_bytes(),
        Err(e) => return (error(StatusCode::BAD_REQUEST, &e.to_string()), false),
    };
    let recorded = match format_of(&path) {
        Some(format) if parts.method == hyper::Method::POST => {
            match serde_json::from_slice::<Value>(&body) {
                Ok(request) if request.is_object() => Some((format, request)),
                _ => {
                    eprintln!(
                        "ctxlens record: {path}: the request body is not JSON: passed on, not recorded"
                    );
                    None
                }
            }
        }
        _ => None,
    };
    let mut upstream = shared
        .client
        .request(parts.method.clone(), upstream_url(&shared, &path))
        .body(body);
    for (name, value) in &parts.headers {
        let name = name.as_str();
        if !HOP_BY_HOP.contains(&name) && name != "host" && name != "x-ctxlens-session" {
            upstream = upstream.header(name, value);
        }
    }
    let reply = match upstream.send().await {
        Ok(reply) => reply,
        Err(e) => {
            if let Some((format, request)) = recorded {
                let meta =
                    json!({"error": {"message": format!("the upstream did not answer: {e}")}});
                record(&shared, format, request, None, session, Some(meta));
            }
            return (
                error(
                    StatusCode::BAD_GATEWAY,
                    &format!("ctxlens record: the upstream did not answer: {e}"),
                ),
                false,
            );
        }
    };
    let status = reply.status().as_u16();
    let mut response = Response::builder().status(status);
    for (name, value) in reply.headers() {
        if !HOP_BY_HOP.contains(&name.as_str()) {
            response = response.header(name, value);
        }
    }
    let streamed = reply
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| t.contains("event-stream"));
    let Some((format, request)) = recorded else {
        // Not recorded: relayed as it comes.
        let stream = reply
            .bytes_stream()
            .map(|chunk| chunk.map(Frame::data).map_err(std::io::Error::other));
        let body = BodyExt::boxed(StreamBody::new(stream));
        return (
            response
                .body(body)
                .unwrap_or_else(|_| error(StatusCode::BAD_GATEWAY, "bad upstream headers")),
            false,
        );
    };
    // Relayed chunk by chunk, a copy kept; recorded once it ends.
    let (sender, receiver) = tokio::sync::mpsc::channel::<Result<Frame<Bytes>, std::io::Error>>(16);
    let relay = Arc::clone(&shared);
    tokio::spawn(async move {
        let mut copy = Vec::new();
        let mut stream = reply.bytes_stream();
        let mut partial = false;
        while let Some(chunk) = stream.next().await {
            match chunk {
                Ok(chunk) => {
                    copy.extend_from_slice(&chunk);
                    if sender.send(Ok(Frame::data(chunk))).await.is_err() {
                        // The client went away: what came is recorded as partial.
                        partial = true;
                        break;
                    }
                }
                Err(e) => {
                    partial = true;
                    let _ = sender.send(Err(std::io::Error::other(e))).await;
                    break;
                }
            }
        }
        drop(sender);
        let text = String::from_utf8_lossy(&copy).into_owned();
        let response = if streamed {
            Value::String(text)
        } else {
            serde_json::from_str(&text).unwrap_or(Value::String(text))
        };
        let meta = outcome(status, partial, Some(&response));
        record(&relay, format, request, Some(response), session, meta);
        done(&relay);
    });
    let stream = tokio_stream(receiver);
    let body = BodyExt::boxed(StreamBody::new(stream));
    (
        response
            .body(body)
            .unwrap_or_else(|_| error(StatusCode::BAD_GATEWAY, "bad upstream headers")),
        true,
    )
}

/// The frames a channel receives, as a stream.
fn tokio_stream(
    mut receiver: tokio::sync::mpsc::Receiver<Result<Frame<Bytes>, std::io::Error>>,
) -> impl futures_util::Stream<Item = Result<Frame<Bytes>, std::io::Error>> {
    futures_util::stream::poll_fn(move |cx| receiver.poll_recv(cx))
}

fn error(status: StatusCode, message: &str) -> Response<Body> {
    let body = json!({"error": {"message": message, "type": "ctxlens_record"}}).to_string();
    Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(BodyExt::boxed(
            Full::new(Bytes::from(body)).map_err(|never: Infallible| match never {}),
        ))
        .expect("a fixed response")
}

/// Replaces what any of `patterns` matches in every string of `value`.
fn redact(value: &mut Value, patterns: &[Regex]) {
    match value {
        Value::String(text) => {
            for p in patterns {
                if p.is_match(text) {
                    *text = p.replace_all(text, "[redacted]").into_owned();
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|v| redact(v, patterns)),
        Value::Object(map) => map.values_mut().for_each(|v| redact(v, patterns)),
        _ => {}
    }
}

/// What else to keep with a recorded call: an error the provider answered
/// (or its not answering), or a response cut short.
fn outcome(status: u16, partial: bool, response: Option<&Value>) -> Option<Value> {
    if status >= 400 {
        let body = response.map_or(String::new(), |r| match r {
            Value::String(text) => text.chars().take(2000).collect(),
            other => other.to_string().chars().take(2000).collect(),
        });
        return Some(json!({"error": {"status": status, "body": body}}));
    }
    partial.then(|| json!({"partial": true}))
}

/// Records one exchange into the session it continues (or a new one) and
/// writes what that added to the log; `meta` goes with its call.
fn record(
    shared: &Shared,
    format: Format,
    mut request: Value,
    mut response: Option<Value>,
    header_session: Option<String>,
    meta: Option<Value>,
) {
    redact(&mut request, &shared.redact);
    if let Some(response) = &mut response {
        redact(response, &shared.redact);
    }
    let mut recorder = shared.recorder.lock().expect("the recorder");
    recorder.exchanges += 1;
    let n = recorder.exchanges;
    let exchange = api::whole(
        format,
        Exchange {
            request,
            response,
            at: format!("request {n}"),
        },
    );
    let ts = api::time(&exchange).unwrap_or_else(|| {
        chrono::DateTime::<chrono::Utc>::from(std::time::SystemTime::now())
            .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
    });
    let sent = api::events_of(format, &exchange.request);
    let messages = api::messages_of(format, &exchange.request)
        .as_array()
        .cloned()
        .unwrap_or_default();
    let key = (
        sent.iter()
            .find(|e| e.kind == Kind::System)
            .map(|e| e.content.to_string()),
        sent.iter()
            .find(|e| e.kind == Kind::User)
            .map(|e| e.content.to_string()),
    );
    let named = header_session.or_else(|| shared.session.clone());
    let at = continued(&recorder.sessions, format, &named, &messages, &key);
    let at = match at {
        Some(at) => at,
        None => {
            let id = match &named {
                Some(name)
                    if !recorder
                        .sessions
                        .iter()
                        .any(|s| s.draft.session.id == *name) =>
                {
                    name.clone()
                }
                _ => format!("recorded-{}", recorder.sessions.len() + 1),
            };
            let mut draft = Draft::default();
            draft.session.id = id;
            draft.session.created_at = ts.clone();
            draft.session.meta =
                Some(json!({"source": "ctxlens record", "api": format.name()}).to_string());
            draft.policy = Some(r#"{"preset":"recorded"}"#.into());
            recorder.sessions.push(Live {
                format,
                draft,
                done: Flushed::default(),
                last: Vec::new(),
                key: key.clone(),
                named: named.clone(),
            });
            recorder.sessions.len() - 1
        }
    };
    let mut warnings = Vec::new();
    match meta.as_ref() {
        Some(m) if m["partial"] == true => warnings.push(format!(
            "{}: the response was cut short (recorded as it came)",
            exchange.at
        )),
        Some(m) if m["error"].is_object() => warnings.push(format!(
            "{}: the provider answered an error: {}",
            exchange.at, m["error"]
        )),
        _ => {}
    }
    let Recorder {
        writer, sessions, ..
    } = &mut *recorder;
    let live = &mut sessions[at];
    api::step(format, &mut live.draft, &mut warnings, &exchange, &ts);
    if let (Some(meta), Some(call)) = (meta, live.draft.calls.last_mut()) {
        call.meta = Some(meta.to_string());
    }
    live.last = messages;
    live.key = key;
    if let Some(writer) = writer.as_mut()
        && let Err(e) = live.draft.flush(writer, &mut live.done)
    {
        eprintln!("ctxlens record: {}: {e:#}", shared.log.display());
    }
    for warning in warnings {
        eprintln!("ctxlens record: {warning}");
    }
}

/// The session a request continues: the one named, else the one whose last
/// request's messages it extends, else one it compacts (the same system
/// prompt and first user message, or some of its last request's messages
/// kept), newest first.
fn continued(
    sessions: &[Live],
    format: Format,
    named: &Option<String>,
    messages: &[Value],
    key: &(Option<String>, Option<String>),
) -> Option<usize> {
    let candidates = (0..sessions.len())
        .rev()
        .filter(|&i| sessions[i].format == format && sessions[i].named == *named);
    if named.is_some() {
        return candidates.clone().next();
    }
    let extends = |s: &Live| !s.last.is_empty() && messages.starts_with(&s.last);
    // A compaction keeps some of what the last request sent (its tail).
    let keeps_some = |s: &Live| {
        s.last
            .iter()
            .filter(|m| m["role"] != "system")
            .any(|m| messages.contains(m))
    };
    candidates
        .clone()
        .find(|&i| extends(&sessions[i]))
        .or_else(|| {
            candidates
                .clone()
                .find(|&i| key.1.is_some() && sessions[i].key == *key)
        })
        .or_else(|| candidates.clone().find(|&i| keeps_some(&sessions[i])))
}
