//! Bearer-token authentication: HS256 JWTs signed with the deployment's secret.

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use data_plane_store::identity::Permission;
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::http::ApiError;
use crate::state::AppState;

/// The claims a token carries.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Claims {
    /// The user's id.
    pub sub: Uuid,
    pub email: String,
    pub role: Permission,
    pub exp: u64,
    pub iat: u64,
}

/// Signs and checks tokens.
#[derive(Clone)]
pub struct JwtKeys {
    encoding: EncodingKey,
    decoding: DecodingKey,
}

impl std::fmt::Debug for JwtKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("JwtKeys(..)")
    }
}

impl JwtKeys {
    pub fn new(secret: &[u8]) -> Self {
        JwtKeys {
            encoding: EncodingKey::from_secret(secret),
            decoding: DecodingKey::from_secret(secret),
        }
    }

    pub fn issue(
        &self,
        user: Uuid,
        email: &str,
        role: Permission,
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

/// The authenticated caller of a request.
#[derive(Debug, Clone)]
pub struct Caller {
    pub user_id: Uuid,
    pub permission: Permission,
}

impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        let header = parts
            .headers
            .get(axum::http::header::AUTHORIZATION)
            .ok_or_else(|| {
                ApiError::unauthorized("missing Authorization header (expected: Bearer <token>)")
            })?;
        let value = header
            .to_str()
            .map_err(|_| ApiError::unauthorized("the Authorization header is not valid text"))?;
        let token = value
            .strip_prefix("Bearer ")
            .or_else(|| value.strip_prefix("bearer "))
            .ok_or_else(|| {
                ApiError::unauthorized("the Authorization header must be 'Bearer <token>'")
            })?;
        let claims = state.jwt.verify(token.trim()).map_err(|e| {
            use jsonwebtoken::errors::ErrorKind;
            match e.kind() {
                ErrorKind::ExpiredSignature => ApiError::unauthorized("the token has expired"),
                _ => ApiError::unauthorized("the token is not valid"),
            }
        })?;
        Ok(Caller {
            user_id: claims.sub,
            permission: claims.role,
        })
    }
}
