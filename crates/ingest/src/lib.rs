//! File ingestion: one file's bytes become canonical text, metadata, tables and chunks.
//!
//! Everything but `pipeline` is pure (no database, no network); character offsets everywhere are
//! counted in Unicode scalar values into `Extracted::text`.

mod chunk;
mod error;
mod extract;
pub mod metadata;
mod offsets;
pub mod pipeline;

pub use chunk::{Chunk, ChunkOptions, chunk, embedding_input};
pub use data_plane_extract::{LimitError, Limits};
pub use error::IngestError;
pub use extract::{extract, extract_with, supported_extensions};
pub use metadata::{
    ColumnInfo, ColumnKind, DocMetadata, Extracted, ExtractedTable, Heading, PageSpan, TableSummary,
};
