//! Ingestion throughput, end to end against the embedding alone, and what
//! following it costs a replica: every file of a corpus through the real
//! pipeline (extract → chunk → embed → write, `Pipeline::ingest_batch` as
//! `data-plane ingest` runs it) into a fresh database, while two replicas (`data-plane serve`
//! processes) follow the change log into keyword indexes of their own, as
//! served by default (changes gathered for `DATA_PLANE_INDEX_BATCH_MS`,
//! 1 s). With `BENCH_INGEST_UNBATCHED=1` the second one commits after every
//! change instead (`0`, as replicas did before), to show what batching
//! saves; its CPU then counts against the ingest's ratio too.
//!
//! First the same chunks are embedded alone, in one call (the embedder's
//! best case: no extraction, no database, batches as full as it likes);
//! then the end-to-end ingest. Prints chunks/s of both and their ratio; the
//! CPU seconds of this process (the ingest), of each replica from the
//! ingest's start until its index holds the last change, and of
//! PostgreSQL; and each replica's as a share of the ingest's.
//!
//! The corpus is a folder (the demo corpus by default) or a BEIR
//! `corpus.jsonl` (SciFact's abstracts: `DEMO_CORPUS=../shared/fixtures/
//! scifact-train/corpus.jsonl`), the first `BENCH_INGEST_LIMIT` documents
//! of it when that is set.
//!
//! `benches/ingest.sh` (or `cargo build --release -p data-plane --bin
//! data-plane --example bench_ingest` and run the example with the corpus);
//! needs `make setup` first.

// A benchmark fails loudly: there is no caller to hand an error to.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use std::process::Child;
use std::sync::Arc;
use std::time::{Duration, Instant};

use data_plane_embed::{EmbedConfig, Embedder};
use data_plane_ingest::pipeline::{Pipeline, Target};
use data_plane_ingest::{ChunkOptions, Limits, chunk, embedding_input, extract_with};
use data_plane_store::content::{self, SourceKind};
use data_plane_store::testing::TestDatabase;
use data_plane_store::{Scope, identity, index_log};

#[path = "shared/cpu.rs"]
mod cpu;
#[path = "shared/server.rs"]
mod server;

/// The service token the replicas know, to read how far their index has come.
const SERVICE_TOKEN: &str = "bench-ingest-service-token-0123456789";

struct Replica {
    name: &'static str,
    child: Child,
    addr: std::net::SocketAddr,
    _dir: tempfile::TempDir,
}

impl Replica {
    fn start(test: &TestDatabase, name: &'static str, batch_ms: &str) -> Replica {
        let dir = tempfile::tempdir().unwrap();
        let (child, addr) = server::serve(
            test,
            dir.path(),
            "bench-ingest-jwt-secret-0123456789abcdef",
            "http://127.0.0.1:9/v1",
            &[
                ("DATA_PLANE_INDEX_BATCH_MS", batch_ms.to_string()),
                (
                    "DATA_PLANE_SERVICE_TOKENS",
                    format!("bench={SERVICE_TOKEN}"),
                ),
            ],
        );
        Replica {
            name,
            child,
            addr,
            _dir: dir,
        }
    }

    /// The last change its keyword index holds.
    async fn index_seq(&self, http: &reqwest::Client) -> i64 {
        let body: serde_json::Value = http
            .get(format!("http://{}/readyz", self.addr))
            .bearer_auth(SERVICE_TOKEN)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        body["index_seq"].as_i64().unwrap_or(0)
    }
}

/// The corpus as (path, bytes): every file under a folder, or each line of
/// a BEIR `corpus.jsonl` (`{"_id", "title", "text"}`) as `ID.md`, a title
/// line and the text (SciFact's abstracts); at most `limit`.
fn documents(corpus: &Path, limit: usize) -> Vec<(String, Vec<u8>)> {
    if corpus.extension().is_some_and(|e| e == "jsonl") {
        let lines = std::fs::read_to_string(corpus).unwrap();
        return lines
            .lines()
            .filter(|l| !l.trim().is_empty())
            .take(limit)
            .map(|line| {
                let doc: serde_json::Value = serde_json::from_str(line).unwrap();
                let id = doc["_id"].as_str().unwrap();
                let text = format!(
                    "# {}\n\n{}\n",
                    doc["title"].as_str().unwrap_or(""),
                    doc["text"].as_str().unwrap()
                );
                (format!("{id}.md"), text.into_bytes())
            })
            .collect();
    }
    walkdir::WalkDir::new(corpus)
        .sort_by_file_name()
        .into_iter()
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_file() && !e.file_name().to_string_lossy().starts_with('.'))
        .take(limit)
        .map(|e| {
            let rel = e
                .path()
                .strip_prefix(corpus)
                .unwrap_or(e.path())
                .to_string_lossy()
                .into_owned();
            (rel, std::fs::read(e.path()).unwrap())
        })
        .collect()
}

/// What the pipeline would embed for `docs`: each extracted and chunked
/// with the pipeline's defaults.
fn embedding_inputs(docs: &[(String, Vec<u8>)]) -> Vec<String> {
    let (limits, options) = (Limits::default(), ChunkOptions::default());
    let mut inputs = Vec::new();
    for (name, bytes) in docs {
        let Ok(extracted) = extract_with(name, bytes, &limits) else {
            continue;
        };
        let title = extracted.metadata.title.as_deref();
        for c in chunk(
            &extracted.text,
            &extracted.metadata.headings,
            &extracted.metadata.pages,
            &options,
        ) {
            inputs.push(embedding_input(&c, title));
        }
    }
    inputs
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let corpus: PathBuf = std::env::args()
        .nth(1)
        .unwrap_or_else(|| ".data/corpus/demo".into())
        .into();
    let limit = std::env::var("BENCH_INGEST_LIMIT")
        .ok()
        .map_or(usize::MAX, |n| {
            n.parse().expect("BENCH_INGEST_LIMIT is a number")
        });
    let files = documents(&corpus, limit);
    anyhow::ensure!(
        !files.is_empty(),
        "no documents in {} (run make setup)",
        corpus.display()
    );
    let embedder = Arc::new(Embedder::from_config(&EmbedConfig::local(
        data_plane_testkit::model_dir(),
    ))?);

    // The embedding alone, on the very chunks the ingest will embed.
    let inputs = embedding_inputs(&files);
    embedder.embed(&inputs[..inputs.len().min(16)]).await?;
    let started = Instant::now();
    let (own_before, _) = cpu::this_process();
    embedder.embed(&inputs).await?;
    let embed_only = started.elapsed().as_secs_f64();
    let embed_only_cpu = cpu::seconds(cpu::this_process().0 - own_before);

    let test = TestDatabase::create().await;
    let mut tx = test.db.begin(Scope::System).await?;
    let (space, _) = identity::ensure_space(&mut tx, "bench").await?;
    let source = content::ensure_source(&mut tx, space.id, "demo", SourceKind::Files).await?;
    tx.commit().await?;
    let target = Target {
        space_id: space.id,
        source_id: source.id,
    };

    let http = reqwest::Client::new();
    let unbatched = std::env::var("BENCH_INGEST_UNBATCHED").is_ok_and(|v| v == "1");
    let mut replicas = [
        Replica::start(&test, "batched", "1000"),
        if unbatched {
            Replica::start(&test, "unbatched", "0")
        } else {
            Replica::start(&test, "batched_2", "1000")
        },
    ];
    for replica in &replicas {
        server::ready(replica.addr).await;
    }

    let pipeline = Pipeline::new(test.db.clone(), embedder);
    let (mut embed, mut write) = (Duration::ZERO, Duration::ZERO);
    let (mut docs, mut chunks, mut failed) = (0usize, 0usize, 0usize);
    let replicas_before: Vec<u64> = replicas
        .iter()
        .map(|r| cpu::process(r.child.id()))
        .collect();
    let (own_before, _) = cpu::this_process();
    let postgres_before = cpu::postgres();
    let machine_before = cpu::machine();
    let started = Instant::now();
    let bytes: usize = files.iter().map(|(_, data)| data.len()).sum();
    pipeline
        .ingest_batch(
            Scope::System,
            target,
            files
                .iter()
                .map(|(rel, data)| (rel.clone(), Ok(data.clone()))),
            |rel, report| match report {
                Ok(r) => {
                    docs += 1;
                    chunks += r.chunks;
                    embed += r.embed_time;
                    write += r.write_time;
                }
                Err(e) => {
                    failed += 1;
                    eprintln!("failed {rel}: {e}");
                }
            },
        )
        .await?;
    let total = started.elapsed().as_secs_f64();
    let ingest_cpu = cpu::seconds(cpu::this_process().0 - own_before);

    // Each replica's cost runs until its index holds the last change.
    let mut tx = test.db.begin(Scope::System).await?;
    let head = index_log::head(&mut tx).await?;
    drop(tx);
    let mut followed = Vec::new();
    for (replica, before) in replicas.iter().zip(&replicas_before) {
        let until = Instant::now() + Duration::from_secs(120);
        while replica.index_seq(&http).await < head {
            assert!(Instant::now() < until, "{} did not catch up", replica.name);
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        followed.push((
            replica.name,
            cpu::seconds(cpu::process(replica.child.id()) - before),
        ));
    }
    let postgres_cpu = cpu::seconds(cpu::postgres() - postgres_before);
    let machine_cpu = cpu::seconds(cpu::machine() - machine_before);

    println!("ingest.files {}", files.len());
    println!("ingest.documents {docs}");
    println!("ingest.failed {failed}");
    println!("ingest.mb {:.1}", bytes as f64 / 1_048_576.0);
    println!("ingest.chunks {chunks}");
    println!("ingest.embed_only_seconds {embed_only:.1}");
    println!(
        "ingest.embed_only_chunks_per_s {:.1}",
        inputs.len() as f64 / embed_only
    );
    println!("ingest.embed_only_cpu_seconds {embed_only_cpu:.1}");
    println!("ingest.seconds {total:.1}");
    println!("ingest.documents_per_s {:.1}", docs as f64 / total);
    println!("ingest.chunks_per_s {:.1}", chunks as f64 / total);
    println!(
        "ingest.ratio_end_to_end_over_embed_only {:.2}",
        (chunks as f64 / total) / (inputs.len() as f64 / embed_only)
    );
    println!("ingest.embed_seconds {:.1}", embed.as_secs_f64());
    println!("ingest.write_seconds {:.1}", write.as_secs_f64());
    println!("ingest.cpu_seconds {ingest_cpu:.1}");
    println!("ingest.postgres_cpu_seconds {postgres_cpu:.1}");
    println!("ingest.machine_cpu_seconds {machine_cpu:.1}");
    for (name, seconds) in followed {
        println!("ingest.replica_{name}_cpu_seconds {seconds:.1}");
        println!(
            "ingest.replica_{name}_cpu_over_ingest {:.3}",
            seconds / ingest_cpu
        );
    }

    for replica in &mut replicas {
        replica.child.kill().ok();
        replica.child.wait().ok();
    }
    test.destroy().await?;
    Ok(())
}
