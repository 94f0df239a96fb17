//! Reading the ordered change log that the keyword index follows.

use uuid::Uuid;

use crate::{ScopedTx, StoreError};

/// The channel the `documents` trigger notifies on every change.
pub const NOTIFY_CHANNEL: &str = "data_plane_index";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogEntry {
    pub seq: i64,
    pub document_id: Uuid,
    pub space_id: Uuid,
    pub op: String,
}
crate::from_row!(LogEntry {
    seq,
    document_id,
    space_id,
    op
});

/// Entries after `after_seq`, oldest first (system scope).
pub async fn entries_after(
    tx: &mut ScopedTx,
    after_seq: i64,
    limit: i64,
) -> Result<Vec<LogEntry>, StoreError> {
    Ok(sqlx::query_as::<_, LogEntry>(
        "SELECT seq, document_id, space_id, op FROM index_log WHERE seq > $1 ORDER BY seq LIMIT $2",
    )
    .bind(after_seq)
    .bind(limit)
    .fetch_all(&mut **tx)
    .await?)
}

/// The newest sequence number (0 when the log is empty).
pub async fn head(tx: &mut ScopedTx) -> Result<i64, StoreError> {
    Ok(
        sqlx::query_scalar("SELECT coalesce(max(seq), 0) FROM index_log")
            .fetch_one(&mut **tx)
            .await?,
    )
}

/// Every document id that exists now (system scope), for a full rebuild.
pub async fn all_document_ids(tx: &mut ScopedTx) -> Result<Vec<Uuid>, StoreError> {
    Ok(sqlx::query_scalar("SELECT id FROM documents ORDER BY id")
        .fetch_all(&mut **tx)
        .await?)
}
