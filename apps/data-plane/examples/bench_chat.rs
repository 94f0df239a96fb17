//! Chat stream benchmark: the real router on 127.0.0.1 with a real test
//! database and the fake OpenAI-compatible model, driven by a real HTTP
//! client. Prints `name value` lines: the time from the model's first text
//! byte reaching the server to the matching `text_delta` at the client
//! (p50/p95/p99), the cost per streamed chunk against reading the model
//! directly, and the memory one idle stream holds on the server side.
//!
//! The idle-stream figures come from server processes of their own (this
//! program run again as `idle-serve model` or `idle-serve chat MODEL_URL`),
//! whose resident memory the client reads from /proc: the server's memory
//! alone, not the client's or the model's.
// A benchmark fails loudly: there is no caller to hand an error to.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::serve::ListenerExt;
use data_plane::auth::{JwtKeys, ServiceTokens};
use data_plane::state::AppState;
use data_plane_agent::AgentConfig;
use data_plane_agent::testing::{FakeModel, chunk, text_reply};
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
    let app = data_plane::http::service(state);
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

/// A process's resident memory in bytes, from its `status` file.
fn rss_of(status: &str) -> u64 {
    let status = std::fs::read_to_string(status).unwrap();
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

/// `idle-serve model`: a bare axum SSE endpoint, which is both the
/// baseline and the chat server's model: a POST to /v1/chat/completions is
/// answered with a role chunk and one text chunk, then the stream stays
/// open and silent.
async fn stall_model() -> String {
    // Replies open now, so the driver can tell when closed streams are gone.
    static OPEN: AtomicUsize = AtomicUsize::new(0);
    struct Open;
    impl Drop for Open {
        fn drop(&mut self) {
            OPEN.fetch_sub(1, Ordering::SeqCst);
        }
    }
    async fn reply(_body: axum::body::Bytes) -> impl axum::response::IntoResponse {
        OPEN.fetch_add(1, Ordering::SeqCst);
        let open = Open;
        let first = [
            chunk(json!({ "role": "assistant", "content": "" }), None),
            chunk(json!({ "content": "idle" }), None),
        ];
        let events = futures::stream::iter(first.map(|c| {
            Ok::<_, std::convert::Infallible>(
                axum::response::sse::Event::default().data(c.to_string()),
            )
        }))
        .chain(futures::stream::pending())
        // Dropped with the stream, when the connection closes.
        .inspect(move |_| {
            let _ = &open;
        });
        axum::response::sse::Sse::new(events)
    }
    let app = axum::Router::new()
        .route("/v1/chat/completions", axum::routing::post(reply))
        .route(
            "/v1/open",
            axum::routing::get(|| async { OPEN.load(Ordering::SeqCst).to_string() }),
        );
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}/v1", listener.local_addr().unwrap());
    let listener = listener.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    });
    tokio::spawn(async move { axum::serve(listener, app).await });
    base
}

/// A child process serving idle streams (`idle-serve model` or
/// `idle-serve chat MODEL_URL`): prints its base URL and a token, then
/// serves until its standard input closes.
async fn idle_serve(mode: &str, model_url: Option<&str>) {
    let bench = if mode == "chat" {
        Some(bench().await)
    } else {
        None
    };
    let (base, token) = match &bench {
        Some(b) => (
            b.server_with(model_url.unwrap().to_string(), true).await,
            b.token.clone(),
        ),
        None => (stall_model().await, "-".to_string()),
    };
    println!("{base} {token}");
    tokio::task::spawn_blocking(|| {
        let mut line = String::new();
        while std::io::stdin().read_line(&mut line).unwrap_or(0) > 0 {
            line.clear();
        }
    })
    .await
    .unwrap();
    drop(bench);
}

/// A server process of the idle-stream measurement.
struct Served {
    child: std::process::Child,
    /// Kept open: a child writing to a closed pipe would fail.
    _stdout: std::io::BufReader<std::process::ChildStdout>,
    base: String,
    token: String,
}

impl Served {
    fn start(args: &[&str]) -> Served {
        use std::io::BufRead as _;
        let mut child = std::process::Command::new(std::env::current_exe().unwrap())
            .arg("idle-serve")
            .args(args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // The first line that names a URL (a wrapper may print its own first).
        let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        while !line.starts_with("http") {
            line.clear();
            assert!(
                out.read_line(&mut line).unwrap() > 0,
                "the server process ended"
            );
        }
        let mut parts = line.split_whitespace();
        let base = parts
            .next()
            .expect("the server says where it listens")
            .to_string();
        let token = parts.next().unwrap().to_string();
        Served {
            child,
            _stdout: out,
            base,
            token,
        }
    }

    /// Waits until the stall model holds no reply open: every stream
    /// closed, and every run behind one stopped with its model request.
    async fn wait_closed(&self, http: &reqwest::Client) {
        let until = Instant::now() + Duration::from_secs(60);
        loop {
            let open = http
                .get(format!("{}/open", self.base))
                .send()
                .await
                .unwrap()
                .text()
                .await
                .unwrap();
            if open == "0" {
                return;
            }
            assert!(
                Instant::now() < until,
                "{open} model replies still open after 60 s"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Its resident memory in bytes.
    fn rss(&self) -> u64 {
        rss_of(&format!("/proc/{}/status", self.child.id()))
    }

    /// Resident memory once it stops moving (closed streams are torn down
    /// in the background): read every 250 ms until two reads agree within
    /// 1 %, at most 10 s.
    async fn settled_rss(&self) -> u64 {
        let mut last = self.rss();
        for _ in 0..40 {
            tokio::time::sleep(Duration::from_millis(250)).await;
            let now = self.rss();
            if now.abs_diff(last) * 100 <= last {
                return now;
            }
            last = now;
        }
        last
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.wait();
    }
}

/// One stream of `server` whose first text has reached the client: a chat
/// turn through `/v1/chat`, or the bare endpoint's reply.
async fn open_idle(http: &reqwest::Client, server: &Served, chat: bool) -> Events {
    let r = if chat {
        http.post(format!("{}/v1/chat", server.base))
            .bearer_auth(&server.token)
            .json(&json!({ "messages": [{ "role": "user", "content": "hi" }] }))
    } else {
        http.post(format!("{}/chat/completions", server.base))
            .json(&json!({ "model": "bench-model", "stream": true }))
    }
    .send()
    .await
    .unwrap();
    assert_eq!(r.status(), 200, "opening an idle stream");
    let mut stream = events(r);
    loop {
        let (kind, data, _) = stream.next().await.expect("the first text arrives");
        if kind == "text_delta" || data["choices"][0]["delta"]["content"] == "idle" {
            return stream;
        }
    }
}

async fn open_many(http: &reqwest::Client, server: &Served, chat: bool, k: usize) -> Vec<Events> {
    futures::stream::iter(0..k)
        .map(|_| open_idle(http, server, chat))
        .buffer_unordered(64)
        .collect()
        .await
}

/// Server-side memory per idle stream, each server in a process of its
/// own so that its resident memory is its own: first the bare axum SSE
/// endpoint (the baseline), then `/v1/chat` with that endpoint as its
/// model, whose streams are opened, closed and opened again.
async fn idle_streams() {
    let k: usize = std::env::var("BENCH_CHAT_STREAMS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(DEFAULT_IDLE_STREAMS);
    let http = reqwest::Client::new();
    let per_stream = |from: u64, to: u64| (to as f64 - from as f64) / k as f64;
    let mib = |from: u64, to: u64| (to as f64 - from as f64) / (1024.0 * 1024.0);

    let model = Served::start(&["model"]);
    // Lazily built state (connection pools, the tool list) is not counted
    // per stream: two streams come and go first.
    drop(open_many(&http, &model, false, 2).await);
    let bare_before = model.settled_rss().await;
    let bare = open_many(&http, &model, false, k).await;
    let bare_held = model.settled_rss().await;
    drop(bare);
    model.wait_closed(&http).await;

    let server = Served::start(&["chat", &model.base]);
    drop(open_many(&http, &server, true, 2).await);
    let before = server.settled_rss().await;
    let started = Instant::now();
    let streams = open_many(&http, &server, true, k).await;
    let opened = started.elapsed();
    let held = server.settled_rss().await;
    drop(streams);
    model.wait_closed(&http).await;
    let after = server.settled_rss().await;
    // Memory the allocator kept is reused by the same load again (no
    // growth) unless it leaked (growth like the first time).
    let again = open_many(&http, &server, true, k).await;
    let reheld = server.settled_rss().await;
    drop(again);
    model.wait_closed(&http).await;

    let bare_each = per_stream(bare_before, bare_held);
    let server_each = per_stream(before, held);
    println!("chat_idle_streams {k}");
    println!("chat_idle_open_all_s {:.2}", opened.as_secs_f64());
    println!("chat_idle_bare_axum_per_stream_bytes {bare_each:.0}");
    println!("chat_idle_server_per_stream_bytes {server_each:.0}");
    println!(
        "chat_idle_server_over_bare_axum {:.2}",
        server_each / bare_each
    );
    println!(
        "chat_idle_streams_per_gib {:.0}",
        (1u64 << 30) as f64 / server_each
    );
    println!(
        "chat_idle_rss_left_after_close_mib {:.1}",
        mib(before, after)
    );
    println!(
        "chat_idle_rss_growth_on_reopen_mib {:.1}",
        mib(held, reheld)
    );
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("idle-serve") {
        idle_serve(&args[2], args.get(3).map(String::as_str)).await;
        return;
    }
    // BENCH_CHAT_ONLY=idle: the idle streams alone.
    if std::env::var("BENCH_CHAT_ONLY").as_deref() != Ok("idle") {
        let b = bench().await;
        let model = FakeModel::start().await;
        println!("chat_first_event_runs {LATENCY_RUNS}");
        first_event_latency(&b, &model, false).await;
        first_event_latency(&b, &model, true).await;
        chunk_overhead(&b, &model).await;
    }
    idle_streams().await;
}
