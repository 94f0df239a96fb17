//! Tokens from an OpenID Connect provider (docs/auth.md): the issuer's
//! discovery document and signing keys (JWKS), read over HTTP and kept;
//! tokens checked against them (signature, `iss`, `aud`, `exp`, `nbf`); the
//! provider's claims mapped to a person and a permission; and verified
//! tokens remembered by their digest until they expire, so a client's
//! second request costs a hash and a map look-up.
//!
//! The keys are read again when a token names a key the server does not
//! have (at most once per [`OidcSettings::refetch_interval`], one read at a
//! time however many requests wait on it) and when the key set is older
//! than an hour. A read that fails keeps the keys already held: an issuer
//! that is down never makes a token pass, and tokens it signed before stay
//! good until they expire.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use data_plane_store::identity::Permission;
use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, Jwk, KeyAlgorithm};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde_json::{Map, Value};
use uuid::Uuid;

/// Seconds of clock difference between the provider and this server that a
/// token's `exp` and `nbf` are allowed.
pub const CLOCK_SKEW_SECS: u64 = 60;

/// The refusal of a signature no key held verifies.
const BAD_SIGNATURE: &str = "the token's signature does not verify";

/// The key set is read again after this long, on the next token.
const KEYS_MAX_AGE: Duration = Duration::from_secs(3600);

/// Largest discovery document or key set read; a larger answer is refused.
const MAX_DOCUMENT_BYTES: usize = 256 * 1024;

/// Verified tokens remembered at once; past it, the expired are dropped,
/// and if that frees nothing, all of them.
const MAX_REMEMBERED: usize = 20_000;

/// The algorithms a provider's token may be signed with. HMAC is never one
/// of them: a provider's keys are public, and a token "signed" with a public
/// key as an HMAC secret is the classic key-confusion forgery.
const ACCEPTED: [Algorithm; 9] = [
    RSA[0],
    RSA[1],
    RSA[2],
    RSA[3],
    RSA[4],
    RSA[5],
    Algorithm::ES256,
    Algorithm::ES384,
    Algorithm::EdDSA,
];

/// What an RSA key may check.
const RSA: [Algorithm; 6] = [
    Algorithm::RS256,
    Algorithm::RS384,
    Algorithm::RS512,
    Algorithm::PS256,
    Algorithm::PS384,
    Algorithm::PS512,
];

/// Which token the chat page sends: the access token (most providers give
/// one meant for this server's audience), or the ID token (providers whose
/// access tokens are not JWTs for other servers, such as Google).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PageToken {
    Access,
    Id,
}

impl PageToken {
    pub fn as_str(self) -> &'static str {
        match self {
            PageToken::Access => "access_token",
            PageToken::Id => "id_token",
        }
    }
}

/// What the deployment set (`DATA_PLANE_OIDC_*`, docs/auth.md).
#[derive(Debug, Clone)]
pub struct OidcSettings {
    /// Exactly as tokens carry it in `iss`.
    pub issuer: String,
    /// What a token's `aud` must contain.
    pub audience: String,
    pub email_claim: String,
    /// Take the email claim as vouched for when the token says nothing of
    /// it (providers whose administrators set every address, such as a
    /// single-tenant Entra ID). `email_verified: false` is never overridden.
    pub trust_email: bool,
    /// A claim name, or a dotted path into nested claims
    /// (`realm_access.roles`) when no claim has the whole name.
    pub role_claim: String,
    /// A role value and the permission it gives.
    pub roles: Vec<(String, Permission)>,
    /// The permission of a person none of whose roles is in `roles`.
    pub default_permission: Permission,
    /// The highest permission this issuer may grant; a token whose roles
    /// map higher is refused.
    pub max_permission: Permission,
    /// The chat page's public client, when it signs people in.
    pub client_id: Option<String>,
    pub scopes: Vec<String>,
    pub page_token: PageToken,
    /// The least time between two reads of the key set for a key not held.
    pub refetch_interval: Duration,
    /// How long one read of the discovery document or key set may take.
    pub fetch_timeout: Duration,
}

impl OidcSettings {
    /// Settings with the defaults docs/auth.md lists; refuses an issuer
    /// that is not `https://` (or `http://` on loopback).
    pub fn new(issuer: &str, audience: &str) -> anyhow::Result<OidcSettings> {
        let issuer = issuer.trim();
        check_url(issuer).map_err(|e| anyhow::anyhow!("DATA_PLANE_OIDC_ISSUER: {e}"))?;
        let audience = audience.trim();
        if audience.is_empty() {
            anyhow::bail!(
                "DATA_PLANE_OIDC_AUDIENCE must name the audience this server accepts (the API's identifier at the provider)"
            );
        }
        Ok(OidcSettings {
            issuer: issuer.to_string(),
            audience: audience.to_string(),
            email_claim: "email".into(),
            trust_email: false,
            role_claim: "roles".into(),
            roles: parse_roles("guest=guest,user=user,admin=admin,owner=owner")?,
            default_permission: Permission::User,
            max_permission: Permission::User,
            client_id: None,
            scopes: vec![
                "openid".into(),
                "profile".into(),
                "email".into(),
                "offline_access".into(),
            ],
            page_token: PageToken::Access,
            refetch_interval: Duration::from_secs(5),
            fetch_timeout: Duration::from_secs(5),
        })
    }
}

/// `value=permission` pairs separated by commas.
pub fn parse_roles(spec: &str) -> anyhow::Result<Vec<(String, Permission)>> {
    let mut roles = Vec::new();
    for pair in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (value, permission) = pair
            .rsplit_once('=')
            .ok_or_else(|| anyhow::anyhow!("role entry {pair:?} must be value=permission"))?;
        let value = value.trim();
        if value.is_empty() {
            anyhow::bail!("role entry {pair:?} has an empty value");
        }
        let permission: Permission = permission.trim().parse()?;
        roles.push((value.to_string(), permission));
    }
    Ok(roles)
}

/// An issuer or key-set URL: `https://`, or `http://` on loopback only
/// (a provider on this machine, as in tests).
fn check_url(url: &str) -> Result<(), String> {
    let parsed = url::Url::parse(url).map_err(|e| format!("{url:?} is not a URL: {e}"))?;
    match parsed.scheme() {
        "https" => Ok(()),
        "http" => {
            let loopback = match parsed.host() {
                Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
                Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
                Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
                None => false,
            };
            if loopback {
                Ok(())
            } else {
                Err(format!(
                    "{url} must be https:// (http:// is accepted only on loopback)"
                ))
            }
        }
        other => Err(format!("{url} has scheme {other}; it must be https://")),
    }
}

/// Who a verified token says the caller is.
#[derive(Debug, Clone)]
pub struct Verified {
    pub subject: String,
    pub email: Option<String>,
    pub email_verified: bool,
    pub permission: Permission,
    /// Seconds since the epoch (`exp`).
    pub expires: u64,
}

/// A token verified before and the user it was found to be.
#[derive(Debug, Clone, Copy)]
pub struct Session {
    pub user_id: Uuid,
    pub permission: Permission,
}

/// One key of the issuer's set, with the algorithms it may check.
struct Key {
    kid: Option<String>,
    algorithms: Vec<Algorithm>,
    key: DecodingKey,
}

struct KeySet {
    keys: Vec<Key>,
    read_at: Instant,
}

/// Where the provider's endpoints are, from its discovery document: what
/// the chat page signs people in with.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Endpoints {
    #[serde(skip)]
    jwks_uri: String,
    /// Absent from a provider that only issues tokens for other clients;
    /// the chat page cannot sign in through it then.
    pub authorization_endpoint: Option<String>,
    pub token_endpoint: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub end_session_endpoint: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub revocation_endpoint: Option<String>,
}

#[derive(Default)]
struct Reads {
    /// When the key set was last asked for, whether or not it came.
    last_attempt: Option<Instant>,
    /// When the discovery document was last asked for and failed.
    discovery_failed: Option<(Instant, String)>,
    /// Why the last read failed, for the refusal while no keys are held.
    last_error: Option<String>,
}

/// The provider's keys and the tokens verified with them; cloned with the
/// application state.
#[derive(Clone)]
pub struct Oidc(Arc<Inner>);

struct Inner {
    settings: OidcSettings,
    http: reqwest::Client,
    keys: RwLock<Option<Arc<KeySet>>>,
    /// The discovery document's endpoints once read, outside `reads`, so
    /// the chat page's requests never wait on a read of the keys.
    endpoints: RwLock<Option<Endpoints>>,
    /// A background read of the keys is under way.
    refreshing: std::sync::atomic::AtomicBool,
    reads: tokio::sync::Mutex<Reads>,
    remembered: Mutex<HashMap<[u8; 32], (Session, u64)>>,
}

impl std::fmt::Debug for Oidc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Oidc")
            .field("issuer", &self.0.settings.issuer)
            .field("audience", &self.0.settings.audience)
            .finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn digest(token: &str) -> [u8; 32] {
    use sha2::Digest;
    sha2::Sha256::digest(token.as_bytes()).into()
}

impl Oidc {
    pub fn new(settings: OidcSettings) -> anyhow::Result<Oidc> {
        let http = reqwest::Client::builder()
            // The discovery document and key set are where the issuer says;
            // a redirect could lead anywhere.
            .redirect(reqwest::redirect::Policy::none())
            .timeout(settings.fetch_timeout)
            .connect_timeout(settings.fetch_timeout)
            .user_agent(concat!("data-plane/", env!("CARGO_PKG_VERSION")))
            .build()?;
        Ok(Oidc(Arc::new(Inner {
            settings,
            http,
            keys: RwLock::new(None),
            endpoints: RwLock::new(None),
            refreshing: std::sync::atomic::AtomicBool::new(false),
            reads: tokio::sync::Mutex::new(Reads::default()),
            remembered: Mutex::new(HashMap::new()),
        })))
    }

    pub fn settings(&self) -> &OidcSettings {
        &self.0.settings
    }

    /// Reads the keys now (at start-up), so the first person's request
    /// does not wait on it; a failure is logged and tried again later.
    pub async fn warm(&self) {
        match self.refresh(None).await {
            Ok(()) => {
                tracing::info!(issuer = %self.0.settings.issuer, "OpenID provider's keys read")
            }
            Err(e) => {
                tracing::warn!(issuer = %self.0.settings.issuer, error = %e, "OpenID provider's keys could not be read; tokens it signs are refused until they can")
            }
        }
    }

    /// The session of a token verified before and not yet expired.
    pub fn session(&self, token: &str) -> Option<Session> {
        let remembered = lock(&self.0.remembered);
        let (session, expires) = remembered.get(&digest(token))?;
        (*expires > now_secs()).then_some(*session)
    }

    /// Remembers a verified token's user until it expires.
    pub fn remember(&self, token: &str, session: Session, expires: u64) {
        let mut remembered = lock(&self.0.remembered);
        if remembered.len() >= MAX_REMEMBERED {
            let now = now_secs();
            remembered.retain(|_, (_, exp)| *exp > now);
            if remembered.len() >= MAX_REMEMBERED {
                remembered.clear();
            }
        }
        remembered.insert(digest(token), (session, expires));
    }

    /// Forgets a token (its user is gone).
    pub fn forget(&self, token: &str) {
        lock(&self.0.remembered).remove(&digest(token));
    }

    /// Checks a token the issuer signed and maps its claims; the error is
    /// the reason, fit for a 401's `error_description`.
    pub async fn verify(&self, token: &str) -> Result<Verified, String> {
        let header = jsonwebtoken::decode_header(token).map_err(|_| {
            "the token is not a JWT this server accepts (its header is malformed or names an algorithm such as none)".to_string()
        })?;
        if !ACCEPTED.contains(&header.alg) {
            return Err(format!(
                "the token is signed with {:?}, which the OpenID provider's tokens may not be",
                header.alg
            ));
        }
        let kid = header.kid.as_deref();
        if self.stale()
            && !self
                .0
                .refreshing
                .swap(true, std::sync::atomic::Ordering::SeqCst)
        {
            // Read again beside the request: the token is checked with the
            // keys held, and a provider that does not answer delays nobody.
            let me = self.clone();
            tokio::spawn(async move {
                let _ = me.refresh(None).await;
                me.0.refreshing
                    .store(false, std::sync::atomic::Ordering::SeqCst);
            });
        }
        let claims = match self.check(token, header.alg, kid) {
            Some(Ok(claims)) => claims,
            // A token without `kid` whose signature no key held checks may
            // be signed by a key the provider rotated in.
            Some(Err(e)) if kid.is_none() && e == BAD_SIGNATURE => {
                let _ = self.refresh(Some(None)).await;
                self.check(token, header.alg, kid).unwrap_or(Err(e))?
            }
            Some(Err(e)) => return Err(e),
            None => {
                // A key this server does not hold: perhaps the provider
                // rotated its keys. Read them again (rate-limited).
                // The cause (addresses included) goes to the log only.
                self.refresh(Some(kid)).await.map_err(|_| {
                    "the OpenID provider's signing keys could not be read; try again shortly"
                        .to_string()
                })?;
                self.check(token, header.alg, kid).unwrap_or_else(|| {
                    Err(match kid {
                        Some(kid) => format!(
                            "the token's signing key {:?} is not one of the issuer's keys",
                            kid.chars().take(64).collect::<String>()
                        ),
                        None => {
                            "none of the issuer's keys can check the token's signature".to_string()
                        }
                    })
                })?
            }
        };
        self.map_claims(&claims)
    }

    /// Whether the key set held is older than [`KEYS_MAX_AGE`].
    fn stale(&self) -> bool {
        self.0
            .keys
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .as_ref()
            .is_some_and(|set| set.read_at.elapsed() >= KEYS_MAX_AGE)
    }

    /// Verifies with the keys held; `None` when none of them fits the
    /// token's `kid` and algorithm (the keys should be read again).
    fn check(
        &self,
        token: &str,
        alg: Algorithm,
        kid: Option<&str>,
    ) -> Option<Result<Map<String, Value>, String>> {
        let set = self
            .0
            .keys
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()?;
        let settings = &self.0.settings;
        let mut validation = Validation::new(alg);
        validation.set_issuer(&[&settings.issuer]);
        validation.set_audience(&[&settings.audience]);
        validation.leeway = CLOCK_SKEW_SECS;
        validation.validate_nbf = true;
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        let mut candidates = set
            .keys
            .iter()
            .filter(|k| k.algorithms.contains(&alg))
            .filter(|k| kid.is_none() || k.kid.as_deref() == kid)
            .peekable();
        candidates.peek()?;
        let mut last = None;
        for key in candidates {
            match jsonwebtoken::decode::<Map<String, Value>>(token, &key.key, &validation) {
                Ok(data) => return Some(Ok(data.claims)),
                Err(e) => {
                    let signature =
                        matches!(e.kind(), jsonwebtoken::errors::ErrorKind::InvalidSignature);
                    last = Some(refusal(&e, settings));
                    // Another key of the same id cannot make a bad claim good.
                    if !signature {
                        break;
                    }
                }
            }
        }
        last.map(Err)
    }

    fn map_claims(&self, claims: &Map<String, Value>) -> Result<Verified, String> {
        let settings = &self.0.settings;
        let subject = claims
            .get("sub")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty() && s.len() <= 255)
            .ok_or("the token's sub claim is not a string of 1 to 255 characters")?
            .to_string();
        let email = claims
            .get(&settings.email_claim)
            .and_then(Value::as_str)
            .map(str::to_string);
        // `email_verified` vouches for `email` only, never for another
        // claim the deployment reads the address from. Some providers send
        // the flag as the string "true".
        let flag = match claims.get("email_verified") {
            Some(Value::Bool(b)) => Some(*b),
            Some(Value::String(s)) => Some(s.eq_ignore_ascii_case("true")),
            _ => None,
        };
        let email_verified = match flag {
            Some(said) => said && settings.email_claim == "email",
            None => settings.trust_email,
        };
        let values = role_values(claims, &settings.role_claim);
        let mut permission = None::<Permission>;
        for value in &values {
            for (role, granted) in &settings.roles {
                if role == value {
                    permission = Some(permission.map_or(*granted, |p| p.max(*granted)));
                }
            }
        }
        let permission = permission.unwrap_or(settings.default_permission);
        if permission > settings.max_permission {
            return Err(format!(
                "the token's {} claim grants {permission}, which this issuer may not grant (DATA_PLANE_OIDC_MAX_PERMISSION is {})",
                settings.role_claim, settings.max_permission
            ));
        }
        let expires = claims.get("exp").and_then(Value::as_u64).unwrap_or(0);
        Ok(Verified {
            subject,
            email,
            email_verified,
            permission,
            expires,
        })
    }

    /// Reads the key set again unless it was asked for less than
    /// `refetch_interval` ago; `wanted` is the key a token names, for
    /// skipping the read when another request's read already brought it
    /// (`Some(None)`: a token without `kid`, which no key held verified).
    async fn refresh(&self, wanted: Option<Option<&str>>) -> Result<(), String> {
        let mut reads = self.0.reads.lock().await;
        let held = self
            .0
            .keys
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        if let (Some(set), Some(Some(kid))) = (&held, wanted)
            && set.keys.iter().any(|k| k.kid.as_deref() == Some(kid))
            && set.read_at.elapsed() < KEYS_MAX_AGE
        {
            // Read while this request waited its turn.
            return Ok(());
        }
        if let Some(at) = reads.last_attempt
            && at.elapsed() < self.0.settings.refetch_interval
        {
            return match (&held, &reads.last_error) {
                (None, Some(e)) => Err(e.clone()),
                _ => Ok(()),
            };
        }
        reads.last_attempt = Some(Instant::now());
        match self.read_keys(&mut reads).await {
            Ok(keys) => {
                tracing::debug!(keys = keys.len(), "OpenID provider's key set read");
                *self
                    .0
                    .keys
                    .write()
                    .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(Arc::new(KeySet {
                    keys,
                    read_at: Instant::now(),
                }));
                reads.last_error = None;
                Ok(())
            }
            Err(e) => {
                tracing::warn!(issuer = %self.0.settings.issuer, error = %e, "reading the OpenID provider's keys failed; keeping the keys held");
                reads.last_error = Some(e.clone());
                if held.is_some() { Ok(()) } else { Err(e) }
            }
        }
    }

    /// The provider's endpoints, its discovery document read the first
    /// time they are asked for.
    /// Asked by anyone (the chat page, unauthenticated), so a document that
    /// failed is not asked for again within `refetch_interval`.
    pub async fn endpoints(&self) -> Result<Endpoints, String> {
        if let Some(endpoints) = self.held_endpoints() {
            return Ok(endpoints);
        }
        let mut reads = self.0.reads.lock().await;
        self.discover(&mut reads).await
    }

    fn held_endpoints(&self) -> Option<Endpoints> {
        self.0
            .endpoints
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    async fn discover(&self, reads: &mut Reads) -> Result<Endpoints, String> {
        if let Some(endpoints) = self.held_endpoints() {
            return Ok(endpoints);
        }
        if let Some((at, e)) = &reads.discovery_failed
            && at.elapsed() < self.0.settings.refetch_interval
        {
            return Err(e.clone());
        }
        let found = self.read_discovery().await;
        match &found {
            Ok(endpoints) => {
                *self
                    .0
                    .endpoints
                    .write()
                    .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(endpoints.clone());
                reads.discovery_failed = None;
            }
            Err(e) => reads.discovery_failed = Some((Instant::now(), e.clone())),
        }
        found
    }

    async fn read_discovery(&self) -> Result<Endpoints, String> {
        let settings = &self.0.settings;
        let https = settings.issuer.starts_with("https://");
        let url = format!(
            "{}/.well-known/openid-configuration",
            settings.issuer.trim_end_matches('/')
        );
        let doc = self.get_json(&url).await?;
        let issuer = doc.get("issuer").and_then(Value::as_str);
        if issuer != Some(settings.issuer.as_str()) {
            return Err(format!(
                "the discovery document names issuer {issuer:?}, not {:?}",
                settings.issuer
            ));
        }
        let endpoint = |name: &str| -> Result<Option<String>, String> {
            match doc.get(name).and_then(Value::as_str) {
                None => Ok(None),
                Some(uri) => {
                    check_url(uri).map_err(|e| format!("the discovery document's {name}: {e}"))?;
                    // An https issuer's endpoints are https too.
                    if https && !uri.starts_with("https://") {
                        return Err(format!(
                            "the discovery document's {name} {uri} is not https://"
                        ));
                    }
                    Ok(Some(uri.to_string()))
                }
            }
        };
        let endpoints = Endpoints {
            jwks_uri: endpoint("jwks_uri")?.ok_or("the discovery document has no jwks_uri")?,
            authorization_endpoint: endpoint("authorization_endpoint")?,
            token_endpoint: endpoint("token_endpoint")?,
            end_session_endpoint: endpoint("end_session_endpoint")?,
            revocation_endpoint: endpoint("revocation_endpoint")?,
        };
        Ok(endpoints)
    }

    async fn read_keys(&self, reads: &mut Reads) -> Result<Vec<Key>, String> {
        let jwks_uri = self.discover(reads).await?.jwks_uri;
        let set = self.get_json(&jwks_uri).await?;
        let entries = set
            .get("keys")
            .and_then(Value::as_array)
            .ok_or("the key set has no keys array")?;
        let keys: Vec<Key> = entries.iter().filter_map(key_of).collect();
        if keys.is_empty() {
            return Err("the key set holds no signing key this server can use".into());
        }
        Ok(keys)
    }

    /// A JSON document of at most [`MAX_DOCUMENT_BYTES`], read within the
    /// fetch timeout.
    async fn get_json(&self, url: &str) -> Result<Value, String> {
        let mut response = self
            .0
            .http
            .get(url)
            .header(reqwest::header::ACCEPT, "application/json")
            .send()
            .await
            .map_err(|e| format!("GET {url}: {}", describe(&e)))?;
        if !response.status().is_success() {
            return Err(format!("GET {url} answered {}", response.status()));
        }
        if response
            .content_length()
            .is_some_and(|n| n > MAX_DOCUMENT_BYTES as u64)
        {
            return Err(format!(
                "GET {url}: the answer is over {MAX_DOCUMENT_BYTES} bytes"
            ));
        }
        let mut body = Vec::new();
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|e| format!("GET {url}: {}", describe(&e)))?
        {
            body.extend_from_slice(&chunk);
            if body.len() > MAX_DOCUMENT_BYTES {
                return Err(format!(
                    "GET {url}: the answer is over {MAX_DOCUMENT_BYTES} bytes"
                ));
            }
        }
        serde_json::from_slice(&body)
            .map_err(|e| format!("GET {url}: the answer is not JSON ({e})"))
    }
}

fn describe(e: &reqwest::Error) -> String {
    if e.is_timeout() {
        "timed out".into()
    } else if e.is_connect() {
        "could not connect".into()
    } else {
        e.to_string()
    }
}

/// What a failed check means to the caller.
fn refusal(e: &jsonwebtoken::errors::Error, settings: &OidcSettings) -> String {
    use jsonwebtoken::errors::ErrorKind;
    match e.kind() {
        ErrorKind::ExpiredSignature => "the token has expired".into(),
        ErrorKind::ImmatureSignature => "the token is not valid yet (nbf)".into(),
        ErrorKind::InvalidIssuer => format!(
            "the token was issued by another issuer than {}",
            settings.issuer
        ),
        ErrorKind::InvalidAudience => format!(
            "the token is not meant for this server (its audience is not {})",
            settings.audience
        ),
        ErrorKind::InvalidSignature => BAD_SIGNATURE.into(),
        ErrorKind::MissingRequiredClaim(claim) => format!("the token has no {claim} claim"),
        ErrorKind::InvalidAlgorithm => "the token's algorithm does not match its key".into(),
        _ => "the token is not valid".into(),
    }
}

/// The role values a token carries: a string or a list of strings, under a
/// claim of the whole name or, failing that, at the dotted path.
fn role_values(claims: &Map<String, Value>, claim: &str) -> Vec<String> {
    let found = claims.get(claim).or_else(|| {
        let mut parts = claim.split('.');
        let mut at = claims.get(parts.next()?)?;
        for part in parts {
            at = at.get(part)?;
        }
        Some(at)
    });
    match found {
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Array(items)) => items
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect(),
        _ => Vec::new(),
    }
}

/// A signing key of the set, or `None` for one this server cannot or must
/// not use (an encryption key, a symmetric key, a curve not supported).
fn key_of(entry: &Value) -> Option<Key> {
    if entry
        .get("use")
        .and_then(Value::as_str)
        .is_some_and(|u| u != "sig")
    {
        return None;
    }
    let jwk: Jwk = serde_json::from_value(entry.clone()).ok()?;
    let family: Vec<Algorithm> = match &jwk.algorithm {
        AlgorithmParameters::RSA(_) => RSA.to_vec(),
        AlgorithmParameters::EllipticCurve(ec) => match ec.curve {
            EllipticCurve::P256 => vec![Algorithm::ES256],
            EllipticCurve::P384 => vec![Algorithm::ES384],
            _ => return None,
        },
        AlgorithmParameters::OctetKeyPair(okp) => match okp.curve {
            EllipticCurve::Ed25519 => vec![Algorithm::EdDSA],
            _ => return None,
        },
        AlgorithmParameters::OctetKey(_) => return None,
    };
    // A key that names its algorithm checks only that one.
    let algorithms = match jwk.common.key_algorithm {
        Some(named) => {
            let named = algorithm_of(named)?;
            if !family.contains(&named) {
                return None;
            }
            vec![named]
        }
        None => family,
    };
    let key = DecodingKey::from_jwk(&jwk).ok()?;
    Some(Key {
        kid: jwk.common.key_id.clone(),
        algorithms,
        key,
    })
}

fn algorithm_of(named: KeyAlgorithm) -> Option<Algorithm> {
    Some(match named {
        KeyAlgorithm::RS256 => Algorithm::RS256,
        KeyAlgorithm::RS384 => Algorithm::RS384,
        KeyAlgorithm::RS512 => Algorithm::RS512,
        KeyAlgorithm::PS256 => Algorithm::PS256,
        KeyAlgorithm::PS384 => Algorithm::PS384,
        KeyAlgorithm::PS512 => Algorithm::PS512,
        KeyAlgorithm::ES256 => Algorithm::ES256,
        KeyAlgorithm::ES384 => Algorithm::ES384,
        KeyAlgorithm::EdDSA => Algorithm::EdDSA,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn issuers_must_be_https_except_on_loopback() {
        assert!(OidcSettings::new("https://id.example.com/realms/x", "api").is_ok());
        assert!(OidcSettings::new("http://127.0.0.1:8080", "api").is_ok());
        assert!(OidcSettings::new("http://localhost:8080", "api").is_ok());
        assert!(OidcSettings::new("http://[::1]:8080", "api").is_ok());
        let plain = OidcSettings::new("http://id.example.com", "api").unwrap_err();
        assert!(plain.to_string().contains("https://"), "{plain}");
        assert!(OidcSettings::new("ftp://id.example.com", "api").is_err());
        assert!(OidcSettings::new("https://id.example.com", " ").is_err());
    }

    #[test]
    fn role_tables_name_permissions() {
        let roles = parse_roles("dp-admin=admin, staff = user,").unwrap();
        assert_eq!(
            roles,
            vec![
                ("dp-admin".to_string(), Permission::Admin),
                ("staff".to_string(), Permission::User)
            ]
        );
        assert!(parse_roles("dp-admin").is_err());
        assert!(parse_roles("x=root").is_err());
        assert!(parse_roles("=user").is_err());
    }

    #[test]
    fn roles_come_from_a_claim_or_a_path_into_one() {
        let claims = json!({
            "roles": ["a", "b", 3],
            "realm_access": {"roles": ["admin"]},
            "https://example.com/roles": "editor",
            "group": "one"
        });
        let claims = claims.as_object().unwrap();
        assert_eq!(role_values(claims, "roles"), ["a", "b"]);
        assert_eq!(role_values(claims, "realm_access.roles"), ["admin"]);
        assert_eq!(role_values(claims, "https://example.com/roles"), ["editor"]);
        assert_eq!(role_values(claims, "group"), ["one"]);
        assert!(role_values(claims, "missing.path").is_empty());
    }

    #[test]
    fn the_highest_mapped_role_counts_and_may_not_pass_the_ceiling() {
        let mut settings = OidcSettings::new("https://id.example.com", "api").unwrap();
        settings.roles = parse_roles("reader=guest,staff=user,boss=admin").unwrap();
        let oidc = Oidc::new(settings.clone()).unwrap();
        let claims = |roles: Value| {
            json!({"sub": "s1", "exp": 4_000_000_000u64, "email": "a@example.com", "email_verified": "true", "roles": roles})
                .as_object()
                .unwrap()
                .clone()
        };
        let v = oidc
            .map_claims(&claims(json!(["reader", "staff"])))
            .unwrap();
        assert_eq!(v.permission, Permission::User);
        assert!(v.email_verified);
        let none = oidc.map_claims(&claims(json!(["other"]))).unwrap();
        assert_eq!(none.permission, Permission::User, "the default");
        let refused = oidc.map_claims(&claims(json!(["boss"]))).unwrap_err();
        assert!(refused.contains("may not grant"), "{refused}");
        // Nor does the literal name of a permission grant it past the ceiling.
        let literal =
            Oidc::new(OidcSettings::new("https://id.example.com", "api").unwrap()).unwrap();
        assert!(literal.map_claims(&claims(json!("admin"))).is_err());
        settings.max_permission = Permission::Admin;
        let allowed = Oidc::new(settings).unwrap();
        assert_eq!(
            allowed
                .map_claims(&claims(json!(["boss"])))
                .unwrap()
                .permission,
            Permission::Admin
        );
    }

    #[test]
    fn symmetric_and_encryption_keys_are_not_signing_keys() {
        assert!(key_of(&json!({"kty": "oct", "k": "c2VjcmV0", "kid": "h"})).is_none());
        let rsa = json!({"kty": "RSA", "kid": "r", "n": "sXch", "e": "AQAB"});
        assert!(key_of(&rsa).is_some());
        let mut enc = rsa.clone();
        enc["use"] = json!("enc");
        assert!(key_of(&enc).is_none());
        let mut named = rsa;
        named["alg"] = json!("RS256");
        assert_eq!(key_of(&named).unwrap().algorithms, vec![Algorithm::RS256]);
        named["alg"] = json!("ES256");
        assert!(
            key_of(&named).is_none(),
            "an RSA key claiming an EC algorithm"
        );
    }
}
