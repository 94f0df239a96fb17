//! The model endpoint: one streamed chat-completion request, its chunks
//! read with first-byte and idle timeouts.
//!
//! async-openai supplies the wire types; the request itself goes out on our
//! own reqwest client. Its `create_stream` reads the response in a spawned
//! task that lives until the endpoint sends again (a stalled endpoint keeps
//! it, and its connection, forever after the caller has gone) and re-sends
//! the POST when the connection breaks (reqwest-eventsource's reconnect).
//! Here the response body is owned by the caller's future: dropping it
//! closes the connection at once, and nothing is ever sent twice.

use std::pin::Pin;
use std::time::Duration;

use async_openai::types::chat::{CreateChatCompletionRequest, CreateChatCompletionStreamResponse};
use eventsource_stream::{Event, EventStreamError, Eventsource};
use futures::{Stream, StreamExt};
use tokio::time::Instant;

use crate::{AgentConfig, AgentError};

/// Longest piece of an error body quoted in a message.
const QUOTE_CHARS: usize = 300;

type Events = Pin<Box<dyn Stream<Item = Result<Event, EventStreamError<reqwest::Error>>> + Send>>;

#[derive(Debug, Clone)]
pub(crate) struct ModelClient {
    http: reqwest::Client,
    url: String,
    api_key: Option<String>,
    first_byte_timeout: Duration,
    idle_timeout: Duration,
}

impl ModelClient {
    pub(crate) fn new(config: &AgentConfig) -> Result<ModelClient, AgentError> {
        let base = config.base_url.trim_end_matches('/');
        let parsed = reqwest::Url::parse(base)
            .map_err(|e| AgentError::Config(format!("model base url {base:?}: {e}")))?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(AgentError::Config(format!(
                "model base url {base:?} must be http or https"
            )));
        }
        if config.model.trim().is_empty() {
            return Err(AgentError::Config("the model name is empty".into()));
        }
        let http = reqwest::Client::builder()
            .connect_timeout(config.connect_timeout)
            .build()
            .map_err(|e| AgentError::Config(format!("building the http client: {e}")))?;
        Ok(ModelClient {
            http,
            url: format!("{base}/chat/completions"),
            api_key: config.api_key.clone().filter(|k| !k.is_empty()),
            first_byte_timeout: config.first_byte_timeout,
            idle_timeout: config.idle_timeout,
        })
    }

    /// Sends the request and waits for the answer to start streaming.
    pub(crate) async fn open(
        &self,
        request: &CreateChatCompletionRequest,
    ) -> Result<ChunkStream, AgentError> {
        let deadline = Instant::now() + self.first_byte_timeout;
        let mut builder = self.http.post(&self.url).json(request);
        if let Some(key) = &self.api_key {
            builder = builder.bearer_auth(key);
        }
        let response = match tokio::time::timeout_at(deadline, builder.send()).await {
            Err(_) => return Err(self.first_byte_elapsed()),
            Ok(Err(e)) => {
                return Err(AgentError::Unreachable {
                    url: self.url.clone(),
                    reason: error_chain(&e),
                });
            }
            Ok(Ok(response)) => response,
        };
        let status = response.status();
        if !status.is_success() {
            let body = tokio::time::timeout_at(deadline, response.text())
                .await
                .ok()
                .and_then(Result::ok)
                .unwrap_or_default();
            return Err(AgentError::Status {
                status: status.as_u16(),
                message: error_message(&body),
            });
        }
        let content_type = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string();
        if !content_type.contains("text/event-stream") {
            return Err(AgentError::BadResponse(format!(
                "content type {content_type:?} where text/event-stream was asked for"
            )));
        }
        Ok(ChunkStream {
            events: Box::pin(response.bytes_stream().eventsource()),
            deadline: Some(deadline),
            first_byte_timeout: self.first_byte_timeout,
            idle_timeout: self.idle_timeout,
            finished: false,
            saw_finish_reason: false,
        })
    }

    fn first_byte_elapsed(&self) -> AgentError {
        AgentError::FirstByteTimeout {
            secs: self.first_byte_timeout.as_secs(),
        }
    }
}

/// The chunks of one answer, in order.
pub(crate) struct ChunkStream {
    events: Events,
    /// Until the first chunk arrives, the first-byte deadline applies.
    deadline: Option<Instant>,
    first_byte_timeout: Duration,
    idle_timeout: Duration,
    finished: bool,
    saw_finish_reason: bool,
}

impl ChunkStream {
    /// The next chunk; `None` after `data: [DONE]`.
    pub(crate) async fn next(
        &mut self,
    ) -> Result<Option<CreateChatCompletionStreamResponse>, AgentError> {
        loop {
            if self.finished {
                return Ok(None);
            }
            let next = match self.deadline {
                Some(deadline) => tokio::time::timeout_at(deadline, self.events.next())
                    .await
                    .map_err(|_| AgentError::FirstByteTimeout {
                        secs: self.first_byte_timeout.as_secs(),
                    })?,
                None => tokio::time::timeout(self.idle_timeout, self.events.next())
                    .await
                    .map_err(|_| AgentError::IdleTimeout {
                        secs: self.idle_timeout.as_secs(),
                    })?,
            };
            self.deadline = None;
            let event = match next {
                // Some servers close without `[DONE]` once they sent a
                // finish reason; before one, the answer was cut off.
                None if self.saw_finish_reason => {
                    self.finished = true;
                    return Ok(None);
                }
                None => {
                    return Err(AgentError::Truncated(
                        "the connection closed before a finish reason or [DONE]".into(),
                    ));
                }
                Some(Err(EventStreamError::Transport(e))) => {
                    return Err(AgentError::Truncated(error_chain(&e)));
                }
                Some(Err(e)) => return Err(AgentError::BadResponse(e.to_string())),
                Some(Ok(event)) => event,
            };
            let data = event.data.trim();
            if data.is_empty() {
                continue;
            }
            if data == "[DONE]" {
                self.finished = true;
                return Ok(None);
            }
            let value: serde_json::Value = serde_json::from_str(data)
                .map_err(|e| AgentError::BadResponse(format!("{e} in {:?}", quote(data))))?;
            if let Some(error) = value.get("error") {
                return Err(AgentError::Upstream(error_message(&error.to_string())));
            }
            let chunk: CreateChatCompletionStreamResponse = serde_json::from_value(value)
                .map_err(|e| AgentError::BadResponse(format!("{e} in {:?}", quote(data))))?;
            if chunk.choices.iter().any(|c| c.finish_reason.is_some()) {
                self.saw_finish_reason = true;
            }
            return Ok(Some(chunk));
        }
    }
}

/// The `error.message` of an OpenAI error body, else the body itself, cut short.
fn error_message(body: &str) -> String {
    let parsed: Option<serde_json::Value> = serde_json::from_str(body).ok();
    let message = parsed.as_ref().and_then(|v| {
        v.get("error")
            .and_then(|e| e.get("message").or(Some(e)))
            .or_else(|| v.get("message"))
            .map(|m| m.as_str().map_or_else(|| m.to_string(), str::to_string))
    });
    match message {
        Some(m) => quote(&m),
        None if body.trim().is_empty() => "(empty body)".into(),
        None => quote(body.trim()),
    }
}

fn quote(text: &str) -> String {
    if text.chars().count() <= QUOTE_CHARS {
        text.to_string()
    } else {
        let cut: String = text.chars().take(QUOTE_CHARS).collect();
        format!("{cut}…")
    }
}

/// A reqwest error with its causes ("error sending request" alone says nothing).
fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        out.push_str(": ");
        out.push_str(&cause.to_string());
        source = cause.source();
    }
    out
}
