//! A fake OpenAI-compatible chat endpoint on 127.0.0.1 for tests: it answers
//! `POST /v1/chat/completions` from a queue of scripted replies, writing
//! OpenAI's `chat.completion.chunk` stream byte for byte, records every
//! request body, and notices when the client hangs up mid-reply.
//!
//! It speaks HTTP/1.1 on a bare socket, the test kit's server (this crate
//! stays free of HTTP servers), and closes each connection after its reply,
//! so every model request is one connection the test can watch.
// Test support: failing loudly is what a broken fake should do.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use data_plane_testkit::http::{Chunk, Handler, Request, Response, Server};
use serde_json::{Value, json};
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
    format!("http://{}/v1", data_plane_testkit::unused_addr())
}

/// Answers a request from its body when the script is empty (see
/// [`FakeModel::answering`]).
type Responder = Box<dyn Fn(&Value) -> Reply + Send + Sync>;

#[derive(Default)]
struct Shared {
    script: Mutex<VecDeque<Reply>>,
    responder: Mutex<Option<Responder>>,
    requests: Mutex<Vec<Value>>,
    /// The `Authorization` header of each request ("" when absent).
    authorizations: Mutex<Vec<String>>,
    /// Connections the client closed before its reply was complete.
    dropped: AtomicUsize,
    changed: Notify,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("script", &self.script)
            .field("dropped", &self.dropped)
            .finish_non_exhaustive()
    }
}

/// The fake endpoint; stops when dropped.
#[derive(Debug)]
pub struct FakeModel {
    server: Server,
    shared: Arc<Shared>,
}

impl FakeModel {
    /// Listens on 127.0.0.1:0.
    pub async fn start() -> FakeModel {
        let shared = Arc::new(Shared::default());
        let server = Server::start(Endpoint(shared.clone())).await;
        FakeModel { server, shared }
    }

    /// The base URL to configure (`…/v1`).
    pub fn base_url(&self) -> String {
        self.server.url("/v1")
    }
    /// Answers every request the script has no reply for with `respond`
    /// of its body: a model whose answers depend on the conversation, for
    /// tests whose requests come in no set order (many runs at once, a run
    /// asked again by another replica).
    pub fn answering(&self, respond: impl Fn(&Value) -> Reply + Send + Sync + 'static) {
        *self.shared.responder.lock().unwrap() = Some(Box::new(respond));
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

/// The server's side of the fake: answers from the script, records requests.
struct Endpoint(Arc<Shared>);

impl Handler for Endpoint {
    fn respond(&self, request: Request) -> Response {
        let shared = &self.0;
        let reply = if request.path != "/v1/chat/completions" {
            Reply::Status {
                status: 404,
                body: json!({"error": {"message": format!("fake model: no route {}", request.path), "type": "invalid_request_error"}}).to_string(),
            }
        } else {
            let value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
            let answered = shared.responder.lock().unwrap().as_ref().map(|r| r(&value));
            shared.requests.lock().unwrap().push(value);
            shared.authorizations.lock().unwrap().push(
                request
                    .header("authorization")
                    .unwrap_or_default()
                    .to_string(),
            );
            let scripted = shared.script.lock().unwrap().pop_front();
            scripted.or(answered).unwrap_or(Reply::Status {
                status: 500,
                body: json!({"error": {"message": "fake model: no scripted reply left", "type": "server_error"}}).to_string(),
            })
        };
        shared.changed.notify_waiters();
        match reply {
            Reply::Status { status, body } => Response::whole(
                status,
                vec![("content-type".into(), "application/json".into())],
                body,
            ),
            Reply::Raw(bytes) => Response::Raw(bytes),
            Reply::Stream(pieces) => Response::chunks(
                200,
                vec![
                    (
                        "content-type".into(),
                        "text/event-stream; charset=utf-8".into(),
                    ),
                    ("cache-control".into(), "no-cache".into()),
                ],
                pieces.into_iter().map(|piece| match piece {
                    Piece::Chunk(value) => Chunk::Bytes(format!("data: {value}\n\n").into_bytes()),
                    Piece::Done => Chunk::Bytes(b"data: [DONE]\n\n".to_vec()),
                    Piece::Bytes(text) => Chunk::Bytes(text.into_bytes()),
                    Piece::Pause(d) => Chunk::Pause(d),
                    Piece::Hang => Chunk::Hang,
                }),
            ),
        }
    }

    fn finished(&self, complete: bool) {
        if !complete {
            self.0.dropped.fetch_add(1, Ordering::SeqCst);
        }
        self.0.changed.notify_waiters();
    }
}
