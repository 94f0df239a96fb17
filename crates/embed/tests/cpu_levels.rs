//! The local model on the CPU levels below this machine's: `archmage`
//! turns its AVX-512 checks off for the whole process, then its AVX2 ones,
//! and a model loaded after that takes the kernels archmage dispatches (8-bit
//! dense layers, attention, row kernels) at that level. In 8 bits the AVX2
//! level must give the best level's vectors bit for bit, and every level a
//! text's vectors whatever its batch (docs/embeddings.md, "8-bit dense
//! layers"). At the portable level the float products of attention still
//! use the CPU's own FMA (matrixmultiply checks for itself), so its vectors
//! are not an old CPU's bits; the batch property holds all the same.
//!
//! One test in a binary of its own: the switch is process-wide and is left
//! off when the test ends. Needs the model files (`make setup`).

// The levels are x86-64's.
#![cfg(target_arch = "x86_64")]
// Tests fail loudly on the first broken step; that is what unwrap is for here.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use data_plane_embed::{Embedder, Precision, cosine};

fn int8(batch_size: usize) -> Embedder {
    common::embedder_with(batch_size, Precision::Int8)
}

fn arithmetic(embedder: &Embedder) -> &'static str {
    match embedder {
        Embedder::Local(local) => local.arithmetic(),
        _ => panic!("a local config gave another embedder"),
    }
}

/// Mixed lengths, a lone word to a long paragraph, so that batches mix the
/// short and the long path of every kernel.
fn texts() -> Vec<String> {
    [
        "vacuum",
        "how do I reclaim disk space taken by deleted rows",
        "PostgreSQL supports several index types: B-tree, hash, GiST, SP-GiST, GIN and BRIN, \
         each suited to different queries, and a partial index covers only the rows a \
         predicate selects, which keeps it small and cheap to maintain.",
        "two words",
        "",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect()
}

/// Each text embedded alone gives the bits it got in a batch of two.
async fn batch_independent(level: &str) -> Vec<Vec<f32>> {
    let texts = texts();
    let batched = int8(2).embed(&texts).await.unwrap();
    let single = int8(1);
    for (text, vector) in texts.iter().zip(&batched) {
        let alone = single.embed_query(text).await.unwrap();
        assert_eq!(&alone, vector, "{level}, {text:?}: alone vs in a batch");
    }
    batched
}

#[tokio::test]
async fn lower_cpu_levels_give_the_same_8_bit_vectors() {
    use archmage::{SimdToken, X64V3Token, X64V4Token};

    let best_arithmetic = arithmetic(&int8(16));
    let best = batch_independent(best_arithmetic).await;

    if X64V3Token::summon().is_none() {
        eprintln!("no AVX2 on this CPU: the portable kernel is all it runs");
        return;
    }
    if X64V4Token::summon().is_some() {
        X64V4Token::dangerously_disable_token_process_wide(true)
            .expect("a build for AVX-512 cannot turn its kernels off");
        assert_eq!(arithmetic(&int8(16)), "int8 (AVX2)");
        let avx2 = batch_independent("AVX2").await;
        assert_eq!(avx2, best, "AVX2 against {best_arithmetic}");
    }

    X64V3Token::dangerously_disable_token_process_wide(true)
        .expect("a build for AVX2 cannot turn its kernels off");
    assert_eq!(arithmetic(&int8(16)), "int8 (portable)");
    // Attention there is a general product, whose last bits differ.
    let portable = batch_independent("portable").await;
    for (a, b) in portable.iter().zip(&best) {
        let similarity = cosine(a, b);
        assert!(
            similarity > 0.999,
            "portable against best: cosine {similarity}"
        );
    }
}
