//! query_documents: one read-only SELECT over a document's tables, run as a
//! role that can read nothing else, under row-level security, a statement
//! timeout and caps on rows and size. See docs/query_documents.md for the
//! layers of defence and why each is there.

mod guard;
mod nl;
mod typed;

use std::time::Duration;

use data_plane_registry::{
    AnnotationHints, Callbacks, Category, CostTier, ErrorCode, Permission, RateLimits, ToolContext,
    ToolError, ToolMeta,
};
use data_plane_store::ScopedTx;
use futures::TryStreamExt;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sqlx::postgres::PgDatabaseError;
use sqlx::{Column as _, Executor as _, Row as _, TypeInfo as _};
use uuid::Uuid;

use crate::Deps;
use crate::deps::internal;
use typed::{Table, describe};

/// The arguments, as definitions/query_documents.json describes them.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Args {
    /// The document whose tables to query.
    pub document_id: Uuid,
    /// One PostgreSQL SELECT over the document's tables, each available by its name from document_info, columns typed by their kind (integer as bigint, number as numeric, boolean, date, text). It may define its own CTEs and use built-in aggregate, window, math, string, date and JSON functions; other tables and functions are refused.
    pub sql: Option<String>,
    /// A question in plain language, turned into SQL for you (needs a language model); give this or sql.
    pub question: Option<String>,
    /// Most rows to return; when the query yields more, the answer says it was truncated.
    pub max_rows: Option<u64>,
}

pub const META: ToolMeta = ToolMeta {
    category: Category::Document,
    short_description: "SQL or a question over a document's tables",
    available_when: "always",
    aliases: &["sql"],
    annotations: AnnotationHints::DERIVED,
    cost: CostTier::Moderate,
    permission: Permission::Guest,
    timeout: Duration::from_millis(20000),
    // Each call may keep a database connection busy for seconds and spill
    // to disk; admins raise or lift this with the tool_rate_limits setting.
    limits: RateLimits {
        cooldown: None,
        daily_limit: Some(2000),
    },
    requires_gate: false,
    defer_loading: false,
    tag: None,
};

pub fn available(_ctx: &ToolContext) -> bool {
    true
}

const NAME: &str = "query_documents";

const DEFAULT_MAX_ROWS: u64 = 100;
const MAX_ROWS: u64 = 1000;

/// Longest a query may run; well inside the tool's own timeout so the
/// database stops the work, not just the caller's wait.
const STATEMENT_TIMEOUT_SECS: u64 = 5;

/// Memory each sort or hash of the query may use before it spills to disk.
/// Set here so that a deployment's larger default does not apply to SQL
/// that users write.
const WORK_MEM: &str = "8MB";

/// Temporary disk space the query may fill. Spilling sorts, hashes and the
/// work tables of recursive CTEs count against it; PostgreSQL has no bound on
/// recursion depth, so this, the statement timeout and the result caps are
/// what stop a recursion that runs away.
const TEMP_FILE_LIMIT_MB: u64 = 128;

/// Longest cell, in characters, before it is cut and marked with '…'.
const MAX_CELL_CHARS: usize = 1000;

/// Most JSON the rows may take, so one answer cannot flood the model.
const MAX_RESULT_BYTES: usize = 128 * 1024;

/// What the transaction becomes before the caller's SQL reaches it: caps on
/// memory per operation and on temporary disk space, the role that may only
/// SELECT doc_tables, table_rows and memberships (and sees them through the
/// member policies only), a statement timeout, no writes, and fixed parsing
/// rules for what the guard printed. `SET LOCAL` ends with the transaction,
/// so the pooled connection carries nothing to the next request.
///
/// temp_file_limit is a superuser setting: the server's role may set it only
/// through `GRANT SET ON PARAMETER` (docker/initdb.sql; migration 0015 checks
/// it), and only before it switches to the query role, which may not.
fn restrict_sql() -> String {
    format!(
        "SET LOCAL temp_file_limit = '{TEMP_FILE_LIMIT_MB}MB'; \
         SET LOCAL work_mem = '{WORK_MEM}'; \
         SET LOCAL hash_mem_multiplier = 1; \
         SET LOCAL ROLE data_plane_query; \
         SET LOCAL statement_timeout = '{STATEMENT_TIMEOUT_SECS}s'; \
         SET LOCAL standard_conforming_strings = on; \
         SET LOCAL search_path = pg_catalog, public; \
         SET TRANSACTION READ ONLY"
    )
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct Output {
    pub document_id: Uuid,
    /// The question the SQL was written for, when one was asked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub question: Option<String>,
    /// The query as it ran (checked and printed back), without the wrapper
    /// that defines the tables.
    pub sql: String,
    pub columns: Vec<OutputColumn>,
    /// One array per row, cells in the order of `columns`.
    pub rows: Vec<Vec<Value>>,
    pub row_count: usize,
    /// More rows exist than are shown.
    pub truncated: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct OutputColumn {
    pub name: String,
    #[serde(rename = "type")]
    pub sql_type: String,
}

pub async fn run(
    deps: &Deps,
    args: Args,
    ctx: &ToolContext,
    _callbacks: &dyn Callbacks,
) -> Result<Output, ToolError> {
    let max_rows = args.max_rows.unwrap_or(DEFAULT_MAX_ROWS);
    let (sql, question) = match (args.sql, args.question) {
        (Some(sql), None) => (sql, None),
        (None, Some(question)) => {
            if !(1..=MAX_ROWS).contains(&max_rows) {
                return Err(max_rows_error(max_rows));
            }
            let Some(model) = deps.model() else {
                return Err(ToolError::new(
                    ErrorCode::NotAvailable,
                    "query_documents cannot answer a question: no language model is configured to \
                     turn it into sql (set OPENAI_BASE_URL and DATA_PLANE_MODEL); pass `sql` \
                     instead (one SELECT over the document's tables, see document_info for their \
                     names and columns)",
                ));
            };
            // Read what the model needs, then give the connection back
            // while it writes.
            let mut tx = deps.read(NAME, ctx).await?;
            let tables = document_tables(&mut tx, args.document_id, ctx).await?;
            let samples = nl::sample_rows(&mut tx, &tables).await?;
            if let Err(e) = tx.rollback().await {
                tracing::warn!(tool = NAME, error = %e, "rollback failed");
            }
            let sql = nl::write_sql(&model.settings.agent, &question, &tables, &samples).await?;
            (sql, Some(question))
        }
        (Some(_), Some(_)) => {
            return Err(ToolError::invalid(
                "give either `sql` or `question`, not both",
            ));
        }
        (None, None) => {
            return Err(ToolError::invalid(
                "give `sql` (one SELECT over the document's tables) or `question`",
            ));
        }
    };
    if !(1..=MAX_ROWS).contains(&max_rows) {
        return Err(max_rows_error(max_rows));
    }

    let mut tx = deps.read(NAME, ctx).await?;
    let tables = document_tables(&mut tx, args.document_id, ctx).await?;
    let (query, read) = guard::check_reading(&sql, &names(&tables)).map_err(|refusal| {
        ToolError::invalid(format!(
            "{}; the document's tables: {}",
            refusal.0,
            describe(&tables)
        ))
    })?;
    for table in &read {
        ctx.side_effect(format!("queried:{table}"));
    }
    let outcome = execute(&mut tx, &tables, &query, max_rows).await;
    // Nothing the query did may outlive it.
    if let Err(e) = tx.rollback().await {
        tracing::warn!(tool = NAME, error = %e, "rollback failed");
    }
    let (columns, rows, cut) = outcome?;
    let truncated = cut.is_some();
    let mut notes = Vec::new();
    match cut {
        Some(Cut::Rows) => notes.push(format!(
            "more than {max_rows} rows: only the first {max_rows} are shown; raise max_rows \
             (up to {MAX_ROWS}), aggregate, or page with LIMIT and OFFSET"
        )),
        Some(Cut::Size) => notes.push(format!(
            "the result passed {} KiB: only the first {} rows are shown; select fewer or \
             narrower columns, or fewer rows",
            MAX_RESULT_BYTES / 1024,
            rows.len()
        )),
        None => {}
    }
    if rows.iter().flatten().any(is_cut_cell) {
        notes.push(format!(
            "cells longer than {MAX_CELL_CHARS} characters are cut and end with '…'"
        ));
    }
    Ok(Output {
        document_id: args.document_id,
        question,
        sql: query,
        columns,
        row_count: rows.len(),
        rows,
        truncated,
        note: (!notes.is_empty()).then(|| notes.join("; ")),
    })
}

fn max_rows_error(max_rows: u64) -> ToolError {
    ToolError::invalid(format!(
        "max_rows {max_rows} is out of range; give 1 to {MAX_ROWS}"
    ))
}

fn names(tables: &[Table]) -> Vec<String> {
    tables.iter().map(|t| t.name.clone()).collect()
}

/// The tables of the document, read as the caller (row-level security): the
/// same "not found" whether the document does not exist or is out of reach.
async fn document_tables(
    tx: &mut ScopedTx,
    document_id: Uuid,
    ctx: &ToolContext,
) -> Result<Vec<Table>, ToolError> {
    type TableRow = (Option<Uuid>, Option<String>, Option<Value>, Option<i32>);
    let rows: Vec<TableRow> = sqlx::query_as(
        "SELECT t.id, t.name, t.columns, t.row_count
           FROM documents d LEFT JOIN doc_tables t ON t.document_id = d.id
          WHERE d.id = $1 AND ($2::uuid IS NULL OR d.space_id = $2)
          ORDER BY t.name",
    )
    .bind(document_id)
    .bind(ctx.space_id)
    .fetch_all(&mut **tx)
    .await
    .map_err(|e| internal(NAME, e))?;
    if rows.is_empty() {
        return Err(crate::document_info::not_found(document_id));
    }
    let mut tables = Vec::new();
    for (id, name, columns, row_count) in rows {
        let (Some(id), Some(name), Some(columns)) = (id, name, columns) else {
            continue;
        };
        let columns = serde_json::from_value(columns)
            .map_err(|e| internal(NAME, format!("doc_tables.columns of table {id}: {e}")))?;
        tables.push(Table {
            id,
            name,
            columns,
            row_count: row_count.unwrap_or(0),
        });
    }
    if tables.is_empty() {
        return Err(ToolError::invalid(format!(
            "document {document_id} has no tables: query_documents reads CSV, TSV and JSON \
             documents; use read_document or grep_documents for this one"
        )));
    }
    Ok(tables)
}

/// Why fewer rows are shown than the query produced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cut {
    Rows,
    Size,
}

type Executed = (Vec<OutputColumn>, Vec<Vec<Value>>, Option<Cut>);

/// Runs the checked query as the query role and reads at most `max_rows`
/// rows and `MAX_RESULT_BYTES` of JSON.
async fn execute(
    tx: &mut ScopedTx,
    tables: &[Table],
    query: &str,
    max_rows: u64,
) -> Result<Executed, ToolError> {
    let restrict = restrict_sql();
    (&mut **tx)
        .execute(sqlx::raw_sql(&restrict))
        .await
        .map_err(|e| internal(NAME, format!("restricting the transaction: {e}")))?;

    // The probe yields one row of NULLs typed like the query's columns
    // without running the query (LIMIT 0). It goes through the unnamed
    // statement, as the query does: users' SQL never becomes a named
    // prepared statement in the connection's cache.
    let probe = typed::probe(tables, query);
    let probed = sqlx::query(&probe)
        .persistent(false)
        .fetch_one(&mut **tx)
        .await
        .map_err(|e| database_error(e, tables))?;
    let columns: Vec<OutputColumn> = probed
        .columns()
        .iter()
        .map(|c| OutputColumn {
            name: c.name().to_string(),
            sql_type: type_name(c.type_info().name()),
        })
        .collect();
    if columns.is_empty() {
        return Err(ToolError::invalid(format!(
            "the query returns no columns; select at least one; the document's tables: {}",
            describe(tables)
        )));
    }

    let sql = typed::select_cells(tables, query, columns.len(), max_rows + 1, MAX_CELL_CHARS);
    let mut stream = sqlx::query(&sql).persistent(false).fetch(&mut **tx);
    let mut rows: Vec<Vec<Value>> = Vec::new();
    let mut bytes = 0usize;
    let mut cut = None;
    while let Some(row) = stream
        .try_next()
        .await
        .map_err(|e| database_error(e, tables))?
    {
        if rows.len() as u64 == max_rows {
            cut = Some(Cut::Rows);
            break;
        }
        let cells = (0..columns.len())
            .map(|i| {
                row.try_get::<Option<Value>, _>(i)
                    .map(Option::unwrap_or_default)
            })
            .collect::<Result<Vec<Value>, _>>()
            .map_err(|e| internal(NAME, e))?;
        let size = serde_json::to_string(&cells).map_or(0, |s| s.len());
        if bytes + size > MAX_RESULT_BYTES {
            cut = Some(Cut::Size);
            break;
        }
        bytes += size;
        rows.push(cells);
    }
    Ok((columns, rows, cut))
}

fn is_cut_cell(cell: &Value) -> bool {
    matches!(cell, Value::String(s) if s.ends_with('…') && s.chars().count() == MAX_CELL_CHARS + 1)
}

/// PostgreSQL's name for a type as sqlx reports it ("INT8" → "bigint").
fn type_name(sqlx_name: &str) -> String {
    let (base, array) = match sqlx_name.strip_suffix("[]") {
        Some(base) => (base, "[]"),
        None => (sqlx_name, ""),
    };
    let base = match base {
        "BOOL" => "boolean",
        "INT2" => "smallint",
        "INT4" => "integer",
        "INT8" => "bigint",
        "FLOAT4" => "real",
        "FLOAT8" => "double precision",
        "BPCHAR" => "character",
        "TIMESTAMPTZ" => "timestamp with time zone",
        "TIMETZ" => "time with time zone",
        other => return format!("{}{array}", other.to_ascii_lowercase()),
    };
    format!("{base}{array}")
}

/// A failure of the caller's query as a message the model can act on: what
/// PostgreSQL said, and the tables and columns it may use. Failures that are
/// not the query's fault stay internal.
fn database_error(error: sqlx::Error, tables: &[Table]) -> ToolError {
    let Some(db) = error.as_database_error() else {
        return internal(NAME, error);
    };
    let code = db.code().map(|c| c.into_owned()).unwrap_or_default();
    if code == "53400" && db.message().contains("temp_file_limit") {
        return ToolError::new(
            ErrorCode::InvalidArguments,
            format!(
                "the query needed more than {TEMP_FILE_LIMIT_MB} MiB of temporary disk space and \
                 was stopped; make it cheaper: filter or aggregate earlier, avoid cross joins, \
                 large sorts and unbounded recursion"
            ),
        );
    }
    if code == "57014" {
        return ToolError::new(
            ErrorCode::Timeout,
            format!(
                "the query ran longer than {STATEMENT_TIMEOUT_SECS} s and was stopped; make it \
                 cheaper: filter or aggregate earlier, avoid cross joins and unbounded recursion"
            ),
        );
    }
    // Syntax and access rules, data exceptions, cardinality, unsupported
    // features, program limits, resources, writes in a read-only transaction.
    let fixable = ["42", "22", "21", "0A", "54", "53", "25"];
    if !fixable.iter().any(|class| code.starts_with(class)) {
        return internal(NAME, error);
    }
    let mut message = format!("the query failed: {}", db.message());
    if let Some(pg) = db.try_downcast_ref::<PgDatabaseError>() {
        if let Some(detail) = pg.detail() {
            message.push_str(&format!(" ({detail})"));
        }
        if let Some(hint) = pg.hint() {
            message.push_str(&format!("; hint: {hint}"));
        }
    }
    message.push_str(&format!("; the document's tables: {}", describe(tables)));
    ToolError::invalid(message)
}
