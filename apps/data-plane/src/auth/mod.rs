//! Bearer-token authentication: HS256 JWTs signed with the deployment's
//! secret, tokens of an OpenID Connect provider ([`oidc`]) and the tokens of
//! internal services.

pub mod oidc;

use std::sync::Arc;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use data_plane_store::identity::Permission;
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::error::ApiError;
use crate::state::AppState;

/// The claims a token carries.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Claims {
    /// The user's id.
    pub sub: Uuid,
    pub email: String,
    /// The permission level when the token was issued. Requests use the
    /// user's permission as the database holds it now, not this.
    pub role: Permission,
    pub exp: u64,
    pub iat: u64,
    /// The user's token version when the token was issued; a token older
    /// than the user's current version has been revoked.
    #[serde(default)]
    pub ver: i32,
}

/// Signs and checks tokens. Cloned with the application state, so for
/// every request: the keys themselves are shared.
#[derive(Clone)]
pub struct JwtKeys {
    encoding: Arc<EncodingKey>,
    decoding: Arc<DecodingKey>,
}

impl std::fmt::Debug for JwtKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("JwtKeys(..)")
    }
}

impl JwtKeys {
    pub fn new(secret: &[u8]) -> Self {
        JwtKeys {
            encoding: Arc::new(EncodingKey::from_secret(secret)),
            decoding: Arc::new(DecodingKey::from_secret(secret)),
        }
    }

    /// A token of token version 0, the version every user starts with.
    pub fn issue(
        &self,
        user: Uuid,
        email: &str,
        role: Permission,
        ttl: std::time::Duration,
    ) -> anyhow::Result<String> {
        self.issue_with_version(user, email, role, 0, ttl)
    }

    /// A token carrying the user's current token version.
    pub fn issue_with_version(
        &self,
        user: Uuid,
        email: &str,
        role: Permission,
        version: i32,
        ttl: std::time::Duration,
    ) -> anyhow::Result<String> {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)?
            .as_secs();
        let claims = Claims {
            sub: user,
            email: email.to_string(),
            role,
            iat: now,
            exp: now + ttl.as_secs(),
            ver: version,
        };
        Ok(jsonwebtoken::encode(
            &Header::new(Algorithm::HS256),
            &claims,
            &self.encoding,
        )?)
    }

    pub fn verify(&self, token: &str) -> Result<Claims, jsonwebtoken::errors::Error> {
        let validation = Validation::new(Algorithm::HS256);
        Ok(jsonwebtoken::decode::<Claims>(token, &self.decoding, &validation)?.claims)
    }
}

/// Tokens of internal services, from `DATA_PLANE_SERVICE_TOKENS`
/// (`name=token,name=token`). Only their SHA-256 digests are kept.
#[derive(Clone, Default)]
pub struct ServiceTokens {
    entries: Arc<Vec<(String, [u8; 32])>>,
}

impl std::fmt::Debug for ServiceTokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.entries.iter().map(|(n, _)| n.as_str()).collect();
        f.debug_struct("ServiceTokens")
            .field("names", &names)
            .finish()
    }
}

/// Service tokens shorter than this are refused at start-up.
pub const MIN_SERVICE_TOKEN_LEN: usize = 24;

impl ServiceTokens {
    /// Parses `name=token` pairs separated by commas.
    pub fn parse(spec: &str) -> anyhow::Result<ServiceTokens> {
        let mut entries = Vec::new();
        for pair in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (name, token) = pair.split_once('=').ok_or_else(|| {
                anyhow::anyhow!(
                    "service token entry {:?} must be name=token",
                    pair.split('=').next().unwrap_or("")
                )
            })?;
            let (name, token) = (name.trim(), token.trim());
            if name.is_empty() {
                anyhow::bail!("a service token has an empty name");
            }
            if token.len() < MIN_SERVICE_TOKEN_LEN {
                anyhow::bail!(
                    "the token of service {name:?} is shorter than {MIN_SERVICE_TOKEN_LEN} characters"
                );
            }
            entries.push((name.to_string(), digest(token)));
        }
        Ok(ServiceTokens {
            entries: Arc::new(entries),
        })
    }

    /// The service a token belongs to. Compares digests, so the time taken
    /// says nothing about how much of a token matched.
    pub fn service(&self, token: &str) -> Option<&str> {
        let d = digest(token);
        self.entries
            .iter()
            .find(|(_, known)| *known == d)
            .map(|(name, _)| name.as_str())
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

fn digest(token: &str) -> [u8; 32] {
    use sha2::Digest;
    sha2::Sha256::digest(token.as_bytes()).into()
}

/// The header a service names the user it acts for with.
pub const ON_BEHALF_OF: &str = "x-on-behalf-of";

/// The authenticated caller of a request: a person with a JWT, or an internal
/// service acting for a user it names.
#[derive(Debug, Clone)]
pub struct Caller {
    pub user_id: Uuid,
    pub permission: Permission,
    /// The service that made the call, when it was one.
    pub service: Option<String>,
}

/// A request authenticated by a service token, whoever it acts for.
#[derive(Debug, Clone)]
pub struct Service {
    pub name: String,
}

fn bearer(parts: &Parts) -> Result<&str, ApiError> {
    let header = parts
        .headers
        .get(axum::http::header::AUTHORIZATION)
        .ok_or_else(|| {
            ApiError::unauthorized("missing Authorization header (expected: Bearer <token>)")
        })?;
    let value = header
        .to_str()
        .map_err(|_| ApiError::invalid_request("the Authorization header is not valid text"))?;
    value
        .strip_prefix("Bearer ")
        .or_else(|| value.strip_prefix("bearer "))
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .ok_or_else(|| {
            ApiError::invalid_request("the Authorization header must be 'Bearer <token>'")
        })
}

impl FromRequestParts<AppState> for Service {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        let token = bearer(parts)?;
        match state.services.service(token) {
            Some(name) => Ok(Service {
                name: name.to_string(),
            }),
            None => Err(ApiError::invalid_token(
                "this endpoint needs a service token (DATA_PLANE_SERVICE_TOKENS)",
            )),
        }
    }
}

/// Looks up the permission of the user a service acts for.
pub async fn user_for_service(state: &AppState, user_id: Uuid) -> Result<Permission, ApiError> {
    state
        .identities
        .get(user_id)
        .await?
        .map(|i| i.permission)
        .ok_or_else(|| ApiError::not_found(format!("no user {user_id}")))
}

impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        let token = bearer(parts)?;
        if let Some(service) = state.services.service(token) {
            let header = parts.headers.get(ON_BEHALF_OF).ok_or_else(|| {
                ApiError::bad_request(format!(
                    "a service token must name the user it acts for in the {ON_BEHALF_OF} header"
                ))
            })?;
            let user_id = header
                .to_str()
                .ok()
                .and_then(|v| Uuid::parse_str(v.trim()).ok())
                .ok_or_else(|| {
                    ApiError::bad_request(format!(
                        "the {ON_BEHALF_OF} header must be a user id (UUID)"
                    ))
                })?;
            let permission = user_for_service(state, user_id).await?;
            return Ok(Caller {
                user_id,
                permission,
                service: Some(service.to_string()),
            });
        }
        // A provider's token is signed with one of its public keys; this
        // server's own are HS256. Which way a token goes is decided by its
        // header, and each way accepts only its own algorithms.
        if let Some(oidc) = &state.oidc {
            let ours = jsonwebtoken::decode_header(token)
                .is_ok_and(|h| h.alg == jsonwebtoken::Algorithm::HS256);
            if !ours {
                return provider_caller(state, oidc, token).await;
            }
        }
        let claims = state.jwt.verify(token).map_err(|e| {
            use jsonwebtoken::errors::ErrorKind;
            match e.kind() {
                ErrorKind::ExpiredSignature => ApiError::invalid_token("the token has expired"),
                _ => ApiError::invalid_token("the token is not valid"),
            }
        })?;
        // The permission is the one the database holds now (cached for at
        // most a second per replica), so a demotion or a revocation takes
        // effect on the next request.
        let identity = state
            .identities
            .get(claims.sub)
            .await?
            .ok_or_else(|| ApiError::invalid_token("the token's user no longer exists"))?;
        if claims.ver < identity.token_version {
            return Err(ApiError::invalid_token(
                "the token has been revoked; ask for a new one",
            ));
        }
        Ok(Caller {
            user_id: claims.sub,
            permission: identity.permission,
            service: None,
        })
    }
}

/// The caller an OpenID provider's token names: verified once, then
/// remembered by its digest until it expires. The permission is the one
/// the provider's role claim gives (written to the user's row, so services
/// acting for them see it too).
async fn provider_caller(
    state: &AppState,
    oidc: &oidc::Oidc,
    token: &str,
) -> Result<Caller, ApiError> {
    if let Some(session) = oidc.session(token) {
        // A user deleted here since is found afresh below: their provider
        // still vouches for them, so they come back as at a first sign-in.
        if state.identities.get(session.user_id).await?.is_some() {
            return Ok(Caller {
                user_id: session.user_id,
                permission: session.permission,
                service: None,
            });
        }
        oidc.forget(token);
    }
    let verified = oidc.verify(token).await.map_err(ApiError::invalid_token)?;
    let person = data_plane_store::identity::ExternalPerson {
        issuer: &oidc.settings().issuer,
        subject: &verified.subject,
        email: verified.email.as_deref(),
        email_verified: verified.email_verified,
        permission: verified.permission,
    };
    let mut tx = state.db.begin(data_plane_store::Scope::System).await?;
    // What the token says that the database will not take (a claim with a
    // NUL, an address another person has) is the token's fault: 401.
    let user_id = match data_plane_store::identity::external_person(&mut tx, &person).await {
        Ok(id) => id,
        Err(e) => {
            return Err(match e.fault() {
                data_plane_store::Fault::Invalid(m)
                | data_plane_store::Fault::Denied(m)
                | data_plane_store::Fault::Conflict(m) => ApiError::invalid_token(m),
                _ => e.into(),
            });
        }
    };
    tx.commit().await?;
    let session = oidc::Session {
        user_id,
        permission: verified.permission,
    };
    oidc.remember(token, session, verified.expires);
    Ok(Caller {
        user_id,
        permission: verified.permission,
        service: None,
    })
}
