//! The crate's one error type.

use std::path::PathBuf;

/// Everything that can go wrong while loading a model or embedding text.
#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    #[error(
        "embedding model file {path} not found; run `make setup` to put all-MiniLM-L6-v2 in the model directory, or point the model directory setting at a copy"
    )]
    ModelFileMissing { path: PathBuf },

    #[error("cannot read embedding model file {path}: {reason}")]
    ModelFile { path: PathBuf, reason: String },

    #[error("invalid embedding configuration: {0}")]
    InvalidConfig(String),

    #[error("tokenizer failed on the input text: {0}")]
    Tokenize(String),

    #[error("embedding model inference failed: {0}")]
    Inference(String),

    #[error("embedding worker stopped before finishing: {0}")]
    Worker(String),

    #[error(
        "embedding model {model} returned vectors of dimension {actual} but {expected} is configured"
    )]
    DimensionMismatch {
        model: String,
        expected: usize,
        actual: usize,
    },

    #[error("embeddings request to {url} failed: {reason}")]
    Request { url: String, reason: String },

    #[error("embeddings endpoint {url} answered HTTP {status}: {body}")]
    Http {
        url: String,
        status: u16,
        body: String,
    },

    #[error("embeddings endpoint {url} sent an unusable response: {reason}")]
    InvalidResponse { url: String, reason: String },
}
