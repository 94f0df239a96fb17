//! The one JSON error body of the API, `{"error": {"code", "message"}}`, and
//! the one table of its codes: each [`ErrorCode`] names its HTTP status, and
//! the OpenAPI document's list of codes is generated from the table.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use data_plane_ingest::IngestError;
use data_plane_store::{Fault, StoreError};
use serde_json::json;

/// Seconds a client is asked to wait after a transient failure.
const TRANSIENT_RETRY_AFTER: u64 = 1;

/// Every error code the API answers with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorCode {
    BadRequest,
    Unauthorized,
    Forbidden,
    NotFound,
    MethodNotAllowed,
    Conflict,
    PayloadTooLarge,
    UnsupportedMediaType,
    RateLimited,
    NoModel,
    Unavailable,
    Internal,
}

impl ErrorCode {
    /// The whole table, in the order the OpenAPI document lists it.
    pub const ALL: [ErrorCode; 12] = [
        ErrorCode::BadRequest,
        ErrorCode::Unauthorized,
        ErrorCode::Forbidden,
        ErrorCode::NotFound,
        ErrorCode::MethodNotAllowed,
        ErrorCode::Conflict,
        ErrorCode::PayloadTooLarge,
        ErrorCode::UnsupportedMediaType,
        ErrorCode::RateLimited,
        ErrorCode::NoModel,
        ErrorCode::Unavailable,
        ErrorCode::Internal,
    ];

    /// The code as the body's `error.code` carries it.
    pub fn name(self) -> &'static str {
        match self {
            ErrorCode::BadRequest => "bad_request",
            ErrorCode::Unauthorized => "unauthorized",
            ErrorCode::Forbidden => "forbidden",
            ErrorCode::NotFound => "not_found",
            ErrorCode::MethodNotAllowed => "method_not_allowed",
            ErrorCode::Conflict => "conflict",
            ErrorCode::PayloadTooLarge => "payload_too_large",
            ErrorCode::UnsupportedMediaType => "unsupported_media_type",
            ErrorCode::RateLimited => "rate_limited",
            ErrorCode::NoModel => "no_model",
            ErrorCode::Unavailable => "unavailable",
            ErrorCode::Internal => "internal",
        }
    }

    pub fn status(self) -> StatusCode {
        match self {
            ErrorCode::BadRequest => StatusCode::BAD_REQUEST,
            ErrorCode::Unauthorized => StatusCode::UNAUTHORIZED,
            ErrorCode::Forbidden => StatusCode::FORBIDDEN,
            ErrorCode::NotFound => StatusCode::NOT_FOUND,
            ErrorCode::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            ErrorCode::Conflict => StatusCode::CONFLICT,
            ErrorCode::PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            ErrorCode::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ErrorCode::RateLimited => StatusCode::TOO_MANY_REQUESTS,
            ErrorCode::NoModel | ErrorCode::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
            ErrorCode::Internal => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// When a client meets the code, in one line (the OpenAPI document shows it).
    pub fn meaning(self) -> &'static str {
        match self {
            ErrorCode::BadRequest => "the request's values or body are malformed or out of range",
            ErrorCode::Unauthorized => {
                "no bearer token, or one that is invalid, expired or revoked"
            }
            ErrorCode::Forbidden => "the caller's permission or space role does not allow it",
            ErrorCode::NotFound => {
                "no such endpoint, or the thing named does not exist or is out of the caller's reach"
            }
            ErrorCode::MethodNotAllowed => "the endpoint exists but not with this method",
            ErrorCode::Conflict => "it breaks a rule of the data: a taken name, a last owner",
            ErrorCode::PayloadTooLarge => "the body is larger than the route accepts",
            ErrorCode::UnsupportedMediaType => {
                "the body's content type is not the one the route reads"
            }
            ErrorCode::RateLimited => {
                "too many requests or runs; Retry-After says when to try again"
            }
            ErrorCode::NoModel => "the server has no language model configured",
            ErrorCode::Unavailable => {
                "a passing failure (database busy or restarting); Retry-After says when to try again"
            }
            ErrorCode::Internal => "a bug or a broken deployment; the log has the cause",
        }
    }
}

#[derive(Debug)]
pub struct ApiError {
    code: ErrorCode,
    message: String,
    retry_after: Option<u64>,
    /// The bearer-token error a 401 names in `WWW-Authenticate` (RFC 6750:
    /// `invalid_token`, `invalid_request`); none when no token was sent.
    challenge: Option<&'static str>,
}

impl ApiError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        ApiError {
            code,
            message: message.into(),
            retry_after: None,
            challenge: None,
        }
    }
    /// Asks the client to wait `seconds` before trying again (`Retry-After`).
    pub fn retry_after(mut self, seconds: u64) -> Self {
        self.retry_after = Some(seconds);
        self
    }
    pub fn code(&self) -> ErrorCode {
        self.code
    }
    pub fn message(&self) -> &str {
        &self.message
    }
    /// A 401 for a request that sent no credentials.
    pub fn unauthorized(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Unauthorized, message)
    }
    /// A 401 for a token that is expired, revoked, malformed or not ours.
    pub fn invalid_token(message: impl Into<String>) -> Self {
        let mut e = Self::new(ErrorCode::Unauthorized, message);
        e.challenge = Some("invalid_token");
        e
    }
    /// A 401 for an `Authorization` header that is not `Bearer <token>`.
    pub fn invalid_request(message: impl Into<String>) -> Self {
        let mut e = Self::new(ErrorCode::Unauthorized, message);
        e.challenge = Some("invalid_request");
        e
    }
    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Forbidden, message)
    }
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::BadRequest, message)
    }
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::NotFound, message)
    }
    pub fn conflict(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Conflict, message)
    }
    /// A request body over the route's limit; `size` is the declared length when known.
    pub fn payload_too_large(size: u64, limit: usize) -> Self {
        let size = if size > 0 {
            format!(" ({size} bytes)")
        } else {
            String::new()
        };
        Self::new(
            ErrorCode::PayloadTooLarge,
            format!("request body{size} is larger than the {limit} bytes this route accepts"),
        )
    }
    pub fn internal(cause: &dyn std::fmt::Display) -> Self {
        // The cause goes to the log only; clients never see SQL or internals.
        tracing::error!(error = %cause, "internal error");
        Self::new(ErrorCode::Internal, "internal error")
    }
    /// A failure that may pass on its own: 503 with Retry-After.
    pub fn unavailable(cause: &dyn std::fmt::Display) -> Self {
        tracing::warn!(error = %cause, "transient failure");
        Self::new(
            ErrorCode::Unavailable,
            "the server is busy or its database is restarting; try again shortly",
        )
        .retry_after(TRANSIENT_RETRY_AFTER)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let challenge = (self.code == ErrorCode::Unauthorized)
            .then(|| bearer_challenge(self.challenge, &self.message));
        let body = json!({ "error": { "code": self.code.name(), "message": self.message } });
        let mut response = (self.code.status(), axum::Json(body)).into_response();
        if let Some(challenge) = challenge {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, challenge);
        }
        if let Some(seconds) = self.retry_after {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        response
    }
}

/// `WWW-Authenticate: Bearer realm="data-plane"`, with the error and its
/// description when a token was refused (RFC 6750, section 3). The routes
/// add `resource_metadata` where an OpenID provider is configured.
fn bearer_challenge(error: Option<&str>, message: &str) -> HeaderValue {
    let mut value = String::from("Bearer realm=\"data-plane\"");
    if let Some(error) = error {
        // A quoted string of the characters RFC 6750 allows there.
        let description: String = message
            .chars()
            .map(|c| match c {
                '"' | '\\' => '\'',
                ' '..='~' => c,
                _ => '?',
            })
            .collect();
        value.push_str(&format!(
            ", error=\"{error}\", error_description=\"{description}\""
        ));
    }
    HeaderValue::from_str(&value).unwrap_or(HeaderValue::from_static("Bearer realm=\"data-plane\""))
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        match e.fault() {
            Fault::NotFound(m) => ApiError::not_found(m),
            Fault::Invalid(m) => ApiError::bad_request(m),
            Fault::Denied(m) => ApiError::forbidden(m),
            Fault::Conflict(m) => ApiError::conflict(m),
            Fault::Transient => ApiError::unavailable(&e),
            Fault::Internal => ApiError::internal(&e),
        }
    }
}

impl From<IngestError> for ApiError {
    fn from(e: IngestError) -> Self {
        ApiError::internal(&e)
    }
}

/// A transaction's commit fails with the driver's error; it is sorted like any other.
impl From<sqlx::Error> for ApiError {
    fn from(e: sqlx::Error) -> Self {
        ApiError::from(StoreError::from(e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_has_its_own_name_and_an_error_status() {
        let mut names: Vec<&str> = ErrorCode::ALL.iter().map(|c| c.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), ErrorCode::ALL.len());
        for code in ErrorCode::ALL {
            assert!(code.status().is_client_error() || code.status().is_server_error());
            assert!(!code.meaning().is_empty());
        }
    }
}
