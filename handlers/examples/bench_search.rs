//! search_documents at 100k chunks: latency of hybrid, vector and keyword
//! mode through the registry (embedding share apart), the same hybrid search
//! as one SQL statement (pgvector + full-text search with ts_rank, fused by
//! RRF in SQL) side by side, and recall@10 of filtered vector search when
//! the filter keeps 1% of the chunks. Prints `name value` lines.
//!
//! The corpus: the demo corpus's PostgreSQL manual and notes ingested through
//! the real pipeline (real text, real embeddings), filled up to the target
//! with synthetic chunks stitched from two real chunks (a piece of each
//! one's text, the matching blend of their embeddings plus noise), so the
//! vectors keep the clustered shape of real ones at a fraction of the
//! embedding time. Queries are real questions embedded by the real model.
//! The corpus lives in its own database (`dp_bench_search`) and Tantivy
//! directory and is reused by later runs; BENCH_SEARCH_REBUILD=1 rebuilds.
//!
//! Run with `benches/search.sh` (or `make bench`); needs `make setup` first.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context;
use data_plane_embed::Embedder;
use data_plane_handlers::Deps;
use data_plane_handlers::search_documents;
use data_plane_registry::{NoLedger, Permission, Registry, ToolContext};
use data_plane_search::KeywordIndex;
use data_plane_search::follower::Follower;
use data_plane_store::passages::{ChunkFilters as Filters, VectorStrategy};
use data_plane_store::{Db, Scope};
use pgvector::Vector;
use serde_json::{Value, json};
use sqlx::{Executor, PgPool};
use uuid::Uuid;

#[path = "bench_support/mod.rs"]
mod bench_support;
use bench_support::corpus::{self, QUERIES, Setup};
use bench_support::{BenchDatabase, call, mean, percentile, print_percentiles};

const DATABASE: &str = "dp_bench_search";
/// Changes whenever the way the corpus is built changes, so an old corpus is
/// rebuilt rather than measured.
const RECIPE: &str = "data-plane search bench v2";
const PASSES: usize = 3;
const K: usize = 10;
/// Candidates per retriever in the SQL recipe: what the tool uses for k = 10.
const SQL_DEPTH: i64 = 30;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let corpus_dir = PathBuf::from(
        std::env::args()
            .nth(1)
            .unwrap_or_else(|| ".data/corpus/demo".into()),
    );
    let total: usize = std::env::var("BENCH_CHUNKS")
        .ok()
        .map(|s| s.parse())
        .transpose()
        .context("BENCH_CHUNKS must be a number")?
        .unwrap_or(100_000);
    let index_dir = PathBuf::from(
        std::env::var("BENCH_SEARCH_DIR").unwrap_or_else(|_| ".data/bench/search-index".into()),
    );
    let rebuild = std::env::var("BENCH_SEARCH_REBUILD").is_ok_and(|v| v == "1");

    let embedder = bench_support::local_embedder()?;
    let corpus_key = corpus::corpus_key(&corpus_dir)?;
    let marker = format!("{RECIPE}; chunks={total}; corpus={}", corpus_key.display());
    let bench = BenchDatabase::prepare(DATABASE, &marker, rebuild, &index_dir).await?;
    let reuse = bench.reuse;

    let started = Instant::now();
    let (db, setup) = if reuse {
        let owner = bench.owner().await?;
        data_plane_store::migrate::migrator().run(&owner).await?;
        owner.close().await;
        let db = Db::connect(&bench.app_url, 8).await?;
        let setup = Setup::load(&db).await?;
        (db, setup)
    } else {
        eprintln!(
            "building the {total}-chunk corpus in database {DATABASE} (once; later runs reuse it)"
        );
        bench.recreate().await?;
        let owner = bench.owner().await?;
        let db = build(&owner, &bench.app_url, &corpus_dir, total, &embedder).await?;
        owner.close().await;
        if index_dir.exists() {
            std::fs::remove_dir_all(&index_dir)?;
        }
        let setup = Setup::load(&db).await?;
        (db, setup)
    };
    let index = KeywordIndex::open_or_create(&index_dir)?;
    let t = Instant::now();
    let applied = Follower::new(db.clone(), index.clone()).catch_up().await?;
    if applied > 0 {
        eprintln!(
            "keyword index: {applied} log entries applied in {:.1}s",
            t.elapsed().as_secs_f64()
        );
    }
    if !reuse {
        bench.mark(&marker).await?;
    }
    bench.admin.close().await;
    let setup_seconds = started.elapsed().as_secs_f64();

    println!("search.corpus_chunks {}", setup.chunks);
    println!("search.corpus_real_chunks {}", setup.real_chunks);
    println!("search.keyword_index_chunks {}", index.num_chunks());
    println!(
        "search.setup {} {setup_seconds:.1}s",
        if reuse { "reused" } else { "built" }
    );
    println!(
        "search.exact_max_chunks {}",
        search_documents::EXACT_MAX_CHUNKS
    );

    let deps = Arc::new(Deps::new(db.clone(), index, embedder.clone()));
    let registry = data_plane_handlers::registry(&deps, Arc::new(NoLedger))?;
    let queries: Vec<String> = QUERIES.iter().map(|q| q.to_string()).collect();
    let vectors = embedder.embed(&queries).await?;
    let reader_all = ToolContext::new(setup.reader, None, Permission::User);

    // Latency through the registry, each mode on every query, after one
    // untimed pass that warms the caches.
    let mut tool_totals = std::collections::HashMap::new();
    for mode in ["hybrid", "vector", "keyword"] {
        let mut calls = Vec::new();
        for pass in 0..=PASSES {
            for q in &queries {
                let t = Instant::now();
                let data = call(
                    &registry,
                    json!({ "query": q, "mode": mode, "limit": K }),
                    &reader_all,
                )
                .await?;
                let wall = t.elapsed().as_secs_f64() * 1000.0;
                if pass > 0 {
                    calls.push((wall, data));
                }
            }
        }
        let total: Vec<f64> = calls.iter().map(|(w, _)| *w).collect();
        let part = |name: &str| -> Vec<f64> {
            calls
                .iter()
                .map(|(_, d)| d["timings"][name].as_f64().unwrap_or(0.0))
                .collect()
        };
        let embed = part("embed_ms");
        let search_only: Vec<f64> = total.iter().zip(&embed).map(|(t, e)| t - e).collect();
        print_percentiles(&format!("search.{mode}"), &total);
        if mode != "keyword" {
            println!("search.{mode}.embed_p50_ms {:.1}", percentile(&embed, 50.0));
            println!(
                "search.{mode}.embed_share {:.2}",
                embed.iter().sum::<f64>() / total.iter().sum::<f64>()
            );
            print_percentiles(&format!("search.{mode}.without_embed"), &search_only);
            println!(
                "search.{mode}.vector_p50_ms {:.1}",
                percentile(&part("vector_ms"), 50.0)
            );
        }
        println!(
            "search.{mode}.fetch_p50_ms {:.1}",
            percentile(&part("fetch_ms"), 50.0)
        );
        if mode != "vector" {
            println!(
                "search.{mode}.keyword_p50_ms {:.1}",
                percentile(&part("keyword_ms"), 50.0)
            );
        }
        let strategies: HashSet<String> = calls
            .iter()
            .filter_map(|(_, d)| d["vector_strategy"].as_str().map(String::from))
            .collect();
        if !strategies.is_empty() {
            let mut s: Vec<String> = strategies.into_iter().collect();
            s.sort();
            println!("search.{mode}.vector_strategies {}", s.join(","));
        }
        tool_totals.insert(mode, (total, search_only, embed));
    }

    // The same hybrid search as one SQL statement, acting for the same user
    // under row-level security; the query vector is computed beforehand, so
    // the statement is compared with the tool's time without embedding.
    // `chunks` is behind row-level security, under which PostgreSQL will not
    // use the full-text GIN index (`@@` is not leakproof); `recipe_chunks`
    // is an RLS-free copy that shows the recipe at its best.
    let and = "websearch_to_tsquery('english', $2)";
    let or = "replace(plainto_tsquery('english', $2)::text, '&', '|')::tsquery";
    for (name, table, tsquery) in [
        ("sql_hybrid_rls", "chunks", and),
        ("sql_hybrid", "recipe_chunks", and),
        ("sql_hybrid_or", "recipe_chunks", or),
    ] {
        let sql = sql_hybrid(table, tsquery);
        let mut times = Vec::new();
        let mut lexical_hits = 0usize;
        for pass in 0..=PASSES {
            for (q, v) in queries.iter().zip(&vectors) {
                let mut tx = db.begin(Scope::User(setup.reader)).await?;
                let t = Instant::now();
                let rows: Vec<(i64, bool)> = sqlx::query_as(&sql)
                    .bind(Vector::from(v.clone()))
                    .bind(q)
                    .bind(SQL_DEPTH)
                    .bind(K as i64)
                    .fetch_all(&mut *tx)
                    .await?;
                let ms = t.elapsed().as_secs_f64() * 1000.0;
                tx.commit().await?;
                if pass > 0 {
                    times.push(ms);
                    lexical_hits += rows.iter().filter(|(_, lexical)| *lexical).count();
                }
            }
        }
        print_percentiles(&format!("search.{name}"), &times);
        println!(
            "search.{name}.lexical_hits_per_query {:.1}",
            lexical_hits as f64 / times.len() as f64
        );
        let (total, search_only, embed) = &tool_totals["hybrid"];
        println!(
            "search.{name}_over_tool_without_embed.p50_ratio {:.2}",
            percentile(&times, 50.0) / percentile(search_only, 50.0)
        );
        println!(
            "search.{name}_plus_embed_over_tool.p50_ratio {:.2}",
            (percentile(&times, 50.0) + percentile(embed, 50.0)) / percentile(total, 50.0)
        );
    }

    recall(&db, &registry, &setup, &queries, &vectors).await?;
    threshold_sweep(&db, &setup, &vectors).await?;
    Ok(())
}

/// What the exact path and the iterative index path cost when the filter
/// keeps a given share of the chunks (30 neighbours, as hybrid asks for),
/// to place the switch between them. The exact path reads a contiguous id
/// range through the primary key, as it reads a space or folder through
/// theirs; the index path filters on `id % m`, which the graph cannot see.
async fn threshold_sweep(db: &Db, setup: &Setup, vectors: &[Vec<f32>]) -> anyhow::Result<()> {
    let (low, high): (i64, i64) = {
        let mut tx = db.begin(Scope::System).await?;
        let r = sqlx::query_as("SELECT min(id), max(id) FROM chunks")
            .fetch_one(&mut *tx)
            .await?;
        tx.commit().await?;
        r
    };
    for share in [0.01f64, 0.02, 0.05, 0.1] {
        let n = ((high - low + 1) as f64 * share) as i64;
        let m = (1.0 / share).round() as i64;
        let mut exact_ms = Vec::new();
        let mut index_ms = Vec::new();
        for v in vectors {
            let mut tx = db.begin(Scope::User(setup.reader)).await?;
            let t = Instant::now();
            let _: Vec<i64> = sqlx::query_scalar(
                "WITH scored AS MATERIALIZED (
                     SELECT c.id, c.embedding <=> $1 AS distance FROM chunks c
                      WHERE c.id BETWEEN $2 AND $3)
                 SELECT id FROM scored ORDER BY distance, id LIMIT 30",
            )
            .bind(Vector::from(v.clone()))
            .bind(low)
            .bind(low + n - 1)
            .fetch_all(&mut *tx)
            .await?;
            exact_ms.push(t.elapsed().as_secs_f64() * 1000.0);
            sqlx::query(
                "SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true),
                        set_config('hnsw.ef_search', '100', true)",
            )
            .execute(&mut *tx)
            .await?;
            let t = Instant::now();
            let _: Vec<i64> = sqlx::query_scalar(
                "WITH nearest AS MATERIALIZED (
                     SELECT c.id, c.embedding <=> $1 AS distance FROM chunks c
                      WHERE c.id % $2 = 0 ORDER BY c.embedding <=> $1 LIMIT 30)
                 SELECT id FROM nearest ORDER BY distance, id",
            )
            .bind(Vector::from(v.clone()))
            .bind(m)
            .fetch_all(&mut *tx)
            .await?;
            index_ms.push(t.elapsed().as_secs_f64() * 1000.0);
            tx.commit().await?;
        }
        let pct = share * 100.0;
        println!(
            "search.sweep.{pct:.0}pct_{n}_chunks.exact_p50_ms {:.1}",
            percentile(&exact_ms, 50.0)
        );
        println!(
            "search.sweep.{pct:.0}pct_{n}_chunks.iterative_index_p50_ms {:.1}",
            percentile(&index_ms, 50.0)
        );
    }
    Ok(())
}

/// The single-statement hybrid search of the usual recipes: nearest
/// neighbours from pgvector at its defaults, full-text matches ranked by
/// ts_rank, fused by reciprocal rank (k = 60) in SQL. Returns each hit's id
/// and whether full-text search found it.
fn sql_hybrid(table: &str, tsquery: &str) -> String {
    format!(
        "WITH semantic AS (
             SELECT id, row_number() OVER (ORDER BY distance) AS rank
               FROM (SELECT id, embedding <=> $1 AS distance FROM {table}
                      ORDER BY embedding <=> $1 LIMIT $3) nearest
         ), lexical AS (
             SELECT id, row_number() OVER (ORDER BY ts_rank(fts, query) DESC) AS rank
               FROM {table}, (SELECT {tsquery} AS query) q
              WHERE fts @@ query
              ORDER BY ts_rank(fts, query) DESC
              LIMIT $3
         )
         SELECT c.id, lexical.id IS NOT NULL
           FROM semantic FULL JOIN lexical ON lexical.id = semantic.id
           JOIN {table} c ON c.id = coalesce(semantic.id, lexical.id)
          ORDER BY coalesce(1.0 / (60 + semantic.rank), 0) + coalesce(1.0 / (60 + lexical.rank), 0) DESC,
                   c.id
          LIMIT $4"
    )
}

/// Recall@10 of vector search against exact search, unfiltered and with
/// filters that keep about 1% of the chunks.
async fn recall(
    db: &Db,
    registry: &Registry,
    setup: &Setup,
    queries: &[String],
    vectors: &[Vec<f32>],
) -> anyhow::Result<()> {
    let folder = "part-07";
    let folder_chunks: i64 = {
        let mut tx = db.begin(Scope::System).await?;
        let n = sqlx::query_scalar(
            "SELECT count(*) FROM chunks c JOIN documents d ON d.id = c.document_id
              JOIN folders f ON f.id = d.folder_id WHERE f.path = $1 AND d.source_id = $2",
        )
        .bind(folder)
        .bind(setup.synthetic_source)
        .fetch_one(&mut *tx)
        .await?;
        tx.commit().await?;
        n
    };
    println!(
        "search.filter.space_share {:.4}",
        setup.team_chunks as f64 / setup.chunks as f64
    );
    println!(
        "search.filter.folder_share {:.4}",
        folder_chunks as f64 / setup.chunks as f64
    );

    let mut cases: Vec<Series> = Vec::new();
    let mut record = |name: &'static str, recall: f64, hits: usize, ms: f64| {
        let at = match cases.iter().position(|c| c.name == name) {
            Some(at) => at,
            None => {
                cases.push(Series {
                    name,
                    recall: Vec::new(),
                    hits: Vec::new(),
                    ms: Vec::new(),
                });
                cases.len() - 1
            }
        };
        cases[at].recall.push(recall);
        cases[at].hits.push(hits as f64);
        cases[at].ms.push(ms);
    };
    let reader_all = ToolContext::new(setup.reader, None, Permission::User);
    let reader_team = ToolContext::new(setup.reader, Some(setup.team), Permission::User);
    let reader_library = ToolContext::new(setup.reader, Some(setup.library), Permission::User);
    let team_only = ToolContext::new(setup.team_user, None, Permission::User);
    let folder_filters = Filters {
        spaces: vec![setup.library, setup.team],
        source_id: None,
        document_id: None,
        folder: Some(folder.into()),
    };
    for (q, v) in queries.iter().zip(vectors) {
        let all = exact_top(db, v, "TRUE", None).await?;
        let team = exact_top(db, v, "c.space_id = $2", Some(setup.team.to_string())).await?;
        let in_folder = exact_top(
            db,
            v,
            "EXISTS (SELECT 1 FROM documents d JOIN folders f ON f.id = d.folder_id
                      WHERE d.id = c.document_id AND f.path = $2)",
            Some(folder.into()),
        )
        .await?;
        let tool = async |ctx: &ToolContext, extra: Value| -> anyhow::Result<(Vec<i64>, f64)> {
            let mut args = json!({ "query": q, "mode": "vector", "limit": K });
            if let (Some(a), Some(e)) = (args.as_object_mut(), extra.as_object()) {
                a.extend(e.clone());
            }
            let data = call(registry, args, ctx).await?;
            let ids = data["results"]
                .as_array()
                .map(|r| r.iter().filter_map(|h| h["chunk_id"].as_i64()).collect())
                .unwrap_or_default();
            Ok((ids, data["timings"]["vector_ms"].as_f64().unwrap_or(0.0)))
        };

        let (ids, ms) = tool(&reader_all, json!({})).await?;
        record("unfiltered.tool", overlap(&ids, &all), ids.len(), ms);
        let (ids, ms) = sql_nearest(db, setup.reader, v, None).await?;
        record(
            "unfiltered.pgvector_defaults",
            overlap(&ids, &all),
            ids.len(),
            ms,
        );

        let (ids, ms) = tool(&reader_team, json!({})).await?;
        record("space_1pct.tool", overlap(&ids, &team), ids.len(), ms);
        let (ids, ms) = tool(&team_only, json!({})).await?;
        record(
            "space_1pct_rls_only.tool",
            overlap(&ids, &team),
            ids.len(),
            ms,
        );
        let (ids, ms) = sql_nearest(db, setup.team_user, v, None).await?;
        record(
            "space_1pct_rls_only.pgvector_defaults",
            overlap(&ids, &team),
            ids.len(),
            ms,
        );
        let (ids, ms) = sql_nearest(db, setup.team_user, v, Some(100)).await?;
        record(
            "space_1pct_rls_only.iterative_scan",
            overlap(&ids, &team),
            ids.len(),
            ms,
        );

        let (ids, ms) = tool(&reader_library, json!({ "folder": folder })).await?;
        record("folder_1pct.tool", overlap(&ids, &in_folder), ids.len(), ms);
        let mut tx = db.begin(Scope::User(setup.reader)).await?;
        let t = Instant::now();
        let forced =
            search_documents::nearest(&mut tx, v, &folder_filters, K, VectorStrategy::Index)
                .await
                .map_err(|e| anyhow::anyhow!("{e}"))?;
        let ms = t.elapsed().as_secs_f64() * 1000.0;
        tx.commit().await?;
        let ids: Vec<i64> = forced.hits.iter().map(|h| h.chunk_id).collect();
        record(
            "folder_1pct.index_path_forced",
            overlap(&ids, &in_folder),
            ids.len(),
            ms,
        );
    }
    for c in &cases {
        let name = c.name;
        println!("search.recall.{name}.recall_at_10 {:.3}", mean(&c.recall));
        println!("search.recall.{name}.hits_per_query {:.1}", mean(&c.hits));
        println!(
            "search.recall.{name}.vector_p50_ms {:.1}",
            percentile(&c.ms, 50.0)
        );
    }
    Ok(())
}

/// Recall, hits and time per query of one way of searching.
struct Series {
    name: &'static str,
    recall: Vec<f64>,
    hits: Vec<f64>,
    ms: Vec<f64>,
}

/// Nearest chunks by plain SQL acting for `user` (row-level security is the
/// only filter): pgvector's defaults, or an iterative scan with `ef_search`.
async fn sql_nearest(
    db: &Db,
    user: Uuid,
    v: &[f32],
    iterative_ef_search: Option<usize>,
) -> anyhow::Result<(Vec<i64>, f64)> {
    let mut tx = db.begin(Scope::User(user)).await?;
    if let Some(ef) = iterative_ef_search {
        sqlx::query(
            "SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true),
                    set_config('hnsw.ef_search', $1, true)",
        )
        .bind(ef.to_string())
        .execute(&mut *tx)
        .await?;
    }
    let t = Instant::now();
    let ids: Vec<i64> = sqlx::query_scalar(
        "WITH nearest AS MATERIALIZED (
             SELECT id, embedding <=> $1 AS distance FROM chunks ORDER BY embedding <=> $1 LIMIT $2)
         SELECT id FROM nearest ORDER BY distance, id",
    )
    .bind(Vector::from(v.to_vec()))
    .bind(K as i64)
    .fetch_all(&mut *tx)
    .await?;
    let ms = t.elapsed().as_secs_f64() * 1000.0;
    tx.commit().await?;
    Ok((ids, ms))
}

/// The true 10 nearest chunks among those `condition` admits (comparing
/// every one of them, no index), as the system sees them.
async fn exact_top(
    db: &Db,
    v: &[f32],
    condition: &str,
    param: Option<String>,
) -> anyhow::Result<Vec<i64>> {
    let mut tx = db.begin(Scope::System).await?;
    let sql = format!(
        "WITH scored AS MATERIALIZED (
             SELECT c.id, c.embedding <=> $1 AS distance FROM chunks c WHERE {condition})
         SELECT id FROM scored ORDER BY distance, id LIMIT {K}"
    );
    let mut query = sqlx::query_scalar(&sql).bind(Vector::from(v.to_vec()));
    if let Some(p) = param {
        query = match Uuid::parse_str(&p) {
            Ok(id) => query.bind(id),
            Err(_) => query.bind(p),
        };
    }
    let ids = query.fetch_all(&mut *tx).await?;
    tx.commit().await?;
    Ok(ids)
}

fn overlap(found: &[i64], truth: &[i64]) -> f64 {
    if truth.is_empty() {
        return 1.0;
    }
    found.iter().filter(|id| truth.contains(id)).count() as f64 / truth.len() as f64
}

/// Builds the corpus in the freshly created database, with the recipe's
/// full-text column and RLS-free copy, and returns the app's connection.
async fn build(
    owner: &PgPool,
    app_url: &str,
    corpus_dir: &Path,
    total: usize,
    embedder: &Arc<Embedder>,
) -> anyhow::Result<Db> {
    data_plane_store::migrate::migrator().run(owner).await?;
    // The recipe's full-text column lives in the bench database only: the
    // tool's keyword side is Tantivy. The HNSW index is dropped during the
    // load and built once at the end.
    owner
        .execute(
            "ALTER TABLE chunks ADD COLUMN fts tsvector
                 GENERATED ALWAYS AS (to_tsvector('english', text)) STORED",
        )
        .await?;
    let hnsw = corpus::drop_hnsw(owner).await?;
    let db = corpus::load(app_url, corpus_dir, total, embedder).await?.db;

    let t = Instant::now();
    copy_for_recipe(&db, owner).await?;
    eprintln!("RLS-free copy written in {:.0}s", t.elapsed().as_secs_f64());

    let t = Instant::now();
    owner.execute("SET maintenance_work_mem = '1GB'").await?;
    owner
        .execute("CREATE INDEX chunks_fts ON chunks USING gin (fts)")
        .await?;
    owner.execute(hnsw.as_str()).await?;
    owner
        .execute("CREATE INDEX recipe_chunks_fts ON recipe_chunks USING gin (fts)")
        .await?;
    owner
        .execute(
            hnsw.replace(
                "chunks_embedding ON public.chunks",
                "recipe_chunks_embedding ON public.recipe_chunks",
            )
            .as_str(),
        )
        .await?;
    owner
        .execute("VACUUM ANALYZE chunks, documents, folders, sources, recipe_chunks")
        .await?;
    eprintln!("indexes built in {:.0}s", t.elapsed().as_secs_f64());
    Ok(db)
}

/// Copies every chunk into `recipe_chunks`, a table without row-level
/// security, read through the app's system scope and written as the owner.
async fn copy_for_recipe(db: &Db, owner: &PgPool) -> anyhow::Result<()> {
    owner
        .execute(
            "CREATE TABLE recipe_chunks (
                 id bigint PRIMARY KEY,
                 space_id uuid NOT NULL,
                 text text NOT NULL,
                 embedding vector(384) NOT NULL,
                 fts tsvector GENERATED ALWAYS AS (to_tsvector('english', text)) STORED)",
        )
        .await?;
    owner
        .execute("GRANT SELECT ON recipe_chunks TO data_plane_app")
        .await?;
    let mut after = 0i64;
    loop {
        let mut tx = db.begin(Scope::System).await?;
        let rows: Vec<(i64, Uuid, String, Vector)> = sqlx::query_as(
            "SELECT id, space_id, text, embedding FROM chunks WHERE id > $1 ORDER BY id LIMIT 5000",
        )
        .bind(after)
        .fetch_all(&mut *tx)
        .await?;
        tx.commit().await?;
        let Some(last) = rows.last().map(|r| r.0) else {
            return Ok(());
        };
        after = last;
        let mut ids = Vec::with_capacity(rows.len());
        let mut spaces = Vec::with_capacity(rows.len());
        let mut texts = Vec::with_capacity(rows.len());
        let mut vectors = Vec::with_capacity(rows.len());
        for (id, space, text, vector) in rows {
            ids.push(id);
            spaces.push(space);
            texts.push(text);
            vectors.push(vector);
        }
        sqlx::query(
            "INSERT INTO recipe_chunks (id, space_id, text, embedding)
             SELECT * FROM UNNEST($1::int8[], $2::uuid[], $3::text[], $4::vector[])",
        )
        .bind(&ids)
        .bind(&spaces)
        .bind(&texts)
        .bind(&vectors)
        .execute(owner)
        .await?;
    }
}
