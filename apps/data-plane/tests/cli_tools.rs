//! `data-plane tools` lists the registry without a database or a model;
//! the logs a command writes to a file or a pipe carry no terminal colour
//! codes unless asked for, and JSON logs never.

// Test helpers report failure by panicking, like the tests that call them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[test]
fn tools_command_prints_every_tool_with_its_definition() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_data-plane"))
        .args(["tools", "--json"])
        // Nothing to connect to: the command must not try.
        .env("DATABASE_URL", "postgres://nobody@127.0.0.1:1/none")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let tools: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    let mut sorted = names.clone();
    sorted.sort_unstable();
    assert_eq!(names, sorted, "alphabetical");
    assert_eq!(names.len(), 12);
    for t in &tools {
        let name = t["name"].as_str().unwrap();
        assert_eq!(t["definition"]["name"], name);
        assert_eq!(t["definition_file"], format!("definitions/{name}.json"));
        assert_eq!(t["handler_file"], format!("handlers/src/{name}.rs"));
        assert!(t["metadata"]["timeout_ms"].as_u64().unwrap() > 0);
    }

    let human = std::process::Command::new(env!("CARGO_BIN_EXE_data-plane"))
        .arg("tools")
        .output()
        .unwrap();
    let text = String::from_utf8(human.stdout).unwrap();
    assert!(text.contains("search_documents  (Search"), "{text}");
    assert!(text.contains("offered when: a space is selected"), "{text}");
}

/// `data-plane tools --agent NAME` shows one profile's tools, for a local
/// model or not, and refuses an unknown profile naming the known ones.
#[test]
fn tools_command_shows_one_agent_profile() {
    let run = |args: &[&str], local: &str| {
        std::process::Command::new(env!("CARGO_BIN_EXE_data-plane"))
            .args(args)
            .env("DATABASE_URL", "postgres://nobody@127.0.0.1:1/none")
            .env("DATA_PLANE_LOCAL_MODEL", local)
            .output()
            .unwrap()
    };
    let names = |out: &std::process::Output| -> Vec<String> {
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        doc["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_string())
            .collect()
    };
    let explore = run(&["tools", "--json", "--agent", "explore"], "false");
    let doc: serde_json::Value = serde_json::from_slice(&explore.stdout).unwrap();
    assert_eq!(doc["agent"]["name"], "explore");
    assert_eq!(doc["agent"]["file"], "definitions/agents/explore.json");
    assert!(!names(&explore).contains(&"grep_documents".to_string()));
    assert_eq!(
        doc["tools"][0]["metadata"]["annotations"]["read_only"],
        true
    );

    let hosted = names(&run(&["tools", "--json", "--agent", "chat"], "false"));
    let local = names(&run(&["tools", "--json", "--agent", "chat"], "true"));
    assert!(hosted.contains(&"analyze_document".to_string()));
    assert!(!local.contains(&"analyze_document".to_string()));
    assert_eq!(hosted.len(), local.len() + 1);

    let text = String::from_utf8(run(&["tools", "--agent", "explore"], "auto").stdout).unwrap();
    assert!(text.contains("agent profile explore"), "{text}");
    assert!(text.contains("annotations: read_only,idempotent"), "{text}");

    let unknown = run(&["tools", "--agent", "nope"], "auto");
    assert!(!unknown.status.success());
    let error = String::from_utf8_lossy(&unknown.stderr);
    assert!(error.contains("unknown agent profile \"nope\""), "{error}");
    assert!(error.contains("chat, explore"), "{error}");
}

/// `data-plane token` in a fresh data folder logs that it generated the
/// JWT secret: to a pipe, as `make run > log` writes it, without colour
/// codes; with `DATA_PLANE_LOG_COLOR=always`, with them; as JSON, never.
#[tokio::test]
async fn logs_written_to_a_pipe_carry_no_colour_codes_unless_asked() {
    let test = data_plane_store::testing::TestDatabase::create().await;
    let logged = |env: &[(&str, &str)]| {
        let data_dir = tempfile::tempdir().unwrap();
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_data-plane"));
        command
            .args(["token", "--user", "logs@example.com"])
            .env("DATABASE_URL", &test.app_url)
            .env("DATA_PLANE_DATA_DIR", data_dir.path())
            .env("RUST_LOG", "info")
            .env_remove("NO_COLOR")
            .env_remove("DATA_PLANE_LOG_COLOR")
            .env_remove("DATA_PLANE_LOG_FORMAT");
        for (key, value) in env {
            command.env(key, value);
        }
        let out = command.output().unwrap();
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert!(out.status.success(), "{stderr}");
        assert!(stderr.contains("generated a new JWT secret"), "{stderr}");
        stderr
    };
    let escape = "\x1b[";
    let piped = logged(&[]);
    assert!(!piped.contains(escape), "{piped:?}");
    let never = logged(&[("DATA_PLANE_LOG_COLOR", "never")]);
    assert!(!never.contains(escape), "{never:?}");
    let asked = logged(&[("DATA_PLANE_LOG_COLOR", "always")]);
    assert!(asked.contains(escape), "{asked:?}");
    let json = logged(&[
        ("DATA_PLANE_LOG_COLOR", "always"),
        ("DATA_PLANE_LOG_FORMAT", "json"),
    ]);
    assert!(!json.contains(escape), "{json:?}");
    for line in json.lines().filter(|l| !l.trim().is_empty()) {
        let record: serde_json::Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("a log line that is not JSON ({e}): {line:?}"));
        assert!(record["level"].is_string(), "{record}");
    }
}
