//! Retrieval quality of search_documents on SciFact's training claims
//! (`../shared/fixtures/scifact-train`, BEIR format): every abstract is one
//! document (`<id>.txt`: title, blank line, text) ingested through the real
//! pipeline; every claim with judged abstracts goes through the registry's
//! search_documents in each mode (hybrid twice: the default fusion and
//! reciprocal rank fusion, `hybrid_rrf`); abstracts are ranked by their best passage;
//! nDCG@10, recall@50 (the tool's largest page) and MRR@10 are printed per
//! mode, with the latency of the same calls. Prints `name value` lines.
//!
//! The corpus lives in its own database (`dp_bench_quality`) and Tantivy
//! directory and is reused by later runs; BENCH_QUALITY_REBUILD=1 rebuilds
//! it (needed after a change to chunking or extraction).
//!
//! BENCH_QUALITY_CHUNKING=TARGET,MAX,OVERLAP (characters) ingests the
//! corpus with other passage sizes than the pipeline's defaults, into a
//! database and directory of their own (`dp_bench_quality_<t>_<m>_<o>`),
//! also kept for reuse.
//!
//! BENCH_QUALITY_SETTINGS='{"search_bm25": {"k1": 0.9}}' runs with those
//! admin settings instead of the defaults (hybrid_rrf still forces RRF).
//!
//! BENCH_QUALITY_DUMP=FILE also writes every claim's vector and keyword
//! passages (chunk id, abstract, score; JSON lines), for trying fusions
//! offline.
//!
//! Run with `benches/quality.sh` (or `make bench`); needs `make setup` first.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context;
use data_plane_embed::Embedder;
use data_plane_handlers::Deps;
use data_plane_ingest::ChunkOptions;
use data_plane_ingest::pipeline::{Pipeline, Target};
use data_plane_registry::{NoLedger, Permission, ToolContext};
use data_plane_search::KeywordIndex;
use data_plane_search::follower::Follower;
use data_plane_store::content::{self, SourceKind};
use data_plane_store::identity::{self, MembershipRole};
use data_plane_store::{Db, Scope};
use serde_json::{Value, json};
use uuid::Uuid;

#[path = "bench_support/mod.rs"]
mod bench_support;
use bench_support::{BenchDatabase, call, mean, print_percentiles};

const DATABASE: &str = "dp_bench_quality";
/// Changes whenever the way the corpus is built changes.
const RECIPE: &str = "data-plane quality bench v2";
const READER: &str = "reader@bench.quality";
/// The cut-off of nDCG and MRR.
const K: usize = 10;
/// The most passages one call answers (the tool's maximum `limit`).
const DEPTH: usize = 50;

struct Fixture {
    /// `(id, title, text)` of every abstract.
    corpus: Vec<(String, String, String)>,
    /// `(claim id, text)` of every claim with judged abstracts.
    claims: Vec<(String, String)>,
    /// Claim id → its relevant abstracts and their grades.
    qrels: HashMap<String, HashMap<String, f64>>,
}

fn read_fixture(dir: &Path) -> anyhow::Result<Fixture> {
    let read = |name: &str| {
        std::fs::read_to_string(dir.join(name)).with_context(|| {
            format!(
                "{} is missing: the SciFact fixture is expected in {}",
                name,
                dir.display()
            )
        })
    };
    let lines = |text: String| -> anyhow::Result<Vec<Value>> {
        text.lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| serde_json::from_str(l).context("a line that is not JSON"))
            .collect()
    };
    let field = |v: &Value, key: &str| v[key].as_str().unwrap_or_default().to_string();
    let corpus = lines(read("corpus.jsonl")?)?
        .iter()
        .map(|d| (field(d, "_id"), field(d, "title"), field(d, "text")))
        .collect();
    let mut qrels: HashMap<String, HashMap<String, f64>> = HashMap::new();
    for line in read("qrels.tsv")?.lines().skip(1) {
        let parts: Vec<&str> = line.split('\t').collect();
        if let [query, doc, score] = parts[..] {
            qrels
                .entry(query.to_string())
                .or_default()
                .insert(doc.to_string(), score.trim().parse().unwrap_or(1.0));
        }
    }
    let claims = lines(read("queries.jsonl")?)?
        .iter()
        .map(|q| (field(q, "_id"), field(q, "text")))
        .filter(|(id, _)| qrels.contains_key(id))
        .collect();
    Ok(Fixture {
        corpus,
        claims,
        qrels,
    })
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let fixture_dir = PathBuf::from(
        std::env::args()
            .nth(1)
            .unwrap_or_else(|| "../shared/fixtures/scifact-train".into()),
    );
    let chunking = chunking_from_env()?;
    // Vectors of one arithmetic live in a database of their own, so that
    // float32 and 8-bit runs can be compared side by side.
    let embedder = bench_support::local_embedder()?;
    let arithmetic = match embedder.as_ref() {
        Embedder::Local(local) => local.arithmetic(),
        Embedder::Remote(_) => "remote",
    };
    let suffix = if arithmetic == "float32" { "" } else { "_int8" };
    let (database, default_dir) = match &chunking {
        None => (
            format!("{DATABASE}{suffix}"),
            format!(".data/bench/quality-index{suffix}"),
        ),
        Some(c) => {
            let sizes = format!("{}_{}_{}", c.target_chars, c.max_chars, c.overlap_chars);
            (
                format!("{DATABASE}_{sizes}{suffix}"),
                format!(".data/bench/quality-index-{sizes}{suffix}"),
            )
        }
    };
    let index_dir = PathBuf::from(std::env::var("BENCH_QUALITY_DIR").unwrap_or(default_dir));
    let rebuild = std::env::var("BENCH_QUALITY_REBUILD").is_ok_and(|v| v == "1");
    let fixture = read_fixture(&fixture_dir)?;
    println!("quality.abstracts {}", fixture.corpus.len());
    println!("quality.claims {}", fixture.claims.len());
    println!("quality.embedding {}", arithmetic.replace(' ', "_"));

    let marker = format!(
        "{RECIPE}; abstracts={}; embedding={arithmetic}",
        fixture.corpus.len()
    );
    let bench = BenchDatabase::prepare(&database, &marker, rebuild, &index_dir).await?;
    let reuse = bench.reuse;
    let started = Instant::now();
    if !reuse {
        eprintln!(
            "ingesting {} abstracts into database {database} (once; later runs reuse it)",
            fixture.corpus.len()
        );
        bench.recreate().await?;
        if index_dir.exists() {
            std::fs::remove_dir_all(&index_dir)?;
        }
    }
    let owner = bench.owner().await?;
    data_plane_store::migrate::migrator().run(&owner).await?;
    owner.close().await;
    let db = Db::connect(&bench.app_url, 8).await?;
    let (reader, space) = if reuse {
        let mut tx = db.begin(Scope::System).await?;
        let reader = identity::upsert_user(&mut tx, READER, Some(Permission::User)).await?;
        let (space, _) = identity::ensure_space(&mut tx, "scifact").await?;
        tx.commit().await?;
        (reader.id, space.id)
    } else {
        ingest(&db, &embedder, &fixture, chunking).await?
    };
    let index = KeywordIndex::open_or_create(&index_dir)?;
    Follower::new(db.clone(), index.clone()).catch_up().await?;
    if !reuse {
        bench.mark(&marker).await?;
    }
    bench.admin.close().await;
    println!(
        "quality.setup {} {:.1}s",
        if reuse { "reused" } else { "built" },
        started.elapsed().as_secs_f64()
    );
    println!("quality.chunks {}", index.num_chunks());

    let deps = Arc::new(Deps::new(db.clone(), index, embedder));
    let registry = data_plane_handlers::registry(&deps, Arc::new(NoLedger))?;
    let settings = settings_from_env()?;
    let ctx = ToolContext::new(reader, Some(space), Permission::User)
        .with_settings(Arc::new(settings.clone()));
    // Hybrid with reciprocal rank fusion, the default before the convex
    // combination, for comparison in the same run.
    let rrf = ToolContext::new(reader, Some(space), Permission::User).with_settings(Arc::new(
        settings.with(
            &data_plane_handlers::search_documents::FUSION,
            data_plane_search::Fusion::Rrf {
                k: data_plane_search::DEFAULT_RRF_K,
            },
        ),
    ));
    let mut dump: HashMap<String, Value> = HashMap::new();
    let dumping = std::env::var_os("BENCH_QUALITY_DUMP");
    for (name, mode) in [
        ("hybrid", "hybrid"),
        ("hybrid_rrf", "hybrid"),
        ("vector", "vector"),
        ("keyword", "keyword"),
    ] {
        let ctx = if name == "hybrid_rrf" { &rrf } else { &ctx };
        let mut ndcg = Vec::new();
        let mut recall = Vec::new();
        let mut mrr = Vec::new();
        let mut times = Vec::new();
        for (id, claim) in &fixture.claims {
            let t = Instant::now();
            let data = call(
                &registry,
                json!({ "query": claim, "mode": mode, "limit": DEPTH }),
                ctx,
            )
            .await?;
            times.push(t.elapsed().as_secs_f64() * 1000.0);
            if dumping.is_some() && !name.starts_with("hybrid") {
                let hits: Vec<Value> = data["results"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|h| {
                        json!([
                            h["chunk_id"],
                            h["path"]
                                .as_str()
                                .unwrap_or_default()
                                .trim_end_matches(".txt"),
                            h["found_by"][0]["score"]
                        ])
                    })
                    .collect();
                dump.entry(id.clone()).or_insert_with(|| json!({"id": id}))[mode] = json!(hits);
            }
            let ranked = abstracts_by_best_passage(&data);
            let relevant = &fixture.qrels[id];
            ndcg.push(ndcg_at(&ranked, relevant, K));
            recall.push(recall_at(&ranked, relevant, DEPTH));
            mrr.push(reciprocal_rank_at(&ranked, relevant, K));
        }
        println!("quality.{name}.ndcg@{K} {:.4}", mean(&ndcg));
        println!("quality.{name}.recall@{DEPTH} {:.4}", mean(&recall));
        println!("quality.{name}.mrr@{K} {:.4}", mean(&mrr));
        print_percentiles(&format!("quality.{name}"), &times);
    }
    if let Some(path) = dumping {
        let mut out = String::new();
        for (id, _) in &fixture.claims {
            let mut line = dump.remove(id).unwrap_or_default();
            line["relevant"] = json!(fixture.qrels[id]);
            out.push_str(&line.to_string());
            out.push('\n');
        }
        std::fs::write(&path, out)?;
    }
    Ok(())
}

/// Ingests one document per abstract; answers the reader and the space.
async fn ingest(
    db: &Db,
    embedder: &Arc<Embedder>,
    fixture: &Fixture,
    chunking: Option<ChunkOptions>,
) -> anyhow::Result<(Uuid, Uuid)> {
    let mut tx = db.begin(Scope::System).await?;
    let reader = identity::upsert_user(&mut tx, READER, Some(Permission::User)).await?;
    let (space, _) = identity::ensure_space(&mut tx, "scifact").await?;
    identity::add_member(&mut tx, space.id, reader.id, MembershipRole::Viewer).await?;
    let source = content::ensure_source(&mut tx, space.id, "abstracts", SourceKind::Files).await?;
    tx.commit().await?;
    let mut pipeline = Pipeline::new(db.clone(), embedder.clone());
    if let Some(options) = chunking {
        pipeline = pipeline.with_chunking(options);
    }
    let target = Target {
        space_id: space.id,
        source_id: source.id,
    };
    let t = Instant::now();
    for (i, (id, title, text)) in fixture.corpus.iter().enumerate() {
        let body = format!("{title}\n\n{text}\n");
        pipeline
            .ingest_file(Scope::System, target, &format!("{id}.txt"), body.as_bytes())
            .await
            .with_context(|| format!("ingesting abstract {id}"))?;
        if (i + 1) % 500 == 0 {
            eprintln!("  {} abstracts in {:.0}s", i + 1, t.elapsed().as_secs_f64());
        }
    }
    Ok((reader.id, space.id))
}

/// The default settings with BENCH_QUALITY_SETTINGS (a JSON object, as an
/// admin would PUT it) applied.
fn settings_from_env() -> anyhow::Result<data_plane_registry::Settings> {
    let settings = data_plane_handlers::settings();
    let Ok(text) = std::env::var("BENCH_QUALITY_SETTINGS") else {
        return Ok(settings);
    };
    let changes: serde_json::Map<String, Value> = serde_json::from_str(&text)
        .with_context(|| format!("BENCH_QUALITY_SETTINGS={text:?} is not a JSON object"))?;
    println!("quality.settings {text}");
    settings
        .apply(&changes)
        .map_err(|e| anyhow::anyhow!("BENCH_QUALITY_SETTINGS={text:?}: {e}"))
}

/// Passage sizes from BENCH_QUALITY_CHUNKING (`target,max,overlap`), if set.
fn chunking_from_env() -> anyhow::Result<Option<ChunkOptions>> {
    let Ok(value) = std::env::var("BENCH_QUALITY_CHUNKING") else {
        return Ok(None);
    };
    let sizes: Vec<usize> = value
        .split(',')
        .map(|part| part.trim().parse())
        .collect::<Result<_, _>>()
        .with_context(|| format!("BENCH_QUALITY_CHUNKING={value:?}: give target,max,overlap"))?;
    let [target_chars, max_chars, overlap_chars] = sizes[..] else {
        anyhow::bail!("BENCH_QUALITY_CHUNKING={value:?}: give three sizes, target,max,overlap");
    };
    anyhow::ensure!(
        0 < target_chars && target_chars <= max_chars,
        "BENCH_QUALITY_CHUNKING={value:?}: the target must be positive and at most the maximum"
    );
    Ok(Some(ChunkOptions {
        target_chars,
        max_chars,
        overlap_chars,
    }))
}

/// The abstracts of an answer in the order of their best passage.
fn abstracts_by_best_passage(data: &Value) -> Vec<String> {
    let mut seen = HashSet::new();
    data["results"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|hit| hit["path"].as_str())
        .map(|path| path.trim_end_matches(".txt").to_string())
        .filter(|id| seen.insert(id.clone()))
        .collect()
}

fn ndcg_at(ranked: &[String], relevant: &HashMap<String, f64>, k: usize) -> f64 {
    let dcg: f64 = ranked
        .iter()
        .take(k)
        .enumerate()
        .map(|(i, id)| relevant.get(id).copied().unwrap_or(0.0) / (i as f64 + 2.0).log2())
        .sum();
    let mut ideal: Vec<f64> = relevant.values().copied().collect();
    ideal.sort_by(|a, b| b.total_cmp(a));
    let idcg: f64 = ideal
        .iter()
        .take(k)
        .enumerate()
        .map(|(i, g)| g / (i as f64 + 2.0).log2())
        .sum();
    if idcg == 0.0 { 0.0 } else { dcg / idcg }
}

fn recall_at(ranked: &[String], relevant: &HashMap<String, f64>, k: usize) -> f64 {
    let found = ranked
        .iter()
        .take(k)
        .filter(|id| relevant.contains_key(*id))
        .count();
    found as f64 / relevant.len().max(1) as f64
}

fn reciprocal_rank_at(ranked: &[String], relevant: &HashMap<String, f64>, k: usize) -> f64 {
    ranked
        .iter()
        .take(k)
        .position(|id| relevant.contains_key(id))
        .map_or(0.0, |i| 1.0 / (i as f64 + 1.0))
}
