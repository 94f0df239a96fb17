//! How clients find out how to sign in, where an OpenID Connect provider is
//! configured (docs/auth.md): the protected-resource metadata of RFC 9728
//! for the API and for `/mcp` (which authorization server issues tokens
//! for this server, with which scopes), the `resource_metadata` parameter
//! every 401 points to it with, and what the chat page needs to run the
//! sign-in itself.

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::error::ApiError;
use crate::state::AppState;

/// Where the metadata of the resource at `path` (`""`: the whole API) lives.
const METADATA_PATH: &str = "/.well-known/oauth-protected-resource";

/// The URL clients reach this server at: the configured one, else what
/// the request says (its Host, and the scheme a proxy in front names).
fn base(state: &AppState, headers: &HeaderMap) -> String {
    if let Some(url) = &state.public_url {
        return url.to_string();
    }
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .filter(|h| {
            !h.is_empty()
                && h.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-._:[]".contains(&b))
        })
        .unwrap_or("localhost");
    let scheme = match headers
        .get("x-forwarded-proto")
        .and_then(|h| h.to_str().ok())
        .and_then(|h| h.split(',').next())
        .map(str::trim)
    {
        Some("https") => "https",
        _ => "http",
    };
    format!("{scheme}://{host}")
}

/// The part of the API a request's path belongs to, for its metadata.
fn resource_path(path: &str) -> &'static str {
    if path == "/mcp" || path.starts_with("/mcp/") {
        "/mcp"
    } else {
        ""
    }
}

fn metadata(state: &AppState, headers: &HeaderMap, path: &str) -> Response {
    let Some(oidc) = &state.oidc else {
        return ApiError::not_found(
            "this server signs nobody in through an OpenID provider (DATA_PLANE_OIDC_ISSUER is not set)",
        )
        .into_response();
    };
    let settings = oidc.settings();
    let base = base(state, headers);
    let body = json!({
        "resource": format!("{base}{path}"),
        "authorization_servers": [settings.issuer],
        "scopes_supported": settings.scopes,
        "bearer_methods_supported": ["header"],
        "resource_name": "data-plane",
        "resource_documentation": format!("{base}/openapi.json"),
    });
    (
        StatusCode::OK,
        [(
            header::ACCESS_CONTROL_ALLOW_ORIGIN,
            HeaderValue::from_static("*"),
        )],
        axum::Json(body),
    )
        .into_response()
}

/// `GET /.well-known/oauth-protected-resource`: the API's metadata.
pub async fn api_metadata(State(state): State<AppState>, headers: HeaderMap) -> Response {
    metadata(&state, &headers, "")
}

/// `GET /.well-known/oauth-protected-resource/mcp`: the MCP endpoint's.
pub async fn mcp_metadata(State(state): State<AppState>, headers: HeaderMap) -> Response {
    metadata(&state, &headers, "/mcp")
}

/// `GET /v1/auth/config`: whether the chat page can sign people in, and
/// with which provider, client and scopes. Public: it holds nothing secret.
pub async fn config(State(state): State<AppState>, headers: HeaderMap) -> Response {
    let oidc: Value = match &state.oidc {
        Some(oidc) => {
            let s = oidc.settings();
            // The provider's endpoints, so the page needs no request of
            // its own to the provider before it sends the person there.
            let (endpoints, error) = match oidc.endpoints().await {
                Ok(e) => (json!(e), Value::Null),
                Err(e) => {
                    // The cause (the provider's addresses) stays in the log.
                    tracing::warn!(error = %e, "the OpenID provider's discovery document could not be read");
                    (
                        Value::Null,
                        json!("the sign-in provider cannot be reached; try again shortly"),
                    )
                }
            };
            json!({
                "issuer": s.issuer,
                "client_id": s.client_id,
                "scopes": s.scopes,
                "audience": s.audience,
                "resource": base(&state, &headers),
                "token": s.page_token.as_str(),
                "endpoints": endpoints,
                "error": error,
            })
        }
        None => Value::Null,
    };
    axum::Json(json!({ "oidc": oidc })).into_response()
}

/// Adds `resource_metadata` to every 401's `WWW-Authenticate` where an
/// OpenID provider is configured, so a client that was refused learns
/// where to sign in (RFC 9728, section 5.1).
pub async fn point_to_metadata(
    State(state): State<AppState>,
    request: Request,
    next: Next,
) -> Response {
    if state.oidc.is_none() {
        return next.run(request).await;
    }
    let url = format!(
        "{}{METADATA_PATH}{}",
        base(&state, request.headers()),
        resource_path(request.uri().path())
    );
    let mut response = next.run(request).await;
    if response.status() == StatusCode::UNAUTHORIZED {
        let challenge = response
            .headers()
            .get(header::WWW_AUTHENTICATE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("Bearer realm=\"data-plane\"");
        if let Ok(value) =
            HeaderValue::from_str(&format!("{challenge}, resource_metadata=\"{url}\""))
        {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, value);
        }
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mcp_endpoint_has_metadata_of_its_own() {
        assert_eq!(resource_path("/mcp"), "/mcp");
        assert_eq!(resource_path("/mcp/x"), "/mcp");
        assert_eq!(resource_path("/mcpx"), "");
        assert_eq!(resource_path("/v1/tools"), "");
    }
}
