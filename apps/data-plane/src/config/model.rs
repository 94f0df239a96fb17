//! The language model's flags: endpoint, prompt, the turn's bounds, sub-agents.

use clap::Args;
use data_plane_handlers::{ModelSettings, SubAgentLimits};

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
