//! Schema-driven fuzzing of every route in `/openapi.json`: schemathesis
//! (installed by `make setup` into .data/fuzz/venv) generates requests from
//! the document, valid and invalid, against the real server on 127.0.0.1
//! over a real database holding a space and a document, and fails on any
//! 5xx answer. Bounded in time (`DATA_PLANE_FUZZ_SECS`, default 60).
//!
//! The caller is an ordinary user, so the fuzzer cannot switch fetching back
//! on: fetch_web_page is off for the run and web_search has no provider,
//! and the chat model is a scripted fake on 127.0.0.1, which keeps every
//! request the server makes on loopback.

// Test helpers report failure by panicking, like the tests that call them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::PathBuf;
use std::time::Duration;

use data_plane_agent::AgentConfig;
use data_plane_agent::testing::{FakeModel, text_reply};
use data_plane_ingest::pipeline::{Pipeline, Target};
use data_plane_store::Scope;
use data_plane_store::content::{self, SourceKind};
use data_plane_store::identity::{self, MembershipRole, Permission};
use data_plane_store::testing::TestDatabase;
use serde_json::json;

fn schemathesis() -> PathBuf {
    std::env::var("DATA_PLANE_SCHEMATHESIS")
        .map(Into::into)
        .unwrap_or_else(|_| {
            concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../../.data/fuzz/venv/bin/schemathesis"
            )
            .into()
        })
}

#[tokio::test]
async fn no_route_answers_a_server_error_to_generated_requests() {
    let fuzzer = schemathesis();
    assert!(
        fuzzer.exists(),
        "{} is missing: run `make setup`",
        fuzzer.display()
    );
    let seconds: u64 = std::env::var("DATA_PLANE_FUZZ_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(60);

    let test = TestDatabase::create().await;
    let db = test.db.clone();
    let embedder = common::embedder();
    let mut tx = db.begin(Scope::System).await.unwrap();
    let admin = identity::upsert_user(&mut tx, "admin@example.com", Some(Permission::Admin))
        .await
        .unwrap()
        .id;
    let user = identity::upsert_user(&mut tx, "fuzz@example.com", Some(Permission::User))
        .await
        .unwrap()
        .id;
    let (space, _) = identity::ensure_space(&mut tx, "fuzzed").await.unwrap();
    identity::add_member(&mut tx, space.id, user, MembershipRole::Owner)
        .await
        .unwrap();
    let source = content::ensure_source(&mut tx, space.id, "notes", SourceKind::Files)
        .await
        .unwrap();
    tx.commit().await.unwrap();
    Pipeline::new(db.clone(), embedder.clone())
        .ingest_file(
            Scope::System,
            Target {
                space_id: space.id,
                source_id: source.id,
            },
            "guides/vacuum.md",
            b"# Vacuuming\n\nVACUUM reclaims storage occupied by dead tuples.\n",
        )
        .await
        .unwrap();
    let jwt = common::jwt();
    // A scripted model, so that /v1/chat streams (a chat it has no reply
    // for streams an `error` event, still a 200).
    let model = FakeModel::start().await;
    for _ in 0..2000 {
        model.push(text_reply(&["Fuzzed."]));
    }
    let mut config = AgentConfig::new(model.base_url(), "fuzz-model");
    config.max_steps = 2;
    let state = common::state(db, embedder, jwt.clone())
        .with_agent(config)
        .unwrap();
    let base = common::serve(state).await;

    let admin_token = jwt
        .issue(
            admin,
            "admin@example.com",
            Permission::Admin,
            Duration::from_secs(3600),
        )
        .unwrap();
    let switched = reqwest::Client::new()
        .put(format!("{base}/v1/admin/settings"))
        .bearer_auth(&admin_token)
        .json(&json!({"fetch_web_page_enabled": false, "web_search_enabled": false}))
        .send()
        .await
        .unwrap();
    assert!(switched.status().is_success(), "{}", switched.status());
    let token = jwt
        .issue(
            user,
            "fuzz@example.com",
            Permission::User,
            Duration::from_secs(3600),
        )
        .unwrap();

    // schemathesis keeps a cache of what it found in its working directory;
    // a scratch one keeps it out of the source tree.
    let scratch = tempfile::tempdir().unwrap();
    let output = tokio::process::Command::new(&fuzzer)
        .current_dir(scratch.path())
        .args(["run", &format!("{base}/openapi.json")])
        .args(["--url", &base])
        .args(["--header", &format!("Authorization: Bearer {token}")])
        .args(["--checks", "not_a_server_error"])
        .args(["--phases", "examples,coverage,fuzzing"])
        .args(["--max-time", &seconds.to_string()])
        // One worker: with two, a cold run (no Hypothesis cache in the
        // scratch directory) now and then fails inside schemathesis's own
        // generator (KeyError in its source cache, reported as a runtime
        // error), which says nothing about the server.
        .args(["--workers", "1"])
        .args(["--request-timeout", "30"])
        .args(["--suppress-health-check", "all"])
        .args(["--no-color"])
        .env("SCHEMATHESIS_HOOKS", "")
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(Duration::from_secs(seconds + 240), output)
        .await
        .expect("schemathesis ran past its time budget")
        .unwrap();
    let report = format!(
        "{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    println!("{report}");
    assert!(
        output.status.success(),
        "schemathesis found server errors (or could not run):\n{report}"
    );
}
