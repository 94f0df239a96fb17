//! Configuration from flags and the environment, with local defaults.

use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::{Args, ValueEnum};
use data_plane_agent::AgentConfig;
use data_plane_embed::{EmbedConfig, Provider};
use data_plane_handlers::{ModelSettings, SubAgentLimits};

#[derive(Debug, Clone, Args)]
pub struct GlobalArgs {
    /// PostgreSQL URL of the server's role (no BYPASSRLS, owns no tables).
    #[arg(
        long,
        env = "DATABASE_URL",
        global = true,
        default_value = "postgres://data_plane_app:data_plane_app@127.0.0.1:5432/data_plane"
    )]
    pub database_url: String,

    /// PostgreSQL URL of the role that owns the schema; used only to migrate.
    #[arg(
        long,
        env = "DATABASE_OWNER_URL",
        global = true,
        default_value = "postgres://data_plane_owner:data_plane_owner@127.0.0.1:5432/data_plane"
    )]
    pub owner_url: String,

    /// Directory for the keyword index, the model and generated secrets.
    #[arg(
        long,
        env = "DATA_PLANE_DATA_DIR",
        global = true,
        default_value = ".data"
    )]
    pub data_dir: PathBuf,

    /// Tokens of internal services, as `name=token,name=token` (each token at
    /// least 24 characters). A service acts for the user it names.
    #[arg(
        long,
        env = "DATA_PLANE_SERVICE_TOKENS",
        global = true,
        default_value = "",
        hide_env_values = true,
        hide_default_value = true
    )]
    pub service_tokens: String,

    /// Largest number of PostgreSQL connections the server opens.
    #[arg(long, env = "DATA_PLANE_DB_POOL", global = true, default_value_t = 32)]
    pub db_pool: u32,

    /// Log format.
    #[arg(long, env = "DATA_PLANE_LOG_FORMAT", global = true, value_enum, default_value_t = LogFormat::Human)]
    pub log_format: LogFormat,

    #[command(flatten)]
    pub embedding: EmbeddingArgs,

    #[command(flatten)]
    pub language_model: LanguageModelArgs,
}

/// The chat model behind analyze_document and query_documents' questions.
#[derive(Debug, Clone, Args)]
pub struct LanguageModelArgs {
    /// Base URL of the OpenAI-compatible chat endpoint, up to `/v1`.
    #[arg(
        long,
        env = "OPENAI_BASE_URL",
        global = true,
        default_value = "https://api.openai.com/v1"
    )]
    pub openai_base_url: String,

    /// API key for the chat endpoint (local servers often need none).
    #[arg(long, env = "OPENAI_API_KEY", global = true, hide_env_values = true)]
    pub openai_api_key: Option<String>,

    /// Chat model name; unset: no model, so analyze_document and questions
    /// to query_documents answer that none is configured.
    #[arg(long, env = "DATA_PLANE_MODEL", global = true)]
    pub model: Option<String>,

    /// Model requests one analyze_document sub-agent may make.
    #[arg(
        long,
        env = "DATA_PLANE_ANALYZE_MAX_STEPS",
        global = true,
        default_value_t = 8
    )]
    pub analyze_max_steps: u32,

    /// Tokens (prompt and completion) one analyze_document sub-agent may spend.
    #[arg(
        long,
        env = "DATA_PLANE_ANALYZE_TOKEN_BUDGET",
        global = true,
        default_value_t = 60_000
    )]
    pub analyze_token_budget: u64,
}

impl LanguageModelArgs {
    /// The model settings, or `None` when no model is named.
    pub fn settings(&self) -> Option<ModelSettings> {
        let model = self
            .model
            .as_deref()
            .map(str::trim)
            .filter(|m| !m.is_empty())?;
        let mut agent = AgentConfig::new(self.openai_base_url.clone(), model);
        agent.api_key = self.openai_api_key.clone().filter(|k| !k.is_empty());
        Some(ModelSettings {
            agent,
            sub_agent: SubAgentLimits {
                max_steps: self.analyze_max_steps.max(1),
                token_budget: self.analyze_token_budget,
            },
        })
    }
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum LogFormat {
    Human,
    Json,
}

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

impl GlobalArgs {
    pub fn index_dir(&self) -> PathBuf {
        self.data_dir.join("index")
    }

    pub fn embed_config(&self) -> EmbedConfig {
        let e = &self.embedding;
        match e.embedding_provider {
            EmbeddingProvider::Local => {
                let dir = e
                    .model_dir
                    .clone()
                    .unwrap_or_else(|| self.data_dir.join("model").join("all-MiniLM-L6-v2"));
                let mut config = EmbedConfig::local(dir);
                if let Provider::Local { threads, .. } = &mut config.provider {
                    *threads = e.embedding_threads;
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

/// Reads the JWT secret from DATA_PLANE_JWT_SECRET, or from DATA_DIR/jwt_secret,
/// generating that file (mode 0600) on first use.
pub fn jwt_secret(data_dir: &Path) -> anyhow::Result<Vec<u8>> {
    if let Ok(secret) = std::env::var("DATA_PLANE_JWT_SECRET")
        && !secret.is_empty()
    {
        return Ok(secret.into_bytes());
    }
    let path = data_dir.join("jwt_secret");
    match std::fs::read(&path) {
        Ok(bytes) if bytes.len() >= 32 => return Ok(bytes),
        Ok(_) => anyhow::bail!(
            "{} is shorter than 32 bytes; delete it to generate a new one",
            path.display()
        ),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    }
    std::fs::create_dir_all(data_dir)
        .with_context(|| format!("creating {}", data_dir.display()))?;
    let secret: [u8; 32] = rand::random();
    let encoded = hex::encode(secret).into_bytes();
    write_private(&path, &encoded)?;
    tracing::info!(path = %path.display(), "generated a new JWT secret");
    Ok(encoded)
}

#[cfg(unix)]
fn write_private(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("creating {}", path.display()))?;
    file.write_all(bytes)?;
    Ok(())
}

#[cfg(not(unix))]
fn write_private(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    std::fs::write(path, bytes).with_context(|| format!("creating {}", path.display()))
}

pub fn init_tracing(args: &GlobalArgs) {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new("info,sqlx=warn,tantivy=warn,hyper=warn"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match args.log_format {
        LogFormat::Human => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}
