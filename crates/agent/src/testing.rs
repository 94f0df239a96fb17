//! A fake OpenAI-compatible chat endpoint on 127.0.0.1 for tests: it answers
//! `POST /v1/chat/completions` from a queue of scripted replies, writing
//! OpenAI's `chat.completion.chunk` stream byte for byte, records every
//! request body, and notices when the client hangs up mid-reply.
//!
//! It speaks HTTP/1.1 on a bare socket (this crate stays free of HTTP
//! servers) and closes each connection after its reply, so every model
//! request is one connection the test can watch.
// Test support: failing loudly is what a broken fake should do.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::net::tcp::OwnedReadHalf;
use tokio::sync::Notify;

/// One scripted answer to one request.
#[derive(Debug, Clone)]
pub enum Reply {
    /// `200 text/event-stream`, then the pieces in order, then the connection closes.
    Stream(Vec<Piece>),
    /// A complete non-streamed answer with this status and JSON or text body.
    Status { status: u16, body: String },
    /// These bytes as the whole response, status line included (or not).
    Raw(Vec<u8>),
}

/// A part of a streamed answer.
#[derive(Debug, Clone)]
pub enum Piece {
    /// `data: {json}\n\n`.
    Chunk(Value),
    /// `data: [DONE]\n\n`.
    Done,
    /// Written as is.
    Bytes(String),
    /// Waits before the next piece.
    Pause(Duration),
    /// Sends nothing more and keeps the connection open until the client closes it.
    Hang,
}

const COMPLETION_ID: &str = "chatcmpl-AbC123fake";
const MODEL: &str = "gpt-4o-mini-2024-07-18";
const CREATED: u64 = 1_732_000_000;

/// A chunk with one choice carrying `delta` and `finish_reason`, as OpenAI writes it.
pub fn chunk(delta: Value, finish_reason: Option<&str>) -> Value {
    json!({
        "id": COMPLETION_ID,
        "object": "chat.completion.chunk",
        "created": CREATED,
        "model": MODEL,
        "service_tier": "default",
        "system_fingerprint": "fp_0ba0d124f1",
        "choices": [{
            "index": 0,
            "delta": delta,
            "logprobs": null,
            "finish_reason": finish_reason,
        }],
        "usage": null,
        "obfuscation": "x1y2",
    })
}

/// The final usage chunk (`stream_options.include_usage`): no choices.
pub fn usage_chunk(prompt_tokens: u32, completion_tokens: u32) -> Value {
    json!({
        "id": COMPLETION_ID,
        "object": "chat.completion.chunk",
        "created": CREATED,
        "model": MODEL,
        "service_tier": "default",
        "system_fingerprint": "fp_0ba0d124f1",
        "choices": [],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
            "prompt_tokens_details": { "cached_tokens": 0, "audio_tokens": 0 },
            "completion_tokens_details": {
                "reasoning_tokens": 0,
                "audio_tokens": 0,
                "accepted_prediction_tokens": 0,
                "rejected_prediction_tokens": 0
            }
        },
        "obfuscation": "z9",
    })
}

/// A text answer streamed in these parts: role chunk, one chunk per part,
/// `finish_reason: stop`, usage, `[DONE]`.
pub fn text_reply(parts: &[&str]) -> Reply {
    let mut pieces = vec![Piece::Chunk(chunk(
        json!({ "role": "assistant", "content": "", "refusal": null }),
        None,
    ))];
    for part in parts {
        pieces.push(Piece::Chunk(chunk(json!({ "content": part }), None)));
    }
    pieces.push(Piece::Chunk(chunk(json!({}), Some("stop"))));
    pieces.push(Piece::Chunk(usage_chunk(20, parts.len() as u32)));
    pieces.push(Piece::Done);
    Reply::Stream(pieces)
}

/// One native tool call as the model streams it: its id and name, then its
/// arguments in these fragments.
#[derive(Debug, Clone)]
pub struct ScriptedCall<'a> {
    pub id: &'a str,
    pub name: &'a str,
    pub fragments: &'a [&'a str],
}

/// Tool calls as OpenAI streams them: the id, type and name only on each
/// call's first delta (with empty arguments), then argument fragments that
/// carry only the index, `finish_reason: tool_calls`, usage, `[DONE]`.
pub fn tool_calls_reply(calls: &[ScriptedCall<'_>]) -> Reply {
    let mut pieces = Vec::new();
    for (index, call) in calls.iter().enumerate() {
        let mut delta = json!({
            "tool_calls": [{
                "index": index,
                "id": call.id,
                "type": "function",
                "function": { "name": call.name, "arguments": "" }
            }]
        });
        if index == 0 {
            delta["role"] = json!("assistant");
            delta["content"] = Value::Null;
            delta["refusal"] = Value::Null;
        }
        pieces.push(Piece::Chunk(chunk(delta, None)));
        for fragment in call.fragments {
            pieces.push(Piece::Chunk(chunk(
                json!({ "tool_calls": [{ "index": index, "function": { "arguments": fragment } }] }),
                None,
            )));
        }
    }
    pieces.push(Piece::Chunk(chunk(json!({}), Some("tool_calls"))));
    pieces.push(Piece::Chunk(usage_chunk(40, 12)));
    pieces.push(Piece::Done);
    Reply::Stream(pieces)
}

/// A base URL on loopback where nothing listens (a port just given back).
pub async fn unused_base_url() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    format!("http://{addr}/v1")
}

#[derive(Debug, Default)]
struct Shared {
    script: Mutex<VecDeque<Reply>>,
    requests: Mutex<Vec<Value>>,
    /// The `Authorization` header of each request ("" when absent).
    authorizations: Mutex<Vec<String>>,
    /// Connections the client closed before its reply was complete.
    dropped: AtomicUsize,
    changed: Notify,
}

/// The fake endpoint; stops when dropped.
#[derive(Debug)]
pub struct FakeModel {
    addr: SocketAddr,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FakeModel {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FakeModel {
    /// Listens on 127.0.0.1:0.
    pub async fn start() -> FakeModel {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let shared = Arc::new(Shared::default());
        let accept = shared.clone();
        let task = tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                tokio::spawn(serve(socket, accept.clone()));
            }
        });
        FakeModel { addr, shared, task }
    }

    /// The base URL to configure (`…/v1`).
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Queues the answer to the next request.
    pub fn push(&self, reply: Reply) {
        self.shared.script.lock().unwrap().push_back(reply);
    }

    /// The bodies of the requests received so far, in order.
    pub fn requests(&self) -> Vec<Value> {
        self.shared.requests.lock().unwrap().clone()
    }

    /// The `Authorization` header of each request, in order ("" when absent).
    pub fn authorizations(&self) -> Vec<String> {
        self.shared.authorizations.lock().unwrap().clone()
    }

    /// How many replies the client cut short by closing the connection.
    pub fn dropped(&self) -> usize {
        self.shared.dropped.load(Ordering::SeqCst)
    }

    /// Waits until `n` requests have arrived; false after `limit`.
    pub async fn wait_requests(&self, n: usize, limit: Duration) -> bool {
        self.wait(limit, || self.requests().len() >= n).await
    }

    /// Waits until the client has hung up on `n` replies; false after `limit`.
    pub async fn wait_dropped(&self, n: usize, limit: Duration) -> bool {
        self.wait(limit, || self.dropped() >= n).await
    }

    async fn wait(&self, limit: Duration, done: impl Fn() -> bool) -> bool {
        tokio::time::timeout(limit, async {
            loop {
                let changed = self.shared.changed.notified();
                if done() {
                    return;
                }
                changed.await;
            }
        })
        .await
        .is_ok()
    }
}

async fn serve(socket: tokio::net::TcpStream, shared: Arc<Shared>) {
    let (mut reader, mut writer) = socket.into_split();
    let Some((path, authorization, body)) = read_request(&mut reader).await else {
        return;
    };
    let reply = if path != "/v1/chat/completions" {
        Reply::Status {
            status: 404,
            body: json!({"error": {"message": format!("fake model: no route {path}"), "type": "invalid_request_error"}}).to_string(),
        }
    } else {
        let value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        shared.requests.lock().unwrap().push(value);
        shared.authorizations.lock().unwrap().push(authorization);
        shared.script.lock().unwrap().pop_front().unwrap_or(Reply::Status {
            status: 500,
            body: json!({"error": {"message": "fake model: no scripted reply left", "type": "server_error"}}).to_string(),
        })
    };
    shared.changed.notify_waiters();
    let complete = match reply {
        Reply::Status { status, body } => {
            let head = format!(
                "HTTP/1.1 {status} Scripted\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                body.len()
            );
            writer.write_all(head.as_bytes()).await.is_ok()
                && writer.write_all(body.as_bytes()).await.is_ok()
        }
        Reply::Raw(bytes) => writer.write_all(&bytes).await.is_ok(),
        Reply::Stream(pieces) => stream(&mut reader, &mut writer, pieces).await,
    };
    if complete {
        let _ = writer.shutdown().await;
    } else {
        shared.dropped.fetch_add(1, Ordering::SeqCst);
    }
    shared.changed.notify_waiters();
}

/// Writes the pieces; false when the client closed the connection first.
async fn stream(
    reader: &mut OwnedReadHalf,
    writer: &mut tokio::net::tcp::OwnedWriteHalf,
    pieces: Vec<Piece>,
) -> bool {
    let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\ncache-control: no-cache\r\nconnection: close\r\n\r\n";
    if writer.write_all(head.as_bytes()).await.is_err() {
        return false;
    }
    for piece in pieces {
        let bytes = match piece {
            Piece::Chunk(value) => format!("data: {value}\n\n"),
            Piece::Done => "data: [DONE]\n\n".to_string(),
            Piece::Bytes(text) => text,
            Piece::Pause(d) => {
                tokio::select! {
                    _ = tokio::time::sleep(d) => continue,
                    _ = closed(reader) => return false,
                }
            }
            Piece::Hang => {
                closed(reader).await;
                return false;
            }
        };
        if writer.write_all(bytes.as_bytes()).await.is_err() || writer.flush().await.is_err() {
            return false;
        }
    }
    true
}

/// Resolves when the client closes its side.
async fn closed(reader: &mut OwnedReadHalf) {
    let mut buf = [0u8; 256];
    loop {
        match reader.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
    }
}

/// The request's path, Authorization header and body (Content-Length framed).
async fn read_request(reader: &mut OwnedReadHalf) -> Option<(String, String, Vec<u8>)> {
    let mut buf = Vec::new();
    let mut tmp = [0u8; 8192];
    let header_end = loop {
        let n = reader.read(&mut tmp).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&tmp[..n]);
        if let Some(pos) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break pos + 4;
        }
    };
    let head = String::from_utf8_lossy(&buf[..header_end]).to_string();
    let path = head.split_whitespace().nth(1)?.to_string();
    let header = |name: &str| {
        head.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim()
                .eq_ignore_ascii_case(name)
                .then(|| v.trim().to_string())
        })
    };
    let length: usize = header("content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let authorization = header("authorization").unwrap_or_default();
    let mut body = buf[header_end..].to_vec();
    while body.len() < length {
        let n = reader.read(&mut tmp).await.ok()?;
        if n == 0 {
            return None;
        }
        body.extend_from_slice(&tmp[..n]);
    }
    Some((path, authorization, body))
}
