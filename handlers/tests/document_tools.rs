//! document_info, read_document and list_sources over the real PostgreSQL,
//! including attempts to reach another space's documents.

// Test helpers report failure by panicking, like the tests that call them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::World;
use data_plane_registry::ErrorCode;
use serde_json::json;

#[tokio::test]
async fn document_info_shows_extracted_metadata() {
    let w = World::new().await;
    let alice = w.ctx(w.alice, Some(w.alpha));
    let id = w.doc("alpha/guides/vacuum.md");
    let info = w
        .ok("document_info", json!({ "document_id": id }), &alice)
        .await;
    assert_eq!(info["path"], "guides/vacuum.md");
    assert_eq!(info["title"], "Routine Vacuuming");
    assert_eq!(info["source"], "handbook");
    assert_eq!(info["metadata"]["format"], "markdown");
    let headings: Vec<&str> = info["metadata"]["headings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["text"].as_str().unwrap())
        .collect();
    assert_eq!(
        headings,
        [
            "Routine Vacuuming",
            "Recovering Disk Space",
            "Preventing Transaction ID Wraparound Failures"
        ]
    );
    assert!(info["metadata"]["word_count"].as_u64().unwrap() > 100);
    assert!(info["chunks"].as_i64().unwrap() >= 1);

    let csv = w
        .ok(
            "document_info",
            json!({ "document_id": w.doc("alpha/data/cities.csv") }),
            &alice,
        )
        .await;
    let table = &csv["metadata"]["tables"][0];
    assert_eq!(table["row_count"], 8);
    assert_eq!(table["columns"][2]["name"], "population");
    assert_eq!(table["columns"][2]["kind"], "integer");
}

#[tokio::test]
async fn read_document_pages_through_by_character_range() {
    let w = World::new().await;
    let alice = w.ctx(w.alice, None);
    let id = w.doc("alpha/guides/vacuum.md");
    let first = w
        .ok(
            "read_document",
            json!({ "document_id": id, "max_length": 100 }),
            &alice,
        )
        .await;
    assert_eq!(first["start"], 0);
    assert_eq!(first["end"], 100);
    assert_eq!(first["text"].as_str().unwrap().chars().count(), 100);
    let total = first["total_chars"].as_u64().unwrap();
    assert_eq!(first["next"]["start"], 100);
    assert_eq!(first["next"]["remaining_chars"], total - 100);

    let mut text = first["text"].as_str().unwrap().to_string();
    let mut next = first["next"]["start"].as_u64().unwrap();
    loop {
        let part = w
            .ok(
                "read_document",
                json!({ "document_id": id, "start": next, "max_length": 300 }),
                &alice,
            )
            .await;
        text.push_str(part["text"].as_str().unwrap());
        match part["next"]["start"].as_u64() {
            Some(n) => next = n,
            None => break,
        }
    }
    assert_eq!(text.chars().count() as u64, total);
    assert!(text[..40].contains("Routine Vacuuming"), "{text}");

    // Beyond the hard cap, or past the end: refused with the reason.
    let over = w
        .call(
            "read_document",
            json!({ "document_id": id, "max_length": 20_001 }),
            &alice,
        )
        .await;
    assert_eq!(over.code(), Some(ErrorCode::InvalidArguments));
    let past_end = w
        .call(
            "read_document",
            json!({ "document_id": id, "start": total + 1 }),
            &alice,
        )
        .await;
    assert_eq!(past_end.code(), Some(ErrorCode::InvalidArguments));
    assert!(past_end.error.unwrap().message.contains("beyond the end"));
}

#[tokio::test]
async fn list_sources_counts_documents_of_the_space() {
    let w = World::new().await;
    let data = w
        .ok("list_sources", json!({}), &w.ctx(w.alice, Some(w.alpha)))
        .await;
    let sources = data["sources"].as_array().unwrap();
    assert_eq!(sources.len(), 1);
    assert_eq!(sources[0]["name"], "handbook");
    assert_eq!(sources[0]["documents"], 5);
    assert_eq!(sources[0]["folders"], 4);
}

#[tokio::test]
async fn another_space_is_out_of_reach() {
    let w = World::new().await;
    let secret = w.doc("beta/plans/zanzibar.md");
    for ctx in [
        w.ctx(w.alice, None),
        w.ctx(w.alice, Some(w.alpha)),
        w.ctx(w.carol, None),
    ] {
        for tool in ["document_info", "read_document"] {
            let r = w.call(tool, json!({ "document_id": secret }), &ctx).await;
            assert_eq!(r.code(), Some(ErrorCode::NotFound), "{tool}: {r:?}");
            assert!(!format!("{r:?}").contains("Zanzibar"));
        }
    }
    // Naming a space one is not a member of is refused outright.
    let r = w
        .call("list_sources", json!({}), &w.ctx(w.alice, Some(w.beta)))
        .await;
    assert_eq!(r.code(), Some(ErrorCode::NotFound));
    // The owner of the space does see it.
    let bob = w.ctx(w.bob, Some(w.beta));
    let info = w
        .ok("document_info", json!({ "document_id": secret }), &bob)
        .await;
    assert_eq!(info["title"], "Project Zanzibar");
}
