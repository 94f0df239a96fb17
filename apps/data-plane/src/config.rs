//! Configuration from flags and the environment, with local defaults.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, ValueEnum};
use data_plane_embed::{EmbedConfig, Provider};
use data_plane_handlers::{HttpGate, ModelSettings, SubAgentLimits};
use data_plane_ingest::Limits;
use data_plane_modules::{ModulesConfig, read_modules};
use data_plane_registry::Gate;
use data_plane_registry::gate::{GateChain, PolicyGate};
use data_plane_web::fetch::FetchConfig;
use data_plane_web::search::{self, SearchConfig};

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

    #[command(flatten)]
    pub embedding: EmbeddingArgs,

    #[command(flatten)]
    pub model: ModelArgs,

    #[command(flatten)]
    pub fetch: FetchArgs,

    #[command(flatten)]
    pub web_search: WebSearchArgs,

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
}

/// Chat runs (docs/runs.md): how long one outlives its client, waits for
/// an approval, and is kept.
#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    /// Seconds a run goes on after its last client went away, waiting for
    /// one to reattach.
    #[arg(
        long,
        env = "DATA_PLANE_RUN_GRACE_SECS",
        global = true,
        default_value_t = 30
    )]
    pub run_grace_secs: u64,

    /// Seconds a call waits for a person's approval before it counts as
    /// denied.
    #[arg(
        long,
        env = "DATA_PLANE_APPROVAL_TIMEOUT_SECS",
        global = true,
        default_value_t = 600
    )]
    pub approval_timeout_secs: u64,

    /// Events one run may send before it is stopped.
    #[arg(
        long,
        env = "DATA_PLANE_RUN_MAX_EVENTS",
        global = true,
        default_value_t = 20_000
    )]
    pub run_max_events: u64,

    /// Hours a finished run's events are kept for replay.
    #[arg(
        long,
        env = "DATA_PLANE_RUN_RETENTION_HOURS",
        global = true,
        default_value_t = 168
    )]
    pub run_retention_hours: u64,
}

impl RunArgs {
    pub fn runs_config(&self) -> anyhow::Result<data_plane_runs::RunsConfig> {
        for (value, name) in [
            (
                self.approval_timeout_secs,
                "DATA_PLANE_APPROVAL_TIMEOUT_SECS",
            ),
            (self.run_max_events, "DATA_PLANE_RUN_MAX_EVENTS"),
            (self.run_retention_hours, "DATA_PLANE_RUN_RETENTION_HOURS"),
        ] {
            anyhow::ensure!(value > 0, "{name} must be above 0");
        }
        Ok(data_plane_runs::RunsConfig {
            grace: Duration::from_secs(self.run_grace_secs),
            approval_timeout: Duration::from_secs(self.approval_timeout_secs),
            max_events: self.run_max_events,
            retention: Duration::from_secs(self.run_retention_hours.saturating_mul(3600)),
        })
    }
}

/// Remote tool modules (docs/modules.md): where they are and how long a
/// call and a discovery may take.
#[derive(Debug, Clone, Args)]
pub struct ModuleArgs {
    /// A JSON file listing modules: {"modules": [{"name", "url", "token" or
    /// "token_env", "slow", "timeout_ms"}]}.
    #[arg(long, env = "DATA_PLANE_MODULES_FILE", global = true)]
    pub modules_file: Option<PathBuf>,

    /// Modules as name=url, comma-separated; each one's token, if any, in
    /// DATA_PLANE_MODULE_TOKEN_<NAME>.
    #[arg(long, env = "DATA_PLANE_MODULES", global = true)]
    pub modules: Option<String>,

    /// The modules of DATA_PLANE_MODULES that are slow, comma-separated.
    #[arg(long, env = "DATA_PLANE_MODULES_SLOW", global = true)]
    pub modules_slow: Option<String>,

    /// Most milliseconds one call of a module's tool may take.
    #[arg(
        long,
        env = "DATA_PLANE_MODULE_TIMEOUT_MS",
        global = true,
        default_value_t = 30_000
    )]
    pub module_timeout_ms: u64,

    /// The same for a slow module.
    #[arg(
        long,
        env = "DATA_PLANE_MODULE_SLOW_TIMEOUT_MS",
        global = true,
        default_value_t = 120_000
    )]
    pub module_slow_timeout_ms: u64,

    /// Seconds a discovered manifest stays fresh.
    #[arg(
        long,
        env = "DATA_PLANE_MODULE_TTL_SECS",
        global = true,
        default_value_t = 3600
    )]
    pub module_ttl_secs: u64,

    /// Seconds before a module whose discovery failed is asked again by a
    /// request (an admin's refresh always asks).
    #[arg(
        long,
        env = "DATA_PLANE_MODULE_RETRY_SECS",
        global = true,
        default_value_t = 30
    )]
    pub module_retry_secs: u64,

    /// Most milliseconds fetching one manifest may take.
    #[arg(
        long,
        env = "DATA_PLANE_MODULE_DISCOVERY_TIMEOUT_MS",
        global = true,
        default_value_t = 5_000
    )]
    pub module_discovery_timeout_ms: u64,
}

impl ModuleArgs {
    /// The configured modules and their limits; every problem at once.
    pub fn modules_config(&self) -> anyhow::Result<ModulesConfig> {
        let modules = read_modules(
            self.modules_file.as_deref(),
            self.modules.as_deref(),
            self.modules_slow.as_deref(),
            &|name| std::env::var(name).ok(),
        )?;
        for (value, name) in [
            (self.module_timeout_ms, "DATA_PLANE_MODULE_TIMEOUT_MS"),
            (
                self.module_slow_timeout_ms,
                "DATA_PLANE_MODULE_SLOW_TIMEOUT_MS",
            ),
            (self.module_ttl_secs, "DATA_PLANE_MODULE_TTL_SECS"),
            (
                self.module_discovery_timeout_ms,
                "DATA_PLANE_MODULE_DISCOVERY_TIMEOUT_MS",
            ),
        ] {
            anyhow::ensure!(value > 0, "{name} must be above 0");
        }
        Ok(ModulesConfig {
            modules,
            timeout: Duration::from_millis(self.module_timeout_ms),
            slow_timeout: Duration::from_millis(self.module_slow_timeout_ms),
            ttl: Duration::from_secs(self.module_ttl_secs),
            retry_after: Duration::from_secs(self.module_retry_secs),
            discovery_timeout: Duration::from_millis(self.module_discovery_timeout_ms),
        })
    }
}

/// The eval gate asked before every call of a tool that requires it
/// (docs/tools.md, "The eval gate"). With both set, the policy decides first
/// and the service sees only the calls the policy lets through; with
/// neither, every call runs.
#[derive(Debug, Clone, Args)]
pub struct GateArgs {
    /// A JSON file of gate rules, checked at start-up.
    #[arg(long, env = "DATA_PLANE_GATE_POLICY_FILE", global = true)]
    pub gate_policy_file: Option<PathBuf>,

    /// An evaluation service each gated call is POSTed to.
    #[arg(long, env = "DATA_PLANE_GATE_URL", global = true)]
    pub gate_url: Option<String>,

    /// Bearer token sent to DATA_PLANE_GATE_URL.
    #[arg(
        long,
        env = "DATA_PLANE_GATE_TOKEN",
        global = true,
        hide_env_values = true
    )]
    pub gate_token: Option<String>,
}

impl GateArgs {
    /// The configured gate, if any, for a registry of `tools`: the policy
    /// file is read and checked here, so a broken one stops start-up with
    /// the file's name and the rule's index.
    pub fn gate(&self, tools: &[&str]) -> anyhow::Result<Option<Arc<dyn Gate>>> {
        let mut gates: Vec<Arc<dyn Gate>> = Vec::new();
        if let Some(path) = &self.gate_policy_file {
            let file = path.display().to_string();
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading DATA_PLANE_GATE_POLICY_FILE {file}"))?;
            gates.push(Arc::new(PolicyGate::parse(&file, &text, tools)?));
        }
        match (&self.gate_url, &self.gate_token) {
            (Some(url), token) => gates.push(Arc::new(
                HttpGate::new(url, token.clone()).context("reading DATA_PLANE_GATE_URL")?,
            )),
            (None, Some(_)) => anyhow::bail!(
                "DATA_PLANE_GATE_TOKEN is set but DATA_PLANE_GATE_URL is not: the token is for the gate's URL"
            ),
            (None, None) => {}
        }
        Ok(match gates.len() {
            0 => None,
            1 => gates.pop(),
            _ => Some(Arc::new(GateChain::new(gates))),
        })
    }
}

/// What extracting one file (an upload, an ingested file, a fetched page) may
/// cost; a file over a limit is refused with an error naming it.
#[derive(Debug, Clone, Args)]
pub struct ExtractArgs {
    /// Most bytes a PDF's streams may decode to, each counted once per reference.
    #[arg(long, env = "DATA_PLANE_EXTRACT_PDF_MAX_INFLATED_BYTES", global = true, default_value_t = Limits::DEFAULT_PDF_MAX_INFLATED_BYTES)]
    pub extract_pdf_max_inflated_bytes: u64,

    /// Most objects one PDF may hold.
    #[arg(long, env = "DATA_PLANE_EXTRACT_PDF_MAX_OBJECTS", global = true, default_value_t = Limits::DEFAULT_PDF_MAX_OBJECTS)]
    pub extract_pdf_max_objects: u64,

    /// Deepest HTML nesting handed to the parser; deeper tags are dropped, their text kept.
    #[arg(long, env = "DATA_PLANE_EXTRACT_HTML_MAX_DEPTH", global = true, default_value_t = Limits::DEFAULT_HTML_MAX_DEPTH)]
    pub extract_html_max_depth: usize,

    /// Most characters of text one document may yield.
    #[arg(long, env = "DATA_PLANE_EXTRACT_MAX_CHARS", global = true, default_value_t = Limits::DEFAULT_MAX_CHARS)]
    pub extract_max_chars: u64,

    /// Seconds the extraction of one file may take.
    #[arg(long, env = "DATA_PLANE_EXTRACT_TIMEOUT_SECS", global = true, default_value_t = Limits::DEFAULT_TIMEOUT.as_secs())]
    pub extract_timeout_secs: u64,
}

/// Per-user limits of /v1/chat and where /metrics is served.
#[derive(Debug, Clone, Args)]
pub struct LimitArgs {
    /// Chat runs one user may have going at once on this replica (0: no limit).
    #[arg(
        long,
        env = "DATA_PLANE_CHAT_MAX_CONCURRENT",
        global = true,
        default_value_t = 3
    )]
    pub chat_max_concurrent: u32,

    /// Chat turns one user may start per minute on this replica (0: no limit).
    #[arg(
        long,
        env = "DATA_PLANE_CHAT_TURNS_PER_MINUTE",
        global = true,
        default_value_t = 20
    )]
    pub chat_turns_per_minute: u32,

    /// A second address that serves /metrics without a token, for the
    /// monitoring's private network. Unset: /metrics is served on the main
    /// address to service tokens only.
    #[arg(long, env = "DATA_PLANE_METRICS_ADDR", global = true)]
    pub metrics_addr: Option<String>,
}

#[derive(Debug, Clone, Args)]
pub struct FetchArgs {
    /// Internal hosts fetch_web_page may reach despite the SSRF guard:
    /// comma-separated names (`wiki.corp`, `*.corp`), addresses and CIDR
    /// networks (`10.1.0.0/16`). Empty: only public addresses.
    #[arg(
        long,
        env = "DATA_PLANE_FETCH_ALLOW",
        global = true,
        default_value = ""
    )]
    pub fetch_allow: String,

    /// Largest response body fetch_web_page reads, in bytes.
    #[arg(long, env = "DATA_PLANE_FETCH_MAX_BYTES", global = true, default_value_t = FetchConfig::DEFAULT_MAX_BYTES)]
    pub fetch_max_bytes: u64,

    /// Seconds fetch_web_page may take for one page, redirects included.
    #[arg(long, env = "DATA_PLANE_FETCH_TIMEOUT_SECS", global = true, default_value_t = FetchConfig::DEFAULT_TIMEOUT.as_secs())]
    pub fetch_timeout_secs: u64,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum LogFormat {
    Human,
    Json,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogColor {
    Auto,
    Always,
    Never,
}

impl LogColor {
    /// Whether human-readable logs written to a stream that is (or is not)
    /// a terminal carry colour codes; `no_color`: NO_COLOR is set to
    /// something (no-color.org).
    pub fn colours(self, terminal: bool, no_color: bool) -> bool {
        match self {
            LogColor::Always => true,
            LogColor::Never => false,
            LogColor::Auto => terminal && !no_color,
        }
    }
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

/// Where the web-search providers live. Which one runs is the admin setting
/// `web_search_provider`; keys stay here, out of the settings admins read back.
#[derive(Debug, Clone, Args)]
pub struct WebSearchArgs {
    /// Base URL of a SearXNG instance with the JSON format enabled.
    #[arg(long, env = "DATA_PLANE_SEARXNG_URL", global = true)]
    pub searxng_url: Option<String>,

    /// Brave Search API subscription token.
    #[arg(
        long,
        env = "DATA_PLANE_BRAVE_API_KEY",
        global = true,
        hide_env_values = true
    )]
    pub brave_api_key: Option<String>,

    /// Base URL of the Brave Search API.
    #[arg(
        long,
        env = "DATA_PLANE_BRAVE_URL",
        global = true,
        default_value = search::BRAVE_DEFAULT_URL
    )]
    pub brave_url: String,

    /// Tavily API key.
    #[arg(
        long,
        env = "DATA_PLANE_TAVILY_API_KEY",
        global = true,
        hide_env_values = true
    )]
    pub tavily_api_key: Option<String>,

    /// Base URL of the Tavily API.
    #[arg(
        long,
        env = "DATA_PLANE_TAVILY_URL",
        global = true,
        default_value = search::TAVILY_DEFAULT_URL
    )]
    pub tavily_url: String,

    /// Seconds one request to the search provider may take (below the
    /// tool's own 20 s limit).
    #[arg(
        long,
        env = "DATA_PLANE_WEB_SEARCH_TIMEOUT",
        global = true,
        default_value_t = 10,
        value_parser = clap::value_parser!(u64).range(1..=19)
    )]
    pub web_search_timeout: u64,
}

impl WebSearchArgs {
    pub fn search_config(&self) -> SearchConfig {
        SearchConfig {
            searxng_url: self.searxng_url.clone(),
            brave_api_key: self.brave_api_key.clone(),
            brave_url: self.brave_url.clone(),
            tavily_api_key: self.tavily_api_key.clone(),
            tavily_url: self.tavily_url.clone(),
            timeout: Duration::from_secs(self.web_search_timeout),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum EmbeddingProvider {
    Local,
    Openai,
}

/// The language model behind `/v1/chat`: any OpenAI-compatible endpoint.
#[derive(Debug, Clone, Args)]
pub struct ModelArgs {
    /// Base URL of the OpenAI-compatible chat endpoint.
    #[arg(
        long,
        env = "OPENAI_BASE_URL",
        global = true,
        default_value = "https://api.openai.com/v1"
    )]
    pub openai_base_url: String,

    /// API key for the chat endpoint (local servers usually need none).
    #[arg(long, env = "OPENAI_API_KEY", global = true, hide_env_values = true)]
    pub openai_api_key: Option<String>,

    /// Chat model name; unset: no model, and /v1/chat answers 503 no_model.
    #[arg(long = "model", env = "DATA_PLANE_MODEL", global = true)]
    pub chat_model: Option<String>,

    /// Model requests one chat may make before it stops.
    #[arg(
        long,
        env = "DATA_PLANE_MAX_STEPS",
        global = true,
        default_value_t = 12
    )]
    pub max_steps: u32,

    /// Seconds the model may take to start answering.
    #[arg(
        long,
        env = "DATA_PLANE_MODEL_TIMEOUT",
        global = true,
        default_value_t = 60
    )]
    pub model_timeout: u64,

    /// Longest silence, in seconds, in the middle of the model's answer.
    #[arg(
        long,
        env = "DATA_PLANE_MODEL_IDLE_TIMEOUT",
        global = true,
        default_value_t = 60
    )]
    pub model_idle_timeout: u64,

    /// Whether the model's chat template opens `<think>` in the prompt:
    /// `closed` (text streams from the first byte), `open` (everything up to
    /// the first `</think>` is reasoning and hidden) or `unknown` (the start
    /// of each reply is held back until it is clear).
    #[arg(
        long,
        env = "DATA_PLANE_MODEL_THINK_START",
        global = true,
        default_value = "closed",
        value_parser = ["closed", "open", "unknown"]
    )]
    pub model_think_start: String,

    /// Longest answer, in tokens, one model request may produce.
    #[arg(
        long,
        env = "DATA_PLANE_MODEL_MAX_TOKENS",
        global = true,
        default_value_t = 4096
    )]
    pub model_max_tokens: u32,

    /// The request field that carries that limit: `max_completion_tokens`
    /// (OpenAI, vLLM, recent llama.cpp) or `max_tokens` (older servers).
    #[arg(
        long,
        env = "DATA_PLANE_MODEL_MAX_TOKENS_FIELD",
        global = true,
        default_value = "max_completion_tokens",
        value_parser = ["max_completion_tokens", "max_tokens"]
    )]
    pub model_max_tokens_field: String,

    /// Seconds one chat turn may take in all (model requests and tools);
    /// 0: no deadline beyond the other limits.
    #[arg(
        long,
        env = "DATA_PLANE_TURN_DEADLINE",
        global = true,
        default_value_t = 300
    )]
    pub turn_deadline: u64,

    /// A file holding the system prompt template (placeholders {{tools}},
    /// {{space}}, {{date}}); unset: the built-in prompt.
    #[arg(long, env = "DATA_PLANE_SYSTEM_PROMPT_FILE", global = true)]
    pub system_prompt_file: Option<std::path::PathBuf>,

    /// Whether tool calls the model writes in its text (`<tool_call>`,
    /// `[TOOL_CALLS]`, bare JSON, Python call lists) are read as calls:
    /// `on`, or `off` for endpoints that always return native `tool_calls`.
    #[arg(
        long,
        env = "DATA_PLANE_MODEL_TEXT_CALLS",
        global = true,
        default_value = "on",
        value_parser = ["on", "off"]
    )]
    pub model_text_calls: String,

    /// Whether the chat model runs on the deployment's own machines, as agent
    /// profiles' `add_when_non_local` and `exclude_in_local` read it: `auto`
    /// (local when OPENAI_BASE_URL's host is loopback, private or
    /// `localhost`), `true` or `false`.
    #[arg(
        long,
        env = "DATA_PLANE_LOCAL_MODEL",
        global = true,
        default_value = "auto",
        value_parser = ["auto", "true", "false"]
    )]
    pub local_model: String,

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

impl ModelArgs {
    /// Whether the chat model is local (see `local_model`).
    pub fn is_local(&self) -> bool {
        match self.local_model.as_str() {
            "true" => true,
            "false" => false,
            _ => is_local_url(&self.openai_base_url),
        }
    }

    /// The agent's configuration, or `None` when no model is named.
    pub fn agent_config(&self) -> Option<data_plane_agent::AgentConfig> {
        let model = self.chat_model.as_deref().map(str::trim)?;
        if model.is_empty() {
            return None;
        }
        let mut config = data_plane_agent::AgentConfig::new(self.openai_base_url.clone(), model);
        config.api_key = self.openai_api_key.clone().filter(|k| !k.is_empty());
        config.max_steps = self.max_steps;
        config.first_byte_timeout = std::time::Duration::from_secs(self.model_timeout);
        config.idle_timeout = std::time::Duration::from_secs(self.model_idle_timeout);
        config.think_start = match self.model_think_start.as_str() {
            "open" => data_plane_agent::textcalls::ThinkStart::Open,
            "unknown" => data_plane_agent::textcalls::ThinkStart::Unknown,
            _ => data_plane_agent::textcalls::ThinkStart::Closed,
        };
        config.max_completion_tokens = (self.model_max_tokens > 0).then_some(self.model_max_tokens);
        config.max_tokens_field = match self.model_max_tokens_field.as_str() {
            "max_tokens" => data_plane_agent::MaxTokensField::MaxTokens,
            _ => data_plane_agent::MaxTokensField::MaxCompletionTokens,
        };
        config.turn_deadline =
            (self.turn_deadline > 0).then(|| std::time::Duration::from_secs(self.turn_deadline));
        config.text_calls = self.model_text_calls != "off";
        Some(config)
    }

    /// The system prompt /v1/chat sends first: the file named by
    /// `DATA_PLANE_SYSTEM_PROMPT_FILE`, checked now so that a missing file
    /// or an unknown placeholder stops the server at start-up, or the
    /// built-in one.
    pub fn system_prompt(&self) -> anyhow::Result<data_plane_agent::prompt::PromptTemplate> {
        let Some(path) = &self.system_prompt_file else {
            return Ok(data_plane_agent::prompt::PromptTemplate::default());
        };
        let text = std::fs::read_to_string(path).map_err(|e| {
            anyhow::anyhow!(
                "DATA_PLANE_SYSTEM_PROMPT_FILE {}: cannot read it: {e}",
                path.display()
            )
        })?;
        data_plane_agent::prompt::PromptTemplate::parse(&text)
            .map_err(|e| anyhow::anyhow!("DATA_PLANE_SYSTEM_PROMPT_FILE {}: {e}", path.display()))
    }

    /// What analyze_document and query_documents' questions need: the same
    /// endpoint and model, and the sub-agent's own limits.
    pub fn handler_settings(&self) -> Option<ModelSettings> {
        Some(ModelSettings {
            agent: self.agent_config()?,
            sub_agent: SubAgentLimits {
                max_steps: self.analyze_max_steps.max(1),
                token_budget: self.analyze_token_budget,
            },
        })
    }
}

impl GlobalArgs {
    /// The extraction limits; a limit of 0 stops start-up, naming it.
    pub fn extract_limits(&self) -> anyhow::Result<Limits> {
        let e = &self.extract;
        for (name, value) in [
            (
                "DATA_PLANE_EXTRACT_PDF_MAX_INFLATED_BYTES",
                e.extract_pdf_max_inflated_bytes,
            ),
            (
                "DATA_PLANE_EXTRACT_PDF_MAX_OBJECTS",
                e.extract_pdf_max_objects,
            ),
            (
                "DATA_PLANE_EXTRACT_HTML_MAX_DEPTH",
                e.extract_html_max_depth as u64,
            ),
            ("DATA_PLANE_EXTRACT_MAX_CHARS", e.extract_max_chars),
            ("DATA_PLANE_EXTRACT_TIMEOUT_SECS", e.extract_timeout_secs),
        ] {
            if value == 0 {
                anyhow::bail!("{name} must be above 0");
            }
        }
        Ok(Limits {
            pdf_max_inflated_bytes: e.extract_pdf_max_inflated_bytes,
            pdf_max_objects: e.extract_pdf_max_objects,
            html_max_depth: e.extract_html_max_depth,
            max_chars: e.extract_max_chars,
            timeout: Duration::from_secs(e.extract_timeout_secs),
        })
    }

    /// The fetcher's limits and allow-list; a malformed allow-list entry
    /// stops start-up, naming the entry.
    pub fn fetch_config(&self) -> anyhow::Result<FetchConfig> {
        let f = &self.fetch;
        if f.fetch_max_bytes == 0 || f.fetch_timeout_secs == 0 {
            anyhow::bail!(
                "DATA_PLANE_FETCH_MAX_BYTES and DATA_PLANE_FETCH_TIMEOUT_SECS must be above 0"
            );
        }
        Ok(FetchConfig {
            allow: f
                .fetch_allow
                .parse()
                .context("reading DATA_PLANE_FETCH_ALLOW")?,
            max_bytes: f.fetch_max_bytes,
            timeout: std::time::Duration::from_secs(f.fetch_timeout_secs),
            extract: self.extract_limits()?,
            ..FetchConfig::default()
        })
    }

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

/// Logs to standard error, human-readable (coloured only where
/// `--log-color` says) or as JSON (never coloured).
pub fn init_tracing(args: &GlobalArgs) {
    use std::io::IsTerminal;
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new("info,sqlx=warn,tantivy=warn,hyper=warn"));
    let colour = args.log_color.colours(
        std::io::stderr().is_terminal(),
        std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty()),
    );
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match args.log_format {
        LogFormat::Human => builder.with_ansi(colour).init(),
        LogFormat::Json => builder.with_ansi(false).json().init(),
    }
}

/// Whether `url`'s host is this machine or a private network: `localhost`,
/// a loopback, private (RFC 1918, unique-local) or link-local address.
pub fn is_local_url(url: &str) -> bool {
    let Ok(url) = url::Url::parse(url) else {
        return false;
    };
    match url.host() {
        Some(url::Host::Domain(d)) => {
            let d = d.trim_end_matches('.').to_ascii_lowercase();
            d == "localhost" || d.ends_with(".localhost")
        }
        Some(url::Host::Ipv4(ip)) => ip.is_loopback() || ip.is_private() || ip.is_link_local(),
        Some(url::Host::Ipv6(ip)) => {
            ip.is_loopback()
                || (ip.segments()[0] & 0xfe00) == 0xfc00
                || (ip.segments()[0] & 0xffc0) == 0xfe80
        }
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct GateCli {
        #[command(flatten)]
        gate: super::GateArgs,
    }

    fn gate(args: &[&str]) -> anyhow::Result<bool> {
        let tools: Vec<&str> = vec!["fetch_web_page", "read_document", "web_search"];
        let cli =
            GateCli::try_parse_from(std::iter::once("data-plane").chain(args.iter().copied()))
                .unwrap();
        Ok(cli.gate.gate(&tools)?.is_some())
    }

    #[test]
    fn the_gate_is_configured_and_its_policy_checked_at_start_up() {
        let dir = tempfile::tempdir().unwrap();
        let policy = dir.path().join("gate.json");
        std::fs::write(
            &policy,
            r#"{"rules": [{"effect": "ask", "reason": "costly", "cost": ["expensive"]}]}"#,
        )
        .unwrap();
        let broken = dir.path().join("broken.json");
        std::fs::write(
            &broken,
            r#"{"rules": [{"effect": "allow"}, {"effect": "deny", "tools": ["web_serch"], "reason": "x"}]}"#,
        )
        .unwrap();
        let policy = policy.to_str().unwrap();
        let broken = broken.to_str().unwrap();

        assert!(!gate(&[]).unwrap(), "no gate unless one is configured");
        assert!(gate(&["--gate-policy-file", policy]).unwrap());
        assert!(gate(&["--gate-url", "http://127.0.0.1:9/evaluate"]).unwrap());
        assert!(
            gate(&[
                "--gate-policy-file",
                policy,
                "--gate-url",
                "https://eval.example.org/",
                "--gate-token",
                "t"
            ])
            .unwrap()
        );

        let refused = |args: &[&str]| format!("{:#}", gate(args).unwrap_err());
        let e = refused(&["--gate-policy-file", broken]);
        assert!(
            e.contains(&format!(
                "{broken}: rule 1: tool pattern \"web_serch\" matches no tool"
            )),
            "{e}"
        );
        let e = refused(&["--gate-policy-file", "/nonexistent/gate.json"]);
        assert!(
            e.contains("reading DATA_PLANE_GATE_POLICY_FILE /nonexistent/gate.json"),
            "{e}"
        );
        let e = refused(&["--gate-token", "t"]);
        assert!(e.contains("DATA_PLANE_GATE_URL is not"), "{e}");
        let e = refused(&["--gate-url", "eval.example.org"]);
        assert!(
            e.contains("gate URL \"eval.example.org\" is not a valid http or https URL"),
            "{e}"
        );
    }

    #[test]
    fn the_documented_example_policy_is_valid() {
        let registry = data_plane_handlers::offline_registry().unwrap();
        // As serve checks it: against the tools that pass the gate.
        let tools: Vec<&str> = registry
            .local_tools()
            .iter()
            .filter(|t| t.meta.requires_gate)
            .map(|t| t.name.as_str())
            .collect();
        let file = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../docs/gate-policy.example.json"
        );
        let text = std::fs::read_to_string(file).unwrap();
        data_plane_registry::gate::PolicyGate::parse(file, &text, &tools).unwrap();
    }

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        model: super::ModelArgs,
    }

    fn model_args(args: &[&str]) -> super::ModelArgs {
        Cli::try_parse_from(std::iter::once("data-plane").chain(args.iter().copied()))
            .unwrap()
            .model
    }

    #[test]
    fn a_system_prompt_file_is_checked_when_the_server_starts() {
        let dir = tempfile::tempdir().unwrap();
        let good = dir.path().join("good.md");
        std::fs::write(
            &good,
            "Help with {{space}}. Tools:\n{{tools}}\nDate: {{date}}",
        )
        .unwrap();
        let bad = dir.path().join("bad.md");
        std::fs::write(&bad, "Hello {{user_name}}").unwrap();
        let missing = dir.path().join("missing.md");

        assert!(model_args(&[]).system_prompt().is_ok());
        let loaded = model_args(&["--system-prompt-file", good.to_str().unwrap()])
            .system_prompt()
            .unwrap();
        assert!(loaded.text().starts_with("Help with {{space}}"));
        let refused = model_args(&["--system-prompt-file", bad.to_str().unwrap()])
            .system_prompt()
            .unwrap_err()
            .to_string();
        assert!(
            refused.contains("bad.md") && refused.contains("{{user_name}}"),
            "{refused}"
        );
        let unreadable = model_args(&["--system-prompt-file", missing.to_str().unwrap()])
            .system_prompt()
            .unwrap_err()
            .to_string();
        assert!(unreadable.contains("cannot read"), "{unreadable}");
    }

    #[test]
    fn the_turn_bounds_reach_the_agent() {
        let config = model_args(&["--model", "m"]).agent_config().unwrap();
        assert_eq!(config.max_completion_tokens, Some(4096));
        assert_eq!(
            config.turn_deadline,
            Some(std::time::Duration::from_secs(300))
        );
        let config = model_args(&[
            "--model",
            "m",
            "--model-max-tokens",
            "0",
            "--turn-deadline",
            "0",
            "--model-max-tokens-field",
            "max_tokens",
        ])
        .agent_config()
        .unwrap();
        assert_eq!(config.max_completion_tokens, None);
        assert_eq!(config.turn_deadline, None);
        assert_eq!(
            config.max_tokens_field,
            data_plane_agent::MaxTokensField::MaxTokens
        );
    }

    #[test]
    fn a_model_on_this_machine_or_a_private_network_is_local() {
        for url in [
            "http://localhost:11434/v1",
            "http://LOCALHOST./v1",
            "http://ollama.localhost/v1",
            "http://127.0.0.1:8080/v1",
            "http://10.1.2.3/v1",
            "http://192.168.0.9:8000/v1",
            "http://172.16.0.1/v1",
            "http://169.254.1.1/v1",
            "http://[::1]:8000/v1",
            "http://[fd00::1]/v1",
        ] {
            assert!(super::is_local_url(url), "{url}");
        }
        for url in [
            "https://api.openai.com/v1",
            "http://8.8.8.8/v1",
            "http://[2001:db8::1]/v1",
            "http://localhost.example.com/v1",
            "not a url",
        ] {
            assert!(!super::is_local_url(url), "{url}");
        }
    }
}
