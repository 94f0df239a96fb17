//! search_documents' optional rerank stage: a cross-encoder behind the rerank
//! API of llama.cpp's server, Cohere, Jina or text-embeddings-inference.

use std::time::Duration;

use clap::{Args, ValueEnum};
use data_plane_embed::{RerankApi, RerankConfig, Reranker};
use data_plane_handlers::Rerank;

#[derive(Debug, Clone, Args)]
pub struct RerankArgs {
    /// The rerank endpoint itself (`http://127.0.0.1:8012/v1/rerank`);
    /// unset, search ranks by fusion alone.
    #[arg(long, env = "DATA_PLANE_RERANK_URL", global = true)]
    pub rerank_url: Option<String>,

    /// Model name sent with each request (Cohere and Jina need one).
    #[arg(long, env = "DATA_PLANE_RERANK_MODEL", global = true)]
    pub rerank_model: Option<String>,

    /// API key, sent as a bearer token.
    #[arg(
        long,
        env = "DATA_PLANE_RERANK_API_KEY",
        global = true,
        hide_env_values = true
    )]
    pub rerank_api_key: Option<String>,

    /// The request form: `cohere` (`documents`, as llama.cpp, Cohere and
    /// Jina take) or `tei` (`texts`, text-embeddings-inference).
    #[arg(long, env = "DATA_PLANE_RERANK_API", global = true, value_enum, default_value_t = RerankApiArg::Cohere)]
    pub rerank_api: RerankApiArg,

    /// How many of the best fused candidates are reordered (at least the
    /// answer's length).
    #[arg(
        long,
        env = "DATA_PLANE_RERANK_TOP_N",
        global = true,
        default_value_t = 30,
        value_parser = clap::value_parser!(u64).range(1..=200)
    )]
    pub rerank_top_n: u64,

    /// Milliseconds one rerank request may take before the answer goes out
    /// in fused order (at most 10 s, well inside search's own time limit,
    /// so a slow reranker never fails the search).
    #[arg(
        long,
        env = "DATA_PLANE_RERANK_TIMEOUT_MS",
        global = true,
        default_value_t = 3000,
        value_parser = clap::value_parser!(u64).range(1..=10_000)
    )]
    pub rerank_timeout_ms: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum RerankApiArg {
    Cohere,
    Tei,
}

impl RerankArgs {
    /// The rerank stage, when a URL is set; a bad URL stops start-up.
    pub fn rerank(&self) -> anyhow::Result<Option<Rerank>> {
        let Some(url) = self.rerank_url.as_deref().filter(|u| !u.trim().is_empty()) else {
            return Ok(None);
        };
        let reranker = Reranker::new(RerankConfig {
            url: url.to_string(),
            model: self.rerank_model.clone().filter(|m| !m.trim().is_empty()),
            api_key: self.rerank_api_key.clone().filter(|k| !k.is_empty()),
            api: match self.rerank_api {
                RerankApiArg::Cohere => RerankApi::Cohere,
                RerankApiArg::Tei => RerankApi::Tei,
            },
            timeout: Duration::from_millis(self.rerank_timeout_ms),
        })
        .map_err(|e| anyhow::anyhow!("DATA_PLANE_RERANK_URL: {e}"))?;
        Ok(Some(Rerank {
            reranker,
            candidates: self.rerank_top_n as usize,
        }))
    }
}
