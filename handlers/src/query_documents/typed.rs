//! The document's tables as typed relations: one CTE per table that turns the
//! JSONB rows back into columns of the kinds ingestion inferred, and the SQL
//! around a checked query that caps its rows and cells.
//!
//! Every cast is guarded so that an empty cell, a value of another kind or one
//! out of range becomes NULL instead of failing the whole query: ingestion
//! keeps a cell that does not fit its column's kind as a string, JSON numbers
//! can exceed bigint, and a date string can name a day PostgreSQL rejects.

use serde::Deserialize;
use uuid::Uuid;

/// A column kind as ingestion records it in doc_tables.columns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Integer,
    Number,
    Boolean,
    Date,
    #[serde(other)]
    Text,
}

impl Kind {
    /// The SQL type the column has in queries.
    pub fn sql_type(self) -> &'static str {
        match self {
            Kind::Integer => "bigint",
            Kind::Number => "numeric",
            Kind::Boolean => "boolean",
            Kind::Date => "date",
            Kind::Text => "text",
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
pub struct Column {
    pub name: String,
    pub kind: Kind,
}

/// One table of the document.
#[derive(Debug, Clone)]
pub struct Table {
    pub id: Uuid,
    pub name: String,
    pub columns: Vec<Column>,
    pub row_count: i32,
}

/// `"name"` with inner quotes doubled.
pub fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// `'text'` with inner quotes doubled (standard_conforming_strings is set on
/// for the transaction, so backslashes are plain characters).
pub fn quote_literal(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

/// The expression giving column `name` of kind `kind` from row `r`.
fn column_expr(name: &str, kind: Kind) -> String {
    let key = quote_literal(name);
    let json = format!("(r.data -> {key})");
    let text = format!("btrim(r.data ->> {key})");
    match kind {
        Kind::Text => format!("(r.data ->> {key})"),
        // Most cells are already stored as the kind says, so a cheap check on
        // the text comes first and the careful one only for the rest.
        Kind::Integer => format!(
            "CASE WHEN (r.data ->> {key}) ~ '^-?[0-9]{{1,18}}$' THEN (r.data ->> {key})::bigint \
             WHEN jsonb_typeof({json}) = 'number' THEN \
               CASE WHEN {json}::numeric = trunc({json}::numeric) \
                 AND {json}::numeric BETWEEN -9223372036854775808 AND 9223372036854775807 \
                 THEN {json}::numeric::bigint END \
             WHEN jsonb_typeof({json}) = 'string' THEN \
               CASE WHEN {text} ~ '^[+-]?[0-9]{{1,18}}$' THEN {text}::bigint END \
             END"
        ),
        Kind::Number => format!(
            "CASE jsonb_typeof({json}) \
             WHEN 'number' THEN {json}::numeric \
             WHEN 'string' THEN CASE WHEN {text} ~ '^[+-]?([0-9]+[.]?[0-9]*|[.][0-9]+)([eE][+-]?[0-9]{{1,3}})?$' \
               THEN {text}::numeric END \
             END"
        ),
        Kind::Boolean => format!(
            "CASE jsonb_typeof({json}) \
             WHEN 'boolean' THEN {json}::boolean \
             WHEN 'string' THEN CASE lower({text}) WHEN 'true' THEN true WHEN 'false' THEN false END \
             END"
        ),
        // YYYY-MM-DD, optionally followed by a time (RFC 3339): the date part.
        // Days 1 to 28 of any month of years 1 to 9999 are valid, which one
        // pattern can tell; the rest (unpadded numbers, the end of a month)
        // are checked with arithmetic first, so make_date never sees a month
        // 13 or a 30 February.
        Kind::Date => {
            let y = format!("split_part({text}, '-', 1)::int");
            let m = format!("split_part({text}, '-', 2)::int");
            let d = format!("rtrim(left(split_part({text}, '-', 3), 2), 'Tt ')::int");
            let leap = format!("({y} % 4 = 0 AND ({y} % 100 <> 0 OR {y} % 400 = 0))");
            format!(
                "CASE WHEN {text} ~ '^[0-9]{{4}}-(0[1-9]|1[0-2])-(0[1-9]|1[0-9]|2[0-8])([Tt ]|$)' \
                   AND left({text}, 4) <> '0000' THEN left({text}, 10)::date \
                 WHEN {text} ~ '^[0-9]{{4}}-[0-9]{{1,2}}-[0-9]{{1,2}}([Tt ]|$)' THEN \
                   CASE WHEN {y} >= 1 AND {m} BETWEEN 1 AND 12 AND {d} BETWEEN 1 AND \
                     CASE WHEN {m} = 2 THEN CASE WHEN {leap} THEN 29 ELSE 28 END \
                       WHEN {m} IN (4, 6, 9, 11) THEN 30 ELSE 31 END \
                   THEN make_date({y}, {m}, {d}) END \
                 END"
            )
        }
    }
}

/// `"name" AS (SELECT … FROM public.table_rows …)`: the table as typed rows in
/// file order.
fn table_cte(table: &Table) -> String {
    let columns = if table.columns.is_empty() {
        // A table without columns still has rows; keep it a valid relation.
        "NULL::text AS \"?column?\"".to_string()
    } else {
        table
            .columns
            .iter()
            .map(|c| {
                format!(
                    "{}::{} AS {}",
                    column_expr(&c.name, c.kind),
                    c.kind.sql_type(),
                    quote_ident(&c.name)
                )
            })
            .collect::<Vec<_>>()
            .join(",\n    ")
    };
    format!(
        "{} AS (\n  SELECT {columns}\n  FROM public.table_rows r\n  WHERE r.table_id = '{}'::uuid\n  ORDER BY r.row_number)",
        quote_ident(&table.name),
        table.id
    )
}

/// The WITH clause that defines every table of the document.
pub fn with_tables(tables: &[Table]) -> String {
    let ctes = tables.iter().map(table_cte).collect::<Vec<_>>().join(",\n");
    format!("WITH {ctes}")
}

/// One row of NULLs typed like the query's columns, to learn them without
/// running the query (LIMIT 0 stops before its first row).
pub fn probe(tables: &[Table], query: &str) -> String {
    format!(
        "{}\nSELECT q.* FROM (VALUES (1)) AS one(x) LEFT JOIN (SELECT * FROM (\n{query}\n) AS q0 \
         LIMIT 0) AS q ON true",
        with_tables(tables)
    )
}

/// The query to run: at most `limit` rows, each cell as JSON and cut to
/// `max_cell_chars` characters. The user's query sits in a subquery whose
/// columns are renamed by position, so duplicate or odd column names are no
/// trouble; PostgreSQL keeps a subquery's ORDER BY when nothing above it
/// reorders.
pub fn select_cells(
    tables: &[Table],
    query: &str,
    columns: usize,
    limit: u64,
    max_cell_chars: usize,
) -> String {
    let names: Vec<String> = (1..=columns).map(|i| format!("c{i}")).collect();
    let cells = names
        .iter()
        .map(|c| {
            format!(
                "CASE WHEN length(q.{c}::text) > {max_cell_chars} \
                 THEN to_jsonb(left(q.{c}::text, {max_cell_chars}) || '…') \
                 ELSE to_jsonb(q.{c}) END"
            )
        })
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        "{}\nSELECT {cells} FROM (\n{query}\n) AS q({}) LIMIT {limit}",
        with_tables(tables),
        names.join(", ")
    )
}

/// "cities (8 rows: city text, population bigint)", for error messages.
pub fn describe(tables: &[Table]) -> String {
    tables
        .iter()
        .map(|t| {
            let columns = t
                .columns
                .iter()
                .map(|c| format!("{} {}", show_ident(&c.name), c.kind.sql_type()))
                .collect::<Vec<_>>()
                .join(", ");
            format!("{} ({} rows: {columns})", show_ident(&t.name), t.row_count)
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// PostgreSQL's reserved key words (including those reserved except as
/// function or type names): a column named like one must be quoted.
const RESERVED: &[&str] = &[
    "all",
    "analyse",
    "analyze",
    "and",
    "any",
    "array",
    "as",
    "asc",
    "asymmetric",
    "authorization",
    "binary",
    "both",
    "case",
    "cast",
    "check",
    "collate",
    "collation",
    "column",
    "concurrently",
    "constraint",
    "create",
    "cross",
    "current_catalog",
    "current_date",
    "current_role",
    "current_schema",
    "current_time",
    "current_timestamp",
    "current_user",
    "default",
    "deferrable",
    "desc",
    "distinct",
    "do",
    "else",
    "end",
    "except",
    "false",
    "fetch",
    "for",
    "foreign",
    "freeze",
    "from",
    "full",
    "grant",
    "group",
    "having",
    "ilike",
    "in",
    "initially",
    "inner",
    "intersect",
    "into",
    "is",
    "isnull",
    "join",
    "lateral",
    "leading",
    "left",
    "like",
    "limit",
    "localtime",
    "localtimestamp",
    "natural",
    "not",
    "notnull",
    "null",
    "offset",
    "on",
    "only",
    "or",
    "order",
    "outer",
    "overlaps",
    "placing",
    "primary",
    "references",
    "returning",
    "right",
    "select",
    "session_user",
    "similar",
    "some",
    "symmetric",
    "system_user",
    "table",
    "tablesample",
    "then",
    "to",
    "trailing",
    "true",
    "union",
    "unique",
    "user",
    "using",
    "variadic",
    "verbose",
    "when",
    "where",
    "window",
    "with",
];

/// A name as a query must write it: bare when that folds to itself and is not
/// reserved, quoted otherwise.
pub fn show_ident(name: &str) -> String {
    let plain = name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c == '_')
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        && !RESERVED.contains(&name);
    if plain {
        name.to_string()
    } else {
        quote_ident(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_shown_as_a_query_must_write_them() {
        let check = |name: &str, shown: &str| assert_eq!(show_ident(name), shown, "name {name:?}");
        check("cities", "cities");
        check("_x1", "_x1");
        check("Odd Values", "\"Odd Values\"");
        check("Cities", "\"Cities\"");
        check("order", "\"order\"");
        check("user", "\"user\"");
        check("days", "days");
        check("1x", "\"1x\"");
        check("a\"b", "\"a\"\"b\"");
        check("", "\"\"");
    }

    #[test]
    fn literals_and_identifiers_double_their_quotes() {
        assert_eq!(quote_literal("it's"), "'it''s'");
        assert_eq!(quote_literal("back\\slash"), "'back\\slash'");
        assert_eq!(quote_ident("say \"hi\""), "\"say \"\"hi\"\"\"");
    }
}
