//! search_documents over the real PostgreSQL, local model and Tantivy index:
//! each mode finds what a user would expect, filters narrow, offsets cite the
//! exact span, another space never leaks, and a selective filter still gets
//! the requested number of nearest neighbours.

// Test helpers report failure by panicking, like the tests that call them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::HashMap;

use common::World;
use data_plane_handlers::search_documents;
use data_plane_registry::{ErrorCode, ToolContext};
use data_plane_store::Scope;
use data_plane_store::content::{self, NewChunk, NewDocument, SourceKind};
use data_plane_store::identity::{self, MembershipRole};
use data_plane_store::passages::{ChunkFilters as Filters, VectorStrategy};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};
use uuid::Uuid;

/// The paths of the results, best first.
fn paths(data: &Value) -> Vec<String> {
    data["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["path"].as_str().unwrap().to_string())
        .collect()
}

fn retrievers(hit: &Value) -> Vec<String> {
    hit["found_by"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["retriever"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn each_mode_finds_the_expected_passage() {
    let w = World::new().await;
    let alice = w.ctx(w.alice, Some(w.alpha));

    async fn check(w: &World, ctx: &ToolContext, mode: &str, query: &str, expected: &str) {
        let data = w
            .ok(
                "search_documents",
                json!({ "query": query, "mode": mode, "limit": 5 }),
                ctx,
            )
            .await;
        let found = paths(&data);
        assert_eq!(
            found.first().map(String::as_str),
            Some(expected),
            "{mode} search for {query:?} found {found:?}"
        );
        assert_eq!(data["mode"], mode);
        for hit in data["results"].as_array().unwrap() {
            let by = retrievers(hit);
            match mode {
                "hybrid" => assert!(!by.is_empty(), "{hit}"),
                other => assert_eq!(by, [other], "{hit}"),
            }
        }
    }

    let cases = [
        (
            "vector",
            "how do I reclaim disk space from dead rows",
            "guides/vacuum.md",
        ),
        (
            "hybrid",
            "how do I reclaim disk space from dead rows",
            "guides/vacuum.md",
        ),
        (
            "vector",
            "a graph for approximate nearest neighbour lookups",
            "guides/indexes.md",
        ),
        (
            "hybrid",
            "turn text into lower case",
            "reference/functions.html",
        ),
        ("keyword", "regexp_replace", "reference/functions.html"),
        ("keyword", "TODO-4711", "notes/meeting-2024-03.txt"),
        (
            "keyword",
            "\"transaction ID wraparound\"",
            "guides/vacuum.md",
        ),
        ("keyword", "Linus rollback", "notes/meeting-2024-03.txt"),
    ];
    for (mode, query, expected) in cases {
        check(&w, &alice, mode, query, expected).await;
    }

    // Hybrid says which retrievers found a passage: the vacuum guide both
    // means the question and shares its words.
    let data = w
        .ok(
            "search_documents",
            json!({ "query": "reclaim disk space from dead rows" }),
            &alice,
        )
        .await;
    let top = &data["results"][0];
    assert_eq!(top["path"], "guides/vacuum.md");
    assert_eq!(retrievers(top), ["vector", "keyword"]);
    assert_eq!(data["scoring"], "convex");
    for part in ["embed_ms", "vector_ms", "keyword_ms", "total_ms"] {
        assert!(data["timings"][part].is_number(), "{part} in {data}");
    }
    assert!(data["timings"]["embed_ms"].as_f64().unwrap() > 0.0);
    // The admin setting chooses reciprocal rank fusion instead: the same
    // passage on top, scored by rank.
    let settings = data_plane_handlers::settings().with(
        &data_plane_handlers::search_documents::FUSION,
        data_plane_search::Fusion::Rrf { k: 60.0 },
    );
    let rrf_ctx = alice.clone().with_settings(std::sync::Arc::new(settings));
    let data = w
        .ok(
            "search_documents",
            json!({ "query": "reclaim disk space from dead rows" }),
            &rrf_ctx,
        )
        .await;
    assert_eq!(data["scoring"], "rrf");
    assert_eq!(data["results"][0]["path"], "guides/vacuum.md");
    let both = 1.0 / 61.0 * 2.0;
    assert!(data["results"][0]["score"].as_f64().unwrap() <= both + 1e-6);

    // The limit is honoured.
    let data = w
        .ok(
            "search_documents",
            json!({ "query": "PostgreSQL", "mode": "keyword", "limit": 2 }),
            &alice,
        )
        .await;
    assert_eq!(data["results"].as_array().unwrap().len(), 2);
}

#[tokio::test]
async fn results_cite_the_exact_span() {
    let w = World::new().await;
    let alice = w.ctx(w.alice, None);
    for (mode, query) in [
        ("hybrid", "how do I reclaim disk space from dead rows"),
        ("vector", "index types"),
        ("keyword", "PostgreSQL"),
        ("keyword", "budget"),
    ] {
        let data = w
            .ok(
                "search_documents",
                json!({ "query": query, "mode": mode, "limit": 50 }),
                &alice,
            )
            .await;
        let hits = data["results"].as_array().unwrap();
        assert!(!hits.is_empty(), "{mode} {query:?} found nothing");
        for hit in hits {
            let start = hit["char_start"].as_u64().unwrap();
            let end = hit["char_end"].as_u64().unwrap();
            let span = w
                .ok(
                    "read_document",
                    json!({ "document_id": hit["document_id"], "start": start,
                            "max_length": end - start }),
                    &alice,
                )
                .await;
            assert_eq!(span["text"], hit["text"], "offsets of {hit}");
        }
    }
    // Markdown passages carry their heading path.
    let data = w
        .ok(
            "search_documents",
            json!({ "query": "VACUUM FULL rewrites the table", "mode": "keyword", "limit": 1 }),
            &alice,
        )
        .await;
    let heading = data["results"][0]["heading"].as_str().unwrap();
    assert!(heading.starts_with("Routine Vacuuming"), "{heading}");
}

#[tokio::test]
async fn filters_narrow_the_search() {
    let w = World::new().await;
    let alice = w.ctx(w.alice, None);
    let indexes = w.doc("alpha/guides/indexes.md");

    /// Runs a search and checks every hit's path passes `allowed`, and that
    /// `must` is among them.
    async fn check(w: &World, ctx: &ToolContext, args: Value, allowed: &str, must: &str) {
        let data = w.ok("search_documents", args.clone(), ctx).await;
        let found = paths(&data);
        assert!(
            found.iter().all(|p| p.starts_with(allowed)),
            "{args}: {found:?} outside {allowed:?}"
        );
        assert!(
            found.iter().any(|p| p == must),
            "{args}: {found:?} lacks {must}"
        );
    }

    for folder in ["guides", "/guides", "guides/", "/guides/", "guides//"] {
        for mode in ["hybrid", "vector", "keyword"] {
            check(
                &w,
                &alice,
                json!({ "query": "PostgreSQL", "mode": mode, "folder": folder, "limit": 50 }),
                "guides/",
                "guides/vacuum.md",
            )
            .await;
        }
    }
    for mode in ["hybrid", "vector", "keyword"] {
        // Even for a question about vacuuming, only the chosen document answers.
        check(
            &w,
            &alice,
            json!({ "query": "vacuum indexes", "mode": mode, "document_id": indexes }),
            "guides/indexes.md",
            "guides/indexes.md",
        )
        .await;
        check(
            &w,
            &alice,
            json!({ "query": "budget approved", "mode": mode, "source_id": w.alpha_source,
                    "folder": "notes" }),
            "notes/",
            "notes/meeting-2024-03.txt",
        )
        .await;
    }
    // The root folder is the whole source.
    check(
        &w,
        &alice,
        json!({ "query": "string functions PostgreSQL", "mode": "keyword", "folder": "/",
                "limit": 50 }),
        "",
        "reference/functions.html",
    )
    .await;

    // Filters that name nothing the caller can read are refused, with the
    // same answer whether the thing is missing or in another space.
    let refused = [
        (json!({ "folder": "gui" }), ErrorCode::NotFound, "folder"),
        (json!({ "folder": "plans" }), ErrorCode::NotFound, "folder"),
        (
            json!({ "folder": "../guides" }),
            ErrorCode::InvalidArguments,
            "..",
        ),
        (
            json!({ "source_id": w.beta_source }),
            ErrorCode::NotFound,
            "no source",
        ),
        (
            json!({ "source_id": Uuid::new_v4() }),
            ErrorCode::NotFound,
            "no source",
        ),
        (
            json!({ "document_id": w.doc("beta/plans/zanzibar.md") }),
            ErrorCode::NotFound,
            "no document",
        ),
        (
            json!({ "folder": "notes", "source_id": w.beta_source }),
            ErrorCode::NotFound,
            "no source",
        ),
        (
            json!({ "mode": "fuzzy" }),
            ErrorCode::InvalidArguments,
            "mode",
        ),
        (json!({ "limit": 0 }), ErrorCode::InvalidArguments, "limit"),
    ];
    for (extra, code, words) in refused {
        let mut args = json!({ "query": "vacuum" });
        args.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        let r = w.call("search_documents", args.clone(), &alice).await;
        assert_eq!(r.code(), Some(code), "{args}: {r:?}");
        let message = r.error.unwrap().message;
        assert!(message.contains(words), "{args}: {message}");
        assert!(!message.contains("Zanzibar") && !message.contains("secret"));
    }
}

#[tokio::test]
async fn another_space_never_leaks() {
    let w = World::new().await;
    let zanzibar = w.doc("beta/plans/zanzibar.md");
    let queries = [
        "Zanzibar",
        "vacuum maintenance window budget",
        "HNSW and B-tree indexes will be rebuilt",
        "salary",
    ];
    for ctx in [w.ctx(w.alice, None), w.ctx(w.alice, Some(w.alpha))] {
        for mode in ["hybrid", "vector", "keyword"] {
            for query in queries {
                let data = w
                    .ok(
                        "search_documents",
                        json!({ "query": query, "mode": mode, "limit": 50 }),
                        &ctx,
                    )
                    .await;
                for hit in data["results"].as_array().unwrap() {
                    assert_eq!(hit["space_id"], json!(w.alpha), "{mode} {query:?}: {hit}");
                    assert_ne!(hit["document_id"], json!(zanzibar));
                }
                let text = data.to_string();
                assert!(!text.contains("Zanzibar") || query == "Zanzibar");
                assert!(!text.contains("99,000") && !text.contains("120000"));
            }
        }
        let data = w
            .ok(
                "search_documents",
                json!({ "query": "Zanzibar", "mode": "keyword" }),
                &ctx,
            )
            .await;
        assert_eq!(data["results"], json!([]), "{data}");
    }
    // The words are there to be found by the space's member.
    let bob = w.ctx(w.bob, None);
    for mode in ["hybrid", "vector", "keyword"] {
        let data = w
            .ok(
                "search_documents",
                json!({ "query": "Project Zanzibar", "mode": mode }),
                &bob,
            )
            .await;
        assert_eq!(data["results"][0]["document_id"], json!(zanzibar), "{mode}");
    }
    // Carol belongs nowhere: nothing, in any mode.
    for mode in ["hybrid", "vector", "keyword"] {
        let data = w
            .ok(
                "search_documents",
                json!({ "query": "vacuum", "mode": mode }),
                &w.ctx(w.carol, None),
            )
            .await;
        assert_eq!(data["results"], json!([]));
        assert!(data["note"].as_str().unwrap().contains("no space"));
    }
    // Naming a space one is not a member of is refused outright.
    for (user, space) in [(w.alice, w.beta), (w.carol, w.alpha)] {
        let r = w
            .call(
                "search_documents",
                json!({ "query": "vacuum" }),
                &w.ctx(user, Some(space)),
            )
            .await;
        assert_eq!(r.code(), Some(ErrorCode::NotFound));
    }
}

#[tokio::test]
async fn a_deleted_document_is_gone_before_the_keyword_index_catches_up() {
    let w = World::new().await;
    let alice = w.ctx(w.alice, Some(w.alpha));
    let vacuum = w.doc("alpha/guides/vacuum.md");
    let mut tx = w.test.db.begin(Scope::System).await.unwrap();
    assert!(content::delete_document(&mut tx, vacuum).await.unwrap());
    tx.commit().await.unwrap();
    // The index still holds the guide (nothing follows the log here); the
    // answer does not, and the places it took go to the next passages.
    for mode in ["keyword", "hybrid"] {
        let data = w
            .ok(
                "search_documents",
                json!({ "query": "PostgreSQL VACUUM", "mode": mode, "limit": 2 }),
                &alice,
            )
            .await;
        let found = paths(&data);
        assert_eq!(found.len(), 2, "{mode}: {found:?}");
        assert!(!found.contains(&"guides/vacuum.md".to_string()), "{mode}");
    }
}

#[tokio::test]
async fn odd_queries_and_an_empty_space_get_clear_answers() {
    let w = World::new().await;
    let alice = w.ctx(w.alice, None);
    for query in ["?!...", "   ", "\"\"", "-- ** //"] {
        for mode in ["hybrid", "keyword"] {
            let r = w
                .call(
                    "search_documents",
                    json!({ "query": query, "mode": mode }),
                    &alice,
                )
                .await;
            assert_eq!(r.code(), Some(ErrorCode::InvalidArguments), "{query:?}");
            assert!(r.error.unwrap().message.contains("no words"));
        }
    }
    // Only stop words: no failure, and keyword answers only where the words occur.
    for mode in ["hybrid", "vector", "keyword"] {
        let data = w
            .ok(
                "search_documents",
                json!({ "query": "the of and", "mode": mode }),
                &alice,
            )
            .await;
        assert!(data["results"].is_array());
    }
    let data = w
        .ok(
            "search_documents",
            json!({ "query": "xylophone quasar", "mode": "keyword" }),
            &alice,
        )
        .await;
    assert_eq!(data["results"], json!([]));
    assert!(
        data["note"]
            .as_str()
            .unwrap()
            .contains("no passage contains")
    );

    // A space with no documents yet.
    let mut tx = w.test.db.begin(Scope::System).await.unwrap();
    let (empty, _) = identity::ensure_space(&mut tx, "empty").await.unwrap();
    identity::add_member(&mut tx, empty.id, w.carol, MembershipRole::Viewer)
        .await
        .unwrap();
    tx.commit().await.unwrap();
    for mode in ["hybrid", "vector", "keyword"] {
        let data = w
            .ok(
                "search_documents",
                json!({ "query": "vacuum", "mode": mode }),
                &w.ctx(w.carol, Some(empty.id)),
            )
            .await;
        assert_eq!(data["results"], json!([]));
        assert!(data["note"].as_str().unwrap().contains("no passages yet"));
    }
}

/// Chunk ids with their vectors.
type Vectors = [(i64, Vec<f32>)];

fn unit_vector(rng: &mut StdRng) -> Vec<f32> {
    let mut v: Vec<f32> = (0..384).map(|_| rng.random_range(-1.0f32..1.0)).collect();
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    v.iter_mut().for_each(|x| *x /= norm);
    v
}

/// An English plain-text document whose passages are the given texts (one
/// per line) with their vectors.
fn plain_document(
    space_id: Uuid,
    source_id: Uuid,
    path: &str,
    title: Option<&str>,
    passages: Vec<(String, Vec<f32>)>,
) -> NewDocument {
    let mut body = String::new();
    let mut chunks = Vec::new();
    for (text, embedding) in passages {
        let start = body.chars().count() as i32;
        body.push_str(&text);
        chunks.push(NewChunk {
            char_start: start,
            char_end: body.chars().count() as i32,
            heading: String::new(),
            page: None,
            text,
            embedding,
        });
        body.push('\n');
    }
    NewDocument {
        space_id,
        source_id,
        path: path.into(),
        mime: "text/plain".into(),
        size_bytes: body.len() as i64,
        content_hash: format!("synthetic {path}"),
        title: title.map(String::from),
        language: Some("en".into()),
        content: body,
        metadata: json!({}),
        chunks,
        tables: vec![],
    }
}

/// Writes `documents` in one transaction and brings the keyword index up to
/// date with them.
async fn write_and_index(w: &World, documents: &[NewDocument]) {
    let mut tx = w.test.db.begin(Scope::System).await.unwrap();
    for doc in documents {
        content::write_document(&mut tx, doc).await.unwrap();
    }
    tx.commit().await.unwrap();
    data_plane_search::follower::Follower::new(w.test.db.clone(), w.deps.index.clone())
        .catch_up()
        .await
        .unwrap();
}

/// Writes a document of `n` synthetic chunks with random vectors, or with
/// vectors close to `near` (cosine about 0.9) when given; returns its chunk
/// ids with their vectors.
async fn write_synthetic(
    w: &World,
    space_id: Uuid,
    source_id: Uuid,
    path: &str,
    n: usize,
    rng: &mut StdRng,
    near: Option<&[f32]>,
) -> Vec<(i64, Vec<f32>)> {
    let passages: Vec<(String, Vec<f32>)> = (0..n)
        .map(|i| {
            let embedding = match near {
                None => unit_vector(rng),
                Some(target) => {
                    let noise = unit_vector(rng);
                    let mut v: Vec<f32> = target
                        .iter()
                        .zip(&noise)
                        .map(|(t, n)| t + 0.5 * n)
                        .collect();
                    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
                    v.iter_mut().for_each(|x| *x /= norm);
                    v
                }
            };
            (format!("synthetic passage {i} of {path}"), embedding)
        })
        .collect();
    let vectors: Vec<Vec<f32>> = passages.iter().map(|(_, v)| v.clone()).collect();
    let doc = plain_document(space_id, source_id, path, None, passages);
    let mut tx = w.test.db.begin(Scope::System).await.unwrap();
    let id = match content::write_document(&mut tx, &doc).await.unwrap() {
        content::WriteOutcome::Created(id) => id,
        other => panic!("{path} was not created: {other:?}"),
    };
    let ids: Vec<(i64, i32)> =
        sqlx::query_as("SELECT id, ordinal FROM chunks WHERE document_id = $1")
            .bind(id)
            .fetch_all(&mut *tx)
            .await
            .unwrap();
    tx.commit().await.unwrap();
    ids.into_iter()
        .map(|(id, ordinal)| (id, vectors[ordinal as usize].clone()))
        .collect()
}

/// The ids of the `k` chunks nearest to `q` by cosine distance.
fn exact_top(q: &[f32], chunks: &Vectors, k: usize) -> Vec<i64> {
    let mut scored: Vec<(f32, i64)> = chunks
        .iter()
        .map(|(id, v)| (-v.iter().zip(q).map(|(a, b)| a * b).sum::<f32>(), *id))
        .collect();
    scored.sort_by(|a, b| a.partial_cmp(b).unwrap());
    scored.into_iter().take(k).map(|(_, id)| id).collect()
}

fn chunk_ids(data: &Value) -> Vec<i64> {
    data["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["chunk_id"].as_i64().unwrap())
        .collect()
}

#[tokio::test]
async fn a_selective_filter_still_gets_the_nearest_k() {
    let w = World::new().await;
    let mut rng = StdRng::seed_from_u64(42);
    let mut tx = w.test.db.begin(Scope::System).await.unwrap();
    let (big, _) = identity::ensure_space(&mut tx, "big").await.unwrap();
    let (small, _) = identity::ensure_space(&mut tx, "small").await.unwrap();
    let big_source = content::ensure_source(&mut tx, big.id, "bulk", SourceKind::Files)
        .await
        .unwrap();
    let small_source = content::ensure_source(&mut tx, small.id, "few", SourceKind::Files)
        .await
        .unwrap();
    for space in [big.id, small.id] {
        identity::add_member(&mut tx, space, w.alice, MembershipRole::Viewer)
            .await
            .unwrap();
    }
    // Carol reads the small space alone, so row-level security is her only filter.
    identity::add_member(&mut tx, small.id, w.carol, MembershipRole::Viewer)
        .await
        .unwrap();
    tx.commit().await.unwrap();

    let query = "how do I reclaim disk space from dead rows";
    let q = common::embedder().embed_query(query).await.unwrap();

    // Past the exact-scan threshold, so the big space goes through the index.
    let mut big_chunks = Vec::new();
    for d in 0..110 {
        let path = format!("part-{}/doc-{d:03}.txt", d % 10);
        big_chunks
            .extend(write_synthetic(&w, big.id, big_source.id, &path, 50, &mut rng, None).await);
    }
    let rare = write_synthetic(
        &w,
        big.id,
        big_source.id,
        "rare/doc.txt",
        30,
        &mut rng,
        None,
    )
    .await;
    big_chunks.extend(rare.clone());
    // Random 384-dimensional vectors are all about equally far from the
    // query, so their top 10 is a coin toss for any approximate index; ten
    // passages that really are close to it make a top 10 the index must find.
    let planted = write_synthetic(
        &w,
        big.id,
        big_source.id,
        "planted/doc.txt",
        10,
        &mut rng,
        Some(&q),
    )
    .await;
    big_chunks.extend(planted.clone());
    assert!(big_chunks.len() as i64 > search_documents::EXACT_MAX_CHUNKS);
    let small_chunks =
        write_synthetic(&w, small.id, small_source.id, "few.txt", 20, &mut rng, None).await;
    let vector = |extra: Value| {
        let mut args = json!({ "query": query, "mode": "vector", "limit": 10 });
        args.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        args
    };

    // One space among many, a folder holding 30 of 5,540 chunks, and
    // row-level security alone: each returns exactly the exact top 10.
    let cases: [(ToolContext, Value, &Vectors); 4] = [
        (w.ctx(w.alice, Some(small.id)), json!({}), &small_chunks),
        (w.ctx(w.carol, None), json!({}), &small_chunks),
        (
            w.ctx(w.alice, Some(big.id)),
            json!({ "folder": "rare" }),
            &rare,
        ),
        (
            w.ctx(w.alice, None),
            json!({ "source_id": small_source.id }),
            &small_chunks,
        ),
    ];
    for (ctx, extra, scope) in cases {
        let args = vector(extra);
        let data = w.ok("search_documents", args.clone(), &ctx).await;
        assert_eq!(chunk_ids(&data), exact_top(&q, scope, 10), "{args}");
        assert_eq!(data["vector_strategy"], "exact");
    }

    // The big space is searched through the index and still returns 10.
    let data = w
        .ok(
            "search_documents",
            vector(json!({})),
            &w.ctx(w.alice, Some(big.id)),
        )
        .await;
    assert_eq!(data["vector_strategy"], "index");
    let found = chunk_ids(&data);
    let truth = exact_top(&q, &big_chunks, 10);
    let mut planted_ids: Vec<i64> = planted.iter().map(|(id, _)| *id).collect();
    planted_ids.sort();
    let mut sorted_truth = truth.clone();
    sorted_truth.sort();
    assert_eq!(
        sorted_truth, planted_ids,
        "the planted passages are the true top 10"
    );
    let recalled = found.iter().filter(|id| truth.contains(id)).count();
    assert_eq!(found.len(), 10);
    assert!(recalled >= 9, "index recall {recalled}/10");

    // The index path alone, under the most selective filter there is: the
    // query names both spaces, so the planner expects every chunk to pass
    // and walks the graph, but carol may read only the 20 chunks of the
    // small one (1 in 277). Iterative scanning still finds 10, and with the
    // exact fallback they are the true 10.
    let filters = Filters {
        spaces: vec![big.id, small.id],
        source_id: None,
        document_id: None,
        folder: None,
    };
    let mut tx = w.test.db.begin(Scope::User(w.carol)).await.unwrap();
    let by_index = search_documents::nearest(&mut tx, &q, &filters, 10, VectorStrategy::Index)
        .await
        .unwrap();
    assert_eq!(by_index.hits.len(), 10);
    let checked =
        search_documents::nearest(&mut tx, &q, &filters, 10, VectorStrategy::IndexThenExact)
            .await
            .unwrap();
    let ids: Vec<i64> = checked.hits.iter().map(|h| h.chunk_id).collect();
    assert_eq!(ids, exact_top(&q, &small_chunks, 10));

    // Asking for more than exist returns all there are, nearest first.
    let data = w
        .ok(
            "search_documents",
            json!({ "query": query, "mode": "vector", "limit": 50 }),
            &w.ctx(w.carol, None),
        )
        .await;
    assert_eq!(chunk_ids(&data), exact_top(&q, &small_chunks, 50));
    let distances: HashMap<i64, f64> = checked
        .hits
        .iter()
        .map(|h| (h.chunk_id, h.distance))
        .collect();
    let first = &data["results"][0];
    let similarity = first["score"].as_f64().unwrap();
    let distance = distances[&first["chunk_id"].as_i64().unwrap()];
    assert!((similarity - (1.0 - distance)).abs() < 1e-6);
}

/// A document's title reaches every one of its passages in keyword search,
/// through the index follower, and the admin's field weights decide how
/// much: a title weight of 0 leaves titles out.
#[tokio::test]
async fn the_title_weight_setting_reaches_keyword_search() {
    let w = World::new().await;
    let alice = w.ctx(w.alice, Some(w.alpha));
    let mut rng = StdRng::seed_from_u64(5);
    let passages = [
        "Counts rose on the island this year.",
        "Rangers walked every trail twice.",
    ]
    .map(|text| (text.to_string(), unit_vector(&mut rng)));
    let doc = plain_document(
        w.alpha,
        w.alpha_source,
        "notes/census.txt",
        Some("Quokka census"),
        passages.to_vec(),
    );
    write_and_index(&w, &[doc]).await;

    let search = async |ctx: &ToolContext| {
        let data = w
            .ok(
                "search_documents",
                json!({ "query": "quokkas", "mode": "keyword" }),
                ctx,
            )
            .await;
        paths(&data)
    };
    assert_eq!(
        search(&alice).await,
        ["notes/census.txt", "notes/census.txt"]
    );
    let settings = data_plane_handlers::settings().with(
        &search_documents::FIELD_WEIGHTS,
        serde_json::from_value(json!({"title": 0})).unwrap(),
    );
    let no_titles = alice.clone().with_settings(std::sync::Arc::new(settings));
    assert!(search(&no_titles).await.is_empty());
}

/// `search_bm25` reaches keyword search: a low k1 lets three mentions in a
/// long passage beat one in a short passage, Tantivy's 1.2 the other way
/// round (the ranking itself is tested in the search crate).
#[tokio::test]
async fn the_bm25_setting_reaches_keyword_search() {
    let w = World::new().await;
    let alice = w.ctx(w.alice, Some(w.alpha));
    let mut rng = StdRng::seed_from_u64(6);
    let filler = "the survey counted mosses ferns and grasses along the northern ridge";
    let long = format!(
        "lichen grows slowly on the exposed rock. {filler}. {filler}. lichen survives \
         drought by drying out. {filler}. {filler}. a lichen is a partnership of fungus and alga."
    );
    let mut documents = vec![
        ("notes/long.txt", long),
        ("notes/short.txt", "lichen on the old wall".to_string()),
    ];
    let fillers: Vec<String> = (0..9).map(|n| format!("notes/filler-{n}.txt")).collect();
    for path in &fillers {
        documents.push((path.as_str(), filler.to_string()));
    }
    let documents: Vec<NewDocument> = documents
        .into_iter()
        .map(|(path, text)| {
            let passages = vec![(text, unit_vector(&mut rng))];
            plain_document(w.alpha, w.alpha_source, path, None, passages)
        })
        .collect();
    write_and_index(&w, &documents).await;

    let search = async |k1: f64| {
        let settings = data_plane_handlers::settings().with(
            &search_documents::BM25,
            serde_json::from_value(json!({ "k1": k1 })).unwrap(),
        );
        let ctx = alice.clone().with_settings(std::sync::Arc::new(settings));
        let data = w
            .ok(
                "search_documents",
                json!({ "query": "lichen", "mode": "keyword" }),
                &ctx,
            )
            .await;
        paths(&data)
    };
    assert_eq!(search(1.2).await, ["notes/short.txt", "notes/long.txt"]);
    assert_eq!(search(0.35).await, ["notes/long.txt", "notes/short.txt"]);
}
