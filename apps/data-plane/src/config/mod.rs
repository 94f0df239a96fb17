//! Configuration from flags and the environment, with local defaults: the
//! flags every command shares here, each subsystem's in its own file.

mod embedding;
mod gate;
mod limits;
mod logging;
mod model;
mod modules;
mod oidc;
mod origins;
mod rerank;
mod runs;
mod secrets;
mod web_search;

pub use embedding::{EmbeddingArgs, EmbeddingProvider};
pub use gate::GateArgs;
pub use limits::{ExtractArgs, FetchArgs, LimitArgs};
pub use logging::{LogColor, LogFormat, init_tracing};
pub use model::{ModelArgs, is_local_url};
pub use modules::ModuleArgs;
pub use oidc::OidcArgs;
pub use origins::LOOPBACK_ORIGINS;
pub use rerank::RerankArgs;
pub use runs::RunArgs;
pub use secrets::jwt_secret;
pub use web_search::WebSearchArgs;

use std::path::PathBuf;

use clap::Args;

#[derive(Debug, Clone, Args)]
pub struct GlobalArgs {
    /// PostgreSQL URL of the server's role (no BYPASSRLS, owns no tables).
    #[arg(
        long,
        env = "DATABASE_URL",
        global = true,
        default_value = "postgres://data_plane_app:data_plane_app@127.0.0.1:5432/data_plane?sslmode=disable"
    )]
    pub database_url: String,

    /// PostgreSQL URL of the role that owns the schema; used only to migrate.
    #[arg(
        long,
        env = "DATABASE_OWNER_URL",
        global = true,
        default_value = "postgres://data_plane_owner:data_plane_owner@127.0.0.1:5432/data_plane?sslmode=disable"
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

    /// Milliseconds the keyword index gathers changes before its next
    /// commit while changes keep coming (an ingest commits document after
    /// document); a change after a quiet spell is applied at once. `0`
    /// commits after every change, at several times the CPU.
    #[arg(
        long,
        env = "DATA_PLANE_INDEX_BATCH_MS",
        global = true,
        default_value_t = 1000,
        value_parser = clap::value_parser!(u64).range(0..=60_000)
    )]
    pub index_batch_ms: u64,

    /// Largest number of PostgreSQL connections the server opens.
    #[arg(long, env = "DATA_PLANE_DB_POOL", global = true, default_value_t = 32)]
    pub db_pool: u32,

    /// Log format.
    #[arg(long, env = "DATA_PLANE_LOG_FORMAT", global = true, value_enum, default_value_t = LogFormat::Human)]
    pub log_format: LogFormat,

    /// Colour in human-readable logs: `auto` (only when the log goes to a
    /// terminal and NO_COLOR is not set), `always` or `never`. JSON logs
    /// never have colour.
    #[arg(long, env = "DATA_PLANE_LOG_COLOR", global = true, value_enum, default_value_t = LogColor::Auto)]
    pub log_color: LogColor,

    /// Browser origins that may call /mcp, comma-separated
    /// (`https://app.example.com`, `http://localhost:*` for any port,
    /// `null`); a request with another `Origin` is refused 403, one without
    /// passes. Unset: this machine's origins; `*`: any.
    #[arg(
        long,
        env = "DATA_PLANE_ALLOWED_ORIGINS",
        global = true,
        default_value = ""
    )]
    pub allowed_origins: String,

    /// The URL clients reach this server at (`https://data.example.com`),
    /// for the metadata that tells MCP clients how to sign in. Unset: the
    /// request's own Host (and X-Forwarded-Proto).
    #[arg(long, env = "DATA_PLANE_PUBLIC_URL", global = true)]
    pub public_url: Option<String>,

    #[command(flatten)]
    pub embedding: EmbeddingArgs,

    #[command(flatten)]
    pub model: ModelArgs,

    #[command(flatten)]
    pub fetch: FetchArgs,

    #[command(flatten)]
    pub web_search: WebSearchArgs,

    #[command(flatten)]
    pub rerank: RerankArgs,

    #[command(flatten)]
    pub limits: LimitArgs,

    #[command(flatten)]
    pub extract: ExtractArgs,

    #[command(flatten)]
    pub gate: GateArgs,

    #[command(flatten)]
    pub modules: ModuleArgs,

    #[command(flatten)]
    pub runs: RunArgs,

    #[command(flatten)]
    pub oidc: OidcArgs,
}

impl GlobalArgs {
    /// The browser origins `/mcp` answers (`None`: any); a malformed entry
    /// stops start-up, naming it.
    pub fn allowed_origins(&self) -> anyhow::Result<Option<Vec<String>>> {
        origins::allowed_origins(&self.allowed_origins)
    }

    pub fn index_dir(&self) -> PathBuf {
        self.data_dir.join("index")
    }
}
