//! Three `data-plane serve` processes behind HAProxy, configured as the
//! deployment ships it (`docker/haproxy.cfg`), under load: chat runs (tool
//! calls, long answers, approvals) and a service's executeTool calls. In
//! the middle one replica is killed (SIGKILL) and another stopped
//! (SIGTERM). Every run ends `done`; every reader, reattaching through the
//! balancer with `Last-Event-ID` whenever its stream breaks, sees each
//! event once and in order; no executeTool call fails but those in flight
//! on the killed replica (retried, as a client would); and the audit holds
//! one row for each time a tool ran (docs/operations.md, "Replicas behind a
//! balancer").

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use data_plane_agent::testing::{FakeModel, Piece, Reply, ScriptedCall, chunk, tool_calls_reply};
use data_plane_store::Scope;
use data_plane_store::identity::Permission;
use data_plane_store::testing::TestDatabase;
use data_plane_testkit::balancer::Balancer;
use futures::StreamExt;
use serde_json::{Value, json};
use tokio::time::Instant;
use uuid::Uuid;

/// One event as read: id, type, body.
type Seen = (i64, String, Value);

const SERVICE_TOKEN: &str = "balancer-test-service-token-0123";
/// Runs started through the balancer.
const RUNS: usize = 12;
/// One more, waiting for an approval, started on the replica that is
/// stopped: at least one run outlasts the drain and is handed over.
const ON_STOPPED: usize = RUNS + 2;
/// How long each run's answer streams (its words, with a pause after each).
const WORDS: usize = 30;
const WORD_PAUSE: Duration = Duration::from_millis(100);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// Two document_info calls, one step each, then a long answer.
    Tools,
    /// A long answer.
    Long,
    /// list_sources, which waits for a person's approval, then a short answer.
    Approval,
}

fn kind(run: usize) -> Kind {
    match run % 3 {
        0 => Kind::Tools,
        1 => Kind::Long,
        _ => Kind::Approval,
    }
}

fn call(id: String, name: &'static str, args: String) -> Reply {
    let id: &'static str = Box::leak(id.into_boxed_str());
    let args: &'static str = Box::leak(args.into_boxed_str());
    let fragments: &'static [&'static str] = Box::leak(vec![args].into_boxed_slice());
    tool_calls_reply(&[ScriptedCall {
        id,
        name,
        fragments,
    }])
}

fn answer(run: usize, words: usize) -> Reply {
    let mut pieces = vec![Piece::Chunk(chunk(
        json!({"role": "assistant", "content": ""}),
        None,
    ))];
    for word in 0..words {
        pieces.push(Piece::Chunk(chunk(
            json!({"content": format!("r{run}w{word} ")}),
            None,
        )));
        pieces.push(Piece::Pause(WORD_PAUSE));
    }
    pieces.push(Piece::Chunk(chunk(json!({}), Some("stop"))));
    pieces.push(Piece::Done);
    Reply::Stream(pieces)
}

/// The model: its answer depends only on the conversation ("run N", and
/// how many tool results it holds), so a replica that asks a step again
/// gets the same answer, whatever order requests come in.
fn reply(body: &Value, doc: Uuid) -> Reply {
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    let question = messages
        .iter()
        .filter(|m| m["role"] == "user")
        .find_map(|m| m["content"].as_str().map(str::to_string))
        .unwrap_or_default();
    let run: usize = question
        .strip_prefix("run ")
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("not a question of this test: {question:?}"));
    let results = messages.iter().filter(|m| m["role"] == "tool").count();
    let info = format!(r#"{{"document_id":"{doc}"}}"#);
    match (kind(run), results) {
        (Kind::Tools, 0) => call(format!("call_t{run}_1"), "document_info", info),
        (Kind::Tools, 1) => call(format!("call_t{run}_2"), "document_info", info),
        (Kind::Tools | Kind::Long, _) => answer(run, WORDS),
        (Kind::Approval, 0) => call(format!("call_a{run}"), "list_sources", "{}".into()),
        (Kind::Approval, _) => answer(run, 3),
    }
}

struct Replica {
    process: common::KillOnDrop,
    addr: std::net::SocketAddr,
}

async fn replica(test: &TestDatabase, data_dir: &std::path::Path, model: &FakeModel) -> Replica {
    let addr = data_plane_testkit::unused_addr();
    let process = common::KillOnDrop(
        common::server_process(test, data_dir, addr)
            .env("DATA_PLANE_JWT_SECRET", common::JWT_SECRET)
            .env(
                "DATA_PLANE_SERVICE_TOKENS",
                format!("probe={SERVICE_TOKEN}"),
            )
            .env("OPENAI_BASE_URL", model.base_url())
            .env("DATA_PLANE_MODEL", "test-model")
            .env("DATA_PLANE_RUN_LEASE_SECS", "2")
            .env("DATA_PLANE_DRAIN_SECS", "3")
            .env("DATA_PLANE_CHAT_MAX_CONCURRENT", "50")
            .env("DATA_PLANE_CHAT_TURNS_PER_MINUTE", "100")
            .spawn()
            .unwrap(),
    );
    common::wait_ready(&format!("http://{addr}")).await;
    Replica { process, addr }
}

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(5))
        .build()
        .unwrap()
}

/// What one run's reader saw, and how often it had to reattach.
struct Read {
    run: usize,
    run_id: String,
    events: Vec<Seen>,
    reattached: usize,
}

/// Starts run `run` at `start` (the balancer, or one replica) and reads it
/// to its end, reattaching through the balancer `lb` with `Last-Event-ID`
/// each time its stream breaks (as the chat page and the AI SDK's
/// transport do). Sends each event it reads to `seen`.
async fn read_run(
    start: String,
    lb: String,
    token: String,
    space: Uuid,
    run: usize,
    seen: tokio::sync::mpsc::UnboundedSender<(usize, String, String)>,
) -> Read {
    let http = client();
    let r = http
        .post(format!("{start}/v1/chat"))
        .bearer_auth(&token)
        .json(&json!({"messages": [{"role": "user", "content": format!("run {run}")}], "spaceId": space}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "run {run} did not start");
    let run_id = r.headers()["x-run-id"].to_str().unwrap().to_string();
    let mut events: Vec<Seen> = Vec::new();
    let mut reattached = 0;
    let mut response = Some(r);
    let until = Instant::now() + Duration::from_secs(120);
    loop {
        assert!(
            Instant::now() < until,
            "run {run} did not end in 2 minutes: {events:?}"
        );
        let r = match response.take() {
            Some(r) => r,
            None => {
                let after = events.last().map_or(0, |(id, _, _)| *id);
                match http
                    .get(format!("{lb}/v1/runs/{run_id}/events"))
                    .bearer_auth(&token)
                    .header("last-event-id", after.to_string())
                    .send()
                    .await
                {
                    Ok(r) if r.status() == 200 => {
                        reattached += 1;
                        r
                    }
                    // No replica answered yet (the balancer's 503), or the
                    // connection broke: try again shortly.
                    Ok(r) => {
                        assert!(r.status().is_server_error(), "run {run}: {}", r.status());
                        tokio::time::sleep(Duration::from_millis(200)).await;
                        continue;
                    }
                    Err(_) => {
                        tokio::time::sleep(Duration::from_millis(200)).await;
                        continue;
                    }
                }
            }
        };
        let mut stream = eventsource_stream::EventStream::new(r.bytes_stream());
        while let Ok(Some(Ok(e))) =
            tokio::time::timeout(Duration::from_secs(30), stream.next()).await
        {
            let data: Value = serde_json::from_str(&e.data).unwrap();
            let id = e.id.parse::<i64>().unwrap();
            let _ = seen.send((run, e.event.clone(), run_id.clone()));
            let last = e.event == "done" || e.event == "error";
            events.push((id, e.event, data));
            if last {
                return Read {
                    run,
                    run_id,
                    events,
                    reattached,
                };
            }
        }
    }
}

/// One executeTool call as the service made it.
struct Attempt {
    request_id: String,
    started: Instant,
    ended: Instant,
    /// The status, or `None` when the connection failed.
    status: Option<u16>,
}

/// A service calling document_info through the balancer until `stop`,
/// retrying (under a new request id) each call that failed.
async fn service_calls(
    lb: String,
    worker: usize,
    user: Uuid,
    doc: Uuid,
    stop: Arc<AtomicBool>,
) -> Vec<Attempt> {
    let http = client();
    let mut attempts = Vec::new();
    let mut n = 0;
    while !stop.load(Ordering::SeqCst) {
        n += 1;
        let request_id = format!("probe-{worker}-{n}");
        let started = Instant::now();
        let status = http
            .post(format!("{lb}/v1/tools/document_info/execute"))
            .bearer_auth(SERVICE_TOKEN)
            .header("x-on-behalf-of", user.to_string())
            .header("x-request-id", &request_id)
            .json(&json!({"args": {"document_id": doc}}))
            .timeout(Duration::from_secs(30))
            .send()
            .await
            .ok()
            .map(|r| r.status().as_u16());
        attempts.push(Attempt {
            request_id,
            started,
            ended: Instant::now(),
            status,
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    attempts
}

/// A gauge of the replica at `addr` itself (not through the balancer).
async fn gauge(addr: std::net::SocketAddr, name: &str) -> i64 {
    let text = common::metrics(&format!("http://{addr}"), SERVICE_TOKEN).await;
    text.lines()
        .find_map(|line| line.strip_prefix(&format!("{name} ")))
        .unwrap_or_else(|| panic!("no {name} in {text}"))
        .trim()
        .parse::<f64>()
        .unwrap() as i64
}

async fn audit_counts(test: &TestDatabase, column: &str, like: &str) -> HashMap<String, i64> {
    let mut tx = test.db.begin(Scope::System).await.unwrap();
    let rows: Vec<(String, i64)> = sqlx::query_as(&format!(
        "SELECT {column}, count(*) FROM tool_calls WHERE {column} LIKE $1 GROUP BY {column}"
    ))
    .bind(like)
    .fetch_all(&mut *tx)
    .await
    .unwrap();
    tx.commit().await.unwrap();
    rows.into_iter().collect()
}

/// The events of `read` that a later reader does not get: those a
/// takeover dropped (after its `after`, before the `resumed` event).
fn dropped(events: &[Seen]) -> HashSet<i64> {
    let mut out = HashSet::new();
    for (resumed_id, _, data) in events.iter().filter(|(_, k, _)| k == "resumed") {
        let after = data["after"].as_i64().unwrap();
        out.extend(
            events
                .iter()
                .map(|(id, _, _)| *id)
                .filter(|id| *id > after && id < resumed_id),
        );
    }
    out
}

#[tokio::test]
async fn a_replica_killed_and_another_stopped_under_load_lose_nothing() {
    if data_plane_testkit::balancer::haproxy().is_none() {
        panic!("HAProxy is missing: `make setup` installs it (Debian's haproxy)");
    }
    let test = TestDatabase::create().await;
    let (alice, token) = common::person(&test, "alice@example.com", Permission::User).await;
    let (space, doc) = common::space_with_guide(&test.db, "alpha", &[alice]).await;
    let model = FakeModel::start().await;
    model.answering(move |body| reply(body, doc));
    let dirs: Vec<tempfile::TempDir> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let mut replicas = Vec::new();
    for dir in &dirs {
        replicas.push(replica(&test, dir.path(), &model).await);
    }
    // Kept after the test (one line a request): what the balancer saw.
    let log = std::env::temp_dir().join(format!("data-plane-balancer-{}.log", std::process::id()));
    eprintln!("the balancer's log: {}", log.display());
    let balancer = Balancer::start(&replicas.iter().map(|r| r.addr).collect::<Vec<_>>(), &log);
    let lb = balancer.base();
    let (_, admin) = common::person(&test, "root@example.com", Permission::Admin).await;
    let r = client()
        .put(format!("{lb}/v1/admin/settings"))
        .bearer_auth(&admin)
        .json(&json!({"approvals": {"tools": ["list_sources"]}}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());

    // The load: every run at once, and a service calling a tool.
    let stop = Arc::new(AtomicBool::new(false));
    let workers: Vec<_> = (0..3)
        .map(|w| tokio::spawn(service_calls(lb.clone(), w, alice, doc, stop.clone())))
        .collect();
    let (seen_tx, mut seen_rx) = tokio::sync::mpsc::unbounded_channel();
    let stopped_base = format!("http://{}", replicas[1].addr);
    let readers: Vec<_> = (0..RUNS)
        .chain([ON_STOPPED])
        .map(|run| {
            let start = if run == ON_STOPPED {
                stopped_base.clone()
            } else {
                lb.clone()
            };
            tokio::spawn(read_run(
                start,
                lb.clone(),
                token.clone(),
                space,
                run,
                seen_tx.clone(),
            ))
        })
        .collect();
    drop(seen_tx);
    // Runs waiting for approval, answered once both replicas are gone.
    let mut waiting: Vec<(usize, String)> = Vec::new();
    let mut started = HashSet::new();
    let mut mid_way = 0;
    let wanted = RUNS - RUNS / 3;
    while waiting.len() < RUNS / 3 + 1 || mid_way < wanted {
        let (run, kind, run_id) = tokio::time::timeout(Duration::from_secs(60), seen_rx.recv())
            .await
            .expect("runs under way within a minute")
            .expect("readers going");
        if kind == "approval_request" {
            waiting.push((run, run_id));
        } else if kind == "text_delta" && started.insert(run) {
            mid_way += 1;
        }
    }

    // Every run is under way: one replica dies, another is stopped. Each
    // run the first holds must be taken over, and so must each run of the
    // second that waits for an approval (answered only after it is gone).
    let dying = gauge(replicas[0].addr, "data_plane_chat_runs_running").await;
    let waiting_on_stopped = gauge(replicas[1].addr, "data_plane_chat_approvals_waiting").await;
    assert!(dying > 0, "the replica to kill runs some of the runs");
    assert!(
        waiting_on_stopped > 0,
        "run {ON_STOPPED} waits on the replica to stop"
    );
    let killed_at = Instant::now();
    replicas[0].process.0.kill().unwrap(); // SIGKILL
    replicas[0].process.0.wait().unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let pid = replicas[1].process.0.id();
    assert!(
        std::process::Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .unwrap()
            .success()
    );
    let stopped = tokio::task::spawn_blocking({
        let mut child = std::mem::replace(
            &mut replicas[1].process.0,
            std::process::Command::new("true").spawn().unwrap(),
        );
        move || child.wait().unwrap()
    })
    .await
    .unwrap();
    assert!(
        stopped.success(),
        "the stopped replica exited with {stopped}"
    );

    // The approvals are answered through the balancer: the replica that
    // runs each now takes the answer.
    for (run, run_id) in &waiting {
        let r = client()
            .post(format!("{lb}/v1/runs/{run_id}/approvals/call_a{run}"))
            .bearer_auth(&token)
            .json(&json!({"approved": true}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "run {run}: {}", r.text().await.unwrap());
    }
    let mut reads = Vec::new();
    for reader in readers {
        reads.push(reader.await.unwrap());
    }
    stop.store(true, Ordering::SeqCst);
    let mut attempts = Vec::new();
    for worker in workers {
        attempts.extend(worker.await.unwrap());
    }

    // Every run ended done, and its reader saw each event once, in order:
    // what a later reader gets from the start is what it saw, less what a
    // takeover dropped.
    let mut resumed = 0;
    let mut calls_run_again = HashSet::new();
    let mut calls = HashSet::new();
    for read in &reads {
        let (_, last, data) = read.events.last().unwrap();
        assert_eq!(last, "done", "run {} ended {data}", read.run);
        for pair in read.events.windows(2) {
            assert!(
                pair[0].0 < pair[1].0,
                "run {}: ids go back: {:?}",
                read.run,
                read.events
            );
        }
        let r = client()
            .get(format!("{lb}/v1/runs/{}/events", read.run_id))
            .bearer_auth(&token)
            .header("last-event-id", "0")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        let replay: Vec<Seen> = eventsource_stream::EventStream::new(r.bytes_stream())
            .map(|e| {
                let e = e.unwrap();
                (
                    e.id.parse().unwrap(),
                    e.event,
                    serde_json::from_str(&e.data).unwrap(),
                )
            })
            .collect()
            .await;
        let dropped = dropped(&read.events);
        let kept: Vec<&Seen> = read
            .events
            .iter()
            .filter(|(id, _, _)| !dropped.contains(id))
            .collect();
        let replay: Vec<&Seen> = replay.iter().collect();
        assert_eq!(
            kept, replay,
            "run {}: what its reader saw differs from the replay",
            read.run
        );
        for (_, kind, data) in &read.events {
            match kind.as_str() {
                "resumed" => {
                    resumed += 1;
                    for id in data["rerun"].as_array().unwrap() {
                        calls_run_again.insert(id.as_str().unwrap().to_string());
                    }
                    assert_eq!(data["interrupted"], json!([]), "run {}: {data}", read.run);
                }
                "tool_result" => {
                    assert_eq!(data["result"]["success"], true, "run {}: {data}", read.run);
                    calls.insert(data["call_id"].as_str().unwrap().to_string());
                }
                _ => {}
            }
        }
        let text: String = replay
            .iter()
            .filter(|(_, k, _)| k == "text_delta")
            .map(|(_, _, d)| d["text"].as_str().unwrap())
            .collect();
        let words = if kind(read.run) == Kind::Approval {
            3
        } else {
            WORDS
        };
        let expected: String = (0..words).map(|w| format!("r{}w{w} ", read.run)).collect();
        assert_eq!(text.trim_end(), expected.trim_end(), "run {}", read.run);
    }
    let runs_resumed = reads
        .iter()
        .filter(|r| r.events.iter().any(|(_, k, _)| k == "resumed"))
        .count() as i64;
    assert!(
        runs_resumed >= dying + waiting_on_stopped,
        "{runs_resumed} runs resumed; the killed replica ran {dying}, the stopped one had {waiting_on_stopped} waiting for approval"
    );
    assert!(
        reads.iter().any(|r| r.reattached > 0),
        "some reader lost its replica and reattached"
    );
    assert_eq!(calls.len(), RUNS / 3 * 2 + RUNS / 3 + 1, "{calls:?}");

    // The service saw failures only for calls in flight when the replica
    // died; every call that was answered is in the audit once.
    let failed: Vec<&Attempt> = attempts
        .iter()
        .filter(|a| a.status.is_none_or(|s| s >= 500))
        .collect();
    for a in &failed {
        assert!(
            a.started <= killed_at && a.ended >= killed_at,
            "{} failed ({:?}) {:?} after the kill, not in flight at it",
            a.request_id,
            a.status,
            a.started.saturating_duration_since(killed_at)
        );
    }
    assert!(failed.len() <= 3, "at most one call in flight per worker");
    let answered: Vec<&Attempt> = attempts.iter().filter(|a| a.status == Some(200)).collect();
    assert_eq!(
        answered.len() + failed.len(),
        attempts.len(),
        "no call refused"
    );
    assert!(
        answered.iter().filter(|a| a.started > killed_at).count() > 10,
        "the service went on being answered"
    );
    let by_request = audit_counts(&test, "request_id", "probe-%").await;
    for a in &answered {
        assert_eq!(by_request.get(&a.request_id), Some(&1), "{}", a.request_id);
    }
    for a in &failed {
        assert!(
            by_request.get(&a.request_id).is_none_or(|n| *n <= 1),
            "{}",
            a.request_id
        );
    }
    // And every call of the runs ran once, or once more when a takeover
    // ran it again.
    let by_call = audit_counts(&test, "call_id", "call_%").await;
    for call in &calls {
        let n = by_call.get(call).copied().unwrap_or(0);
        if calls_run_again.contains(call) {
            assert!((1..=2).contains(&n), "{call}: {n} rows");
        } else {
            assert_eq!(n, 1, "{call}: {n} rows");
        }
    }
    eprintln!(
        "runs {}, on the killed replica {dying}, waiting for approval on the stopped one {waiting_on_stopped}, resumed {runs_resumed} ({resumed} resumed events), readers that reattached {}, calls run again {}; service calls {}, failed in flight {}",
        reads.len(),
        reads.iter().filter(|r| r.reattached > 0).count(),
        calls_run_again.len(),
        attempts.len(),
        failed.len()
    );
    drop(balancer);
}
