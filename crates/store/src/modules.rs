//! Remote modules' manifests as last discovered, one row per module, shared
//! by every replica; a change is announced on [`MODULES_CHANNEL`].

use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::{Db, Scope, StoreError};

/// Where a changed row's module name is announced (`pg_notify`).
pub const MODULES_CHANNEL: &str = "data_plane_modules";

/// One module's row.
#[derive(Debug, Clone, PartialEq)]
pub struct ManifestRow {
    pub module: String,
    pub url: String,
    /// The manifest as the module answered it; `None` until one was read.
    pub manifest: Option<Value>,
    pub fetched_at: Option<DateTime<Utc>>,
    pub attempted_at: DateTime<Utc>,
    /// Why the last attempt failed; `None` when it succeeded.
    pub last_error: Option<String>,
}
crate::from_row!(ManifestRow {
    module,
    url,
    manifest,
    fetched_at,
    attempted_at,
    last_error
});

const COLUMNS: &str = "module, url, manifest, fetched_at, attempted_at, last_error";

/// Every module's row.
pub async fn load_all(db: &Db) -> Result<Vec<ManifestRow>, StoreError> {
    Ok(sqlx::query_as(&format!(
        "SELECT {COLUMNS} FROM module_manifests ORDER BY module"
    ))
    .fetch_all(db.pool())
    .await?)
}

/// One module's row, if it has one.
pub async fn load(db: &Db, module: &str) -> Result<Option<ManifestRow>, StoreError> {
    Ok(sqlx::query_as(&format!(
        "SELECT {COLUMNS} FROM module_manifests WHERE module = $1"
    ))
    .bind(module)
    .fetch_optional(db.pool())
    .await?)
}

/// Stores a manifest just read from `url`, unless the row holds one of the
/// same URL fetched later (a slow fetch never replaces a newer one).
pub async fn save_manifest(
    db: &Db,
    module: &str,
    url: &str,
    manifest: &Value,
    fetched_at: DateTime<Utc>,
) -> Result<(), StoreError> {
    let mut tx = db.begin(Scope::System).await?;
    sqlx::query(
        "INSERT INTO module_manifests (module, url, manifest, fetched_at, attempted_at, last_error)
         VALUES ($1, $2, $3, $4, $4, NULL)
         ON CONFLICT (module) DO UPDATE SET url = EXCLUDED.url, manifest = EXCLUDED.manifest,
             fetched_at = EXCLUDED.fetched_at, attempted_at = EXCLUDED.attempted_at, last_error = NULL
         WHERE module_manifests.fetched_at IS NULL
            OR module_manifests.fetched_at < EXCLUDED.fetched_at
            OR module_manifests.url <> EXCLUDED.url",
    )
    .bind(module)
    .bind(url)
    .bind(manifest)
    .bind(fetched_at)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(())
}

/// Records a failed discovery of `url`. The last manifest stays when it
/// came from the same URL (it may still serve until it expires); one from
/// another URL is dropped.
pub async fn save_failure(
    db: &Db,
    module: &str,
    url: &str,
    error: &str,
    attempted_at: DateTime<Utc>,
) -> Result<(), StoreError> {
    let mut tx = db.begin(Scope::System).await?;
    sqlx::query(
        "INSERT INTO module_manifests (module, url, attempted_at, last_error)
         VALUES ($1, $2, $3, $4)
         ON CONFLICT (module) DO UPDATE SET
             manifest = CASE WHEN module_manifests.url = EXCLUDED.url THEN module_manifests.manifest END,
             fetched_at = CASE WHEN module_manifests.url = EXCLUDED.url THEN module_manifests.fetched_at END,
             url = EXCLUDED.url, attempted_at = EXCLUDED.attempted_at, last_error = EXCLUDED.last_error",
    )
    .bind(module)
    .bind(url)
    .bind(attempted_at)
    .bind(error)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(())
}
