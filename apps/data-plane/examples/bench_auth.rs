//! What an OpenID provider's token costs a request, next to the server's
//! own HS256 token, in one run: a route that authenticates and answers the
//! caller's id (no database beyond what authentication needs), driven by
//! `wrk` at 1 and 64 connections with each kind of token, alternating; then
//! tokens used once each (the verification itself, the first request of a
//! token: the RS256 signature, and for the provider's token the look-up of
//! the person it names), sequentially over one connection.
//!
//! The provider is the tests' oidc-provider (tests/e2e/oidc_provider.mjs,
//! node and its package from `make setup`); its tokens are signed with its
//! own RS256 key.
//!
//! `benches/auth.sh` (or `cargo run --release -p data-plane --example
//! bench_auth -- [SECONDS]`), after `make setup`; needs `wrk` on PATH.
// A benchmark fails loudly: there is no caller to hand an error to.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use axum::routing::get;
use data_plane::auth::oidc::{Oidc, OidcSettings};
use data_plane::auth::{Caller, JwtKeys, ServiceTokens};
use data_plane::state::AppState;
use data_plane_search::KeywordIndex;
use data_plane_store::Scope;
use data_plane_store::identity::{self, Permission};
use data_plane_store::testing::TestDatabase;
use serde_json::{Value, json};
use tokio::io::AsyncBufReadExt;

#[path = "shared/load.rs"]
mod load;
#[path = "shared/router.rs"]
mod router;

const AUDIENCE: &str = "data-plane-bench";

async fn whoami(caller: Caller) -> String {
    caller.user_id.to_string()
}

/// Starts the tests' OpenID provider; its issuer and the child (killed on drop).
async fn provider() -> (String, tokio::process::Child) {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/e2e");
    assert!(
        dir.join("node_modules/oidc-provider/package.json")
            .is_file(),
        "this benchmark needs node and oidc-provider in {}: run `make setup`",
        dir.display()
    );
    let config = json!({
        "port": 0,
        "resource": "http://127.0.0.1/",
        "audience": AUDIENCE,
        "clients": [],
        "users": {},
        "access_token_ttl": 3600,
    });
    let mut child = tokio::process::Command::new("node")
        .arg("oidc_provider.mjs")
        .current_dir(&dir)
        .env("OIDC_CONFIG", config.to_string())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("node runs");
    let stdout = child.stdout.take().unwrap();
    let mut line = String::new();
    tokio::io::BufReader::new(stdout)
        .read_line(&mut line)
        .await
        .unwrap();
    let issuer: Value = serde_json::from_str(&line).expect("the provider prints its issuer");
    (issuer["issuer"].as_str().unwrap().to_string(), child)
}

/// A token of the provider's for `sub`, signed with its current key.
async fn provider_token(http: &reqwest::Client, issuer: &str, sub: &str, jti: usize) -> String {
    let claims = json!({"sub": sub, "email": format!("{sub}@example.com"), "email_verified": true, "jti": jti.to_string(), "roles": ["user"]});
    let answer: Value = http
        .post(format!("{issuer}/__sign"))
        .json(&json!({"header": {}, "claims": claims}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    answer["token"].as_str().unwrap().to_string()
}

/// Mean milliseconds of one request with each of `tokens`, used once each.
async fn first_uses(http: &reqwest::Client, url: &str, tokens: &[String]) -> f64 {
    let started = Instant::now();
    for token in tokens {
        let r = http.get(url).bearer_auth(token).send().await.unwrap();
        assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
    }
    started.elapsed().as_secs_f64() * 1000.0 / tokens.len() as f64
}

#[tokio::main]
async fn main() {
    let seconds: u64 = std::env::args()
        .nth(1)
        .map(|s| s.parse().expect("SECONDS is a number"))
        .unwrap_or(5);
    let (issuer, _provider) = provider().await;
    let test = TestDatabase::create().await;
    let jwt = JwtKeys::new(b"bench-secret-bench-secret-bench-secret!");
    let mut settings = OidcSettings::new(&issuer, AUDIENCE).unwrap();
    settings.max_permission = Permission::User;
    let oidc = Oidc::new(settings).unwrap();
    oidc.warm().await;
    let state = AppState::new(
        test.db.clone(),
        KeywordIndex::in_memory().unwrap(),
        data_plane_testkit::embedder(),
        jwt.clone(),
        ServiceTokens::default(),
        std::sync::Arc::new(data_plane_web::fetch::Fetcher::new(Default::default())),
        data_plane_web::search::WebSearch::default(),
    )
    .unwrap()
    .with_oidc(oidc);
    let app = data_plane::http::app(state.clone()).merge(
        axum::Router::new()
            .route("/bench/whoami", get(whoami))
            .with_state(state),
    );
    let base = router::serve(app.with_state::<()>(())).await;
    let url = format!("{base}/bench/whoami");
    let http = reqwest::Client::new();

    let mut tx = test.db.begin(Scope::System).await.unwrap();
    let own_user = identity::upsert_user(&mut tx, "own@example.com", Some(Permission::User))
        .await
        .unwrap();
    tx.commit().await.unwrap();
    let own = |n: u64| {
        jwt.issue(
            own_user.id,
            "own@example.com",
            Permission::User,
            Duration::from_secs(3600 + n),
        )
        .unwrap()
    };
    let hs256 = own(0);
    let rs256 = provider_token(&http, &issuer, "bench", 0).await;
    // Each token once before the load: the provider's person linked.
    for token in [&hs256, &rs256] {
        let r = http.get(&url).bearer_auth(token).send().await.unwrap();
        assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
    }

    let dir = tempfile::tempdir().unwrap();
    let scripts = [
        (
            "hs256",
            load::script(dir.path(), "hs256", "GET", Some(&hs256), None),
        ),
        (
            "oidc",
            load::script(dir.path(), "oidc", "GET", Some(&rs256), None),
        ),
    ];
    for connections in [1u32, 64] {
        let mut best = [0.0f64; 2];
        let mut p50 = [f64::MAX; 2];
        let mut p99 = [f64::MAX; 2];
        let mut requests = [0.0f64; 2];
        // Alternating rounds, the best of each kept: the machine is shared.
        for _round in 0..2 {
            for (i, (_, script)) in scripts.iter().enumerate() {
                let f = load::wrk(&url, script, connections, seconds);
                best[i] = best[i].max(f.rps);
                p50[i] = p50[i].min(f.p50_ms);
                p99[i] = p99[i].min(f.p99_ms);
                requests[i] += f.requests;
            }
        }
        for (i, (name, _)) in scripts.iter().enumerate() {
            println!(
                "c{connections} {name} rps {:.0} p50_ms {:.3} p99_ms {:.3} ratio_to_hs256 {:.2} requests {:.0}",
                best[i],
                p50[i],
                p99[i],
                best[i] / best[0],
                requests[i]
            );
        }
    }

    // The first request of each token: verification, not the memory of it.
    let count = 300;
    let own_tokens: Vec<String> = (1..=count).map(|n| own(n as u64)).collect();
    let mut provider_tokens = Vec::new();
    for jti in 1..=count {
        provider_tokens.push(provider_token(&http, &issuer, "bench", jti).await);
    }
    let hs = first_uses(&http, &url, &own_tokens).await;
    let rs = first_uses(&http, &url, &provider_tokens).await;
    println!("first use hs256 ms {hs:.3}");
    println!("first use oidc ms {rs:.3} ratio_to_hs256 {:.2}", rs / hs);
}
