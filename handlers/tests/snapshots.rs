//! Snapshots of what the model is shown: the OpenAI tool list of a caller
//! who may use every tool. A change to a definition, a description or the
//! registry's rendering shows here as a diff to review; `UPDATE_EXPECT=1
//! cargo test -p data-plane-handlers --test snapshots` accepts it.

// Test helpers report failure by panicking, like the tests that call them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use data_plane_handlers::offline_registry;
use data_plane_registry::{Permission, Settings, ToolContext};
use serde_json::{Value, json};
use uuid::Uuid;

#[test]
fn the_openai_tool_list_of_an_owner_in_a_space_with_the_web_on() {
    let registry = offline_registry().unwrap();
    let Value::Object(changes) = json!({
        "web_search_enabled": true,
        "fetch_web_page_enabled": true,
    }) else {
        unreachable!()
    };
    let settings = Settings::default().apply(&changes).unwrap();
    let ctx = ToolContext::new(Uuid::nil(), Some(Uuid::from_u128(1)), Permission::Owner)
        .with_settings(Arc::new(settings));
    let tools = registry.get_available_tools(&ctx);
    let names: Vec<&str> = tools
        .iter()
        .filter_map(|t| t["function"]["name"].as_str())
        .collect();
    assert_eq!(
        names.len(),
        registry.tools().len(),
        "every tool is offered: {names:?}"
    );
    let rendered = serde_json::to_string_pretty(&tools).unwrap() + "\n";
    expect_test::expect_file!["snapshots/openai_tools.json"].assert_eq(&rendered);
}
