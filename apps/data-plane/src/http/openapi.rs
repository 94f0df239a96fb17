//! The OpenAPI document of the HTTP surface, served at `/openapi.json`.
//! Written by hand in docs/openapi.json; a test holds it to the router.

use axum::http::HeaderValue;
use axum::response::IntoResponse;

/// The document, embedded at build time.
pub const DOCUMENT: &str = include_str!("../../../../docs/openapi.json");

pub async fn serve() -> impl IntoResponse {
    (
        [(
            axum::http::header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        DOCUMENT,
    )
}
