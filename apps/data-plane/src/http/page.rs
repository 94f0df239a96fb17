//! The chat page at `/` and its assets under `/static/`: plain files carried
//! inside the binary, so a deployment is still one file.

use axum::extract::{Path, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use crate::error::ApiError;
use crate::state::AppState;

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
        name: "signin.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("../../static/signin.js"),
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

/// `GET /`: the chat page. Where the page signs people in with an OpenID
/// provider, it may also talk to the provider's token and revocation
/// endpoints, and to nothing else.
pub async fn index(State(state): State<AppState>) -> Response {
    let mut response = serve(&INDEX);
    let Some(oidc) = state
        .oidc
        .as_ref()
        .filter(|o| o.settings().client_id.is_some())
    else {
        return response;
    };
    let Ok(endpoints) = oidc.endpoints().await else {
        // The page says the provider cannot be reached when it tries.
        return response;
    };
    let mut origins: Vec<String> = [endpoints.token_endpoint, endpoints.revocation_endpoint]
        .into_iter()
        .flatten()
        .filter_map(|u| url::Url::parse(&u).ok())
        .map(|u| u.origin().ascii_serialization())
        .collect();
    origins.sort();
    origins.dedup();
    let policy = CONTENT_SECURITY_POLICY.replacen(
        "connect-src 'self'",
        &format!("connect-src 'self' {}", origins.join(" ")),
        1,
    );
    if let Ok(value) = HeaderValue::from_str(&policy) {
        response
            .headers_mut()
            .insert(header::CONTENT_SECURITY_POLICY, value);
    }
    response
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
