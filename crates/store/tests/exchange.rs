//! Statements in one exchange (`Db::exchange`): row-level security applies as in a
//! scoped transaction, the identity ends with the read (also when it fails),
//! connections prepare the statement whenever they were opened, a statement
//! whose result changed shape is prepared afresh, and text arrives intact.

// Test helpers report failure by panicking, like the tests that call them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use data_plane_store::content::{self, NewDocument, SourceKind};
use data_plane_store::exchange::{Param, Prepared};
use data_plane_store::identity::{self, MembershipRole, Permission};
use data_plane_store::testing::TestDatabase;
use data_plane_store::{Db, Scope};
use sqlx::Row;
use uuid::Uuid;

static DOCUMENTS: Prepared = Prepared::new(
    "dp_test_documents",
    "SELECT id, path, created_at, metadata FROM documents
      WHERE ($1::uuid IS NULL OR space_id = $1) ORDER BY path",
    &["uuid"],
);

static DIVIDE: Prepared = Prepared::new(
    "dp_test_divide",
    "SELECT count(*) / $1 AS n FROM documents",
    &["bigint"],
);

static ECHO: Prepared = Prepared::new(
    "dp_test_echo",
    "SELECT $1 AS text, $2 AS flag, $3 AS number",
    &["text", "boolean", "bigint"],
);

static BROKEN: Prepared = Prepared::new("dp_test_broken", "SELECT * FROM no_such_table", &[]);

static ECHO_AGAIN: Prepared = Prepared::new("dp_test_echo", "SELECT $1 AS other", &["text"]);

static SHAPE: Prepared = Prepared::new("dp_test_shape", "SELECT * FROM test_shape", &[]);

struct World {
    alice: Uuid,
    bob: Uuid,
    space_a: Uuid,
}

async fn populate(db: &Db) -> World {
    let mut tx = db.begin(Scope::System).await.unwrap();
    let alice = identity::upsert_user(&mut tx, "alice@example.com", Some(Permission::User))
        .await
        .unwrap()
        .id;
    let bob = identity::upsert_user(&mut tx, "bob@example.com", Some(Permission::User))
        .await
        .unwrap()
        .id;
    let mut spaces = Vec::new();
    for (name, user) in [("a", alice), ("b", bob)] {
        let (space, _) = identity::ensure_space(&mut tx, name).await.unwrap();
        identity::add_member(&mut tx, space.id, user, MembershipRole::Editor)
            .await
            .unwrap();
        let source = content::ensure_source(&mut tx, space.id, "files", SourceKind::Files)
            .await
            .unwrap();
        let text = format!("in {name}\n");
        content::write_document(
            &mut tx,
            &NewDocument {
                space_id: space.id,
                source_id: source.id,
                path: format!("{name}.txt"),
                mime: "text/plain".into(),
                size_bytes: text.len() as i64,
                content_hash: format!("hash-{name}"),
                title: None,
                language: None,
                content: text,
                metadata: serde_json::json!({"space": name}),
                chunks: vec![],
                tables: vec![],
            },
        )
        .await
        .unwrap();
        spaces.push(space.id);
    }
    tx.commit().await.unwrap();
    World {
        alice,
        bob,
        space_a: spaces[0],
    }
}

/// What the connection's identity is outside any read.
async fn identity_now(db: &Db) -> String {
    sqlx::query_scalar(
        "SELECT coalesce(current_setting('data_plane.user_id', true), '')
             || '/' || coalesce(current_setting('data_plane.system', true), '')",
    )
    .fetch_one(db.pool())
    .await
    .unwrap()
}

/// Every document `user` may read, through `DOCUMENTS`.
async fn documents(db: &Db, user: Uuid) -> Vec<sqlx::postgres::PgRow> {
    db.exchange(Scope::User(user), &DOCUMENTS, &[Param::OptUuid(None)])
        .await
        .unwrap()
}

#[tokio::test]
async fn row_level_security_applies_to_every_read() {
    let test = TestDatabase::create().await;
    let world = populate(&test.db).await;
    let paths = |rows: &[sqlx::postgres::PgRow]| {
        rows.iter()
            .map(|r| r.try_get::<String, _>("path").unwrap())
            .collect::<Vec<_>>()
    };

    let all = documents(&test.db, world.alice).await;
    assert_eq!(paths(&all), ["a.txt"], "alice sees her space only");
    // Text-format values decode like binary ones.
    let row = &all[0];
    let _: Uuid = row.try_get("id").unwrap();
    let _: chrono::DateTime<chrono::Utc> = row.try_get("created_at").unwrap();
    let metadata: serde_json::Value = row.try_get("metadata").unwrap();
    assert_eq!(metadata["space"], "a");

    let in_a = test
        .db
        .exchange(
            Scope::User(world.bob),
            &DOCUMENTS,
            &[Param::Uuid(world.space_a)],
        )
        .await
        .unwrap();
    assert!(in_a.is_empty(), "bob sees nothing of space a");
    let stranger = documents(&test.db, Uuid::new_v4()).await;
    assert!(stranger.is_empty(), "an unknown user sees nothing");
    test.destroy().await.unwrap();
}

#[tokio::test]
async fn the_identity_ends_with_the_read_even_when_it_fails() {
    let test = TestDatabase::create().await;
    let world = populate(&test.db).await;
    // One connection: every read and check below shares it.
    let db = Db::connect(&test.app_url, 1).await.unwrap();
    assert_eq!(identity_now(&db).await, "/");

    documents(&db, world.alice).await;
    assert_eq!(identity_now(&db).await, "/", "nothing left after a read");

    let failed = db
        .exchange(Scope::User(world.alice), &DIVIDE, &[Param::Int(0)])
        .await;
    let message = failed.unwrap_err().to_string();
    assert!(message.contains("division by zero"), "{message}");
    assert_eq!(identity_now(&db).await, "/", "nothing left after a failure");

    let rows = db
        .exchange(Scope::User(world.alice), &DIVIDE, &[Param::Int(1)])
        .await
        .unwrap();
    let n: i64 = rows[0].try_get("n").unwrap();
    assert_eq!(n, 1, "the connection serves the next read, as alice only");
    test.destroy().await.unwrap();
}

#[tokio::test]
async fn connections_old_and_new_prepare_the_statement() {
    let test = TestDatabase::create().await;
    let world = populate(&test.db).await;
    let db = Db::connect(&test.app_url, 1).await.unwrap();
    let prepared = |db: Db| async move {
        sqlx::query_scalar::<_, String>(
            "SELECT name FROM pg_prepared_statements WHERE name LIKE 'dp\\_%' ORDER BY name",
        )
        .fetch_all(db.pool())
        .await
        .unwrap()
    };
    // The connection the start-up checks opened predates the statement.
    assert!(prepared(db.clone()).await.is_empty());
    documents(&db, world.alice).await;
    assert_eq!(prepared(db.clone()).await, ["dp_test_documents"]);

    // A connection opened from now on prepares it as it opens.
    let old = db.pool().acquire().await.unwrap().detach();
    sqlx::Connection::close(old).await.unwrap();
    assert_eq!(prepared(db.clone()).await, ["dp_test_documents"]);
    test.destroy().await.unwrap();
}

#[tokio::test]
async fn a_statement_whose_result_changed_is_prepared_again() {
    let test = TestDatabase::create().await;
    let world = populate(&test.db).await;
    let db = Db::connect(&test.app_url, 1).await.unwrap();
    let shape = |sql: &'static str| {
        let owner = test.owner.clone();
        async move {
            sqlx::raw_sql(sql).execute(&owner).await.unwrap();
        }
    };
    shape(
        "CREATE VIEW test_shape AS SELECT 1 AS n;
         GRANT SELECT ON test_shape TO data_plane_app",
    )
    .await;
    let rows = db
        .exchange(Scope::User(world.alice), &SHAPE, &[])
        .await
        .unwrap();
    assert_eq!(rows[0].try_get::<i32, _>("n").unwrap(), 1);

    // A migration gives the view another column type under the same name.
    shape(
        "DROP VIEW test_shape;
         CREATE VIEW test_shape AS SELECT 'two'::text AS n, 2 AS m;
         GRANT SELECT ON test_shape TO data_plane_app",
    )
    .await;
    let rows = db
        .exchange(Scope::User(world.alice), &SHAPE, &[])
        .await
        .unwrap();
    assert_eq!(rows[0].try_get::<String, _>("n").unwrap(), "two");
    assert_eq!(rows[0].try_get::<i32, _>("m").unwrap(), 2);
    test.destroy().await.unwrap();
}

#[tokio::test]
async fn text_arrives_as_it_was_sent() {
    let test = TestDatabase::create().await;
    let world = populate(&test.db).await;
    for text in [
        "",
        "it's",
        "back\\slash \\' and \\\\'' quotes",
        "$$ dollar $tag$ quoting $$",
        "line\nbreak\ttab\r",
        "'; SET LOCAL data_plane.system = 'on'; SELECT '",
        "ünïcödé 漢字 🦀",
        "E'\\x41'",
    ] {
        let rows = test
            .db
            .exchange(
                Scope::User(world.alice),
                &ECHO,
                &[Param::Text(text), Param::Bool(false), Param::Int(i64::MIN)],
            )
            .await
            .unwrap();
        assert_eq!(rows.len(), 1, "{text:?}");
        assert_eq!(rows[0].try_get::<String, _>("text").unwrap(), text);
        assert!(!rows[0].try_get::<bool, _>("flag").unwrap());
        assert_eq!(rows[0].try_get::<i64, _>("number").unwrap(), i64::MIN);
    }
    test.destroy().await.unwrap();
}

#[tokio::test]
async fn a_statement_that_cannot_be_prepared_fails_only_its_own_uses() {
    let test = TestDatabase::create().await;
    let world = populate(&test.db).await;
    let db = Db::connect(&test.app_url, 1).await.unwrap();
    let alice = Scope::User(world.alice);
    let refused = db.exchange(alice, &BROKEN, &[]).await.unwrap_err();
    assert!(refused.to_string().contains("no_such_table"), "{refused}");
    documents(&db, world.alice).await;

    // A new connection tries to prepare both, fails on one, and still
    // opens: the pool and the other statement go on working.
    let old = db.pool().acquire().await.unwrap().detach();
    sqlx::Connection::close(old).await.unwrap();
    assert_eq!(documents(&db, world.alice).await.len(), 1);
    assert!(db.exchange(alice, &BROKEN, &[]).await.is_err());
    assert_eq!(identity_now(&db).await, "/");
    test.destroy().await.unwrap();
}

#[tokio::test]
async fn two_statements_may_not_share_a_name() {
    let test = TestDatabase::create().await;
    let world = populate(&test.db).await;
    let alice = Scope::User(world.alice);
    test.db
        .exchange(
            alice,
            &ECHO,
            &[Param::Text("a"), Param::Bool(true), Param::Int(1)],
        )
        .await
        .unwrap();
    let refused = test
        .db
        .exchange(alice, &ECHO_AGAIN, &[Param::Text("a")])
        .await
        .unwrap_err();
    assert!(refused.to_string().contains("dp_test_echo"), "{refused}");
    test.destroy().await.unwrap();
}
