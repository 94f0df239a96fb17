//! The corpus the search benchmarks build: the demo corpus's PostgreSQL
//! manual and notes through the real pipeline (real text, real embeddings),
//! filled up with synthetic chunks stitched from two real ones, in spaces
//! `library` (99%) and `team` (1%); and the questions they ask of it.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, bail};
use data_plane_embed::Embedder;
use data_plane_ingest::pipeline::{Pipeline, Target};
use data_plane_registry::Permission;
use data_plane_store::content::{self, NewChunk, NewDocument, SourceKind};
use data_plane_store::identity::{self, MembershipRole};
use data_plane_store::{Db, Scope};
use pgvector::Vector;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::json;
use sqlx::{Executor, PgPool};
use uuid::Uuid;

/// Chunks per synthetic document.
pub const CHUNKS_PER_DOC: usize = 50;
/// Folders of the synthetic library source; each holds about 1% of the corpus.
pub const FOLDERS: usize = 100;

/// Real questions someone reading the PostgreSQL manual would ask.
pub const QUERIES: &[&str] = &[
    "how do I reclaim disk space from dead rows",
    "create an index without blocking writes to the table",
    "difference between json and jsonb",
    "running total with a window function",
    "rank full text search results by relevance",
    "what does EXPLAIN ANALYZE show",
    "add a column with a default value to an existing table",
    "join two tables and keep rows without a match",
    "store a timestamp with time zone",
    "extract the year from a date",
    "split a string into an array",
    "regular expression replace in a text column",
    "limit the number of rows returned and skip the first ones",
    "group rows and filter the groups by an aggregate",
    "recursive query over a tree of parent and child rows",
    "partial index on a subset of rows",
    "multicolumn index column order",
    "why is my query not using an index",
    "update statistics for the query planner",
    "foreign key that deletes dependent rows",
    "check constraint on a column value",
    "transactions and rollback to a savepoint",
    "numeric type with exact precision for money",
    "generate a series of numbers or dates",
    "convert a value to another data type",
    "case insensitive pattern matching with LIKE",
    "stemming and stop words in text search configurations",
    "highlight matching words in search results",
    "GIN index for full text search",
    "array containment operator",
    "unique constraint across two columns",
    "create a view from a query",
    "insert a row or update it when it already exists",
    "delete rows returning the deleted values",
    "copy data from a CSV file into a table",
    "default values and serial columns for ids",
    "compare rows with NULL values",
    "string concatenation operator",
    "bitmap index scan combining several indexes",
    "common table expression with WITH",
];

/// The ids the measurements need, looked up by name.
pub struct Setup {
    pub reader: Uuid,
    pub team_user: Uuid,
    pub library: Uuid,
    pub team: Uuid,
    pub synthetic_source: Uuid,
    pub chunks: i64,
    pub real_chunks: i64,
    pub team_chunks: i64,
}

pub const READER: &str = "reader@bench.example";
pub const TEAM_USER: &str = "team@bench.example";

impl Setup {
    pub async fn load(db: &Db) -> anyhow::Result<Setup> {
        let mut tx = db.begin(Scope::System).await?;
        let user = async |tx: &mut data_plane_store::ScopedTx, email: &str| {
            sqlx::query_scalar::<_, Uuid>("SELECT id FROM users WHERE email = $1")
                .bind(email)
                .fetch_one(&mut **tx)
                .await
        };
        let reader = user(&mut tx, READER).await?;
        let team_user = user(&mut tx, TEAM_USER).await?;
        let space = async |tx: &mut data_plane_store::ScopedTx, name: &str| {
            identity::space_by_name(tx, name)
                .await?
                .map(|s| s.id)
                .with_context(|| format!("bench space {name} missing"))
        };
        let library = space(&mut tx, "library").await?;
        let team = space(&mut tx, "team").await?;
        let synthetic_source: Uuid =
            sqlx::query_scalar("SELECT id FROM sources WHERE space_id = $1 AND name = 'synthetic'")
                .bind(library)
                .fetch_one(&mut *tx)
                .await?;
        let (chunks, real_chunks, team_chunks): (i64, i64, i64) = sqlx::query_as(
            "SELECT count(*),
                    count(*) FILTER (WHERE s.name = 'manual'),
                    count(*) FILTER (WHERE c.space_id = $1)
               FROM chunks c JOIN documents d ON d.id = c.document_id
               JOIN sources s ON s.id = d.source_id",
        )
        .bind(team)
        .fetch_one(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(Setup {
            reader,
            team_user,
            library,
            team,
            synthetic_source,
            chunks,
            real_chunks,
            team_chunks,
        })
    }
}

/// The demo corpus's canonical path, which names it in a benchmark
/// database's marker.
pub fn corpus_key(corpus_dir: &Path) -> anyhow::Result<PathBuf> {
    std::fs::canonicalize(corpus_dir).with_context(|| {
        format!(
            "demo corpus {} missing (run `make setup`)",
            corpus_dir.display()
        )
    })
}

/// Drops the HNSW index on `chunks` and returns its definition, so it can
/// be built again once the corpus is loaded.
pub async fn drop_hnsw(owner: &PgPool) -> anyhow::Result<String> {
    let hnsw: String = sqlx::query_scalar("SELECT pg_get_indexdef('chunks_embedding'::regclass)")
        .fetch_one(owner)
        .await?;
    owner.execute("DROP INDEX chunks_embedding").await?;
    Ok(hnsw)
}

/// What loading the corpus took.
pub struct Loaded {
    pub db: Db,
    /// Chunks of the demo corpus through the real pipeline, and its seconds.
    pub real_chunks: usize,
    pub real_seconds: f64,
    /// Stitched chunks written through the store, and their seconds.
    pub synthetic_chunks: usize,
    pub synthetic_seconds: f64,
}

/// The real chunks synthetic ones are stitched from (eight words or more),
/// read back from the database.
pub struct RealChunk {
    pub words: Vec<String>,
    pub heading: String,
    pub embedding: Vec<f32>,
}

pub async fn real_chunks(db: &Db, source: &str) -> anyhow::Result<Vec<RealChunk>> {
    let mut tx = db.begin(Scope::System).await?;
    let rows: Vec<(String, String, Vector)> = sqlx::query_as(
        "SELECT c.text, c.heading, c.embedding FROM chunks c
           JOIN documents d ON d.id = c.document_id JOIN sources s ON s.id = d.source_id
          WHERE s.name = $1 ORDER BY c.id",
    )
    .bind(source)
    .fetch_all(&mut *tx)
    .await?;
    tx.commit().await?;
    let real: Vec<RealChunk> = rows
        .into_iter()
        .map(|(text, heading, v)| RealChunk {
            words: text.split_whitespace().map(String::from).collect(),
            heading,
            embedding: v.to_vec(),
        })
        .filter(|c| c.words.len() >= 8)
        .collect();
    if real.len() < 2 {
        bail!("the demo corpus gave too few chunks to stitch from (run `make setup`)");
    }
    Ok(real)
}

/// Loads the corpus into a migrated, empty database: the users, spaces and
/// sources, the demo corpus's manual and notes through the real pipeline,
/// then stitched chunks up to `total` (1% of them in space `team`) written
/// through the store in transactions of ten documents. Indexes are the
/// caller's business: building HNSW after the load is several times faster
/// than inserting into it row by row.
pub async fn load(
    app_url: &str,
    corpus_dir: &Path,
    total: usize,
    embedder: &Arc<Embedder>,
) -> anyhow::Result<Loaded> {
    let db = Db::connect(app_url, 8).await?;
    let mut tx = db.begin(Scope::System).await?;
    let reader = identity::upsert_user(&mut tx, READER, Some(Permission::User)).await?;
    let team_user = identity::upsert_user(&mut tx, TEAM_USER, Some(Permission::User)).await?;
    let (library, _) = identity::ensure_space(&mut tx, "library").await?;
    let (team, _) = identity::ensure_space(&mut tx, "team").await?;
    for (space, user) in [
        (library.id, reader.id),
        (team.id, reader.id),
        (team.id, team_user.id),
    ] {
        identity::add_member(&mut tx, space, user, MembershipRole::Viewer).await?;
    }
    let manual = content::ensure_source(&mut tx, library.id, "manual", SourceKind::Files).await?;
    let library_synthetic =
        content::ensure_source(&mut tx, library.id, "synthetic", SourceKind::Files).await?;
    let team_synthetic =
        content::ensure_source(&mut tx, team.id, "synthetic", SourceKind::Files).await?;
    tx.commit().await?;

    let t = Instant::now();
    let pipeline = Pipeline::new(db.clone(), embedder.clone());
    let mut files = Vec::new();
    for dir in ["postgresql-manual", "notes"] {
        files_under(&corpus_dir.join(dir), &mut files)?;
    }
    files.sort();
    let mut real = 0usize;
    for (i, file) in files.iter().enumerate() {
        let rel = file
            .strip_prefix(corpus_dir)?
            .to_string_lossy()
            .replace('\\', "/");
        let bytes = std::fs::read(file)?;
        let target = Target {
            space_id: library.id,
            source_id: manual.id,
        };
        match pipeline
            .ingest_file(Scope::System, target, &rel, &bytes)
            .await
        {
            Ok(report) => real += report.chunks,
            Err(e) => eprintln!("skipping {rel}: {e}"),
        }
        if (i + 1) % 25 == 0 {
            eprintln!(
                "embedded {} / {} real files ({real} chunks)",
                i + 1,
                files.len()
            );
        }
    }
    let real_seconds = t.elapsed().as_secs_f64();
    eprintln!("real corpus: {real} chunks embedded in {real_seconds:.0}s");
    let real_chunks = real_chunks(&db, "manual").await?;

    let t = Instant::now();
    let mut rng = StdRng::seed_from_u64(7);
    let team_target = total / 100;
    let library_target = total.saturating_sub(team_target + real);
    let plans = [
        (library.id, library_synthetic.id, library_target, "part"),
        (team.id, team_synthetic.id, team_target, "notes"),
    ];
    let mut written = 0usize;
    for (space_id, source_id, count, prefix) in plans {
        let docs = count.div_ceil(CHUNKS_PER_DOC);
        let mut tx = db.begin(Scope::System).await?;
        for d in 0..docs {
            let n = CHUNKS_PER_DOC.min(count - d * CHUNKS_PER_DOC);
            let path = format!("{prefix}-{:02}/doc-{d:05}.txt", d % FOLDERS);
            let doc = stitched_document(space_id, source_id, &path, n, &real_chunks, &mut rng);
            content::write_document(&mut tx, &doc).await?;
            written += n;
            if (d + 1) % 10 == 0 {
                tx.commit().await?;
                tx = db.begin(Scope::System).await?;
            }
            if (d + 1) % 200 == 0 {
                eprintln!("synthetic: {written} chunks written");
            }
        }
        tx.commit().await?;
    }
    let synthetic_seconds = t.elapsed().as_secs_f64();
    eprintln!("synthetic corpus: {written} chunks written in {synthetic_seconds:.0}s");
    Ok(Loaded {
        db,
        real_chunks: real,
        real_seconds,
        synthetic_chunks: written,
        synthetic_seconds,
    })
}

/// A synthetic document of `n` chunks, each stitched from two real chunks:
/// the start of one's text and the end of the other's, with their
/// embeddings blended in the same proportion plus a little noise.
pub fn stitched_document(
    space_id: Uuid,
    source_id: Uuid,
    path: &str,
    n: usize,
    real: &[RealChunk],
    rng: &mut StdRng,
) -> NewDocument {
    let mut body = String::new();
    let mut chunks = Vec::with_capacity(n);
    for _ in 0..n {
        let a = &real[rng.random_range(0..real.len())];
        let b = &real[rng.random_range(0..real.len())];
        let (a_words, heading, a_vec) = (&a.words, &a.heading, &a.embedding);
        let (b_words, b_vec) = (&b.words, &b.embedding);
        let cut_a = rng.random_range(a_words.len() / 3..=a_words.len() * 2 / 3);
        let cut_b = rng.random_range(b_words.len() / 3..=b_words.len() * 2 / 3);
        let text = a_words[..cut_a]
            .iter()
            .chain(&b_words[cut_b..])
            .map(String::as_str)
            .collect::<Vec<_>>()
            .join(" ");
        let share = cut_a as f32 / (cut_a + b_words.len() - cut_b) as f32;
        let mut v: Vec<f32> = a_vec
            .iter()
            .zip(b_vec)
            .map(|(a, b)| share * a + (1.0 - share) * b + rng.random_range(-0.04f32..0.04))
            .collect();
        let norm = v
            .iter()
            .map(|x| x * x)
            .sum::<f32>()
            .sqrt()
            .max(f32::EPSILON);
        v.iter_mut().for_each(|x| *x /= norm);
        let start = body.chars().count() as i32;
        body.push_str(&text);
        chunks.push(NewChunk {
            char_start: start,
            char_end: body.chars().count() as i32,
            heading: heading.clone(),
            page: None,
            text,
            embedding: v,
        });
        body.push_str("\n\n");
    }
    NewDocument {
        space_id,
        source_id,
        path: path.into(),
        mime: "text/plain".into(),
        size_bytes: body.len() as i64,
        content_hash: format!("stitched {path}"),
        title: None,
        language: Some("en".into()),
        content: body,
        metadata: json!({}),
        chunks,
        tables: vec![],
    }
}

pub fn files_under(dir: &Path, out: &mut Vec<PathBuf>) -> anyhow::Result<()> {
    for entry in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let path = entry?.path();
        if path.is_dir() {
            files_under(&path, out)?;
        } else {
            out.push(path);
        }
    }
    Ok(())
}
