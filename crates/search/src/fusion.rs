//! Reciprocal rank fusion: merging ranked lists (vector hits, keyword hits)
//! whose scores are not comparable, using only each item's rank.

use std::cmp::Ordering;
use std::collections::HashMap;

/// The constant from Cormack, Clarke and Büttcher (2009): large enough that
/// the first few ranks of one list do not drown every other list.
pub const DEFAULT_RRF_K: f32 = 60.0;

/// A chunk after fusion.
#[derive(Clone, Debug, PartialEq)]
pub struct FusedHit {
    pub chunk_id: i64,
    /// Sum over the lists that hold the chunk of `1 / (k + rank)`.
    pub score: f32,
    /// The 1-based rank in each input list, in input order; `None` where the
    /// list does not hold the chunk.
    pub ranks: Vec<Option<usize>>,
}

/// Fuses ranked lists of chunk ids (best first) into one list of at most
/// `limit` hits, best first.
///
/// An id repeated within one list counts at its best rank only. A `k` that is
/// negative or not a number is replaced by [`DEFAULT_RRF_K`]. Equal scores
/// are ordered by the best rank reached in any list, then by the earlier
/// list reaching it (list order is the caller's priority), then by chunk id,
/// so the same input always gives the same output.
pub fn reciprocal_rank_fusion<L: AsRef<[i64]>>(lists: &[L], k: f32, limit: usize) -> Vec<FusedHit> {
    let k = if k >= 0.0 {
        f64::from(k)
    } else {
        f64::from(DEFAULT_RRF_K)
    };
    let mut ranks: HashMap<i64, Vec<Option<usize>>> = HashMap::new();
    for (list_index, list) in lists.iter().enumerate() {
        for (position, &chunk_id) in list.as_ref().iter().enumerate() {
            let slot = &mut ranks
                .entry(chunk_id)
                .or_insert_with(|| vec![None; lists.len()])[list_index];
            if slot.is_none() {
                *slot = Some(position + 1);
            }
        }
    }
    let mut fused: Vec<(FusedHit, f64, (usize, usize))> = ranks
        .into_iter()
        .map(|(chunk_id, ranks)| {
            let mut present: Vec<usize> = ranks.iter().flatten().copied().collect();
            // Summing in rank order makes equal rank sets give bit-equal
            // scores whatever list they came from.
            present.sort_unstable();
            let score: f64 = present.iter().map(|&r| 1.0 / (k + r as f64)).sum();
            let best = ranks
                .iter()
                .enumerate()
                .filter_map(|(list, rank)| rank.map(|r| (r, list)))
                .min()
                .unwrap_or((usize::MAX, usize::MAX));
            let hit = FusedHit {
                chunk_id,
                score: score as f32,
                ranks,
            };
            (hit, score, best)
        })
        .collect();
    fused.sort_by(|(a, a_score, a_best), (b, b_score, b_best)| {
        b_score
            .partial_cmp(a_score)
            .unwrap_or(Ordering::Equal)
            .then(a_best.cmp(b_best))
            .then(a.chunk_id.cmp(&b.chunk_id))
    });
    fused.truncate(limit);
    fused.into_iter().map(|(hit, _, _)| hit).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Fuses with k = 60 and compares the order of chunk ids.
    fn check(lists: &[&[i64]], limit: usize, expected: &[i64]) {
        let fused = reciprocal_rank_fusion(lists, DEFAULT_RRF_K, limit);
        let ids: Vec<i64> = fused.iter().map(|h| h.chunk_id).collect();
        assert_eq!(ids, expected, "fusing {lists:?}");
    }

    #[test]
    fn fusion_orders_by_combined_rank() {
        // Found by both lists beats first place in only one.
        check(&[&[1, 2, 3], &[3, 4, 5]], 10, &[3, 1, 2, 4, 5]);
        // Second in both beats first in one and absent in the other.
        check(&[&[1, 2], &[3, 2]], 10, &[2, 1, 3]);
        check(&[&[1, 2, 3], &[]], 2, &[1, 2]);
        check(&[], 10, &[]);
        check(&[&[7, 8]], 0, &[]);
    }

    #[test]
    fn fusion_breaks_ties_deterministically() {
        // Same rank in different lists: the earlier list wins.
        check(&[&[10], &[20]], 10, &[10, 20]);
        check(&[&[20], &[10]], 10, &[20, 10]);
        // Same ranks {1, 2} but reached differently: best rank 1 in list 0 first.
        check(&[&[5, 6], &[6, 5]], 10, &[5, 6]);
        // Exactly equal in every respect except id: the lower id first.
        check(&[&[3, 9], &[9, 3], &[]], 10, &[3, 9]);
    }

    #[test]
    fn fusion_reports_scores_and_ranks() {
        let fused = reciprocal_rank_fusion(&[vec![1, 2], vec![2, 2, 7]], 60.0, 10);
        let two = &fused[0];
        assert_eq!(two.chunk_id, 2);
        assert_eq!(two.ranks, vec![Some(2), Some(1)]);
        let expected = (1.0 / 61.0 + 1.0 / 62.0) as f32;
        assert!((two.score - expected).abs() < 1e-7, "score {}", two.score);
        let seven = fused
            .iter()
            .find(|h| h.chunk_id == 7)
            .map(|h| h.ranks.clone());
        assert_eq!(seven, Some(vec![None, Some(3)]));
    }

    #[test]
    fn fusion_replaces_a_nonsensical_k() {
        let fused = reciprocal_rank_fusion(&[[4i64]], f32::NAN, 1);
        assert!((fused[0].score - 1.0 / 61.0).abs() < 1e-7);
        let fused = reciprocal_rank_fusion(&[[4i64]], -5.0, 1);
        assert!((fused[0].score - 1.0 / 61.0).abs() < 1e-7);
    }
}
