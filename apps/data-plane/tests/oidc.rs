//! Sign-in with an OpenID Connect provider against a real server on
//! 127.0.0.1 and PostgreSQL: tokens of `oidc-provider` (the OpenID-certified
//! implementation from npm, tests/e2e/oidc_provider.mjs) signing people in
//! beside the server's own tokens, its keys rotated during the test, the
//! forgeries and mistakes every verifier must refuse, key sets that are
//! huge, slow or not JSON from a fake issuer, the metadata MCP clients
//! discover the provider by, and the official MCP Python SDK's OAuth client
//! signing in through the provider's own login page.

// Test helpers report failure by panicking, like the tests that call them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use data_plane::auth::oidc::{Oidc, OidcSettings};
use data_plane::state::AppState;
use data_plane_store::Scope;
use data_plane_store::identity::{self, Permission};
use data_plane_store::testing::TestDatabase;
use data_plane_testkit::http::{Handler, Request, Response, Server};
use serde_json::{Value, json};

const AUDIENCE: &str = "data-plane-test";
const CLIENT: &str = "chat-page";
const REDIRECT: &str = "http://127.0.0.1:9/callback";

fn b64(bytes: &[u8]) -> String {
    common::oidc::base64url(bytes)
}

/// A JWT with this header and payload and a signature of noise.
fn unsigned(header: Value, claims: Value) -> String {
    format!(
        "{}.{}.{}",
        b64(header.to_string().as_bytes()),
        b64(claims.to_string().as_bytes()),
        b64(&[7u8; 256])
    )
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

async fn state_for(test: &TestDatabase, settings: OidcSettings) -> AppState {
    let oidc = Oidc::new(settings).unwrap();
    oidc.warm().await;
    common::state(test.db.clone(), common::embedder(), common::jwt()).with_oidc(oidc)
}

/// A GET with this bearer token: its status, `WWW-Authenticate` and body.
async fn get(url: &str, token: &str) -> (u16, String, Value) {
    let r = reqwest::Client::new()
        .get(url)
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    let challenge = r
        .headers()
        .get("www-authenticate")
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default();
    (status, challenge, r.json().await.unwrap_or(Value::Null))
}

/// The token is refused: 401, a challenge naming `invalid_token` and the
/// metadata, and a message that contains `why`.
async fn refused(base: &str, token: &str, why: &str) {
    let (status, challenge, body) = get(&format!("{base}/v1/spaces"), token).await;
    assert_eq!(status, 401, "{why}: {body}");
    assert!(
        challenge.starts_with("Bearer ") && challenge.contains(r#"error="invalid_token""#),
        "{why}: {challenge}"
    );
    assert!(
        challenge.contains(&format!(
            r#"resource_metadata="{base}/.well-known/oauth-protected-resource""#
        )),
        "{challenge}"
    );
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains(why), "expected {why:?} in {message:?}");
    assert!(challenge.contains(why), "{challenge}");
}

/// How a fake issuer answers for its key set.
type KeySetAnswer = fn() -> Response;

/// An issuer whose key set is whatever `jwks` answers, counting the reads.
struct FakeIssuer {
    base: Arc<OnceLock<String>>,
    jwks: KeySetAnswer,
    reads: Arc<AtomicUsize>,
}

impl Handler for FakeIssuer {
    fn respond(&self, request: Request) -> Response {
        let base = self.base.get().unwrap();
        let json = vec![("content-type".to_string(), "application/json".to_string())];
        match request.path.as_str() {
            "/.well-known/openid-configuration" => Response::whole(
                200,
                json,
                json!({"issuer": base, "jwks_uri": format!("{base}/jwks")}).to_string(),
            ),
            "/jwks" => {
                self.reads.fetch_add(1, Ordering::SeqCst);
                (self.jwks)()
            }
            _ => Response::whole(404, json, "{}"),
        }
    }
}

async fn fake_issuer(jwks: KeySetAnswer) -> (Server, String, Arc<AtomicUsize>) {
    let base = Arc::new(OnceLock::new());
    let reads = Arc::new(AtomicUsize::new(0));
    let server = Server::start(FakeIssuer {
        base: base.clone(),
        jwks,
        reads: reads.clone(),
    })
    .await;
    let url = server.url("");
    base.set(url.clone()).unwrap();
    (server, url, reads)
}

#[tokio::test]
async fn key_sets_that_are_huge_slow_or_not_json_refuse_tokens_and_nothing_fails_open() {
    let test = TestDatabase::create().await;
    let cases: [(&str, KeySetAnswer); 4] = [
        ("huge", || {
            // Valid JSON, a third of a megabyte of it.
            let keys: Vec<Value> = (0..3000)
                .map(|i| json!({"kty": "RSA", "kid": format!("k{i}"), "n": "x".repeat(100), "e": "AQAB"}))
                .collect();
            Response::whole(200, vec![], json!({ "keys": keys }).to_string())
        }),
        ("slow", || {
            Response::Delayed(
                Duration::from_secs(10),
                Box::new(Response::whole(200, vec![], r#"{"keys": []}"#)),
            )
        }),
        ("not JSON", || {
            Response::whole(200, vec![], "<html>sign in</html>")
        }),
        ("empty", || {
            Response::whole(
                200,
                vec![],
                r#"{"keys": [{"kty": "oct", "k": "c2VjcmV0"}]}"#,
            )
        }),
    ];
    for (what, jwks) in cases {
        let (_issuer, url, reads) = fake_issuer(jwks).await;
        let mut settings = OidcSettings::new(&url, AUDIENCE).unwrap();
        settings.fetch_timeout = Duration::from_millis(500);
        settings.refetch_interval = Duration::from_secs(60);
        let base = common::serve(state_for(&test, settings).await).await;
        let claims = json!({"iss": url, "aud": AUDIENCE, "sub": "s", "exp": now() + 300});
        let started = std::time::Instant::now();
        // Many tokens naming keys nobody has: one read of the key set in
        // all (the one at start), however many ask.
        for i in 0..10 {
            let token = unsigned(
                json!({"alg": "RS256", "kid": format!("nope-{i}")}),
                claims.clone(),
            );
            refused(&base, &token, "signing keys could not be read").await;
        }
        assert_eq!(
            reads.load(Ordering::SeqCst),
            1,
            "{what}: the key set read once"
        );
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{what}: refusals do not wait on the issuer"
        );
    }
}

#[tokio::test]
async fn a_token_naming_an_unknown_key_reads_the_set_again_at_most_once_per_interval() {
    let test = TestDatabase::create().await;
    let (_issuer, url, reads) = fake_issuer(|| {
        Response::whole(
            200,
            vec![],
            json!({"keys": [{"kty": "RSA", "kid": "only", "n": "sXch", "e": "AQAB", "alg": "RS256", "use": "sig"}]})
                .to_string(),
        )
    })
    .await;
    let mut settings = OidcSettings::new(&url, AUDIENCE).unwrap();
    settings.refetch_interval = Duration::from_millis(800);
    let base = common::serve(state_for(&test, settings).await).await;
    assert_eq!(reads.load(Ordering::SeqCst), 1);
    let claims = json!({"iss": url, "aud": AUDIENCE, "sub": "s", "exp": now() + 300});
    tokio::time::sleep(Duration::from_millis(900)).await;
    let mut asking = Vec::new();
    for i in 0..20 {
        let token = unsigned(
            json!({"alg": "RS256", "kid": format!("rotated-{i}")}),
            claims.clone(),
        );
        let base = base.clone();
        asking.push(tokio::spawn(async move {
            refused(&base, &token, "is not one of the issuer's keys").await;
        }));
    }
    for a in asking {
        a.await.unwrap();
    }
    assert_eq!(
        reads.load(Ordering::SeqCst),
        2,
        "twenty unknown keys at once: one read again"
    );
    // The key it has, with a signature of noise.
    let forged = unsigned(json!({"alg": "RS256", "kid": "only"}), claims);
    refused(&base, &forged, "signature does not verify").await;
    assert_eq!(reads.load(Ordering::SeqCst), 2);
}

/// The people the provider knows.
fn people() -> Value {
    json!({
        "alice": {"email": "alice@example.com", "email_verified": true, "roles": ["user"]},
        "bob": {"email": "bob@example.com", "email_verified": true, "roles": []},
        "boss": {"email": "boss@example.com", "email_verified": true, "roles": ["admin"]},
        "eve": {"email": "taken@example.com", "email_verified": false, "roles": ["user"]},
        "newcomer": {"email": "newcomer@example.com", "email_verified": false, "roles": ["user"]},
        "alice-again": {"email": "alice@example.com", "email_verified": true, "roles": ["user"]},
        "root": {"email": "root@example.com", "email_verified": true, "roles": ["user"]},
    })
}

async fn provider(resource: &str) -> common::oidc::Provider {
    common::oidc::Provider::start(json!({
        "port": 0,
        "resource": resource,
        "audience": AUDIENCE,
        "clients": [{"client_id": CLIENT, "redirect_uris": [REDIRECT], "public": true}],
        "users": people(),
        "access_token_ttl": 300,
    }))
    .await
}

fn settings_for(issuer: &str) -> OidcSettings {
    let mut settings = OidcSettings::new(issuer, AUDIENCE).unwrap();
    settings.client_id = Some(CLIENT.into());
    settings.refetch_interval = Duration::from_millis(100);
    settings
}

async fn sign_in(p: &common::oidc::Provider, user: &str) -> common::oidc::Tokens {
    p.sign_in(
        CLIENT,
        REDIRECT,
        user,
        "openid email profile offline_access",
        None,
    )
    .await
}

fn kid_of(token: &str) -> String {
    let (header, _) = common::oidc::decode_jwt(token);
    header["kid"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn a_providers_tokens_sign_people_in_beside_the_servers_own_and_its_keys_rotate() {
    let test = TestDatabase::create().await;
    let p = provider("http://127.0.0.1:1/").await;
    let state = state_for(&test, settings_for(p.issuer())).await;
    let base = common::serve(state.clone()).await;

    // A person never seen: made a user with the provider's email.
    let alice = sign_in(&p, "alice").await;
    let (status, _, body) = get(&format!("{base}/v1/spaces"), &alice.access_token).await;
    assert_eq!(status, 200, "{body}");
    let mut tx = test.db.begin(Scope::System).await.unwrap();
    let alice_id: uuid::Uuid = sqlx::query_scalar(
        "SELECT u.id FROM users u JOIN oidc_identities i ON i.user_id = u.id
         WHERE i.issuer = $1 AND i.subject = 'alice' AND u.email = 'alice@example.com'",
    )
    .bind(p.issuer())
    .fetch_one(&mut *tx)
    .await
    .unwrap();
    tx.commit().await.unwrap();
    // The second request is the same person (remembered by the token).
    let (status, _, _) = get(&format!("{base}/v1/spaces"), &alice.access_token).await;
    assert_eq!(status, 200);

    // A space alice makes is hers: the provider's person is a real user.
    let created = reqwest::Client::new()
        .post(format!("{base}/v1/spaces"))
        .bearer_auth(&alice.access_token)
        .json(&json!({"name": "alice's"}))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201);

    // The server's own tokens keep working beside the provider's.
    let own = common::jwt()
        .issue(
            alice_id,
            "alice@example.com",
            Permission::User,
            Duration::from_secs(60),
        )
        .unwrap();
    let (status, _, body) = get(&format!("{base}/v1/spaces"), &own).await;
    assert_eq!(status, 200);
    assert_eq!(body["spaces"].as_array().unwrap().len(), 1, "{body}");

    // The provider rotates its key: a token signed with the new one is
    // accepted without a restart; tokens of the old key still are.
    let old_kid = kid_of(&alice.access_token);
    let signed_by_old = p.sign(json!({}), json!({"sub": "bob"})).await;
    let new_kid = p.rotate().await;
    assert_ne!(old_kid, new_kid);
    // Tokens of a provider that names no key: the new key is read for
    // one too.
    let kidless = p
        .sign(
            json!({"kid": null}),
            json!({"sub": "bob", "email": "bob@example.com"}),
        )
        .await;
    let (status, _, body) = get(&format!("{base}/v1/spaces"), &kidless).await;
    assert_eq!(status, 200, "{body}");
    let bob = sign_in(&p, "bob").await;
    assert_eq!(kid_of(&bob.access_token), new_kid);
    let (status, _, body) = get(&format!("{base}/v1/spaces"), &bob.access_token).await;
    assert_eq!(status, 200, "{body}");
    // A refreshed token too.
    let refreshed = p
        .refresh(
            CLIENT,
            bob.refresh_token.as_deref().expect("a refresh token"),
        )
        .await;
    assert_ne!(refreshed.access_token, bob.access_token);
    assert_eq!(
        get(&format!("{base}/v1/spaces"), &refreshed.access_token)
            .await
            .0,
        200
    );
    // The old key retired: once the server reads the set again (here for
    // a token naming a key it lacks), a token the old key signed and the
    // server never saw is refused.
    p.retire().await;
    tokio::time::sleep(Duration::from_millis(150)).await;
    let unknown = p.sign(json!({"kid": "not-yet"}), json!({})).await;
    refused(&base, &unknown, "is not one of the issuer's keys").await;
    refused(&base, &signed_by_old, "is not one of the issuer's keys").await;

    // The provider goes away: keys held stay, and so does what they sign;
    // nothing fails open.
    let later = sign_in(&p, "bob").await;
    let unknown = p.sign(json!({"kid": "never-published"}), json!({})).await;
    let _ = old_kid;
    drop(p);
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert_eq!(
        get(&format!("{base}/v1/spaces"), &later.access_token)
            .await
            .0,
        200
    );
    refused(&base, &unknown, "is not one of the issuer's keys").await;
}

#[tokio::test]
async fn forgeries_and_tokens_for_others_are_refused_with_401_naming_the_error() {
    let test = TestDatabase::create().await;
    let p = provider("http://127.0.0.1:1/").await;
    let base = common::serve(state_for(&test, settings_for(p.issuer())).await).await;
    let issuer = p.issuer().to_string();
    let good = json!({"iss": issuer, "aud": AUDIENCE, "sub": "alice", "email": "alice@example.com", "email_verified": true, "exp": now() + 300});

    // alg none, with and without a signature.
    let none = format!(
        "{}.{}.",
        b64(br#"{"alg":"none","typ":"JWT"}"#),
        b64(good.to_string().as_bytes())
    );
    refused(&base, &none, "not a JWT this server accepts").await;
    refused(
        &base,
        &format!("{none}c2ln"),
        "not a JWT this server accepts",
    )
    .await;
    // Key confusion: HS256 "signed" with the issuer's public key as the
    // secret. It goes to the server's own HS256 check, which refuses it.
    let public = p.jwks().await.to_string();
    let confused = jsonwebtoken::encode(
        &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256),
        &good,
        &jsonwebtoken::EncodingKey::from_secret(public.as_bytes()),
    )
    .unwrap();
    refused(&base, &confused, "the token is not valid").await;
    // An RS256 header naming the provider's key over an HMAC signature.
    let kid = kid_of(&sign_in(&p, "alice").await.access_token);
    let mixed = format!(
        "{}.{}",
        confused.rsplit_once('.').unwrap().0.replacen(
            confused.split('.').next().unwrap(),
            &b64(json!({"alg": "RS256", "kid": kid}).to_string().as_bytes()),
            1
        ),
        confused.rsplit_once('.').unwrap().1
    );
    refused(&base, &mixed, "signature does not verify").await;

    // Signed by the provider's own key, with claims that do not hold.
    let cases = [
        (
            json!({"iss": "https://other.example.com"}),
            "issued by another issuer",
        ),
        (json!({"aud": "someone-else"}), "not meant for this server"),
        (json!({"exp": now() - 3600}), "has expired"),
        (json!({"nbf": now() + 3600}), "not valid yet"),
        (json!({"sub": null}), "no sub claim"),
        (json!({"exp": null}), "no exp claim"),
    ];
    for (change, why) in cases {
        let token = p.sign(json!({}), change).await;
        refused(&base, &token, why).await;
    }
    // A key the issuer never published.
    let token = p.sign(json!({"kid": "no-such-key"}), json!({})).await;
    refused(&base, &token, "is not one of the issuer's keys").await;

    // Another issuer's genuine token.
    let other = provider("http://127.0.0.1:1/").await;
    let theirs = sign_in(&other, "alice").await;
    refused(
        &base,
        &theirs.access_token,
        "is not one of the issuer's keys",
    )
    .await;

    // A role this issuer may not grant: the token says admin, the ceiling
    // is user.
    let boss = sign_in(&p, "boss").await;
    refused(&base, &boss.access_token, "may not grant").await;

    // An account made here with an email the provider does not vouch for
    // is not handed to whoever holds that address there: eve gets an
    // account of her own under a placeholder address, not the admin's.
    let mut tx = test.db.begin(Scope::System).await.unwrap();
    let taken = identity::upsert_user(&mut tx, "taken@example.com", Some(Permission::Admin))
        .await
        .unwrap()
        .id;
    let root = identity::upsert_user(&mut tx, "root@example.com", Some(Permission::Owner))
        .await
        .unwrap()
        .id;
    tx.commit().await.unwrap();
    let eve = sign_in(&p, "eve").await;
    assert_eq!(
        get(&format!("{base}/v1/spaces"), &eve.access_token).await.0,
        200
    );
    let (status, _, _) = get(&format!("{base}/v1/admin/settings"), &eve.access_token).await;
    assert_eq!(status, 403, "eve is not the admin whose address she typed");
    let linked = |subject: &'static str| {
        let db = test.db.clone();
        let issuer = issuer.clone();
        async move {
            let mut tx = db.begin(Scope::System).await.unwrap();
            let row: (uuid::Uuid, String, String) = sqlx::query_as(
                "SELECT u.id, u.email, u.permission::text FROM oidc_identities i
                 JOIN users u ON u.id = i.user_id WHERE i.issuer = $1 AND i.subject = $2",
            )
            .bind(&issuer)
            .bind(subject)
            .fetch_one(&mut *tx)
            .await
            .unwrap();
            tx.commit().await.unwrap();
            row
        }
    };
    let (eve_id, eve_email, _) = linked("eve").await;
    assert_ne!(eve_id, taken);
    assert!(eve_email.ends_with("@unverified.invalid"), "{eve_email}");
    // Nor is anyone's address taken by a newcomer who typed it.
    let newcomer = sign_in(&p, "newcomer").await;
    assert_eq!(
        get(&format!("{base}/v1/spaces"), &newcomer.access_token)
            .await
            .0,
        200
    );
    assert!(linked("newcomer").await.1.ends_with("@unverified.invalid"));

    // Two people of one provider never share an account, whatever their
    // addresses say.
    let alice = sign_in(&p, "alice").await;
    assert_eq!(
        get(&format!("{base}/v1/spaces"), &alice.access_token)
            .await
            .0,
        200
    );
    let again = sign_in(&p, "alice-again").await;
    refused(&base, &again.access_token, "another person's sign-in").await;

    // An account made here before, joined by its verified address, keeps
    // the permission given here; the provider's tokens carry the
    // provider's (under the ceiling).
    let owner = sign_in(&p, "root").await;
    let (status, _, _) = get(&format!("{base}/v1/admin/settings"), &owner.access_token).await;
    assert_eq!(status, 403, "the provider's root is a user here");
    let (root_id, _, permission) = linked("root").await;
    assert_eq!((root_id, permission.as_str()), (root, "owner"));

    // No token, and a header that is not Bearer: no error code for the
    // first (RFC 6750), invalid_request for the second.
    let r = reqwest::Client::new()
        .get(format!("{base}/v1/spaces"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    let challenge = r.headers()["www-authenticate"].to_str().unwrap();
    assert!(!challenge.contains("error="), "{challenge}");
    assert!(challenge.contains("resource_metadata="), "{challenge}");
    let r = reqwest::Client::new()
        .get(format!("{base}/v1/spaces"))
        .header("authorization", "Basic YTpi")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    assert!(
        r.headers()["www-authenticate"]
            .to_str()
            .unwrap()
            .contains(r#"error="invalid_request""#)
    );
}

#[tokio::test]
async fn the_provider_names_admins_only_where_the_deployment_lets_it() {
    let test = TestDatabase::create().await;
    let p = provider("http://127.0.0.1:1/").await;
    let mut settings = settings_for(p.issuer());
    settings.max_permission = Permission::Admin;
    let base = common::serve(state_for(&test, settings).await).await;
    let boss = sign_in(&p, "boss").await;
    let (status, _, body) = get(&format!("{base}/v1/admin/settings"), &boss.access_token).await;
    assert_eq!(status, 200, "{body}");
    let alice = sign_in(&p, "alice").await;
    let (status, _, _) = get(&format!("{base}/v1/admin/settings"), &alice.access_token).await;
    assert_eq!(status, 403);
}

#[tokio::test]
async fn mcp_clients_find_the_provider_and_the_python_sdk_signs_in_through_it() {
    let test = TestDatabase::create().await;
    // The server's address first: the provider issues tokens for it.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let p = provider(&format!("{base}/mcp")).await;
    let state = state_for(&test, settings_for(p.issuer())).await;
    tokio::spawn(async move { axum::serve(listener, data_plane::http::service(state)).await });

    // A 401 from /mcp points to the endpoint's own metadata.
    let r = reqwest::Client::new()
        .post(format!("{base}/mcp"))
        .header("accept", "application/json, text/event-stream")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    let challenge = r.headers()["www-authenticate"]
        .to_str()
        .unwrap()
        .to_string();
    let metadata_url = format!("{base}/.well-known/oauth-protected-resource/mcp");
    assert!(
        challenge.contains(&format!(r#"resource_metadata="{metadata_url}""#)),
        "{challenge}"
    );
    let metadata: Value = reqwest::get(&metadata_url)
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(metadata["resource"], format!("{base}/mcp"));
    assert_eq!(metadata["authorization_servers"], json!([p.issuer()]));
    assert!(
        metadata["scopes_supported"]
            .as_array()
            .unwrap()
            .contains(&json!("openid"))
    );
    let api: Value = reqwest::get(format!("{base}/.well-known/oauth-protected-resource"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(api["resource"], base);

    let got = common::mcp_script(
        "oauth_client.py",
        &[("DATA_PLANE_URL", &base), ("LOGIN", "alice")],
    )
    .await;
    // The SDK registered itself, was sent to the provider's login page,
    // and came back with a token for this server.
    assert_eq!(got["login_page"], true, "{got:#}");
    assert!(
        got["client_id"].as_str().is_some_and(|c| !c.is_empty()),
        "{got:#}"
    );
    let tools: Vec<&str> = got["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    assert!(tools.contains(&"search_documents"), "{tools:?}");
    assert_eq!(got["call"]["isError"], false, "{got:#}");
    let mut tx = test.db.begin(Scope::System).await.unwrap();
    let linked: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM oidc_identities WHERE issuer = $1 AND subject = 'alice'",
    )
    .bind(p.issuer())
    .fetch_one(&mut *tx)
    .await
    .unwrap();
    tx.commit().await.unwrap();
    assert_eq!(linked, 1);
}

#[tokio::test]
async fn without_a_provider_there_is_no_metadata_and_no_sign_in() {
    let server = common::start().await;
    let base = &server.base;
    let r = reqwest::get(format!("{base}/.well-known/oauth-protected-resource/mcp"))
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    let body: Value = r.json().await.unwrap();
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("DATA_PLANE_OIDC_ISSUER"),
        "{body}"
    );
    let config: Value = reqwest::get(format!("{base}/v1/auth/config"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(config, json!({"oidc": null}));
    // A refusal still names its error, and points nowhere.
    let (status, challenge, _) = get(&format!("{base}/v1/spaces"), "not-a-jwt").await;
    assert_eq!(status, 401);
    assert!(
        challenge.contains(r#"error="invalid_token""#),
        "{challenge}"
    );
    assert!(!challenge.contains("resource_metadata"), "{challenge}");
}
