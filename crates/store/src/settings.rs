//! Run-time settings: one JSON value per key, changed by admins, read per
//! request so every replica sees a change on its next request.

use std::collections::BTreeMap;

use serde_json::Value;
use uuid::Uuid;

use crate::{ScopedTx, StoreError};

/// Every stored setting.
pub async fn load(tx: &mut ScopedTx) -> Result<BTreeMap<String, Value>, StoreError> {
    let rows: Vec<(String, Value)> = sqlx::query_as("SELECT key, value FROM settings")
        .fetch_all(&mut **tx)
        .await?;
    Ok(rows.into_iter().collect())
}

/// Stores each given setting, replacing its previous value.
pub async fn store(
    tx: &mut ScopedTx,
    values: &BTreeMap<String, Value>,
    by: Option<Uuid>,
) -> Result<(), StoreError> {
    for (key, value) in values {
        sqlx::query(
            "INSERT INTO settings (key, value, updated_at, updated_by) VALUES ($1, $2, now(), $3)
             ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value, updated_at = now(), updated_by = EXCLUDED.updated_by",
        )
        .bind(key)
        .bind(value)
        .bind(by)
        .execute(&mut **tx)
        .await?;
    }
    Ok(())
}

/// Every stored setting, read outside any transaction: settings are not
/// scoped to a user, and this saves a round trip on hot paths.
pub async fn load_unscoped(pool: &sqlx::PgPool) -> Result<BTreeMap<String, Value>, StoreError> {
    let rows: Vec<(String, Value)> = sqlx::query_as("SELECT key, value FROM settings")
        .fetch_all(pool)
        .await?;
    Ok(rows.into_iter().collect())
}
