//! What the server's integration tests share: the local model (the test kit's),
//! the secret their tokens are signed with, a server state over a test
//! database, and serving it on 127.0.0.1.

// Each test binary uses its own part of this module; test helpers report
// failure by panicking, like the tests that call them.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

pub mod oidc;

use std::sync::Arc;

use data_plane::auth::{JwtKeys, ServiceTokens};
use data_plane::state::AppState;
use data_plane_embed::Embedder;
use data_plane_search::KeywordIndex;
use data_plane_store::Db;
use data_plane_web::fetch::{FetchConfig, Fetcher};
use data_plane_web::search::WebSearch;

/// The local model, loaded once per process.
pub use data_plane_testkit::embedder;

/// The secret every test signs its bearer tokens with.
pub const JWT_SECRET: &str = "test-secret-test-secret-test-secret!";

/// Keys over [`JWT_SECRET`].
pub fn jwt() -> JwtKeys {
    JwtKeys::new(JWT_SECRET.as_bytes())
}

/// A server state over `db` with an in-memory keyword index, the default
/// fetcher and the given services and web-search providers.
pub fn state_with(
    db: Db,
    embedder: Arc<Embedder>,
    jwt: JwtKeys,
    services: ServiceTokens,
    web_search: WebSearch,
) -> AppState {
    AppState::new(
        db,
        KeywordIndex::in_memory().unwrap(),
        embedder,
        jwt,
        services,
        Arc::new(Fetcher::new(FetchConfig::default())),
        web_search,
    )
    .unwrap()
}

/// The same without service tokens or web-search providers.
pub fn state(db: Db, embedder: Arc<Embedder>, jwt: JwtKeys) -> AppState {
    state_with(
        db,
        embedder,
        jwt,
        ServiceTokens::default(),
        WebSearch::default(),
    )
}

/// Serves `state` on 127.0.0.1 and answers its base URL.
pub async fn serve(state: AppState) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, data_plane::http::service(state)).await });
    base
}

/// A server on 127.0.0.1 over its own test database.
pub struct Server {
    pub base: String,
    pub jwt: JwtKeys,
    pub test: data_plane_store::testing::TestDatabase,
}

/// A new test database, served with the default state.
pub async fn start() -> Server {
    let test = data_plane_store::testing::TestDatabase::create().await;
    let jwt = jwt();
    let state = state(test.db.clone(), embedder(), jwt.clone());
    let base = serve(state).await;
    Server { base, jwt, test }
}

impl Server {
    /// A token for a user with this email (created with permission `user`).
    pub async fn token(&self, email: &str) -> String {
        use data_plane_store::identity::{self, Permission};
        let mut tx = self
            .test
            .db
            .begin(data_plane_store::Scope::System)
            .await
            .unwrap();
        let user = identity::upsert_user(&mut tx, email, Some(Permission::User))
            .await
            .unwrap();
        tx.commit().await.unwrap();
        self.jwt
            .issue(
                user.id,
                &user.email,
                user.permission,
                std::time::Duration::from_secs(600),
            )
            .unwrap()
    }

    /// `host:port`, for requests written by hand.
    pub fn addr(&self) -> &str {
        self.base.trim_start_matches("http://")
    }
}

/// An answer's status and JSON body (`null` when it has none).
pub async fn json(resp: reqwest::Response) -> (u16, serde_json::Value) {
    let status = resp.status().as_u16();
    let body = resp
        .json::<serde_json::Value>()
        .await
        .unwrap_or(serde_json::Value::Null);
    (status, body)
}

/// The `data-plane` binary over `test`'s database, its files in `data_dir`,
/// the local embedding model and no chat model or remote modules (the
/// caller adds what it needs).
pub fn binary(
    test: &data_plane_store::testing::TestDatabase,
    data_dir: &std::path::Path,
) -> std::process::Command {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_data-plane"));
    command
        .env("DATABASE_URL", &test.app_url)
        .env("DATABASE_OWNER_URL", &test.owner_url)
        .env("DATA_PLANE_DATA_DIR", data_dir)
        .env("DATA_PLANE_MODEL_DIR", data_plane_testkit::model_dir())
        .env("DATA_PLANE_EMBEDDING_PROVIDER", "local")
        .env_remove("DATA_PLANE_MODEL")
        .env_remove("DATA_PLANE_MODULES")
        .env_remove("DATA_PLANE_MODULES_FILE");
    command
}

/// `data-plane serve` as a second process over `test`'s database (no
/// migrations) on `addr`; its log goes to the test's stderr.
pub fn server_process(
    test: &data_plane_store::testing::TestDatabase,
    data_dir: &std::path::Path,
    addr: std::net::SocketAddr,
) -> std::process::Command {
    let mut command = binary(test, data_dir);
    command
        .env("RUST_LOG", "warn")
        .args(["serve", "--addr", &addr.to_string(), "--no-migrate"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::inherit());
    command
}

/// Waits until the server at `base` is ready (`/readyz` answers 200: its
/// keyword index has caught up), two minutes at most.
pub async fn wait_ready(base: &str) {
    let ready = async {
        loop {
            if reqwest::get(format!("{base}/readyz"))
                .await
                .is_ok_and(|r| r.status().is_success())
            {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    };
    tokio::time::timeout(std::time::Duration::from_secs(120), ready)
        .await
        .unwrap_or_else(|_| panic!("the server at {base} was not ready in 2 minutes"));
}

/// A second `data-plane serve` process over `test`'s database, signing
/// tokens with [`JWT_SECRET`], once it answers: the process and its base URL.
pub async fn second_server(
    test: &data_plane_store::testing::TestDatabase,
    data_dir: &std::path::Path,
) -> (KillOnDrop, String) {
    let addr = data_plane_testkit::unused_addr();
    let process = KillOnDrop(
        server_process(test, data_dir, addr)
            .env("DATA_PLANE_JWT_SECRET", JWT_SECRET)
            .spawn()
            .unwrap(),
    );
    let base = format!("http://{addr}");
    wait_ready(&base).await;
    (process, base)
}

/// A user of `test`'s database with `permission` (made when missing), and
/// a token for them signed with [`JWT_SECRET`].
pub async fn person(
    test: &data_plane_store::testing::TestDatabase,
    email: &str,
    permission: data_plane_store::identity::Permission,
) -> (uuid::Uuid, String) {
    let mut tx = test
        .db
        .begin(data_plane_store::Scope::System)
        .await
        .unwrap();
    let id = data_plane_store::identity::upsert_user(&mut tx, email, Some(permission))
        .await
        .unwrap()
        .id;
    tx.commit().await.unwrap();
    let token = jwt()
        .issue(id, email, permission, std::time::Duration::from_secs(600))
        .unwrap();
    (id, token)
}

/// `/metrics` of the server at `base`, as `token` (a service token) reads it.
pub async fn metrics(base: &str, token: &str) -> String {
    reqwest::Client::new()
        .get(format!("{base}/metrics"))
        .bearer_auth(token)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

/// A child process killed (and reaped) when the test lets go of it.
pub struct KillOnDrop(pub std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The vacuum guide the chat tests read.
pub const VACUUM_GUIDE: &[u8] =
    b"# Vacuuming\n\nVACUUM reclaims storage occupied by dead tuples.\n";

/// A space `name` that `viewers` read, with a source `notes` holding
/// `guides/vacuum.md` ([`VACUUM_GUIDE`]), ingested for real: (space, document).
pub async fn space_with_guide(
    db: &Db,
    name: &str,
    viewers: &[uuid::Uuid],
) -> (uuid::Uuid, uuid::Uuid) {
    use data_plane_store::identity::{self, MembershipRole};
    let mut tx = db.begin(data_plane_store::Scope::System).await.unwrap();
    let (space, _) = identity::ensure_space(&mut tx, name).await.unwrap();
    for user in viewers {
        identity::add_member(&mut tx, space.id, *user, MembershipRole::Viewer)
            .await
            .unwrap();
    }
    tx.commit().await.unwrap();
    let doc = ingest_note(db, space.id, "guides/vacuum.md", VACUUM_GUIDE).await;
    (space.id, doc)
}

/// Ingests `bytes` as `path` into the source `notes` of `space` (made
/// when missing), for real: the document's id.
pub async fn ingest_note(db: &Db, space: uuid::Uuid, path: &str, bytes: &[u8]) -> uuid::Uuid {
    use data_plane_ingest::pipeline::{Pipeline, Target};
    use data_plane_store::content::{self, SourceKind};
    let mut tx = db.begin(data_plane_store::Scope::System).await.unwrap();
    let source = content::ensure_source(&mut tx, space, "notes", SourceKind::Files)
        .await
        .unwrap();
    tx.commit().await.unwrap();
    Pipeline::new(db.clone(), embedder())
        .ingest_file(
            data_plane_store::Scope::System,
            Target {
                space_id: space,
                source_id: source.id,
            },
            path,
            bytes,
        )
        .await
        .unwrap()
        .document_id
}

/// A reader of a space holding the vacuum guide, and a server on 127.0.0.1
/// whose chat agent and analyze_document's sub-agent talk to one model.
pub struct GuideServer {
    /// Dropped last: the database the server uses.
    pub test: data_plane_store::testing::TestDatabase,
    pub user: uuid::Uuid,
    pub space: uuid::Uuid,
    pub doc: uuid::Uuid,
    pub base: String,
    /// The user's bearer token (ten minutes).
    pub token: String,
}

/// [`GuideServer`] for a user `email`, the model at `model_url`; with
/// `shipped_prompt` the chat agent sends the shipped system prompt (which
/// asks for citations).
pub async fn guide_server(email: &str, model_url: String, shipped_prompt: bool) -> GuideServer {
    use data_plane_agent::AgentConfig;
    use data_plane_handlers::{ModelSettings, SubAgentLimits};
    use data_plane_store::identity::{self, Permission};
    let test = data_plane_store::testing::TestDatabase::create().await;
    let db = test.db.clone();
    let mut tx = db.begin(data_plane_store::Scope::System).await.unwrap();
    let user = identity::upsert_user(&mut tx, email, Some(Permission::User))
        .await
        .unwrap()
        .id;
    tx.commit().await.unwrap();
    let (space, doc) = space_with_guide(&db, "guides", &[user]).await;
    let keys = jwt();
    let state = state(db, embedder(), keys.clone());
    let config = AgentConfig::new(model_url, "test-model");
    state.connect_model(ModelSettings {
        agent: config.clone(),
        sub_agent: SubAgentLimits::default(),
    });
    let mut chat = config;
    if shipped_prompt {
        chat.system_prompt = Some(data_plane_agent::prompt::PromptTemplate::default());
    }
    let base = serve(state.with_agent(chat).unwrap()).await;
    let token = keys
        .issue(
            user,
            email,
            Permission::User,
            std::time::Duration::from_secs(600),
        )
        .unwrap();
    GuideServer {
        test,
        user,
        space,
        doc,
        base,
        token,
    }
}

/// Runs `tests/mcp/{script}` with the Python of the venv `make setup`
/// builds with the official MCP Python SDK (.data/mcp/venv), with `envs`,
/// for at most 90 s; it must succeed, and what it prints is one JSON
/// object, answered. A missing venv fails, saying how to get it.
pub async fn mcp_script(script: &str, envs: &[(&str, &str)]) -> serde_json::Value {
    let python =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.data/mcp/venv/bin/python");
    assert!(
        python.is_file(),
        "this test needs the MCP Python SDK in {}: run `make setup`",
        python.display()
    );
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/mcp")
        .join(script);
    let output = tokio::process::Command::new(&python)
        .arg(&path)
        .envs(envs.iter().copied())
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(std::time::Duration::from_secs(90), output)
        .await
        .expect("the SDK's client finished within 90 s")
        .unwrap();
    assert!(
        output.status.success(),
        "{script} failed:\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}
