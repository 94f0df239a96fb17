//! Run-time settings: one JSON value per key, changed by admins. Each
//! replica caches them under a lease (migration 0021): a change counts as
//! made once every live replica has heard it, so every replica applies it
//! on its next request.

use std::collections::BTreeMap;

use std::time::Duration;

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

/// The settings' version now: every statement that writes them bumps it
/// (in its own transaction, so `tx` sees its own writes' number).
pub async fn version(tx: &mut ScopedTx) -> Result<i64, StoreError> {
    Ok(sqlx::query_scalar("SELECT version FROM settings_version")
        .fetch_one(&mut **tx)
        .await?)
}

/// Every stored setting and the version they make up, from one snapshot.
pub async fn load_versioned(
    tx: &mut ScopedTx,
) -> Result<(i64, BTreeMap<String, Value>), StoreError> {
    let rows: Vec<(i64, Option<String>, Option<Value>)> = sqlx::query_as(
        "SELECT v.version, s.key, s.value FROM settings_version v LEFT JOIN settings s ON true",
    )
    .fetch_all(&mut **tx)
    .await?;
    let version = rows.first().map_or(0, |r| r.0);
    let values = rows
        .into_iter()
        .filter_map(|(_, key, value)| Some((key?, value?)))
        .collect();
    Ok((version, values))
}

/// Records that `replica` holds version `heard` and may serve it from its
/// cache for `lease` from the transaction's start. Needs a system
/// transaction.
pub async fn renew_lease(
    tx: &mut ScopedTx,
    replica: Uuid,
    heard: i64,
    lease: Duration,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO settings_replicas (replica, heard, alive_until)
         VALUES ($1, $2, now() + make_interval(secs => $3))
         ON CONFLICT (replica) DO UPDATE
            SET heard = greatest(settings_replicas.heard, EXCLUDED.heard),
                alive_until = EXCLUDED.alive_until",
    )
    .bind(replica)
    .bind(heard)
    .bind(lease.as_secs_f64())
    .execute(&mut **tx)
    .await?;
    // Leases that ended long ago belong to replicas that are gone.
    sqlx::query("DELETE FROM settings_replicas WHERE alive_until < now() - interval '1 hour'")
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// Gives up `replica`'s lease (a replica shutting down). Needs a system
/// transaction.
pub async fn end_lease(tx: &mut ScopedTx, replica: Uuid) -> Result<(), StoreError> {
    sqlx::query("DELETE FROM settings_replicas WHERE replica = $1")
        .bind(replica)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// How many leases still hold a version older than `version`, counting
/// those that ended less than `grace` ago. Needs a system transaction.
pub async fn leases_behind(
    tx: &mut ScopedTx,
    version: i64,
    grace: Duration,
) -> Result<i64, StoreError> {
    Ok(sqlx::query_scalar(
        "SELECT count(*) FROM settings_replicas
          WHERE alive_until + make_interval(secs => $2) > clock_timestamp() AND heard < $1",
    )
    .bind(version)
    .bind(grace.as_secs_f64())
    .fetch_one(&mut **tx)
    .await?)
}
