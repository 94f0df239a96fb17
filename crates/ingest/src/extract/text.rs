//! Plain text, and the byte decoding every text-based format shares.

use data_plane_extract::charset::{self, Hints};

use crate::IngestError;
use crate::metadata::{self, DocMetadata, Extracted};

pub(super) fn extract(file_name: &str, bytes: &[u8]) -> Result<Extracted, IngestError> {
    let text = decode(file_name, bytes)?;
    let metadata = DocMetadata {
        format: "text".to_string(),
        ..DocMetadata::default()
    };
    let metadata = metadata::finish(metadata, &text, &[]);
    Ok(Extracted {
        mime: "text/plain".to_string(),
        text,
        metadata,
        tables: Vec::new(),
    })
}

/// Bytes to canonical text, as data-plane-extract decodes an uploaded file: a byte-order mark
/// wins, then UTF-8, then the legacy encoding chardetng finds most likely; binary data is
/// refused, line endings become `\n` and NULs are dropped.
pub(crate) fn decode(file_name: &str, bytes: &[u8]) -> Result<String, IngestError> {
    charset::decode_strict(bytes, Hints::default())
        .map_err(|e| IngestError::corrupt(file_name, e.to_string()))
}
