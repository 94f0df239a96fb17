//! The level of MCP log notifications each caller asked for
//! (`logging/setLevel`): kept here because the endpoint keeps no session,
//! so any replica answering the caller's next call finds it.

use uuid::Uuid;

use crate::{ScopedTx, StoreError};

/// The level `user` (through `service`, or their own token: `""`) last
/// set, as MCP names it (`debug` … `emergency`).
pub async fn get(
    tx: &mut ScopedTx,
    user: Uuid,
    service: &str,
) -> Result<Option<String>, StoreError> {
    let level =
        sqlx::query_scalar("SELECT level FROM mcp_log_levels WHERE user_id = $1 AND service = $2")
            .bind(user)
            .bind(service)
            .fetch_optional(&mut **tx)
            .await?;
    Ok(level)
}

/// Sets it, replacing the one before.
pub async fn set(
    tx: &mut ScopedTx,
    user: Uuid,
    service: &str,
    level: &str,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO mcp_log_levels (user_id, service, level) VALUES ($1, $2, $3)
         ON CONFLICT (user_id, service) DO UPDATE SET level = EXCLUDED.level, set_at = now()",
    )
    .bind(user)
    .bind(service)
    .bind(level)
    .execute(&mut **tx)
    .await?;
    Ok(())
}
