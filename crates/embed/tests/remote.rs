//! The OpenAI-compatible provider against a small fake embeddings server on
//! 127.0.0.1 that speaks the same wire format; no network beyond loopback.

// Tests fail loudly on the first broken step; that is what unwrap is for here.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use data_plane_embed::{EmbedConfig, Embedder, Provider};
use data_plane_testkit::http::{Request, Response, Server};
use serde_json::{Value, json};

/// What the fake server does with each request body.
type Behaviour = Arc<dyn Fn(&Value) -> Response + Send + Sync>;

/// Each request the fake saw: its Authorization header and JSON body.
type Seen = Arc<Mutex<Vec<(Option<String>, Value)>>>;

/// `status` with this JSON body.
fn json_reply(status: u16, body: Value) -> Response {
    Response::whole(
        status,
        vec![("content-type".into(), "application/json".into())],
        body.to_string(),
    )
}

/// `status` with this text body.
fn text_reply(status: u16, body: impl Into<Vec<u8>>) -> Response {
    Response::whole(
        status,
        vec![("content-type".into(), "text/plain; charset=utf-8".into())],
        body,
    )
}

/// Starts the fake on a free port; returns its base url and the requests it saw.
async fn serve(behaviour: Behaviour) -> (String, Seen, Server) {
    let seen: Seen = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    let server = Server::start(move |request: Request| {
        if request.method != "POST" || request.path != "/v1/embeddings" {
            return text_reply(404, "");
        }
        let Ok(body) = serde_json::from_slice::<Value>(&request.body) else {
            return text_reply(400, "body is not json");
        };
        let auth = request.header("authorization").map(str::to_owned);
        log.lock().unwrap().push((auth, body.clone()));
        behaviour(&body)
    })
    .await;
    (server.url("/v1"), seen, server)
}

/// A well-behaved endpoint: the vector of text `t` is `[len(t), 1, 0]`
/// (not normalised), returned in reverse order as some servers do.
fn reversed_lengths(body: &Value) -> Response {
    let inputs = body["input"].as_array().cloned().unwrap_or_default();
    let data: Vec<Value> = inputs
        .iter()
        .enumerate()
        .rev()
        .map(|(i, text)| {
            let len = text.as_str().unwrap_or_default().len() as f32;
            json!({"object": "embedding", "index": i, "embedding": [len, 1.0, 0.0]})
        })
        .collect();
    json_reply(
        200,
        json!({"object": "list", "data": data, "model": body["model"]}),
    )
}

fn config(
    base_url: &str,
    api_key: Option<&str>,
    dimension: usize,
    batch_size: usize,
) -> EmbedConfig {
    let mut config = EmbedConfig::open_ai(
        base_url,
        api_key.map(str::to_owned),
        "test-embed",
        dimension,
    );
    if let Provider::OpenAi {
        batch_size: b,
        timeout,
        ..
    } = &mut config.provider
    {
        *b = batch_size;
        *timeout = Duration::from_millis(500);
    }
    config
}

#[tokio::test]
async fn vectors_come_back_in_input_order_normalised_and_batched() {
    let (url, seen, _server) = serve(Arc::new(reversed_lengths)).await;
    let embedder = Embedder::from_config(&config(&url, Some("sk-test"), 3, 2)).unwrap();
    assert_eq!(embedder.dimension(), 3);
    assert_eq!(embedder.model_id(), "test-embed");

    let texts: Vec<String> = ["a", "bbb", "", "dddd", "eeeeeeeeeeee"]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
    let vectors = embedder.embed(&texts).await.unwrap();

    assert_eq!(vectors.len(), texts.len());
    for (text, vector) in texts.iter().zip(&vectors) {
        let len = text.len() as f32;
        let norm = (len * len + 1.0).sqrt();
        let expected = [len / norm, 1.0 / norm, 0.0];
        for (got, want) in vector.iter().zip(expected) {
            assert!(
                (got - want).abs() < 1e-6,
                "{text:?}: {vector:?} != {expected:?}"
            );
        }
    }
    let seen = seen.lock().unwrap();
    let batches: Vec<usize> = seen
        .iter()
        .map(|(_, body)| body["input"].as_array().map_or(0, Vec::len))
        .collect();
    assert_eq!(batches, [2, 2, 1]);
    for (auth, body) in seen.iter() {
        assert_eq!(auth.as_deref(), Some("Bearer sk-test"));
        assert_eq!(body["model"], "test-embed");
    }
}

#[tokio::test]
async fn no_api_key_sends_no_authorization_header() {
    let (url, seen, _server) = serve(Arc::new(reversed_lengths)).await;
    let embedder = Embedder::from_config(&config(&url, None, 3, 8)).unwrap();
    embedder.embed_query("hello").await.unwrap();
    assert_eq!(seen.lock().unwrap()[0].0, None);
}

/// Runs one embed call against a misbehaving endpoint and checks the error text.
async fn check_error(behaviour: Behaviour, dimension: usize, expected: &[&str]) {
    let (url, _, _server) = serve(behaviour).await;
    let embedder = Embedder::from_config(&config(&url, Some("k"), dimension, 8)).unwrap();
    let error = embedder
        .embed(&["one".to_owned(), "two".to_owned()])
        .await
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    for part in expected {
        assert!(
            error.contains(part),
            "error {error:?} should mention {part:?}"
        );
    }
}

#[tokio::test]
async fn endpoint_failures_become_clear_errors() {
    check_error(
        Arc::new(reversed_lengths),
        4,
        &["test-embed", "dimension 3", "4 is configured"],
    )
    .await;
    check_error(
        Arc::new(|_: &Value| {
            text_reply(401, r#"{"error":{"message":"Incorrect API key provided"}}"#)
        }),
        3,
        &["HTTP 401", "Incorrect API key provided", "/v1/embeddings"],
    )
    .await;
    check_error(
        Arc::new(|_: &Value| text_reply(500, "x".repeat(5000))),
        3,
        &["HTTP 500", "…"],
    )
    .await;
    check_error(
        Arc::new(|_: &Value| {
            json_reply(
                200,
                json!({"data": [{"index": 0, "embedding": [1.0, 0.0, 0.0]}]}),
            )
        }),
        3,
        &["1 vectors for 2 inputs"],
    )
    .await;
    check_error(
        Arc::new(|_: &Value| {
            json_reply(
                200,
                json!({"data": [
                    {"index": 0, "embedding": [1.0, 0.0, 0.0]},
                    {"index": 0, "embedding": [0.0, 1.0, 0.0]}
                ]}),
            )
        }),
        3,
        &["index 0 appears twice"],
    )
    .await;
    check_error(
        Arc::new(|_: &Value| text_reply(200, "not json")),
        3,
        &["unusable response", "not json"],
    )
    .await;
}

#[tokio::test]
async fn a_slow_endpoint_times_out() {
    let slow = Server::start(|_: Request| {
        Response::Delayed(
            Duration::from_secs(3),
            Box::new(text_reply(200, "too late")),
        )
    })
    .await;
    let slow_url = slow.url("/v1");

    let embedder = Embedder::from_config(&config(&slow_url, None, 3, 8)).unwrap();
    let error = embedder.embed_query("hello").await.unwrap_err().to_string();
    assert!(
        error.contains("timed out") && error.contains(&slow_url),
        "{error}"
    );
}

#[test]
fn bad_remote_configuration_is_refused() {
    let check = |config: EmbedConfig, expected: &str| {
        let error = Embedder::from_config(&config)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            error.contains(expected),
            "error {error:?} should mention {expected:?}"
        );
    };
    check(
        EmbedConfig::open_ai("api.example.com/v1", None, "m", 3),
        "\"api.example.com/v1\"",
    );
    check(
        EmbedConfig::open_ai("http://x/v1", None, "m", 0),
        "dimension 0",
    );
    check(
        EmbedConfig::open_ai("http://x/v1", None, " ", 3),
        "model name is empty",
    );
}

#[test]
fn the_api_key_never_appears_in_debug_output() {
    let config = EmbedConfig::open_ai("http://x/v1", Some("sk-secret-123".to_owned()), "m", 3);
    let shown = format!("{config:?}");
    assert!(
        !shown.contains("sk-secret-123") && shown.contains("redacted"),
        "{shown}"
    );
    let embedder = Embedder::from_config(&config).unwrap();
    assert!(!format!("{embedder:?}").contains("sk-secret-123"));
}
