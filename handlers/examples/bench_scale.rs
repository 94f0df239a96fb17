//! How search_documents and ingestion cost as the corpus grows: the same
//! corpus recipe as `bench_search` (the demo corpus's manual with real
//! embeddings, filled up with chunks stitched from it) built at 10k and 100k
//! chunks, and at 1M when asked for, each in a database and keyword index of
//! its own, built once and reused. At each size it prints:
//!
//! - the build: the real files through the pipeline, the stitched chunks
//!   through the store, the HNSW build and the keyword index catching up;
//! - hybrid, vector and keyword latency through the registry (p50/p95/p99,
//!   with and without the query embedding), 40 real questions;
//! - ingestion into the corpus as it stands (HNSW live): real files through
//!   the whole pipeline (embedding included, and its write step apart),
//!   pre-embedded chunks through the store, and the keyword index following
//!   them; the probe is deleted afterwards, so the corpus keeps its size;
//! - the growth of each figure from one size to the next, beside the growth
//!   of the corpus, so what grows worse than linearly stands out.
//!
//! `BENCH_SCALE` picks the sizes: unset, `10k,100k`; `1m` adds 1M to those;
//! otherwise a comma-separated list (`10k,50k`). `BENCH_SCALE_REBUILD=1`
//! rebuilds the corpora. Run with `benches/scale.sh` (or `make bench`).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, bail};
use data_plane_embed::Embedder;
use data_plane_handlers::Deps;
use data_plane_ingest::pipeline::{Pipeline, Target};
use data_plane_registry::{NoLedger, Permission, Registry, ToolContext};
use data_plane_search::KeywordIndex;
use data_plane_search::follower::Follower;
use data_plane_store::content::{self, SourceKind};
use data_plane_store::{Db, Scope};
use rand::SeedableRng;
use rand::rngs::StdRng;
use serde_json::json;
use sqlx::Executor;
use uuid::Uuid;

#[path = "bench_support/mod.rs"]
mod bench_support;
use bench_support::corpus::{self, CHUNKS_PER_DOC, QUERIES, Setup};
use bench_support::{BenchDatabase, call, percentile, print_percentiles};

/// Changes whenever the way a corpus is built changes.
const RECIPE: &str = "data-plane scale bench v2";
const PASSES: usize = 3;
const K: usize = 10;
/// Real files of the manual ingested at each size: every fourth one.
const PROBE_FILE_STRIDE: usize = 4;
/// Pre-embedded chunks written through the store at each size.
const PROBE_CHUNKS: usize = 2_000;
const PROBE_SOURCE: &str = "probe";

/// The figures of one size, for the growth lines at the end: each one a
/// cost (milliseconds per call, or seconds per thousand chunks ingested),
/// so a growth above the corpus's own is worse than linear.
#[derive(Default)]
struct Figures {
    chunks: f64,
    costs: Vec<(String, f64)>,
}

impl Figures {
    fn put(&mut self, name: impl Into<String>, cost: f64) {
        self.costs.push((name.into(), cost));
    }
    /// A throughput, kept as the cost of a thousand chunks.
    fn put_rate(&mut self, name: &str, chunks_per_s: f64) {
        self.put(format!("{name}.s_per_1k_chunks"), 1000.0 / chunks_per_s);
    }
    fn get(&self, name: &str) -> Option<f64> {
        self.costs.iter().find(|(n, _)| *n == name).map(|(_, v)| *v)
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let corpus_dir = PathBuf::from(
        std::env::args()
            .nth(1)
            .unwrap_or_else(|| ".data/corpus/demo".into()),
    );
    let scales = scales(std::env::var("BENCH_SCALE").ok().as_deref())?;
    let rebuild = std::env::var("BENCH_SCALE_REBUILD").is_ok_and(|v| v == "1");
    let embedder = bench_support::local_embedder()?;
    let corpus_key = corpus::corpus_key(&corpus_dir)?;
    let queries: Vec<String> = QUERIES.iter().map(|q| q.to_string()).collect();

    let mut all = Vec::new();
    for (label, total) in &scales {
        let figures = measure(
            label,
            *total,
            &corpus_dir,
            &corpus_key,
            rebuild,
            &embedder,
            &queries,
        )
        .await
        .with_context(|| format!("at {label} chunks"))?;
        all.push((label.clone(), figures));
    }

    for pair in all.windows(2) {
        let ((a, fa), (b, fb)) = (&pair[0], &pair[1]);
        let growth = fb.chunks / fa.chunks;
        println!("scale.growth.{a}_to_{b}.chunks x{growth:.1}");
        let mut worse = Vec::new();
        for (name, before) in &fa.costs {
            if let Some(after) = fb.get(name) {
                println!("scale.growth.{a}_to_{b}.{name} x{:.2}", after / before);
                if after / before > growth {
                    worse.push(name.as_str());
                }
            }
        }
        println!(
            "scale.growth.{a}_to_{b}.worse_than_linear {}",
            if worse.is_empty() {
                "none".to_string()
            } else {
                worse.join(",")
            }
        );
    }
    Ok(())
}

/// `10k,100k` by default; `1m` adds 1M; otherwise the listed sizes.
fn scales(setting: Option<&str>) -> anyhow::Result<Vec<(String, usize)>> {
    let list = match setting.map(str::trim) {
        None | Some("") => "10k,100k".to_string(),
        Some(s) if s.eq_ignore_ascii_case("1m") => "10k,100k,1m".to_string(),
        Some(s) => s.to_string(),
    };
    let mut out = Vec::new();
    for item in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let lower = item.to_ascii_lowercase();
        let (digits, factor) = match lower.as_bytes().last() {
            Some(b'k') => (&lower[..lower.len() - 1], 1_000),
            Some(b'm') => (&lower[..lower.len() - 1], 1_000_000),
            _ => (lower.as_str(), 1),
        };
        let n: usize = digits
            .parse()
            .with_context(|| format!("BENCH_SCALE: {item:?} is not a size like 10k or 1m"))?;
        if n * factor < 5_000 {
            bail!("BENCH_SCALE: {item} is too small (5k at least: the real corpus alone is 2k)");
        }
        out.push((lower, n * factor));
    }
    out.sort_by_key(|(_, n)| *n);
    out.dedup_by_key(|(_, n)| *n);
    Ok(out)
}

async fn measure(
    label: &str,
    total: usize,
    corpus_dir: &Path,
    corpus_key: &Path,
    rebuild: bool,
    embedder: &Arc<Embedder>,
    queries: &[String],
) -> anyhow::Result<Figures> {
    let name = format!("dp_bench_scale_{label}");
    let index_dir = PathBuf::from(format!(".data/bench/scale-{label}-index"));
    let marker = format!("{RECIPE}; chunks={total}; corpus={}", corpus_key.display());
    let bench = BenchDatabase::prepare(&name, &marker, rebuild, &index_dir).await?;
    let p = format!("scale.{label}");
    let mut figures = Figures {
        chunks: total as f64,
        ..Figures::default()
    };

    let db = if bench.reuse {
        let owner = bench.owner().await?;
        data_plane_store::migrate::migrator().run(&owner).await?;
        owner.close().await;
        println!("{p}.setup reused");
        Db::connect(&bench.app_url, 8).await?
    } else {
        eprintln!(
            "building the {total}-chunk corpus in database {name} (once; later runs reuse it)"
        );
        bench.recreate().await?;
        let owner = bench.owner().await?;
        data_plane_store::migrate::migrator().run(&owner).await?;
        let hnsw = corpus::drop_hnsw(&owner).await?;
        let loaded = corpus::load(&bench.app_url, corpus_dir, total, embedder).await?;
        let t = Instant::now();
        // The graph of a million 384-dimension vectors needs about 2 GB; with
        // less, pgvector finishes the build on disk, far more slowly.
        let memory_mb = (total * 3 / 1000).max(1024);
        owner
            .execute(format!("SET maintenance_work_mem = '{memory_mb}MB'").as_str())
            .await?;
        owner.execute(hnsw.as_str()).await?;
        let hnsw_seconds = t.elapsed().as_secs_f64();
        owner
            .execute("VACUUM ANALYZE chunks, documents, folders, sources")
            .await?;
        owner.close().await;
        if index_dir.exists() {
            std::fs::remove_dir_all(&index_dir)?;
        }
        let index = KeywordIndex::open_or_create(&index_dir)?;
        let t = Instant::now();
        let applied = Follower::new(loaded.db.clone(), index).catch_up().await?;
        let keyword_seconds = t.elapsed().as_secs_f64();
        bench.mark(&marker).await?;
        let chunks = (loaded.real_chunks + loaded.synthetic_chunks) as f64;
        println!("{p}.setup built");
        println!(
            "{p}.build.pipeline_chunks_per_s {:.0}",
            loaded.real_chunks as f64 / loaded.real_seconds
        );
        println!(
            "{p}.build.store_chunks_per_s {:.0}",
            loaded.synthetic_chunks as f64 / loaded.synthetic_seconds
        );
        println!("{p}.build.hnsw_seconds {hnsw_seconds:.1}");
        println!("{p}.build.hnsw_chunks_per_s {:.0}", chunks / hnsw_seconds);
        println!(
            "{p}.build.keyword_chunks_per_s {:.0} ({applied} log entries)",
            chunks / keyword_seconds
        );
        loaded.db
    };
    bench.admin.close().await;

    let index = KeywordIndex::open_or_create(&index_dir)?;
    let follower = Follower::new(db.clone(), index.clone());
    let setup = Setup::load(&db).await?;
    // An earlier run stopped before removing its probe: remove it now.
    remove_probe(&db, &setup).await?;
    follower.catch_up().await?;
    println!("{p}.chunks {}", setup.chunks);
    println!("{p}.keyword_index_chunks {}", index.num_chunks());
    let (table_mb, hnsw_mb): (f64, f64) = {
        let mut tx = db.begin(Scope::System).await?;
        let sizes = sqlx::query_as(
            "SELECT pg_total_relation_size('chunks')::float8 / 1048576,
                    pg_relation_size('chunks_embedding')::float8 / 1048576",
        )
        .fetch_one(&mut *tx)
        .await?;
        tx.commit().await?;
        sizes
    };
    println!("{p}.chunks_table_mb {table_mb:.0}");
    println!("{p}.hnsw_mb {hnsw_mb:.0}");

    let deps = Arc::new(Deps::new(db.clone(), index, embedder.clone()));
    let registry = data_plane_handlers::registry(&deps, Arc::new(NoLedger))?;
    search_latency(&registry, &setup, queries, &p, &mut figures).await?;
    ingest_probe(
        &db,
        &follower,
        &setup,
        corpus_dir,
        embedder,
        &p,
        &mut figures,
    )
    .await?;
    remove_probe(&db, &setup).await?;
    follower.catch_up().await?;
    Ok(figures)
}

/// Each mode on every question after one untimed pass.
async fn search_latency(
    registry: &Registry,
    setup: &Setup,
    queries: &[String],
    p: &str,
    figures: &mut Figures,
) -> anyhow::Result<()> {
    let reader = ToolContext::new(setup.reader, None, Permission::User);
    // The reader may read every chunk, so keyword search runs unfiltered
    // (and pruned); within space `library` (99% of the chunks) it runs
    // behind the space filter, as it does for a reader of some spaces only.
    let library = ToolContext::new(setup.reader, Some(setup.library), Permission::User);
    for (name, mode, ctx) in [
        ("hybrid", "hybrid", &reader),
        ("vector", "vector", &reader),
        ("keyword", "keyword", &reader),
        ("keyword_filtered", "keyword", &library),
    ] {
        let mut total = Vec::new();
        let mut without = Vec::new();
        for pass in 0..=PASSES {
            for q in queries {
                let t = Instant::now();
                let data = call(
                    registry,
                    json!({ "query": q, "mode": mode, "limit": K }),
                    ctx,
                )
                .await?;
                let ms = t.elapsed().as_secs_f64() * 1000.0;
                if pass > 0 {
                    total.push(ms);
                    without.push(ms - data["timings"]["embed_ms"].as_f64().unwrap_or(0.0));
                }
            }
        }
        print_percentiles(&format!("{p}.{name}"), &total);
        let (p50, p99) = (percentile(&total, 50.0), percentile(&total, 99.0));
        let key = |what: &str| format!("{name}.{what}");
        figures.put(key("p50_ms"), p50);
        figures.put(key("p99_ms"), p99);
        if mode != "keyword" {
            print_percentiles(&format!("{p}.{name}.without_embed"), &without);
            figures.put(key("without_embed.p50_ms"), percentile(&without, 50.0));
            figures.put(key("without_embed.p99_ms"), percentile(&without, 99.0));
        }
    }
    Ok(())
}

/// Ingestion into the corpus as it stands: real files through the whole
/// pipeline, then pre-embedded chunks through the store, then the keyword
/// index following both.
async fn ingest_probe(
    db: &Db,
    follower: &Follower,
    setup: &Setup,
    corpus_dir: &Path,
    embedder: &Arc<Embedder>,
    p: &str,
    figures: &mut Figures,
) -> anyhow::Result<()> {
    let mut tx = db.begin(Scope::System).await?;
    let source =
        content::ensure_source(&mut tx, setup.library, PROBE_SOURCE, SourceKind::Files).await?;
    tx.commit().await?;
    let target = Target {
        space_id: setup.library,
        source_id: source.id,
    };

    let mut files = Vec::new();
    corpus::files_under(&corpus_dir.join("postgresql-manual"), &mut files)?;
    files.sort();
    let pipeline = Pipeline::new(db.clone(), embedder.clone());
    let (mut chunks, mut write_seconds) = (0usize, 0f64);
    let t = Instant::now();
    for file in files.iter().step_by(PROBE_FILE_STRIDE) {
        let rel = file
            .strip_prefix(corpus_dir)?
            .to_string_lossy()
            .into_owned();
        let bytes = std::fs::read(file)?;
        let report = pipeline
            .ingest_file(Scope::System, target, &format!("probe/{rel}"), &bytes)
            .await?;
        chunks += report.chunks;
        write_seconds += report.write_time.as_secs_f64();
    }
    let seconds = t.elapsed().as_secs_f64();
    println!("{p}.ingest.pipeline_chunks {chunks}");
    println!(
        "{p}.ingest.pipeline_chunks_per_s {:.0}",
        chunks as f64 / seconds
    );
    println!(
        "{p}.ingest.pipeline_write_chunks_per_s {:.0}",
        chunks as f64 / write_seconds
    );
    figures.put_rate("ingest.pipeline", chunks as f64 / seconds);
    figures.put_rate("ingest.pipeline_write", chunks as f64 / write_seconds);

    let real = corpus::real_chunks(db, "manual").await?;
    let mut rng = StdRng::seed_from_u64(11);
    let docs = PROBE_CHUNKS.div_ceil(CHUNKS_PER_DOC);
    let t = Instant::now();
    let mut tx = db.begin(Scope::System).await?;
    for d in 0..docs {
        let path = format!("probe/stitched-{d:03}.txt");
        let doc = corpus::stitched_document(
            setup.library,
            source.id,
            &path,
            CHUNKS_PER_DOC,
            &real,
            &mut rng,
        );
        content::write_document(&mut tx, &doc).await?;
        if (d + 1) % 10 == 0 {
            tx.commit().await?;
            tx = db.begin(Scope::System).await?;
        }
    }
    tx.commit().await?;
    let seconds = t.elapsed().as_secs_f64();
    let stored = docs * CHUNKS_PER_DOC;
    println!(
        "{p}.ingest.store_chunks_per_s {:.0}",
        stored as f64 / seconds
    );
    figures.put_rate("ingest.store", stored as f64 / seconds);

    let t = Instant::now();
    follower.catch_up().await?;
    let seconds = t.elapsed().as_secs_f64();
    let indexed = (chunks + stored) as f64;
    println!("{p}.ingest.keyword_chunks_per_s {:.0}", indexed / seconds);
    figures.put_rate("ingest.keyword", indexed / seconds);
    Ok(())
}

/// Deletes every document of the probe source, leaving the corpus at its
/// size; the caller's next catch-up removes them from the keyword index.
async fn remove_probe(db: &Db, setup: &Setup) -> anyhow::Result<()> {
    let mut tx = db.begin(Scope::System).await?;
    let ids: Vec<Uuid> = sqlx::query_scalar(
        "SELECT d.id FROM documents d JOIN sources s ON s.id = d.source_id
          WHERE s.space_id = $1 AND s.name = $2",
    )
    .bind(setup.library)
    .bind(PROBE_SOURCE)
    .fetch_all(&mut *tx)
    .await?;
    for id in &ids {
        content::delete_document(&mut tx, *id).await?;
    }
    tx.commit().await?;
    Ok(())
}
