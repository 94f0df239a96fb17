//! A small world for handler tests, on the real PostgreSQL, the real local
//! embedding model and a real (in-memory) Tantivy index: two spaces with
//! their own files, a member of each, and a user who belongs nowhere.
//!
//! alice is a member of space "alpha" (source "handbook", tests/fixtures/alpha),
//! bob of space "beta" (source "secret", tests/fixtures/beta), carol of none.
//! Beta's files share words with alpha's (vacuum, budget, HNSW, TODO-) so a
//! leak across spaces would show up in any search.

// Test helpers report failure by panicking, like the tests that call them.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use data_plane_handlers::{Deps, PgLedger};
use data_plane_ingest::pipeline::{Pipeline, Target};
use data_plane_registry::{NoCallbacks, Permission, Registry, ToolContext, ToolResult};
use data_plane_search::KeywordIndex;
use data_plane_search::follower::Follower;
use data_plane_store::Scope;
use data_plane_store::content::{self, SourceKind};
use data_plane_store::identity::{self, MembershipRole};
use data_plane_store::testing::TestDatabase;
use data_plane_web::fetch::{FetchConfig, Fetcher};
use serde_json::Value;
use uuid::Uuid;

pub struct World {
    pub test: TestDatabase,
    pub deps: Arc<Deps>,
    pub registry: Arc<Registry>,
    pub ledger: PgLedger,
    pub alice: Uuid,
    pub bob: Uuid,
    pub carol: Uuid,
    pub alpha: Uuid,
    pub beta: Uuid,
    pub alpha_source: Uuid,
    pub beta_source: Uuid,
    /// Document ids by "space/path", e.g. "alpha/guides/vacuum.md".
    pub docs: HashMap<String, Uuid>,
}

/// The local model, loaded once per test binary: it is the slowest part of set-up.
pub use data_plane_testkit::embedder;

/// A fetcher that may reach test servers on 127.0.0.1 (and nothing else
/// that is not public): the allow-list a deployment would set for its own
/// internal hosts.
pub fn local_fetcher() -> Fetcher {
    Fetcher::new(FetchConfig {
        allow: "127.0.0.1".parse().unwrap(),
        ..FetchConfig::default()
    })
}

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

impl World {
    pub async fn new() -> World {
        let test = TestDatabase::create().await;
        let db = test.db.clone();
        let mut tx = db.begin(Scope::System).await.unwrap();
        let mut user = async |email: &str| {
            identity::upsert_user(&mut tx, email, Some(Permission::User))
                .await
                .unwrap()
                .id
        };
        let alice = user("alice@example.com").await;
        let bob = user("bob@example.com").await;
        let carol = user("carol@example.com").await;
        let (alpha, _) = identity::ensure_space(&mut tx, "alpha").await.unwrap();
        let (beta, _) = identity::ensure_space(&mut tx, "beta").await.unwrap();
        identity::add_member(&mut tx, alpha.id, alice, MembershipRole::Editor)
            .await
            .unwrap();
        identity::add_member(&mut tx, beta.id, bob, MembershipRole::Editor)
            .await
            .unwrap();
        let alpha_source = content::ensure_source(&mut tx, alpha.id, "handbook", SourceKind::Files)
            .await
            .unwrap();
        let beta_source = content::ensure_source(&mut tx, beta.id, "secret", SourceKind::Files)
            .await
            .unwrap();
        tx.commit().await.unwrap();

        let embedder = embedder();
        let pipeline = Pipeline::new(db.clone(), embedder.clone());
        let mut docs = HashMap::new();
        for (space, space_id, source_id) in [
            ("alpha", alpha.id, alpha_source.id),
            ("beta", beta.id, beta_source.id),
        ] {
            let root = fixtures().join(space);
            for file in files_under(&root) {
                let rel = file
                    .strip_prefix(&root)
                    .unwrap()
                    .to_string_lossy()
                    .replace('\\', "/");
                let bytes = std::fs::read(&file).unwrap();
                let report = pipeline
                    .ingest_file(
                        Scope::System,
                        Target {
                            space_id,
                            source_id,
                        },
                        &rel,
                        &bytes,
                    )
                    .await
                    .unwrap_or_else(|e| panic!("ingesting {rel}: {e}"));
                docs.insert(format!("{space}/{rel}"), report.document_id);
            }
        }

        let index = KeywordIndex::in_memory().unwrap();
        Follower::new(db.clone(), index.clone())
            .catch_up()
            .await
            .unwrap();
        let deps = Arc::new(
            Deps::new(db.clone(), index, embedder).with_fetcher(Arc::new(local_fetcher())),
        );
        let ledger = PgLedger::start(db.clone());
        let registry =
            Arc::new(data_plane_handlers::registry(&deps, Arc::new(ledger.clone())).unwrap());
        World {
            test,
            deps,
            registry,
            ledger,
            alice,
            bob,
            carol,
            alpha: alpha.id,
            beta: beta.id,
            alpha_source: alpha_source.id,
            beta_source: beta_source.id,
            docs,
        }
    }

    /// The id of a fixture document, e.g. `doc("alpha/guides/vacuum.md")`.
    pub fn doc(&self, key: &str) -> Uuid {
        *self
            .docs
            .get(key)
            .unwrap_or_else(|| panic!("no fixture document {key}; have {:?}", self.docs.keys()))
    }

    pub fn ctx(&self, user: Uuid, space: Option<Uuid>) -> ToolContext {
        ToolContext::new(user, space, Permission::User)
    }

    /// Runs a tool through the whole registry pipeline.
    pub async fn call(&self, tool: &str, args: Value, ctx: &ToolContext) -> ToolResult {
        self.registry
            .execute_tool(tool, args, ctx, &NoCallbacks)
            .await
    }

    /// Runs a tool and returns its data, failing the test when it failed.
    pub async fn ok(&self, tool: &str, args: Value, ctx: &ToolContext) -> Value {
        let result = self.call(tool, args.clone(), ctx).await;
        assert!(result.success, "{tool} {args} failed: {:?}", result.error);
        result.data.unwrap()
    }
}
