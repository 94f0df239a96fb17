//! search_documents with a rerank stage, against a fake reranker on
//! 127.0.0.1 speaking the rerank API llama.cpp, Cohere and Jina share: the
//! reranker's order wins and every hit shows its score and fused rank; a
//! reranker that fails, stalls or answers nonsense leaves the fused order
//! and the answer says why.

// Test helpers report failure by panicking, like the tests that call them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::World;
use data_plane_embed::{RerankApi, RerankConfig, Reranker};
use data_plane_handlers::Rerank;
use data_plane_testkit::http::{Request, Response, Server};
use serde_json::{Value, json};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Scores fall with the index: the fused order, confirmed.
    Agree,
    /// Passages about HNSW first, the rest as sent.
    PreferHnsw,
    /// Scores only the second passage.
    OnlySecond,
    Http500,
    Stall,
    NotJson,
    OutOfRange,
}

#[derive(Default)]
struct Fake {
    mode: Mutex<Option<Mode>>,
    seen: Mutex<Vec<(Option<String>, Value)>>,
}

impl Fake {
    fn set(&self, mode: Mode) {
        *self.mode.lock().unwrap() = Some(mode);
        self.seen.lock().unwrap().clear();
    }

    /// The last request's body.
    fn last(&self) -> Value {
        self.seen.lock().unwrap().last().unwrap().1.clone()
    }

    fn answer(&self, request: Request) -> Response {
        let body: Value = serde_json::from_slice(&request.body).unwrap();
        self.seen.lock().unwrap().push((
            request.header("authorization").map(str::to_owned),
            body.clone(),
        ));
        let documents = body["documents"].as_array().unwrap();
        let scored = |score: &dyn Fn(usize, &str) -> Option<f64>| {
            let results: Vec<Value> = documents
                .iter()
                .enumerate()
                .filter_map(|(i, d)| {
                    score(i, d.as_str().unwrap()).map(|s| json!({"index": i, "relevance_score": s}))
                })
                .rev()
                .collect();
            json_reply(
                200,
                json!({"model": "fake", "results": results}).to_string(),
            )
        };
        match self.mode.lock().unwrap().unwrap() {
            Mode::Agree => scored(&|i, _| Some(1.0 - i as f64 / 100.0)),
            Mode::PreferHnsw => scored(&|i, d| {
                Some(if d.contains("HNSW") {
                    0.99
                } else {
                    0.5 - i as f64 / 100.0
                })
            }),
            Mode::OnlySecond => scored(&|i, _| (i == 1).then_some(0.7)),
            Mode::Http500 => json_reply(500, "{\"error\": \"model not loaded\"}".into()),
            Mode::Stall => Response::Delayed(
                Duration::from_secs(5),
                Box::new(json_reply(200, "{\"results\": []}".into())),
            ),
            Mode::NotJson => json_reply(200, "<html>gateway</html>".into()),
            Mode::OutOfRange => json_reply(
                200,
                json!({"results": [{"index": documents.len(), "relevance_score": 1.0}]})
                    .to_string(),
            ),
        }
    }
}

fn json_reply(status: u16, body: String) -> Response {
    Response::whole(
        status,
        vec![("content-type".into(), "application/json".into())],
        body,
    )
}

fn chunk_ids(data: &Value) -> Vec<i64> {
    data["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["chunk_id"].as_i64().unwrap())
        .collect()
}

const QUERY: &str = "reclaim disk space from dead rows";

#[tokio::test]
async fn the_rerankers_order_wins_and_a_failure_keeps_the_fused_order() {
    let w = World::new().await;
    let fake = Arc::new(Fake::default());
    let answering = fake.clone();
    let server = Server::start(move |r: Request| answering.answer(r)).await;
    let reranker = Reranker::new(RerankConfig {
        url: server.url("/v1/rerank"),
        model: Some("bge-reranker-v2-m3".into()),
        api_key: Some("rerank-key".into()),
        api: RerankApi::Cohere,
        timeout: Duration::from_millis(400),
    })
    .unwrap();
    assert!(w.deps.connect_rerank(Rerank {
        reranker,
        candidates: 4,
    }));
    let alice = w.ctx(w.alice, Some(w.alpha));
    let search = async |args: Value| w.ok("search_documents", args, &alice).await;

    // A reranker that agrees with fusion: the fused order, each hit with its
    // score and a fused rank equal to its rank.
    fake.set(Mode::Agree);
    let data = search(json!({"query": QUERY, "limit": 3})).await;
    let fused = chunk_ids(&data);
    assert_eq!(fused.len(), 3);
    assert_eq!(data["results"][0]["path"], "guides/vacuum.md");
    assert_eq!(data["rerank"]["applied"], true, "{data}");
    assert_eq!(data["rerank"]["model"], "bge-reranker-v2-m3");
    for (i, hit) in data["results"].as_array().unwrap().iter().enumerate() {
        assert_eq!(hit["rank"], i + 1);
        assert_eq!(hit["rerank"]["fused_rank"], i + 1, "{hit}");
        assert!(hit["rerank"]["score"].is_number());
    }
    assert!(data["timings"]["rerank_ms"].as_f64().unwrap() > 0.0);
    // What it was asked: the query, and the best four passages (more than
    // the three wanted), each as its text after the headings above it, all
    // to be scored.
    let (auth, body) = fake.seen.lock().unwrap()[0].clone();
    assert_eq!(auth.as_deref(), Some("Bearer rerank-key"));
    assert_eq!(body["query"], QUERY);
    assert_eq!(body["model"], "bge-reranker-v2-m3");
    let sent = body["documents"].as_array().unwrap();
    assert_eq!(sent.len(), 4, "{body}");
    assert_eq!(data["rerank"]["candidates"], 4);
    assert_eq!(body["top_n"], 4);
    let top = &data["results"][0];
    assert_eq!(sent[0], top["text"], "the passage opens with its heading");
    let third = &data["results"][2];
    assert_eq!(
        third["heading"],
        "Routine Vacuuming › Preventing Transaction ID Wraparound Failures"
    );
    assert_eq!(
        sent[2].as_str().unwrap(),
        format!("Routine Vacuuming\n{}", third["text"].as_str().unwrap()),
        "{third}"
    );

    // A reranker that prefers the HNSW passages: one of them comes first,
    // from further down the fused list, and the rest keep their fused order.
    fake.set(Mode::PreferHnsw);
    let data = search(json!({"query": QUERY, "limit": 3})).await;
    let results = data["results"].as_array().unwrap();
    assert_eq!(results.len(), 3);
    assert_eq!(results[0]["path"], "guides/indexes.md", "{data}");
    assert!(results[0]["text"].as_str().unwrap().contains("HNSW"));
    assert_eq!(results[0]["rerank"]["score"], 0.99);
    assert!(results[0]["rerank"]["fused_rank"].as_u64().unwrap() > 1);
    assert!(
        !results[0]["found_by"].as_array().unwrap().is_empty(),
        "the fusion's explanation stays"
    );
    let later: Vec<u64> = results
        .iter()
        .filter(|h| !h["text"].as_str().unwrap().contains("HNSW"))
        .map(|h| h["rerank"]["fused_rank"].as_u64().unwrap())
        .collect();
    assert!(later.is_sorted(), "{later:?}");

    // A reranker that scores only some: those first, the rest in fused order.
    fake.set(Mode::OnlySecond);
    let data = search(json!({"query": QUERY, "limit": 3})).await;
    assert_eq!(chunk_ids(&data), [fused[1], fused[0], fused[2]]);
    assert_eq!(data["results"][0]["rerank"]["score"], 0.7);
    assert!(data["results"][1].get("rerank").is_none());

    // Every failure: the fused order, no hit claims a rerank score, and the
    // answer says what went wrong.
    for (mode, says) in [
        (Mode::Http500, "answered HTTP 500"),
        (Mode::Stall, "timed out after 400 ms"),
        (Mode::NotJson, "unusable response"),
        (Mode::OutOfRange, "unusable response"),
    ] {
        fake.set(mode);
        let data = search(json!({"query": QUERY, "limit": 3})).await;
        assert_eq!(chunk_ids(&data), fused, "{mode:?}: {data}");
        assert_eq!(data["rerank"]["applied"], false, "{mode:?}");
        let error = data["rerank"]["error"].as_str().unwrap();
        assert!(
            error.contains(says) && error.contains("fused order"),
            "{mode:?}: {error}"
        );
        // Nothing of where the reranker lives or what it said.
        for secret in [
            server.addr().to_string().as_str(),
            "model not loaded",
            "gateway",
        ] {
            assert!(
                !error.contains(secret),
                "{mode:?}: {error} repeats {secret:?}"
            );
        }
        for hit in data["results"].as_array().unwrap() {
            assert!(hit.get("rerank").is_none(), "{mode:?}: {hit}");
        }
    }

    // A limit above the candidates sends that many; single-retriever modes
    // look as deep as the reranker needs.
    fake.set(Mode::Agree);
    let data = search(json!({"query": QUERY, "limit": 5})).await;
    assert_eq!(data["results"].as_array().unwrap().len(), 5);
    assert_eq!(fake.last()["documents"].as_array().unwrap().len(), 5);
    let data = search(json!({"query": QUERY, "limit": 2, "mode": "vector"})).await;
    assert_eq!(data["results"].as_array().unwrap().len(), 2);
    assert_eq!(fake.last()["documents"].as_array().unwrap().len(), 4);

    // Nothing found asks the reranker nothing.
    fake.set(Mode::Agree);
    let data = search(json!({"query": "zzyzxqv", "mode": "keyword"})).await;
    assert!(data["results"].as_array().unwrap().is_empty());
    assert!(data.get("rerank").is_none(), "{data}");
    assert!(fake.seen.lock().unwrap().is_empty());
}
