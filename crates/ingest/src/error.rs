//! The one error type of the ingest crate.

use thiserror::Error;

#[derive(Debug, Error)]
pub enum IngestError {
    /// The file's extension names a format this crate does not read.
    #[error("file {file:?} has unsupported extension {extension:?} (supported: {supported})", supported = crate::supported_extensions().join(", "))]
    Unsupported { file: String, extension: String },

    /// The file could not be read from where it lies.
    #[error("file {file:?} cannot be opened: {reason}")]
    Unreadable { file: String, reason: String },

    /// The bytes do not form a valid file of the format the name promises.
    #[error("file {file:?} cannot be read: {reason}")]
    Corrupt { file: String, reason: String },

    /// The file breaks an extraction limit (a decompression bomb, too much text, too slow).
    #[error("file {file:?} refused: {source}")]
    Limit {
        file: String,
        source: data_plane_extract::LimitError,
    },

    /// The database refused or failed the write.
    #[error(transparent)]
    Store(#[from] data_plane_store::StoreError),

    /// The embedding model or endpoint failed.
    #[error("embedding failed: {0}")]
    Embed(#[from] data_plane_embed::EmbedError),

    /// A failure that says nothing about the file itself (a worker that died, a limit of the store).
    #[error("internal ingest failure: {0}")]
    Internal(String),
}

impl IngestError {
    /// True when the error concerns this file only, so a batch should report
    /// it and go on; false when the next file would fail the same way (the
    /// database or the embedding model is down).
    pub fn is_per_file(&self) -> bool {
        match self {
            IngestError::Unsupported { .. }
            | IngestError::Unreadable { .. }
            | IngestError::Corrupt { .. }
            | IngestError::Limit { .. } => true,
            IngestError::Store(e) => matches!(e, data_plane_store::StoreError::Invalid(_)),
            IngestError::Embed(_) | IngestError::Internal(_) => false,
        }
    }

    pub(crate) fn limit(file: &str, source: data_plane_extract::LimitError) -> Self {
        IngestError::Limit {
            file: file.to_string(),
            source,
        }
    }

    pub(crate) fn corrupt(file: &str, reason: impl Into<String>) -> Self {
        IngestError::Corrupt {
            file: file.to_string(),
            reason: reason.into(),
        }
    }
}
