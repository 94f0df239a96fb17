//! grep_documents latency on a corpus of a few thousand documents, with the
//! trigram prefilter index on documents.content and without it.
//!
//! The corpus is the PostgreSQL manual of the demo corpus (text extracted
//! as ingestion extracts it) replicated into copies, each copy in its own
//! folder with one line that tells it apart; without the demo corpus, the
//! licence texts every Debian system carries stand in. Documents are written
//! without chunks: grep reads only the documents table. Every call goes
//! through the tool registry as a member of the space, so row-level security
//! and the tool's own work are both in the figures.
//!
//! `benches/grep.sh` (or `cargo run --release -p data-plane-handlers
//! --example bench_grep -- [DOCUMENTS] [CORPUS_DIR]`), after `make setup`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use data_plane_embed::{EmbedConfig, Embedder};
use data_plane_handlers::Deps;
use data_plane_registry::{NoCallbacks, NoLedger, Permission, Registry, ToolContext};
use data_plane_search::KeywordIndex;
use data_plane_store::Scope;
use data_plane_store::content::{self, NewDocument, SourceKind};
use data_plane_store::identity::{self, MembershipRole};
use data_plane_store::testing::TestDatabase;
use serde_json::{Value, json};

type Error = Box<dyn std::error::Error>;

const RUNS: usize = 5;
/// The copy that carries the rare token, and the token.
const RARE_COPY: usize = 7;
const RARE_TOKEN: &str = "GREPBENCH-needle-0042";

/// (name, arguments): literals the index can use, regexes with and without
/// a required literal, and text that occurs nowhere.
fn queries() -> Vec<(&'static str, Value)> {
    vec![
        ("rare_literal", json!({ "pattern": RARE_TOKEN })),
        ("absent_literal", json!({ "pattern": "xylophone quartz" })),
        ("common_literal", json!({ "pattern": "VACUUM" })),
        // In about two thirds of the manual's pages.
        ("common_phrase", json!({ "pattern": "for example" })),
        (
            "rare_regex",
            json!({ "pattern": r"GREPBENCH-\w+-00\d\d", "regex": true }),
        ),
        (
            "regex_with_literal",
            json!({ "pattern": r"wal_\w+_timeout\s*=", "regex": true }),
        ),
        (
            "regex_without_literal",
            json!({ "pattern": r"\b\d{3}-\d{4}-\d{3}\b", "regex": true }),
        ),
        (
            "literal_in_folder",
            json!({ "pattern": "checkpoint", "path_glob": "copy-0003/**" }),
        ),
    ]
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let mut args = std::env::args().skip(1);
    let documents: usize = args.next().map(|a| a.parse()).transpose()?.unwrap_or(3000);
    let corpus_dir = args
        .next()
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(".data/corpus/demo"));
    let sources = source_texts(&corpus_dir)?;
    let test = TestDatabase::create().await;
    let db = test.db.clone();

    let mut tx = db.begin(Scope::System).await?;
    let user = identity::upsert_user(&mut tx, "bench@example.com", Some(Permission::User))
        .await?
        .id;
    let (space, _) = identity::ensure_space(&mut tx, "bench").await?;
    identity::add_member(&mut tx, space.id, user, MembershipRole::Editor).await?;
    let source = content::ensure_source(&mut tx, space.id, "manual", SourceKind::Files).await?;
    tx.commit().await?;

    // Loaded without the index, which is then built once: faster, and it
    // gives the build time.
    sqlx::query("DROP INDEX documents_content_trgm")
        .execute(&test.owner)
        .await?;
    let started = Instant::now();
    let mut bytes = 0usize;
    for i in 0..documents {
        let (path, text) = &sources[i % sources.len()];
        let copy = i / sources.len();
        let mut body = format!("copy {copy:04} of {path}\n");
        body.push_str(text);
        if copy == RARE_COPY && i % sources.len() == 0 {
            body.push_str(&format!("\nthe one rare line: {RARE_TOKEN}\n"));
        }
        bytes += body.len();
        let mut tx = db.begin(Scope::System).await?;
        content::write_document(
            &mut tx,
            &NewDocument {
                space_id: space.id,
                source_id: source.id,
                path: format!("copy-{copy:04}/{path}"),
                mime: "text/plain".into(),
                size_bytes: body.len() as i64,
                content_hash: format!("bench-{i}"),
                title: None,
                language: Some("en".into()),
                content: body,
                metadata: json!({}),
                chunks: vec![],
                tables: vec![],
            },
        )
        .await?;
        tx.commit().await?;
    }
    let load = started.elapsed().as_secs_f64();
    let started = Instant::now();
    sqlx::query(
        "CREATE INDEX documents_content_trgm ON documents USING gin (content gin_trgm_ops)",
    )
    .execute(&test.owner)
    .await?;
    let build = started.elapsed().as_secs_f64();
    sqlx::query("ANALYZE documents")
        .execute(&test.owner)
        .await?;
    let (table_mb, index_mb): (f64, f64) = sqlx::query_as(
        "SELECT pg_total_relation_size('documents')::float8 / 1048576,
                pg_relation_size('documents_content_trgm')::float8 / 1048576",
    )
    .fetch_one(&test.owner)
    .await?;
    println!("grep.documents {documents}");
    println!("grep.text_mb {:.1}", bytes as f64 / 1_048_576.0);
    println!("grep.load_seconds {load:.1}");
    println!("grep.trigram_index_build_seconds {build:.1}");
    println!("grep.trigram_index_mb {index_mb:.1}");
    println!("grep.documents_table_mb_with_index {table_mb:.1}");

    let deps = Arc::new(Deps::new(
        db.clone(),
        KeywordIndex::in_memory()?,
        Arc::new(Embedder::from_config(&EmbedConfig::local(
            data_plane_testkit::model_dir(),
        ))?),
    ));
    let registry = data_plane_handlers::registry(&deps, Arc::new(NoLedger))?;
    let ctx = ToolContext::new(user, Some(space.id), Permission::User);

    for (name, args) in queries() {
        let (ms, data) = time(&registry, &ctx, &args).await?;
        println!(
            "grep.with_index.{name}_ms {ms:.1} (lines {}, documents searched {})",
            data["returned"], data["documents_searched"]
        );
    }
    sqlx::query("DROP INDEX documents_content_trgm")
        .execute(&test.owner)
        .await?;
    sqlx::query("ANALYZE documents")
        .execute(&test.owner)
        .await?;
    for (name, args) in queries() {
        let (ms, data) = time(&registry, &ctx, &args).await?;
        println!(
            "grep.without_index.{name}_ms {ms:.1} (lines {}, documents searched {})",
            data["returned"], data["documents_searched"]
        );
    }

    test.destroy().await?;
    Ok(())
}

/// Median wall time of RUNS calls after one warm-up, and the last answer.
async fn time(registry: &Registry, ctx: &ToolContext, args: &Value) -> Result<(f64, Value), Error> {
    let mut times = Vec::with_capacity(RUNS);
    let mut last = Value::Null;
    for run in 0..=RUNS {
        let started = Instant::now();
        let result = registry
            .execute_tool("grep_documents", args.clone(), ctx, &NoCallbacks)
            .await;
        let ms = started.elapsed().as_secs_f64() * 1000.0;
        if !result.success {
            return Err(format!("grep {args} failed: {:?}", result.error).into());
        }
        last = result.data.unwrap_or_default();
        if run > 0 {
            times.push(ms);
        }
    }
    times.sort_by(f64::total_cmp);
    Ok((times[times.len() / 2], last))
}

/// (relative path, extracted text) of every file ingestion can read under
/// the corpus' PostgreSQL manual, else of the system's licence texts.
fn source_texts(corpus: &Path) -> Result<Vec<(String, String)>, Error> {
    let manual = corpus.join("postgresql-manual");
    let root = if manual.is_dir() {
        manual
    } else {
        eprintln!(
            "no PostgreSQL manual under {}; using /usr/share/common-licenses",
            corpus.display()
        );
        PathBuf::from("/usr/share/common-licenses")
    };
    let mut out = Vec::new();
    let mut stack = vec![root.clone()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir)? {
            let path = entry?.path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            let rel = path
                .strip_prefix(&root)?
                .to_string_lossy()
                .replace('\\', "/");
            let bytes = std::fs::read(&path)?;
            let name = if path.extension().is_some() {
                rel.clone()
            } else {
                format!("{rel}.txt")
            };
            if let Ok(extracted) = data_plane_ingest::extract(&name, &bytes)
                && !extracted.text.trim().is_empty()
            {
                out.push((name, extracted.text));
            }
        }
    }
    out.sort();
    if out.is_empty() {
        return Err(format!("no readable files under {}", root.display()).into());
    }
    Ok(out)
}
