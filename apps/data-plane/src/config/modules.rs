//! Remote tool modules' flags: the manifest file and the calls' time limits.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use data_plane_modules::{ModulesConfig, read_modules};

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
