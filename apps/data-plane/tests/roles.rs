//! Space roles over the real HTTP server and PostgreSQL: every write endpoint
//! against every kind of caller (viewer, editor, owner, a guest who is an
//! owner of the space, a stranger), with the space checked unchanged after
//! each refusal; the membership API and its last-owner rule; the same rules
//! held by the database when the server's checks are bypassed; and
//! `data-plane token --space-role`.

// Test helpers report failure by panicking, like the tests that call them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use data_plane::auth::JwtKeys;
use data_plane_store::content::{self, SourceKind};
use data_plane_store::identity::{self, MembershipRole, Permission};
use data_plane_store::testing::TestDatabase;
use data_plane_store::{Scope, StoreError};
use serde_json::{Value, json};
use uuid::Uuid;

struct Server {
    base: String,
    jwt: JwtKeys,
    test: TestDatabase,
    http: reqwest::Client,
}

async fn start() -> Server {
    let test = TestDatabase::create().await;
    let jwt = common::jwt();
    let state = common::state(test.db.clone(), common::embedder(), jwt.clone());
    let base = common::serve(state).await;
    Server {
        base,
        jwt,
        test,
        http: reqwest::Client::new(),
    }
}

/// A user of the deployment with a token.
#[derive(Clone)]
struct Person {
    id: Uuid,
    email: String,
    token: String,
}

impl Server {
    async fn person(&self, email: &str, permission: Permission) -> Person {
        let mut tx = self.test.db.begin(Scope::System).await.unwrap();
        let user = identity::upsert_user(&mut tx, email, Some(permission))
            .await
            .unwrap();
        tx.commit().await.unwrap();
        let token = self
            .jwt
            .issue(
                user.id,
                &user.email,
                user.permission,
                std::time::Duration::from_secs(600),
            )
            .unwrap();
        Person {
            id: user.id,
            email: user.email,
            token,
        }
    }

    async fn send(&self, req: reqwest::RequestBuilder, who: &Person) -> (u16, Value) {
        let resp = req.bearer_auth(&who.token).send().await.unwrap();
        let status = resp.status().as_u16();
        let body = resp.json::<Value>().await.unwrap_or(Value::Null);
        (status, body)
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }
}

/// Everyone the table asks about, plus a member to change and a user to add.
struct Cast {
    owner: Person,
    editor: Person,
    viewer: Person,
    guest: Person,
    stranger: Person,
    member: Person,
    newcomer: Person,
}

/// One space with every role in it, a source and an uploaded document.
struct Space {
    id: Uuid,
    source: Uuid,
    document: Uuid,
}

async fn cast(server: &Server) -> Cast {
    Cast {
        owner: server.person("owner@example.com", Permission::User).await,
        editor: server.person("editor@example.com", Permission::User).await,
        viewer: server.person("viewer@example.com", Permission::User).await,
        guest: server.person("guest@example.com", Permission::Guest).await,
        stranger: server
            .person("stranger@example.com", Permission::User)
            .await,
        member: server.person("member@example.com", Permission::User).await,
        newcomer: server
            .person("newcomer@example.com", Permission::User)
            .await,
    }
}

async fn space(server: &Server, cast: &Cast, name: &str) -> Space {
    let (status, body) = server
        .send(
            server
                .http
                .post(server.url("/v1/spaces"))
                .json(&json!({ "name": name })),
            &cast.owner,
        )
        .await;
    assert_eq!(status, 201, "{body}");
    let id: Uuid = body["id"].as_str().unwrap().parse().unwrap();
    let mut tx = server.test.db.begin(Scope::System).await.unwrap();
    for (who, role) in [
        (&cast.editor, MembershipRole::Editor),
        (&cast.viewer, MembershipRole::Viewer),
        // A guest never writes, even as an owner of the space.
        (&cast.guest, MembershipRole::Owner),
        (&cast.member, MembershipRole::Viewer),
    ] {
        identity::add_member(&mut tx, id, who.id, role)
            .await
            .unwrap();
    }
    let source = content::ensure_source(&mut tx, id, "files", SourceKind::Upload)
        .await
        .unwrap();
    tx.commit().await.unwrap();
    let (status, body) = server
        .send(
            server
                .http
                .post(server.url(&format!("/v1/sources/{}/documents", source.id)))
                .multipart(upload_form("first.txt")),
            &cast.owner,
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let document = body["files"][0]["document_id"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    Space {
        id,
        source: source.id,
        document,
    }
}

fn upload_form(name: &str) -> reqwest::multipart::Form {
    reqwest::multipart::Form::new().part(
        "file",
        reqwest::multipart::Part::bytes(b"notes about the harbour survey\n".to_vec())
            .file_name(name.to_string()),
    )
}

/// What a write could change: the space, its sources, documents and members.
async fn snapshot(server: &Server, space: Uuid) -> Value {
    let mut tx = server.test.db.begin(Scope::System).await.unwrap();
    let exists: bool = sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM spaces WHERE id = $1)")
        .bind(space)
        .fetch_one(&mut *tx)
        .await
        .unwrap();
    let sources: Vec<String> =
        sqlx::query_scalar("SELECT name FROM sources WHERE space_id = $1 ORDER BY name")
            .bind(space)
            .fetch_all(&mut *tx)
            .await
            .unwrap();
    let documents: Vec<String> =
        sqlx::query_scalar("SELECT path FROM documents WHERE space_id = $1 ORDER BY path")
            .bind(space)
            .fetch_all(&mut *tx)
            .await
            .unwrap();
    let members: Vec<(Uuid, String)> = sqlx::query_as(
        "SELECT user_id, role::text FROM memberships WHERE space_id = $1 ORDER BY user_id",
    )
    .bind(space)
    .fetch_all(&mut *tx)
    .await
    .unwrap();
    json!({ "exists": exists, "sources": sources, "documents": documents, "members": members })
}

#[derive(Debug, Clone, Copy)]
enum Write {
    CreateSource,
    Upload,
    DeleteDocument,
    AddMember,
    ChangeMember,
    RemoveMember,
    DeleteSpace,
}

impl Write {
    fn request(self, server: &Server, cast: &Cast, space: &Space) -> reqwest::RequestBuilder {
        let http = &server.http;
        let s = space.id;
        match self {
            Write::CreateSource => http
                .post(server.url(&format!("/v1/spaces/{s}/sources")))
                .json(&json!({ "name": "more" })),
            Write::Upload => http
                .post(server.url(&format!("/v1/sources/{}/documents", space.source)))
                .multipart(upload_form("second.txt")),
            Write::DeleteDocument => {
                http.delete(server.url(&format!("/v1/documents/{}", space.document)))
            }
            Write::AddMember => http
                .post(server.url(&format!("/v1/spaces/{s}/members")))
                .json(&json!({ "email": cast.newcomer.email, "role": "editor" })),
            Write::ChangeMember => http
                .put(server.url(&format!("/v1/spaces/{s}/members/{}", cast.member.id)))
                .json(&json!({ "role": "editor" })),
            Write::RemoveMember => {
                http.delete(server.url(&format!("/v1/spaces/{s}/members/{}", cast.member.id)))
            }
            Write::DeleteSpace => http.delete(server.url(&format!("/v1/spaces/{s}"))),
        }
    }
}

/// The expected status of each write for each caller:
/// viewer, editor, owner, guest (an owner of the space), stranger.
const TABLE: &[(Write, [u16; 5])] = &[
    (Write::CreateSource, [403, 201, 201, 403, 404]),
    (Write::Upload, [403, 200, 200, 403, 404]),
    (Write::DeleteDocument, [403, 204, 204, 403, 404]),
    (Write::AddMember, [403, 403, 201, 403, 404]),
    (Write::ChangeMember, [403, 403, 200, 403, 404]),
    (Write::RemoveMember, [403, 403, 204, 403, 404]),
    (Write::DeleteSpace, [403, 403, 204, 403, 404]),
];

#[tokio::test]
async fn every_write_endpoint_against_every_role() {
    let server = start().await;
    let cast = cast(&server).await;
    let callers = [
        ("viewer", &cast.viewer),
        ("editor", &cast.editor),
        ("owner", &cast.owner),
        ("guest", &cast.guest),
        ("stranger", &cast.stranger),
    ];
    let mut failures = Vec::new();
    for (n, (write, expected)) in TABLE.iter().enumerate() {
        for (i, (label, caller)) in callers.iter().enumerate() {
            let space = space(&server, &cast, &format!("space-{n}-{i}")).await;
            let before = snapshot(&server, space.id).await;
            let (status, body) = server
                .send(write.request(&server, &cast, &space), caller)
                .await;
            let after = snapshot(&server, space.id).await;
            let allowed = expected[i] < 300;
            if status != expected[i] {
                failures.push(format!(
                    "{write:?} as {label}: {status} (expected {}): {body}",
                    expected[i]
                ));
            } else if !allowed {
                if body["error"]["code"].as_str().is_none() {
                    failures.push(format!("{write:?} as {label}: no JSON error: {body}"));
                }
                if before != after {
                    failures.push(format!(
                        "{write:?} as {label} was refused but changed the space: {before} -> {after}"
                    ));
                }
            } else if before == after {
                failures.push(format!(
                    "{write:?} as {label} succeeded but changed nothing"
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[tokio::test]
async fn guests_cannot_create_spaces_and_members_see_the_member_list() {
    let server = start().await;
    let cast = cast(&server).await;
    let (status, body) = server
        .send(
            server
                .http
                .post(server.url("/v1/spaces"))
                .json(&json!({ "name": "mine" })),
            &cast.guest,
        )
        .await;
    assert_eq!(status, 403, "{body}");

    let space = space(&server, &cast, "listed").await;
    let (status, body) = server
        .send(
            server
                .http
                .get(server.url(&format!("/v1/spaces/{}/members", space.id))),
            &cast.viewer,
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let members: Vec<(String, String)> = body["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["email"].as_str().unwrap().to_string(),
                m["role"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        members,
        [
            ("editor@example.com", "editor"),
            ("guest@example.com", "owner"),
            ("member@example.com", "viewer"),
            ("owner@example.com", "owner"),
            ("viewer@example.com", "viewer"),
        ]
        .map(|(e, r)| (e.to_string(), r.to_string()))
    );
    let (status, body) = server
        .send(
            server
                .http
                .get(server.url(&format!("/v1/spaces/{}/members", space.id))),
            &cast.stranger,
        )
        .await;
    assert_eq!(status, 404, "{body}");

    // Adding someone without an account, or twice, is refused with a reason.
    let add = |email: &str| {
        server
            .http
            .post(server.url(&format!("/v1/spaces/{}/members", space.id)))
            .json(&json!({ "email": email }))
    };
    let (status, body) = server.send(add("nobody@example.com"), &cast.owner).await;
    assert_eq!(status, 404, "{body}");
    let (status, body) = server.send(add("Newcomer@Example.com"), &cast.owner).await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["role"], "viewer", "viewer is the default role: {body}");
    let (status, body) = server.send(add("newcomer@example.com"), &cast.owner).await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["error"]["code"], "conflict");
}

#[tokio::test]
async fn the_last_owner_can_neither_leave_nor_be_demoted() {
    let server = start().await;
    let cast = cast(&server).await;
    let (status, body) = server
        .send(
            server
                .http
                .post(server.url("/v1/spaces"))
                .json(&json!({ "name": "solo" })),
            &cast.owner,
        )
        .await;
    assert_eq!(status, 201, "{body}");
    let space = body["id"].as_str().unwrap().to_string();
    let me = |who: &Person| server.url(&format!("/v1/spaces/{space}/members/{}", who.id));

    let (status, body) = server
        .send(
            server
                .http
                .put(me(&cast.owner))
                .json(&json!({ "role": "editor" })),
            &cast.owner,
        )
        .await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["error"]["code"], "conflict");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no owner left"),
        "{body}"
    );
    let (status, body) = server
        .send(server.http.delete(me(&cast.owner)), &cast.owner)
        .await;
    assert_eq!(status, 409, "{body}");

    // With a second owner the first may step down, and then leave.
    let (status, body) = server
        .send(
            server
                .http
                .post(server.url(&format!("/v1/spaces/{space}/members")))
                .json(&json!({ "email": cast.editor.email, "role": "owner" })),
            &cast.owner,
        )
        .await;
    assert_eq!(status, 201, "{body}");
    let (status, body) = server
        .send(
            server
                .http
                .put(me(&cast.owner))
                .json(&json!({ "role": "viewer" })),
            &cast.owner,
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["role"], "viewer");
    let (status, body) = server
        .send(server.http.delete(me(&cast.owner)), &cast.owner)
        .await;
    assert_eq!(status, 204, "{body}");
    // The remaining owner is the last one now.
    let (status, body) = server
        .send(server.http.delete(me(&cast.editor)), &cast.editor)
        .await;
    assert_eq!(status, 409, "{body}");
}

/// The database holds the rules even when the server's checks are skipped:
/// each statement runs as the user, as the server's role.
#[tokio::test]
async fn the_database_enforces_roles_on_its_own() {
    let server = start().await;
    let cast = cast(&server).await;
    let space = space(&server, &cast, "held").await;
    let db = &server.test.db;

    for who in [&cast.viewer, &cast.guest] {
        let mut tx = db.begin(Scope::User(who.id)).await.unwrap();
        let err = content::ensure_source(&mut tx, space.id, "sneaky", SourceKind::Upload)
            .await
            .unwrap_err();
        assert!(err.to_string().contains("row-level security"), "{err}");
    }
    for who in [&cast.editor, &cast.guest, &cast.viewer] {
        let mut tx = db.begin(Scope::User(who.id)).await.unwrap();
        let err = identity::set_member(&mut tx, space.id, who.id, MembershipRole::Owner)
            .await
            .unwrap_err();
        assert!(matches!(err, StoreError::Denied(_)), "{err}");
        let mut tx = db.begin(Scope::User(who.id)).await.unwrap();
        let err = identity::remove_member(&mut tx, space.id, cast.owner.id)
            .await
            .unwrap_err();
        assert!(matches!(err, StoreError::Denied(_)), "{err}");
        let mut tx = db.begin(Scope::User(who.id)).await.unwrap();
        assert!(!identity::delete_space(&mut tx, space.id).await.unwrap());
        tx.commit().await.unwrap();
    }
    // A member's own rows only, through the table; the list through the function.
    let mut tx = db.begin(Scope::User(cast.viewer.id)).await.unwrap();
    let visible: i64 = sqlx::query_scalar("SELECT count(*) FROM memberships")
        .fetch_one(&mut *tx)
        .await
        .unwrap();
    assert_eq!(visible, 1);
    assert_eq!(
        identity::space_members(&mut tx, space.id)
            .await
            .unwrap()
            .len(),
        5
    );
    let mut tx = db.begin(Scope::User(cast.stranger.id)).await.unwrap();
    assert!(
        identity::space_members(&mut tx, space.id)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(snapshot(&server, space.id).await["exists"], true);
}

#[tokio::test]
async fn token_command_gives_the_space_role_asked_for() {
    let test = TestDatabase::create().await;
    let data_dir = tempfile::tempdir().unwrap();
    let token = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_data-plane"))
            .arg("token")
            .args(args)
            .env("DATABASE_URL", &test.app_url)
            .env("DATA_PLANE_DATA_DIR", data_dir.path())
            .output()
            .unwrap()
    };
    let role_of = |email: &'static str| {
        let db = test.db.clone();
        async move {
            let mut tx = db.begin(Scope::System).await.unwrap();
            sqlx::query_scalar::<_, String>(
                "SELECT m.role::text FROM memberships m JOIN users u ON u.id = m.user_id
                 JOIN spaces s ON s.id = m.space_id WHERE u.email = $1 AND s.name = 'shared'",
            )
            .bind(email)
            .fetch_optional(&mut *tx)
            .await
            .unwrap()
        }
    };
    let out = token(&["--user", "reader@example.com", "--space", "shared"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        role_of("reader@example.com").await.as_deref(),
        Some("viewer")
    );

    let out = token(&[
        "--user",
        "writer@example.com",
        "--space",
        "shared",
        "--space-role",
        "editor",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        role_of("writer@example.com").await.as_deref(),
        Some("editor")
    );
    // Asking again without a role keeps the one given.
    let out = token(&["--user", "writer@example.com", "--space", "shared"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        role_of("writer@example.com").await.as_deref(),
        Some("editor")
    );

    let out = token(&[
        "--user",
        "writer@example.com",
        "--space",
        "shared",
        "--space-role",
        "boss",
    ]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("unknown space role \"boss\""), "{stderr}");
}

/// An execute route runs a tool only in a space of the caller's: another
/// user's space and one that does not exist get the same 404, nothing runs
/// and nothing is audited.
#[tokio::test]
async fn execute_routes_check_the_space_is_the_callers() {
    let test = TestDatabase::create().await;
    let jwt = common::jwt();
    let service_token = "svc-token-0123456789abcdef";
    let state = common::state_with(
        test.db.clone(),
        common::embedder(),
        jwt.clone(),
        data_plane::auth::ServiceTokens::parse(&format!("agents={service_token}")).unwrap(),
        data_plane_web::search::WebSearch::default(),
    );
    let ledger = state.ledger.clone();
    let base = common::serve(state).await;
    let server = Server {
        base,
        jwt,
        test,
        http: reqwest::Client::new(),
    };
    let cast = cast(&server).await;
    let mine = space(&server, &cast, "mine").await;
    let theirs = {
        let mut tx = server.test.db.begin(Scope::System).await.unwrap();
        let (s, _) = identity::ensure_space(&mut tx, "theirs").await.unwrap();
        identity::add_member(&mut tx, s.id, cast.stranger.id, MembershipRole::Owner)
            .await
            .unwrap();
        tx.commit().await.unwrap();
        s.id
    };

    let execute = |space: Uuid| {
        server
            .http
            .post(server.url("/v1/tools/list_sources/execute"))
            .json(&json!({ "args": {}, "spaceId": space }))
    };
    let module = |space: Uuid| {
        server
            .http
            .post(server.url("/execute"))
            .bearer_auth(service_token)
            .json(&json!({
                "tool_name": "list_sources",
                "arguments": {},
                "user_id": cast.owner.id,
                "space_id": space,
            }))
    };
    let (status, body) = server.send(execute(mine.id), &cast.owner).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["success"], true, "{body}");
    let resp = module(mine.id).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    let before = audited(&ledger, &server.test.db).await;
    assert_eq!(before, 2);

    for space in [theirs, Uuid::new_v4()] {
        let (status, body) = server.send(execute(space), &cast.owner).await;
        assert_eq!(status, 404, "{body}");
        assert_eq!(body["error"]["code"], "not_found", "{body}");
        let resp = module(space).send().await.unwrap();
        assert_eq!(resp.status(), 404);
        let body: Value = resp.json().await.unwrap();
        assert_eq!(body["error"]["code"], "not_found", "{body}");
    }
    assert_eq!(
        audited(&ledger, &server.test.db).await,
        before,
        "a refused call ran or was audited"
    );
}

/// Audit records written so far.
async fn audited(ledger: &data_plane_handlers::PgLedger, db: &data_plane_store::Db) -> i64 {
    ledger.flush().await;
    let mut tx = db.begin(Scope::System).await.unwrap();
    sqlx::query_scalar::<_, i64>("SELECT count(*) FROM tool_calls")
        .fetch_one(&mut *tx)
        .await
        .unwrap()
}

/// Two replicas on one database: a demotion, a lost role and a revoked token
/// are refused on each replica's next request. Both replicas have just
/// served the user, so their cached identities are younger than a second:
/// only the notification can have dropped them.
#[tokio::test]
async fn changes_reach_every_replica_on_the_next_request() {
    let test = TestDatabase::create().await;
    let jwt = common::jwt();
    let embedder = common::embedder();
    // Each replica with its own pool, as separate processes would be.
    let other_db = data_plane_store::Db::connect(&test.app_url, 4)
        .await
        .unwrap();
    let a = common::serve(common::state(
        test.db.clone(),
        embedder.clone(),
        jwt.clone(),
    ))
    .await;
    let b = common::serve(common::state(other_db, embedder, jwt.clone())).await;
    let server = Server {
        base: a.clone(),
        jwt,
        test,
        http: reqwest::Client::new(),
    };
    let cast = cast(&server).await;
    let root = server.person("root@example.com", Permission::Admin).await;
    let space = space(&server, &cast, "shared").await;
    let get = |base: &str, path: &str| server.http.get(format!("{base}{path}"));
    let create_source = |base: &str| {
        server
            .http
            .post(format!("{base}/v1/spaces/{}/sources", space.id))
            .json(&json!({ "name": "more" }))
    };
    let settle = std::time::Duration::from_millis(100);

    // A demoted admin: settings are refused on both replicas.
    for base in [&a, &b] {
        let (status, body) = server.send(get(base, "/v1/admin/settings"), &root).await;
        assert_eq!(status, 200, "{body}");
    }
    let warmed = std::time::Instant::now();
    let mut tx = server.test.db.begin(Scope::System).await.unwrap();
    identity::upsert_user(&mut tx, &root.email, Some(Permission::User))
        .await
        .unwrap();
    tx.commit().await.unwrap();
    tokio::time::sleep(settle).await;
    for base in [&a, &b] {
        let (status, body) = server.send(get(base, "/v1/admin/settings"), &root).await;
        assert_eq!(status, 403, "{base}: {body}");
    }
    assert!(
        warmed.elapsed() < data_plane::access::IDENTITY_TTL,
        "too slow to tell the notification from the cache's expiry: {:?}",
        warmed.elapsed()
    );

    // An editor made a viewer on replica A cannot write on replica B.
    let (status, body) = server.send(create_source(&b), &cast.editor).await;
    assert_eq!(status, 201, "{body}");
    let warmed = std::time::Instant::now();
    let (status, body) = server
        .send(
            server
                .http
                .put(format!(
                    "{a}/v1/spaces/{}/members/{}",
                    space.id, cast.editor.id
                ))
                .json(&json!({ "role": "viewer" })),
            &cast.owner,
        )
        .await;
    assert_eq!(status, 200, "{body}");
    tokio::time::sleep(settle).await;
    let (status, body) = server.send(create_source(&b), &cast.editor).await;
    assert_eq!(status, 403, "{body}");
    assert!(warmed.elapsed() < data_plane::access::IDENTITY_TTL);

    // A revoked token stops working everywhere; a new one works.
    for base in [&a, &b] {
        let (status, body) = server.send(get(base, "/v1/spaces"), &cast.viewer).await;
        assert_eq!(status, 200, "{body}");
    }
    let warmed = std::time::Instant::now();
    let data_dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_data-plane"))
        .args(["token", "revoke", "--email", &cast.viewer.email])
        .env("DATABASE_URL", &server.test.app_url)
        .env("DATA_PLANE_DATA_DIR", data_dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    tokio::time::sleep(settle).await;
    for base in [&a, &b] {
        let (status, body) = server.send(get(base, "/v1/spaces"), &cast.viewer).await;
        assert_eq!(status, 401, "{base}: {body}");
        assert!(
            body["error"]["message"]
                .as_str()
                .unwrap()
                .contains("revoked"),
            "{body}"
        );
    }
    let elapsed = warmed.elapsed();
    // The command prints a token of the new version, which works.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_data-plane"))
        .args(["token", "--user", &cast.viewer.email])
        .env("DATABASE_URL", &server.test.app_url)
        .env("DATA_PLANE_DATA_DIR", data_dir.path())
        .env("DATA_PLANE_JWT_SECRET", common::JWT_SECRET)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let fresh = Person {
        token: String::from_utf8(out.stdout).unwrap().trim().to_string(),
        ..cast.viewer.clone()
    };
    let (status, body) = server.send(get(&b, "/v1/spaces"), &fresh).await;
    assert_eq!(status, 200, "{body}");
    // The revocation ran a process (start-up included) within the window.
    assert!(
        elapsed < std::time::Duration::from_secs(5),
        "revocation took {elapsed:?}"
    );
}

/// Only admins (and the system) write settings, in the database itself.
#[tokio::test]
async fn the_database_admits_only_admins_to_settings() {
    let server = start().await;
    let cast = cast(&server).await;
    let root = server.person("root@example.com", Permission::Admin).await;
    let change: std::collections::BTreeMap<String, Value> =
        [("web_search_enabled".to_string(), json!(true))].into();
    for who in [&cast.owner, &cast.guest] {
        let mut tx = server.test.db.begin(Scope::User(who.id)).await.unwrap();
        let err = data_plane_store::settings::store(&mut tx, &change, Some(who.id))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("row-level security"), "{err}");
    }
    let mut tx = server.test.db.begin(Scope::User(root.id)).await.unwrap();
    data_plane_store::settings::store(&mut tx, &change, Some(root.id))
        .await
        .unwrap();
    tx.commit().await.unwrap();
}

/// An audit record whose space is gone by the time it is written is kept
/// (without the space, which its error names), and the failed attempt shows
/// in /metrics.
#[tokio::test]
async fn an_audit_record_outlives_a_failed_write() {
    use data_plane_registry::{AuditRecord, Ledger};
    let (server, ledger) = start_with_ledger().await;
    let cast = cast(&server).await;
    let gone = Uuid::new_v4();
    ledger
        .record(AuditRecord {
            tool: "list_sources".into(),
            call_id: "call-gone".into(),
            duration_ms: 3,
            ts: chrono::Utc::now(),
            user_id: cast.owner.id,
            space_id: Some(gone),
            request_id: "req-gone".into(),
            parent_call_id: None,
            success: true,
            error: None,
            args: json!({}),
            annotations: None,
            side_effects: Vec::new(),
            gate: None,
            agent: None,
            module: None,
            attempts: 1,
        })
        .await
        .unwrap();
    ledger.flush().await;
    let mut tx = server.test.db.begin(Scope::System).await.unwrap();
    let (space, error): (Option<Uuid>, Option<String>) =
        sqlx::query_as("SELECT space_id, error FROM tool_calls WHERE call_id = 'call-gone'")
            .fetch_one(&mut *tx)
            .await
            .unwrap();
    assert_eq!(space, None);
    assert_eq!(error.unwrap(), format!("space {gone} no longer exists"));
    assert!(ledger.audit_write_failures() >= 1);
    let metrics = server
        .http
        .get(server.url("/metrics"))
        .bearer_auth(METRICS_TOKEN)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let line = metrics
        .lines()
        .find(|l| l.starts_with("data_plane_audit_write_failures_total"))
        .unwrap_or_else(|| panic!("no audit failure counter in {metrics}"));
    let count: u64 = line.rsplit(' ').next().unwrap().parse().unwrap();
    assert!(count >= 1, "{line}");
    // Written after a retry, so nothing went to the spool.
    for counter in [
        "data_plane_audit_records_spooled_total 0",
        "data_plane_audit_records_replayed_total 0",
    ] {
        assert!(
            metrics.lines().any(|l| l == counter),
            "{counter} in {metrics}"
        );
    }
}

/// The service token `start_with_ledger`'s server accepts (/metrics needs one).
const METRICS_TOKEN: &str = "svc-metrics-0123456789abcdef";

async fn start_with_ledger() -> (Server, data_plane_handlers::PgLedger) {
    let test = TestDatabase::create().await;
    let jwt = common::jwt();
    let state = common::state_with(
        test.db.clone(),
        common::embedder(),
        jwt.clone(),
        data_plane::auth::ServiceTokens::parse(&format!("monitoring={METRICS_TOKEN}")).unwrap(),
        data_plane_web::search::WebSearch::default(),
    );
    let ledger = state.ledger.clone();
    let base = common::serve(state).await;
    (
        Server {
            base,
            jwt,
            test,
            http: reqwest::Client::new(),
        },
        ledger,
    )
}
