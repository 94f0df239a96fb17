//! Replicas behind HAProxy (docs/operations.md, "Replicas behind a
//! balancer"): three `data-plane serve` processes (the release binary
//! beside this example) over one fresh test database, HAProxy with the
//! shipped configuration (docker/haproxy.cfg) in front of the first 1, 2
//! and 3 of them, and the same load each time:
//!
//! - the cheap call, document_info through `POST /v1/tools/.../execute`,
//!   driven by wrk with 64 connections;
//! - chat starts: 16 clients each starting a turn (the fake model answers
//!   at once with a few words) and reading it to `done`, again and again.
//!
//! Each is also measured against one replica directly, without the
//! balancer, and every figure is printed as a ratio to that one: these
//! processes share the machine's cores, so the point is that nothing
//! degrades, not that throughput scales. The replicas split one
//! replica's pool of PostgreSQL connections (32) between them, as a
//! deployment should: the database does the same work either way.
//!
//! Then what a new replica costs to join: a corpus of BENCH_JOIN_CHUNKS
//! chunks (100,000 by default) is written, and a fourth replica with an
//! empty data directory is started; the time from its start to its first
//! `/readyz` 200 is the time its keyword index takes to catch up (the
//! balancer sends it nothing until then).
//!
//! `benches/replicas.sh` (or `cargo run --release -p data-plane --example
//! bench_replicas -- [SECONDS]`), after `make setup`; needs `wrk` and
//! `haproxy` on the machine (benches/replicas.sh installs wrk).
// A benchmark fails loudly: there is no caller to hand an error to.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Child;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use data_plane::auth::JwtKeys;
use data_plane_agent::testing::{FakeModel, text_reply};
use data_plane_store::Scope;
use data_plane_store::content::{self, NewChunk, NewDocument, SourceKind};
use data_plane_store::identity::{self, MembershipRole, Permission};
use data_plane_store::testing::TestDatabase;
use data_plane_testkit::balancer::Balancer;
use futures::StreamExt;
use serde_json::json;

#[path = "shared/load.rs"]
mod load;
#[path = "shared/server.rs"]
mod server;
#[path = "shared/synthetic.rs"]
mod synthetic;

const SECRET: &str = "bench-replicas-secret-at-least-32-bytes!";
const CALL_CONNECTIONS: u32 = 64;
/// PostgreSQL connections of all replicas together (the default pool of one).
const POOL: u32 = 32;
const CHAT_CLIENTS: usize = 16;

struct Replica {
    child: Child,
    addr: std::net::SocketAddr,
}

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A replica with a pool of `pool` PostgreSQL connections.
fn serve(test: &TestDatabase, model: &FakeModel, dir: &std::path::Path, pool: u32) -> Replica {
    let (child, addr) = server::serve(
        test,
        dir,
        SECRET,
        &model.base_url(),
        &[
            ("DATA_PLANE_DB_POOL", pool.to_string()),
            ("DATA_PLANE_CHAT_MAX_CONCURRENT", "1000".into()),
            ("DATA_PLANE_CHAT_TURNS_PER_MINUTE", "1000000".into()),
        ],
    );
    Replica { child, addr }
}

/// Turns started and read to `done` per second by [`CHAT_CLIENTS`] clients.
async fn chat_starts(base: &str, token: &str, space: uuid::Uuid, seconds: u64) -> f64 {
    let done = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let clients: Vec<_> = (0..CHAT_CLIENTS)
        .map(|_| {
            let (base, token) = (base.to_string(), token.to_string());
            let (done, stop) = (done.clone(), stop.clone());
            tokio::spawn(async move {
                let http = reqwest::Client::new();
                while !stop.load(Ordering::Relaxed) {
                    let r = http
                        .post(format!("{base}/v1/chat"))
                        .bearer_auth(&token)
                        .json(&json!({"messages": [{"role": "user", "content": "hello"}], "spaceId": space}))
                        .send()
                        .await
                        .unwrap();
                    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap_or_default());
                    let mut body = r.bytes_stream();
                    let mut tail = Vec::new();
                    while let Some(chunk) = body.next().await {
                        tail.extend_from_slice(&chunk.unwrap());
                    }
                    let text = String::from_utf8_lossy(&tail);
                    assert!(text.contains("event: done"), "a turn did not end done: {text}");
                    done.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let before = (done.load(Ordering::Relaxed), Instant::now());
    tokio::time::sleep(Duration::from_secs(seconds)).await;
    let after = (done.load(Ordering::Relaxed), Instant::now());
    stop.store(true, Ordering::Relaxed);
    for client in clients {
        client.await.unwrap();
    }
    (after.0 - before.0) as f64 / (after.1 - before.1).as_secs_f64()
}

#[tokio::main]
async fn main() {
    let seconds: u64 = std::env::args()
        .nth(1)
        .map(|s| s.parse().expect("SECONDS is a number"))
        .unwrap_or(8);
    let join_chunks: usize = std::env::var("BENCH_JOIN_CHUNKS")
        .ok()
        .map(|s| s.parse().expect("BENCH_JOIN_CHUNKS is a number"))
        .unwrap_or(100_000);
    let test = TestDatabase::create().await;
    let db = &test.db;
    let mut tx = db.begin(Scope::System).await.unwrap();
    let user = identity::upsert_user(&mut tx, "bench@example.com", Some(Permission::User))
        .await
        .unwrap();
    let (space, _) = identity::ensure_space(&mut tx, "bench").await.unwrap();
    identity::add_member(&mut tx, space.id, user.id, MembershipRole::Viewer)
        .await
        .unwrap();
    let source = content::ensure_source(&mut tx, space.id, "notes", SourceKind::Files)
        .await
        .unwrap();
    let text = "VACUUM reclaims storage occupied by dead tuples.";
    let doc = NewDocument {
        space_id: space.id,
        source_id: source.id,
        path: "guides/vacuum.md".into(),
        mime: "text/markdown".into(),
        size_bytes: text.len() as i64,
        content_hash: "bench-replicas".into(),
        title: None,
        language: Some("en".into()),
        content: text.into(),
        metadata: json!({}),
        chunks: vec![NewChunk {
            char_start: 0,
            char_end: text.chars().count() as i32,
            heading: String::new(),
            page: None,
            text: text.into(),
            embedding: vec![1.0 / (384f32).sqrt(); 384],
        }],
        tables: vec![],
    };
    let written = content::write_document(&mut tx, &doc).await.unwrap();
    tx.commit().await.unwrap();
    let (content::WriteOutcome::Created(doc_id)
    | content::WriteOutcome::Replaced(doc_id)
    | content::WriteOutcome::Unchanged(doc_id)) = written;
    let token = JwtKeys::new(SECRET.as_bytes())
        .issue(
            user.id,
            &user.email,
            Permission::User,
            Duration::from_secs(3600),
        )
        .unwrap();
    let model = FakeModel::start().await;
    model.answering(|_| text_reply(&["Hello ", "there."]));

    let dirs: Vec<tempfile::TempDir> = (0..4).map(|_| tempfile::tempdir().unwrap()).collect();
    let scripts = tempfile::tempdir().unwrap();
    let call = load::script(
        scripts.path(),
        "document_info",
        "POST",
        Some(&token),
        Some(&json!({"args": {"document_id": doc_id}}).to_string()),
    );
    let log = scripts.path().join("haproxy.log");
    let measure = async |base: String| {
        let url = format!("{base}/v1/tools/document_info/execute");
        let script = call.clone();
        let calls = tokio::task::spawn_blocking(move || {
            load::wrk(&url, &script, CALL_CONNECTIONS, seconds)
        })
        .await
        .unwrap();
        let chats = chat_starts(&base, &token, space.id, seconds).await;
        (calls, chats)
    };
    // n replicas share the database as one does: DATA_PLANE_DB_POOL is
    // split between them (the advice in docs/operations.md), so what is
    // compared is the same PostgreSQL work behind 1, 2 or 3 processes.
    let start = async |n: usize| {
        let pool = POOL.div_ceil(n as u32);
        let replicas: Vec<Replica> = dirs[..n]
            .iter()
            .map(|d| serve(&test, &model, d.path(), pool))
            .collect();
        for r in &replicas {
            server::ready(r.addr).await;
        }
        replicas
    };
    let one = start(1).await;
    let (direct_calls, direct_chats) = measure(format!("http://{}", one[0].addr)).await;
    drop(one);
    println!("replicas.calls_per_s.direct {:.0}", direct_calls.rps);
    println!("replicas.calls_p50_ms.direct {:.2}", direct_calls.p50_ms);
    println!("replicas.calls_p99_ms.direct {:.2}", direct_calls.p99_ms);
    println!(
        "replicas.calls_requests.direct {:.0}",
        direct_calls.requests
    );
    println!("replicas.chat_starts_per_s.direct {direct_chats:.1}");
    for n in 1..=3 {
        let replicas = start(n).await;
        let addrs: Vec<_> = replicas.iter().map(|r| r.addr).collect();
        let balancer = Balancer::start(&addrs, &log);
        let (calls, chats) = measure(balancer.base()).await;
        println!(
            "replicas.calls_per_s.balanced_{n} {:.0} ratio_to_direct {:.2}",
            calls.rps,
            calls.rps / direct_calls.rps
        );
        println!(
            "replicas.calls_p50_ms.balanced_{n} {:.2} ratio_to_direct {:.2}",
            calls.p50_ms,
            calls.p50_ms / direct_calls.p50_ms
        );
        println!(
            "replicas.calls_p99_ms.balanced_{n} {:.2} ratio_to_direct {:.2}",
            calls.p99_ms,
            calls.p99_ms / direct_calls.p99_ms
        );
        println!(
            "replicas.chat_starts_per_s.balanced_{n} {chats:.1} ratio_to_direct {:.2}",
            chats / direct_chats
        );
        drop(balancer);
        drop(replicas);
    }

    // What a replica costs to join: its keyword index catches up with
    // every chunk before /readyz says 200.
    let started = Instant::now();
    let corpus = synthetic::load(db, join_chunks).await.unwrap();
    eprintln!(
        "wrote {} chunks ({} documents, {:.0} MB of text) in {:.0} s",
        corpus.chunks,
        corpus.documents,
        corpus.text_bytes as f64 / 1e6,
        started.elapsed().as_secs_f64()
    );
    let joining = serve(&test, &model, dirs[3].path(), POOL);
    let joined = server::ready(joining.addr).await;
    println!("replicas.join_chunks {}", corpus.chunks + 1);
    println!("replicas.join_seconds {:.1}", joined.as_secs_f64());
    println!(
        "replicas.join_chunks_per_s {:.0}",
        (corpus.chunks + 1) as f64 / joined.as_secs_f64()
    );
    drop(joining);
    test.destroy().await.unwrap();
}
