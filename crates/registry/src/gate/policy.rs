//! The policy gate: rules read from a JSON file (docs/tools.md, "The eval
//! gate"), tried in order, the first that matches deciding; a call no rule
//! matches gets the file's default. Parsed from text here; the binary reads
//! the file.

use async_trait::async_trait;
use globset::{Glob, GlobSet, GlobSetBuilder};
use serde::Deserialize;
use serde_json::Value;
use uuid::Uuid;

use super::{Gate, GateCall, GateDecision, GateError};
use crate::{Category, CostTier, Permission};

/// What a rule (or the default) does with a call it matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Effect {
    Allow,
    Deny,
    Ask,
}

/// A policy file that cannot be used; the message names the file and, for
/// a rule, its index (from 0).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}: {message}")]
pub struct PolicyError {
    pub file: String,
    pub message: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PolicyFile {
    #[serde(default = "allow")]
    default: Effect,
    default_reason: Option<String>,
    rules: Vec<Value>,
}

fn allow() -> Effect {
    Effect::Allow
}

/// One rule as written; every condition left out matches any call.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RuleFile {
    effect: Effect,
    reason: Option<String>,
    /// Tool names or globs (`web_*`).
    tools: Option<Vec<String>>,
    categories: Option<Vec<Category>>,
    cost: Option<Vec<CostTier>>,
    annotations: Option<AnnotationMatch>,
    /// The permission the tool requires.
    permission: Option<Vec<Permission>>,
    caller_at_least: Option<Permission>,
    caller_at_most: Option<Permission>,
    /// Space ids, or `"none"` for a call without a space.
    spaces: Option<Vec<String>>,
    /// Agent profile names, or `"none"` for a call outside any profile.
    agents: Option<Vec<String>>,
}

/// Annotation flags a call's tool must have, as stated; the others may be anything.
#[derive(Debug, Clone, Copy, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct AnnotationMatch {
    read_only: Option<bool>,
    destructive: Option<bool>,
    idempotent: Option<bool>,
    open_world: Option<bool>,
    requires_confirmation: Option<bool>,
}

#[derive(Debug)]
struct Rule {
    effect: Effect,
    reason: String,
    tools: Option<GlobSet>,
    categories: Option<Vec<Category>>,
    cost: Option<Vec<CostTier>>,
    annotations: AnnotationMatch,
    permission: Option<Vec<Permission>>,
    caller_at_least: Option<Permission>,
    caller_at_most: Option<Permission>,
    /// `None` in the list stands for "no space".
    spaces: Option<Vec<Option<Uuid>>>,
    agents: Option<Vec<Option<String>>>,
}

/// The rules of one policy file.
#[derive(Debug)]
pub struct PolicyGate {
    rules: Vec<Rule>,
    default: Effect,
    default_reason: String,
}

impl PolicyGate {
    /// Parses the policy `text` read from `file`. `tools` are the names the
    /// registry knows: a name or glob that matches none of them is refused,
    /// since a misspelt rule would otherwise never apply.
    pub fn parse(file: &str, text: &str, tools: &[&str]) -> Result<PolicyGate, PolicyError> {
        let error = |message: String| PolicyError {
            file: file.to_string(),
            message,
        };
        let policy: PolicyFile = serde_json::from_str(text)
            .map_err(|e| error(format!("not a valid gate policy: {e}")))?;
        let rules = policy
            .rules
            .into_iter()
            .enumerate()
            .map(|(i, value)| {
                Rule::parse(value, tools).map_err(|m| error(format!("rule {i}: {m}")))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let default_reason = policy
            .default_reason
            .unwrap_or_else(|| "no rule of the gate policy allows this call".to_string());
        Ok(PolicyGate {
            rules,
            default: policy.default,
            default_reason,
        })
    }

    /// The decision for one call: the first rule that matches, else the default.
    pub fn decide(&self, call: &GateCall<'_>) -> GateDecision {
        let (effect, reason) = self
            .rules
            .iter()
            .find(|r| r.matches(call))
            .map_or((self.default, &self.default_reason), |r| {
                (r.effect, &r.reason)
            });
        match effect {
            Effect::Allow => GateDecision::Allow,
            Effect::Deny => GateDecision::Deny {
                reason: reason.clone(),
            },
            Effect::Ask => GateDecision::Ask {
                reason: reason.clone(),
            },
        }
    }
}

#[async_trait]
impl Gate for PolicyGate {
    async fn check(&self, call: &GateCall<'_>) -> Result<GateDecision, GateError> {
        Ok(self.decide(call))
    }
}

impl Rule {
    fn parse(value: Value, known: &[&str]) -> Result<Rule, String> {
        let r: RuleFile = serde_json::from_value(value).map_err(|e| e.to_string())?;
        let reason = match (r.effect, r.reason) {
            (_, Some(reason)) if !reason.trim().is_empty() => reason,
            (Effect::Allow, _) => String::new(),
            (effect, _) => {
                return Err(format!(
                    "a rule that says {effect:?} needs a \"reason\" (the model reads it)"
                )
                .to_lowercase());
            }
        };
        let tools = match r.tools {
            None => None,
            Some(patterns) => {
                let mut set = GlobSetBuilder::new();
                for pattern in &patterns {
                    let glob = Glob::new(pattern)
                        .map_err(|e| format!("tool pattern {pattern:?} is not a glob: {e}"))?;
                    let matcher = glob.compile_matcher();
                    // `crm.*` stands for module crm's tools, known only once
                    // it is discovered: a pattern under `crm.` may name them.
                    let matches_known = |t: &&str| match t.strip_suffix(".*") {
                        Some(module) => pattern
                            .strip_prefix(module)
                            .is_some_and(|rest| rest.starts_with('.')),
                        None => matcher.is_match(t),
                    };
                    if !known.iter().any(matches_known) {
                        return Err(format!(
                            "tool pattern {pattern:?} matches no tool that passes the gate (those are: {})",
                            known.join(", ")
                        ));
                    }
                    set.add(glob);
                }
                Some(set.build().map_err(|e| e.to_string())?)
            }
        };
        if let (Some(least), Some(most)) = (r.caller_at_least, r.caller_at_most)
            && least > most
        {
            return Err(format!(
                "caller_at_least {} is above caller_at_most {}: the rule can never match",
                least.as_str(),
                most.as_str()
            ));
        }
        let spaces = r
            .spaces
            .map(|spaces| {
                spaces
                    .iter()
                    .map(|s| match s.as_str() {
                        "none" => Ok(None),
                        id => Uuid::parse_str(id)
                            .map(Some)
                            .map_err(|_| format!("space {s:?} is neither a space id nor \"none\"")),
                    })
                    .collect::<Result<Vec<_>, _>>()
            })
            .transpose()?;
        let agents = r.agents.map(|agents| {
            agents
                .into_iter()
                .map(|a| (a != "none").then_some(a))
                .collect()
        });
        Ok(Rule {
            effect: r.effect,
            reason,
            tools,
            categories: r.categories,
            cost: r.cost,
            annotations: r.annotations.unwrap_or_default(),
            permission: r.permission,
            caller_at_least: r.caller_at_least,
            caller_at_most: r.caller_at_most,
            spaces,
            agents,
        })
    }

    fn matches(&self, call: &GateCall<'_>) -> bool {
        let entry = call.entry;
        let ctx = call.ctx;
        self.tools
            .as_ref()
            .is_none_or(|set| set.is_match(&entry.name))
            && self
                .categories
                .as_ref()
                .is_none_or(|c| c.contains(&entry.meta.category))
            && self
                .cost
                .as_ref()
                .is_none_or(|c| c.contains(&entry.meta.cost))
            && self.annotations.matches(&entry.annotations)
            && self
                .permission
                .as_ref()
                .is_none_or(|p| p.contains(&entry.meta.permission))
            && self.caller_at_least.is_none_or(|p| ctx.permission >= p)
            && self.caller_at_most.is_none_or(|p| ctx.permission <= p)
            && self
                .spaces
                .as_ref()
                .is_none_or(|s| s.contains(&ctx.space_id))
            && self
                .agents
                .as_ref()
                .is_none_or(|agents| agents.iter().any(|a| a.as_deref() == ctx.agent.as_deref()))
    }
}

impl AnnotationMatch {
    fn matches(&self, a: &crate::Annotations) -> bool {
        let flag = |want: Option<bool>, have: bool| want.is_none_or(|w| w == have);
        flag(self.read_only, a.read_only)
            && flag(self.destructive, a.destructive)
            && flag(self.idempotent, a.idempotent)
            && flag(self.open_world, a.open_world)
            && flag(self.requires_confirmation, a.requires_confirmation)
    }
}

#[cfg(test)]
mod tests {
    // Test helpers report failure by panicking, like the tests that call them.
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::sync::Arc;
    use std::time::Duration;

    use serde_json::{Value, json};

    use super::*;
    use crate::{
        AnnotationHints, Callbacks, DefinitionFile, HandlerEntry, NoLedger, RateLimits, Registry,
        ToolContext, ToolError, ToolHandler, ToolMeta,
    };

    struct Nothing;

    #[async_trait]
    impl ToolHandler for Nothing {
        async fn call(
            &self,
            _args: Value,
            _ctx: &ToolContext,
            _callbacks: &dyn Callbacks,
        ) -> Result<Value, ToolError> {
            Ok(Value::Null)
        }
    }

    fn tool(
        name: &'static str,
        category: Category,
        cost: CostTier,
        permission: Permission,
    ) -> (DefinitionFile, HandlerEntry) {
        let definition = json!({
            "name": name,
            "description": "a tool of the policy tests",
            "parameters": { "type": "object", "properties": {}, "additionalProperties": false }
        });
        let handler = HandlerEntry {
            name,
            file: "crates/registry/src/gate/policy.rs",
            meta: ToolMeta {
                category,
                short_description: "a tool of the policy tests",
                available_when: "always",
                aliases: &[],
                annotations: AnnotationHints::DERIVED,
                cost,
                permission,
                timeout: Duration::from_secs(1),
                limits: RateLimits::NONE,
                requires_gate: true,
                defer_loading: false,
                tag: None,
            },
            available: |_| true,
            shape: None,
            asks: None,
            handler: Arc::new(Nothing),
            args_schema: json!({}),
            output_schema: None,
        };
        let file = DefinitionFile {
            file: format!("definitions/{name}.json"),
            text: definition.to_string(),
        };
        (file, handler)
    }

    fn registry() -> Registry {
        let (definitions, handlers) = [
            tool(
                "web_search",
                Category::Web,
                CostTier::Expensive,
                Permission::User,
            ),
            tool(
                "fetch_web_page",
                Category::Web,
                CostTier::Moderate,
                Permission::User,
            ),
            tool(
                "read_document",
                Category::Document,
                CostTier::Cheap,
                Permission::Guest,
            ),
        ]
        .into_iter()
        .unzip();
        Registry::build(definitions, handlers, Arc::new(NoLedger)).unwrap()
    }

    const TOOLS: &[&str] = &["fetch_web_page", "read_document", "web_search"];
    const SPACE: &str = "00000000-0000-0000-0000-000000000007";

    fn gate(policy: Value) -> PolicyGate {
        PolicyGate::parse("gate.json", &policy.to_string(), TOOLS).unwrap()
    }

    /// The decision `policy` reaches for `tool` called in `ctx`.
    fn check(policy: &PolicyGate, tool: &str, ctx: &ToolContext, expected: GateDecision) {
        let registry = registry();
        let entry = registry.get(tool).unwrap();
        let call = GateCall {
            entry: &entry,
            args: &json!({}),
            ctx,
        };
        assert_eq!(policy.decide(&call), expected, "{tool} in {ctx:?}");
    }

    fn ctx(permission: Permission, space: Option<&str>, agent: Option<&str>) -> ToolContext {
        let mut ctx = ToolContext::new(
            Uuid::nil(),
            space.map(|s| Uuid::parse_str(s).unwrap()),
            permission,
        );
        ctx.agent = agent.map(Arc::from);
        ctx
    }

    fn deny(reason: &str) -> GateDecision {
        GateDecision::Deny {
            reason: reason.into(),
        }
    }

    #[test]
    fn the_first_matching_rule_decides() {
        let policy = gate(json!({
            "rules": [
                { "effect": "allow", "tools": ["fetch_web_page"], "caller_at_least": "admin" },
                { "effect": "deny", "reason": "no web for users", "categories": ["web"], "caller_at_most": "user" },
                { "effect": "ask", "reason": "costly", "cost": ["expensive"] }
            ]
        }));
        let user = ctx(Permission::User, None, None);
        let admin = ctx(Permission::Admin, None, None);
        check(&policy, "fetch_web_page", &admin, GateDecision::Allow);
        check(&policy, "fetch_web_page", &user, deny("no web for users"));
        check(&policy, "web_search", &user, deny("no web for users"));
        check(
            &policy,
            "web_search",
            &admin,
            GateDecision::Ask {
                reason: "costly".into(),
            },
        );
        // No rule matches: the default, allow.
        check(&policy, "read_document", &user, GateDecision::Allow);
    }

    #[test]
    fn every_condition_narrows_a_rule() {
        let user = ctx(Permission::User, None, None);
        let in_space = ctx(Permission::User, Some(SPACE), None);
        let analyst = ctx(Permission::User, None, Some("document_analyst"));
        let blocked = deny("blocked");
        // (conditions, tool, context, whether the deny rule matches)
        let cases: Vec<(Value, &str, &ToolContext, bool)> = vec![
            (json!({}), "read_document", &user, true),
            (json!({ "tools": ["web_*"] }), "web_search", &user, true),
            (
                json!({ "tools": ["web_*"] }),
                "fetch_web_page",
                &user,
                false,
            ),
            (
                json!({ "tools": ["*_web_*", "read_document"] }),
                "read_document",
                &user,
                true,
            ),
            (
                json!({ "categories": ["document"] }),
                "web_search",
                &user,
                false,
            ),
            (
                json!({ "cost": ["cheap", "moderate"] }),
                "fetch_web_page",
                &user,
                true,
            ),
            (
                json!({ "cost": ["cheap", "moderate"] }),
                "web_search",
                &user,
                false,
            ),
            (
                json!({ "annotations": { "open_world": true } }),
                "web_search",
                &user,
                true,
            ),
            (
                json!({ "annotations": { "open_world": true } }),
                "read_document",
                &user,
                false,
            ),
            (
                json!({ "annotations": { "read_only": true, "open_world": false } }),
                "read_document",
                &user,
                true,
            ),
            (json!({ "permission": ["user"] }), "web_search", &user, true),
            (
                json!({ "permission": ["user"] }),
                "read_document",
                &user,
                false,
            ),
            (
                json!({ "caller_at_least": "admin" }),
                "read_document",
                &user,
                false,
            ),
            (
                json!({ "caller_at_most": "guest" }),
                "read_document",
                &user,
                false,
            ),
            (
                json!({ "caller_at_least": "user", "caller_at_most": "user" }),
                "read_document",
                &user,
                true,
            ),
            (
                json!({ "spaces": [SPACE] }),
                "read_document",
                &in_space,
                true,
            ),
            (json!({ "spaces": [SPACE] }), "read_document", &user, false),
            (json!({ "spaces": ["none"] }), "read_document", &user, true),
            (
                json!({ "spaces": ["none"] }),
                "read_document",
                &in_space,
                false,
            ),
            (
                json!({ "agents": ["document_analyst"] }),
                "read_document",
                &analyst,
                true,
            ),
            (
                json!({ "agents": ["document_analyst"] }),
                "read_document",
                &user,
                false,
            ),
            (json!({ "agents": ["none"] }), "read_document", &user, true),
            (
                json!({ "agents": ["none"] }),
                "read_document",
                &analyst,
                false,
            ),
            (
                json!({ "tools": ["web_search"], "caller_at_least": "admin" }),
                "web_search",
                &user,
                false,
            ),
        ];
        for (conditions, tool, ctx, matches) in cases {
            let mut rule = conditions.clone();
            rule["effect"] = json!("deny");
            rule["reason"] = json!("blocked");
            let policy = gate(json!({ "rules": [rule] }));
            let expected = if matches {
                blocked.clone()
            } else {
                GateDecision::Allow
            };
            check(&policy, tool, ctx, expected);
        }
    }

    #[test]
    fn the_default_decides_what_no_rule_matches() {
        let user = ctx(Permission::User, None, None);
        let closed = gate(json!({
            "default": "deny",
            "rules": [{ "effect": "allow", "tools": ["read_document"] }]
        }));
        check(&closed, "read_document", &user, GateDecision::Allow);
        check(
            &closed,
            "web_search",
            &user,
            deny("no rule of the gate policy allows this call"),
        );
        let asking = gate(
            json!({ "default": "ask", "default_reason": "web calls are reviewed", "rules": [] }),
        );
        check(
            &asking,
            "web_search",
            &user,
            GateDecision::Ask {
                reason: "web calls are reviewed".into(),
            },
        );
    }

    #[test]
    fn an_invalid_policy_names_the_file_and_the_rule() {
        let check = |text: &str, expected: &str| {
            let e = PolicyGate::parse("/etc/data-plane/gate.json", text, TOOLS).unwrap_err();
            let message = e.to_string();
            assert!(
                message.starts_with("/etc/data-plane/gate.json: "),
                "{message}"
            );
            assert!(message.contains(expected), "{message} lacks {expected:?}");
        };
        check("{", "not a valid gate policy");
        check(r#"{"rules": [], "mode": "strict"}"#, "unknown field `mode`");
        check(
            r#"{"default": "maybe", "rules": []}"#,
            "unknown variant `maybe`",
        );
        let rules = |rules: Value| json!({ "rules": rules }).to_string();
        let allow = json!({ "effect": "allow" });
        check(
            &rules(json!([allow, { "effect": "deny" }])),
            "rule 1: a rule that says deny needs a \"reason\"",
        );
        check(
            &rules(json!([{ "effect": "ask", "reason": " " }])),
            "rule 0: a rule that says ask needs a \"reason\"",
        );
        check(
            &rules(json!([allow, allow, { "effect": "allow", "tool": ["web_search"] }])),
            "rule 2: unknown field `tool`",
        );
        check(
            &rules(json!([{ "effect": "allow", "tools": ["web_serch"] }])),
            "rule 0: tool pattern \"web_serch\" matches no tool that passes the gate (those are: fetch_web_page, read_document, web_search)",
        );
        check(
            &rules(json!([{ "effect": "allow", "tools": ["web_[a"] }])),
            "rule 0: tool pattern \"web_[a\" is not a glob",
        );
        check(
            &rules(json!([{ "effect": "allow", "categories": ["internet"] }])),
            "rule 0: unknown variant `internet`",
        );
        check(
            &rules(json!([{ "effect": "allow", "cost": ["free"] }])),
            "rule 0: unknown variant `free`",
        );
        check(
            &rules(json!([{ "effect": "allow", "annotations": { "open": true } }])),
            "rule 0: unknown field `open`",
        );
        check(
            &rules(json!([{ "effect": "allow", "caller_at_least": "root" }])),
            "rule 0: unknown variant `root`",
        );
        check(
            &rules(
                json!([{ "effect": "allow", "caller_at_least": "admin", "caller_at_most": "user" }]),
            ),
            "rule 0: caller_at_least admin is above caller_at_most user",
        );
        check(
            &rules(json!([{ "effect": "allow", "spaces": ["alpha"] }])),
            "rule 0: space \"alpha\" is neither a space id nor \"none\"",
        );
        check(
            &rules(json!([{ "effect": "wait" }])),
            "rule 0: unknown variant `wait`",
        );
    }
}
