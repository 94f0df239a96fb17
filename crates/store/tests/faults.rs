//! How the store sorts PostgreSQL's errors for its callers: the request's own
//! values, refusals, conflicts, passing faults and bugs, each provoked for
//! real against the database.

// Test helpers report failure by panicking, like the tests that call them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use data_plane_store::testing::TestDatabase;
use data_plane_store::{Db, Fault, Scope, StoreError, identity, sqlx_fault};
use sqlx::postgres::PgPoolOptions;

async fn fault_of(db: &Db, sql: &str) -> Fault {
    let mut tx = db.begin(Scope::System).await.unwrap();
    let e = sqlx::query(sql).execute(&mut *tx).await.unwrap_err();
    drop(tx);
    StoreError::from(e).fault()
}

#[tokio::test]
async fn the_requests_values_are_invalid_and_a_taken_name_conflicts() {
    let test = TestDatabase::create().await;
    let mut tx = test.db.begin(Scope::System).await.unwrap();
    let e = sqlx::query("SELECT $1::text")
        .bind("a\0b")
        .execute(&mut *tx)
        .await
        .unwrap_err();
    drop(tx);
    let nul = StoreError::from(e).fault();
    assert!(
        matches!(&nul, Fault::Invalid(m) if m.contains("NUL")),
        "{nul:?}"
    );
    let range = fault_of(&test.db, "SELECT 2147483647::int4 + 1").await;
    assert!(
        matches!(&range, Fault::Invalid(m) if m.starts_with("invalid value")),
        "{range:?}"
    );

    let mut tx = test.db.begin(Scope::System).await.unwrap();
    identity::ensure_space(&mut tx, "taken").await.unwrap();
    tx.commit().await.unwrap();
    let taken = fault_of(&test.db, "INSERT INTO spaces (name) VALUES ('taken')").await;
    assert_eq!(taken, Fault::Conflict("already exists".into()));
    let bug = fault_of(&test.db, "SELECT no_such_column FROM spaces").await;
    assert_eq!(bug, Fault::Internal);
    assert!(!StoreError::Invalid("x".into()).is_transient());
    test.destroy().await.unwrap();
}

#[tokio::test]
async fn a_write_row_level_security_refuses_is_denied() {
    let test = TestDatabase::create().await;
    // A user who belongs to no space cannot create a source in one.
    let mut tx = test.db.begin(Scope::System).await.unwrap();
    let (space, _) = identity::ensure_space(&mut tx, "closed").await.unwrap();
    let user = identity::upsert_user(&mut tx, "outsider@example.com", None)
        .await
        .unwrap();
    tx.commit().await.unwrap();
    let mut tx = test.db.begin(Scope::User(user.id)).await.unwrap();
    let e = sqlx::query("INSERT INTO sources (space_id, name, kind) VALUES ($1, 'x', 'upload')")
        .bind(space.id)
        .execute(&mut *tx)
        .await
        .unwrap_err();
    let fault = StoreError::from(e).fault();
    assert!(matches!(fault, Fault::Denied(_)), "{fault:?}");
    drop(tx);
    test.destroy().await.unwrap();
}

#[tokio::test]
async fn a_pool_with_no_free_connection_is_a_passing_fault() {
    let test = TestDatabase::create().await;
    let pool = PgPoolOptions::new()
        .max_connections(1)
        .acquire_timeout(Duration::from_millis(200))
        .connect(&test.app_url)
        .await
        .unwrap();
    let held = pool.acquire().await.unwrap();
    let e = pool.acquire().await.unwrap_err();
    assert_eq!(sqlx_fault(&e), Fault::Transient, "{e}");
    assert!(StoreError::from(e).is_transient());
    drop(held);
    // A connection the server ends is one too (an administrator's
    // pg_terminate_backend, a restart).
    let mut victim = pool.acquire().await.unwrap();
    let pid: i32 = sqlx::query_scalar("SELECT pg_backend_pid()")
        .fetch_one(&mut *victim)
        .await
        .unwrap();
    sqlx::query("SELECT pg_terminate_backend($1)")
        .bind(pid)
        .execute(&test.owner)
        .await
        .unwrap();
    let e = sqlx::query("SELECT 1")
        .execute(&mut *victim)
        .await
        .unwrap_err();
    assert_eq!(sqlx_fault(&e), Fault::Transient, "{e}");
    drop(victim);
    pool.close().await;
    test.destroy().await.unwrap();
}
