//! Runs the SQL files in `migrations/` (embedded at build time) as the owner role.

use sqlx::postgres::PgPoolOptions;

use crate::StoreError;

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../../migrations");

/// Applies every pending migration, connecting with the owner's URL.
pub async fn run(owner_url: &str) -> Result<usize, StoreError> {
    let pool = PgPoolOptions::new()
        .max_connections(1)
        .connect(owner_url)
        .await?;
    let before: i64 = applied_count(&pool).await;
    MIGRATOR.run(&pool).await?;
    let after: i64 = applied_count(&pool).await;
    pool.close().await;
    Ok(usize::try_from(after - before).unwrap_or(0))
}

/// The migrations compiled into this binary.
pub fn migrator() -> &'static sqlx::migrate::Migrator {
    &MIGRATOR
}

async fn applied_count(pool: &sqlx::PgPool) -> i64 {
    // The table does not exist before the first run; zero is right then.
    sqlx::query_scalar("SELECT count(*) FROM _sqlx_migrations WHERE success")
        .fetch_one(pool)
        .await
        .unwrap_or(0)
}
