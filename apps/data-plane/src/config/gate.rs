//! The eval gate's flags: an HTTP gate, a policy file, which tools they see.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use clap::Args;
use data_plane_handlers::HttpGate;
use data_plane_registry::Gate;
use data_plane_registry::gate::{GateChain, PolicyGate};

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
}
