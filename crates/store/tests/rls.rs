//! Row-level security: a user sees nothing of a space they are not a member
//! of, on every space-scoped table, as the server's role and as the role that
//! runs user-written SQL; and the server refuses roles that could bypass it.

// Test helpers report failure by panicking, like the tests that call them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use data_plane_store::content::{self, NewChunk, NewDocument, NewTable, SourceKind};
use data_plane_store::identity::{self, MembershipRole, Permission};
use data_plane_store::testing::TestDatabase;
use data_plane_store::{Db, Scope, StoreError};
use uuid::Uuid;

struct World {
    alice: Uuid,
    bob: Uuid,
    space_a: Uuid,
    space_b: Uuid,
}

fn doc(space_id: Uuid, source_id: Uuid, path: &str, body: &str) -> NewDocument {
    NewDocument {
        space_id,
        source_id,
        path: path.to_string(),
        mime: "text/csv".into(),
        size_bytes: body.len() as i64,
        content_hash: format!("hash-of-{body}"),
        title: Some(path.to_string()),
        language: Some("en".into()),
        content: body.to_string(),
        metadata: serde_json::json!({"format": "csv"}),
        chunks: vec![NewChunk {
            char_start: 0,
            char_end: body.chars().count() as i32,
            heading: String::new(),
            page: None,
            text: body.to_string(),
            embedding: vec![0.1; 384],
        }],
        tables: vec![NewTable {
            name: "t".into(),
            columns: serde_json::json!([{"name": "a", "kind": "integer"}]),
            rows: vec![serde_json::json!({"a": 1}), serde_json::json!({"a": 2})],
        }],
    }
}

async fn populate(db: &Db) -> World {
    let mut tx = db.begin(Scope::System).await.unwrap();
    let alice = identity::upsert_user(&mut tx, "alice@example.com", Some(Permission::User))
        .await
        .unwrap();
    let bob = identity::upsert_user(&mut tx, "Bob@Example.com", None)
        .await
        .unwrap();
    let (a, _) = identity::ensure_space(&mut tx, "space-a").await.unwrap();
    let (b, _) = identity::ensure_space(&mut tx, "space-b").await.unwrap();
    identity::add_member(&mut tx, a.id, alice.id, MembershipRole::Editor)
        .await
        .unwrap();
    identity::add_member(&mut tx, b.id, bob.id, MembershipRole::Editor)
        .await
        .unwrap();
    for (space, user) in [(a.id, alice.id), (b.id, bob.id)] {
        let source = content::ensure_source(&mut tx, space, "files", SourceKind::Files)
            .await
            .unwrap();
        content::write_document(
            &mut tx,
            &doc(space, source.id, "dir/sub/data.csv", "a\n1\n2\n"),
        )
        .await
        .unwrap();
        sqlx::query(
            "INSERT INTO tool_calls (tool, duration_ms, user_id, space_id, request_id, success)
             VALUES ('list_sources', 3, $1, $2, 'req-1', true)",
        )
        .bind(user)
        .bind(space)
        .execute(&mut *tx)
        .await
        .unwrap();
        sqlx::query(
            "INSERT INTO runs (id, user_id, space_id, conversation_id)
             VALUES (gen_random_uuid(), $1, $2, gen_random_uuid())",
        )
        .bind(user)
        .bind(space)
        .execute(&mut *tx)
        .await
        .unwrap();
        sqlx::query("INSERT INTO rate_limits (user_id, tool, day, count) VALUES ($1, 'web_search', current_date, 1)")
            .bind(user)
            .execute(&mut *tx)
            .await
            .unwrap();
    }
    tx.commit().await.unwrap();
    World {
        alice: alice.id,
        bob: bob.id,
        space_a: a.id,
        space_b: b.id,
    }
}

/// Every table in the public schema with a `space_id` column, plus `spaces`
/// itself (keyed by `id`): the set the guarantee is about, found from the
/// catalog so a table added later is covered without editing this test.
async fn space_scoped_tables(test: &TestDatabase) -> Vec<(String, String)> {
    let mut tables: Vec<(String, String)> = sqlx::query_scalar::<_, String>(
        "SELECT c.table_name::text FROM information_schema.columns c
         JOIN information_schema.tables t USING (table_schema, table_name)
         WHERE c.table_schema = 'public' AND c.column_name = 'space_id' AND t.table_type = 'BASE TABLE'
         ORDER BY 1",
    )
    .fetch_all(&test.owner)
    .await
    .unwrap()
    .into_iter()
    .map(|t| (t, "space_id".to_string()))
    .collect();
    tables.push(("spaces".into(), "id".into()));
    tables
}

async fn count_in(
    tx: &mut data_plane_store::ScopedTx,
    table: &str,
    column: &str,
    space: Uuid,
) -> i64 {
    sqlx::query_scalar(&format!("SELECT count(*) FROM {table} WHERE {column} = $1"))
        .bind(space)
        .fetch_one(&mut **tx)
        .await
        .unwrap_or_else(|e| panic!("counting {table}: {e}"))
}

#[tokio::test]
async fn a_user_sees_no_row_of_a_space_they_do_not_belong_to() {
    let test = TestDatabase::create().await;
    let world = populate(&test.db).await;
    let tables = space_scoped_tables(&test).await;
    let names: Vec<&str> = tables.iter().map(|(t, _)| t.as_str()).collect();
    for expected in [
        "chunks",
        "doc_tables",
        "documents",
        "folders",
        "index_log",
        "runs",
        "sources",
        "spaces",
        "table_rows",
        "tool_calls",
    ] {
        assert!(
            names.contains(&expected),
            "{expected} should be space-scoped, found {names:?}"
        );
    }

    for (user, own, other) in [
        (world.alice, world.space_a, world.space_b),
        (world.bob, world.space_b, world.space_a),
    ] {
        let mut tx = test.db.begin(Scope::User(user)).await.unwrap();
        for (table, column) in &tables {
            assert_eq!(
                count_in(&mut tx, table, column, other).await,
                0,
                "{table} leaks another space's rows"
            );
            // The log is for the system only; everything else a member can read.
            if table != "index_log" {
                assert!(
                    count_in(&mut tx, table, column, own).await > 0,
                    "{table} hides the user's own rows"
                );
            }
        }
        tx.rollback().await.unwrap();
    }
}

#[tokio::test]
async fn the_query_role_sees_only_member_tables_and_never_the_system_policy() {
    let test = TestDatabase::create().await;
    let world = populate(&test.db).await;
    let mut tx = test.db.begin(Scope::User(world.alice)).await.unwrap();
    sqlx::query("SET LOCAL ROLE data_plane_query")
        .execute(&mut *tx)
        .await
        .unwrap();
    assert!(count_in(&mut tx, "table_rows", "space_id", world.space_a).await > 0);
    assert_eq!(
        count_in(&mut tx, "table_rows", "space_id", world.space_b).await,
        0
    );
    assert_eq!(
        count_in(&mut tx, "doc_tables", "space_id", world.space_b).await,
        0
    );
    // The query role may not read documents or chunks at all.
    let denied = sqlx::query("SELECT count(*) FROM chunks")
        .execute(&mut *tx)
        .await;
    assert!(denied.is_err(), "the query role must not read chunks");
    tx.rollback().await.unwrap();

    // Nor can it change whom it acts for, or become the server's role again:
    // set_config is not the query role's to call.
    for forge in [
        format!(
            "SELECT set_config('data_plane.user_id', '{}', true)",
            world.bob
        ),
        "SELECT set_config('data_plane.system', 'on', true)".to_string(),
        "SELECT set_config('role', 'data_plane_app', true)".to_string(),
        // The audit writer's function sets the system scope itself.
        "SELECT dp_write_audit('[]')".to_string(),
    ] {
        let mut tx = test.db.begin(Scope::User(world.alice)).await.unwrap();
        sqlx::query("SET LOCAL ROLE data_plane_query")
            .execute(&mut *tx)
            .await
            .unwrap();
        let refused = sqlx::query(&forge).execute(&mut *tx).await;
        let message = refused.expect_err(&forge).to_string();
        assert!(message.contains("permission denied"), "{forge}: {message}");
        tx.rollback().await.unwrap();
    }

    // Even claiming system scope gives the query role nothing more.
    let mut tx = test.db.begin(Scope::System).await.unwrap();
    sqlx::query("SET LOCAL ROLE data_plane_query")
        .execute(&mut *tx)
        .await
        .unwrap();
    let all: i64 = sqlx::query_scalar("SELECT count(*) FROM table_rows")
        .fetch_one(&mut *tx)
        .await
        .unwrap();
    assert_eq!(all, 0);
    tx.rollback().await.unwrap();
}

#[tokio::test]
async fn without_a_user_nothing_is_visible() {
    let test = TestDatabase::create().await;
    populate(&test.db).await;
    let tables = space_scoped_tables(&test).await;
    let mut conn = test.db.pool().acquire().await.unwrap();
    for (table, _) in &tables {
        let n: i64 = sqlx::query_scalar(&format!("SELECT count(*) FROM {table}"))
            .fetch_one(&mut *conn)
            .await
            .unwrap();
        assert_eq!(n, 0, "{table} is visible without a user");
    }
}

#[tokio::test]
async fn the_scope_does_not_outlive_its_transaction() {
    let test = TestDatabase::create().await;
    let world = populate(&test.db).await;
    // One connection, so the second query would inherit a session-level setting.
    let single = Db::from_pool_unchecked(
        sqlx::postgres::PgPoolOptions::new()
            .max_connections(1)
            .connect(&test.app_url)
            .await
            .unwrap(),
    );
    let mut tx = single.begin(Scope::User(world.alice)).await.unwrap();
    let n: i64 = sqlx::query_scalar("SELECT count(*) FROM documents")
        .fetch_one(&mut *tx)
        .await
        .unwrap();
    assert_eq!(n, 1);
    tx.commit().await.unwrap();
    let after: i64 = sqlx::query_scalar("SELECT count(*) FROM documents")
        .fetch_one(single.pool())
        .await
        .unwrap();
    assert_eq!(after, 0);
}

#[tokio::test]
async fn a_viewer_cannot_write_and_a_stranger_cannot_insert_into_another_space() {
    let test = TestDatabase::create().await;
    let world = populate(&test.db).await;
    let mut tx = test.db.begin(Scope::System).await.unwrap();
    identity::add_member(&mut tx, world.space_a, world.bob, MembershipRole::Viewer)
        .await
        .unwrap();
    tx.commit().await.unwrap();

    let mut tx = test.db.begin(Scope::User(world.bob)).await.unwrap();
    let deleted = sqlx::query("DELETE FROM documents WHERE space_id = $1")
        .bind(world.space_a)
        .execute(&mut *tx)
        .await
        .unwrap();
    assert_eq!(deleted.rows_affected(), 0, "a viewer deleted documents");
    tx.rollback().await.unwrap();

    let mut tx = test.db.begin(Scope::User(world.alice)).await.unwrap();
    let insert = sqlx::query("INSERT INTO sources (space_id, name) VALUES ($1, 'sneaky')")
        .bind(world.space_b)
        .execute(&mut *tx)
        .await;
    assert!(insert.is_err(), "alice inserted into bob's space");
}

#[tokio::test]
async fn the_server_refuses_roles_that_bypass_row_level_security() {
    let test = TestDatabase::create().await;
    match Db::connect(&test.owner_url, 1).await {
        Err(StoreError::UnsafeRole { reason, .. }) => assert!(reason.contains("owns"), "{reason}"),
        other => panic!("the owner role was accepted: {other:?}"),
    }
    assert!(Db::connect(&test.app_url, 1).await.is_ok());
}
