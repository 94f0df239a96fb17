//! The SQL of passage search: which chunks a search may return, the `k`
//! nearest to an embedding (planned between an exact scan and pgvector's
//! HNSW index), and reading found chunks back under row-level security.
//! The search_documents tool ranks and explains; the queries live here.

use std::collections::HashMap;

use pgvector::Vector;
use schemars::JsonSchema;
use serde::Serialize;
use sqlx::postgres::PgArguments;
use sqlx::{Arguments, Encode, Postgres, Type};
use uuid::Uuid;

use crate::{ScopedTx, StoreError};

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

/// Which chunks a search may return: the caller's spaces (checked by the
/// caller) narrowed to a source, a document or a folder.
#[derive(Debug, Clone)]
pub struct ChunkFilters {
    /// The spaces the call covers; never empty.
    pub spaces: Vec<Uuid>,
    pub source_id: Option<Uuid>,
    pub document_id: Option<Uuid>,
    /// A folder path inside its source without leading or trailing slashes;
    /// `None` for the whole source.
    pub folder: Option<String>,
}

/// Binds `value` as the next parameter and returns its placeholder.
pub fn bind<'q, T>(args: &mut PgArguments, value: T) -> Result<String, StoreError>
where
    T: Encode<'q, Postgres> + Type<Postgres> + 'q,
{
    args.add(value)
        .map_err(|e| StoreError::Invalid(format!("cannot bind a query parameter: {e}")))?;
    Ok(format!("${}", args.len()))
}

impl ChunkFilters {
    /// The SQL conditions on chunks aliased `c`, binding their values.
    pub fn conditions(&self, args: &mut PgArguments) -> Result<String, StoreError> {
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
}

/// How the vector side finds its neighbours.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
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
    filters: &ChunkFilters,
    k: usize,
    strategy: VectorStrategy,
) -> Result<Nearest, StoreError> {
    let strategy = plan(tx, filters, k, strategy).await?;
    search_planned(tx, embedding, filters, k, strategy).await
}

/// Resolves `Auto` by counting the scope, and readies the transaction for
/// an index scan when one may run.
pub async fn plan(
    tx: &mut ScopedTx,
    filters: &ChunkFilters,
    k: usize,
    strategy: VectorStrategy,
) -> Result<VectorStrategy, StoreError> {
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

/// Runs a strategy [`plan`] chose.
pub async fn search_planned(
    tx: &mut ScopedTx,
    embedding: &[f32],
    filters: &ChunkFilters,
    k: usize,
    strategy: VectorStrategy,
) -> Result<Nearest, StoreError> {
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
async fn configure_index_scan(tx: &mut ScopedTx, k: usize) -> Result<(), StoreError> {
    let ef_search = (2 * k).clamp(MIN_EF_SEARCH, MAX_EF_SEARCH);
    sqlx::query(
        "SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true),
                set_config('hnsw.ef_search', $1, true),
                set_config('hnsw.max_scan_tuples', $2, true)",
    )
    .bind(ef_search.to_string())
    .bind(MAX_SCAN_TUPLES.to_string())
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// Whether `filters` admit at most `max` chunks. Counting stops just past
/// `max`, so a huge scope costs no more to judge than a small one.
async fn in_scope_at_most(
    tx: &mut ScopedTx,
    filters: &ChunkFilters,
    max: i64,
) -> Result<bool, StoreError> {
    let mut args = PgArguments::default();
    let conditions = filters.conditions(&mut args)?;
    let cap = bind(&mut args, max + 1)?;
    let sql =
        format!("SELECT count(*) FROM (SELECT 1 FROM chunks c WHERE {conditions} LIMIT {cap}) t");
    let in_scope: i64 = sqlx::query_scalar_with(&sql, args)
        .fetch_one(&mut **tx)
        .await?;
    Ok(in_scope <= max)
}

/// Every chunk in scope compared with the query. The distances are
/// materialised before sorting so the planner cannot turn the sort into an
/// HNSW scan (which would bring back the filtered-out-neighbours problem).
async fn exact(
    tx: &mut ScopedTx,
    vector: &Vector,
    filters: &ChunkFilters,
    k: usize,
) -> Result<Vec<VectorHit>, StoreError> {
    let mut args = PgArguments::default();
    let q = bind(&mut args, vector.clone())?;
    let conditions = filters.conditions(&mut args)?;
    let limit = bind(&mut args, k as i64)?;
    let sql = format!(
        "WITH scored AS MATERIALIZED (
             SELECT c.id, c.embedding <=> {q} AS distance FROM chunks c WHERE {conditions})
         SELECT id, distance FROM scored ORDER BY distance, id LIMIT {limit}"
    );
    let rows: Vec<(i64, f64)> = sqlx::query_as_with(&sql, args).fetch_all(&mut **tx).await?;
    Ok(to_hits(rows))
}

/// The HNSW path, after [`configure_index_scan`]. Relaxed order may return
/// neighbours slightly out of order, so they are sorted again by distance.
async fn by_index(
    tx: &mut ScopedTx,
    vector: &Vector,
    filters: &ChunkFilters,
    k: usize,
) -> Result<Vec<VectorHit>, StoreError> {
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
    let rows: Vec<(i64, f64)> = sqlx::query_as_with(&sql, args).fetch_all(&mut **tx).await?;
    Ok(to_hits(rows))
}

fn to_hits(rows: Vec<(i64, f64)>) -> Vec<VectorHit> {
    rows.into_iter()
        .map(|(chunk_id, distance)| VectorHit { chunk_id, distance })
        .collect()
}

/// A chunk as search results show it, with its document and source.
#[derive(Debug, Serialize, JsonSchema)]
pub struct FoundChunk {
    #[serde(rename = "chunk_id")]
    pub id: i64,
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
crate::from_row!(FoundChunk {
    id,
    document_id,
    path,
    name,
    title,
    source_id,
    source,
    space_id,
    heading,
    page,
    char_start,
    char_end,
    text
});

/// Which of a search's narrowing filters exist in the spaces it covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FiltersFound {
    pub source: bool,
    pub document: bool,
    pub folder: bool,
}

/// Checks that the source, document and folder named by `filters` exist in
/// its spaces (a filter not given counts as found); a folder must lie in the
/// source when one is named.
pub async fn find_filters(
    tx: &mut ScopedTx,
    filters: &ChunkFilters,
) -> Result<FiltersFound, StoreError> {
    let (source, document, folder): (bool, bool, bool) = sqlx::query_as(
        "SELECT $2::uuid IS NULL OR EXISTS (SELECT 1 FROM sources WHERE id = $2 AND space_id = ANY($1)),
                $3::uuid IS NULL OR EXISTS (SELECT 1 FROM documents WHERE id = $3 AND space_id = ANY($1)),
                $4::text IS NULL OR EXISTS (SELECT 1 FROM folders
                                             WHERE path = $4 AND space_id = ANY($1)
                                               AND ($2::uuid IS NULL OR source_id = $2))",
    )
    .bind(&filters.spaces)
    .bind(filters.source_id)
    .bind(filters.document_id)
    .bind(&filters.folder)
    .fetch_one(&mut **tx)
    .await?;
    Ok(FiltersFound {
        source,
        document,
        folder,
    })
}

/// The chunks among `ids` that `filters` admit and row-level security lets
/// this transaction see, by id; an id missing from the answer is gone or out
/// of reach.
pub async fn found_chunks(
    tx: &mut ScopedTx,
    filters: &ChunkFilters,
    ids: Vec<i64>,
) -> Result<HashMap<i64, FoundChunk>, StoreError> {
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
    let rows: Vec<FoundChunk> = sqlx::query_as_with(&sql, args).fetch_all(&mut **tx).await?;
    Ok(rows.into_iter().map(|r| (r.id, r)).collect())
}

/// Whether `filters` admit any chunk at all.
pub async fn any_chunk(tx: &mut ScopedTx, filters: &ChunkFilters) -> Result<bool, StoreError> {
    let mut args = PgArguments::default();
    let conditions = filters.conditions(&mut args)?;
    let sql = format!("SELECT EXISTS (SELECT 1 FROM chunks c WHERE {conditions})");
    Ok(sqlx::query_scalar_with(&sql, args)
        .fetch_one(&mut **tx)
        .await?)
}
