//! Keyword (BM25) search over chunks: a Tantivy index derived from PostgreSQL,
//! with language-aware stemming, and the fusion of keyword and vector hits.
//!
//! The index follows the ordered change log in PostgreSQL: every commit carries
//! the last log sequence number it includes, so after a crash the index resumes
//! from what it durably holds. It lives outside row-level security; callers
//! must pass the spaces the user may read with every query.

mod error;
pub mod follower;
mod fusion;
mod index;
mod query;
mod schema;

pub use error::SearchError;
pub use fusion::{DEFAULT_RRF_K, FusedHit, Fusion, Scale, reciprocal_rank_fusion};
pub use index::{ChunkDoc, IndexOp, KeywordIndex};
pub use query::{Bm25, FieldWeights, KeywordHit, KeywordQuery, MAX_WINDOW};
pub use schema::is_stemmed_language;
