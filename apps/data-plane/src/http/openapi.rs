//! The OpenAPI document of the HTTP surface, served at `/openapi.json`.
//! Paths and bodies are written by hand in docs/openapi.json (a test holds it
//! to the router); the list of error codes is generated from [`ErrorCode`]
//! and the agent profiles from definitions/agents, and tests keep the copies
//! in docs/openapi.json the same.

use std::sync::LazyLock;

use axum::http::HeaderValue;
use axum::response::IntoResponse;
use serde_json::{Value, json};

use crate::error::ErrorCode;

/// The document as written, embedded at build time.
const WRITTEN: &str = include_str!("../../../../docs/openapi.json");

/// The document as served: the written one with the error codes of the table.
static DOCUMENT: LazyLock<String> = LazyLock::new(|| {
    let mut doc: Value = serde_json::from_str(WRITTEN).unwrap_or_else(|e| {
        tracing::error!(error = %e, "docs/openapi.json is not JSON; serving it as written");
        Value::Null
    });
    if doc.is_null() {
        return WRITTEN.to_string();
    }
    if let Some(code) =
        doc.pointer_mut("/components/schemas/Error/properties/error/properties/code")
    {
        *code = error_code_schema();
    }
    if let Some(profiles) = doc.pointer_mut("/components/schemas/AgentProfile") {
        *profiles = agent_profile_schema();
    }
    doc.to_string()
});

/// The schema of `error.code`: every code of the table, with its status and meaning.
pub fn error_code_schema() -> Value {
    let described: Vec<String> = ErrorCode::ALL
        .iter()
        .map(|c| format!("`{}` ({}): {}", c.name(), c.status().as_u16(), c.meaning()))
        .collect();
    json!({
        "type": "string",
        "enum": ErrorCode::ALL.iter().map(|c| c.name()).collect::<Vec<_>>(),
        "description": described.join("; "),
    })
}

/// The schema of an agent profile's name: every profile of
/// definitions/agents, each with its description.
pub fn agent_profile_schema() -> Value {
    let registry = match data_plane_handlers::offline_registry() {
        Ok(registry) => registry,
        Err(e) => {
            tracing::error!(error = %e, "the registry cannot be built; the profiles are left out");
            return json!({ "type": "string" });
        }
    };
    let profiles = registry.profiles();
    let described: Vec<String> = profiles
        .values()
        .map(|p| format!("`{}`: {}", p.name(), p.spec.description))
        .collect();
    json!({
        "type": "string",
        "enum": profiles.keys().collect::<Vec<_>>(),
        "description": described.join(" "),
    })
}

pub async fn serve() -> impl IntoResponse {
    (
        [(
            axum::http::header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        DOCUMENT.as_str(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The surface in one line per operation: method, path, the statuses it
    /// documents and its request body's media type. A change to the API shows
    /// here as a diff to review; `UPDATE_EXPECT=1 cargo test -p data-plane
    /// --lib openapi` accepts it.
    #[test]
    fn the_documented_surface() {
        let doc: Value = serde_json::from_str(&DOCUMENT).expect("the served document is JSON");
        let mut lines = vec![format!(
            "openapi {} · {} {}",
            doc["openapi"].as_str().unwrap_or("?"),
            doc["info"]["title"].as_str().unwrap_or("?"),
            doc["info"]["version"].as_str().unwrap_or("?")
        )];
        let paths = doc["paths"].as_object().cloned().unwrap_or_default();
        for (path, ops) in &paths {
            let Some(ops) = ops.as_object() else { continue };
            for (method, op) in ops {
                if method == "parameters" {
                    continue;
                }
                let mut statuses: Vec<&String> = op["responses"]
                    .as_object()
                    .map(|r| r.keys().collect())
                    .unwrap_or_default();
                statuses.sort();
                let body = op["requestBody"]["content"]
                    .as_object()
                    .map(|c| c.keys().cloned().collect::<Vec<_>>().join(","))
                    .map_or(String::new(), |media| format!(" body {media}"));
                let statuses: Vec<&str> = statuses.iter().map(|s| s.as_str()).collect();
                lines.push(format!(
                    "{} {path} -> {}{body}",
                    method.to_uppercase(),
                    statuses.join(" ")
                ));
            }
        }
        lines.push(format!(
            "error codes: {}",
            ErrorCode::ALL
                .iter()
                .map(|c| c.name())
                .collect::<Vec<_>>()
                .join(" ")
        ));
        expect_test::expect_file!["../../tests/snapshots/openapi_surface.txt"]
            .assert_eq(&(lines.join("\n") + "\n"));
    }

    #[test]
    fn the_written_document_lists_the_agent_profiles() {
        let doc: Value = serde_json::from_str(WRITTEN).expect("docs/openapi.json is JSON");
        let written = doc
            .pointer("/components/schemas/AgentProfile")
            .cloned()
            .unwrap_or_default();
        assert_eq!(
            written,
            agent_profile_schema(),
            "docs/openapi.json's AgentProfile must be this schema; paste it there:\n{:#}",
            agent_profile_schema()
        );
    }

    #[test]
    fn the_written_document_lists_the_error_codes_of_the_table() {
        let doc: Value = serde_json::from_str(WRITTEN).expect("docs/openapi.json is JSON");
        let written = doc
            .pointer("/components/schemas/Error/properties/error/properties/code")
            .cloned()
            .unwrap_or_default();
        assert_eq!(
            written,
            error_code_schema(),
            "docs/openapi.json's Error.error.code must be this schema; paste it there:\n{:#}",
            error_code_schema()
        );
    }
}
