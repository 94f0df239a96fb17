//! Which modules the deployment uses, and how long it waits for them.
//!
//! Modules come from configuration only: a JSON file
//! (`DATA_PLANE_MODULES_FILE`) and/or a short list in the environment
//! (`DATA_PLANE_MODULES=crm=http://10.0.0.5:9000,reports=http://…`, with
//! `DATA_PLANE_MODULE_TOKEN_<NAME>` and `DATA_PLANE_MODULES_SLOW`). Neither a
//! model nor a manifest can add a module or change where one is reached.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use data_plane_registry::valid_module_name;
use reqwest::Url;
use serde::{Deserialize, Serialize};

use crate::ModuleError;

/// One configured module.
#[derive(Clone, PartialEq, Eq, Serialize)]
pub struct ModuleConfig {
    /// The name its tools take (`name.tool`).
    pub name: String,
    /// The base URL: the manifest is `{url}/manifest`, calls go to
    /// `{url}/execute`.
    pub url: String,
    /// Sent as `Authorization: Bearer …` on every request to the module.
    #[serde(skip)]
    pub token: Option<String>,
    /// Its tools take long (reports, builds): it gets the slow timeout.
    pub slow: bool,
    /// Its own timeout per call, over the fast or slow default.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
}

impl std::fmt::Debug for ModuleConfig {
    /// Everything but the token, which no log line may carry.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModuleConfig")
            .field("name", &self.name)
            .field("url", &self.url)
            .field("token", &self.token.as_ref().map(|_| "[set]"))
            .field("slow", &self.slow)
            .field("timeout_ms", &self.timeout_ms)
            .finish()
    }
}

impl ModuleConfig {
    /// `{url}/{path}`.
    pub fn endpoint(&self, path: &str) -> String {
        format!("{}/{path}", self.url)
    }
}

/// The modules and the limits that hold for all of them.
#[derive(Debug, Clone)]
pub struct ModulesConfig {
    pub modules: Vec<ModuleConfig>,
    /// Per call, for a module that is not slow.
    pub timeout: Duration,
    /// Per call, for a slow module.
    pub slow_timeout: Duration,
    /// How long a discovered manifest is fresh.
    pub ttl: Duration,
    /// After a failed discovery, how long a request waits before it tries
    /// again (a refresh asked for by an admin always tries).
    pub retry_after: Duration,
    /// How long one `GET /manifest` may take.
    pub discovery_timeout: Duration,
}

impl Default for ModulesConfig {
    fn default() -> Self {
        ModulesConfig {
            modules: Vec::new(),
            timeout: Duration::from_secs(30),
            slow_timeout: Duration::from_secs(120),
            ttl: Duration::from_secs(3600),
            retry_after: Duration::from_secs(30),
            discovery_timeout: Duration::from_secs(5),
        }
    }
}

impl ModulesConfig {
    /// How long one call of `module`'s tools may take.
    pub fn timeout_for(&self, module: &ModuleConfig) -> Duration {
        match module.timeout_ms {
            Some(ms) => Duration::from_millis(ms),
            None if module.slow => self.slow_timeout,
            None => self.timeout,
        }
    }
}

/// The file's shape.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    modules: Vec<FileModule>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileModule {
    name: String,
    url: String,
    /// The token itself…
    #[serde(default)]
    token: Option<String>,
    /// …or the environment variable that holds it (kept out of the file).
    #[serde(default)]
    token_env: Option<String>,
    #[serde(default)]
    slow: bool,
    #[serde(default)]
    timeout_ms: Option<u64>,
}

/// Reads the configured modules: those of `file` (JSON), then those of
/// `list` (`name=url,name=url`). `env` looks up environment variables (the
/// tokens of listed modules, `DATA_PLANE_MODULE_TOKEN_<NAME>`, and a file
/// module's `token_env`); `slow` names listed modules that are slow.
/// Every problem is reported at once, naming the module.
pub fn read_modules(
    file: Option<&Path>,
    list: Option<&str>,
    slow: Option<&str>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<ModuleConfig>, ModuleError> {
    let mut problems = Vec::new();
    let mut modules = Vec::new();
    if let Some(path) = file {
        let shown = path.display();
        match std::fs::read_to_string(path) {
            Err(e) => problems.push(format!("cannot read the modules file {shown}: {e}")),
            Ok(text) => match serde_json::from_str::<File>(&text) {
                Err(e) => problems.push(format!("{shown}: not a modules file: {e}")),
                Ok(parsed) => {
                    for m in parsed.modules {
                        let token = match (&m.token, &m.token_env) {
                            (Some(_), Some(_)) => {
                                problems.push(format!(
                                    "{shown}: module {}: give token or token_env, not both",
                                    m.name
                                ));
                                None
                            }
                            (Some(t), None) => Some(t.clone()),
                            (None, Some(var)) => match env(var) {
                                Some(t) => Some(t),
                                None => {
                                    problems.push(format!(
                                        "{shown}: module {}: token_env names {var}, which is not set",
                                        m.name
                                    ));
                                    None
                                }
                            },
                            (None, None) => None,
                        };
                        if m.timeout_ms == Some(0) {
                            problems.push(format!(
                                "{shown}: module {}: timeout_ms must be above 0",
                                m.name
                            ));
                        }
                        modules.push(ModuleConfig {
                            name: m.name,
                            url: m.url,
                            token,
                            slow: m.slow,
                            timeout_ms: m.timeout_ms,
                        });
                    }
                }
            },
        }
    }
    let slow: BTreeSet<&str> = slow
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect();
    for item in list
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
    {
        let Some((name, url)) = item.split_once('=') else {
            problems.push(format!("DATA_PLANE_MODULES: {item:?} is not name=url"));
            continue;
        };
        let name = name.trim().to_string();
        let token = env(&token_variable(&name)).filter(|t| !t.is_empty());
        modules.push(ModuleConfig {
            slow: slow.contains(name.as_str()),
            name,
            url: url.trim().to_string(),
            token,
            timeout_ms: None,
        });
    }
    let mut seen = BTreeSet::new();
    for m in &mut modules {
        if !valid_module_name(&m.name) {
            problems.push(format!(
                "module name {:?} must be 1-32 characters of a-z, 0-9, - or a single _, starting with a letter or digit",
                m.name
            ));
        }
        if !seen.insert(m.name.clone()) {
            problems.push(format!("module {} is configured twice", m.name));
        }
        match check_url(&m.url) {
            Ok(url) => m.url = url,
            Err(e) => problems.push(format!("module {}: {e}", m.name)),
        }
    }
    for name in &slow {
        if !seen.contains(*name) {
            problems.push(format!(
                "DATA_PLANE_MODULES_SLOW names {name}, which is not a configured module"
            ));
        }
    }
    if problems.is_empty() {
        Ok(modules)
    } else {
        Err(ModuleError::Config(problems))
    }
}

/// The environment variable that holds a listed module's token.
pub fn token_variable(module: &str) -> String {
    format!(
        "DATA_PLANE_MODULE_TOKEN_{}",
        module.to_ascii_uppercase().replace('-', "_")
    )
}

/// An http(s) URL without credentials, query or fragment, as the base
/// of `/manifest` and `/execute` (a trailing `/` dropped).
fn check_url(url: &str) -> Result<String, String> {
    let parsed = Url::parse(url).map_err(|e| format!("url {url:?} is not a URL: {e}"))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(format!("url {url:?} must be http or https"));
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(format!(
            "url {url:?} must not carry credentials; use the module's token"
        ));
    }
    if parsed.query().is_some() || parsed.fragment().is_some() {
        return Err(format!("url {url:?} must have no query or fragment"));
    }
    Ok(parsed.as_str().trim_end_matches('/').to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        match name {
            "DATA_PLANE_MODULE_TOKEN_CRM" => Some("crm-secret".into()),
            "REPORTS_TOKEN" => Some("reports-secret".into()),
            _ => None,
        }
    }

    #[test]
    fn modules_come_from_the_list_and_the_file() {
        let dir = std::env::temp_dir().join(format!("modules-config-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("modules.json");
        std::fs::write(
            &file,
            r#"{"modules": [{"name": "reports", "url": "https://reports.internal:9443/api/", "token_env": "REPORTS_TOKEN", "slow": true},
                            {"name": "geo", "url": "http://10.0.0.9:7000", "timeout_ms": 5000}]}"#,
        )
        .unwrap();
        let modules = read_modules(
            Some(&file),
            Some(" crm=http://127.0.0.1:9000 , wiki=http://wiki:8080/"),
            Some("wiki"),
            &env,
        )
        .unwrap();
        // (name, url, token, slow, timeout_ms)
        type Row<'a> = (&'a str, &'a str, Option<&'a str>, bool, Option<u64>);
        let got: Vec<Row<'_>> = modules
            .iter()
            .map(|m| {
                (
                    m.name.as_str(),
                    m.url.as_str(),
                    m.token.as_deref(),
                    m.slow,
                    m.timeout_ms,
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                (
                    "reports",
                    "https://reports.internal:9443/api",
                    Some("reports-secret"),
                    true,
                    None
                ),
                ("geo", "http://10.0.0.9:7000", None, false, Some(5000)),
                (
                    "crm",
                    "http://127.0.0.1:9000",
                    Some("crm-secret"),
                    false,
                    None
                ),
                ("wiki", "http://wiki:8080", None, true, None),
            ]
        );
        let config = ModulesConfig {
            modules,
            ..ModulesConfig::default()
        };
        let timeouts: Vec<u64> = config
            .modules
            .iter()
            .map(|m| config.timeout_for(m).as_millis() as u64)
            .collect();
        assert_eq!(timeouts, [120_000, 5_000, 30_000, 120_000]);
        std::fs::remove_dir_all(&dir).ok();
        let shown = format!("{config:?}");
        assert!(!shown.contains("secret"), "{shown}");
    }

    #[test]
    fn every_bad_module_is_named() {
        let check = |list: &str, slow: &str, words: &[&str]| {
            let err = read_modules(None, Some(list), Some(slow), &env).unwrap_err();
            let text = err.to_string();
            for w in words {
                assert!(text.contains(w), "{list}: {text:?} lacks {w:?}");
            }
        };
        check("crm", "", &["\"crm\" is not name=url"]);
        check("CRM=http://a", "", &["module name \"CRM\""]);
        check("a.b=http://a", "", &["module name \"a.b\""]);
        check("a__b=http://a", "", &["module name \"a__b\""]);
        check(
            "crm=http://a,crm=http://b",
            "",
            &["crm is configured twice"],
        );
        check("crm=ftp://a", "", &["must be http or https"]);
        check("crm=http://u:p@a", "", &["must not carry credentials"]);
        check("crm=http://a/?x=1", "", &["no query or fragment"]);
        check("crm=not a url", "", &["is not a URL"]);
        check(
            "crm=http://a",
            "wiki",
            &["DATA_PLANE_MODULES_SLOW names wiki"],
        );
        // Several problems at once.
        check(
            "crm=ftp://a,Bad=http://b",
            "",
            &["must be http or https", "module name \"Bad\""],
        );
    }
}
