//! The web-search provider's flags.

use std::time::Duration;

use clap::Args;
use data_plane_web::search::{self, SearchConfig};

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
