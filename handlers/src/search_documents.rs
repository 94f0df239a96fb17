//! search_documents: hybrid, vector or keyword search over passages.
//!
//! Vector hits come from pgvector (HNSW with iterative scans, or an exact scan
//! when the filtered set is small), keyword hits from the Tantivy index
//! restricted to the caller's spaces, and hybrid fuses both by reciprocal
//! rank. Every hit is read back from PostgreSQL under row-level security
//! before it is returned, so a stale keyword-index entry never shows. The
//! design and measured figures are in docs/search.md.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use data_plane_registry::{
    Annotations, Callbacks, Category, CostTier, Permission, RateLimits, ToolContext, ToolError,
    ToolMeta,
};
use data_plane_search::{DEFAULT_RRF_K, KeywordHit, KeywordQuery, reciprocal_rank_fusion};
use data_plane_store::ScopedTx;
use pgvector::Vector;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use sqlx::postgres::PgArguments;
use sqlx::{Arguments, Encode, Postgres, Type};
use uuid::Uuid;

use crate::Deps;
use crate::deps::internal;
use crate::document_info::not_found;

/// The arguments, as definitions/search_documents.json describes them.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Args {
    /// What to look for, in natural language or keywords. Put exact phrases in double quotes.
    pub query: String,
    /// Retriever: hybrid (default), vector or keyword.
    pub mode: Option<String>,
    /// Number of passages to return.
    pub limit: Option<u64>,
    /// Only search this source (or feed).
    pub source_id: Option<Uuid>,
    /// Only search documents in this folder and below, e.g. `manual/tutorial`.
    pub folder: Option<String>,
    /// Only search this document.
    pub document_id: Option<Uuid>,
}

pub const META: ToolMeta = ToolMeta {
    category: Category::Search,
    short_description: "hybrid, vector or keyword search over passages",
    available_when: "always",
    aliases: &["search"],
    annotations: Annotations::READ_ONLY,
    cost: CostTier::Moderate,
    permission: Permission::Guest,
    timeout: Duration::from_millis(20000),
    limits: RateLimits::NONE,
    needs_approval: false,
    defer_loading: false,
};

pub fn available(_ctx: &ToolContext) -> bool {
    true
}

const NAME: &str = "search_documents";
const DEFAULT_LIMIT: u64 = 10;
const MAX_LIMIT: u64 = 50;

/// At or below this many chunks in scope the vector side reads every one of
/// them and sorts by distance: exact, and cheaper than walking the graph past
/// the many neighbours a selective filter throws away (docs/search.md has
/// the measurements behind the figure).
pub const EXACT_MAX_CHUNKS: i64 = 3_000;
/// The HNSW candidate list: at least this wide, and twice the hits wanted.
const MIN_EF_SEARCH: usize = 100;
/// pgvector's ceiling for `hnsw.ef_search`.
const MAX_EF_SEARCH: usize = 1_000;
/// How far an iterative index scan may go before giving up; a scan that ends
/// short falls back to the exact path, so this bounds time, not recall.
const MAX_SCAN_TUPLES: usize = 20_000;
/// Candidates read back beyond the limit, so that keyword-index entries for
/// chunks PostgreSQL no longer has do not leave the answer short.
const KEYWORD_SLACK: usize = 10;

/// Which retrievers run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    Hybrid,
    Vector,
    Keyword,
}

impl Mode {
    fn parse(mode: Option<&str>) -> Result<Mode, ToolError> {
        match mode.unwrap_or("hybrid") {
            "hybrid" => Ok(Mode::Hybrid),
            "vector" => Ok(Mode::Vector),
            "keyword" => Ok(Mode::Keyword),
            other => Err(ToolError::invalid(format!(
                "mode {other:?} is not one of hybrid, vector, keyword"
            ))),
        }
    }

    fn uses_vectors(self) -> bool {
        self != Mode::Keyword
    }

    fn uses_keywords(self) -> bool {
        self != Mode::Vector
    }
}

/// What the model gets back.
#[derive(Debug, Serialize)]
pub struct Output {
    pub query: String,
    pub mode: Mode,
    /// What `score` means in this answer: `rrf` (hybrid), `cosine_similarity`
    /// (vector) or `bm25` (keyword).
    pub scoring: &'static str,
    pub results: Vec<Hit>,
    /// Why the list is empty or short, when it is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// How the vector side ran: `exact` (every chunk in scope compared),
    /// `index` (HNSW, iterative scan) or `index_then_exact` (the index scan
    /// came back short and the exact path completed it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vector_strategy: Option<VectorStrategy>,
    pub timings: Timings,
}

/// One passage, citable by its character range in the document.
#[derive(Debug, Serialize)]
pub struct Hit {
    pub rank: usize,
    pub score: f64,
    /// Each retriever that found the passage, with its rank there (1 = best).
    pub found_by: Vec<FoundBy>,
    pub chunk_id: i64,
    pub document_id: Uuid,
    pub path: String,
    pub name: String,
    pub title: Option<String>,
    pub source_id: Uuid,
    pub source: String,
    pub space_id: Uuid,
    pub heading: String,
    pub page: Option<i32>,
    /// Unicode code points into the document's content, end exclusive: the
    /// text is `content[char_start..char_end]`, what read_document's `start`
    /// takes.
    pub char_start: i32,
    pub char_end: i32,
    pub text: String,
}

#[derive(Debug, Clone, Copy, Serialize)]
pub struct FoundBy {
    pub retriever: Retriever,
    pub rank: usize,
    /// Cosine similarity for vector, BM25 for keyword.
    pub score: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Retriever {
    Vector,
    Keyword,
}

/// Milliseconds spent in each part, so the embedding's share can be told
/// apart from the search itself. Keyword search runs while the query is
/// embedded, so the parts can add up to more than `total_ms`.
#[derive(Debug, Default, Serialize)]
pub struct Timings {
    pub embed_ms: f64,
    pub vector_ms: f64,
    pub keyword_ms: f64,
    pub fetch_ms: f64,
    pub total_ms: f64,
}

fn ms(d: Duration) -> f64 {
    (d.as_secs_f64() * 100_000.0).round() / 100.0
}

pub async fn run(
    deps: &Deps,
    args: Args,
    ctx: &ToolContext,
    _callbacks: &dyn Callbacks,
) -> Result<Output, ToolError> {
    let started = Instant::now();
    let mode = Mode::parse(args.mode.as_deref())?;
    let limit = args.limit.unwrap_or(DEFAULT_LIMIT).clamp(1, MAX_LIMIT) as usize;
    let query = args.query.trim().to_string();
    if !query.chars().any(char::is_alphanumeric) {
        return Err(ToolError::invalid(format!(
            "query {:?} holds no words to search for; give words or a phrase",
            args.query
        )));
    }
    let folder = match args.folder.as_deref() {
        Some(f) => normalize_folder(f)?,
        None => None,
    };

    let mut tx = deps.read(NAME, ctx).await?;
    let spaces = deps.spaces(NAME, &mut tx, ctx).await?;
    let mut output = Output {
        query: query.clone(),
        mode,
        scoring: match mode {
            Mode::Hybrid => "rrf",
            Mode::Vector => "cosine_similarity",
            Mode::Keyword => "bm25",
        },
        results: Vec::new(),
        note: None,
        vector_strategy: None,
        timings: Timings::default(),
    };
    if spaces.is_empty() {
        output.note =
            Some("the caller is a member of no space, so there is nothing to search".into());
        output.timings.total_ms = ms(started.elapsed());
        return Ok(output);
    }
    let filters = Filters {
        spaces,
        source_id: args.source_id,
        document_id: args.document_id,
        folder,
    };
    check_filters(&mut tx, &filters).await?;

    // How deep each retriever looks: fusion needs more than the final list
    // so that a passage ranked well by one side and fairly by the other wins.
    let depth = match mode {
        Mode::Hybrid => (limit * 3).max(30),
        Mode::Vector | Mode::Keyword => limit,
    };

    // Tantivy is synchronous; it searches on the blocking pool while the
    // query is embedded and the vector side runs.
    let keyword_task = mode.uses_keywords().then(|| {
        let index = deps.index.clone();
        let q = filters.keyword_query(&query, depth + KEYWORD_SLACK);
        tokio::task::spawn_blocking(move || {
            let t = Instant::now();
            let hits = index.search(&q);
            (hits, t.elapsed())
        })
    });

    let mut vector_hits = Vec::new();
    if mode.uses_vectors() {
        // The database decides how to search (counting a large scope takes
        // a few milliseconds) while the query is being embedded.
        let embed = async {
            let t = Instant::now();
            (deps.embedder.embed_query(&query).await, t.elapsed())
        };
        let plan = async {
            let t = Instant::now();
            let strategy = plan(&mut tx, &filters, depth, VectorStrategy::Auto).await;
            (strategy, t.elapsed())
        };
        let ((embedding, embed_took), (strategy, plan_took)) = tokio::join!(embed, plan);
        let embedding = embedding.map_err(|e| {
            tracing::error!(tool = NAME, error = %e, "query embedding failed");
            ToolError::unavailable(format!(
                "{NAME} could not embed the query just now; try again shortly, or use mode keyword"
            ))
        })?;
        output.timings.embed_ms = ms(embed_took);
        let t = Instant::now();
        let nearest = search(&mut tx, &embedding, &filters, depth, strategy?).await?;
        output.timings.vector_ms = ms(plan_took + t.elapsed());
        output.vector_strategy = Some(nearest.strategy);
        vector_hits = nearest.hits;
    }

    let mut keyword_hits: Vec<KeywordHit> = Vec::new();
    if let Some(task) = keyword_task {
        let (hits, took) = task
            .await
            .map_err(|e| internal(NAME, format!("keyword search task failed: {e}")))?;
        keyword_hits = hits.map_err(|e| internal(NAME, e))?;
        output.timings.keyword_ms = ms(took);
    }

    let candidates = rank(mode, &vector_hits, &keyword_hits);
    let t = Instant::now();
    output.results = read_back(&mut tx, &filters, candidates, limit).await?;
    output.timings.fetch_ms = ms(t.elapsed());
    if output.results.is_empty() {
        output.note = Some(empty_note(&mut tx, &filters, mode).await?);
    }
    output.timings.total_ms = ms(started.elapsed());
    Ok(output)
}

/// The restrictions every retriever applies, already checked against the
/// caller's spaces.
#[derive(Debug, Clone)]
pub struct Filters {
    /// The spaces the call covers; never empty.
    pub spaces: Vec<Uuid>,
    pub source_id: Option<Uuid>,
    pub document_id: Option<Uuid>,
    /// A folder path inside its source without leading or trailing slashes;
    /// `None` for the whole source.
    pub folder: Option<String>,
}

/// Binds `value` as the next parameter and returns its placeholder.
fn bind<'q, T>(args: &mut PgArguments, value: T) -> Result<String, ToolError>
where
    T: Encode<'q, Postgres> + Type<Postgres> + 'q,
{
    args.add(value)
        .map_err(|e| internal(NAME, format!("cannot bind a query parameter: {e}")))?;
    Ok(format!("${}", args.len()))
}

impl Filters {
    /// The SQL conditions on chunks aliased `c`, binding their values.
    fn conditions(&self, args: &mut PgArguments) -> Result<String, ToolError> {
        let spaces = bind(args, self.spaces.clone())?;
        let mut sql = format!("c.space_id = ANY({spaces})");
        if let Some(id) = self.document_id {
            let p = bind(args, id)?;
            sql.push_str(&format!(" AND c.document_id = {p}"));
        }
        if let Some(id) = self.source_id {
            let p = bind(args, id)?;
            sql.push_str(&format!(
                " AND EXISTS (SELECT 1 FROM documents sd WHERE sd.id = c.document_id AND sd.source_id = {p})"
            ));
        }
        if let Some(folder) = &self.folder {
            let p = bind(args, folder.clone())?;
            sql.push_str(&format!(
                " AND EXISTS (SELECT 1 FROM documents fd JOIN folders ff ON ff.id = fd.folder_id
                               WHERE fd.id = c.document_id
                                 AND (ff.path = {p} OR starts_with(ff.path, {p} || '/')))"
            ));
        }
        Ok(sql)
    }

    fn keyword_query(&self, text: &str, limit: usize) -> KeywordQuery {
        KeywordQuery {
            text: text.to_string(),
            space_ids: self.spaces.clone(),
            document_ids: self.document_id.map(|id| vec![id]),
            source_ids: self.source_id.map(|id| vec![id]),
            folder_prefix: self.folder.clone(),
            limit,
            offset: 0,
        }
    }
}

/// `/guides/`, `guides` and `guides//` all name the folder `guides`; the
/// root (`/` or empty) means no folder restriction.
fn normalize_folder(folder: &str) -> Result<Option<String>, ToolError> {
    let path = data_plane_store::content::normalize_path(folder).map_err(|_| {
        ToolError::invalid(format!(
            "folder {folder:?} must not contain '..'; give a path inside the source such as guides/setup"
        ))
    })?;
    Ok((!path.is_empty()).then_some(path))
}

/// Refuses a source, document or folder the caller cannot see, with the same
/// answer whether it does not exist or lies in another space.
async fn check_filters(tx: &mut ScopedTx, f: &Filters) -> Result<(), ToolError> {
    if f.source_id.is_none() && f.document_id.is_none() && f.folder.is_none() {
        return Ok(());
    }
    let (source_ok, document_ok, folder_ok): (bool, bool, bool) = sqlx::query_as(
        "SELECT $2::uuid IS NULL OR EXISTS (SELECT 1 FROM sources WHERE id = $2 AND space_id = ANY($1)),
                $3::uuid IS NULL OR EXISTS (SELECT 1 FROM documents WHERE id = $3 AND space_id = ANY($1)),
                $4::text IS NULL OR EXISTS (SELECT 1 FROM folders
                                             WHERE path = $4 AND space_id = ANY($1)
                                               AND ($2::uuid IS NULL OR source_id = $2))",
    )
    .bind(&f.spaces)
    .bind(f.source_id)
    .bind(f.document_id)
    .bind(&f.folder)
    .fetch_one(&mut **tx)
    .await
    .map_err(|e| internal(NAME, e))?;
    if let (false, Some(id)) = (source_ok, f.source_id) {
        return Err(ToolError::not_found(format!(
            "no source {id} in the spaces this request can read; list_sources shows the sources of a space"
        )));
    }
    if let (false, Some(id)) = (document_ok, f.document_id) {
        return Err(not_found(id));
    }
    if let (false, Some(folder)) = (folder_ok, &f.folder) {
        let within = if f.source_id.is_some() {
            "that source"
        } else {
            "the spaces this request can read"
        };
        return Err(ToolError::not_found(format!(
            "no folder {folder:?} in {within}; folder paths are relative to their source, see folder_tree"
        )));
    }
    Ok(())
}

/// How the vector side finds its neighbours.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum VectorStrategy {
    /// Exact when the scope is small, else the index with the exact path
    /// as fallback (the tool's choice).
    Auto,
    Exact,
    Index,
    IndexThenExact,
}

/// A chunk found by the vector side, nearest first.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct VectorHit {
    pub chunk_id: i64,
    /// Cosine distance (0 = same direction).
    pub distance: f64,
}

#[derive(Debug, Clone)]
pub struct Nearest {
    pub hits: Vec<VectorHit>,
    /// What actually ran (never `Auto`).
    pub strategy: VectorStrategy,
}

/// The `k` chunks nearest to `embedding` among those `filters` admit, nearest
/// first. Returns `k` hits whenever that many chunks are in scope: a scope of
/// at most [`EXACT_MAX_CHUNKS`] is compared exactly; a larger one goes
/// through the HNSW index with iterative scanning, and when that ends short
/// (a filter that only a sliver of the graph passes) the exact path finishes
/// the job. `Exact` and `Index` force one path (benchmarks compare them).
pub async fn nearest(
    tx: &mut ScopedTx,
    embedding: &[f32],
    filters: &Filters,
    k: usize,
    strategy: VectorStrategy,
) -> Result<Nearest, ToolError> {
    let strategy = plan(tx, filters, k, strategy).await?;
    search(tx, embedding, filters, k, strategy).await
}

/// Resolves `Auto` by counting the scope, and readies the transaction for
/// an index scan when one may run.
async fn plan(
    tx: &mut ScopedTx,
    filters: &Filters,
    k: usize,
    strategy: VectorStrategy,
) -> Result<VectorStrategy, ToolError> {
    let strategy = match strategy {
        VectorStrategy::Auto if in_scope_at_most(tx, filters, EXACT_MAX_CHUNKS).await? => {
            VectorStrategy::Exact
        }
        VectorStrategy::Auto => VectorStrategy::IndexThenExact,
        chosen => chosen,
    };
    if strategy != VectorStrategy::Exact {
        configure_index_scan(tx, k).await?;
    }
    Ok(strategy)
}

/// Runs a planned strategy.
async fn search(
    tx: &mut ScopedTx,
    embedding: &[f32],
    filters: &Filters,
    k: usize,
    strategy: VectorStrategy,
) -> Result<Nearest, ToolError> {
    let k = k.max(1);
    let vector = Vector::from(embedding.to_vec());
    let (hits, strategy) = match strategy {
        VectorStrategy::Exact => (exact(tx, &vector, filters, k).await?, strategy),
        VectorStrategy::Index => (by_index(tx, &vector, filters, k).await?, strategy),
        VectorStrategy::Auto | VectorStrategy::IndexThenExact => {
            let hits = by_index(tx, &vector, filters, k).await?;
            if hits.len() >= k {
                (hits, VectorStrategy::Index)
            } else {
                let hits = exact(tx, &vector, filters, k).await?;
                (hits, VectorStrategy::IndexThenExact)
            }
        }
    };
    Ok(Nearest { hits, strategy })
}

/// Iterative scanning keeps walking the graph until `k` chunks pass the
/// filters (pgvector's default stops after `ef_search` candidates, which a
/// selective filter, such as the one row-level security adds, can empty).
/// Transaction-local, so nothing carries over to the pooled connection's
/// next user.
async fn configure_index_scan(tx: &mut ScopedTx, k: usize) -> Result<(), ToolError> {
    let ef_search = (2 * k).clamp(MIN_EF_SEARCH, MAX_EF_SEARCH);
    sqlx::query(
        "SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true),
                set_config('hnsw.ef_search', $1, true),
                set_config('hnsw.max_scan_tuples', $2, true)",
    )
    .bind(ef_search.to_string())
    .bind(MAX_SCAN_TUPLES.to_string())
    .execute(&mut **tx)
    .await
    .map_err(|e| internal(NAME, e))?;
    Ok(())
}

/// Whether `filters` admit at most `max` chunks. Counting stops just past
/// `max`, so a huge scope costs no more to judge than a small one.
async fn in_scope_at_most(
    tx: &mut ScopedTx,
    filters: &Filters,
    max: i64,
) -> Result<bool, ToolError> {
    let mut args = PgArguments::default();
    let conditions = filters.conditions(&mut args)?;
    let cap = bind(&mut args, max + 1)?;
    let sql =
        format!("SELECT count(*) FROM (SELECT 1 FROM chunks c WHERE {conditions} LIMIT {cap}) t");
    let in_scope: i64 = sqlx::query_scalar_with(&sql, args)
        .fetch_one(&mut **tx)
        .await
        .map_err(|e| internal(NAME, e))?;
    Ok(in_scope <= max)
}

/// Every chunk in scope compared with the query. The distances are
/// materialised before sorting so the planner cannot turn the sort into an
/// HNSW scan (which would bring back the filtered-out-neighbours problem).
async fn exact(
    tx: &mut ScopedTx,
    vector: &Vector,
    filters: &Filters,
    k: usize,
) -> Result<Vec<VectorHit>, ToolError> {
    let mut args = PgArguments::default();
    let q = bind(&mut args, vector.clone())?;
    let conditions = filters.conditions(&mut args)?;
    let limit = bind(&mut args, k as i64)?;
    let sql = format!(
        "WITH scored AS MATERIALIZED (
             SELECT c.id, c.embedding <=> {q} AS distance FROM chunks c WHERE {conditions})
         SELECT id, distance FROM scored ORDER BY distance, id LIMIT {limit}"
    );
    let rows: Vec<(i64, f64)> = sqlx::query_as_with(&sql, args)
        .fetch_all(&mut **tx)
        .await
        .map_err(|e| internal(NAME, e))?;
    Ok(to_hits(rows))
}

/// The HNSW path, after [`configure_index_scan`]. Relaxed order may return
/// neighbours slightly out of order, so they are sorted again by distance.
async fn by_index(
    tx: &mut ScopedTx,
    vector: &Vector,
    filters: &Filters,
    k: usize,
) -> Result<Vec<VectorHit>, ToolError> {
    let mut args = PgArguments::default();
    let q = bind(&mut args, vector.clone())?;
    let conditions = filters.conditions(&mut args)?;
    let limit = bind(&mut args, k as i64)?;
    let sql = format!(
        "WITH nearest AS MATERIALIZED (
             SELECT c.id, c.embedding <=> {q} AS distance FROM chunks c
              WHERE {conditions}
              ORDER BY c.embedding <=> {q} LIMIT {limit})
         SELECT id, distance FROM nearest ORDER BY distance, id"
    );
    let rows: Vec<(i64, f64)> = sqlx::query_as_with(&sql, args)
        .fetch_all(&mut **tx)
        .await
        .map_err(|e| internal(NAME, e))?;
    Ok(to_hits(rows))
}

fn to_hits(rows: Vec<(i64, f64)>) -> Vec<VectorHit> {
    rows.into_iter()
        .map(|(chunk_id, distance)| VectorHit { chunk_id, distance })
        .collect()
}

/// A chunk chosen for the answer, before its text is read.
#[derive(Debug)]
struct Ranked {
    chunk_id: i64,
    score: f64,
    found_by: Vec<FoundBy>,
}

/// Every candidate in answer order: one retriever's list as it is, or both
/// fused by reciprocal rank.
fn rank(mode: Mode, vector: &[VectorHit], keyword: &[KeywordHit]) -> Vec<Ranked> {
    let vector_found = |i: usize, h: &VectorHit| FoundBy {
        retriever: Retriever::Vector,
        rank: i + 1,
        score: 1.0 - h.distance,
    };
    let keyword_found = |i: usize, h: &KeywordHit| FoundBy {
        retriever: Retriever::Keyword,
        rank: i + 1,
        score: f64::from(h.score),
    };
    match mode {
        Mode::Vector => vector
            .iter()
            .enumerate()
            .map(|(i, h)| Ranked {
                chunk_id: h.chunk_id,
                score: 1.0 - h.distance,
                found_by: vec![vector_found(i, h)],
            })
            .collect(),
        Mode::Keyword => keyword
            .iter()
            .enumerate()
            .map(|(i, h)| Ranked {
                chunk_id: h.chunk_id,
                score: f64::from(h.score),
                found_by: vec![keyword_found(i, h)],
            })
            .collect(),
        Mode::Hybrid => {
            let vector_ids: Vec<i64> = vector.iter().map(|h| h.chunk_id).collect();
            let keyword_ids: Vec<i64> = keyword.iter().map(|h| h.chunk_id).collect();
            let all = vector_ids.len() + keyword_ids.len();
            reciprocal_rank_fusion(&[vector_ids, keyword_ids], DEFAULT_RRF_K, all)
                .into_iter()
                .map(|fused| {
                    let mut found_by = Vec::new();
                    if let Some(r) = fused.ranks[0] {
                        found_by.push(vector_found(r - 1, &vector[r - 1]));
                    }
                    if let Some(r) = fused.ranks[1] {
                        found_by.push(keyword_found(r - 1, &keyword[r - 1]));
                    }
                    Ranked {
                        chunk_id: fused.chunk_id,
                        score: f64::from(fused.score),
                        found_by,
                    }
                })
                .collect()
        }
    }
}

#[derive(sqlx::FromRow)]
struct ChunkRow {
    id: i64,
    document_id: Uuid,
    path: String,
    name: String,
    title: Option<String>,
    source_id: Uuid,
    source: String,
    space_id: Uuid,
    heading: String,
    page: Option<i32>,
    char_start: i32,
    char_end: i32,
    text: String,
}

/// The best `limit` candidates as PostgreSQL holds them now, read under
/// row-level security and the filters, in rank order. Keyword candidates
/// come from an index outside row-level security that may lag behind a
/// deletion: a candidate PostgreSQL no longer has drops out and the next
/// one takes its place.
async fn read_back(
    tx: &mut ScopedTx,
    filters: &Filters,
    candidates: Vec<Ranked>,
    limit: usize,
) -> Result<Vec<Hit>, ToolError> {
    let mut hits: Vec<Hit> = Vec::with_capacity(limit);
    let mut rest = candidates.into_iter();
    while hits.len() < limit {
        let batch: Vec<Ranked> = rest
            .by_ref()
            .take(limit - hits.len() + KEYWORD_SLACK)
            .collect();
        if batch.is_empty() {
            break;
        }
        let ids: Vec<i64> = batch.iter().map(|r| r.chunk_id).collect();
        let mut args = PgArguments::default();
        let p = bind(&mut args, ids)?;
        let conditions = filters.conditions(&mut args)?;
        let sql = format!(
            "SELECT c.id, c.document_id, d.path, d.name, d.title, d.source_id, s.name AS source,
                    c.space_id, c.heading, c.page, c.char_start, c.char_end, c.text
               FROM chunks c
               JOIN documents d ON d.id = c.document_id
               JOIN sources s ON s.id = d.source_id
              WHERE c.id = ANY({p}) AND {conditions}"
        );
        let rows: Vec<ChunkRow> = sqlx::query_as_with(&sql, args)
            .fetch_all(&mut **tx)
            .await
            .map_err(|e| internal(NAME, e))?;
        let mut rows: HashMap<i64, ChunkRow> = rows.into_iter().map(|r| (r.id, r)).collect();
        for r in batch {
            if hits.len() == limit {
                break;
            }
            let Some(row) = rows.remove(&r.chunk_id) else {
                continue;
            };
            hits.push(Hit {
                rank: hits.len() + 1,
                score: r.score,
                found_by: r.found_by,
                chunk_id: row.id,
                document_id: row.document_id,
                path: row.path,
                name: row.name,
                title: row.title,
                source_id: row.source_id,
                source: row.source,
                space_id: row.space_id,
                heading: row.heading,
                page: row.page,
                char_start: row.char_start,
                char_end: row.char_end,
                text: row.text,
            });
        }
    }
    Ok(hits)
}

/// Why nothing came back: nothing to search, or nothing matched.
async fn empty_note(tx: &mut ScopedTx, filters: &Filters, mode: Mode) -> Result<String, ToolError> {
    let mut args = PgArguments::default();
    let conditions = filters.conditions(&mut args)?;
    let sql = format!("SELECT EXISTS (SELECT 1 FROM chunks c WHERE {conditions})");
    let any: bool = sqlx::query_scalar_with(&sql, args)
        .fetch_one(&mut **tx)
        .await
        .map_err(|e| internal(NAME, e))?;
    let filtered =
        filters.source_id.is_some() || filters.document_id.is_some() || filters.folder.is_some();
    Ok(match (any, filtered, mode) {
        (false, false, _) => "the spaces searched hold no passages yet".into(),
        (false, true, _) => "no passages within these filters; widen or drop them".into(),
        (true, _, Mode::Keyword) => {
            "no passage contains these words; try other words, or mode hybrid to search by meaning"
                .into()
        }
        (true, _, _) => "nothing matched; try other words or fewer filters".into(),
    })
}
