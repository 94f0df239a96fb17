//! The official MCP conformance suite (`@modelcontextprotocol/conformance`
//! from npm, pinned in tests/e2e/package.json and installed by `make setup`)
//! against `/mcp` of a real server on 127.0.0.1, through a relay that adds
//! the bearer token the suite has no option for (everything else, the
//! `Origin` and `Host` of the rebinding scenario included, passes through
//! unchanged). Every server scenario runs; the ones this server fails are
//! listed, each with its reason, in tests/mcp/conformance-expected-failures.yaml,
//! and the suite itself fails on any other failure and on an expected
//! failure that now passes, so the list only ever shrinks on purpose.

// Test helpers report failure by panicking, like the tests that call them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::Response;
use data_plane_agent::testing::FakeModel;
use futures::TryStreamExt;

fn suite() -> (PathBuf, PathBuf) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/e2e");
    let node = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .flat_map(|d| ["node", "nodejs"].map(|n| d.join(n)))
            .find(|p| p.is_file())
    });
    let cli = dir.join("node_modules/@modelcontextprotocol/conformance/dist/index.js");
    assert!(
        node.is_some() && cli.is_file(),
        "this test needs node and the MCP conformance suite in {}: run `make setup`",
        dir.display()
    );
    (node.unwrap(), cli)
}

#[derive(Clone)]
struct Relay {
    http: reqwest::Client,
    upstream: String,
    token: String,
}

/// Forwards one request to the server with the token added, and streams
/// the answer back as it comes (the event streams included).
async fn relay(State(relay): State<Relay>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let target = format!(
        "{}{}",
        relay.upstream,
        parts.uri.path_and_query().map_or("/", |p| p.as_str())
    );
    let body = axum::body::to_bytes(body, usize::MAX).await.unwrap();
    let mut forwarded = relay
        .http
        .request(parts.method, target)
        .bearer_auth(&relay.token)
        .body(body);
    for (name, value) in &parts.headers {
        if name != "authorization" && name != "content-length" {
            forwarded = forwarded.header(name, value);
        }
    }
    let answer = forwarded.send().await.unwrap();
    let mut response = Response::builder().status(answer.status());
    for (name, value) in answer.headers() {
        if name != "content-length" && name != "transfer-encoding" {
            response = response.header(name, value);
        }
    }
    let stream = answer.bytes_stream().map_err(std::io::Error::other);
    response.body(Body::from_stream(stream)).unwrap()
}

#[tokio::test]
async fn the_official_conformance_suite_passes_every_scenario_that_applies() {
    let (node, cli) = suite();
    let model = FakeModel::start().await;
    let server = common::guide_server("conformance@example.com", model.base_url(), false).await;
    let relay_state = Relay {
        http: reqwest::Client::new(),
        upstream: server.base.clone(),
        token: server.token.clone(),
    };
    let app = axum::Router::new().fallback(relay).with_state(relay_state);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let relay_url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });

    let expected =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp/conformance-expected-failures.yaml");
    // Each scenario's checks, kept for reading after a failure.
    let results = Path::new(env!("CARGO_TARGET_TMPDIR")).join("mcp-conformance");
    let _ = std::fs::remove_dir_all(&results);
    let run = tokio::process::Command::new(node)
        .arg(&cli)
        .arg("server")
        .arg("--url")
        .arg(format!("{relay_url}/mcp?spaceId={}", server.space))
        .arg("--suite")
        .arg("all")
        .arg("--expected-failures")
        .arg(&expected)
        .arg("--output-dir")
        .arg(&results)
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(Duration::from_secs(300), run)
        .await
        .expect("the conformance suite did not finish in 5 minutes")
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    println!("{stdout}");
    assert!(
        output.status.success(),
        "the conformance suite failed ({}; each scenario's checks are in {}):\n{stdout}\n{stderr}",
        output.status,
        results.display()
    );
}
