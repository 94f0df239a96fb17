//! A real OpenID provider for the tests: panva's `oidc-provider` (npm, run by
//! node: tests/e2e/oidc_provider.mjs) on 127.0.0.1, and a browser's part of
//! the authorization-code flow with PKCE against it, done over HTTP by hand:
//! the provider's own login and consent pages, their cookies, the redirect
//! back with `code`, the token request. Access tokens are RS256 JWTs for the
//! configured audience with the user's `email`, `email_verified` and
//! `roles`; the signing key can be rotated and the old ones retired.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand::RngCore;
use reqwest::{StatusCode, header};
use serde_json::Value;
use sha2::{Digest, Sha256};
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::process::{Child, ChildStdin};
use url::Url;

/// What the token endpoint answered.
#[derive(Debug, Clone)]
pub struct Tokens {
    pub access_token: String,
    pub id_token: Option<String>,
    pub refresh_token: Option<String>,
    pub expires_in: u64,
}

/// The provider, a node child process that ends with this value (and when
/// its stdin closes).
pub struct Provider {
    issuer: String,
    http: reqwest::Client,
    log: Arc<Mutex<String>>,
    // Held open: the provider exits when it closes.
    _stdin: ChildStdin,
    _child: Child,
}

impl Provider {
    /// Starts the provider with `config` as its OIDC_CONFIG (see
    /// oidc_provider.mjs: port, resource, audience, clients, users,
    /// access_token_ttl) and waits for it to listen.
    pub async fn start(config: Value) -> Provider {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/e2e");
        let node = std::env::var_os("PATH").and_then(|path| {
            std::env::split_paths(&path)
                .flat_map(|d| ["node", "nodejs"].map(|n| d.join(n)))
                .find(|p| p.is_file())
        });
        let package = dir.join("node_modules/oidc-provider/package.json");
        assert!(
            node.is_some() && package.is_file(),
            "this test needs node and the `oidc-provider` package in {}: run `make setup`",
            dir.display()
        );
        let mut child = tokio::process::Command::new(node.unwrap())
            .arg("oidc_provider.mjs")
            .current_dir(&dir)
            .env("OIDC_CONFIG", config.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("start node oidc_provider.mjs");
        let stdin = child.stdin.take().unwrap();
        let log = Arc::new(Mutex::new(String::new()));
        drain(child.stderr.take().unwrap(), log.clone());
        let mut stdout = BufReader::new(child.stdout.take().unwrap()).lines();
        let issuer = tokio::time::timeout(Duration::from_secs(30), async {
            while let Some(line) = stdout.next_line().await.unwrap() {
                if let Ok(Value::Object(line)) = serde_json::from_str(&line)
                    && let Some(Value::String(issuer)) = line.get("issuer")
                {
                    return Some(issuer.clone());
                }
                log.lock().unwrap().push_str(&format!("{line}\n"));
            }
            None
        })
        .await
        .ok()
        .flatten();
        let Some(issuer) = issuer else {
            panic!("oidc_provider.mjs did not start:\n{}", log.lock().unwrap());
        };
        drain(stdout.into_inner(), log.clone());
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(Duration::from_secs(30))
            .build()
            .unwrap();
        Provider {
            issuer,
            http,
            log,
            _stdin: stdin,
            _child: child,
        }
    }

    /// `http://127.0.0.1:PORT`, without a trailing slash.
    pub fn issuer(&self) -> &str {
        &self.issuer
    }

    /// What the provider wrote to stderr so far (warnings, server errors).
    pub fn log(&self) -> String {
        self.log.lock().unwrap().clone()
    }

    /// `/.well-known/openid-configuration`.
    pub async fn discovery(&self) -> Value {
        self.get_json("/.well-known/openid-configuration").await
    }

    /// The public keys the provider publishes at its `jwks_uri`.
    pub async fn jwks(&self) -> Value {
        let uri = self.discovery().await["jwks_uri"]
            .as_str()
            .unwrap()
            .to_owned();
        self.http
            .get(uri)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }

    /// A new signing key, first in the JWKS (the old ones stay); its `kid`.
    pub async fn rotate(&self) -> String {
        let answer = self.post_json("/__rotate").await;
        answer["kid"].as_str().unwrap().to_owned()
    }

    /// Drops every key but the newest from the JWKS.
    pub async fn retire(&self) {
        self.post_json("/__retire").await;
    }

    /// The private JWKS (RSA JWKs with `d`, `kid`, `alg`), newest first.
    pub async fn private_jwks(&self) -> Value {
        self.get_json("/__keys").await
    }

    /// A token signed with the provider's current key whose header and
    /// claims are those of a good access token for alice, changed by these
    /// (a `null` removes one): forgeries only the claims give away.
    pub async fn sign(&self, header: Value, claims: Value) -> String {
        let response = self
            .http
            .post(format!("{}/__sign", self.issuer))
            .json(&serde_json::json!({"header": header, "claims": claims}))
            .send()
            .await
            .unwrap();
        assert!(
            response.status().is_success(),
            "POST /__sign: {}",
            response.status()
        );
        let answer: Value = response.json().await.unwrap();
        answer["token"].as_str().unwrap().to_owned()
    }

    /// Signs `user` in to `client_id` the way a browser would: the
    /// authorization request with PKCE (S256), the login and consent pages,
    /// the redirect to `redirect_uri` (not followed), then the code for
    /// tokens. `prompt=consent` goes with `offline_access`, which the
    /// provider asks for before it issues a refresh token. `resource` is
    /// sent to both endpoints when given; without it the provider takes its
    /// configured one.
    pub async fn sign_in(
        &self,
        client_id: &str,
        redirect_uri: &str,
        user: &str,
        scope: &str,
        resource: Option<&str>,
    ) -> Tokens {
        let discovery = self.discovery().await;
        let verifier = random_token();
        let challenge = base64url(&Sha256::digest(verifier.as_bytes()));
        let state = random_token();
        let nonce = random_token();
        let mut url = Url::parse(discovery["authorization_endpoint"].as_str().unwrap()).unwrap();
        {
            let mut query = url.query_pairs_mut();
            query
                .append_pair("response_type", "code")
                .append_pair("client_id", client_id)
                .append_pair("redirect_uri", redirect_uri)
                .append_pair("scope", scope)
                .append_pair("state", &state)
                .append_pair("nonce", &nonce)
                .append_pair("code_challenge", &challenge)
                .append_pair("code_challenge_method", "S256");
            if scope.split(' ').any(|s| s == "offline_access") {
                query.append_pair("prompt", "consent");
            }
            if let Some(resource) = resource {
                query.append_pair("resource", resource);
            }
        }
        let back = Url::parse(redirect_uri).unwrap();
        let mut cookies = BTreeMap::new();
        let mut form: Option<Vec<(String, String)>> = None;
        let mut steps = Vec::new();
        let code = loop {
            assert!(
                steps.len() < 20,
                "sign-in did not come back to {redirect_uri}: {steps:#?}\n{}",
                self.log()
            );
            let request = match form.take() {
                Some(fields) => self
                    .http
                    .post(url.clone())
                    .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
                    .body(
                        url::form_urlencoded::Serializer::new(String::new())
                            .extend_pairs(&fields)
                            .finish(),
                    ),
                None => self.http.get(url.clone()),
            };
            let mut request = request.header(header::ACCEPT, "text/html");
            if !cookies.is_empty() {
                let jar: Vec<String> = cookies.iter().map(|(k, v)| format!("{k}={v}")).collect();
                request = request.header(header::COOKIE, jar.join("; "));
            }
            let response = request.send().await.unwrap();
            let status = response.status();
            steps.push(format!("{status} {url}"));
            for set in response.headers().get_all(header::SET_COOKIE) {
                keep_cookie(&mut cookies, set.to_str().unwrap());
            }
            if status.is_redirection() {
                let location = response.headers()[header::LOCATION].to_str().unwrap();
                let next = url.join(location).unwrap();
                if (next.origin(), next.path()) == (back.origin(), back.path()) {
                    let query: BTreeMap<String, String> = next.query_pairs().into_owned().collect();
                    assert!(
                        !query.contains_key("error"),
                        "the provider refused the sign-in: {query:?}\n{}",
                        self.log()
                    );
                    assert_eq!(query.get("state"), Some(&state), "state in {next}");
                    assert_eq!(query.get("iss"), Some(&self.issuer), "iss in {next}");
                    break query["code"].clone();
                }
                url = next;
                continue;
            }
            let body = response.text().await.unwrap();
            assert_eq!(
                status,
                StatusCode::OK,
                "sign-in stopped at {url}: {body}\n{}",
                self.log()
            );
            let (action, fields) = html_form(&body, user)
                .unwrap_or_else(|| panic!("no form on the page at {url}:\n{body}"));
            url = url.join(&action).unwrap();
            form = Some(fields);
        };
        let mut fields = vec![
            ("grant_type", "authorization_code"),
            ("code", &code),
            ("redirect_uri", redirect_uri),
            ("client_id", client_id),
            ("code_verifier", &verifier),
        ];
        if let Some(resource) = resource {
            fields.push(("resource", resource));
        }
        self.token(&fields).await
    }

    /// Trades `refresh_token` for new tokens (a public client's refresh
    /// token is rotated: the answer holds the next one).
    pub async fn refresh(&self, client_id: &str, refresh_token: &str) -> Tokens {
        self.token(&[
            ("grant_type", "refresh_token"),
            ("refresh_token", refresh_token),
            ("client_id", client_id),
        ])
        .await
    }

    async fn token(&self, fields: &[(&str, &str)]) -> Tokens {
        let discovery = self.discovery().await;
        let endpoint = discovery["token_endpoint"].as_str().unwrap();
        let body = url::form_urlencoded::Serializer::new(String::new())
            .extend_pairs(fields)
            .finish();
        let response = self
            .http
            .post(endpoint)
            .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .body(body)
            .send()
            .await
            .unwrap();
        let status = response.status();
        let answer: Value = response.json().await.unwrap();
        assert_eq!(
            status,
            StatusCode::OK,
            "token endpoint: {answer}\n{}",
            self.log()
        );
        let text = |name: &str| answer[name].as_str().map(str::to_owned);
        Tokens {
            access_token: text("access_token").expect("an access token"),
            id_token: text("id_token"),
            refresh_token: text("refresh_token"),
            expires_in: answer["expires_in"].as_u64().unwrap_or_default(),
        }
    }

    async fn get_json(&self, path: &str) -> Value {
        let response = self
            .http
            .get(format!("{}{path}", self.issuer))
            .send()
            .await
            .unwrap();
        assert!(
            response.status().is_success(),
            "GET {path}: {}",
            response.status()
        );
        response.json().await.unwrap()
    }

    async fn post_json(&self, path: &str) -> Value {
        let response = self
            .http
            .post(format!("{}{path}", self.issuer))
            .send()
            .await
            .unwrap();
        assert!(
            response.status().is_success(),
            "POST {path}: {}",
            response.status()
        );
        response.json().await.unwrap()
    }
}

/// A JWT's header and payload, not verified.
pub fn decode_jwt(token: &str) -> (Value, Value) {
    let mut parts = token.split('.');
    let mut part = || {
        let bytes = base64url_decode(parts.next().expect("a JWT has three parts"));
        serde_json::from_slice::<Value>(&bytes).expect("a JWT part is JSON")
    };
    let header = part();
    (header, part())
}

/// Copies `from`, line by line, to the end of `log`.
fn drain(from: impl AsyncRead + Unpin + Send + 'static, log: Arc<Mutex<String>>) {
    tokio::spawn(async move {
        let mut lines = BufReader::new(from).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            log.lock().unwrap().push_str(&format!("{line}\n"));
        }
    });
}

/// 32 random bytes, base64url: a PKCE verifier, a state, a nonce.
fn random_token() -> String {
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    base64url(&bytes)
}

/// Base64url without padding, as JWTs and PKCE write it.
pub fn base64url(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

pub fn base64url_decode(text: &str) -> Vec<u8> {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(text.trim_end_matches('='))
        .expect("base64url")
}

/// Keeps a `Set-Cookie` in `jar` (by name: the provider's cookies have
/// names of their own per path), or drops it when it is cleared.
fn keep_cookie(jar: &mut BTreeMap<String, String>, set: &str) {
    let pair = set.split(';').next().unwrap_or_default();
    let Some((name, value)) = pair.split_once('=') else {
        return;
    };
    let cleared = value.is_empty()
        || set
            .to_ascii_lowercase()
            .split(';')
            .any(|a| a.trim() == "max-age=0" || a.trim().starts_with("expires=thu, 01 jan 1970"));
    if cleared {
        jar.remove(name.trim());
    } else {
        jar.insert(name.trim().to_owned(), value.trim().to_owned());
    }
}

/// The first form on the page: its action and the fields a user would send
/// (hidden inputs as they are, `login` = `user`, any password).
fn html_form(html: &str, user: &str) -> Option<(String, Vec<(String, String)>)> {
    let page = scraper::Html::parse_document(html);
    let form_selector = scraper::Selector::parse("form").unwrap();
    let input_selector = scraper::Selector::parse("input[name]").unwrap();
    let form = page.select(&form_selector).next()?;
    let action = form.value().attr("action")?.to_owned();
    let fields = form
        .select(&input_selector)
        .map(|input| {
            let input = input.value();
            let name = input.attr("name").unwrap_or_default().to_owned();
            let value = match input.attr("type") {
                Some("password") => "any password".to_owned(),
                _ if name == "login" => user.to_owned(),
                _ => input.attr("value").unwrap_or_default().to_owned(),
            };
            (name, value)
        })
        .collect();
    Some((action, fields))
}
