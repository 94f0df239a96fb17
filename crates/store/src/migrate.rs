//! Runs the SQL files in `migrations/` (embedded at build time by
//! `build.rs`) as the owner role.

use std::borrow::Cow;
use std::sync::LazyLock;

use sqlx::migrate::{Migration, MigrationType, Migrator};
use sqlx::postgres::PgPoolOptions;

use crate::StoreError;

/// `(file name, SQL)` of every migration, in name order.
const FILES: &[(&str, &str)] = include!(concat!(env!("OUT_DIR"), "/migrations.rs"));

/// The migrations as sqlx reads a folder of them: `NNNN_words.sql` is
/// version NNNN described as "words", checksummed over its SQL, and run
/// outside a transaction when its first line says `-- no-transaction`.
static MIGRATOR: LazyLock<Migrator> = LazyLock::new(|| Migrator {
    migrations: Cow::Owned(
        FILES
            .iter()
            .filter_map(|(name, sql)| migration(name, sql))
            .collect(),
    ),
    ..Migrator::DEFAULT
});

fn migration(name: &'static str, sql: &'static str) -> Option<Migration> {
    let stem = name.strip_suffix(".sql")?;
    let (version, words) = stem.split_once('_')?;
    Some(Migration::new(
        version.parse().ok()?,
        Cow::Owned(words.replace('_', " ")),
        MigrationType::from_filename(name),
        Cow::Borrowed(sql),
        sql.starts_with("-- no-transaction"),
    ))
}

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
pub fn migrator() -> &'static Migrator {
    &MIGRATOR
}

async fn applied_count(pool: &sqlx::PgPool) -> i64 {
    // The table does not exist before the first run; zero is right then.
    sqlx::query_scalar("SELECT count(*) FROM _sqlx_migrations WHERE success")
        .fetch_one(pool)
        .await
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_file_is_a_migration_in_order() {
        let versions: Vec<i64> = migrator().iter().map(|m| m.version).collect();
        assert_eq!(
            versions.len(),
            FILES.len(),
            "a file name sqlx would not read"
        );
        assert!(versions.is_sorted_by(|a, b| a < b), "{versions:?}");
        assert_eq!(versions[0], 1);
        let first = migrator().iter().next().map(|m| m.description.to_string());
        assert_eq!(first.as_deref(), Some("extensions and roles"));
    }
}
