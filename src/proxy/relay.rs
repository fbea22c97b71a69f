//! The proxy's side of an exchange: the client's request passed on, the
//! upstream's answer passed back as it comes, and, for a model call, a copy
//! of both handed to the recorder once the exchange ends.
//!
//! A model call's exchange runs in a task of its own, so it ends as it
//! should (recorded) however the client's side ends: answered, gone away,
//! or cut at shutdown.

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use anyhow::Context as _;
use bytes::{Bytes, BytesMut};
use futures_util::StreamExt;
use http_body_util::{BodyExt, Full, StreamBody, combinators::BoxBody};
use hyper::body::{Frame, Incoming};
use hyper::{Request, Response, StatusCode};
use serde_json::json;
use tokio::sync::{mpsc, oneshot, watch};

use super::recorder::{Answer, Call, Queue};
use crate::import::Format;

/// How long a connection may take to send a request's headers: a client
/// stuck half-way (or thousands of them) holds nothing for long.
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// The most of a request body allocated before it arrives, whatever length
/// the client announces.
const MOST_UP_FRONT: usize = 256 << 20;

/// What every connection shares.
pub(super) struct Shared {
    client: reqwest::Client,
    openai: String,
    anthropic: String,
    queue: Queue,
    in_flight: AtomicUsize,
    idle: tokio::sync::Notify,
    stop: watch::Sender<bool>,
}

impl Shared {
    pub(super) fn new(openai: &str, anthropic: &str, queue: Queue) -> anyhow::Result<Shared> {
        let client = reqwest::Client::builder()
            // A redirect is the client's to follow: followed here, it would
            // carry the prompt and the key to another host.
            .redirect(reqwest::redirect::Policy::none())
            .tcp_nodelay(true)
            .build()
            .context("cannot make an HTTP client")?;
        Ok(Shared {
            client,
            openai: openai.trim_end_matches('/').to_string(),
            anthropic: anthropic.trim_end_matches('/').to_string(),
            queue,
            in_flight: AtomicUsize::new(0),
            idle: tokio::sync::Notify::new(),
            stop: watch::Sender::new(false),
        })
    }

    /// The model calls not yet handed to the recorder.
    pub(super) fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::SeqCst)
    }

    /// Returns once no model call is in flight.
    pub(super) async fn idle(&self) {
        loop {
            // Registered before the count is read, so the last one's news is not missed.
            let idle = self.idle.notified();
            if self.in_flight() == 0 {
                return;
            }
            idle.await;
        }
    }

    /// Tells every exchange in flight to end now and record what it has.
    pub(super) fn stop(&self) {
        self.stop.send_replace(true);
    }
}

/// A model call in flight, until it is dropped.
struct Flight(Arc<Shared>);

impl Flight {
    fn new(shared: &Arc<Shared>) -> Flight {
        shared.in_flight.fetch_add(1, Ordering::SeqCst);
        Flight(Arc::clone(shared))
    }
}

impl Drop for Flight {
    fn drop(&mut self) {
        if self.0.in_flight.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.0.idle.notify_waiters();
        }
    }
}

pub(super) async fn accept_loop(listener: tokio::net::TcpListener, shared: Arc<Shared>) {
    let mut failing = false;
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                failing = false;
                // Nagle's algorithm would hold a response's body back until
                // its head is acknowledged: 40 ms on a kept-alive connection.
                let _ = stream.set_nodelay(true);
                tokio::spawn(connection(stream, Arc::clone(&shared)));
            }
            Err(e) => {
                // Out of file descriptors, accept() fails at once until one
                // is freed: a pause, not a spin.
                if !failing {
                    super::warn(&format!("cannot accept a connection: {e}; trying again"));
                    failing = true;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

async fn connection(stream: tokio::net::TcpStream, shared: Arc<Shared>) {
    let io = hyper_util::rt::TokioIo::new(stream);
    let service = hyper::service::service_fn(move |req| handle(Arc::clone(&shared), req));
    let _ = hyper::server::conn::http1::Builder::new()
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(HEADER_TIMEOUT)
        .serve_connection(io, service)
        .await;
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
    } else if path.ends_with("/responses") || path.ends_with("/responses/compact") {
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
    let (parts, body) = req.into_parts();
    let path = parts
        .uri
        .path_and_query()
        .map_or("/".to_string(), |p| p.as_str().to_string());
    let header = |name: &str| {
        parts
            .headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    let length = header("content-length").and_then(|l| l.parse().ok());
    let body = match read_body(body, length).await {
        Ok(body) => body,
        Err(e) => return Ok(error(StatusCode::BAD_REQUEST, &e.to_string())),
    };
    // The one copy of the body: the upstream's request and the record
    // share it.
    let mut upstream = shared
        .client
        .request(parts.method.clone(), upstream_url(&shared, &path))
        .body(body.clone());
    for (name, value) in &parts.headers {
        let name = name.as_str();
        if !HOP_BY_HOP.contains(&name) && name != "host" && name != "x-ctxlens-session" {
            upstream = upstream.header(name, value);
        }
    }
    let format = format_of(&path).filter(|_| parts.method == hyper::Method::POST);
    let Some(format) = format else {
        return Ok(pass(upstream).await);
    };
    let call = Call {
        format,
        request: body,
        request_encoding: header("content-encoding"),
        session: header("x-ctxlens-session"),
        answer: None,
        failed: None,
        incomplete: None,
    };
    let (answer, response) = oneshot::channel();
    tokio::spawn(exchange(Flight::new(&shared), upstream, call, answer));
    Ok(response.await.unwrap_or_else(|_| {
        error(
            StatusCode::BAD_GATEWAY,
            "ctxlens record: the exchange ended without an answer",
        )
    }))
}

/// The request's body, held once: in one buffer, sized from the length the
/// client gives, as hyper's chunks come (collecting the chunks, then
/// joining them, would hold it twice).
async fn read_body(mut body: Incoming, length: Option<usize>) -> Result<Bytes, hyper::Error> {
    let mut buffer = BytesMut::with_capacity(length.unwrap_or(0).min(MOST_UP_FRONT));
    while let Some(frame) = body.frame().await {
        if let Ok(data) = frame?.into_data() {
            buffer.extend_from_slice(&data);
        }
    }
    Ok(buffer.freeze())
}

/// What is not a model call: passed on and back as it comes, unrecorded.
async fn pass(upstream: reqwest::RequestBuilder) -> Response<Body> {
    let reply = match upstream.send().await {
        Ok(reply) => reply,
        Err(e) => {
            // Without the URL: its query may carry a key.
            let message = format!(
                "ctxlens record: the upstream did not answer: {}",
                e.without_url()
            );
            return error(StatusCode::BAD_GATEWAY, &message);
        }
    };
    let head = head_of(&reply);
    let stream = reply
        .bytes_stream()
        .map(|chunk| chunk.map(Frame::data).map_err(std::io::Error::other));
    head.body(BodyExt::boxed(StreamBody::new(stream)))
        .unwrap_or_else(|_| error(StatusCode::BAD_GATEWAY, "bad upstream headers"))
}

/// The upstream's status and headers, for the client.
fn head_of(reply: &reqwest::Response) -> hyper::http::response::Builder {
    let mut head = Response::builder().status(reply.status().as_u16());
    for (name, value) in reply.headers() {
        if !HOP_BY_HOP.contains(&name.as_str()) {
            head = head.header(name, value);
        }
    }
    head
}

/// Resolves once recording stops.
async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|stopped| *stopped).await;
}

/// One model call, from the request to the record: the upstream's answer
/// goes to the client as it comes, a copy kept, and the whole goes to the
/// recorder, however it ended.
async fn exchange(
    flight: Flight,
    upstream: reqwest::RequestBuilder,
    mut call: Call,
    mut client: oneshot::Sender<Response<Body>>,
) {
    let shared = Arc::clone(&flight.0);
    let mut stop = shared.stop.subscribe();
    let reply = tokio::select! {
        reply = upstream.send() => reply,
        _ = client.closed() => {
            call.incomplete = Some("client gone");
            return shared.queue.record(call);
        }
        _ = stopped(&mut stop) => {
            let _ = client.send(error(StatusCode::SERVICE_UNAVAILABLE, "ctxlens record: stopped before the upstream answered"));
            call.incomplete = Some("shutdown");
            return shared.queue.record(call);
        }
    };
    let reply = match reply {
        Ok(reply) => reply,
        Err(e) => {
            let message = format!("the upstream did not answer: {}", e.without_url());
            let _ = client.send(error(
                StatusCode::BAD_GATEWAY,
                &format!("ctxlens record: {message}"),
            ));
            call.failed = Some(message);
            return shared.queue.record(call);
        }
    };
    let header = |name: &str| {
        reply
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    let mut answer = Answer {
        status: reply.status().as_u16(),
        encoding: header("content-encoding"),
        streamed: header("content-type").is_some_and(|t| t.contains("event-stream")),
        body: Vec::new(),
    };
    let (sender, receiver) = mpsc::channel(16);
    let body = BodyExt::boxed(StreamBody::new(frames(receiver)));
    let response = head_of(&reply)
        .body(body)
        .unwrap_or_else(|_| error(StatusCode::BAD_GATEWAY, "bad upstream headers"));
    call.incomplete = if client.send(response).is_err() {
        Some("client gone")
    } else {
        relay(reply, &sender, &mut answer.body, &mut stop).await
    };
    call.answer = Some(answer);
    shared.queue.record(call);
    drop(flight);
}

/// Passes the upstream's body on chunk by chunk, keeping a copy in `copy`;
/// why it stopped short, if it did.
async fn relay(
    reply: reqwest::Response,
    sender: &mpsc::Sender<Result<Frame<Bytes>, std::io::Error>>,
    copy: &mut Vec<u8>,
    stop: &mut watch::Receiver<bool>,
) -> Option<&'static str> {
    let mut stream = reply.bytes_stream();
    loop {
        let chunk = tokio::select! {
            chunk = stream.next() => chunk,
            _ = sender.closed() => return Some("client gone"),
            _ = stopped(stop) => return Some("shutdown"),
        };
        match chunk {
            None => return None,
            Some(Ok(chunk)) => {
                copy.extend_from_slice(&chunk);
                tokio::select! {
                    sent = sender.send(Ok(Frame::data(chunk))) => {
                        if sent.is_err() {
                            return Some("client gone");
                        }
                    }
                    _ = stopped(stop) => return Some("shutdown"),
                }
            }
            Some(Err(e)) => {
                // The client sees the cut too, rather than a clean end.
                tokio::select! {
                    _ = sender.send(Err(std::io::Error::other(e))) => {}
                    _ = stopped(stop) => {}
                }
                return Some("upstream cut");
            }
        }
    }
}

/// The frames a channel receives, as a stream.
fn frames(
    mut receiver: mpsc::Receiver<Result<Frame<Bytes>, std::io::Error>>,
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
