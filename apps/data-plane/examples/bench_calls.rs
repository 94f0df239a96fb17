//! The cheapest tool call over HTTP against its floor: document_info through
//! `POST /v1/tools/document_info/execute`, next to a route on the same
//! server that authenticates the same way and runs one trivial PostgreSQL
//! query (`SELECT 1` through the same pool), and `/healthz` (no
//! authentication, no database). The real router on 127.0.0.1 over a real
//! test database, TCP_NODELAY as `data-plane serve` sets it, a pool of the
//! server's default size; `wrk` drives each route with 1 connection
//! (latency) and 64 (throughput), sharing the machine's cores.
//!
//! Prints one `name value` line per figure, and each figure as a ratio to
//! the trivial-query route measured in the same run. With each route it
//! prints the CPU time spent per call, from `/proc`: by the server (this
//! process), by PostgreSQL (every `postgres` process), by wrk, and by the
//! whole machine: where a call's cost lies.
//!
//! Then PostgreSQL's own ceiling, with pgbench (it ships with the server)
//! on the run's database as the same user: document_info's transaction
//! (the identity, the handler's statement, the rollback) pipelined into one
//! round trip with prepared statements, which no driver can beat, and
//! `SELECT 1`; the HTTP call's throughput is printed as a share of the
//! pipelined transaction's, and the CPU per transaction of PostgreSQL (the
//! machine's less pgbench's own) and of pgbench. Skipped, saying so, where
//! pgbench is missing.
//!
//! `benches/calls.sh` (or `cargo run --release -p data-plane --example
//! bench_calls -- [SECONDS]`), after `make setup`; needs `wrk` on PATH.
// A benchmark fails loudly: there is no caller to hand an error to.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::routing::get;
use data_plane::auth::{Caller, JwtKeys, ServiceTokens};
use data_plane::state::AppState;
use data_plane_search::KeywordIndex;
use data_plane_store::content::{self, NewDocument, SourceKind, WriteOutcome};
use data_plane_store::identity::{self, MembershipRole, Permission};
use data_plane_store::testing::TestDatabase;
use data_plane_store::{Db, Scope};
use serde_json::json;

// Process-by-pid readings are for the benchmarks that start servers.
#[allow(dead_code)]
#[path = "shared/cpu.rs"]
mod cpu;
#[path = "shared/load.rs"]
mod load;
#[path = "shared/router.rs"]
mod router;

use load::{Figures, script, wrk};

/// The pool size `data-plane serve` opens by default (DATA_PLANE_DB_POOL).
const POOL: u32 = 32;

/// The floor: the same authentication as a tool call, then `SELECT 1`.
async fn trivial(State(state): State<AppState>, caller: Caller) -> String {
    sqlx::query("SELECT 1")
        .execute(state.db.pool())
        .await
        .unwrap();
    caller.user_id.to_string()
}

/// CPU time so far, in clock ticks: this process (the server and the
/// runtime it runs on), its children that ended (wrk, pgbench), every
/// `postgres` process alive (the backends and the background ones that a
/// write wakes), and the whole machine busy.
#[derive(Clone, Copy)]
struct Cpu {
    server: u64,
    children: u64,
    postgres: u64,
    machine: u64,
}

fn cpu_now() -> Cpu {
    let (server, children) = cpu::this_process();
    Cpu {
        server,
        children,
        postgres: cpu::postgres(),
        machine: cpu::machine(),
    }
}

#[tokio::main]
async fn main() {
    let seconds: u64 = std::env::args()
        .nth(1)
        .map(|s| s.parse().expect("SECONDS is a number"))
        .unwrap_or(8);
    let test = TestDatabase::create().await;
    let pool = std::env::var("BENCH_POOL")
        .ok()
        .and_then(|p| p.parse().ok())
        .unwrap_or(POOL);
    // BENCH_SSLMODE=prefer (or any mode) replaces the owner URL's own
    // (`disable` by default): `prefer` is sqlx's default, TLS whenever the
    // server offers it.
    let url = match std::env::var("BENCH_SSLMODE") {
        Ok(mode) => {
            let base = test
                .app_url
                .split_once('?')
                .map_or(test.app_url.as_str(), |(b, _)| b);
            format!("{base}?sslmode={mode}")
        }
        Err(_) => test.app_url.clone(),
    };
    let db = Db::connect(&url, pool).await.unwrap();
    let mut tx = db.begin(Scope::System).await.unwrap();
    let user = identity::upsert_user(&mut tx, "bench@example.com", Some(Permission::User))
        .await
        .unwrap()
        .id;
    let (space, _) = identity::ensure_space(&mut tx, "bench").await.unwrap();
    identity::add_member(&mut tx, space.id, user, MembershipRole::Editor)
        .await
        .unwrap();
    let source = content::ensure_source(&mut tx, space.id, "notes", SourceKind::Files)
        .await
        .unwrap();
    let text = "A short note.\nIt has two lines.\n";
    let outcome = content::write_document(
        &mut tx,
        &NewDocument {
            space_id: space.id,
            source_id: source.id,
            path: "notes/short.txt".into(),
            mime: "text/plain".into(),
            size_bytes: text.len() as i64,
            content_hash: "bench-short".into(),
            title: Some("A short note".into()),
            language: Some("en".into()),
            content: text.into(),
            metadata: json!({}),
            chunks: vec![],
            tables: vec![],
        },
    )
    .await
    .unwrap();
    tx.commit().await.unwrap();
    let (WriteOutcome::Created(document)
    | WriteOutcome::Replaced(document)
    | WriteOutcome::Unchanged(document)) = outcome;

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
    .unwrap();
    let token = jwt
        .issue(
            user,
            "bench@example.com",
            Permission::User,
            Duration::from_secs(3600),
        )
        .unwrap();
    let app = data_plane::http::app(state.clone()).merge(
        axum::Router::new()
            .route("/bench/trivial", get(trivial))
            .with_state(state),
    );
    let base = router::serve(app.with_state::<()>(())).await;

    let dir = tempfile::tempdir().unwrap();
    let body = json!({ "args": { "document_id": document }, "spaceId": space.id }).to_string();
    let routes = [
        (
            "healthz",
            format!("{base}/healthz"),
            script(dir.path(), "healthz", "GET", None, None),
        ),
        (
            "trivial_query",
            format!("{base}/bench/trivial"),
            script(dir.path(), "trivial", "GET", Some(&token), None),
        ),
        (
            "document_info",
            format!("{base}/v1/tools/document_info/execute"),
            script(
                dir.path(),
                "document_info",
                "POST",
                Some(&token),
                Some(&body),
            ),
        ),
    ];
    // BENCH_ONLY="document_info" runs that route alone (for a profile).
    let only = std::env::var("BENCH_ONLY").ok();
    let mut figures = Vec::new();
    for connections in [1, 64] {
        for (name, url, script) in &routes {
            if only
                .as_deref()
                .is_some_and(|o| !o.split(' ').any(|n| n == *name))
            {
                continue;
            }
            // wrk blocks; the server keeps running on the runtime's threads.
            let (url, script) = (url.clone(), script.clone());
            let before = cpu_now();
            let f = tokio::task::spawn_blocking(move || wrk(&url, &script, connections, seconds))
                .await
                .unwrap();
            let after = cpu_now();
            println!(
                "calls.{name}.c{connections} p50_ms {:.3} p99_ms {:.3} rps {:.0}",
                f.p50_ms, f.p99_ms, f.rps
            );
            // CPU per call says where a call's cost lies (the machine's
            // figure less the three named is what else ran meanwhile).
            let us = |ticks: u64| cpu::seconds(ticks) * 1e6 / f.requests.max(1.0);
            println!(
                "calls.{name}.c{connections} cpu_us_per_call server {:.1} postgres {:.1} wrk {:.1} machine {:.1}",
                us(after.server - before.server),
                us(after.postgres.saturating_sub(before.postgres)),
                us(after.children - before.children),
                us(after.machine - before.machine)
            );
            figures.push((*name, connections, f));
        }
    }
    let floor = |c: u32| {
        figures
            .iter()
            .find(|(n, conns, _)| *n == "trivial_query" && *conns == c)
            .map(|(_, _, f)| (f.p50_ms, f.rps))
            .unwrap()
    };
    for (name, connections, f) in &figures {
        if only.is_some() {
            break;
        }
        let (p50, rps) = floor(*connections);
        println!(
            "calls.{name}.c{connections}.ratio_to_trivial_query p50 {:.2} rps {:.2}",
            f.p50_ms / p50,
            f.rps / rps
        );
    }
    // The ceiling PostgreSQL itself sets on this machine: its own client
    // (pgbench, shipped with the server) on the statements the tool sends,
    // pipelined into one round trip, which no driver can beat.
    if only.is_none() {
        let (call_url, call_script) = (&routes[2].1, &routes[2].2);
        let call = |connections: u32| wrk(call_url, call_script, connections, seconds).rps;
        postgres_ceiling(
            &url,
            user,
            space.id,
            document,
            &figures,
            seconds,
            dir.path(),
            &call,
        );
    }
    test.destroy().await.unwrap();
}

/// pgbench on the database of the run, with the bench's user, space and
/// document: document_info's transaction (the identity, the handler's own
/// statement, the rollback) sent as one pipeline, and `SELECT 1`, each at 1
/// and 64 clients; then the HTTP call's throughput as a share of the
/// pipelined transaction's. Then, since one pgbench figure moves by half
/// between minutes on a shared machine, the ratio again from `BENCH_PAIRS`
/// (3) back-to-back pairs at each client count, the HTTP call (`call`)
/// and the pipelined transaction alternating, and their median. Skipped,
/// saying so, without pgbench.
#[allow(clippy::too_many_arguments)]
fn postgres_ceiling(
    url: &str,
    user: uuid::Uuid,
    space: uuid::Uuid,
    document: uuid::Uuid,
    figures: &[(&str, u32, Figures)],
    seconds: u64,
    dir: &std::path::Path,
    call: &dyn Fn(u32) -> f64,
) {
    let Some(pgbench) = find_pgbench() else {
        println!("calls.pg skipped: no pgbench on PATH or in /usr/lib/postgresql/*/bin");
        return;
    };
    // pgbench names its parameters :name; with -M prepared they are bound
    // as parameters, as the driver binds $1 and $2.
    let query = data_plane_handlers::document_info::QUERY
        .replace("$1", ":document")
        .replace("$2", ":space")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    let identity = "SELECT set_config('data_plane.user_id', :user, true), \
                    set_config('data_plane.system', 'off', true);";
    let vars = [
        ("user", user.to_string()),
        ("space", space.to_string()),
        ("document", document.to_string()),
    ];
    // Once, unpipelined, failing unless the statement finds the document
    // under this identity: a ceiling measured on an empty answer means nothing.
    let check = dir.join("pg_check.sql");
    std::fs::write(
        &check,
        format!("BEGIN;\n{identity}\nSELECT 1 / count(*) FROM ({query}) q;\nROLLBACK;\n"),
    )
    .unwrap();
    run_pgbench(&pgbench, url, &check, 1, None, &vars);
    let pipelined = dir.join("pg_document_info.sql");
    std::fs::write(
        &pipelined,
        format!("\\startpipeline\nBEGIN;\n{identity}\n{query};\nROLLBACK;\n\\endpipeline\n"),
    )
    .unwrap();
    let select1 = dir.join("pg_select1.sql");
    std::fs::write(&select1, "SELECT 1;\n").unwrap();
    for clients in [1, 64] {
        for (name, script) in [
            ("document_info_pipelined", &pipelined),
            ("select1", &select1),
        ] {
            let before = cpu_now();
            let (tps, latency_ms) =
                run_pgbench(&pgbench, url, script, clients, Some(seconds), &vars);
            let after = cpu_now();
            println!("calls.pg.{name}.c{clients} latency_avg_ms {latency_ms:.3} tps {tps:.0}");
            let us = |ticks: u64| cpu::seconds(ticks) * 1e6 / (tps * seconds as f64).max(1.0);
            // pgbench's backends end with it, so PostgreSQL's share is
            // what the machine spent less pgbench itself.
            let machine = after.machine - before.machine;
            let pgbench = after.children - before.children;
            println!(
                "calls.pg.{name}.c{clients} cpu_us_per_call postgres {:.1} pgbench {:.1} machine {:.1}",
                us(machine.saturating_sub(pgbench)),
                us(pgbench),
                us(machine)
            );
            if name == "document_info_pipelined"
                && let Some((_, _, f)) = figures
                    .iter()
                    .find(|(n, c, _)| *n == "document_info" && *c == clients)
            {
                println!(
                    "calls.document_info.c{clients}.ratio_to_pg_pipelined rps {:.2}",
                    f.rps / tps
                );
            }
        }
    }
    let pairs: usize = std::env::var("BENCH_PAIRS")
        .ok()
        .and_then(|p| p.parse().ok())
        .unwrap_or(3);
    for clients in [1, 64] {
        let mut ratios: Vec<f64> = (0..pairs)
            .map(|_| {
                let rps = call(clients);
                let (tps, _) = run_pgbench(&pgbench, url, &pipelined, clients, Some(seconds), &vars);
                println!(
                    "calls.pair.c{clients} document_info_rps {rps:.0} pg_pipelined_tps {tps:.0} ratio {:.2}",
                    rps / tps
                );
                rps / tps
            })
            .collect();
        ratios.sort_by(f64::total_cmp);
        if let Some(median) = ratios.get(ratios.len() / 2) {
            println!(
                "calls.document_info.c{clients}.ratio_to_pg_pipelined_median_of_{pairs} rps {median:.2}"
            );
        }
    }
}

fn find_pgbench() -> Option<std::path::PathBuf> {
    let on_path = std::process::Command::new("pgbench")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if on_path {
        return Some("pgbench".into());
    }
    let mut found: Vec<_> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|e| e.ok())
        .map(|e| e.path().join("bin/pgbench"))
        .filter(|p| p.exists())
        .collect();
    found.sort();
    found.pop()
}

/// Runs pgbench (a duration, or one transaction when `seconds` is None)
/// and answers transactions per second and the average latency in ms.
fn run_pgbench(
    pgbench: &std::path::Path,
    url: &str,
    script: &std::path::Path,
    clients: u32,
    seconds: Option<u64>,
    vars: &[(&str, String)],
) -> (f64, f64) {
    let mut cmd = std::process::Command::new(pgbench);
    cmd.args(["-n", "-M", "prepared", "-f"])
        .arg(script)
        .arg(format!("-c{clients}"))
        .arg(format!("-j{}", clients.min(2)));
    match seconds {
        Some(s) => cmd.arg(format!("-T{s}")),
        None => cmd.arg("-t1"),
    };
    for (name, value) in vars {
        cmd.arg("-D").arg(format!("{name}={value}"));
    }
    let out = cmd.arg(url).output().expect("pgbench runs");
    let text = String::from_utf8_lossy(&out.stdout);
    // pgbench 15 and later count failed transactions (and may still exit 0);
    // older ones stop a client, and exit non-zero, on its first error.
    let failed = text
        .lines()
        .find_map(|l| l.strip_prefix("number of failed transactions: "))
        .is_some_and(|rest| !rest.starts_with("0 "));
    assert!(
        out.status.success() && !failed,
        "pgbench failed on {}: {text}{}",
        script.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let value = |prefix: &str| -> f64 {
        text.lines()
            .find_map(|l| l.strip_prefix(prefix))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("pgbench printed no '{prefix}': {text}"))
    };
    (value("tps = "), value("latency average = "))
}
