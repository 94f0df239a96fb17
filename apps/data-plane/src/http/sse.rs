//! Server-Sent Events as the API sends them: one JSON object per event
//! (typed until here, serialised by [`to_json`]), an increasing `id:` on
//! every event, a heartbeat comment every 15 s, and headers that keep
//! proxies from buffering.

use std::convert::Infallible;
use std::time::Duration;

use axum::http::HeaderValue;
use axum::response::sse::{self, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use data_plane_registry::ToolEvent;
use data_plane_runs::{Event, RunEvent, to_json};
use futures::Stream;
use futures::StreamExt;
use serde::Serialize;

/// Which stream a run's events are sent as: this server's events, or the
/// AI SDK's UI message stream (`ui_stream`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum StreamFormat {
    Events,
    UiMessage,
}

/// How often an idle stream sends a comment so proxies keep it open.
pub const HEARTBEAT: Duration = Duration::from_secs(15);

/// An event a stream sends: its name (the SSE `event:`, also the `type`
/// field of its JSON) and, serialised, its JSON body.
pub trait WireEvent: Serialize {
    fn name(&self) -> &str;
}

impl WireEvent for Event {
    fn name(&self) -> &str {
        Event::name(self)
    }
}

impl WireEvent for ToolEvent {
    fn name(&self) -> &str {
        ToolEvent::name(self)
    }
}

/// Wraps a stream of events into the HTTP response, numbering them.
pub fn response<S, E>(events: S) -> Response
where
    S: Stream<Item = E> + Send + 'static,
    E: WireEvent,
{
    numbered(
        events
            .enumerate()
            .map(|(i, e)| (i as i64 + 1, e.name().to_string(), to_json(&e))),
    )
}

/// A run's events as the HTTP response, each under its own number (what a
/// client sends back as `Last-Event-ID`).
pub fn run_events<S>(events: S) -> Response
where
    S: Stream<Item = RunEvent> + Send + 'static,
{
    numbered(events.map(|e| (e.seq, e.event.name().to_string(), to_json(&*e.event))))
}

/// Frames of (id, event name, JSON text).
fn numbered<S>(events: S) -> Response
where
    S: Stream<Item = (i64, String, String)> + Send + 'static,
{
    let events = events.map(|(id, name, json)| {
        Ok::<_, Infallible>(
            sse::Event::default()
                .id(id.to_string())
                .event(name)
                .data(json),
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
