//! Takeover benchmark: how soon a chat run whose server was killed goes on
//! on another (docs/runs.md, "Takeover"). Two `data-plane serve` processes
//! (the release binary beside this example) over a fresh test database,
//! the fake model on 127.0.0.1; each round starts a turn on the first,
//! follows it from the second, kills the first with SIGKILL in the middle
//! of the model's answer, and times how long until the second sends the
//! run's `resumed` event, then its `done`. Prints `name value` lines: the
//! lease, and p50 / p99 / max over the rounds.
// A benchmark fails loudly: there is no caller to hand an error to.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Child;
use std::time::{Duration, Instant};

use data_plane::auth::JwtKeys;
use data_plane_agent::testing::{FakeModel, Piece, Reply, chunk, text_reply};
use data_plane_store::Scope;
use data_plane_store::identity::{self, Permission};
use data_plane_store::testing::TestDatabase;
use eventsource_stream::Eventsource;
use futures::StreamExt;
use serde_json::json;

#[path = "shared/server.rs"]
mod server;

const ROUNDS: usize = 8;
// The default lease (DATA_PLANE_RUN_LEASE_SECS), as a deployment runs it.
const LEASE_SECS: u64 = 10;
const SECRET: &str = "bench-takeover-secret-at-least-32-bytes!";

fn serve(test: &TestDatabase, model: &FakeModel, dir: &std::path::Path) -> (Child, String) {
    let (child, addr) = server::serve(
        test,
        dir,
        SECRET,
        &model.base_url(),
        &[("DATA_PLANE_RUN_LEASE_SECS", LEASE_SECS.to_string())],
    );
    (child, format!("http://{addr}"))
}

async fn ready(base: &str) {
    server::ready(base.trim_start_matches("http://").parse().unwrap()).await;
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let at = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[at.min(sorted.len() - 1)]
}

#[tokio::main]
async fn main() {
    let test = TestDatabase::create().await;
    let mut tx = test.db.begin(Scope::System).await.unwrap();
    let user = identity::upsert_user(&mut tx, "bench@example.com", Some(Permission::User))
        .await
        .unwrap()
        .id;
    tx.commit().await.unwrap();
    let token = JwtKeys::new(SECRET.as_bytes())
        .issue(
            user,
            "bench@example.com",
            Permission::User,
            Duration::from_secs(3600),
        )
        .unwrap();
    let model = FakeModel::start().await;
    let http = reqwest::Client::new();
    let dirs: Vec<tempfile::TempDir> = (0..ROUNDS + 1)
        .map(|_| tempfile::tempdir().unwrap())
        .collect();
    // The survivor of each round is the first server of the next.
    let (mut first, mut first_base) = serve(&test, &model, dirs[0].path());
    ready(&first_base).await;
    let mut to_resumed = Vec::new();
    let mut to_done = Vec::new();
    for round in 0..ROUNDS {
        let (second, second_base) = serve(&test, &model, dirs[round + 1].path());
        ready(&second_base).await;
        model.push(Reply::Stream(vec![
            Piece::Chunk(chunk(json!({"role": "assistant", "content": "Cut "}), None)),
            Piece::Chunk(chunk(json!({"content": "off here. "}), None)),
            Piece::Hang,
        ]));
        model.push(text_reply(&["Whole ", "answer."]));
        let started = http
            .post(format!("{first_base}/v1/chat"))
            .bearer_auth(&token)
            .json(&json!({"messages": [{"role": "user", "content": "go"}]}))
            .send()
            .await
            .unwrap();
        let run_id = started.headers()["x-run-id"].to_str().unwrap().to_string();
        tokio::spawn(async move {
            let mut body = started.bytes_stream();
            while let Some(Ok(_)) = body.next().await {}
        });
        let mut events = http
            .get(format!("{second_base}/v1/runs/{run_id}/events"))
            .bearer_auth(&token)
            .send()
            .await
            .unwrap()
            .bytes_stream()
            .eventsource();
        while let Some(Ok(e)) = events.next().await {
            if e.event == "text_delta" {
                break;
            }
        }
        let killed = Instant::now();
        first.kill().unwrap();
        first.wait().unwrap();
        let mut resumed = None;
        while let Some(Ok(e)) = events.next().await {
            if e.event == "resumed" {
                resumed = Some(killed.elapsed());
            }
            if e.event == "done" || e.event == "error" {
                assert_eq!(e.event, "done", "{}", e.data);
                break;
            }
        }
        to_resumed.push(resumed.expect("a resumed event").as_secs_f64());
        to_done.push(killed.elapsed().as_secs_f64());
        (first, first_base) = (second, second_base);
    }
    first.kill().unwrap();
    first.wait().unwrap();
    to_resumed.sort_by(f64::total_cmp);
    to_done.sort_by(f64::total_cmp);
    println!("lease_s {LEASE_SECS}");
    println!("rounds {ROUNDS}");
    for (name, figures) in [("kill_to_resumed", &to_resumed), ("kill_to_done", &to_done)] {
        println!("{name}_p50_s {:.2}", percentile(figures, 0.5));
        println!("{name}_p99_s {:.2}", percentile(figures, 0.99));
        println!("{name}_max_s {:.2}", figures[figures.len() - 1]);
    }
}
