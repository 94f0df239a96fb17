//! `data-plane serve` as the multi-process benchmarks start it: the release
//! binary beside the example, over a test database, on a free loopback
//! port, with the local embedding model, logging errors only. Shared by
//! the benchmarks through `#[path]`.

use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use data_plane_store::testing::TestDatabase;

/// The `data-plane` binary built beside the running example.
fn binary() -> std::path::PathBuf {
    std::env::current_exe()
        .unwrap()
        .parent()
        .and_then(|examples| examples.parent())
        .unwrap()
        .join("data-plane")
}

/// Starts `data-plane serve` over `test`'s database, its files in `dir`,
/// signing tokens with `secret` and chatting with the model at
/// `model_url`, with `env` set on top: the process and its address.
pub fn serve(
    test: &TestDatabase,
    dir: &std::path::Path,
    secret: &str,
    model_url: &str,
    env: &[(&str, String)],
) -> (Child, SocketAddr) {
    let addr = data_plane_testkit::unused_addr();
    let mut command = Command::new(binary());
    command
        .env("DATABASE_URL", &test.app_url)
        .env("DATABASE_OWNER_URL", &test.owner_url)
        .env("DATA_PLANE_DATA_DIR", dir)
        .env("DATA_PLANE_MODEL_DIR", data_plane_testkit::model_dir())
        .env("DATA_PLANE_EMBEDDING_PROVIDER", "local")
        .env("DATA_PLANE_JWT_SECRET", secret)
        .env("OPENAI_BASE_URL", model_url)
        .env("DATA_PLANE_MODEL", "bench-model")
        .env("RUST_LOG", "error");
    for (name, value) in env {
        command.env(name, value);
    }
    let child = command
        .args(["serve", "--addr", &addr.to_string(), "--no-migrate"])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    (child, addr)
}

/// Waits until the server at `addr` is ready (`/readyz` answers 200: its
/// keyword index has caught up); how long that took.
pub async fn ready(addr: SocketAddr) -> Duration {
    let started = Instant::now();
    let until = started + Duration::from_secs(600);
    while !reqwest::get(format!("http://{addr}/readyz"))
        .await
        .is_ok_and(|r| r.status().is_success())
    {
        assert!(Instant::now() < until, "{addr} not ready in 10 minutes");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    started.elapsed()
}
