//! query_documents over the real PostgreSQL: queries over alpha's cities.csv,
//! the row, size and time caps, odd cell values, and a table of attacks that
//! must each be refused and leave the database as it was, including attempts
//! to reach space beta's salaries.csv. The last test goes below the parse and
//! shows what the query role itself can and cannot read.

// Test helpers report failure by panicking, like the tests that call them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::{Duration, Instant};

use common::World;
use data_plane_registry::{ErrorCode, ToolContext, ToolResult};
use data_plane_store::Scope;
use data_plane_store::content::{self, NewDocument, NewTable};
use serde_json::{Value, json};
use uuid::Uuid;

const CITIES: &str = "alpha/data/cities.csv";

/// The columns of cities.csv as every error message lists them.
const CITIES_TABLE: &str =
    "cities (8 rows: city text, country text, population bigint, founded bigint)";

async fn query(w: &World, ctx: &ToolContext, document: Uuid, args: Value) -> ToolResult {
    let mut args = args;
    args["document_id"] = json!(document);
    w.call("query_documents", args, ctx).await
}

/// Runs each (sql, expected rows) over cities.csv as alice and reports every
/// case that differs, not only the first.
async fn check_rows(w: &World, cases: &[(&str, Value)]) {
    let alice = w.ctx(w.alice, Some(w.alpha));
    let mut failures = Vec::new();
    for (sql, expected) in cases {
        let r = query(w, &alice, w.doc(CITIES), json!({ "sql": sql })).await;
        match (&r.data, &r.error) {
            (Some(data), _) if &data["rows"] == expected => {}
            (Some(data), _) => failures.push(format!(
                "{sql}\n  expected {expected}\n  got      {}",
                data["rows"]
            )),
            (None, error) => failures.push(format!("{sql}\n  failed: {error:?}")),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[tokio::test]
async fn select_queries_over_cities_return_their_rows() {
    let w = World::new().await;
    check_rows(
        &w,
        &[
            ("SELECT count(*) FROM cities", json!([[8]])),
            (
                "SELECT sum(population), min(founded), max(founded) FROM cities",
                json!([[17830741, -1200, 1300]]),
            ),
            (
                "SELECT avg(population) FROM cities",
                json!([[2228842.625]]),
            ),
            (
                "SELECT round(avg(population) / 1000000, 2) AS millions FROM cities",
                json!([[2.23]]),
            ),
            (
                "SELECT city FROM cities WHERE population > 3000000 ORDER BY city",
                json!([["Berlin"], ["Madrid"]]),
            ),
            (
                "SELECT city FROM cities WHERE founded < 0 AND country <> 'Italy' ORDER BY founded",
                json!([["Lisbon"], ["Paris"]]),
            ),
            (
                "SELECT country, population FROM cities ORDER BY population DESC LIMIT 2",
                json!([["Germany", 3850809], ["Spain", 3332035]]),
            ),
            (
                "SELECT city FROM cities ORDER BY founded LIMIT 2 OFFSET 1",
                json!([["Rome"], ["Paris"]]),
            ),
            (
                "SELECT founded < 0 AS ancient, count(*), sum(population) FROM cities GROUP BY 1 ORDER BY 1",
                json!([[false, 5, 12435311], [true, 3, 5395430]]),
            ),
            (
                "WITH big AS (SELECT * FROM cities WHERE population > 2000000) \
                 SELECT count(*), min(city) FROM big",
                json!([[5, "Berlin"]]),
            ),
            (
                "SELECT count(*) FILTER (WHERE founded < 0) AS bc FROM cities",
                json!([[3]]),
            ),
            (
                "SELECT string_agg(city, ', ' ORDER BY city) FROM cities WHERE founded < 0",
                json!([["Lisbon, Paris, Rome"]]),
            ),
            (
                "SELECT city, rank() OVER (ORDER BY population DESC) FROM cities ORDER BY 2 LIMIT 3",
                json!([["Berlin", 1], ["Madrid", 2], ["Rome", 3]]),
            ),
            (
                "SELECT city FROM cities WHERE population = (SELECT max(population) FROM cities)",
                json!([["Berlin"]]),
            ),
            (
                "SELECT upper(city), CASE WHEN founded < 0 THEN 'BC' ELSE 'AD' END \
                 FROM cities WHERE country ILIKE 'ital%'",
                json!([["ROME", "BC"]]),
            ),
            (
                "SELECT CAST(population AS text) || ' people' FROM cities WHERE city = 'Lisbon'",
                json!([["545796 people"]]),
            ),
            (
                "SELECT a.city, b.city FROM cities a JOIN cities b \
                 ON a.country = b.country AND a.city < b.city",
                json!([]),
            ),
            ("SELECT COUNT(*) FROM CITIES", json!([[8]])),
            (
                "SELECT array_length(ARRAY(SELECT city FROM cities), 1)",
                json!([[8]]),
            ),
            ("SELECT unnest(ARRAY['a', 'b'])", json!([["a"], ["b"]])),
            ("SELECT count(*) FROM \"cities\"", json!([[8]])),
            (
                "SELECT count(*) FROM cities; -- a trailing comment",
                json!([[8]]),
            ),
            (
                "SELECT city, city FROM cities WHERE city LIKE 'W%'",
                json!([["Warsaw", "Warsaw"]]),
            ),
            (
                "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY founded) FROM cities",
                json!([[867.5]]),
            ),
            (
                "SELECT city FROM cities WHERE country IN (SELECT country FROM cities WHERE founded > 1200) ORDER BY 1",
                json!([["Berlin"], ["Warsaw"]]),
            ),
            (
                "SELECT date_part('year', DATE '2024-03-01') - founded AS age FROM cities WHERE city = 'Warsaw'",
                json!([[724]]),
            ),
            (
                "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 3) \
                 SELECT sum(population * i) FROM cities, n WHERE city = 'Rome'",
                json!([[16481904]]),
            ),
        ],
    )
    .await;
}

#[tokio::test]
async fn results_carry_typed_columns_the_sql_that_ran_and_caps() {
    let w = World::new().await;
    let alice = w.ctx(w.alice, None);
    let cities = w.doc(CITIES);

    let data = w
        .ok(
            "query_documents",
            json!({ "document_id": cities, "sql": "select * from cities -- all of it\nlimit 1;" }),
            &alice,
        )
        .await;
    assert_eq!(
        data["columns"],
        json!([
            { "name": "city", "type": "text" },
            { "name": "country", "type": "text" },
            { "name": "population", "type": "bigint" },
            { "name": "founded", "type": "bigint" },
        ])
    );
    assert_eq!(data["rows"], json!([["Berlin", "Germany", 3850809, 1237]]));
    assert_eq!(data["sql"], "SELECT * FROM cities LIMIT 1");
    assert_eq!(data["row_count"], 1);
    assert_eq!(data["truncated"], false);
    assert!(data.get("note").is_none(), "{data}");

    let data = w
        .ok(
            "query_documents",
            json!({ "document_id": cities, "sql": "SELECT avg(population) AS mean, founded < 0 AS bc, DATE '2024-01-31' + 1 AS d FROM cities GROUP BY 2 ORDER BY 2" }),
            &alice,
        )
        .await;
    assert_eq!(
        data["columns"],
        json!([
            { "name": "mean", "type": "numeric" },
            { "name": "bc", "type": "boolean" },
            { "name": "d", "type": "date" },
        ])
    );
    assert_eq!(data["rows"][0][2], "2024-02-01");

    // (sql, max_rows, rows shown, truncated)
    let cases: &[(&str, Option<u64>, usize, bool)] = &[
        ("SELECT city FROM cities ORDER BY city", None, 8, false),
        ("SELECT city FROM cities ORDER BY city", Some(8), 8, false),
        ("SELECT city FROM cities ORDER BY city", Some(3), 3, true),
        ("SELECT city FROM cities ORDER BY city", Some(1), 1, true),
        (
            "SELECT city FROM cities ORDER BY city LIMIT 2",
            Some(5),
            2,
            false,
        ),
        ("SELECT a.city FROM cities a, cities b", None, 64, false),
        (
            "SELECT a.city FROM cities a, cities b, cities c",
            None,
            100,
            true,
        ),
        (
            "SELECT a.city FROM cities a, cities b, cities c, cities d",
            Some(1000),
            1000,
            true,
        ),
    ];
    let mut failures = Vec::new();
    for &(sql, max_rows, shown, truncated) in cases {
        let mut args = json!({ "sql": sql });
        if let Some(n) = max_rows {
            args["max_rows"] = json!(n);
        }
        let r = query(&w, &alice, cities, args).await;
        let Some(data) = r.data else {
            failures.push(format!("{sql} ({max_rows:?}): {:?}", r.error));
            continue;
        };
        let rows = data["rows"].as_array().unwrap().len();
        if rows != shown || data["row_count"] != shown || data["truncated"] != truncated {
            failures.push(format!(
                "{sql} ({max_rows:?}): {rows} rows, row_count {}, truncated {}; expected {shown}, {truncated}",
                data["row_count"], data["truncated"]
            ));
        }
        if truncated && !data["note"].as_str().unwrap_or("").contains("max_rows") {
            failures.push(format!("{sql}: no note about max_rows in {data}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // The first rows in the query's own order, not any others.
    let data = w
        .ok(
            "query_documents",
            json!({ "document_id": cities, "sql": "SELECT city FROM cities ORDER BY population", "max_rows": 2 }),
            &alice,
        )
        .await;
    assert_eq!(data["rows"], json!([["Lisbon"], ["Prague"]]));

    // A long cell is cut and marked; a big result stops at the size cap.
    let long =
        "SELECT string_agg(a.city || b.city || c.city, ',') FROM cities a, cities b, cities c";
    let data = w
        .ok(
            "query_documents",
            json!({ "document_id": cities, "sql": long }),
            &alice,
        )
        .await;
    let cell = data["rows"][0][0].as_str().unwrap();
    assert_eq!(cell.chars().count(), 1001, "{cell}");
    assert!(cell.ends_with('…'));
    assert!(data["note"].as_str().unwrap().contains("cut"), "{data}");

    let wide = format!("SELECT ({long}) FROM cities a, cities b, cities c");
    let data = w
        .ok(
            "query_documents",
            json!({ "document_id": cities, "sql": wide, "max_rows": 1000 }),
            &alice,
        )
        .await;
    let rows = data["rows"].as_array().unwrap().len();
    assert!((100..512).contains(&rows), "{rows} rows");
    assert_eq!(data["truncated"], true);
    assert!(
        data["note"].as_str().unwrap().contains("128 KiB"),
        "{}",
        data["note"]
    );
    assert!(serde_json::to_string(&data["rows"]).unwrap().len() <= 128 * 1024);
}

/// Counts and checksums of everything a query could conceivably change, read
/// as the system (row-level security shows the system every row).
async fn fingerprint(w: &World) -> Vec<(String, i64, String)> {
    let mut tx = w.deps.db.begin(Scope::System).await.unwrap();
    let mut out = Vec::new();
    for table in [
        "users",
        "spaces",
        "memberships",
        "sources",
        "folders",
        "documents",
        "chunks",
        "doc_tables",
        "table_rows",
        "settings",
        "index_log",
    ] {
        let (count, sum): (i64, String) = sqlx::query_as(&format!(
            "SELECT count(*), md5(coalesce(string_agg(t::text, '|' ORDER BY t::text), '')) FROM {table} t"
        ))
        .fetch_one(&mut *tx)
        .await
        .unwrap();
        out.push((table.to_string(), count, sum));
    }
    let (relations, objects): (String, i64) = sqlx::query_as(
        "SELECT (SELECT string_agg(relname::text, ',' ORDER BY relname) FROM pg_class
                  WHERE relnamespace = 'public'::regnamespace),
                (SELECT count(*) FROM pg_largeobject_metadata)",
    )
    .fetch_one(&mut *tx)
    .await
    .unwrap();
    out.push(("relations".into(), objects, relations));
    tx.rollback().await.unwrap();
    out
}

/// The id of beta's salaries table, as someone guessing it might have it.
async fn beta_table_id(w: &World) -> Uuid {
    let mut tx = w.deps.db.begin(Scope::System).await.unwrap();
    let id = sqlx::query_scalar("SELECT id FROM doc_tables WHERE document_id = $1")
        .bind(w.doc("beta/data/salaries.csv"))
        .fetch_one(&mut *tx)
        .await
        .unwrap();
    tx.rollback().await.unwrap();
    id
}

#[tokio::test]
async fn attacks_are_refused_and_change_nothing() {
    let w = World::new().await;
    let before = fingerprint(&w).await;
    let beta_table = beta_table_id(&w).await;
    let guess = format!("SELECT * FROM table_rows WHERE table_id = '{beta_table}'");
    let guess_in_subquery = format!(
        "SELECT city, (SELECT data ->> 'salary' FROM table_rows WHERE table_id = '{beta_table}' LIMIT 1) FROM cities"
    );
    let deep = format!("SELECT {}1 FROM cities", "1+".repeat(4_000));
    let nested = format!("SELECT {}1{}", "(".repeat(300), ")".repeat(300));

    // (sql, words the refusal must contain)
    let attacks: &[(&str, &str)] = &[
        (
            "INSERT INTO cities VALUES ('Oslo', 'Norway', 709037, 1040)",
            "not INSERT",
        ),
        ("UPDATE cities SET population = 0", "not UPDATE"),
        ("DELETE FROM cities", "not DELETE"),
        ("DROP TABLE documents", "not DROP"),
        ("TRUNCATE table_rows", "not TRUNCATE"),
        ("COPY table_rows TO '/tmp/stolen.csv'", "not COPY"),
        ("COPY (SELECT 1) TO PROGRAM 'id'", "not COPY"),
        ("CREATE TABLE stolen AS SELECT * FROM cities", "not CREATE"),
        (
            "ALTER TABLE documents DISABLE ROW LEVEL SECURITY",
            "not ALTER",
        ),
        ("GRANT ALL ON documents TO PUBLIC", "not GRANT"),
        ("SET ROLE data_plane_app", "not SET"),
        ("SET data_plane.system = 'on'", "not SET"),
        ("RESET ROLE", "not RESET"),
        ("CALL do_harm()", "not CALL"),
        ("EXPLAIN ANALYZE SELECT * FROM documents", "not EXPLAIN"),
        ("COMMIT", "not COMMIT"),
        ("SELECT 1; SELECT 2", "2 statements"),
        (
            "SELECT count(*) FROM cities; DROP TABLE documents",
            "2 statements",
        ),
        ("SELECT 1; COMMIT; DELETE FROM table_rows", "3 statements"),
        (
            "WITH gone AS (DELETE FROM table_rows RETURNING *) SELECT count(*) FROM gone",
            "DELETE changes data",
        ),
        (
            "WITH moved AS (UPDATE table_rows SET space_id = space_id RETURNING 1) SELECT 1",
            "UPDATE changes data",
        ),
        ("SELECT * FROM cities FOR UPDATE", "FOR UPDATE"),
        ("SELECT * FROM cities FOR SHARE SKIP LOCKED", "FOR UPDATE"),
        ("SELECT * INTO stolen FROM cities", "SELECT INTO"),
        (
            "SELECT set_config('data_plane.system', 'on', true)",
            "function set_config is not allowed",
        ),
        (
            "SELECT city FROM cities WHERE set_config('role', 'data_plane_app', true) IS NOT NULL",
            "function set_config is not allowed",
        ),
        (
            "SELECT current_setting('data_plane.user_id')",
            "function current_setting is not allowed",
        ),
        ("SELECT pg_sleep(10)", "function pg_sleep is not allowed"),
        (
            "SELECT city FROM cities ORDER BY pg_sleep_for('10 seconds')",
            "function pg_sleep_for is not allowed",
        ),
        (
            "SELECT pg_read_file('/etc/passwd')",
            "function pg_read_file is not allowed",
        ),
        (
            "SELECT pg_read_binary_file('/etc/passwd')",
            "function pg_read_binary_file is not allowed",
        ),
        ("SELECT pg_ls_dir('.')", "function pg_ls_dir is not allowed"),
        (
            "SELECT lo_import('/etc/passwd')",
            "function lo_import is not allowed",
        ),
        (
            "SELECT lo_export(1, '/tmp/x')",
            "function lo_export is not allowed",
        ),
        (
            "SELECT * FROM dblink('dbname=postgres', 'SELECT 1') AS t(a int)",
            "table functions",
        ),
        (
            "SELECT dblink_exec('dbname=postgres', 'DROP TABLE documents')",
            "function dblink_exec is not allowed",
        ),
        (
            "SELECT pg_advisory_lock(1)",
            "function pg_advisory_lock is not allowed",
        ),
        (
            "SELECT txid_current()",
            "function txid_current is not allowed",
        ),
        (
            "SELECT pg_terminate_backend(pg_backend_pid())",
            "function pg_terminate_backend is not allowed",
        ),
        (
            "SELECT query_to_xml('SELECT * FROM documents', true, true, '')",
            "function query_to_xml is not allowed",
        ),
        (
            "SELECT nextval('chunks_id_seq')",
            "function nextval is not allowed",
        ),
        ("SELECT version()", "function version is not allowed"),
        (
            "SELECT current_user",
            "function current_user is not allowed",
        ),
        (
            "SELECT generate_series(1, 100000000)",
            "function generate_series is not allowed",
        ),
        ("SELECT * FROM generate_series(1, 10)", "table functions"),
        (
            "SELECT * FROM cities, LATERAL unnest(ARRAY[1, 2])",
            "table functions",
        ),
        (
            "SELECT repeat('x', 1000000000)",
            "function repeat is not allowed",
        ),
        ("SELECT * FROM documents", "unknown table documents"),
        ("SELECT * FROM users", "unknown table users"),
        ("SELECT * FROM memberships", "unknown table memberships"),
        ("SELECT * FROM table_rows", "unknown table table_rows"),
        ("SELECT * FROM doc_tables", "unknown table doc_tables"),
        ("SELECT * FROM chunks", "unknown table chunks"),
        ("SELECT * FROM pg_tables", "unknown table pg_tables"),
        (
            "SELECT * FROM pg_catalog.pg_tables",
            "schema-qualified table pg_catalog.pg_tables",
        ),
        (
            "SELECT * FROM information_schema.tables",
            "schema-qualified table information_schema.tables",
        ),
        (
            "SELECT * FROM public.cities",
            "schema-qualified table public.cities",
        ),
        ("SELECT * FROM public.documents", "schema-qualified table"),
        (
            "SELECT public.documents.content FROM cities",
            "schema-qualified name",
        ),
        (
            "SELECT (SELECT count(*) FROM documents)",
            "unknown table documents",
        ),
        (
            "SELECT city FROM cities WHERE EXISTS (SELECT 1 FROM memberships)",
            "unknown table memberships",
        ),
        (
            "SELECT c.city FROM cities c JOIN table_rows t ON true",
            "unknown table table_rows",
        ),
        (
            "WITH mine AS (SELECT 1) SELECT * FROM mine, documents",
            "unknown table documents",
        ),
        (
            "WITH a AS (SELECT * FROM users), users AS (SELECT 1) SELECT * FROM a",
            "unknown table users",
        ),
        ("SELECT * FROM salaries", "unknown table salaries"),
        (
            "SELECT city FROM cities, salaries",
            "unknown table salaries",
        ),
        (&guess, "unknown table table_rows"),
        (&guess_in_subquery, "unknown table table_rows"),
        ("SELECT 'documents'::regclass", "casting to regclass"),
        ("SELECT CAST('pg_sleep' AS regproc)", "casting to regproc"),
        ("SELECT $1", "parameters"),
        ("SELECT 1 OPERATOR(pg_catalog.+) 1", "operator"),
        (&deep, "nests too deeply"),
        (&nested, "does not parse"),
        ("SELECT * FROM cities WHERE", "does not parse"),
        ("SELECT U&'\\0031'", "not supported"),
        (
            "SELECT current_schema",
            "current_schema names the session's",
        ),
        (
            "SELECT city FROM cities WHERE country <> session_user",
            "function session_user",
        ),
        (
            "SELECT city FROM cities UNION SELECT content FROM documents",
            "unknown table documents",
        ),
        (
            "SELECT * FROM (SELECT * FROM users) u",
            "unknown table users",
        ),
        ("SELECT * FROM \"documents\"", "unknown table \"documents\""),
        (
            "WITH cities AS (SELECT * FROM documents) SELECT * FROM cities",
            "unknown table documents",
        ),
        (
            "SELECT * FROM cities AS documents, documents",
            "unknown table documents",
        ),
        (
            "SELECT * FROM cities c, LATERAL (SELECT * FROM c) x",
            "unknown table c",
        ),
        (
            "WITH RECURSIVE documents AS (SELECT * FROM documents) SELECT 1",
            "does not have the form non-recursive-term UNION",
        ),
        ("  ", "no statement"),
    ];
    let alice = w.ctx(w.alice, Some(w.alpha));
    let mut failures = Vec::new();
    for (sql, expected) in attacks {
        let r = query(&w, &alice, w.doc(CITIES), json!({ "sql": sql })).await;
        let shown = format!("{r:?}");
        let refused_well = !r.success
            && r.code() == Some(ErrorCode::InvalidArguments)
            && r.error
                .as_ref()
                .is_some_and(|e| e.message.contains(expected) && e.message.contains(CITIES_TABLE));
        if !refused_well {
            failures.push(format!(
                "{sql}\n  expected a refusal with {expected:?}\n  got {shown}"
            ));
        }
        if shown.contains("120000") || shown.contains("salary") && !sql.contains("salary") {
            failures.push(format!("{sql}\n  leaked beta's data: {shown}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert_eq!(
        fingerprint(&w).await,
        before,
        "an attack changed the database"
    );
}

#[tokio::test]
async fn another_space_stays_out_of_reach() {
    let w = World::new().await;
    let salaries = w.doc("beta/data/salaries.csv");
    let sql = json!({ "sql": "SELECT * FROM salaries" });
    for ctx in [
        w.ctx(w.alice, None),
        w.ctx(w.alice, Some(w.alpha)),
        w.ctx(w.alice, Some(w.beta)),
        w.ctx(w.carol, None),
    ] {
        let r = query(&w, &ctx, salaries, sql.clone()).await;
        assert_eq!(r.code(), Some(ErrorCode::NotFound), "{r:?}");
        assert!(!format!("{r:?}").contains("120000"));
    }
    // A member of beta reads it; outside the space's context it is still not found.
    let bob = w.ctx(w.bob, Some(w.beta));
    let data = w
        .ok(
            "query_documents",
            json!({ "document_id": salaries, "sql": "SELECT name, salary FROM salaries ORDER BY salary DESC" }),
            &bob,
        )
        .await;
    assert_eq!(data["rows"], json!([["Alice", 120000], ["Bob", 95000]]));
    let r = query(&w, &w.ctx(w.bob, Some(w.alpha)), salaries, sql.clone()).await;
    assert_eq!(r.code(), Some(ErrorCode::NotFound), "{r:?}");
}

/// Opens a transaction as `user` (optionally claiming to be the system), then
/// switches to the query role exactly as the tool does, and runs `sql`.
async fn as_query_role(
    w: &World,
    user: Uuid,
    claim_system: bool,
    sql: &str,
) -> Result<Vec<(i64,)>, sqlx::Error> {
    let mut tx = w.test.db.pool().begin().await.unwrap();
    sqlx::query(
        "SELECT set_config('data_plane.user_id', $1, true), set_config('data_plane.system', $2, true)",
    )
    .bind(user.to_string())
    .bind(if claim_system { "on" } else { "off" })
    .execute(&mut *tx)
    .await
    .unwrap();
    sqlx::query("SET LOCAL ROLE data_plane_query")
        .execute(&mut *tx)
        .await
        .unwrap();
    let result = sqlx::query_as(sql).fetch_all(&mut *tx).await;
    tx.rollback().await.unwrap();
    result
}

#[tokio::test]
async fn the_query_role_reads_only_tabular_data_of_the_callers_spaces() {
    let w = World::new().await;
    let beta_table = beta_table_id(&w).await;

    // What the parse keeps away is also refused by the role's grants.
    for table in [
        "documents",
        "users",
        "spaces",
        "sources",
        "folders",
        "chunks",
        "settings",
        "tool_calls",
        "rate_limits",
        "index_log",
    ] {
        for system in [false, true] {
            let error = as_query_role(
                &w,
                w.alice,
                system,
                &format!("SELECT count(*) FROM {table}"),
            )
            .await
            .expect_err(table);
            let code = error.as_database_error().and_then(|e| e.code());
            assert_eq!(code.as_deref(), Some("42501"), "{table}: {error}");
        }
    }
    for write in [
        "INSERT INTO table_rows (table_id, space_id, row_number, data) SELECT table_id, space_id, 999, data FROM table_rows LIMIT 1 RETURNING 1::bigint",
        "UPDATE table_rows SET data = '{}' RETURNING 1::bigint",
        "DELETE FROM table_rows RETURNING 1::bigint",
        "UPDATE memberships SET role = 'owner' RETURNING 1::bigint",
    ] {
        let error = as_query_role(&w, w.alice, false, write)
            .await
            .expect_err(write);
        let code = error.as_database_error().and_then(|e| e.code());
        assert_eq!(code.as_deref(), Some("42501"), "{write}: {error}");
    }

    // The tabular data it may read is filtered by the member policies only:
    // claiming to be the system changes nothing.
    let count = |user: Uuid, system: bool, sql: String| {
        let w = &w;
        async move { as_query_role(w, user, system, &sql).await.unwrap()[0].0 }
    };
    let beta_rows = format!("SELECT count(*) FROM table_rows WHERE table_id = '{beta_table}'");
    let beta_tables = format!("SELECT count(*) FROM doc_tables WHERE id = '{beta_table}'");
    for system in [false, true] {
        assert_eq!(
            count(w.alice, system, "SELECT count(*) FROM table_rows".into()).await,
            8
        );
        assert_eq!(count(w.alice, system, beta_rows.clone()).await, 0);
        assert_eq!(count(w.alice, system, beta_tables.clone()).await, 0);
        assert_eq!(
            count(w.alice, system, "SELECT count(*) FROM memberships".into()).await,
            1
        );
        assert_eq!(
            count(w.carol, system, "SELECT count(*) FROM table_rows".into()).await,
            0
        );
        assert_eq!(count(w.bob, system, beta_rows.clone()).await, 2);
    }
    // The same claim as the server's own role does see beta: the zeros above
    // are the query role's doing.
    let mut tx = w.deps.db.begin(Scope::System).await.unwrap();
    let seen: i64 = sqlx::query_scalar(&beta_rows)
        .fetch_one(&mut *tx)
        .await
        .unwrap();
    tx.rollback().await.unwrap();
    assert_eq!(seen, 2);
}

#[tokio::test]
async fn a_query_that_runs_too_long_is_stopped_by_the_statement_timeout() {
    let w = World::new().await;
    let alice = w.ctx(w.alice, Some(w.alpha));
    // 4096 rows, each hashing a padded megabyte: work in memory, row by row,
    // that nothing but time stops (big joins and recursions fill the disk cap
    // first: see the next test).
    for sql in [
        "SELECT count(DISTINCT md5(format('%1000000s', a.city || b.city || c.city || d.city))) \
         FROM cities a, cities b, cities c, cities d",
        "SELECT max(length(regexp_replace(format('%1000000s', a.city || b.city), ' ', 'x', 'g'))) \
         FROM cities a, cities b, cities c, cities d",
    ] {
        let started = Instant::now();
        let r = query(&w, &alice, w.doc(CITIES), json!({ "sql": sql })).await;
        let took = started.elapsed();
        assert_eq!(r.code(), Some(ErrorCode::Timeout), "{sql}: {r:?}");
        let message = r.error.unwrap().message;
        assert!(message.contains("longer than 5 s"), "{message}");
        assert!(
            took >= Duration::from_secs(5) && took < Duration::from_secs(15),
            "{sql} took {took:?}"
        );
    }
    // The connection it ran on is fine afterwards.
    let data = w
        .ok(
            "query_documents",
            json!({ "document_id": w.doc(CITIES), "sql": "SELECT count(*) FROM cities" }),
            &alice,
        )
        .await;
    assert_eq!(data["rows"], json!([[8]]));
}

/// Queries that would fill memory or disk: each is stopped by PostgreSQL
/// (temp_file_limit, the statement timeout, the 1 GB value limit) well
/// before it gets there, with a message that says what to change.
#[tokio::test]
async fn queries_that_would_fill_memory_or_disk_are_stopped() {
    let w = World::new().await;
    let alice = w.ctx(w.alice, Some(w.alpha));
    let cases = [
        (
            "a recursive cte doubling a string towards 512 MiB",
            "WITH RECURSIVE r(s) AS (SELECT city FROM cities WHERE city = 'Rome' \
             UNION ALL SELECT s || s FROM r WHERE length(s) < 512 * 1024 * 1024) \
             SELECT max(length(s)) FROM r",
        ),
        (
            "a recursion that counts forever",
            "WITH RECURSIVE forever(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM forever) \
             SELECT count(*) FROM forever",
        ),
        (
            "a cross join of 8^10 rows, counted",
            "SELECT count(*) FROM cities a, cities b, cities c, cities d, cities e, \
             cities f, cities g, cities h, cities i, cities j",
        ),
        (
            "a sorted cross join of 8^8 rows",
            "SELECT a.city, b.city, c.city, d.city, e.city, f.city, g.city, h.city \
             FROM cities a, cities b, cities c, cities d, cities e, cities f, cities g, \
             cities h ORDER BY md5(a.city || b.city || c.city || d.city || e.city || f.city \
             || g.city || h.city)",
        ),
    ];
    let mut failures = Vec::new();
    for (what, sql) in cases {
        let started = Instant::now();
        let r = query(&w, &alice, w.doc(CITIES), json!({ "sql": sql })).await;
        let took = started.elapsed();
        let error = r.error.clone().map(|e| e.message).unwrap_or_default();
        println!("{what}: stopped after {took:.2?}: {error}");
        let stopped = !r.success
            && (error.contains("MiB of temporary disk space") || error.contains("longer than 5 s"));
        if !stopped || took > Duration::from_secs(8) {
            failures.push(format!("{what} ({took:.2?}): {r:?}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // The string cases are stopped by the disk cap, not the clock.
    let r = query(&w, &alice, w.doc(CITIES), json!({ "sql": cases[0].1 })).await;
    assert_eq!(r.code(), Some(ErrorCode::InvalidArguments), "{r:?}");
    assert!(
        r.error
            .unwrap()
            .message
            .contains("128 MiB of temporary disk space"),
        "the disk cap should stop the doubling string"
    );
}

/// Users' SQL never becomes a named prepared statement: each distinct query
/// would otherwise stay in the connection's statement cache.
#[tokio::test]
async fn user_queries_leave_no_prepared_statements_behind() {
    let w = World::new().await;
    let alice = w.ctx(w.alice, Some(w.alpha));
    for i in 0..12 {
        let sql = format!("SELECT count(*) + {i} AS marker_{i} FROM cities");
        let data = w
            .ok(
                "query_documents",
                json!({ "document_id": w.doc(CITIES), "sql": sql }),
                &alice,
            )
            .await;
        assert_eq!(data["rows"], json!([[8 + i]]));
    }
    // Hold every connection of the pool at once, so each one is looked at.
    let pool = w.test.db.pool();
    let mut connections = Vec::new();
    while connections.len() < pool.options().get_max_connections() as usize {
        connections.push(pool.acquire().await.unwrap());
    }
    let mut statements = Vec::new();
    for conn in &mut connections {
        let found: Vec<String> = sqlx::query_scalar("SELECT statement FROM pg_prepared_statements")
            .persistent(false)
            .fetch_all(&mut **conn)
            .await
            .unwrap();
        statements.extend(found);
    }
    assert!(
        !statements.is_empty(),
        "the server's own fixed queries are prepared: the check must see them"
    );
    let leaked: Vec<&String> = statements
        .iter()
        .filter(|s| s.contains("marker_") || s.contains("AS q0"))
        .collect();
    assert!(leaked.is_empty(), "users' sql left prepared: {leaked:?}");
}

/// query_documents is counted per user and day by default (2000 calls); an
/// admin's tool_rate_limits setting raises, lowers or lifts that.
#[tokio::test]
async fn query_documents_has_a_daily_limit_that_an_admin_setting_overrides() {
    use data_plane_registry::{RateLimitOverride, RateLimits, Settings};
    use std::sync::Arc;

    let w = World::new().await;
    for tool in [
        "query_documents",
        "analyze_document",
        "fetch_web_page",
        "web_search",
    ] {
        let limits = w.registry.get(tool).unwrap().meta.limits;
        assert!(limits.daily_limit.is_some(), "{tool} has no daily limit");
    }
    assert_eq!(
        w.registry.get("query_documents").unwrap().meta.limits,
        RateLimits {
            cooldown: None,
            daily_limit: Some(2000)
        }
    );
    let with = |o: RateLimitOverride| {
        let mut settings = Settings::default();
        settings
            .tool_rate_limits
            .insert("query_documents".into(), o);
        w.ctx(w.alice, Some(w.alpha))
            .with_settings(Arc::new(settings))
    };
    let args = json!({ "document_id": w.doc(CITIES), "sql": "SELECT count(*) FROM cities" });
    let call = async |ctx: &ToolContext| w.call("query_documents", args.clone(), ctx).await;

    // The default counts: two calls made, a limit of 2 is then reached.
    let default = w.ctx(w.alice, Some(w.alpha));
    assert!(call(&default).await.success);
    assert!(call(&default).await.success);
    let two = with(serde_json::from_value(json!({ "daily_limit": 2 })).unwrap());
    let refused = call(&two).await;
    assert_eq!(refused.code(), Some(ErrorCode::RateLimited), "{refused:?}");
    assert!(
        refused.error.unwrap().message.contains("2 times per day"),
        "the refusal names the limit"
    );
    // Raised, the next call goes through; lifted (null), so do all.
    let three = with(serde_json::from_value(json!({ "daily_limit": 3 })).unwrap());
    assert!(call(&three).await.success);
    assert_eq!(call(&three).await.code(), Some(ErrorCode::RateLimited));
    let lifted = with(serde_json::from_value(json!({ "daily_limit": null })).unwrap());
    assert!(call(&lifted).await.success);
    // A cooldown added by the setting holds too (alice called just now),
    // for each user on their own.
    let cooldown =
        with(serde_json::from_value(json!({ "cooldown_ms": 60000, "daily_limit": null })).unwrap());
    let r = call(&cooldown).await;
    assert_eq!(r.code(), Some(ErrorCode::RateLimited), "{r:?}");
    assert!(r.error.unwrap().message.contains("wait"));
    let bob = w.ctx(w.bob, None).with_settings(cooldown.settings.clone());
    let other_doc = query(&w, &bob, w.doc(CITIES), json!({ "sql": "SELECT 1" })).await;
    assert_ne!(
        other_doc.code(),
        Some(ErrorCode::RateLimited),
        "{other_doc:?}"
    );
}

#[tokio::test]
async fn arguments_and_database_errors_get_messages_the_model_can_act_on() {
    let w = World::new().await;
    let alice = w.ctx(w.alice, Some(w.alpha));
    let cities = w.doc(CITIES);

    // (arguments, code, words the message must contain)
    let cases: &[(Value, ErrorCode, &str)] = &[
        (
            json!({ "question": "which city is the largest?" }),
            ErrorCode::NotAvailable,
            "no language model is configured",
        ),
        (
            json!({ "question": "which city is the largest?", "sql": "SELECT 1" }),
            ErrorCode::InvalidArguments,
            "not both",
        ),
        (json!({}), ErrorCode::InvalidArguments, "give `sql`"),
        (
            json!({ "sql": "SELECT 1", "max_rows": 1001 }),
            ErrorCode::InvalidArguments,
            "max_rows",
        ),
        (
            json!({ "sql": "SELECT popultion FROM cities" }),
            ErrorCode::InvalidArguments,
            "column \"popultion\" does not exist",
        ),
        (
            json!({ "sql": "SELECT round(avg(population)::float8, 2) FROM cities" }),
            ErrorCode::InvalidArguments,
            "function round(double precision, integer) does not exist",
        ),
        (
            json!({ "sql": "SELECT population / 0 FROM cities" }),
            ErrorCode::InvalidArguments,
            "division by zero",
        ),
        (
            json!({ "sql": "SELECT (SELECT city FROM cities) AS c" }),
            ErrorCode::InvalidArguments,
            "more than one row",
        ),
        (
            json!({ "sql": "SELECT city, count(*) FROM cities" }),
            ErrorCode::InvalidArguments,
            "must appear in the GROUP BY clause",
        ),
        (
            json!({ "sql": "SELECT city::int FROM cities" }),
            ErrorCode::InvalidArguments,
            "invalid input syntax for type integer",
        ),
        (
            json!({ "sql": "SELECT FROM cities" }),
            ErrorCode::InvalidArguments,
            "returns no columns",
        ),
    ];
    let mut failures = Vec::new();
    for (args, code, expected) in cases {
        let r = query(&w, &alice, cities, args.clone()).await;
        let message = r
            .error
            .as_ref()
            .map(|e| e.message.clone())
            .unwrap_or_default();
        if r.code() != Some(*code) || !message.contains(expected) {
            failures.push(format!(
                "{args}\n  expected {code:?} with {expected:?}\n  got {r:?}"
            ));
        }
        if *code == ErrorCode::InvalidArguments
            && args.get("sql").is_some()
            && args.get("question").is_none()
            && args.get("max_rows").is_none()
            && !message.contains(CITIES_TABLE)
        {
            failures.push(format!(
                "{args}\n  message does not list the tables: {message}"
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));

    let r = query(
        &w,
        &alice,
        w.doc("alpha/guides/vacuum.md"),
        json!({ "sql": "SELECT 1" }),
    )
    .await;
    assert_eq!(r.code(), Some(ErrorCode::InvalidArguments));
    assert!(r.error.unwrap().message.contains("has no tables"));
    let r = query(&w, &alice, Uuid::new_v4(), json!({ "sql": "SELECT 1" })).await;
    assert_eq!(r.code(), Some(ErrorCode::NotFound));
}

/// Date cells as stored, and the date a query sees (None: not a real day).
const DAYS: &[(&str, Option<&str>)] = &[
    ("2024-12-31", Some("2024-12-31")),
    ("2023-02-29", None),
    ("2000-02-29", Some("2000-02-29")),
    ("1900-02-29", None),
    ("2024-04-31", None),
    ("2024-04-30", Some("2024-04-30")),
    ("2024-1-31T23:59:59+02:00", Some("2024-01-31")),
    ("9999-12-31", Some("9999-12-31")),
    ("20240101", None),
    ("2024-02-28 12:00", Some("2024-02-28")),
];

#[tokio::test]
async fn odd_cells_become_null_instead_of_failing_the_query() {
    let w = World::new().await;
    let columns = json!([
        { "name": "n", "kind": "integer" },
        { "name": "x", "kind": "number" },
        { "name": "b", "kind": "boolean" },
        { "name": "d", "kind": "date" },
        { "name": "Label \"quoted\"", "kind": "text" },
        { "name": "order", "kind": "text" },
    ]);
    let rows = vec![
        json!({ "n": 1, "x": 1.5, "b": true, "d": "2024-02-29", "Label \"quoted\"": "plain", "order": "1" }),
        json!({ "n": null, "x": null, "b": null, "d": null }),
        json!({ "n": 18446744073709551615u64, "x": "not a number", "b": "yes", "d": "2024-02-30" }),
        json!({ "n": "42", "x": " 2.5e3 ", "b": "FALSE", "d": "2024-02-01T10:00:00Z" }),
        json!({ "n": 2.5, "x": "1e400000", "b": 1, "d": "0000-01-01" }),
        json!({ "n": "12abc", "x": { "nested": true }, "b": [true], "d": "2024-13-01", "Label \"quoted\"": ["a", 1] }),
        json!({ "n": -7, "x": -0.25, "b": false, "d": " 1999-1-2 " }),
    ];
    let mut tx = w.deps.db.begin(Scope::System).await.unwrap();
    let outcome = content::write_document(
        &mut tx,
        &NewDocument {
            space_id: w.alpha,
            source_id: w.alpha_source,
            path: "data/odd.json".into(),
            mime: "application/json".into(),
            size_bytes: 1,
            content_hash: "odd".into(),
            title: None,
            language: None,
            content: String::new(),
            metadata: json!({}),
            chunks: Vec::new(),
            tables: vec![
                NewTable {
                    name: "Odd Values".into(),
                    columns,
                    rows,
                },
                NewTable {
                    name: "days".into(),
                    columns: json!([{ "name": "raw", "kind": "text" }, { "name": "d", "kind": "date" }]),
                    rows: DAYS.iter().map(|(raw, _)| json!({ "raw": raw, "d": raw })).collect(),
                },
                NewTable {
                    name: "labels".into(),
                    columns: json!([{ "name": "n", "kind": "integer" }, { "name": "label", "kind": "text" }]),
                    rows: vec![json!({ "n": 1, "label": "one" }), json!({ "n": -7, "label": "minus seven" })],
                },
            ],
        },
    )
    .await
    .unwrap();
    tx.commit().await.unwrap();
    let content::WriteOutcome::Created(odd) = outcome else {
        panic!("{outcome:?}");
    };

    let alice = w.ctx(w.alice, Some(w.alpha));
    let data = w
        .ok(
            "query_documents",
            json!({ "document_id": odd, "sql": "SELECT n, x, b, d, \"Label \"\"quoted\"\"\", \"order\" FROM \"Odd Values\"" }),
            &alice,
        )
        .await;
    assert_eq!(
        data["rows"],
        json!([
            [1, 1.5, true, "2024-02-29", "plain", "1"],
            [null, null, null, null, null, null],
            [null, null, null, null, null, null],
            [42, 2500, false, "2024-02-01", null, null],
            [null, null, null, null, null, null],
            [null, null, null, null, "[\"a\", 1]", null],
            [-7, -0.25, false, "1999-01-02", null, null],
        ]),
        "{data}"
    );
    let types: Vec<&str> = data["columns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        types,
        ["bigint", "numeric", "boolean", "date", "text", "text"]
    );

    // Two tables of one document join; the error lists both, quoted as needed.
    let data = w
        .ok(
            "query_documents",
            json!({ "document_id": odd, "sql": "SELECT l.label FROM \"Odd Values\" o JOIN labels l USING (n) ORDER BY o.n" }),
            &alice,
        )
        .await;
    assert_eq!(data["rows"], json!([["minus seven"], ["one"]]));
    let data = w
        .ok(
            "query_documents",
            json!({ "document_id": odd, "sql": "SELECT raw, d FROM days" }),
            &alice,
        )
        .await;
    let expected: Vec<Value> = DAYS.iter().map(|(raw, d)| json!([raw, d])).collect();
    assert_eq!(data["rows"], json!(expected));

    let r = query(
        &w,
        &alice,
        odd,
        json!({ "sql": "SELECT * FROM odd_values" }),
    )
    .await;
    let message = r.error.unwrap().message;
    assert!(
        message.contains(
            "\"Odd Values\" (7 rows: n bigint, x numeric, b boolean, d date, \"Label \"\"quoted\"\"\" text, \"order\" text); days (10 rows: raw text, d date); labels (2 rows: n bigint, label text)"
        ),
        "{message}"
    );
    let r = query(
        &w,
        &alice,
        odd,
        json!({ "sql": "SELECT * FROM odd values" }),
    )
    .await;
    assert_eq!(r.code(), Some(ErrorCode::InvalidArguments), "{r:?}");
}

// The natural-language path: a fake OpenAI-compatible model on 127.0.0.1
// writes the SQL; everything after it is the real guard and executor.

use data_plane_agent::AgentConfig;
use data_plane_agent::testing::{FakeModel, text_reply};
use data_plane_handlers::{ModelSettings, SubAgentLimits};

async fn with_model() -> (World, FakeModel) {
    let w = World::new().await;
    let fake = FakeModel::start().await;
    let settings = ModelSettings {
        agent: AgentConfig::new(fake.base_url(), "test-model"),
        sub_agent: SubAgentLimits::default(),
    };
    assert!(w.deps.connect_model(settings, &w.registry));
    (w, fake)
}

/// The text of every message of a recorded request, in order.
fn contents(request: &Value) -> Vec<(String, String)> {
    request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["role"].as_str().unwrap().to_string(),
                m["content"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

#[tokio::test]
async fn a_question_is_answered_with_sql_written_from_columns_and_samples() {
    let (w, fake) = with_model().await;
    fake.push(text_reply(&[
        "```sql\nSELECT city FROM cities\n",
        "WHERE population > 3000000 ORDER BY city;\n```",
    ]));
    let alice = w.ctx(w.alice, Some(w.alpha));
    let question = "Which cities have more than three million people?";
    let r = query(&w, &alice, w.doc(CITIES), json!({ "question": question })).await;
    assert!(r.success, "{:?}", r.error);
    let data = r.data.unwrap();
    assert_eq!(data["rows"], json!([["Berlin"], ["Madrid"]]));
    assert_eq!(data["question"], question);
    let sql = data["sql"].as_str().unwrap();
    assert!(
        sql.starts_with("SELECT city FROM cities WHERE population > 3000000"),
        "{sql}"
    );

    let requests = fake.requests();
    assert_eq!(requests.len(), 1);
    assert!(
        requests[0].get("tools").is_none_or(Value::is_null),
        "no tools offered"
    );
    let messages = contents(&requests[0]);
    assert_eq!(messages[0].0, "system");
    assert!(messages[0].1.contains("exactly one PostgreSQL SELECT"));
    let prompt = &messages[1].1;
    for words in [
        "cities (8 rows)",
        "columns: city text, country text, population bigint, founded bigint",
        "Berlin | Germany | 3850809 | 1237",
        "Paris | France | 2102650 | -259",
        "Madrid | Spain | 3332035 | 865",
        question,
    ] {
        assert!(prompt.contains(words), "{words:?} missing from {prompt}");
    }
    // Three sample rows, not the whole table.
    assert!(!prompt.contains("Lisbon"), "{prompt}");
}

#[tokio::test]
async fn a_refused_answer_gets_one_retry_with_the_reason() {
    let (w, fake) = with_model().await;
    fake.push(text_reply(&["DELETE FROM cities WHERE founded < 0"]));
    fake.push(text_reply(&[
        "```sql\nSELECT count(*) AS n FROM cities\n```",
    ]));
    let alice = w.ctx(w.alice, Some(w.alpha));
    let r = query(
        &w,
        &alice,
        w.doc(CITIES),
        json!({ "question": "How many cities?" }),
    )
    .await;
    assert!(r.success, "{:?}", r.error);
    assert_eq!(r.data.unwrap()["rows"], json!([[8]]));
    let requests = fake.requests();
    assert_eq!(requests.len(), 2);
    let retry = contents(&requests[1]);
    assert_eq!(retry.len(), 4, "{retry:?}");
    assert_eq!(
        retry[2],
        (
            "assistant".into(),
            "DELETE FROM cities WHERE founded < 0".into()
        )
    );
    assert_eq!(retry[3].0, "user");
    assert!(
        retry[3].1.contains("refused") && retry[3].1.contains("not DELETE"),
        "{}",
        retry[3].1
    );
}

#[tokio::test]
async fn sql_from_the_model_that_writes_or_escapes_is_refused() {
    // (the model's two answers, words the final error must contain)
    let cases: &[(&str, &str, &str)] = &[
        (
            "DROP TABLE cities",
            "UPDATE cities SET population = 0",
            "not UPDATE",
        ),
        (
            "SELECT * FROM table_rows",
            "```sql\nSELECT data FROM public.table_rows\n```",
            "table_rows",
        ),
        (
            "SELECT pg_sleep(10)",
            "SELECT pg_read_file('/etc/passwd')",
            "pg_read_file",
        ),
        ("I cannot help with that.", "Sorry.", "does not parse"),
        ("", "<think>hmm</think>", "no SQL"),
    ];
    let (w, fake) = with_model().await;
    let alice = w.ctx(w.alice, Some(w.alpha));
    let before = fingerprint(&w).await;
    for (first, second, words) in cases {
        fake.push(text_reply(&[first]));
        fake.push(text_reply(&[second]));
        let r = query(&w, &alice, w.doc(CITIES), json!({ "question": "anything" })).await;
        assert_eq!(
            r.code(),
            Some(ErrorCode::InvalidArguments),
            "{first} / {second}: {r:?}"
        );
        let message = r.error.unwrap().message;
        assert!(
            message.contains("did not write an acceptable query"),
            "{message}"
        );
        assert!(message.contains(words), "{words:?} missing from {message}");
        assert!(message.contains(CITIES_TABLE), "{message}");
    }
    assert_eq!(fake.requests().len(), 2 * cases.len());
    assert_eq!(fingerprint(&w).await, before, "the database changed");
}

#[tokio::test]
async fn a_question_about_another_spaces_document_never_reaches_the_model() {
    let (w, fake) = with_model().await;
    let alice = w.ctx(w.alice, None);
    let r = query(
        &w,
        &alice,
        w.doc("beta/data/salaries.csv"),
        json!({ "question": "Who earns most?" }),
    )
    .await;
    assert_eq!(r.code(), Some(ErrorCode::NotFound), "{r:?}");
    assert!(
        fake.requests().is_empty(),
        "the model saw another space's table"
    );
}

/// A query records the document tables it read as side effects; a CTE of
/// the same name is not the table, and a refused query read nothing.
#[tokio::test]
async fn a_query_records_the_tables_it_read() {
    let w = World::new().await;
    let alice = w.ctx(w.alice, Some(w.alpha));
    let doc = w.doc(CITIES);
    let cases = [
        ("SELECT count(*) FROM cities", vec!["queried:cities"]),
        (
            "WITH cities AS (SELECT 1 AS n) SELECT n FROM cities",
            vec![],
        ),
        ("SELECT 1", vec![]),
        ("SELECT * FROM pg_user", vec![]),
    ];
    for (sql, expected) in cases {
        let r = query(&w, &alice, doc, json!({ "sql": sql })).await;
        assert_eq!(r.side_effects, expected, "{sql}: {r:?}");
    }
}
