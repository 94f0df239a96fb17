//! Chat stream benchmark: the real router on 127.0.0.1 with a real test
//! database and the fake OpenAI-compatible model, driven by a real HTTP
//! client. Prints `name value` lines: the time from the model's first text
//! byte reaching the server to the matching `text_delta` at the client
//! (p50/p95/p99), the cost per streamed chunk against reading the model
//! directly, and the memory one idle stream holds on the server side.
//!
//! The idle-stream figures come from fresh child processes (this program
//! run again with `idle direct|chat K`) so that one measurement's freed
//! memory cannot hide the next one's growth.
// A benchmark fails loudly: there is no caller to hand an error to.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::serve::ListenerExt;
use data_plane::auth::{JwtKeys, ServiceTokens};
use data_plane::state::AppState;
use data_plane_agent::AgentConfig;
use data_plane_agent::testing::{FakeModel, Piece, Reply, chunk, text_reply};
use data_plane_search::KeywordIndex;
use data_plane_store::Scope;
use data_plane_store::identity::{self, Permission};
use data_plane_store::testing::TestDatabase;
use eventsource_stream::Eventsource;
use futures::{Stream, StreamExt};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const LATENCY_RUNS: usize = 200;
const LATENCY_WARMUP: usize = 20;
const CHUNKS: usize = 2000;
const CHUNK_RUNS: usize = 10;
const DEFAULT_IDLE_STREAMS: usize = 2000;
/// The first text of a latency run, as the fake writes it on the wire.
const FIRST_TEXT: &str = "first-delta";

struct Bench {
    // Dropping it removes the database; kept for the whole run.
    _test: TestDatabase,
    state: AppState,
    token: String,
    http: reqwest::Client,
}

async fn bench() -> Bench {
    let test = TestDatabase::create().await;
    let db = test.db.clone();
    let embedder = data_plane_testkit::embedder();
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
        embedder,
        jwt.clone(),
        ServiceTokens::parse("").unwrap(),
        Arc::new(data_plane_web::fetch::Fetcher::new(
            data_plane_web::fetch::FetchConfig::default(),
        )),
        Default::default(),
    )
    .unwrap()
    // One user opens every stream of the benchmark, far more than a person's limits.
    .with_chat_limits(0, 0)
    // A closed stream stops its run at once, as before runs had a grace
    // period, so the idle figures count open streams only.
    .with_runs(data_plane_runs::RunsConfig {
        grace: Duration::ZERO,
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
        token,
        http: reqwest::Client::new(),
    }
}

impl Bench {
    /// A server whose model is at `base_url`; idle streams must outlive the run.
    async fn server(&self, base_url: String) -> String {
        self.server_with(base_url, false).await
    }

    async fn server_with(&self, base_url: String, nodelay: bool) -> String {
        let mut config = AgentConfig::new(base_url, "bench-model");
        config.idle_timeout = Duration::from_secs(3600);
        serve(self.state.clone().with_agent(config).unwrap(), nodelay).await
    }

    async fn chat(&self, base: &str) -> reqwest::Response {
        let r = self
            .http
            .post(format!("{base}/v1/chat"))
            .bearer_auth(&self.token)
            .json(&json!({ "messages": [{ "role": "user", "content": "hi" }] }))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "POST /v1/chat");
        r
    }
}

/// Serves like `data-plane serve` (TCP_NODELAY on every accepted socket),
/// or with Nagle's algorithm left on, to show what that costs.
async fn serve(state: AppState, nodelay: bool) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let app = data_plane::http::app(state);
    if nodelay {
        let listener = listener.tap_io(|tcp| {
            let _ = tcp.set_nodelay(true);
        });
        tokio::spawn(async move { axum::serve(listener, app).await });
    } else {
        tokio::spawn(async move { axum::serve(listener, app).await });
    }
    base
}

/// A TCP relay between the server and the fake model that notes the moment
/// it hands the server the bytes carrying `marker`: the model's first text
/// byte as the server sees it, on the same clock as the client.
struct Relay {
    addr: SocketAddr,
    seen: Arc<Mutex<Option<Instant>>>,
}

impl Relay {
    async fn start(upstream: SocketAddr, marker: &'static [u8]) -> Relay {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(None));
        let noted = seen.clone();
        tokio::spawn(async move {
            while let Ok((down, _)) = listener.accept().await {
                let noted = noted.clone();
                tokio::spawn(async move {
                    let up = TcpStream::connect(upstream).await.unwrap();
                    down.set_nodelay(true).unwrap();
                    up.set_nodelay(true).unwrap();
                    let (mut down_read, mut down_write) = down.into_split();
                    let (mut up_read, mut up_write) = up.into_split();
                    tokio::spawn(async move {
                        let _ = tokio::io::copy(&mut down_read, &mut up_write).await;
                    });
                    let mut buf = vec![0u8; 64 * 1024];
                    // The marker may straddle two reads: search the tail of
                    // the previous read too.
                    let mut tail: Vec<u8> = Vec::new();
                    loop {
                        let n = match up_read.read(&mut buf).await {
                            Ok(0) | Err(_) => break,
                            Ok(n) => n,
                        };
                        tail.extend_from_slice(&buf[..n]);
                        if contains(&tail, marker) {
                            noted.lock().unwrap().get_or_insert_with(Instant::now);
                        }
                        let keep = tail.len().saturating_sub(marker.len());
                        tail.drain(..keep);
                        if down_write.write_all(&buf[..n]).await.is_err() {
                            break;
                        }
                    }
                    let _ = down_write.shutdown().await;
                });
            }
        });
        Relay { addr, seen }
    }

    fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    fn take(&self) -> Option<Instant> {
        self.seen.lock().unwrap().take()
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// Events as (type, data, arrival), read with a real SSE parser.
type Events = Pin<Box<dyn Stream<Item = (String, Value, Instant)> + Send>>;

fn events(r: reqwest::Response) -> Events {
    Box::pin(r.bytes_stream().eventsource().map(|event| {
        let event = event.unwrap();
        let at = Instant::now();
        let data = serde_json::from_str(&event.data).unwrap_or(Value::Null);
        (event.event, data, at)
    }))
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    percentile(values, 50.0)
}

/// The process's resident memory in bytes, from /proc/self/status.
fn rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    let kib: u64 = line
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap();
    kib * 1024
}

async fn first_event_latency(b: &Bench, model: &FakeModel, nodelay: bool) {
    let upstream: SocketAddr = model
        .base_url()
        .trim_start_matches("http://")
        .trim_end_matches("/v1")
        .parse()
        .unwrap();
    let marker: &'static [u8] = format!("\"content\":\"{FIRST_TEXT}\"").into_bytes().leak();
    let relay = Relay::start(upstream, marker).await;
    let base = b.server_with(relay.base_url(), nodelay).await;
    let mut samples = Vec::with_capacity(LATENCY_RUNS);
    for run in 0..LATENCY_WARMUP + LATENCY_RUNS {
        model.push(text_reply(&[FIRST_TEXT, " and the rest"]));
        relay.take();
        let mut stream = events(b.chat(&base).await);
        let mut first = None;
        while let Some((kind, data, at)) = stream.next().await {
            if kind == "text_delta" && first.is_none() {
                assert_eq!(
                    data["text"], FIRST_TEXT,
                    "the first delta is the first chunk"
                );
                first = Some(at);
            }
        }
        let first = first.expect("a text_delta arrived");
        let sent = relay.take().expect("the relay saw the first chunk");
        if run >= LATENCY_WARMUP {
            samples.push(first.duration_since(sent).as_secs_f64() * 1e3);
        }
    }
    samples.sort_by(f64::total_cmp);
    let name = if nodelay { "" } else { "_nagle" };
    for p in [50.0, 95.0, 99.0] {
        println!(
            "chat_first_byte_to_event{name}_p{p:.0}_ms {:.3}",
            percentile(&samples, p)
        );
    }
}

/// Seconds from the first to the last text chunk at the client.
async fn chunk_span(mut stream: Events) -> (f64, usize) {
    let (mut first, mut last, mut count) = (None, None, 0);
    while let Some((kind, data, at)) = stream.next().await {
        let text = if kind == "text_delta" {
            data["text"].as_str().is_some_and(|t| !t.is_empty())
        } else {
            data["choices"][0]["delta"]["content"]
                .as_str()
                .is_some_and(|t| !t.is_empty())
        };
        if text {
            first.get_or_insert(at);
            last = Some(at);
            count += 1;
        }
    }
    let span = last.unwrap().duration_since(first.unwrap()).as_secs_f64();
    (span, count)
}

async fn chunk_overhead(b: &Bench, model: &FakeModel) {
    let parts: Vec<String> = (0..CHUNKS).map(|i| format!("w{i}")).collect();
    let parts: Vec<&str> = parts.iter().map(String::as_str).collect();
    let base = b.server(model.base_url()).await;
    let (mut direct, mut through, mut events_through) = (Vec::new(), Vec::new(), 0);
    for _ in 0..CHUNK_RUNS {
        model.push(text_reply(&parts));
        let r = b
            .http
            .post(format!("{}/chat/completions", model.base_url()))
            .json(&json!({ "model": "bench-model", "stream": true }))
            .send()
            .await
            .unwrap();
        let (span, count) = chunk_span(events(r)).await;
        assert_eq!(count, CHUNKS, "every chunk read from the model");
        direct.push(span * 1e6 / CHUNKS as f64);

        model.push(text_reply(&parts));
        let (span, count) = chunk_span(events(b.chat(&base).await)).await;
        events_through = count;
        through.push(span * 1e6 / CHUNKS as f64);
    }
    let direct = median(&mut direct);
    let through = median(&mut through);
    println!("chat_chunks_per_reply {CHUNKS}");
    println!("chat_text_delta_events_per_reply {events_through}");
    println!("chat_chunk_model_direct_us {direct:.2}");
    println!("chat_chunk_through_server_us {through:.2}");
    println!("chat_chunk_overhead_us {:.2}", through - direct);
}

/// Child process: opens `k` streams that stall after their first text
/// chunk, directly to the fake model (`direct`) or through `/v1/chat`
/// (`chat`), and prints resident memory before, with them open and after
/// closing them.
async fn idle(mode: &str, k: usize) {
    let model = FakeModel::start().await;
    let b = bench().await;
    let stall = || {
        Reply::Stream(vec![
            Piece::Chunk(chunk(json!({ "role": "assistant", "content": "" }), None)),
            Piece::Chunk(chunk(json!({ "content": "idle" }), None)),
            Piece::Hang,
        ])
    };
    let base = b.server(model.base_url()).await;
    // One stream each way first, so that lazily built state (connection
    // pools, the registry's tool list) is not counted per stream.
    for _ in 0..2 {
        model.push(stall());
        drop(open(&b, &base, &model, mode).await);
    }
    assert!(model.wait_dropped(2, Duration::from_secs(10)).await);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let before = rss();
    for _ in 0..k {
        model.push(stall());
    }
    let started = Instant::now();
    let streams: Vec<_> = futures::stream::iter(0..k)
        .map(|_| open(&b, &base, &model, mode))
        .buffer_unordered(64)
        .collect()
        .await;
    let opened = started.elapsed();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let held = rss();
    drop(streams);
    assert!(
        model.wait_dropped(k + 2, Duration::from_secs(60)).await,
        "every stalled model reply was cancelled"
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    let after = rss();
    // Memory the allocator kept is either reused by the same load again
    // (no growth) or was leaked (growth like the first time).
    for _ in 0..k {
        model.push(stall());
    }
    let again: Vec<_> = futures::stream::iter(0..k)
        .map(|_| open(&b, &base, &model, mode))
        .buffer_unordered(64)
        .collect()
        .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let reheld = rss();
    drop(again);
    assert!(model.wait_dropped(2 * k + 2, Duration::from_secs(60)).await);
    println!(
        "{before} {held} {after} {:.3} {reheld}",
        opened.as_secs_f64()
    );
}

/// One stream whose first text has arrived at the client.
async fn open(b: &Bench, base: &str, model: &FakeModel, mode: &str) -> Events {
    let r = if mode == "chat" {
        b.chat(base).await
    } else {
        b.http
            .post(format!("{}/chat/completions", model.base_url()))
            .json(&json!({ "model": "bench-model", "stream": true }))
            .send()
            .await
            .unwrap()
    };
    let mut stream = events(r);
    loop {
        let (kind, data, _) = stream.next().await.expect("the first text arrives");
        if kind == "text_delta" || data["choices"][0]["delta"]["content"] == "idle" {
            return stream;
        }
    }
}

fn run_idle(mode: &str, k: usize) -> (u64, u64, u64, f64, u64) {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["idle", mode, &k.to_string()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "idle {mode}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let f: Vec<&str> = text.split_whitespace().collect();
    (
        f[0].parse().unwrap(),
        f[1].parse().unwrap(),
        f[2].parse().unwrap(),
        f[3].parse().unwrap(),
        f[4].parse().unwrap(),
    )
}

fn idle_streams() {
    let k: usize = std::env::var("BENCH_CHAT_STREAMS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(DEFAULT_IDLE_STREAMS);
    let mib = |bytes: i64| bytes as f64 / (1024.0 * 1024.0);
    let (d_before, d_held, d_after, _, _) = run_idle("direct", k);
    let (c_before, c_held, c_after, opened, c_reheld) = run_idle("chat", k);
    let direct = d_held as i64 - d_before as i64;
    let chat = c_held as i64 - c_before as i64;
    let server = (chat - direct) as f64 / k as f64;
    println!("chat_idle_streams {k}");
    println!("chat_idle_open_all_s {opened:.2}");
    println!(
        "chat_idle_rss_direct_per_stream_bytes {:.0}",
        direct as f64 / k as f64
    );
    println!(
        "chat_idle_rss_chat_per_stream_bytes {:.0}",
        chat as f64 / k as f64
    );
    println!("chat_idle_server_per_stream_bytes {server:.0}");
    println!(
        "chat_idle_streams_per_gib {:.0}",
        (1u64 << 30) as f64 / server
    );
    println!(
        "chat_idle_rss_left_after_close_mib {:.1}",
        mib(c_after as i64 - c_before as i64)
    );
    println!(
        "chat_idle_rss_growth_on_reopen_mib {:.1}",
        mib(c_reheld as i64 - c_held as i64)
    );
    println!(
        "chat_idle_rss_left_after_close_direct_mib {:.1}",
        mib(d_after as i64 - d_before as i64)
    );
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("idle") {
        idle(&args[2], args[3].parse().unwrap()).await;
        return;
    }
    {
        let b = bench().await;
        let model = FakeModel::start().await;
        println!("chat_first_event_runs {LATENCY_RUNS}");
        first_event_latency(&b, &model, false).await;
        first_event_latency(&b, &model, true).await;
        chunk_overhead(&b, &model).await;
    }
    tokio::task::spawn_blocking(idle_streams).await.unwrap();
}
