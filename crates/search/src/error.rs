//! The one error type of the search crate.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum SearchError {
    #[error("keyword index error: {0}")]
    Tantivy(#[from] tantivy::TantivyError),
    #[error("keyword index at {path} is in use by another writer")]
    Locked { path: PathBuf },
    #[error("cannot prepare keyword index directory {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The commit payload is not one this code wrote.
    #[error("keyword index commit payload {0:?} is not a sequence number")]
    Payload(String),
    #[error(
        "chunk {chunk_id} belongs to document {actual}, not to document {expected} it was indexed under"
    )]
    ChunkDocumentMismatch {
        chunk_id: i64,
        expected: uuid::Uuid,
        actual: uuid::Uuid,
    },
    #[error("change-log sequence number {0} is negative")]
    NegativeSeq(i64),
    #[error("keyword search window of {0} hits exceeds the maximum of {max}", max = crate::MAX_WINDOW)]
    WindowTooLarge(usize),
    /// Reading the change log or the chunks from PostgreSQL failed.
    #[error(transparent)]
    Store(#[from] data_plane_store::StoreError),
    #[error("{0}")]
    Internal(String),
}
