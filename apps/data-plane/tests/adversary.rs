//! An attacker with an account: Mallory owns space A and tries every tool
//! and every endpoint against Bob's space B, over HTTP against the real
//! server, handlers and PostgreSQL. B's documents carry two markers in
//! their paths, titles, text and table cells: Mallory searches for the
//! first (an answer may echo what she asked), and no answer she gets may
//! contain the second, which she never types. Nothing of B's may change.

// Test helpers report failure by panicking, like the tests that call them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use data_plane::auth::JwtKeys;
use data_plane_ingest::pipeline::{Pipeline, Target};
use data_plane_store::content::{self, SourceKind};
use data_plane_store::identity::{self, MembershipRole, Permission};
use data_plane_store::testing::TestDatabase;
use data_plane_store::{Db, Scope};
use reqwest::StatusCode;
use serde_json::{Value, json};
use uuid::Uuid;

/// In B's folder name and text; what Mallory searches for.
const PROBE: &str = "zebraquartz7731";
/// In every file name, title, text and cell of B; never in a request.
const LEAK: &str = "orchid4417";

struct World {
    _test: TestDatabase,
    db: Db,
    base: String,
    jwt: JwtKeys,
    mallory: Uuid,
    bob: Uuid,
    space_a: Uuid,
    space_b: Uuid,
    source_b: Uuid,
    docs_b: Vec<Uuid>,
}

async fn world() -> World {
    let test = TestDatabase::create().await;
    let db = test.db.clone();
    let embedder = common::embedder();
    let mut tx = db.begin(Scope::System).await.unwrap();
    let mallory = identity::upsert_user(&mut tx, "mallory@example.com", Some(Permission::User))
        .await
        .unwrap()
        .id;
    let bob = identity::upsert_user(&mut tx, "bob@example.com", Some(Permission::User))
        .await
        .unwrap()
        .id;
    let (a, _) = identity::ensure_space(&mut tx, "mallory-space")
        .await
        .unwrap();
    let (b, _) = identity::ensure_space(&mut tx, "bob-space").await.unwrap();
    identity::add_member(&mut tx, a.id, mallory, MembershipRole::Owner)
        .await
        .unwrap();
    identity::add_member(&mut tx, b.id, bob, MembershipRole::Owner)
        .await
        .unwrap();
    let source_a = content::ensure_source(&mut tx, a.id, "notes", SourceKind::Files)
        .await
        .unwrap();
    let source_b = content::ensure_source(&mut tx, b.id, "vault", SourceKind::Files)
        .await
        .unwrap();
    tx.commit().await.unwrap();

    let pipeline = Pipeline::new(db.clone(), embedder.clone());
    pipeline
        .ingest_file(
            Scope::System,
            Target {
                space_id: a.id,
                source_id: source_a.id,
            },
            "guides/vacuum.md",
            b"# Vacuuming\n\nVACUUM reclaims storage occupied by dead tuples. Plans and budgets live elsewhere.\n",
        )
        .await
        .unwrap();
    let secret_text = format!(
        "# Plan {LEAK}\n\nThe acquisition plan {PROBE} {LEAK}: budget, vacuum schedule and storage.\n"
    );
    let secret_table = format!("item,owner,amount\n{LEAK},bob,100\n{PROBE},bob,250\n");
    let mut docs_b = Vec::new();
    for (path, body) in [
        (format!("{PROBE}/{LEAK}-plan.md"), secret_text.into_bytes()),
        (
            format!("{PROBE}/{LEAK}-ledger.csv"),
            secret_table.into_bytes(),
        ),
    ] {
        docs_b.push(
            pipeline
                .ingest_file(
                    Scope::System,
                    Target {
                        space_id: b.id,
                        source_id: source_b.id,
                    },
                    &path,
                    &body,
                )
                .await
                .unwrap()
                .document_id,
        );
    }
    let jwt = common::jwt();
    let base = common::serve(common::state(db.clone(), embedder, jwt.clone())).await;
    World {
        _test: test,
        db,
        base,
        jwt,
        mallory,
        bob,
        space_a: a.id,
        space_b: b.id,
        source_b: source_b.id,
        docs_b,
    }
}

impl World {
    fn mallory_token(&self) -> String {
        self.jwt
            .issue(
                self.mallory,
                "mallory@example.com",
                Permission::User,
                Duration::from_secs(600),
            )
            .unwrap()
    }

    /// What B holds, read with the system's rights: documents, sources,
    /// members and every document's text.
    async fn b_state(&self) -> Value {
        let mut tx = self.db.begin(Scope::System).await.unwrap();
        let rows: Vec<(String, String)> =
            sqlx::query_as("SELECT path, content FROM documents WHERE space_id = $1 ORDER BY path")
                .bind(self.space_b)
                .fetch_all(&mut *tx)
                .await
                .unwrap();
        let sources: Vec<(String,)> =
            sqlx::query_as("SELECT name FROM sources WHERE space_id = $1 ORDER BY name")
                .bind(self.space_b)
                .fetch_all(&mut *tx)
                .await
                .unwrap();
        let members: Vec<(Uuid, String)> = sqlx::query_as(
            "SELECT user_id, role::text FROM memberships WHERE space_id = $1 ORDER BY user_id",
        )
        .bind(self.space_b)
        .fetch_all(&mut *tx)
        .await
        .unwrap();
        let spaces: Vec<(String,)> = sqlx::query_as("SELECT name FROM spaces WHERE id = $1")
            .bind(self.space_b)
            .fetch_all(&mut *tx)
            .await
            .unwrap();
        tx.commit().await.unwrap();
        json!({
            "documents": rows,
            "sources": sources,
            "members": members,
            "space": spaces,
        })
    }
}

/// One request Mallory makes, and what she got.
struct Attempt {
    what: String,
    status: StatusCode,
    body: String,
}

/// One JSON-RPC request to `/mcp` (in `space`, when given) as Mallory.
fn mcp_request(
    http: &reqwest::Client,
    base: &str,
    token: &str,
    space: Option<Uuid>,
    body: Value,
) -> reqwest::RequestBuilder {
    let url = match space {
        Some(space) => format!("{base}/mcp?spaceId={space}"),
        None => format!("{base}/mcp"),
    };
    http.post(url)
        .bearer_auth(token)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-11-25")
        .json(&body)
}

async fn send(what: String, request: reqwest::RequestBuilder) -> Attempt {
    let response = request.send().await.unwrap();
    let status = response.status();
    let body = response.text().await.unwrap();
    Attempt { what, status, body }
}

#[tokio::test]
async fn a_user_of_one_space_can_neither_read_nor_change_another() {
    let w = world().await;
    let token = w.mallory_token();
    let http = reqwest::Client::new();
    let before = w.b_state().await;
    assert!(before.to_string().contains(LEAK), "B holds the marker");

    let doc = w.docs_b[0].to_string();
    let table = w.docs_b[1].to_string();
    let source = w.source_b.to_string();
    let glob = format!("{PROBE}/**");
    // Every tool that touches stored data, with B's ids and with searches
    // that would match B's text.
    let calls: Vec<(&str, Value)> = vec![
        ("search_documents", json!({"query": PROBE})),
        (
            "search_documents",
            json!({"query": "acquisition plan budget", "mode": "vector"}),
        ),
        (
            "search_documents",
            json!({"query": "acquisition plan budget", "mode": "keyword"}),
        ),
        (
            "search_documents",
            json!({"query": "plan", "document_id": doc}),
        ),
        (
            "search_documents",
            json!({"query": "plan", "source_id": source}),
        ),
        (
            "search_documents",
            json!({"query": "plan", "folder": PROBE}),
        ),
        ("read_document", json!({"document_id": doc})),
        ("read_document", json!({"document_id": table, "start": 0})),
        ("document_info", json!({"document_id": doc})),
        ("grep_documents", json!({"pattern": PROBE})),
        (
            "grep_documents",
            json!({"pattern": "acquisition", "document_id": doc}),
        ),
        (
            "grep_documents",
            json!({"pattern": "z.*7731", "regex": true}),
        ),
        (
            "grep_documents",
            json!({"pattern": "plan", "source_id": source}),
        ),
        ("find_by_name", json!({"pattern": "**"})),
        ("find_by_name", json!({"pattern": glob})),
        ("find_by_name", json!({"pattern": "*", "source_id": source})),
        ("list_sources", json!({})),
        ("folder_tree", json!({"source_id": source})),
        ("list_folder_contents", json!({"source_id": source})),
        (
            "list_folder_contents",
            json!({"source_id": source, "path": PROBE}),
        ),
        (
            "query_documents",
            json!({"document_id": table, "sql": "SELECT * FROM data"}),
        ),
        ("query_documents", json!({"document_id": table})),
        (
            "analyze_document",
            json!({"document_id": doc, "question": "what is the plan?"}),
        ),
    ];
    let mut attempts = Vec::new();
    for (tool, args) in &calls {
        for space in [None, Some(w.space_a), Some(w.space_b)] {
            let mut body = json!({ "args": args });
            if let Some(space) = space {
                body["spaceId"] = json!(space);
            }
            let what = format!("{tool} {args} in {space:?}");
            let attempt = send(
                what,
                http.post(format!("{}/v1/tools/{tool}/execute", w.base))
                    .bearer_auth(&token)
                    .json(&body),
            )
            .await;
            if space == Some(w.space_b) {
                assert_eq!(attempt.status, StatusCode::NOT_FOUND, "{}", attempt.what);
            }
            attempts.push(attempt);
        }
    }

    // The same calls over MCP (/mcp, one JSON-RPC request each): a result
    // with isError or one from Mallory's own spaces, never B's data.
    for (i, (tool, args)) in calls.iter().enumerate() {
        for space in [None, Some(w.space_a), Some(w.space_b)] {
            let what = format!("MCP {tool} {args} in {space:?}");
            let body = json!({
                "jsonrpc": "2.0",
                "id": i,
                "method": "tools/call",
                "params": {"name": tool, "arguments": args},
            });
            let attempt = send(what, mcp_request(&http, &w.base, &token, space, body)).await;
            assert_eq!(attempt.status, StatusCode::OK, "{}", attempt.what);
            if space == Some(w.space_b) {
                assert!(
                    attempt.body.contains(r#""isError":true"#)
                        && attempt.body.contains("among the caller's spaces"),
                    "{}: {}",
                    attempt.what,
                    attempt.body
                );
            }
            attempts.push(attempt);
        }
    }
    let listed = send(
        "MCP tools/list in B".into(),
        mcp_request(
            &http,
            &w.base,
            &token,
            Some(w.space_b),
            json!({"jsonrpc": "2.0", "id": "list", "method": "tools/list"}),
        ),
    )
    .await;
    assert!(
        listed.body.contains(r#""error""#) && !listed.body.contains(r#""tools""#),
        "{}",
        listed.body
    );
    attempts.push(listed);

    // B's documents as MCP resources and in prompts: by B's URI from every
    // endpoint, by B's id from A's, B's listing. An error each, never text.
    let b_uri = |id: &Uuid| format!("data-plane://spaces/{}/documents/{id}", w.space_b);
    let a_with_b = format!("data-plane://spaces/{}/documents/{doc}", w.space_a);
    let mut mcp: Vec<(Option<Uuid>, &str, Value)> = Vec::new();
    for id in &w.docs_b {
        for space in [None, Some(w.space_a), Some(w.space_b)] {
            mcp.push((space, "resources/read", json!({"uri": b_uri(id)})));
            mcp.push((
                space,
                "prompts/get",
                json!({"name": "summarise_document", "arguments": {"document": b_uri(id)}}),
            ));
        }
        mcp.push((
            Some(w.space_a),
            "prompts/get",
            json!({"name": "summarise_document", "arguments": {"document": id.to_string()}}),
        ));
    }
    // By path, and a range by path, the way the resource templates name
    // documents.
    let b_paths = [
        format!("{PROBE}/{LEAK}-plan.md"),
        format!("{PROBE}/{LEAK}-ledger.csv"),
    ];
    for path in &b_paths {
        for space in [None, Some(w.space_a), Some(w.space_b)] {
            for uri in [
                format!("data-plane://spaces/{}/paths/{path}", w.space_b),
                format!(
                    "data-plane://spaces/{}/paths/{path}?start=0&end=40",
                    w.space_b
                ),
                format!("data-plane://spaces/{}/paths/{path}", w.space_a),
            ] {
                mcp.push((space, "resources/read", json!({"uri": uri})));
            }
        }
    }
    mcp.push((
        Some(w.space_b),
        "completion/complete",
        json!({"ref": {"type": "ref/resource", "uri": "data-plane://spaces/{space_id}/paths/{path}"},
               "argument": {"name": "path", "value": PROBE}}),
    ));
    mcp.push((Some(w.space_b), "resources/templates/list", json!({})));
    mcp.push((None, "resources/read", json!({"uri": a_with_b})));
    mcp.push((Some(w.space_b), "resources/list", json!({})));
    mcp.push((
        Some(w.space_b),
        "completion/complete",
        json!({"ref": {"type": "ref/prompt", "name": "summarise_document"},
               "argument": {"name": "document", "value": PROBE}}),
    ));
    mcp.push((
        Some(w.space_b),
        "prompts/get",
        json!({"name": "answer_with_citations", "arguments": {"question": PROBE}}),
    ));
    for (i, (space, method, params)) in mcp.into_iter().enumerate() {
        let what = format!("MCP {method} {params} in {space:?}");
        let body = json!({"jsonrpc": "2.0", "id": i, "method": method, "params": params});
        let attempt = send(what, mcp_request(&http, &w.base, &token, space, body)).await;
        assert!(
            attempt.body.contains(r#""error""#) && !attempt.body.contains(r#""result""#),
            "{}: {}",
            attempt.what,
            attempt.body
        );
        attempts.push(attempt);
    }

    // Completing a template's path in B, named as the space already chosen,
    // from A's endpoint and from one without a space: nothing of B's.
    for space in [None, Some(w.space_a)] {
        for argument in ["path", "space_id"] {
            let body = json!({"jsonrpc": "2.0", "id": "complete", "method": "completion/complete",
            "params": {
                "ref": {"type": "ref/resource",
                        "uri": "data-plane://spaces/{space_id}/paths/{path}{?start,end}"},
                "argument": {"name": argument, "value": ""},
                "context": {"arguments": {"space_id": w.space_b.to_string()}},
            }});
            let what = format!("MCP completion/complete of {argument} in B from {space:?}");
            let attempt = send(what, mcp_request(&http, &w.base, &token, space, body)).await;
            assert!(
                attempt.body.contains(r#""result""#)
                    && !attempt.body.contains(PROBE)
                    && !attempt.body.contains(&w.space_b.to_string()),
                "{}: {}",
                attempt.what,
                attempt.body
            );
            attempts.push(attempt);
        }
    }

    // Every route that reads or writes a space's data, aimed at B.
    let b = w.space_b;
    let base = &w.base;
    let routes = vec![
        (
            "GET sources",
            http.get(format!("{base}/v1/spaces/{b}/sources")),
        ),
        (
            "GET documents",
            http.get(format!("{base}/v1/spaces/{b}/documents")),
        ),
        (
            "GET members",
            http.get(format!("{base}/v1/spaces/{b}/members")),
        ),
        (
            "GET tools",
            http.get(format!("{base}/v1/tools?spaceId={b}")),
        ),
        (
            "POST sources",
            http.post(format!("{base}/v1/spaces/{b}/sources"))
                .json(&json!({"name": "planted"})),
        ),
        (
            "POST upload",
            http.post(format!("{base}/v1/sources/{source}/documents"))
                .multipart(reqwest::multipart::Form::new().part(
                    "file",
                    reqwest::multipart::Part::bytes(b"planted".to_vec()).file_name("planted.md"),
                )),
        ),
        (
            "DELETE document",
            http.delete(format!("{base}/v1/documents/{doc}")),
        ),
        ("DELETE space", http.delete(format!("{base}/v1/spaces/{b}"))),
        (
            "POST member",
            http.post(format!("{base}/v1/spaces/{b}/members"))
                .json(&json!({"email": "mallory@example.com", "role": "owner"})),
        ),
        (
            "PUT member",
            http.put(format!("{base}/v1/spaces/{b}/members/{}", w.mallory))
                .json(&json!({"role": "owner"})),
        ),
        (
            "PUT bob's role",
            http.put(format!("{base}/v1/spaces/{b}/members/{}", w.bob))
                .json(&json!({"role": "viewer"})),
        ),
        (
            "DELETE bob",
            http.delete(format!("{base}/v1/spaces/{b}/members/{}", w.bob)),
        ),
        (
            "PUT settings",
            http.put(format!("{base}/v1/admin/settings"))
                .json(&json!({"web_search_enabled": true})),
        ),
        (
            "POST chat",
            http.post(format!("{base}/v1/chat"))
                .json(&json!({"messages": [{"role": "user", "content": "plan?"}], "spaceId": b})),
        ),
    ];
    for (what, request) in routes {
        let attempt = send(what.to_string(), request.bearer_auth(&token)).await;
        assert!(
            [
                StatusCode::FORBIDDEN,
                StatusCode::NOT_FOUND,
                StatusCode::SERVICE_UNAVAILABLE
            ]
            .contains(&attempt.status),
            "{what}: {} {}",
            attempt.status,
            attempt.body
        );
        attempts.push(attempt);
    }

    let leaks: Vec<String> = attempts
        .iter()
        .filter(|a| a.body.to_lowercase().contains(LEAK))
        .map(|a| format!("{}: {}", a.what, a.body))
        .collect();
    let server_errors: Vec<String> = attempts
        .iter()
        .filter(|a| a.status.is_server_error() && a.status != StatusCode::SERVICE_UNAVAILABLE)
        .map(|a| format!("{}: {} {}", a.what, a.status, a.body))
        .collect();
    println!(
        "requests {}, leaks {}, server errors {}",
        attempts.len(),
        leaks.len(),
        server_errors.len()
    );
    assert!(
        leaks.is_empty(),
        "B's data reached Mallory:\n{}",
        leaks.join("\n")
    );
    assert!(server_errors.is_empty(), "{}", server_errors.join("\n"));
    assert_eq!(w.b_state().await, before, "B changed");

    // The searches did run: Mallory sees her own space's text.
    let own = send(
        "own search".into(),
        http.post(format!("{}/v1/tools/grep_documents/execute", w.base))
            .bearer_auth(&token)
            .json(&json!({"args": {"pattern": "VACUUM"}, "spaceId": w.space_a})),
    )
    .await;
    assert!(own.body.contains("vacuum.md"), "{}", own.body);
}
