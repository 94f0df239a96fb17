//! The one JSON error body of the API: `{"error": {"code", "message"}}`.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use data_plane_ingest::IngestError;
use data_plane_store::StoreError;
use serde_json::json;

#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    code: &'static str,
    message: String,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            code,
            message: message.into(),
        }
    }
    pub fn unauthorized(message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, "unauthorized", message)
    }
    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, "forbidden", message)
    }
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "bad_request", message)
    }
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "not_found", message)
    }
    /// A request body over the route's limit; `size` is the declared length when known.
    pub fn payload_too_large(size: u64, limit: usize) -> Self {
        let size = if size > 0 {
            format!(" ({size} bytes)")
        } else {
            String::new()
        };
        Self::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload_too_large",
            format!("request body{size} is larger than the {limit} bytes this route accepts"),
        )
    }
    pub fn internal(cause: &dyn std::fmt::Display) -> Self {
        // The cause goes to the log only; clients never see SQL or internals.
        tracing::error!(error = %cause, "internal error");
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "internal error",
        )
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = json!({ "error": { "code": self.code, "message": self.message } });
        (self.status, axum::Json(body)).into_response()
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        match &e {
            StoreError::NotFound { .. } => ApiError::not_found(e.to_string()),
            StoreError::Invalid(m) => ApiError::bad_request(m.clone()),
            StoreError::Denied(m) => ApiError::forbidden(m.clone()),
            StoreError::Conflict(m) => ApiError::new(StatusCode::CONFLICT, "conflict", m.clone()),
            // Row-level security refused a write the handler's checks let
            // through (a role changed a moment ago on another replica).
            StoreError::Database(sqlx::Error::Database(d))
                if d.code().as_deref() == Some("42501") =>
            {
                ApiError::forbidden("not allowed in this space")
            }
            // Data exceptions (class 22) and check violations are the
            // request's values, not the server: PostgreSQL refuses NUL in
            // text, out-of-range numbers, over-long names.
            StoreError::Database(sqlx::Error::Database(d))
                if d.code().as_deref() == Some("22021") =>
            {
                ApiError::bad_request("text may not contain NUL (\\u0000) characters")
            }
            StoreError::Database(sqlx::Error::Database(d))
                if d.code().is_some_and(|c| c.starts_with("22")) =>
            {
                ApiError::bad_request(format!("invalid value: {}", d.message()))
            }
            StoreError::Database(sqlx::Error::Database(d))
                if d.code().as_deref() == Some("23514") =>
            {
                ApiError::bad_request(format!(
                    "a value breaks the rule {}",
                    d.constraint().unwrap_or("of the data")
                ))
            }
            _ if e.is_unique_violation() => {
                ApiError::new(StatusCode::CONFLICT, "conflict", "already exists")
            }
            _ => ApiError::internal(&e),
        }
    }
}

impl From<IngestError> for ApiError {
    fn from(e: IngestError) -> Self {
        ApiError::internal(&e)
    }
}

impl From<sqlx::Error> for ApiError {
    fn from(e: sqlx::Error) -> Self {
        ApiError::from(StoreError::from(e))
    }
}
