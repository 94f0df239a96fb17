//! Extractors whose rejections are the API's JSON errors rather than axum's
//! plain-text ones, so a bad body, path or query string names the problem in
//! the same `{"error": ...}` shape as everything else.

use axum::extract::FromRequest;
use axum::extract::FromRequestParts;
use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};

use crate::error::ApiError;

#[derive(Debug, FromRequest)]
#[from_request(via(axum::Json), rejection(ApiError))]
pub struct Json<T>(pub T);

#[derive(Debug, FromRequestParts)]
#[from_request(via(axum::extract::Path), rejection(ApiError))]
pub struct Path<T>(pub T);

#[derive(Debug, FromRequestParts)]
#[from_request(via(axum::extract::Query), rejection(ApiError))]
pub struct Query<T>(pub T);

impl From<JsonRejection> for ApiError {
    fn from(r: JsonRejection) -> Self {
        let message = format!("invalid JSON body: {}", r.body_text());
        if r.status() == axum::http::StatusCode::PAYLOAD_TOO_LARGE {
            return ApiError::payload_too_large(0, super::MAX_BODY_BYTES);
        }
        if r.status() == axum::http::StatusCode::UNSUPPORTED_MEDIA_TYPE {
            return ApiError::new(crate::error::ErrorCode::UnsupportedMediaType, message);
        }
        ApiError::bad_request(message)
    }
}

impl From<PathRejection> for ApiError {
    fn from(r: PathRejection) -> Self {
        ApiError::bad_request(format!("invalid path: {}", r.body_text()))
    }
}

impl From<QueryRejection> for ApiError {
    fn from(r: QueryRejection) -> Self {
        ApiError::bad_request(format!("invalid query string: {}", r.body_text()))
    }
}

impl<T: serde::Serialize> axum::response::IntoResponse for Json<T> {
    fn into_response(self) -> axum::response::Response {
        axum::Json(self.0).into_response()
    }
}
