//! The chat page: its files as the server serves them, and the page driven
//! end to end in headless Chromium (Debian's package, through playwright-core
//! from npm) against a real server on 127.0.0.1, the real PostgreSQL and a
//! fake OpenAI-compatible model scripted here. The browser part is
//! tests/e2e/chat_page.mjs; this test starts everything, runs it, and checks
//! what the server and the model saw.

// Test helpers report failure by panicking, like the tests that call them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use data_plane::auth::{JwtKeys, ServiceTokens};
use data_plane::state::AppState;
use data_plane_agent::AgentConfig;
use data_plane_agent::testing::{FakeModel, Piece, Reply, ScriptedCall, chunk, tool_calls_reply};
use data_plane_handlers::{ModelSettings, SubAgentLimits};
use data_plane_ingest::pipeline::{Pipeline, Target};
use data_plane_search::KeywordIndex;
use data_plane_store::Scope;
use data_plane_store::content::{self, SourceKind};
use data_plane_store::identity::{self, MembershipRole, Permission};
use data_plane_store::testing::TestDatabase;
use data_plane_web::fetch::{FetchConfig, Fetcher};
use data_plane_web::search::{SearchConfig, WebSearch};
use reqwest::StatusCode;
use serde_json::{Value, json};
use uuid::Uuid;

const SPACE: &str = "handbook";
const ANSWER_START: &str = "VACUUM reclaims ";
const ANSWER_END: &str = "the space dead tuples leave behind [1]. <img src=x onerror=alert(1)>";
const SLOW_TEXT: &str = "Thinking slowly";
const NESTED_QUESTION: &str = "Analyse the vacuum page.";
const NESTED_TEXT: &str = "The page says VACUUM reclaims storage.";
const NESTED_ANSWER: &str = "The analysis is in.";
/// A private address: fetch_web_page asks first (no host is trusted), and
/// once approved the SSRF guard refuses it without connecting.
const FETCH_URL: &str = "http://10.9.8.7/notes";
const DENIED_ANSWER: &str = "I was not allowed to fetch it.";
const APPROVED_ANSWER: &str = "The address is not public.";
const RELOAD_START: &str = "The first half, ";
const RELOAD_END: &str = "then the second half.";
const LAST_QUESTION: &str = "Still there?";
const LAST_ANSWER: &str = "Still here.";

struct World {
    test: TestDatabase,
    jwt: JwtKeys,
    state: AppState,
    admin: Uuid,
    viewer: Uuid,
    /// maintenance/vacuum.md, the first document of the space.
    document: Uuid,
    /// The space's one source, "guides".
    source: Uuid,
}

async fn world() -> World {
    world_with(
        &[],
        Fetcher::new(FetchConfig::default()),
        WebSearch::default(),
    )
    .await
}

/// The world with `extra` files (path, bytes) in the guides source beside
/// the vacuum page, and this fetcher and web search.
async fn world_with(extra: &[(&str, &[u8])], fetcher: Fetcher, web_search: WebSearch) -> World {
    let test = TestDatabase::create().await;
    let db = test.db.clone();
    let embedder = common::embedder();
    let mut tx = db.begin(Scope::System).await.unwrap();
    let admin = identity::upsert_user(&mut tx, "root@example.com", Some(Permission::Admin))
        .await
        .unwrap()
        .id;
    let viewer = identity::upsert_user(&mut tx, "vera@example.com", Some(Permission::User))
        .await
        .unwrap()
        .id;
    let (space, _) = identity::ensure_space(&mut tx, SPACE).await.unwrap();
    let (_other, _) = identity::ensure_space(&mut tx, "elsewhere").await.unwrap();
    for user in [admin, viewer] {
        identity::add_member(&mut tx, space.id, user, MembershipRole::Viewer)
            .await
            .unwrap();
    }
    let source = content::ensure_source(&mut tx, space.id, "guides", SourceKind::Files)
        .await
        .unwrap();
    tx.commit().await.unwrap();
    let files = [(
        "maintenance/vacuum.md",
        &b"# Vacuuming\n\nVACUUM reclaims storage occupied by dead tuples.\n"[..],
    )];
    for (path, bytes) in files.iter().chain(extra) {
        Pipeline::new(db.clone(), embedder.clone())
            .ingest_file(
                Scope::System,
                Target {
                    space_id: space.id,
                    source_id: source.id,
                },
                path,
                bytes,
            )
            .await
            .unwrap();
    }
    let mut tx = db.begin(Scope::System).await.unwrap();
    let document: Uuid =
        sqlx::query_scalar("SELECT id FROM documents WHERE path = 'maintenance/vacuum.md'")
            .fetch_one(&mut *tx)
            .await
            .unwrap();
    tx.commit().await.unwrap();
    let jwt = common::jwt();
    let state = AppState::new(
        db,
        KeywordIndex::in_memory().unwrap(),
        embedder,
        jwt.clone(),
        ServiceTokens::default(),
        Arc::new(fetcher),
        web_search,
    )
    .unwrap();
    World {
        test,
        jwt,
        state,
        admin,
        viewer,
        document,
        source: source.id,
    }
}

impl World {
    fn token(&self, user: Uuid, role: Permission) -> String {
        self.jwt
            .issue(user, "x@example.com", role, Duration::from_secs(600))
            .unwrap()
    }
}

#[tokio::test]
async fn the_page_and_its_assets_are_served_from_the_binary() {
    let w = world().await;
    let base = common::serve(w.state.clone()).await;
    // (path, status, content type, a piece of the body)
    let cases = [
        ("/", 200, "text/html", "<title>data-plane chat</title>"),
        ("/static/app.js", 200, "text/javascript", "class SseParser"),
        (
            "/static/markdown.js",
            200,
            "text/javascript",
            "const Markdown",
        ),
        ("/static/views.js", 200, "text/javascript", "const Views"),
        ("/static/style.css", 200, "text/css", ".tool-result"),
        ("/static/missing.js", 404, "application/json", "missing.js"),
        ("/static/..%2Fapp.js", 404, "application/json", "not_found"),
    ];
    for (path, status, ctype, piece) in cases {
        check(&base, path, status, ctype, piece).await;
    }
}

async fn check(base: &str, path: &str, status: u16, ctype: &str, piece: &str) {
    let r = reqwest::get(format!("{base}{path}")).await.unwrap();
    assert_eq!(r.status().as_u16(), status, "GET {path}");
    let headers = r.headers().clone();
    let got = headers["content-type"].to_str().unwrap();
    assert!(got.starts_with(ctype), "GET {path} answered {got}");
    if status == 200 {
        let csp = headers["content-security-policy"].to_str().unwrap();
        assert!(
            csp.contains("script-src 'self'") && !csp.contains("unsafe-inline"),
            "GET {path}: content-security-policy {csp}"
        );
        assert_eq!(headers["x-content-type-options"], "nosniff", "GET {path}");
    }
    let body = r.text().await.unwrap();
    assert!(
        body.contains(piece),
        "GET {path} lacks {piece:?}: {body:.200}"
    );
}

/// What the browser test needs, or a failure that says how to get it: a
/// missing browser must never pass as a skipped test.
struct Browser {
    node: PathBuf,
    chromium: PathBuf,
    script_dir: PathBuf,
}

fn on_path(names: &[&str]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .flat_map(|dir| names.iter().map(move |n| dir.join(n)))
        .find(|p| p.is_file())
}

fn browser() -> Browser {
    let script_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/e2e");
    let chromium = match std::env::var_os("CHROMIUM") {
        Some(path) => Some(PathBuf::from(path)).filter(|p| p.is_file()),
        None => on_path(&["chromium", "chromium-browser"]),
    };
    let node = on_path(&["node", "nodejs"]);
    let playwright = script_dir.join("node_modules/playwright-core/package.json");
    let mut missing = Vec::new();
    if chromium.is_none() {
        missing.push("chromium (Debian's package)".to_string());
    }
    if node.is_none() {
        missing.push("node".to_string());
    }
    if !playwright.is_file() {
        missing.push(format!("playwright-core ({})", playwright.display()));
    }
    assert!(
        missing.is_empty(),
        "the chat page's browser test needs {}: run `make setup` (scripts/setup.sh installs them)",
        missing.join(", ")
    );
    Browser {
        node: node.unwrap(),
        chromium: chromium.unwrap(),
        script_dir,
    }
}

impl Browser {
    /// Runs `tests/e2e/{script}` with `envs`, the browser and a folder for
    /// its screenshots (DATA_PLANE_E2E_SHOTS keeps them for a person to look
    /// at), for at most three minutes; it must pass and leave `shots` there
    /// as real screenshots.
    async fn run(&self, script: &str, envs: &[(&str, &str)], shots: &[&str]) {
        let temp = tempfile::tempdir().unwrap();
        let dir = std::env::var_os("DATA_PLANE_E2E_SHOTS")
            .map(PathBuf::from)
            .unwrap_or_else(|| temp.path().to_path_buf());
        std::fs::create_dir_all(&dir).unwrap();
        let mut node = tokio::process::Command::new(&self.node);
        node.arg(script)
            .current_dir(&self.script_dir)
            .envs(envs.iter().copied())
            .env("SHOT_DIR", &dir)
            .env("CHROMIUM", &self.chromium)
            .kill_on_drop(true);
        let status = tokio::time::timeout(Duration::from_secs(180), node.status())
            .await
            .unwrap_or_else(|_| panic!("{script} ran past three minutes"))
            .unwrap();
        assert!(
            status.success(),
            "{script} failed ({status}); its output is above"
        );
        for shot in shots {
            let bytes = std::fs::read(dir.join(shot)).unwrap();
            assert!(
                bytes.starts_with(b"\x89PNG\r\n\x1a\n") && bytes.len() > 5_000,
                "{shot} is not a real screenshot ({} bytes)",
                bytes.len()
            );
        }
    }
}

/// The model's side of the turns the browser has: a search, then an answer
/// in two parts with a pause between; a reply that never ends (for Stop);
/// an upstream failure; analyze_document, whose sub-agent (the same model)
/// reads the document and answers, then the final answer; two fetches that
/// ask for approval (denied, approved), each followed by an answer; an
/// answer with a long pause (the page is reloaded in it); a last answer.
fn script(model: &FakeModel, document: Uuid) {
    model.push(tool_calls_reply(&[ScriptedCall {
        id: "call_search_1",
        name: "search_documents",
        fragments: &["{\"query\": \"vac", "uum\", \"limit\": 3}"],
    }]));
    model.push(Reply::Stream(vec![
        Piece::Chunk(chunk(json!({ "role": "assistant", "content": "" }), None)),
        Piece::Chunk(chunk(json!({ "content": ANSWER_START }), None)),
        // Long enough for the page to be seen half-way.
        Piece::Pause(Duration::from_millis(1500)),
        Piece::Chunk(chunk(json!({ "content": ANSWER_END }), None)),
        Piece::Chunk(chunk(json!({}), Some("stop"))),
        Piece::Done,
    ]));
    model.push(Reply::Stream(vec![
        Piece::Chunk(chunk(json!({ "role": "assistant", "content": "" }), None)),
        Piece::Chunk(chunk(json!({ "content": SLOW_TEXT }), None)),
        Piece::Hang,
    ]));
    model.push(Reply::Status {
        status: 500,
        body: json!({"error": {"message": "scripted failure", "type": "server_error"}}).to_string(),
    });
    let analyze_args =
        json!({"document_id": document, "question": "what does it say?"}).to_string();
    let (head, tail) = analyze_args.split_at(20);
    model.push(tool_calls_reply(&[ScriptedCall {
        id: "call_analyze_1",
        name: "analyze_document",
        fragments: &[head, tail],
    }]));
    // The sub-agent's own turns: read the document it is pinned to, answer.
    model.push(tool_calls_reply(&[ScriptedCall {
        id: "call_read_1",
        name: "read_document",
        fragments: &["{\"max_length\": 500}"],
    }]));
    model.push(Reply::Stream(vec![
        Piece::Chunk(chunk(json!({ "role": "assistant", "content": "" }), None)),
        Piece::Chunk(chunk(json!({ "content": NESTED_TEXT }), None)),
        Piece::Chunk(chunk(json!({}), Some("stop"))),
        Piece::Done,
    ]));
    model.push(Reply::Stream(vec![
        Piece::Chunk(chunk(json!({ "role": "assistant", "content": "" }), None)),
        Piece::Chunk(chunk(json!({ "content": NESTED_ANSWER }), None)),
        Piece::Chunk(chunk(json!({}), Some("stop"))),
        Piece::Done,
    ]));
    let fetch = json!({ "url": FETCH_URL }).to_string();
    for (id, answer) in [
        ("call_fetch_1", DENIED_ANSWER),
        ("call_fetch_2", APPROVED_ANSWER),
    ] {
        model.push(tool_calls_reply(&[ScriptedCall {
            id,
            name: "fetch_web_page",
            fragments: &[&fetch],
        }]));
        model.push(text(&[answer], Duration::ZERO));
    }
    model.push(text(
        &[RELOAD_START, RELOAD_END],
        Duration::from_millis(2500),
    ));
    model.push(text(&[LAST_ANSWER], Duration::ZERO));
}

/// A streamed answer in `parts`, `pause` before each part after the first.
fn text(parts: &[&str], pause: Duration) -> Reply {
    let mut pieces = vec![Piece::Chunk(chunk(
        json!({ "role": "assistant", "content": "" }),
        None,
    ))];
    for (i, part) in parts.iter().enumerate() {
        if i > 0 {
            pieces.push(Piece::Pause(pause));
        }
        pieces.push(Piece::Chunk(chunk(json!({ "content": part }), None)));
    }
    pieces.push(Piece::Chunk(chunk(json!({}), Some("stop"))));
    pieces.push(Piece::Done);
    Reply::Stream(pieces)
}

fn roles(messages: &Value) -> Vec<String> {
    messages
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap().to_string())
        .filter(|role| role != "system")
        .filter(|r| r != "system")
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_chat_page_works_in_headless_chromium() {
    let browser = browser();
    let w = world().await;
    let model = FakeModel::start().await;
    script(&model, w.document);
    let mut config = AgentConfig::new(model.base_url(), "test-model");
    config.api_key = Some("sk-test".into());
    // The reply that never ends must outlast the browser's Stop.
    config.first_byte_timeout = Duration::from_secs(30);
    config.idle_timeout = Duration::from_secs(30);
    let state = w.state.clone();
    // analyze_document's sub-agent talks to the same model.
    state.connect_model(ModelSettings {
        agent: config.clone(),
        sub_agent: SubAgentLimits::default(),
    });
    // The chat agent with the shipped prompt: the answer cites the search
    // hit by its number.
    config.system_prompt = Some(data_plane_agent::prompt::PromptTemplate::default());
    let base = common::serve(state.with_agent(config).unwrap()).await;
    let admin = w.token(w.admin, Permission::Admin);
    let viewer = w.token(w.viewer, Permission::User);

    browser
        .run(
            "chat_page.mjs",
            &[
                ("DATA_PLANE_URL", &base),
                ("ADMIN_TOKEN", &admin),
                ("USER_TOKEN", &viewer),
                ("SPACE_NAME", SPACE),
                ("TOOL_NAME", "search_documents"),
                ("TOOL_ARGS_TEXT", "\"query\": \"vacuum\""),
                (
                    "RESULT_TEXT",
                    "VACUUM reclaims storage occupied by dead tuples",
                ),
                ("ANSWER_START", ANSWER_START),
                ("ANSWER_END", ANSWER_END),
                ("CITED_PATH", "maintenance/vacuum.md"),
                (
                    "CITED_TEXT",
                    "VACUUM reclaims storage occupied by dead tuples",
                ),
                ("SLOW_TEXT", SLOW_TEXT),
                ("NESTED_QUESTION", NESTED_QUESTION),
                ("NESTED_TEXT", NESTED_TEXT),
                ("NESTED_ANSWER", NESTED_ANSWER),
                ("FETCH_URL", FETCH_URL),
                ("DENIED_ANSWER", DENIED_ANSWER),
                ("APPROVED_ANSWER", APPROVED_ANSWER),
                ("RELOAD_START", RELOAD_START),
                ("RELOAD_END", RELOAD_END),
                ("LAST_QUESTION", LAST_QUESTION),
            ],
            &[
                "chat.png",
                "nested.png",
                "approval.png",
                "reloaded.png",
                "narrow.png",
                "admin.png",
            ],
        )
        .await;

    // Stop stopped the run, and the server hung up on the model in turn.
    assert!(
        model.wait_dropped(1, Duration::from_secs(5)).await,
        "the model's reply was not cut short after Stop"
    );
    assert_eq!(model.dropped(), 1, "the reload cut no model reply short");
    let requests = model.requests();
    assert!(
        requests.len() >= 4,
        "{} model requests: {requests:#?}",
        requests.len()
    );
    // The second turn carried the first whole, in the API's format: the
    // question, the call, its result, the answer.
    let second = &requests[2]["messages"];
    assert_eq!(
        roles(second),
        ["user", "assistant", "tool", "assistant", "user"],
        "{second:#}"
    );
    let turn: Vec<&Value> = second
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] != "system")
        .collect();
    assert_eq!(turn[1]["tool_calls"][0]["id"], "call_search_1");
    assert_eq!(
        turn[1]["tool_calls"][0]["function"]["name"],
        "search_documents"
    );
    let args: Value = serde_json::from_str(
        turn[1]["tool_calls"][0]["function"]["arguments"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(args, json!({"query": "vacuum", "limit": 3}));
    assert_eq!(turn[2]["tool_call_id"], "call_search_1");
    assert!(
        turn[2]["content"]
            .as_str()
            .unwrap()
            .contains("VACUUM reclaims storage"),
        "{}",
        turn[2]
    );
    assert_eq!(turn[3]["content"], format!("{ANSWER_START}{ANSWER_END}"));
    assert_eq!(turn[4]["content"], "Now think slowly.");
    // The stopped reply's text stays; the next question follows it.
    let third = &requests[3]["messages"];
    let last = third.as_array().unwrap().last().unwrap();
    assert_eq!(last["content"], "And once more?", "{third:#}");
    // The sub-agent was offered only its read-only tools, and its read was
    // pinned to the document.
    assert_eq!(requests.len(), 14, "{requests:#?}");
    let offered: Vec<&str> = requests[5]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert!(
        !offered.contains(&"analyze_document") && offered.contains(&"read_document"),
        "the sub-agent was offered {offered:?}"
    );

    // The denial reached the model as the call's result; the approved call
    // ran (and the SSRF guard refused the private address).
    let after_denial = requests[9]["messages"].to_string();
    assert!(
        after_denial.contains("fetch_web_page was not approved: the user denied it: not that host"),
        "{after_denial}"
    );
    let after_approval = requests[11]["messages"].to_string();
    assert!(
        after_approval.contains("public internet addresses"),
        "{after_approval}"
    );
    // After the reload the page sent the whole conversation again: every
    // question once, in order, the reloaded answer whole.
    let last = &requests[13]["messages"];
    let questions: Vec<&str> = last
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    assert_eq!(
        questions,
        [
            "Which sources are in this space?",
            "Now think slowly.",
            "And once more?",
            NESTED_QUESTION,
            "Fetch the notes page.",
            "Fetch it anyway.",
            "Answer slowly.",
            LAST_QUESTION,
        ]
    );
    let answers: Vec<&Value> = last
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "assistant")
        .collect();
    assert!(
        answers
            .iter()
            .any(|m| m["content"] == format!("{RELOAD_START}{RELOAD_END}")),
        "{last:#}"
    );

    // The switch the browser flipped is stored: web_search is offered now.
    let r = reqwest::Client::new()
        .get(format!("{base}/v1/tools"))
        .bearer_auth(&admin)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let tools: Value = r.json().await.unwrap();
    assert!(
        tools["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["function"]["name"] == "web_search"),
        "{tools:#}"
    );
}

/// The long guide the viewer pages through: eighty numbered paragraphs
/// (about 16,000 characters), the twenty-fourth holding [`NEEDLE`].
const LONG_PATH: &str = "maintenance/tuning/autovacuum.md";
const NEEDLE: &str = "autovacuum_naptime";
const CSV_PATH: &str = "reports/table-sizes.csv";
const WEB_TITLE: &str = "Tuning autovacuum";
const WEB_SENTENCE: &str = "The launcher wakes once per naptime and starts a worker per database.";

fn long_guide() -> String {
    let mut text = String::from("# Autovacuum tuning\n\n");
    for n in 1..=80 {
        if n == 24 {
            text.push_str(&format!(
                "Paragraph {n}. Set {NEEDLE} to one minute so the autovacuum launcher wakes often \
                 enough on busy databases; each wake starts at most one worker per database.\n\n"
            ));
        } else {
            text.push_str(&format!(
                "Paragraph {n}. Routine maintenance keeps table statistics fresh and bounds \
                 bloat; this paragraph talks about checkpoints, WAL volume and cost limits in \
                 general terms, number {n} of the guide's eighty.\n\n"
            ));
        }
    }
    text
}

/// A page and a SearXNG-style search API on 127.0.0.1, for fetch_web_page
/// and web_search.
async fn web_server() -> String {
    use axum::routing::get;
    let page = format!(
        "<!doctype html><html><head><title>{WEB_TITLE}</title>\
         <meta property=\"og:site_name\" content=\"Example Docs\"></head><body>\
         <article><h1>{WEB_TITLE}</h1><p>{WEB_SENTENCE}</p>\
         <p>Lower <code>autovacuum_vacuum_cost_delay</code> when workers fall behind; \
         see <a href=\"https://www.postgresql.org/docs/current/routine-vacuuming.html\">the manual</a>.</p>\
         <script>window.__pwned = 'page'</script></article></body></html>"
    );
    let search = async || {
        axum::Json(json!({
            "query": "autovacuum", "number_of_results": 2,
            "results": [{
                "url": "https://www.postgresql.org/docs/current/routine-vacuuming.html",
                "title": "Routine Vacuuming", "content": "The autovacuum daemon automates VACUUM.",
                "publishedDate": "2024-11-14T00:00:00", "engine": "duckduckgo",
                "engines": ["duckduckgo"], "positions": [1], "score": 1.0,
                "category": "general", "template": "default.html"
            }, {
                "url": "https://wiki.postgresql.org/wiki/Autovacuum",
                "title": "Autovacuum <b>wiki</b>", "content": "Tuning notes from the wiki.",
                "publishedDate": null, "engine": "bing", "engines": ["bing"],
                "positions": [2], "score": 0.5, "category": "general", "template": "default.html"
            }],
            "answers": [], "corrections": [], "infoboxes": [], "suggestions": [],
            "unresponsive_engines": []
        }))
    };
    let app = axum::Router::new()
        .route(
            "/article",
            get(move || {
                let page = page.clone();
                async move { axum::response::Html(page) }
            }),
        )
        .route("/search", get(search));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    base
}

/// The markdown answer of the views test: headings, emphasis, a nested
/// list, a link, a table, a code block, a citation, and markup and script
/// that must stay text.
const MARKDOWN_ANSWER: &[&str] = &[
    "## Tuning autovacuum\n\nSet the naptime low on **busy** databases [1] and watch `pg_stat_user_tables`.\n\n",
    "1. Lower the naptime\n2. Read [the manual](https://www.postgresql.org/docs/current/routine-vacuuming.html)\n   - or the wiki\n\n",
    "| table | size |\n|---|---:|\n| orders | 42 |\n\n```sql\nALTER SYSTEM SET autovacuum_naptime = '1min';\n",
    "SELECT pg_reload_conf();\n```\n\n",
    "<script>window.__pwned = 'script'</script><img src=x onerror=\"window.__pwned = 'img'\"> ",
    "[click me](javascript:window.__pwned='link') <a href=\"javascript:alert(1)\">raw link</a>",
];
/// Two matches two lines apart (paragraphs 1 and 2 of the long guide) with
/// two lines of context: their context overlaps.
const NEAR_GREP: &str = r#"{"pattern": "^Paragraph [12]\\.", "regex": true, "context_lines": 2, "path_glob": "**/autovacuum.md"}"#;
const CODE_BLOCK: &str = "ALTER SYSTEM SET autovacuum_naptime = '1min';\nSELECT pg_reload_conf();";

fn views_script(model: &FakeModel, ids: &ViewIds, web: &str) {
    // Turn 1: the navigation tools side by side.
    let source = json!({ "source_id": ids.source }).to_string();
    let folder = json!({ "source_id": ids.source, "path": "maintenance" }).to_string();
    model.push(tool_calls_reply(&[
        ScriptedCall {
            id: "call_sources",
            name: "list_sources",
            fragments: &["{}"],
        },
        ScriptedCall {
            id: "call_tree",
            name: "folder_tree",
            fragments: &[&source],
        },
        ScriptedCall {
            id: "call_folder",
            name: "list_folder_contents",
            fragments: &[&folder],
        },
        ScriptedCall {
            id: "call_find",
            name: "find_by_name",
            fragments: &["{\"pattern\": \"**/*.md\"}"],
        },
    ]));
    model.push(text(&["Here is what the space holds."], Duration::ZERO));
    // Turn 2: search, grep, info and a read, then the Markdown answer.
    let grep = json!({ "pattern": NEEDLE, "context_lines": 1 }).to_string();
    let info = json!({ "document_id": ids.long }).to_string();
    let read = json!({ "document_id": ids.vacuum, "max_length": 200 }).to_string();
    model.push(tool_calls_reply(&[
        ScriptedCall {
            id: "call_search",
            name: "search_documents",
            fragments: &["{\"query\": \"autovacuum naptime launcher\", \"limit\": 3}"],
        },
        ScriptedCall {
            id: "call_grep",
            name: "grep_documents",
            fragments: &[&grep],
        },
        ScriptedCall {
            id: "call_grep_near",
            name: "grep_documents",
            fragments: &[NEAR_GREP],
        },
        ScriptedCall {
            id: "call_info",
            name: "document_info",
            fragments: &[&info],
        },
        ScriptedCall {
            id: "call_read",
            name: "read_document",
            fragments: &[&read],
        },
    ]));
    model.push(text(MARKDOWN_ANSWER, Duration::from_millis(150)));
    // Turn 3: a table query, the web, and a call that fails.
    let query = json!({
        "document_id": ids.csv,
        "sql": format!("SELECT * FROM \"{}\" ORDER BY 1", ids.table),
    })
    .to_string();
    let fetch = json!({ "url": format!("{web}/article") }).to_string();
    let missing = json!({ "document_id": Uuid::new_v4() }).to_string();
    model.push(tool_calls_reply(&[
        ScriptedCall {
            id: "call_query",
            name: "query_documents",
            fragments: &[&query],
        },
        ScriptedCall {
            id: "call_fetch",
            name: "fetch_web_page",
            fragments: &[&fetch],
        },
        ScriptedCall {
            id: "call_web",
            name: "web_search",
            fragments: &["{\"query\": \"autovacuum tuning\"}"],
        },
        ScriptedCall {
            id: "call_missing",
            name: "document_info",
            fragments: &[&missing],
        },
    ]));
    model.push(text(&["Those are the rows and the pages."], Duration::ZERO));
}

struct ViewIds {
    source: Uuid,
    vacuum: Uuid,
    long: Uuid,
    csv: Uuid,
    table: String,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_tool_result_shows_as_its_view_in_headless_chromium() {
    let browser = browser();
    let web = web_server().await;
    let long = long_guide();
    let csv = b"table_name,size_mb,dead_tuples\norders,42,1200\ncustomers,7,30\nevents,380,91000\n";
    let w = world_with(
        &[(LONG_PATH, long.as_bytes()), (CSV_PATH, csv)],
        Fetcher::new(FetchConfig {
            allow: "127.0.0.1".parse().unwrap(),
            ..FetchConfig::default()
        }),
        WebSearch::new(&SearchConfig {
            searxng_url: Some(web.clone()),
            ..SearchConfig::default()
        })
        .unwrap(),
    )
    .await;
    let mut tx = w.test.db.begin(Scope::System).await.unwrap();
    let paths: std::collections::HashMap<String, Uuid> =
        sqlx::query_as::<_, (String, Uuid)>("SELECT path, id FROM documents")
            .fetch_all(&mut *tx)
            .await
            .unwrap()
            .into_iter()
            .collect();
    let (long_id, csv_id) = (paths[LONG_PATH], paths[CSV_PATH]);
    let table: String = sqlx::query_scalar("SELECT name FROM doc_tables WHERE document_id = $1")
        .bind(csv_id)
        .fetch_one(&mut *tx)
        .await
        .unwrap();
    tx.commit().await.unwrap();
    let ids = ViewIds {
        source: w.source,
        vacuum: w.document,
        long: long_id,
        csv: csv_id,
        table,
    };

    let model = FakeModel::start().await;
    views_script(&model, &ids, &web);
    let mut config = AgentConfig::new(model.base_url(), "test-model");
    config.api_key = Some("sk-test".into());
    config.system_prompt = Some(data_plane_agent::prompt::PromptTemplate::default());
    let base = common::serve(w.state.clone().with_agent(config).unwrap()).await;
    let admin = w.token(w.admin, Permission::Admin);
    // Web search on, and the test's own host trusted, so no call waits.
    let r = reqwest::Client::new()
        .put(format!("{base}/v1/admin/settings"))
        .bearer_auth(&admin)
        .json(&json!({
            "web_search_enabled": true,
            "fetch_web_page_trusted_hosts": ["127.0.0.1"],
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK, "{}", r.text().await.unwrap());

    browser
        .run(
            "chat_views.mjs",
            &[
                ("DATA_PLANE_URL", &base),
                ("ADMIN_TOKEN", &admin),
                ("SPACE_NAME", SPACE),
                ("LONG_PATH", LONG_PATH),
                ("NEEDLE", NEEDLE),
                ("WEB_URL", &format!("{web}/article")),
                ("WEB_TITLE", WEB_TITLE),
                ("WEB_SENTENCE", WEB_SENTENCE),
                ("CODE_BLOCK", CODE_BLOCK),
            ],
            &[
                "view-navigation.png",
                "view-search.png",
                "view-answer.png",
                "view-viewer.png",
                "view-data-web.png",
                "view-dark.png",
                "view-narrow.png",
            ],
        )
        .await;
    // Every scripted reply was asked for: each turn ran its calls.
    assert_eq!(model.requests().len(), 6, "{:#?}", model.requests());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_signs_in_through_the_providers_own_login_page_in_headless_chromium() {
    let browser = browser();
    let w = world().await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    // The page is a public client of the provider; vera, a member of the
    // space, is known there by the email she has here.
    let provider = common::oidc::Provider::start(json!({
        "port": 0,
        "resource": format!("{base}/"),
        "audience": "data-plane-page",
        "clients": [{
            "client_id": "chat-page",
            "redirect_uris": [format!("{base}/")],
            "post_logout_redirect_uris": [format!("{base}/")],
            "public": true,
        }],
        "users": {"vera": {"email": "vera@example.com", "email_verified": true, "roles": ["user"]}},
        // Renewed 60 s before expiry, so within a few seconds here.
        "access_token_ttl": 66,
    }))
    .await;
    let mut settings =
        data_plane::auth::oidc::OidcSettings::new(provider.issuer(), "data-plane-page").unwrap();
    settings.client_id = Some("chat-page".into());
    let oidc = data_plane::auth::oidc::Oidc::new(settings).unwrap();
    let state = w.state.clone().with_oidc(oidc);
    tokio::spawn(async move { axum::serve(listener, data_plane::http::service(state)).await });

    // The page may talk to the provider's token endpoint and nothing else.
    let page = reqwest::get(format!("{base}/")).await.unwrap();
    let policy = page.headers()["content-security-policy"].to_str().unwrap();
    assert!(
        policy.contains(&format!("connect-src 'self' {}", provider.issuer())),
        "{policy}"
    );

    browser
        .run(
            "signin_page.mjs",
            &[
                ("BASE", &base),
                ("ISSUER", provider.issuer()),
                ("LOGIN", "vera"),
                ("EMAIL", "vera@example.com"),
                ("SPACE", SPACE),
            ],
            &["provider-login.png", "signed-in.png", "signed-out.png"],
        )
        .await;
    // The provider's vera is the vera made here.
    let mut tx = w.test.db.begin(Scope::System).await.unwrap();
    let linked: Uuid = sqlx::query_scalar(
        "SELECT user_id FROM oidc_identities WHERE issuer = $1 AND subject = 'vera'",
    )
    .bind(provider.issuer())
    .fetch_one(&mut *tx)
    .await
    .unwrap();
    tx.commit().await.unwrap();
    assert_eq!(linked, w.viewer);
}
