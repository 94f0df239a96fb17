//! Sentence embeddings for chunks and queries: the local all-MiniLM-L6-v2 model
//! read from files, or any OpenAI-compatible embeddings endpoint; and the
//! optional reranker search asks over HTTP (`rerank.rs`).
//!
//! Every vector that leaves this crate is L2-normalised, so cosine similarity
//! is a plain dot product and pgvector's inner-product operators can be used.

mod attention;
mod bert;
mod error;
mod few_rows;
mod int8;
mod kernels;
mod local;
mod remote;
mod rerank;
mod vector;

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

pub use error::EmbedError;
pub use local::LocalEmbedder;
pub use remote::RemoteEmbedder;
pub use rerank::{RerankApi, RerankConfig, RerankError, RerankScore, Reranker};
pub use vector::{cosine, normalise};

/// Deterministic values in [-1, 1) for the engine's unit tests (a linear
/// congruential sequence from `seed`).
#[cfg(test)]
pub(crate) fn test_values(seed: u32) -> impl FnMut() -> f32 {
    let mut state = seed;
    move || {
        state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
        (state >> 8) as f32 / (1u32 << 23) as f32 - 1.0
    }
}

/// Dimension of the vectors produced by the default local model, all-MiniLM-L6-v2.
pub const DIMENSION: usize = 384;

/// Longest input the local model reads, in word pieces including `[CLS]` and
/// `[SEP]`; all-MiniLM-L6-v2 was trained with this limit and text beyond it
/// is ignored, exactly as sentence-transformers does.
pub const DEFAULT_MAX_TOKENS: usize = 256;

/// Texts per forward pass of the local model. Texts are packed without
/// padding, so this only bounds activation memory and sets GEMM sizes;
/// 8 to 64 measured within noise of each other (docs/embeddings.md).
pub const DEFAULT_LOCAL_BATCH_SIZE: usize = 16;

/// Texts per request to a remote endpoint; OpenAI accepts up to 2048.
pub const DEFAULT_REMOTE_BATCH_SIZE: usize = 128;

/// The arithmetic of the local model's dense layers (docs/embeddings.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Precision {
    /// 8-bit integers where a fast kernel runs (x86-64-v3: AVX2, FMA, BMI2…;
    /// the VNNI kernel on CPUs of the Ice Lake / Zen 4 level, AVX-512 with
    /// VNNI, VBMI2 and GFNI, `archmage`'s x86-64-v4x), 32-bit floats
    /// elsewhere.
    #[default]
    Auto,
    /// 32-bit floats throughout.
    Float32,
    /// 8-bit weights and activations on every CPU; below x86-64-v3 a portable
    /// kernel gives the same dense-layer results, more slowly than
    /// `Float32`.
    Int8,
}

/// Which embedding engine to use and how.
#[derive(Debug, Clone)]
pub struct EmbedConfig {
    pub provider: Provider,
}

impl EmbedConfig {
    /// The local model in `model_dir` with the measured defaults.
    pub fn local(model_dir: impl Into<PathBuf>) -> Self {
        Self {
            provider: Provider::Local {
                model_dir: model_dir.into(),
                threads: None,
                batch_size: DEFAULT_LOCAL_BATCH_SIZE,
                max_tokens: DEFAULT_MAX_TOKENS,
                precision: Precision::default(),
            },
        }
    }

    /// An OpenAI-compatible endpoint with a 60 s timeout and batches of 128.
    pub fn open_ai(
        base_url: impl Into<String>,
        api_key: Option<String>,
        model: impl Into<String>,
        dimension: usize,
    ) -> Self {
        Self {
            provider: Provider::OpenAi {
                base_url: base_url.into(),
                api_key,
                model: model.into(),
                dimension,
                batch_size: DEFAULT_REMOTE_BATCH_SIZE,
                timeout: Duration::from_secs(60),
            },
        }
    }
}

/// The embedding engine.
#[derive(Clone)]
pub enum Provider {
    /// A BERT sentence-transformer (all-MiniLM-L6-v2) read from `model_dir`,
    /// which must hold `config.json`, `model.safetensors` and `tokenizer.json`.
    Local {
        model_dir: PathBuf,
        /// Compute threads; `None` uses one per physical core.
        threads: Option<usize>,
        batch_size: usize,
        max_tokens: usize,
        precision: Precision,
    },
    /// `POST {base_url}/embeddings` in OpenAI's wire format.
    OpenAi {
        base_url: String,
        api_key: Option<String>,
        model: String,
        dimension: usize,
        batch_size: usize,
        timeout: Duration,
    },
}

// Written by hand so that the API key never reaches a log line.
impl fmt::Debug for Provider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Local {
                model_dir,
                threads,
                batch_size,
                max_tokens,
                precision,
            } => f
                .debug_struct("Local")
                .field("model_dir", model_dir)
                .field("threads", threads)
                .field("batch_size", batch_size)
                .field("max_tokens", max_tokens)
                .field("precision", precision)
                .finish(),
            Self::OpenAi {
                base_url,
                api_key,
                model,
                dimension,
                batch_size,
                timeout,
            } => f
                .debug_struct("OpenAi")
                .field("base_url", base_url)
                .field("api_key", &api_key.as_ref().map(|_| "<redacted>"))
                .field("model", model)
                .field("dimension", dimension)
                .field("batch_size", batch_size)
                .field("timeout", timeout)
                .finish(),
        }
    }
}

/// A loaded embedding engine; cheap to clone and share between tasks.
#[derive(Debug, Clone)]
pub enum Embedder {
    Local(LocalEmbedder),
    Remote(RemoteEmbedder),
}

impl Embedder {
    /// Loads the local model or prepares the HTTP client; does no network IO.
    pub fn from_config(config: &EmbedConfig) -> Result<Self, EmbedError> {
        match &config.provider {
            Provider::Local {
                model_dir,
                threads,
                batch_size,
                max_tokens,
                precision,
            } => LocalEmbedder::load(model_dir, *threads, *batch_size, *max_tokens, *precision)
                .map(Self::Local),
            Provider::OpenAi {
                base_url,
                api_key,
                model,
                dimension,
                batch_size,
                timeout,
            } => RemoteEmbedder::new(
                base_url,
                api_key.clone(),
                model,
                *dimension,
                *batch_size,
                *timeout,
            )
            .map(Self::Remote),
        }
    }

    /// One L2-normalised vector per text, in the order of `texts`.
    pub async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        match self {
            Self::Local(local) => local.embed(texts).await,
            Self::Remote(remote) => remote.embed(texts).await,
        }
    }

    /// The vector of a single search query.
    pub async fn embed_query(&self, text: &str) -> Result<Vec<f32>, EmbedError> {
        let mut vectors = self.embed(&[text.to_owned()]).await?;
        vectors
            .pop()
            .ok_or_else(|| EmbedError::Worker("no vector came back for the query".to_owned()))
    }

    /// Length of every vector this embedder returns.
    pub fn dimension(&self) -> usize {
        match self {
            Self::Local(local) => local.dimension(),
            Self::Remote(remote) => remote.dimension(),
        }
    }

    /// Name of the model, stored next to vectors so a change of model can be detected.
    pub fn model_id(&self) -> &str {
        match self {
            Self::Local(local) => local.model_id(),
            Self::Remote(remote) => remote.model_id(),
        }
    }
}
