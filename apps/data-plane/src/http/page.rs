//! The chat page at `/` and its assets under `/static/`: plain files carried
//! inside the binary, so a deployment is still one file.

use axum::extract::Path;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use crate::error::ApiError;

/// One embedded file and the type it is served as.
struct Asset {
    name: &'static str,
    content_type: &'static str,
    body: &'static str,
}

const INDEX: Asset = Asset {
    name: "index.html",
    content_type: "text/html; charset=utf-8",
    body: include_str!("../../static/index.html"),
};

/// Everything under `/static/`.
const ASSETS: &[Asset] = &[
    Asset {
        name: "app.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("../../static/app.js"),
    },
    Asset {
        name: "markdown.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("../../static/markdown.js"),
    },
    Asset {
        name: "views.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("../../static/views.js"),
    },
    Asset {
        name: "style.css",
        content_type: "text/css; charset=utf-8",
        body: include_str!("../../static/style.css"),
    },
];

/// Only this server's own script and styles run or load, and the page talks
/// only to this server: a second line of defence behind the page writing
/// model output as text.
const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
     style-src 'self'; connect-src 'self'; img-src 'self' data:; \
     base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// `GET /`: the chat page.
pub async fn index() -> Response {
    serve(&INDEX)
}

/// `GET /static/{file}`: the page's script and styles.
pub async fn asset(Path(file): Path<String>) -> Response {
    match ASSETS.iter().find(|a| a.name == file) {
        Some(asset) => serve(asset),
        None => ApiError::not_found(format!("no static file {file:?}")).into_response(),
    }
}

fn serve(asset: &Asset) -> Response {
    (
        StatusCode::OK,
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static(asset.content_type),
            ),
            // The files change with the binary; revalidating is cheap on loopback
            // and never leaves an old script beside a new page.
            (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
            (
                header::CONTENT_SECURITY_POLICY,
                HeaderValue::from_static(CONTENT_SECURITY_POLICY),
            ),
            (
                header::X_CONTENT_TYPE_OPTIONS,
                HeaderValue::from_static("nosniff"),
            ),
            (
                header::REFERRER_POLICY,
                HeaderValue::from_static("no-referrer"),
            ),
        ],
        asset.body,
    )
        .into_response()
}
