//! The local model against PyTorch sentence-transformers' own vectors, plus
//! the properties search relies on: similar meaning scores higher, a text's
//! vector does not depend on its batch neighbours, truncation at 256 tokens.
//!
//! Needs the model files: `make setup` puts them in `.data/model/`, or set
//! DATA_PLANE_MODEL_DIR. The fixture was written by
//! `benches/embed_pytorch.py reference` with sentence-transformers.

// Tests fail loudly on the first broken step; that is what unwrap is for here.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::embedder_with;
use std::path::PathBuf;

use data_plane_embed::{DIMENSION, EmbedConfig, Embedder, Precision, Provider, cosine};
use data_plane_testkit::model_dir;
use serde::Deserialize;

fn embedder() -> Embedder {
    Embedder::from_config(&EmbedConfig::local(model_dir())).unwrap()
}

#[derive(Deserialize)]
struct Reference {
    text: String,
    embedding: Vec<f32>,
}

/// Float32 computes the same function as PyTorch; 8 bits rounds every
/// dense layer's inputs and weights, which moves a vector by about a
/// hundredth of a degree of cosine (docs/embeddings.md).
#[tokio::test]
async fn vectors_match_sentence_transformers() {
    let fixture: Vec<Reference> =
        serde_json::from_str(include_str!("fixtures/reference_embeddings.json")).unwrap();
    let texts: Vec<String> = fixture.iter().map(|r| r.text.clone()).collect();
    for (precision, least) in [(Precision::Float32, 0.999), (Precision::Int8, 0.99)] {
        let vectors = embedder_with(16, precision).embed(&texts).await.unwrap();
        assert_eq!(vectors.len(), fixture.len());
        for (reference, vector) in fixture.iter().zip(&vectors) {
            let similarity = cosine(&reference.embedding, vector);
            eprintln!("{precision:?}: cosine {similarity}");
            assert!(
                similarity >= least,
                "{precision:?}: cosine {similarity} with sentence-transformers for {:?}",
                &reference.text.chars().take(60).collect::<String>()
            );
        }
    }
}

#[tokio::test]
async fn vectors_are_unit_length_with_the_model_dimension() {
    let embedder = embedder();
    assert_eq!(embedder.dimension(), DIMENSION);
    assert_eq!(embedder.model_id(), "all-MiniLM-L6-v2");
    let texts = vec![
        "short".to_owned(),
        String::new(),
        "a longer sentence about databases".repeat(20),
    ];
    for vector in embedder.embed(&texts).await.unwrap() {
        assert_eq!(vector.len(), DIMENSION);
        let norm = vector.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-4, "norm {norm}");
    }
}

#[tokio::test]
async fn a_paraphrase_scores_higher_than_an_unrelated_sentence() {
    let embedder = embedder();
    // (query, paraphrase, unrelated)
    let cases = [
        (
            "How do I speed up slow SQL queries?",
            "Ways to make database queries run faster",
            "The recipe needs two cups of flour and an egg.",
        ),
        (
            "The cat sat quietly on the warm windowsill.",
            "A kitten was resting calmly on the sunny window ledge.",
            "Quarterly revenue rose by twelve percent thanks to strong exports.",
        ),
        (
            "Who won the football match yesterday?",
            "Which team was victorious in last night's soccer game?",
            "Row-level security restricts which rows a user can read.",
        ),
    ];
    for (query, paraphrase, unrelated) in cases {
        let q = embedder.embed_query(query).await.unwrap();
        let vectors = embedder
            .embed(&[paraphrase.to_owned(), unrelated.to_owned()])
            .await
            .unwrap();
        let near = cosine(&q, &vectors[0]);
        let far = cosine(&q, &vectors[1]);
        assert!(
            near > far + 0.2,
            "{query:?}: paraphrase {near} should beat unrelated {far}"
        );
    }
}

#[tokio::test]
async fn a_text_gets_the_same_vector_whatever_its_batch() {
    // Mixed lengths in small batches force padding; it must not leak into the
    // result, and the output order must follow the input order.
    let texts: Vec<String> = [
        "one",
        "a sentence of moderate length about indexes and vacuum",
        "two words",
        "PostgreSQL supports several index types: B-tree, hash, GiST, SP-GiST, GIN and BRIN, each suited to different queries",
        "",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    for precision in [Precision::Float32, Precision::Int8] {
        let batched = embedder_with(2, precision).embed(&texts).await.unwrap();
        let single = embedder_with(1, precision);
        // In 8 bits, on any kernel, nothing in a text's arithmetic depends
        // on its neighbours (attention runs the same code for every batch):
        // the same bits.
        let exact = matches!(&single, Embedder::Local(local)
            if local.arithmetic().starts_with("int8"));
        for (text, vector) in texts.iter().zip(&batched) {
            let alone = single.embed_query(text).await.unwrap();
            if exact {
                assert_eq!(&alone, vector, "{text:?}: batched vs alone");
            }
            let similarity = cosine(&alone, vector);
            assert!(
                similarity > 0.9999,
                "{precision:?}, {text:?}: batched vs alone cosine {similarity}"
            );
        }
    }
}

#[tokio::test]
async fn text_beyond_256_tokens_is_ignored() {
    let embedder = embedder();
    let Embedder::Local(local) = &embedder else {
        panic!("local config gave a remote embedder");
    };
    let head = "Autovacuum reclaims the space of dead rows in busy tables. ".repeat(40);
    assert!(
        local.token_count(&head).unwrap() == 256,
        "head should fill the window"
    );
    let with_tail = format!("{head} Completely different words about cooking pasta at home.");
    let vectors = embedder.embed(&[head, with_tail]).await.unwrap();
    let similarity = cosine(&vectors[0], &vectors[1]);
    assert!(
        similarity > 0.99999,
        "tail changed the vector: cosine {similarity}"
    );
}

#[tokio::test]
async fn no_texts_give_no_vectors() {
    assert!(embedder().embed(&[]).await.unwrap().is_empty());
}

fn check_config_error(provider: Provider, expected: &[&str]) {
    let error = Embedder::from_config(&EmbedConfig { provider })
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

#[test]
fn bad_local_configuration_is_refused_with_a_clear_message() {
    let empty_dir = tempfile::tempdir().unwrap();
    let empty = empty_dir.path().to_path_buf();
    let local = |model_dir: PathBuf, threads, batch_size, max_tokens| Provider::Local {
        model_dir,
        threads,
        batch_size,
        max_tokens,
        precision: Precision::Auto,
    };
    check_config_error(
        local(empty.clone(), None, 16, 256),
        &[
            &empty.join("config.json").display().to_string(),
            "make setup",
        ],
    );
    check_config_error(local(model_dir(), None, 0, 256), &["batch size 0"]);
    check_config_error(local(model_dir(), Some(0), 16, 256), &["thread count 0"]);
    check_config_error(
        local(model_dir(), None, 16, 1000),
        &["max tokens 1000", "512"],
    );
}
