//! search_documents: hybrid, vector or keyword search over passages.
//!
//! Vector hits come from pgvector (HNSW with iterative scans, or an exact scan
//! when the filtered set is small), keyword hits from the Tantivy index
//! restricted to the caller's spaces, and hybrid fuses both by reciprocal
//! rank. Every hit is read back from PostgreSQL under row-level security
//! before it is returned, so a stale keyword-index entry never shows. When
//! a reranker is configured (`Deps::connect_rerank`), it reorders the best
//! fused candidates; if it fails, the answer keeps the fused order and says
//! why. The design and measured figures are in docs/search.md.

use std::time::{Duration, Instant};

use data_plane_registry::{
    AnnotationHints, Callbacks, Category, CostTier, ErrorCode, Permission, RateLimits, TagSpec,
    ToolContext, ToolError, ToolMeta, ToolSetting,
};
use data_plane_search::{Bm25, FieldWeights, Fusion, KeywordHit, KeywordQuery};
use data_plane_store::ScopedTx;
use data_plane_store::passages::{
    self, ChunkFilters as Filters, FoundChunk, VectorHit, VectorStrategy,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
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
    annotations: AnnotationHints::DERIVED,
    cost: CostTier::Moderate,
    permission: Permission::Guest,
    timeout: Duration::from_millis(20000),
    limits: RateLimits::NONE,
    requires_gate: false,
    defer_loading: false,
    tag: Some(TagSpec {
        tag_prefix: "SEARCH",
        pattern: r"(?P<query>.+)",
        example: "SEARCH: vacuum full",
        strip_from_display: true,
    }),
};

/// How hybrid mode merges the vector and keyword lists, chosen by an admin
/// (`{"method": "convex", "vector_weight": 0.5, "scale": "mean_3sd"}`, the
/// default, or `{"method": "rrf", "k": 60}`; docs/search.md has the
/// measurements).
pub const FUSION: ToolSetting<Fusion> = ToolSetting::new("search_fusion");

/// What a word weighs in a passage's heading and in its document's title
/// against the passage's own text, chosen by an admin (`{"heading": 2,
/// "title": 0.2}` by default; 0 leaves a field out; docs/search.md).
pub const FIELD_WEIGHTS: ToolSetting<FieldWeights> = ToolSetting::new("search_field_weights");

/// BM25's term-frequency saturation, chosen by an admin (`{"k1": 0.5}` by
/// default; length normalisation b follows from it; docs/search.md).
pub const BM25: ToolSetting<Bm25> = ToolSetting::new("search_bm25");

pub fn available(_ctx: &ToolContext) -> bool {
    true
}

pub use data_plane_store::passages::{EXACT_MAX_CHUNKS, Nearest, nearest};

const NAME: &str = "search_documents";
const DEFAULT_LIMIT: u64 = 10;
const MAX_LIMIT: u64 = 50;

/// Candidates read back beyond the limit, so that keyword-index entries for
/// chunks PostgreSQL no longer has do not leave the answer short.
const KEYWORD_SLACK: usize = 10;

/// Which retrievers run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    Hybrid,
    Vector,
    Keyword,
}

/// Without a working embedding engine only keyword search is offered: the
/// definition's `mode` narrows to `keyword`, which becomes the default.
pub fn shape(definition: &mut Value, ctx: &ToolContext) {
    if ctx.deployment.embedding_ok {
        return;
    }
    if let Some(mode) = definition.pointer_mut("/parameters/properties/mode") {
        mode["enum"] = serde_json::json!(["keyword"]);
        mode["default"] = serde_json::json!("keyword");
        mode["description"] = serde_json::json!(
            "Retriever: keyword (semantic search is unavailable: no embedding engine is answering)."
        );
    }
    if let Some(description) = definition.get_mut("description") {
        *description = serde_json::json!(
            "Search the documents' text by keywords (BM25). Returns the best passages with their document, path and character offsets for citation. Put exact phrases in double quotes."
        );
    }
}

impl Mode {
    fn parse(mode: Option<&str>, ctx: &ToolContext) -> Result<Mode, ToolError> {
        if !ctx.deployment.embedding_ok {
            return match mode.unwrap_or("keyword") {
                "keyword" => Ok(Mode::Keyword),
                "hybrid" | "vector" => Err(ToolError::new(
                    ErrorCode::NotAvailable,
                    "vector and hybrid search are not available: no embedding engine is answering; use mode keyword",
                )),
                other => Err(ToolError::invalid(format!(
                    "mode {other:?} is not available; use keyword"
                ))),
            };
        }
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
#[derive(Debug, Serialize, JsonSchema)]
pub struct Output {
    pub query: String,
    pub mode: Mode,
    /// What `score` means in this answer: `convex` or `rrf` (hybrid, by
    /// the fusion setting), `cosine_similarity` (vector) or `bm25` (keyword).
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
    /// The rerank stage, when the deployment has one: whether it reordered
    /// this answer, or why not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rerank: Option<RerankReport>,
    pub timings: Timings,
}

/// What the rerank stage did with this answer.
#[derive(Debug, Serialize, JsonSchema)]
pub struct RerankReport {
    /// True when the results are in the reranker's order; false when they
    /// are in fused order because it failed (`error` says how).
    pub applied: bool,
    /// How many candidates were sent to it.
    pub candidates: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One passage, citable by its character range in the document.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Hit {
    pub rank: usize,
    pub score: f64,
    /// Each retriever that found the passage, with its rank there (1 = best).
    pub found_by: Vec<FoundBy>,
    /// The reranker's score and the rank the passage had before it, when
    /// the rerank stage ordered this answer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rerank: Option<HitRerank>,
    /// The passage, its document and source (`chunk_id`, `path`, `heading`,
    /// `char_start`/`char_end`, `text`, ...), as fields of the hit itself.
    #[serde(flatten)]
    pub passage: FoundChunk,
}

#[derive(Debug, Clone, Copy, Serialize, JsonSchema)]
pub struct HitRerank {
    /// The reranker's relevance score (its own scale; higher is better).
    pub score: f64,
    /// The passage's rank in the fused order, before reranking.
    pub fused_rank: usize,
}

#[derive(Debug, Clone, Copy, Serialize, JsonSchema)]
pub struct FoundBy {
    pub retriever: Retriever,
    pub rank: usize,
    /// Cosine similarity for vector, BM25 for keyword.
    pub score: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Retriever {
    Vector,
    Keyword,
}

/// Milliseconds spent in each part, so the embedding's share can be told
/// apart from the search itself. Keyword search runs while the query is
/// embedded, so the parts can add up to more than `total_ms`.
#[derive(Debug, Default, Serialize, JsonSchema)]
pub struct Timings {
    pub embed_ms: f64,
    pub vector_ms: f64,
    pub keyword_ms: f64,
    pub fetch_ms: f64,
    /// The reranker's request (0 without a rerank stage).
    pub rerank_ms: f64,
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
    let mode = Mode::parse(args.mode.as_deref(), ctx)?;
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
    let fusion = ctx.settings.get(&FUSION);
    let mut output = Output {
        query: query.clone(),
        mode,
        scoring: match (mode, fusion) {
            (Mode::Hybrid, Fusion::Convex { .. }) => "convex",
            (Mode::Hybrid, Fusion::Rrf { .. }) => "rrf",
            (Mode::Vector, _) => "cosine_similarity",
            (Mode::Keyword, _) => "bm25",
        },
        results: Vec::new(),
        note: None,
        vector_strategy: None,
        rerank: None,
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
    // A rerank stage reorders `pool` candidates, so each side looks at
    // least that deep.
    let rerank = deps.rerank();
    let pool = rerank.map_or(limit, |r| r.candidates.max(limit));
    let depth = match mode {
        Mode::Hybrid => (limit * 3).max(30),
        Mode::Vector | Mode::Keyword => limit,
    }
    .max(pool);

    // Tantivy is synchronous; it searches on the blocking pool while the
    // query is embedded and the vector side runs.
    let keyword_task = mode.uses_keywords().then(|| {
        let index = deps.index.clone();
        let q = keyword_query(
            &filters,
            &query,
            depth + KEYWORD_SLACK,
            ctx.settings.get(&FIELD_WEIGHTS),
            ctx.settings.get(&BM25),
        );
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
            let strategy = passages::plan(&mut tx, &filters, depth, VectorStrategy::Auto)
                .await
                .map_err(|e| internal(NAME, e));
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
        let nearest = passages::search_planned(&mut tx, &embedding, &filters, depth, strategy?)
            .await
            .map_err(|e| internal(NAME, e))?;
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

    let candidates = rank(mode, fusion, &vector_hits, &keyword_hits);
    let t = Instant::now();
    output.results = read_back(&mut tx, &filters, candidates, pool).await?;
    output.timings.fetch_ms = ms(t.elapsed());
    if output.results.is_empty() {
        output.note = Some(empty_note(&mut tx, &filters, mode).await?);
    } else if let Some(rerank) = rerank {
        // The reranker is another server: no connection is held while it thinks.
        drop(tx);
        let t = Instant::now();
        output.rerank = Some(rerank_hits(rerank, &query, &mut output.results).await);
        output.timings.rerank_ms = ms(t.elapsed());
    }
    output.results.truncate(limit);
    output.timings.total_ms = ms(started.elapsed());
    Ok(output)
}

/// Reorders `hits` (fused order, best first) by the reranker's scores;
/// on failure leaves them as they are and says why.
async fn rerank_hits(rerank: &crate::Rerank, query: &str, hits: &mut Vec<Hit>) -> RerankReport {
    let documents: Vec<String> = hits
        .iter()
        .map(|h| {
            // The heading path gives a passage its context, less the
            // heading the passage itself opens with.
            let mut heading = h.passage.heading.trim();
            let first_line = h.passage.text.lines().next().unwrap_or_default();
            let (above, last) = heading.rsplit_once(" › ").unwrap_or(("", heading));
            if first_line.trim_start_matches('#').trim() == last {
                heading = above;
            }
            if heading.is_empty() {
                h.passage.text.clone()
            } else {
                format!("{heading}\n{}", h.passage.text)
            }
        })
        .collect();
    let mut report = RerankReport {
        applied: false,
        candidates: hits.len(),
        model: rerank.reranker.config().model.clone(),
        error: None,
    };
    match rerank.reranker.rerank(query, &documents).await {
        Ok(scores) => {
            let mut slots: Vec<Option<Hit>> = std::mem::take(hits).into_iter().map(Some).collect();
            for scored in &scores {
                if let Some(mut hit) = slots[scored.index].take() {
                    hit.rerank = Some(HitRerank {
                        score: scored.score,
                        fused_rank: hit.rank,
                    });
                    hit.rank = hits.len() + 1;
                    hits.push(hit);
                }
            }
            // Passages it did not score follow, in fused order.
            for mut hit in slots.into_iter().flatten() {
                hit.rank = hits.len() + 1;
                hits.push(hit);
            }
            report.applied = true;
        }
        Err(e) => {
            tracing::warn!(tool = NAME, error = %e, "rerank failed; answering in fused order");
            report.error = Some(format!("{}; the results are in fused order", e.summary()));
        }
    }
    report
}

/// The keyword index's query for `filters`.
fn keyword_query(
    filters: &Filters,
    text: &str,
    limit: usize,
    weights: FieldWeights,
    bm25: Bm25,
) -> KeywordQuery {
    KeywordQuery {
        text: text.to_string(),
        space_ids: filters.spaces.clone(),
        document_ids: filters.document_id.map(|id| vec![id]),
        source_ids: filters.source_id.map(|id| vec![id]),
        folder_prefix: filters.folder.clone(),
        limit,
        offset: 0,
        weights,
        bm25,
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
    let found = passages::find_filters(tx, f)
        .await
        .map_err(|e| internal(NAME, e))?;
    let (source_ok, document_ok, folder_ok) = (found.source, found.document, found.folder);
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

/// A chunk chosen for the answer, before its text is read.
#[derive(Debug)]
struct Ranked {
    chunk_id: i64,
    score: f64,
    found_by: Vec<FoundBy>,
}

/// Every candidate in answer order: one retriever's list as it is, or both
/// fused as the setting says.
fn rank(mode: Mode, fusion: Fusion, vector: &[VectorHit], keyword: &[KeywordHit]) -> Vec<Ranked> {
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
            let vector_scores: Vec<(i64, f64)> = vector
                .iter()
                .map(|h| (h.chunk_id, 1.0 - h.distance))
                .collect();
            let keyword_scores: Vec<(i64, f64)> = keyword
                .iter()
                .map(|h| (h.chunk_id, f64::from(h.score)))
                .collect();
            let all = vector_scores.len() + keyword_scores.len();
            fusion
                .fuse(&[vector_scores, keyword_scores], all)
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
        let mut rows = passages::found_chunks(tx, filters, ids)
            .await
            .map_err(|e| internal(NAME, e))?;
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
                rerank: None,
                passage: row,
            });
        }
    }
    Ok(hits)
}

/// Why nothing came back: nothing to search, or nothing matched.
async fn empty_note(tx: &mut ScopedTx, filters: &Filters, mode: Mode) -> Result<String, ToolError> {
    let any = passages::any_chunk(tx, filters)
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
