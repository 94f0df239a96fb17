//! Agent profiles: which tools an agent is offered, as data
//! (`definitions/agents/<name>.json`), with conditions on what the
//! deployment can do. A profile is stage one of choosing the offered tools;
//! stage two is each tool's predicate and the caller's permission.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::{Category, Deployment};

/// How an agent under a profile calls tools by default.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolMode {
    /// OpenAI function calling (`tools` in the request), with calls written
    /// as text read too.
    #[default]
    Native,
    /// No `tools` field: the system prompt teaches one-line tags
    /// (`SEARCH: vacuum full`), for models without function calling.
    Tags,
}

/// Tools named one by one and whole categories.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Selection {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub categories: Vec<String>,
}

impl Selection {
    fn is_empty(&self) -> bool {
        self.tools.is_empty() && self.categories.is_empty()
    }
}

/// A profile file as written.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ProfileSpec {
    pub name: String,
    pub description: String,
    /// Offered always (before the conditions).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub categories: Vec<String>,
    /// Added when the deployment's model is not local.
    #[serde(default, skip_serializing_if = "Selection::is_empty")]
    pub add_when_non_local: Selection,
    /// Added when an embedding engine is configured and answering.
    #[serde(default, skip_serializing_if = "Selection::is_empty")]
    pub add_when_embedding_ok: Selection,
    /// Removed when the deployment's model is local (applied last, so it
    /// wins over every addition).
    #[serde(default, skip_serializing_if = "Selection::is_empty")]
    pub exclude_in_local: Selection,
    /// The remote modules whose tools (`module.tool`) the profile offers,
    /// by the names the deployment configures them under; `*`: every one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub modules: Vec<String>,
    /// Offer the discovery meta-tools instead of the whole list.
    #[serde(default)]
    pub tool_search: bool,
    /// How the model calls tools unless a request says otherwise.
    #[serde(default)]
    pub tool_mode: ToolMode,
    /// A chat request may choose it (`options.agent`). Profiles made for
    /// a door of their own (services, a sub-agent) say false, so that a
    /// user cannot take their name, and with it the gate's rules and the
    /// audit label meant for them.
    #[serde(default)]
    pub chat: bool,
}

/// A profile checked against the registry's tools.
#[derive(Debug, Clone, Serialize)]
pub struct AgentProfile {
    #[serde(flatten)]
    pub spec: ProfileSpec,
    /// The file it came from.
    pub file: String,
    #[serde(skip)]
    base: BTreeSet<String>,
    #[serde(skip)]
    non_local: BTreeSet<String>,
    #[serde(skip)]
    embedding_ok: BTreeSet<String>,
    #[serde(skip)]
    local_excluded: BTreeSet<String>,
    #[serde(skip)]
    modules: Arc<[String]>,
}

impl AgentProfile {
    pub fn name(&self) -> &str {
        &self.spec.name
    }

    /// The tools the profile allows in `deployment`, alphabetically (the
    /// predicate and the caller's permission still apply per tool).
    pub fn tools_for(&self, deployment: Deployment) -> Arc<[String]> {
        let mut tools = self.base.clone();
        if !deployment.local_model {
            tools.extend(self.non_local.iter().cloned());
        }
        if deployment.embedding_ok {
            tools.extend(self.embedding_ok.iter().cloned());
        }
        if deployment.local_model {
            tools.retain(|t| !self.local_excluded.contains(t));
        }
        tools.into_iter().collect()
    }

    /// The remote modules it allows (`*`: every one).
    pub fn modules(&self) -> Arc<[String]> {
        self.modules.clone()
    }

    /// Whether the profile can offer `tool` in some deployment.
    pub fn may_offer(&self, tool: &str) -> bool {
        self.base.contains(tool)
            || self.non_local.contains(tool)
            || self.embedding_ok.contains(tool)
    }
}

/// Reads the profile files against the tools (name → category). Every
/// problem names its file.
pub(crate) fn load(
    files: &[(String, String)],
    tools: &BTreeMap<String, Category>,
    problems: &mut Vec<String>,
) -> BTreeMap<String, AgentProfile> {
    let mut profiles: BTreeMap<String, AgentProfile> = BTreeMap::new();
    for (file, text) in files {
        let spec: ProfileSpec = match serde_json::from_str(text) {
            Ok(spec) => spec,
            Err(e) => {
                problems.push(format!("{file}: not a valid agent profile: {e}"));
                continue;
            }
        };
        let stem = std::path::Path::new(file)
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or_default();
        if stem != spec.name {
            problems.push(format!(
                "{file}: the file must be named after its profile ({}.json)",
                spec.name
            ));
            continue;
        }
        if spec.description.trim().is_empty() {
            problems.push(format!("{file}: \"description\" must not be empty"));
        }
        let before = problems.len();
        let mut resolve = |field: &str, selection: &Selection| -> BTreeSet<String> {
            let mut out = BTreeSet::new();
            for tool in &selection.tools {
                if tools.contains_key(tool) {
                    out.insert(tool.clone());
                } else {
                    let close = crate::suggest::close_names(tool, tools.keys().map(String::as_str));
                    let hint = if close.is_empty() {
                        String::new()
                    } else {
                        format!(" (did you mean {}?)", close.join(" or "))
                    };
                    problems.push(format!(
                        "{file}: {field} names the unknown tool {tool:?}{hint}"
                    ));
                }
            }
            for category in &selection.categories {
                match Category::ALL.iter().find(|c| c.as_str() == category) {
                    Some(c) => out.extend(
                        tools
                            .iter()
                            .filter(|(_, tc)| *tc == c)
                            .map(|(name, _)| name.clone()),
                    ),
                    None => problems.push(format!(
                        "{file}: {field} names the unknown category {category:?} (known: {})",
                        Category::ALL.map(Category::as_str).join(", ")
                    )),
                }
            }
            out
        };
        let base = resolve(
            "the profile",
            &Selection {
                tools: spec.tools.clone(),
                categories: spec.categories.clone(),
            },
        );
        let non_local = resolve("add_when_non_local", &spec.add_when_non_local);
        let embedding_ok = resolve("add_when_embedding_ok", &spec.add_when_embedding_ok);
        let local_excluded = resolve("exclude_in_local", &spec.exclude_in_local);
        for module in &spec.modules {
            if module != "*" && !valid_module_name(module) {
                problems.push(format!(
                    "{file}: modules names {module:?}, which is not a module name (1-32 characters of a-z, 0-9, - or a single _) nor \"*\""
                ));
            }
        }
        if problems.len() > before {
            continue;
        }
        if base.is_empty()
            && non_local.is_empty()
            && embedding_ok.is_empty()
            && spec.modules.is_empty()
        {
            problems.push(format!("{file}: the profile offers no tool"));
            continue;
        }
        if let Some(first) = profiles.get(&spec.name) {
            problems.push(format!(
                "two files define the profile {}: {} and {file}",
                spec.name, first.file
            ));
            continue;
        }
        let modules: Arc<[String]> = spec.modules.clone().into();
        profiles.insert(
            spec.name.clone(),
            AgentProfile {
                spec,
                file: file.clone(),
                base,
                non_local,
                embedding_ok,
                local_excluded,
                modules,
            },
        );
    }
    profiles
}

/// Whether `name` may name a remote module: 1-32 characters of lowercase
/// letters, digits, `-` and `_`, starting and ending with a letter or digit, without
/// `__` (which joins module and tool in the names models see) or a dot
/// (which does so in every other name).
pub fn valid_module_name(name: &str) -> bool {
    (1..=32).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
        && !name.starts_with(['-', '_'])
        && !name.ends_with(['-', '_'])
        && !name.contains("__")
}
