//! The search providers against fake SearXNG, Brave and Tavily servers on
//! 127.0.0.1 that answer in each API's real formats (bodies, error bodies,
//! rate-limit headers): what each provider is sent, how its answer is
//! normalised, and how each kind of failure is reported.

// Test helpers report failure by panicking, like the tests that call them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use data_plane_web::WebError;
use data_plane_web::search::{
    Freshness, ProviderKind, SearchConfig, SearchHit, SearchRequest, WebSearch,
};
use serde_json::{Value, json};

/// What a fake provider answers.
#[derive(Clone)]
struct Canned {
    status: u16,
    headers: Vec<(&'static str, &'static str)>,
    body: String,
    delay: Duration,
}

impl Canned {
    fn json(body: Value) -> Canned {
        Canned::status(200, body)
    }
    fn status(status: u16, body: Value) -> Canned {
        Canned {
            status,
            headers: vec![("content-type", "application/json")],
            body: body.to_string(),
            delay: Duration::ZERO,
        }
    }
    fn text(status: u16, content_type: &'static str, body: &str) -> Canned {
        Canned {
            status,
            headers: vec![("content-type", content_type)],
            body: body.to_string(),
            delay: Duration::ZERO,
        }
    }
    fn with_header(mut self, name: &'static str, value: &'static str) -> Canned {
        self.headers.push((name, value));
        self
    }
}

/// What a fake provider was sent.
#[derive(Debug, Clone)]
struct Seen {
    method: String,
    path: String,
    query: BTreeMap<String, String>,
    headers: HeaderMap,
    body: Value,
}

#[derive(Clone)]
struct Fake {
    canned: Canned,
    seen: Arc<Mutex<Vec<Seen>>>,
}

async fn answer(State(fake): State<Fake>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let bytes: Bytes = axum::body::to_bytes(body, 1 << 20).await.unwrap();
    fake.seen.lock().unwrap().push(Seen {
        method: parts.method.to_string(),
        path: parts.uri.path().to_string(),
        query: url::form_urlencoded::parse(parts.uri.query().unwrap_or("").as_bytes())
            .into_owned()
            .collect(),
        headers: parts.headers,
        body: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    });
    tokio::time::sleep(fake.canned.delay).await;
    let mut response = (
        StatusCode::from_u16(fake.canned.status).unwrap(),
        fake.canned.body.clone(),
    )
        .into_response();
    for (name, value) in &fake.canned.headers {
        response.headers_mut().insert(*name, value.parse().unwrap());
    }
    response
}

/// Starts a fake provider on 127.0.0.1; returns its base URL and what it saw.
async fn fake(canned: Canned) -> (String, Arc<Mutex<Vec<Seen>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let app = axum::Router::new().fallback(answer).with_state(Fake {
        canned,
        seen: seen.clone(),
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (base, seen)
}

const BRAVE_KEY: &str = "BSA-test-subscription-token";
const TAVILY_KEY: &str = "tvly-dev-test-key";

/// A WebSearch with `kind` pointed at `base` (plus the others pointed at a
/// closed port, so picking the wrong one would fail loudly).
fn search_at(kind: ProviderKind, base: &str, timeout: Duration) -> WebSearch {
    let mut config = SearchConfig {
        searxng_url: Some("http://127.0.0.1:9/".into()),
        brave_api_key: Some(BRAVE_KEY.into()),
        brave_url: "http://127.0.0.1:9".into(),
        tavily_api_key: Some(TAVILY_KEY.into()),
        tavily_url: "http://127.0.0.1:9".into(),
        timeout,
    };
    match kind {
        ProviderKind::Searxng => config.searxng_url = Some(base.into()),
        ProviderKind::Brave => config.brave_url = base.into(),
        ProviderKind::Tavily => config.tavily_url = base.into(),
    }
    WebSearch::new(&config).unwrap()
}

async fn run(
    kind: ProviderKind,
    canned: Canned,
    request: &SearchRequest,
) -> (Result<Vec<SearchHit>, WebError>, Vec<Seen>) {
    let (base, seen) = fake(canned).await;
    let result = search_at(kind, &base, Duration::from_secs(5))
        .search(kind, request)
        .await;
    let seen = seen.lock().unwrap().clone();
    (result, seen)
}

fn empty_answer(kind: ProviderKind) -> Value {
    match kind {
        ProviderKind::Searxng => json!({
            "query": "q", "number_of_results": 0, "results": [], "answers": [],
            "corrections": [], "infoboxes": [], "suggestions": [], "unresponsive_engines": []
        }),
        ProviderKind::Brave => json!({
            "type": "search",
            "query": { "original": "q", "show_strict_warning": false, "spellcheck_off": true },
            "mixed": { "type": "mixed", "main": [], "top": [], "side": [] }
        }),
        ProviderKind::Tavily => json!({
            "query": "q", "follow_up_questions": null, "answer": null, "images": [],
            "results": [], "response_time": 0.41,
            "request_id": "3c1f0e0a-8d2b-4f51-9a3e-6b2f6d1c9e11"
        }),
    }
}

// --- what each provider is sent ---------------------------------------------

/// The expected request: method, path, query parameters (all of them), the
/// header that carries the key, and the JSON body.
struct Sent {
    method: &'static str,
    path: &'static str,
    query: Vec<(&'static str, &'static str)>,
    auth: Option<(&'static str, &'static str)>,
    body: Value,
}

#[tokio::test]
async fn each_provider_is_sent_its_own_request_format() {
    async fn check(kind: ProviderKind, base_path: &str, request: SearchRequest, expected: Sent) {
        let (base, seen) = fake(Canned::json(empty_answer(kind))).await;
        let hits = search_at(kind, &format!("{base}{base_path}"), Duration::from_secs(5))
            .search(kind, &request)
            .await
            .unwrap_or_else(|e| panic!("{kind} {request:?}: {e}"));
        assert!(hits.is_empty());
        let seen = seen.lock().unwrap();
        assert_eq!(seen.len(), 1, "{kind}: one request");
        let seen = &seen[0];
        let what = format!("{kind} {request:?}");
        assert_eq!(seen.method, expected.method, "{what}");
        assert_eq!(seen.path, expected.path, "{what}");
        let query: BTreeMap<String, String> = expected
            .query
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        assert_eq!(seen.query, query, "{what}");
        if let Some((name, value)) = expected.auth {
            assert_eq!(
                seen.headers.get(name).and_then(|v| v.to_str().ok()),
                Some(value),
                "{what}: {name}"
            );
        }
        for secret in ["x-subscription-token", "authorization"] {
            if expected.auth.is_none_or(|(name, _)| name != secret) {
                assert!(seen.headers.get(secret).is_none(), "{what}: sent {secret}");
            }
        }
        assert_eq!(seen.body, expected.body, "{what}");
    }
    let req = |q: &str, count: Option<usize>, f: Option<Freshness>, site: Option<&str>| {
        SearchRequest::new(q, count, f, site).unwrap()
    };
    use ProviderKind::*;
    check(
        Searxng,
        "",
        req("vacuum tuning", None, None, None),
        Sent {
            method: "GET",
            path: "/search",
            query: vec![("q", "vacuum tuning"), ("format", "json")],
            auth: None,
            body: Value::Null,
        },
    )
    .await;
    check(
        Searxng,
        "/searx",
        req(
            "  vacuum  ",
            Some(3),
            Some(Freshness::Week),
            Some("https://PostgreSQL.org/"),
        ),
        Sent {
            method: "GET",
            path: "/searx/search",
            query: vec![
                ("q", "vacuum site:postgresql.org"),
                ("format", "json"),
                ("time_range", "week"),
            ],
            auth: None,
            body: Value::Null,
        },
    )
    .await;
    check(
        Brave,
        "",
        req("vacuum tuning", None, None, None),
        Sent {
            method: "GET",
            path: "/res/v1/web/search",
            query: vec![
                ("q", "vacuum tuning"),
                ("count", "5"),
                ("result_filter", "web"),
            ],
            auth: Some(("x-subscription-token", BRAVE_KEY)),
            body: Value::Null,
        },
    )
    .await;
    for (freshness, code) in [
        (Freshness::Day, "pd"),
        (Freshness::Week, "pw"),
        (Freshness::Month, "pm"),
        (Freshness::Year, "py"),
    ] {
        check(
            Brave,
            "",
            req(
                "rust 1.90",
                Some(20),
                Some(freshness),
                Some("blog.rust-lang.org"),
            ),
            Sent {
                method: "GET",
                path: "/res/v1/web/search",
                query: vec![
                    ("q", "rust 1.90 site:blog.rust-lang.org"),
                    ("count", "20"),
                    ("result_filter", "web"),
                    ("freshness", code),
                ],
                auth: Some(("x-subscription-token", BRAVE_KEY)),
                body: Value::Null,
            },
        )
        .await;
    }
    check(
        Tavily,
        "",
        req("vacuum tuning", None, None, None),
        Sent {
            method: "POST",
            path: "/search",
            query: vec![],
            auth: Some(("authorization", "Bearer tvly-dev-test-key")),
            body: json!({
                "query": "vacuum tuning", "max_results": 5,
                "search_depth": "basic", "topic": "general"
            }),
        },
    )
    .await;
    check(
        Tavily,
        "",
        req(
            "vacuum",
            Some(8),
            Some(Freshness::Month),
            Some("postgresql.org"),
        ),
        Sent {
            method: "POST",
            path: "/search",
            query: vec![],
            auth: Some(("authorization", "Bearer tvly-dev-test-key")),
            body: json!({
                "query": "vacuum", "max_results": 8, "search_depth": "basic",
                "topic": "general", "time_range": "month",
                "include_domains": ["postgresql.org"]
            }),
        },
    )
    .await;
}

// --- what comes back --------------------------------------------------------

fn hit(title: &str, url: &str, snippet: &str, published: Option<&str>) -> SearchHit {
    SearchHit {
        title: title.into(),
        url: url.into(),
        snippet: snippet.into(),
        published: published.map(Into::into),
    }
}

#[tokio::test]
async fn answers_are_normalised_the_same_way_for_every_provider() {
    async fn check(kind: ProviderKind, count: usize, answer: Value, expected: Vec<SearchHit>) {
        let request = SearchRequest::new("vacuum", Some(count), None, None).unwrap();
        let (result, _) = run(kind, Canned::json(answer), &request).await;
        assert_eq!(result.unwrap(), expected, "{kind}");
    }
    check(
        ProviderKind::Searxng,
        5,
        json!({
            "query": "vacuum",
            "number_of_results": 0,
            "results": [
                {
                    "url": "https://www.postgresql.org/docs/current/sql-vacuum.html",
                    "title": "PostgreSQL: Documentation: 17: VACUUM",
                    "content": "VACUUM reclaims storage occupied by dead tuples. In normal PostgreSQL operation, tuples that are deleted or obsoleted by an update are not physically removed&hellip;",
                    "publishedDate": null,
                    "thumbnail": "",
                    "engine": "duckduckgo",
                    "template": "default.html",
                    "parsed_url": ["https", "www.postgresql.org", "/docs/current/sql-vacuum.html", "", "", ""],
                    "engines": ["duckduckgo", "brave", "startpage"],
                    "positions": [1, 1, 2],
                    "score": 9.0,
                    "category": "general"
                },
                {
                    "url": "https://www.postgresql.org/docs/current/sql-vacuum.html#SQL-VACUUM-NOTES",
                    "title": "VACUUM notes",
                    "content": "duplicate of the first result but for its fragment",
                    "engine": "bing", "engines": ["bing"], "positions": [4], "score": 0.25,
                    "category": "general", "template": "default.html"
                },
                {
                    "url": "https://wiki.postgresql.org/wiki/Introduction_to_VACUUM,_ANALYZE,_EXPLAIN,_and_COUNT",
                    "title": "Introduction to <b>VACUUM</b>, ANALYZE, EXPLAIN, and COUNT",
                    "content": "  This article covers\n the basics.  ",
                    "publishedDate": "2023-06-01T00:00:00",
                    "engine": "google", "engines": ["google"], "positions": [3], "score": 0.33,
                    "category": "general", "template": "default.html"
                },
                {
                    "url": "javascript:alert(1)",
                    "title": "not a page", "content": null, "engine": "x", "engines": ["x"],
                    "positions": [5], "score": 0.2, "category": "general", "template": "default.html"
                },
                {
                    "url": "https://news.example.com/pg",
                    "title": "",
                    "content": "Untitled result",
                    "publishedDate": "2024-11-14 08:00:00",
                    "engine": "bing news", "engines": ["bing news"], "positions": [6], "score": 0.1,
                    "category": "news", "template": "default.html"
                }
            ],
            "answers": [],
            "corrections": [],
            "infoboxes": [],
            "suggestions": ["vacuum full", "autovacuum"],
            "unresponsive_engines": [["wikipedia", "timeout"]]
        }),
        vec![
            hit(
                "PostgreSQL: Documentation: 17: VACUUM",
                "https://www.postgresql.org/docs/current/sql-vacuum.html",
                "VACUUM reclaims storage occupied by dead tuples. In normal PostgreSQL operation, tuples that are deleted or obsoleted by an update are not physically removed…",
                None,
            ),
            hit(
                "Introduction to VACUUM, ANALYZE, EXPLAIN, and COUNT",
                "https://wiki.postgresql.org/wiki/Introduction_to_VACUUM,_ANALYZE,_EXPLAIN,_and_COUNT",
                "This article covers the basics.",
                Some("2023-06-01"),
            ),
            hit(
                "https://news.example.com/pg",
                "https://news.example.com/pg",
                "Untitled result",
                Some("2024-11-14"),
            ),
        ],
    )
    .await;
    let brave_result = |title: &str, url: &str, description: &str, page_age: Option<&str>| {
        let mut r = json!({
            "title": title,
            "url": url,
            "is_source_local": false,
            "is_source_both": false,
            "description": description,
            "profile": { "name": "PostgreSQL", "url": url, "long_name": "postgresql.org",
                         "img": "https://imgs.search.brave.com/abc/favicon.png" },
            "language": "en",
            "family_friendly": true,
            "type": "search_result",
            "subtype": "generic",
            "is_live": false,
            "meta_url": { "scheme": "https", "netloc": "postgresql.org",
                          "hostname": "www.postgresql.org",
                          "favicon": "https://imgs.search.brave.com/abc/favicon.png",
                          "path": "› docs › current" }
        });
        if let Some(age) = page_age {
            r["page_age"] = json!(age);
            r["age"] = json!("November 14, 2024");
        }
        r
    };
    check(
        ProviderKind::Brave,
        2,
        json!({
            "query": { "original": "vacuum", "show_strict_warning": false, "is_navigational": false,
                       "is_news_breaking": false, "spellcheck_off": true, "country": "us",
                       "bad_results": false, "should_fallback": false, "postal_code": "",
                       "city": "", "header_country": "", "more_results_available": true, "state": "" },
            "mixed": { "type": "mixed", "main": [{ "type": "web", "index": 0, "all": false },
                                                 { "type": "web", "index": 1, "all": false }],
                       "top": [], "side": [] },
            "type": "search",
            "web": {
                "type": "search",
                "results": [
                    brave_result(
                        "PostgreSQL: Documentation: 17: VACUUM",
                        "https://www.postgresql.org/docs/current/sql-vacuum.html",
                        "<strong>VACUUM</strong> reclaims storage occupied by dead tuples &amp; more.",
                        Some("2024-11-14T00:00:00"),
                    ),
                    brave_result(
                        "Routine Vacuuming",
                        "https://www.postgresql.org/docs/current/routine-vacuuming.html",
                        "PostgreSQL databases require periodic maintenance known as <strong>vacuuming</strong>.",
                        None,
                    ),
                    brave_result(
                        "Beyond the count",
                        "https://example.com/third",
                        "cut by count",
                        None,
                    )
                ],
                "family_friendly": true
            }
        }),
        vec![
            hit(
                "PostgreSQL: Documentation: 17: VACUUM",
                "https://www.postgresql.org/docs/current/sql-vacuum.html",
                "VACUUM reclaims storage occupied by dead tuples & more.",
                Some("2024-11-14"),
            ),
            hit(
                "Routine Vacuuming",
                "https://www.postgresql.org/docs/current/routine-vacuuming.html",
                "PostgreSQL databases require periodic maintenance known as vacuuming.",
                None,
            ),
        ],
    )
    .await;
    // Brave leaves `web` out when nothing matched.
    check(
        ProviderKind::Brave,
        5,
        empty_answer(ProviderKind::Brave),
        vec![],
    )
    .await;
    let long = "word ".repeat(400);
    check(
        ProviderKind::Tavily,
        5,
        json!({
            "query": "vacuum",
            "follow_up_questions": null,
            "answer": null,
            "images": [],
            "results": [
                {
                    "title": "VACUUM - PostgreSQL Documentation",
                    "url": "https://www.postgresql.org/docs/current/sql-vacuum.html",
                    "content": "VACUUM reclaims storage occupied by dead tuples.",
                    "score": 0.86,
                    "raw_content": null
                },
                {
                    "title": "PostgreSQL 17.2 released",
                    "url": "https://www.postgresql.org/about/news/postgresql-172-released/",
                    "content": long,
                    "score": 0.52,
                    "raw_content": null,
                    "published_date": "Thu, 21 Nov 2024 13:00:00 GMT"
                }
            ],
            "response_time": 1.02,
            "request_id": "123e4567-e89b-12d3-a456-426614174111"
        }),
        vec![
            hit(
                "VACUUM - PostgreSQL Documentation",
                "https://www.postgresql.org/docs/current/sql-vacuum.html",
                "VACUUM reclaims storage occupied by dead tuples.",
                None,
            ),
            hit(
                "PostgreSQL 17.2 released",
                "https://www.postgresql.org/about/news/postgresql-172-released/",
                &format!("{}…", "word ".repeat(120).trim_end()),
                Some("2024-11-21"),
            ),
        ],
    )
    .await;
}

// --- failures ---------------------------------------------------------------

fn variant(e: &WebError) -> &'static str {
    match e {
        WebError::Provider { .. } => "provider",
        WebError::ProviderUnavailable { .. } => "unavailable",
        WebError::ProviderAccount { .. } => "account",
        WebError::ProviderRejected { .. } => "rejected",
        WebError::RateLimited { .. } => "rate_limited",
        WebError::Timeout { .. } => "timeout",
        WebError::Config(_) => "config",
        WebError::InvalidSearch { .. } => "invalid",
        _ => "other",
    }
}

#[tokio::test]
async fn provider_failures_become_clear_errors() {
    async fn check(kind: ProviderKind, canned: Canned, expected: &str, says: &[&str]) {
        let request = SearchRequest::new("vacuum", None, None, None).unwrap();
        let (result, seen) = run(kind, canned, &request).await;
        assert_eq!(seen.len(), 1, "{kind}: exactly one request, no retry");
        let error = result.expect_err("the search should fail");
        let message = error.to_string();
        assert_eq!(variant(&error), expected, "{kind}: {message}");
        for s in says {
            assert!(message.contains(s), "{kind}: {message:?} should say {s:?}");
        }
    }
    use ProviderKind::*;
    let brave_error = |status: u16, code: &str, detail: &str, meta: Value| {
        json!({
            "type": "ErrorResponse",
            "error": { "id": "6f0c2a57-1c1b-4a8e-9f4e-3d2b8c7a1e90", "status": status,
                       "code": code, "detail": detail, "meta": meta },
            "time": 1732000000
        })
    };
    let tavily_error = |message: &str| json!({ "detail": { "error": message } });
    check(
        Searxng,
        Canned::text(
            403,
            "text/html; charset=utf-8",
            "<!doctype html><title>403 Forbidden</title><h1>Forbidden</h1>",
        ),
        "config",
        &["403", "format=json", "search.formats", "settings.yml"],
    )
    .await;
    check(
        Searxng,
        Canned::text(429, "text/plain", "Too Many Requests"),
        "rate_limited",
        &["searxng", "retry later"],
    )
    .await;
    check(
        Searxng,
        Canned::text(
            502,
            "text/html",
            "<html><body><h1>502 Bad Gateway</h1></body></html>",
        ),
        "unavailable",
        &["searxng", "HTTP 502", "Bad Gateway"],
    )
    .await;
    check(
        Searxng,
        Canned::json(json!({
            "query": "vacuum", "number_of_results": 0, "results": [], "answers": [],
            "corrections": [], "infoboxes": [], "suggestions": [],
            "unresponsive_engines": [["google", "CAPTCHA"], ["duckduckgo", "timeout"]]
        })),
        "unavailable",
        &["google (CAPTCHA)", "duckduckgo (timeout)"],
    )
    .await;
    check(
        Searxng,
        Canned::text(200, "text/html", "<html><body>SearXNG home</body></html>"),
        "provider",
        &["searxng", "JSON", "SearXNG home"],
    )
    .await;
    check(
        Searxng,
        Canned::text(302, "text/html", "").with_header("location", "/login"),
        "provider",
        &["HTTP 302", "/login", "base URL"],
    )
    .await;
    check(
        Brave,
        Canned::status(
            401,
            brave_error(
                401,
                "SUBSCRIPTION_TOKEN_INVALID",
                "The provided subscription token is invalid.",
                json!({ "component": "authentication" }),
            ),
        ),
        "account",
        &[
            "brave",
            "HTTP 401",
            "subscription token is invalid",
            "DATA_PLANE_BRAVE_API_KEY",
        ],
    )
    .await;
    check(
        Brave,
        Canned::status(
            422,
            brave_error(
                422,
                "VALIDATION",
                "Unable to validate request parameter(s)",
                json!({ "errors": [{ "type": "string_too_long", "loc": ["query", "q"],
                                     "msg": "String should have at most 400 characters" }] }),
            ),
        ),
        "rejected",
        &["HTTP 422", "Unable to validate", "VALIDATION"],
    )
    .await;
    check(
        Brave,
        Canned::status(
            429,
            brave_error(
                429,
                "RATE_LIMITED",
                "Request rate limit exceeded for plan.",
                json!({ "plan": "Free", "rate_limit": 1, "rate_current": 2,
                        "quota_limit": 2000, "quota_current": 18, "component": "rate_limiter" }),
            ),
        )
        .with_header("x-ratelimit-limit", "1, 2000")
        .with_header("x-ratelimit-remaining", "0, 1982")
        .with_header("x-ratelimit-reset", "1, 1419704"),
        "rate_limited",
        &["brave", "retry in 1 s"],
    )
    .await;
    check(
        Brave,
        Canned::status(
            429,
            brave_error(
                429,
                "QUOTA_LIMITED",
                "Request quota exceeded for plan.",
                json!({ "component": "rate_limiter" }),
            ),
        )
        .with_header("x-ratelimit-limit", "1, 2000")
        .with_header("x-ratelimit-remaining", "1, 0")
        .with_header("x-ratelimit-reset", "1, 86400"),
        "rate_limited",
        &["retry in 86400 s"],
    )
    .await;
    check(
        Brave,
        Canned::text(503, "text/plain", "upstream connect error").with_header("retry-after", "30"),
        "unavailable",
        &["brave", "HTTP 503", "upstream connect error"],
    )
    .await;
    check(
        Brave,
        Canned::json(json!({ "type": "search", "web": { "results": "not a list" } })),
        "provider",
        &["brave", "JSON"],
    )
    .await;
    check(
        Tavily,
        Canned::status(
            401,
            tavily_error("Unauthorized: missing or invalid API key."),
        ),
        "account",
        &["tavily", "invalid API key", "DATA_PLANE_TAVILY_API_KEY"],
    )
    .await;
    check(
        Tavily,
        Canned::status(
            432,
            tavily_error("This request exceeds your plan's set usage limit. Please upgrade your plan or contact support@tavily.com"),
        ),
        "account",
        &["HTTP 432", "usage limit"],
    )
    .await;
    check(
        Tavily,
        Canned::status(
            429,
            tavily_error("Your request has been blocked due to excessive requests. Please reduce rate of requests."),
        )
        .with_header("retry-after", "7"),
        "rate_limited",
        &["tavily", "retry in 7 s"],
    )
    .await;
    check(
        Tavily,
        Canned::status(
            400,
            tavily_error("Invalid time_range. Must be one of: day, week, month, year, d, w, m, y."),
        ),
        "rejected",
        &["HTTP 400", "Invalid time_range"],
    )
    .await;
    check(
        Tavily,
        Canned::status(500, tavily_error("Internal Server Error")),
        "unavailable",
        &["HTTP 500", "Internal Server Error"],
    )
    .await;
    check(
        Tavily,
        Canned::text(200, "application/json", "{\"results\": [{\"title\": "),
        "provider",
        &["tavily", "JSON"],
    )
    .await;
}

#[tokio::test]
async fn a_slow_provider_is_cut_off_at_the_timeout() {
    for kind in ProviderKind::ALL {
        let mut canned = Canned::json(empty_answer(kind));
        canned.delay = Duration::from_secs(10);
        let (base, _) = fake(canned).await;
        let started = Instant::now();
        let error = search_at(kind, &base, Duration::from_secs(1))
            .search(
                kind,
                &SearchRequest::new("vacuum", None, None, None).unwrap(),
            )
            .await
            .unwrap_err();
        let took = started.elapsed();
        assert_eq!(variant(&error), "timeout", "{kind}: {error}");
        assert_eq!(
            error.to_string(),
            format!("web search provider {kind} timed out after 1 s")
        );
        assert!(took < Duration::from_secs(3), "{kind}: took {took:?}");
    }
}

#[tokio::test]
async fn an_unreachable_provider_is_unavailable() {
    // A port that was just free: nothing listens there any more.
    let base = format!("http://{}", data_plane_testkit::unused_addr());
    for kind in ProviderKind::ALL {
        let error = search_at(kind, &base, Duration::from_secs(2))
            .search(
                kind,
                &SearchRequest::new("vacuum", None, None, None).unwrap(),
            )
            .await
            .unwrap_err();
        assert_eq!(variant(&error), "unavailable", "{kind}: {error}");
        let message = error.to_string();
        assert!(message.contains("cannot connect"), "{message}");
        assert!(!message.contains("vacuum"), "the query leaked: {message}");
        assert!(!message.contains(BRAVE_KEY) && !message.contains(TAVILY_KEY));
    }
}

#[test]
fn configuration_names_what_to_set() {
    fn check(config: SearchConfig, expected: Result<&[ProviderKind], &str>) {
        match (WebSearch::new(&config), expected) {
            (Ok(search), Ok(kinds)) => assert_eq!(search.configured(), kinds),
            (Err(e), Err(says)) => {
                assert_eq!(variant(&e), "config");
                assert!(e.to_string().contains(says), "{e} should say {says:?}");
            }
            (got, want) => panic!(
                "{config:?}: got {:?}, want {want:?}",
                got.map(|s| s.configured())
            ),
        }
    }
    let base = SearchConfig::default;
    check(base(), Ok(&[]));
    check(
        SearchConfig {
            searxng_url: Some("http://searxng.internal:8080".into()),
            brave_api_key: Some("k".into()),
            tavily_api_key: Some("  ".into()),
            ..base()
        },
        Ok(&[ProviderKind::Searxng, ProviderKind::Brave]),
    );
    check(
        SearchConfig {
            tavily_api_key: Some("k".into()),
            ..base()
        },
        Ok(&[ProviderKind::Tavily]),
    );
    check(
        SearchConfig {
            searxng_url: Some("ftp://searxng.internal/".into()),
            ..base()
        },
        Err("DATA_PLANE_SEARXNG_URL \"ftp://searxng.internal/\" must be an http or https URL"),
    );
    check(
        SearchConfig {
            searxng_url: Some("searxng:8080".into()),
            ..base()
        },
        Err("DATA_PLANE_SEARXNG_URL"),
    );
    check(
        SearchConfig {
            brave_api_key: Some("k".into()),
            brave_url: "not a url".into(),
            ..base()
        },
        Err("DATA_PLANE_BRAVE_URL \"not a url\""),
    );
    check(
        SearchConfig {
            tavily_api_key: Some("k".into()),
            tavily_url: "https://api.tavily.com/?x=1".into(),
            ..base()
        },
        Err("must not carry a query"),
    );

    let only_searxng = WebSearch::new(&SearchConfig {
        searxng_url: Some("http://127.0.0.1:9".into()),
        ..base()
    })
    .unwrap();
    for (kind, var) in [
        (ProviderKind::Brave, "DATA_PLANE_BRAVE_API_KEY"),
        (ProviderKind::Tavily, "DATA_PLANE_TAVILY_API_KEY"),
    ] {
        let e = only_searxng.provider(kind).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!("web configuration: web search provider {kind} is not configured: set {var}")
        );
    }
    // Keys never show in debug output.
    let debug = format!(
        "{:?}",
        SearchConfig {
            brave_api_key: Some("very-secret".into()),
            ..base()
        }
    );
    assert!(!debug.contains("very-secret"), "{debug}");
}

#[test]
fn requests_are_checked_before_any_provider_sees_them() {
    fn check(
        query: &str,
        count: Option<usize>,
        site: Option<&str>,
        expected: Result<(&str, usize, Option<&str>), &str>,
    ) {
        let got = SearchRequest::new(query, count, None, site);
        match (got, expected) {
            (Ok(r), Ok((q, c, s))) => {
                assert_eq!((r.query.as_str(), r.count, r.site.as_deref()), (q, c, s));
            }
            (Err(e), Err(says)) => {
                assert_eq!(variant(&e), "invalid");
                assert!(e.to_string().contains(says), "{e} should say {says:?}");
            }
            (got, want) => panic!("{query:?}: got {got:?}, want {want:?}"),
        }
    }
    check(" vacuum ", None, None, Ok(("vacuum", 5, None)));
    check(
        "vacuum",
        Some(20),
        Some("docs.rs"),
        Ok(("vacuum", 20, Some("docs.rs"))),
    );
    check("vacuum", None, Some(""), Ok(("vacuum", 5, None)));
    check(
        "   ",
        None,
        None,
        Err("invalid search query \"   \": the query is empty"),
    );
    check(
        &"x".repeat(501),
        None,
        None,
        Err("longer than 500 characters"),
    );
    check(
        "vacuum",
        Some(0),
        None,
        Err("invalid search count \"0\": expected 1 to 20"),
    );
    check("vacuum", Some(21), None, Err("expected 1 to 20"));
    check(
        "vacuum",
        None,
        Some("docs.rs/serde"),
        Err("invalid search site \"docs.rs/serde\": expected a domain name"),
    );
    assert_eq!(
        "fortnight".parse::<Freshness>().unwrap_err().to_string(),
        "invalid search freshness \"fortnight\": expected day, week, month or year"
    );
    assert_eq!(
        "bing".parse::<ProviderKind>().unwrap_err().to_string(),
        "web configuration: unknown web search provider \"bing\" (known: searxng, brave, tavily)"
    );
}
