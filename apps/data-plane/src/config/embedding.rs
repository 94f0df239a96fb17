//! Where embeddings come from: the local model or an OpenAI-compatible endpoint.

use std::path::PathBuf;

use clap::{Args, ValueEnum};
use data_plane_embed::{EmbedConfig, Precision, Provider};

use super::GlobalArgs;

#[derive(Debug, Clone, Args)]
pub struct EmbeddingArgs {
    /// Where embeddings come from: the local model, or an OpenAI-compatible endpoint.
    #[arg(long, env = "DATA_PLANE_EMBEDDING_PROVIDER", global = true, value_enum, default_value_t = EmbeddingProvider::Local)]
    pub embedding_provider: EmbeddingProvider,

    /// Directory with config.json, model.safetensors and tokenizer.json
    /// [default: DATA_DIR/model/all-MiniLM-L6-v2].
    #[arg(long, env = "DATA_PLANE_MODEL_DIR", global = true)]
    pub model_dir: Option<PathBuf>,

    /// Threads the local model may use [default: all cores].
    #[arg(long, env = "DATA_PLANE_EMBEDDING_THREADS", global = true)]
    pub embedding_threads: Option<usize>,

    /// Arithmetic of the local model's dense layers: `auto` (8-bit integers
    /// on CPUs of the Ice Lake / Zen 4 level, float32 elsewhere), `float32`
    /// or `int8` (on any CPU; slower than float32 below that level).
    #[arg(long, env = "DATA_PLANE_EMBEDDING_PRECISION", global = true, value_enum, default_value_t = EmbeddingPrecision::Auto)]
    pub embedding_precision: EmbeddingPrecision,

    /// Base URL of the OpenAI-compatible embeddings endpoint (provider openai).
    #[arg(
        long,
        env = "DATA_PLANE_EMBEDDING_URL",
        global = true,
        default_value = "https://api.openai.com/v1"
    )]
    pub embedding_url: String,

    /// Model name sent to the embeddings endpoint (provider openai).
    #[arg(
        long,
        env = "DATA_PLANE_EMBEDDING_MODEL",
        global = true,
        default_value = "text-embedding-3-small"
    )]
    pub embedding_model: String,

    /// API key for the embeddings endpoint [default: OPENAI_API_KEY].
    #[arg(
        long,
        env = "DATA_PLANE_EMBEDDING_API_KEY",
        global = true,
        hide_env_values = true
    )]
    pub embedding_api_key: Option<String>,

    /// Vector length the endpoint returns; must match the schema (384).
    #[arg(
        long,
        env = "DATA_PLANE_EMBEDDING_DIMENSION",
        global = true,
        default_value_t = 384
    )]
    pub embedding_dimension: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum EmbeddingProvider {
    Local,
    Openai,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum EmbeddingPrecision {
    Auto,
    Float32,
    Int8,
}

impl From<EmbeddingPrecision> for Precision {
    fn from(precision: EmbeddingPrecision) -> Self {
        match precision {
            EmbeddingPrecision::Auto => Self::Auto,
            EmbeddingPrecision::Float32 => Self::Float32,
            EmbeddingPrecision::Int8 => Self::Int8,
        }
    }
}

impl GlobalArgs {
    pub fn embed_config(&self) -> EmbedConfig {
        let e = &self.embedding;
        match e.embedding_provider {
            EmbeddingProvider::Local => {
                let dir = e
                    .model_dir
                    .clone()
                    .unwrap_or_else(|| self.data_dir.join("model").join("all-MiniLM-L6-v2"));
                let mut config = EmbedConfig::local(dir);
                if let Provider::Local {
                    threads, precision, ..
                } = &mut config.provider
                {
                    *threads = e.embedding_threads;
                    *precision = e.embedding_precision.into();
                }
                config
            }
            EmbeddingProvider::Openai => EmbedConfig::open_ai(
                e.embedding_url.clone(),
                e.embedding_api_key
                    .clone()
                    .or_else(|| std::env::var("OPENAI_API_KEY").ok()),
                e.embedding_model.clone(),
                e.embedding_dimension,
            ),
        }
    }
}
