//! The rerank client against a fake rerank server on 127.0.0.1 speaking the
//! two request forms (Cohere's, which llama.cpp and Jina share, and
//! text-embeddings-inference's) and both answer shapes; every way an answer
//! can be unusable is a clear error, never a panic or a wrong order.

// Tests fail loudly on the first broken step; that is what unwrap is for here.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use data_plane_embed::{RerankApi, RerankConfig, RerankError, RerankScore, Reranker};
use data_plane_testkit::http::{Request, Response, Server};
use serde_json::{Value, json};

type Seen = Arc<Mutex<Vec<(Option<String>, String, Value)>>>;

fn reply(status: u16, body: impl Into<Vec<u8>>) -> Response {
    Response::whole(
        status,
        vec![("content-type".into(), "application/json".into())],
        body,
    )
}

/// A fake whose answer `answer` makes from the request body.
async fn serve(answer: impl Fn(&Value) -> Response + Send + Sync + 'static) -> (Server, Seen) {
    let seen: Seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    let server = Server::start(move |request: Request| {
        let body: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
        log.lock().unwrap().push((
            request.header("authorization").map(str::to_owned),
            request.path.clone(),
            body.clone(),
        ));
        answer(&body)
    })
    .await;
    (server, seen)
}

fn reranker(url: String, api: RerankApi, timeout_ms: u64) -> Reranker {
    Reranker::new(RerankConfig {
        url,
        model: Some("bge-reranker-v2-m3".into()),
        api_key: Some("rerank-key".into()),
        api,
        timeout: Duration::from_millis(timeout_ms),
    })
    .unwrap()
}

fn docs() -> Vec<String> {
    ["a bear", "the giant panda is a bear of China", "hi"]
        .map(String::from)
        .to_vec()
}

/// Scores a document by how many of the query's words it holds.
fn overlap(query: &str, doc: &str) -> f64 {
    query
        .split_whitespace()
        .filter(|w| doc.split_whitespace().any(|d| d == *w))
        .count() as f64
}

#[tokio::test]
async fn both_forms_are_sent_as_their_servers_expect_and_read_best_first() {
    // Cohere's form, answered as llama.cpp does (results, relevance_score).
    let (server, seen) = serve(|body| {
        let q = body["query"].as_str().unwrap();
        let results: Vec<Value> = body["documents"]
            .as_array()
            .unwrap()
            .iter()
            .enumerate()
            .map(|(i, d)| json!({"index": i, "relevance_score": overlap(q, d.as_str().unwrap())}))
            .collect();
        reply(
            200,
            json!({"model": "m", "object": "list", "results": results}).to_string(),
        )
    })
    .await;
    let r = reranker(server.url("/v1/rerank"), RerankApi::Cohere, 2000);
    let scores = r.rerank("giant panda bear", &docs()).await.unwrap();
    assert_eq!(
        scores,
        [
            RerankScore {
                index: 1,
                score: 3.0
            },
            RerankScore {
                index: 0,
                score: 1.0
            },
            RerankScore {
                index: 2,
                score: 0.0
            },
        ]
    );
    let (auth, path, body) = seen.lock().unwrap()[0].clone();
    assert_eq!(auth.as_deref(), Some("Bearer rerank-key"));
    assert_eq!(path, "/v1/rerank");
    assert_eq!(
        body,
        json!({"query": "giant panda bear", "documents": docs(), "top_n": 3, "model": "bge-reranker-v2-m3"})
    );

    // text-embeddings-inference's form, answered as a bare list with `score`.
    let (server, seen) = serve(|body| {
        let q = body["query"].as_str().unwrap();
        let mut list: Vec<Value> = body["texts"]
            .as_array()
            .unwrap()
            .iter()
            .enumerate()
            .map(|(i, d)| json!({"index": i, "score": overlap(q, d.as_str().unwrap())}))
            .collect();
        list.reverse();
        reply(200, Value::Array(list).to_string())
    })
    .await;
    let r = reranker(server.url("/rerank"), RerankApi::Tei, 2000);
    let order: Vec<usize> = r
        .rerank("a bear", &docs())
        .await
        .unwrap()
        .iter()
        .map(|s| s.index)
        .collect();
    // Ties keep the order they were sent in.
    assert_eq!(order, [0, 1, 2]);
    let body = seen.lock().unwrap()[0].2.clone();
    assert_eq!(
        body,
        json!({"query": "a bear", "texts": docs(), "truncate": true, "model": "bge-reranker-v2-m3"})
    );
}

#[tokio::test]
async fn unusable_answers_are_errors_that_say_what_was_wrong() {
    // (what the server answers, what the error must say)
    let cases: Vec<(Response, &str)> = vec![
        (reply(503, "model is loading"), "HTTP 503: model is loading"),
        (reply(200, "<html>proxy</html>"), "unusable response"),
        (
            reply(200, r#"{"results": [{"index": 7, "relevance_score": 1}]}"#),
            "index 7 is out of range for 3 documents",
        ),
        (
            reply(
                200,
                r#"{"results": [{"index": 1, "relevance_score": 1}, {"index": 1, "relevance_score": 0.5}]}"#,
            ),
            "index 1 is scored twice",
        ),
        (
            reply(
                200,
                r#"{"results": [{"index": 0, "relevance_score": "high"}]}"#,
            ),
            "unusable response",
        ),
        (
            reply(200, r#"{"results": []}"#),
            "none of 3 documents was scored",
        ),
        (
            reply(200, r#"[{"index": 0, "score": 1e400}]"#),
            "unusable response",
        ),
        (
            Response::Delayed(
                Duration::from_secs(3),
                Box::new(reply(200, r#"{"results": []}"#)),
            ),
            "timed out after 300 ms",
        ),
    ];
    for (answer, expected) in cases {
        let answer = Mutex::new(Some(answer));
        let (server, _) = serve(move |_| answer.lock().unwrap().take().unwrap()).await;
        let url = server.url("/v1/rerank");
        let r = reranker(url.clone(), RerankApi::Cohere, 300);
        let error = r.rerank("q", &docs()).await.unwrap_err();
        let full = error.to_string();
        assert!(full.contains(expected), "{full:?} should say {expected:?}");
        // What a caller may be told names neither the endpoint nor its body.
        let summary = error.summary();
        assert!(summary.starts_with("the reranker "), "{summary}");
        for secret in [url.as_str(), "model is loading", "proxy"] {
            assert!(!summary.contains(secret), "{summary:?} repeats {secret:?}");
        }
    }

    // Nobody listening.
    let r = reranker(
        format!("http://{}/v1/rerank", data_plane_testkit::unused_addr()),
        RerankApi::Cohere,
        1000,
    );
    let error = r.rerank("q", &docs()).await.unwrap_err();
    assert!(matches!(error, RerankError::Request { .. }), "{error}");
}

#[tokio::test]
async fn a_server_that_scores_only_some_answers_for_those() {
    let (server, _) = serve(|_| {
        reply(
            200,
            r#"{"results": [{"index": 2, "relevance_score": 0.9}]}"#,
        )
    })
    .await;
    let r = reranker(server.url("/v1/rerank"), RerankApi::Cohere, 2000);
    assert_eq!(
        r.rerank("q", &docs()).await.unwrap(),
        [RerankScore {
            index: 2,
            score: 0.9
        }]
    );
    // Nothing to rerank asks nothing.
    assert!(r.rerank("q", &[]).await.unwrap().is_empty());
}

#[test]
fn configuration_is_checked_when_made() {
    for (url, timeout, expected) in [
        (
            "127.0.0.1:8012/v1/rerank",
            1000,
            "must start with http:// or https://",
        ),
        (
            "ftp://host/rerank",
            1000,
            "must start with http:// or https://",
        ),
        ("http://127.0.0.1:8012/v1/rerank", 0, "at least 1 ms"),
    ] {
        let error = Reranker::new(RerankConfig {
            url: url.into(),
            model: None,
            api_key: None,
            api: RerankApi::Cohere,
            timeout: Duration::from_millis(timeout),
        })
        .unwrap_err()
        .to_string();
        assert!(error.contains(expected), "{url}: {error}");
    }
}
