//! Runs benchmark: what recording a chat turn's events costs, and how fast
//! a recorded run replays. The real router on 127.0.0.1, a fresh test
//! database and the fake OpenAI-compatible model, in one process. Prints
//! `name value` lines:
//!
//! - per streamed chunk through `/v1/chat` (a run: numbered, kept in the
//!   ring, recorded) against the stream as it was before runs, rebuilt here
//!   as a route that runs the same agent into a bounded channel and the same
//!   SSE encoding with nothing recorded; the difference is what recording
//!   adds per event, their quotient the ratio;
//! - how long after the last text chunk the client reads `done`, both ways:
//!   a run's last event is sent once the table holds it and the run's end,
//!   so whoever reads `done` finds the run ended;
//! - replay throughput of a finished run: events per second read back over
//!   HTTP (`GET /v1/runs/{id}/events`), and straight from the table through
//!   the store (pages of 256, as readers read).
// A benchmark fails loudly: there is no caller to hand an error to.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::convert::Infallible;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use axum::response::IntoResponse;
use data_plane::auth::{JwtKeys, ServiceTokens};
use data_plane::state::AppState;
use data_plane_agent::testing::{FakeModel, text_reply};
use data_plane_agent::{Agent, AgentConfig, AgentEvent, ChatRequest, EventSink};
use data_plane_registry::{Permission as ToolPermission, ToolContext};
use data_plane_search::KeywordIndex;
use data_plane_store::Scope;
use data_plane_store::identity::{self, Permission};
use data_plane_store::runs as store;
use data_plane_store::testing::TestDatabase;
use eventsource_stream::Eventsource;
use futures::StreamExt;
use serde_json::json;
use tokio::sync::mpsc;
use uuid::Uuid;

#[path = "shared/router.rs"]
mod router;

/// Text chunks of each measured reply.
const CHUNKS: usize = 5000;
/// Replies measured each way (median taken).
const RUNS: usize = 10;
/// Events of the run replayed (a reply of this many chunks, plus `run` and
/// `done`).
const REPLAY_CHUNKS: usize = 20_000;

struct Bench {
    _test: TestDatabase,
    state: AppState,
    user: Uuid,
    token: String,
    http: reqwest::Client,
}

async fn bench() -> Bench {
    let test = TestDatabase::create().await;
    let db = test.db.clone();
    let mut tx = db.begin(Scope::System).await.unwrap();
    let user = identity::upsert_user(&mut tx, "bench@example.com", Some(Permission::User))
        .await
        .unwrap()
        .id;
    tx.commit().await.unwrap();
    let jwt = JwtKeys::new(b"bench-secret-bench-secret-bench-secret!");
    let state = AppState::new(
        db,
        KeywordIndex::in_memory().unwrap(),
        data_plane_testkit::embedder(),
        jwt.clone(),
        ServiceTokens::parse("").unwrap(),
        Arc::new(data_plane_web::fetch::Fetcher::new(
            data_plane_web::fetch::FetchConfig::default(),
        )),
        Default::default(),
    )
    .unwrap()
    .with_chat_limits(0, 0)
    .with_runs(data_plane_runs::RunsConfig {
        max_events: 1_000_000,
        ..Default::default()
    });
    let token = jwt
        .issue(
            user,
            "bench@example.com",
            Permission::User,
            Duration::from_secs(3600),
        )
        .unwrap();
    Bench {
        _test: test,
        state,
        user,
        token,
        http: reqwest::Client::new(),
    }
}

/// The agent's events into a bounded channel, as `/v1/chat` streamed them
/// before runs.
struct ChannelSink(mpsc::Sender<(String, serde_json::Value)>);

#[async_trait]
impl EventSink for ChannelSink {
    async fn emit(&self, event: AgentEvent) -> bool {
        let data = serde_json::to_value(&event).unwrap();
        let kind = data["type"].as_str().unwrap_or("message").to_string();
        self.0.send((kind, data)).await.is_ok()
    }
}

/// `/baseline`: the same agent, the same SSE encoding, nothing recorded.
async fn baseline(agent: Arc<Agent>, user: Uuid) -> axum::response::Response {
    let (tx, rx) = mpsc::channel(64);
    tokio::spawn(async move {
        let ctx = ToolContext::new(user, None, ToolPermission::User);
        let request = ChatRequest {
            messages: vec![
                serde_json::from_value(json!({"role": "user", "content": "hi"})).unwrap(),
            ],
            ..ChatRequest::default()
        };
        let sink = ChannelSink(tx.clone());
        let cancel = tokio_util::sync::CancellationToken::new();
        let outcome = agent.run(request, &ctx, &sink, &cancel).await.unwrap();
        let _ = tx
            .send((
                "done".into(),
                json!({"type": "done", "reason": outcome.reason, "steps": outcome.steps}),
            ))
            .await;
    });
    let events =
        futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|e| (e, rx)) })
            .enumerate()
            .map(|(i, (kind, data))| {
                Ok::<_, Infallible>(
                    axum::response::sse::Event::default()
                        .id((i + 1).to_string())
                        .event(kind)
                        .data(data.to_string()),
                )
            });
    axum::response::sse::Sse::new(events).into_response()
}

async fn serve(b: &Bench, model: &FakeModel) -> String {
    let mut config = AgentConfig::new(model.base_url(), "bench-model");
    config.idle_timeout = Duration::from_secs(3600);
    config.turn_deadline = None;
    let state = b.state.clone().with_agent(config).unwrap();
    let agent = state.agent.clone().unwrap();
    let user = b.user;
    let app = data_plane::http::app(state).route(
        "/baseline",
        axum::routing::post(move || baseline(agent.clone(), user)),
    );
    router::serve(app.with_state::<()>(())).await
}

/// Seconds from the first to the last text event, text events, the run id.
/// The span from the first text chunk to the last, how many there were,
/// how long after the last the stream's last event came, and the run id.
async fn read(r: reqwest::Response) -> (f64, usize, f64, Option<String>) {
    assert_eq!(r.status(), 200);
    let run_id = r
        .headers()
        .get("x-run-id")
        .map(|v| v.to_str().unwrap().to_string());
    let mut stream = r.bytes_stream().eventsource();
    let (mut first, mut last, mut count) = (None, None, 0);
    while let Some(event) = stream.next().await {
        let event = event.unwrap();
        if event.event == "text_delta" {
            let at = Instant::now();
            first.get_or_insert(at);
            last = Some(at);
            count += 1;
        }
    }
    let ended = last.unwrap().elapsed().as_secs_f64();
    let span = last.unwrap().duration_since(first.unwrap()).as_secs_f64();
    (span, count, ended, run_id)
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

async fn post(b: &Bench, url: &str) -> reqwest::Response {
    b.http
        .post(url)
        .bearer_auth(&b.token)
        .json(&json!({ "messages": [{ "role": "user", "content": "hi" }] }))
        .send()
        .await
        .unwrap()
}

/// Waits until the run's row says it ended; how long that took.
async fn until_recorded(b: &Bench, run_id: Uuid) -> Duration {
    let started = Instant::now();
    loop {
        let row = store::get(&b.state.db, Scope::System, run_id)
            .await
            .unwrap()
            .unwrap();
        if row.finished_at.is_some() {
            return started.elapsed();
        }
        tokio::time::sleep(Duration::from_micros(200)).await;
    }
}

async fn per_chunk(b: &Bench, model: &FakeModel, base: &str) {
    let parts: Vec<String> = (0..CHUNKS).map(|i| format!("w{i} ")).collect();
    let parts: Vec<&str> = parts.iter().map(String::as_str).collect();
    let (mut before, mut now) = (Vec::new(), Vec::new());
    let (mut end_before, mut end_now, mut lag) = (Vec::new(), Vec::new(), Vec::new());
    // One of each first, to warm connections and the registry.
    for warm in [true, false] {
        for _ in 0..if warm { 1 } else { RUNS } {
            model.push(text_reply(&parts));
            let (span, count, ended, _) = read(post(b, &format!("{base}/baseline")).await).await;
            assert_eq!(count, CHUNKS);
            if !warm {
                before.push(span * 1e6 / CHUNKS as f64);
                end_before.push(ended * 1e3);
            }
            model.push(text_reply(&parts));
            let (span, count, ended, run) = read(post(b, &format!("{base}/v1/chat")).await).await;
            assert_eq!(count, CHUNKS);
            let waited = until_recorded(b, run.unwrap().parse().unwrap()).await;
            if !warm {
                now.push(span * 1e6 / CHUNKS as f64);
                end_now.push(ended * 1e3);
                lag.push(waited.as_secs_f64() * 1e3);
            }
        }
    }
    let before = median(&mut before);
    let now = median(&mut now);
    println!("runs_chunks_per_reply {CHUNKS}");
    println!("runs_chunk_stream_before_runs_us {before:.2}");
    println!("runs_chunk_through_run_us {now:.2}");
    println!("runs_recording_added_per_event_us {:.2}", now - before);
    println!("runs_recording_ratio {:.2}", now / before);
    println!(
        "runs_done_after_last_chunk_before_runs_ms {:.1}",
        median(&mut end_before)
    );
    println!(
        "runs_done_after_last_chunk_through_run_ms {:.1}",
        median(&mut end_now)
    );
    // Zero when the run's end is recorded by the time its client has `done`.
    println!("runs_recorded_after_done_ms {:.1}", median(&mut lag));
}

async fn replay(b: &Bench, model: &FakeModel, base: &str) {
    let parts: Vec<String> = (0..REPLAY_CHUNKS).map(|i| format!("w{i} ")).collect();
    let parts: Vec<&str> = parts.iter().map(String::as_str).collect();
    model.push(text_reply(&parts));
    let (_, count, _, run) = read(post(b, &format!("{base}/v1/chat")).await).await;
    assert_eq!(count, REPLAY_CHUNKS);
    let run_id: Uuid = run.unwrap().parse().unwrap();
    until_recorded(b, run_id).await;
    let events = REPLAY_CHUNKS + 2;
    let mut http = Vec::new();
    let mut table = Vec::new();
    for _ in 0..5 {
        let started = Instant::now();
        let r = b
            .http
            .get(format!("{base}/v1/runs/{run_id}/events?after=0"))
            .bearer_auth(&b.token)
            .send()
            .await
            .unwrap();
        let got = r
            .bytes_stream()
            .eventsource()
            .fold(0usize, |n, _| async move { n + 1 })
            .await;
        assert_eq!(got, events, "the replay holds every event");
        http.push(events as f64 / started.elapsed().as_secs_f64());

        let started = Instant::now();
        let (mut after, mut read) = (0, 0);
        loop {
            let page = store::events_after(&b.state.db, Scope::User(b.user), run_id, after, 256)
                .await
                .unwrap();
            let Some(last) = page.last() else { break };
            after = last.seq;
            read += page.len();
        }
        assert_eq!(read, events);
        table.push(events as f64 / started.elapsed().as_secs_f64());
    }
    let mut tx = b.state.db.begin(Scope::System).await.unwrap();
    let (bytes, rows): (i64, i64) = sqlx::query_as(
        "SELECT pg_total_relation_size('run_events'), (SELECT count(*) FROM run_events)",
    )
    .fetch_one(&mut *tx)
    .await
    .unwrap();
    tx.commit().await.unwrap();
    println!("runs_table_rows {rows}");
    println!(
        "runs_table_bytes_per_event {:.0}",
        bytes as f64 / rows.max(1) as f64
    );
    println!("runs_replay_events {events}");
    println!("runs_replay_http_events_per_s {:.0}", median(&mut http));
    println!("runs_replay_table_events_per_s {:.0}", median(&mut table));
}

#[tokio::main]
async fn main() {
    let b = bench().await;
    let model = FakeModel::start().await;
    let base = serve(&b, &model).await;
    per_chunk(&b, &model, &base).await;
    replay(&b, &model, &base).await;
}
