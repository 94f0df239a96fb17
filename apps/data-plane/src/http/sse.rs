//! Server-Sent Events as the API sends them: one JSON object per event, an
//! increasing `id:` on every event, a heartbeat comment every 15 s, and
//! headers that keep proxies from buffering.

use std::convert::Infallible;
use std::time::Duration;

use axum::http::HeaderValue;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use data_plane_runs::RunEvent;
use futures::Stream;
use futures::StreamExt;
use serde::Serialize;
use serde_json::Value;

/// Which stream a run's events are sent as: this server's events, or the
/// AI SDK's UI message stream (`ui_stream`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StreamFormat {
    Events,
    UiMessage,
}

/// How often an idle stream sends a comment so proxies keep it open.
pub const HEARTBEAT: Duration = Duration::from_secs(15);

/// One event: its type (the SSE `event:` name, also the `type` field of the
/// JSON) and its JSON body.
#[derive(Debug, Clone)]
pub struct StreamEvent {
    pub kind: String,
    pub data: Value,
}

impl StreamEvent {
    /// An event from anything that serialises to a JSON object with a
    /// `type` field (the registry's ToolEvent, for one).
    pub fn tagged<T: Serialize>(value: &T) -> StreamEvent {
        let data = serde_json::to_value(value).unwrap_or(Value::Null);
        let kind = data
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("message")
            .to_string();
        StreamEvent { kind, data }
    }

    /// An event of `kind` whose body gets a `type` field added.
    pub fn new(kind: &str, mut data: Value) -> StreamEvent {
        if let Value::Object(map) = &mut data {
            map.insert("type".into(), Value::String(kind.into()));
        }
        StreamEvent {
            kind: kind.to_string(),
            data,
        }
    }
}

/// Wraps a stream of events into the HTTP response, numbering them.
pub fn response<S>(events: S) -> Response
where
    S: Stream<Item = StreamEvent> + Send + 'static,
{
    numbered(
        events
            .enumerate()
            .map(|(i, e)| (i as i64 + 1, e.kind, e.data)),
    )
}

/// A run's events as the HTTP response, each under its own number (what a
/// client sends back as `Last-Event-ID`).
pub fn run_events<S>(events: S) -> Response
where
    S: Stream<Item = RunEvent> + Send + 'static,
{
    numbered(events.map(|e| (e.seq, e.kind, e.data)))
}

fn numbered<S>(events: S) -> Response
where
    S: Stream<Item = (i64, String, Value)> + Send + 'static,
{
    let events = events.map(|(id, kind, data)| {
        Ok::<_, Infallible>(
            Event::default()
                .id(id.to_string())
                .event(kind)
                .data(data.to_string()),
        )
    });
    let mut response = Sse::new(events)
        .keep_alive(KeepAlive::new().interval(HEARTBEAT).text("heartbeat"))
        .into_response();
    let headers = response.headers_mut();
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    headers.insert(
        axum::http::header::CACHE_CONTROL,
        HeaderValue::from_static("no-cache, no-transform"),
    );
    response
}

/// Whether the request asks for an event stream.
pub fn wants_stream(headers: &axum::http::HeaderMap) -> bool {
    headers
        .get_all(axum::http::header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.contains("text/event-stream"))
}
