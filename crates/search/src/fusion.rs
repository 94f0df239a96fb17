//! Reciprocal rank fusion: merging ranked lists (vector hits, keyword hits)
//! whose scores are not comparable, using only each item's rank.

use std::cmp::Ordering;
use std::collections::HashMap;

use serde::{Deserialize, Serialize};

/// The constant from Cormack, Clarke and Büttcher (2009): large enough that
/// the first few ranks of one list do not drown every other list.
pub const DEFAULT_RRF_K: f32 = 60.0;

/// A chunk after fusion.
#[derive(Clone, Debug, PartialEq)]
pub struct FusedHit {
    pub chunk_id: i64,
    /// Sum over the lists that hold the chunk of its part: `1 / (k + rank)`
    /// for reciprocal rank fusion, the weighted scaled score for a convex
    /// combination.
    pub score: f32,
    /// The 1-based rank in each input list, in input order; `None` where the
    /// list does not hold the chunk.
    pub ranks: Vec<Option<usize>>,
}

/// How hybrid search merges its ranked lists (vector first, then keyword),
/// an admin setting (`search_fusion`, docs/search.md).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "FusionSpec", into = "FusionSpec")]
pub enum Fusion {
    /// Reciprocal rank fusion: each list adds `1 / (k + rank)`; scores are
    /// not used.
    Rrf { k: f32 },
    /// A convex combination of the lists' scores, each list's scaled on
    /// its own (`scale`): the vector list weighs `vector_weight`, the
    /// keyword list the rest; a list that does not hold a chunk adds
    /// nothing for it.
    Convex { vector_weight: f32, scale: Scale },
}

/// How a convex combination puts one list's scores on a common scale.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Scale {
    /// 0 at the list's worst score, 1 at its best.
    MinMax,
    /// 0 at the list's mean less three standard deviations, 1 at the mean
    /// plus three: a best hit far above the rest keeps its lead, where
    /// min-max would bring every list's best to 1. The default: it ranks
    /// better on SciFact's training claims (docs/search.md).
    #[default]
    #[serde(rename = "mean_3sd")]
    Mean3sd,
}

impl Scale {
    /// Each score of `list` on this scale. Scores that are not numbers
    /// count as the worst.
    fn apply(self, list: &[(i64, f64)]) -> Vec<f64> {
        match self {
            Scale::MinMax => min_max(list),
            Scale::Mean3sd => mean_3sd(list),
        }
    }
}

/// The convex combination with equal weights, each list scaled by its mean
/// and standard deviation: on SciFact's training claims it ranks better
/// than reciprocal rank fusion and than min-max scaling (docs/search.md).
impl Default for Fusion {
    fn default() -> Self {
        Fusion::Convex {
            vector_weight: 0.5,
            scale: Scale::Mean3sd,
        }
    }
}

/// [`Fusion`] as settings write it: `{"method": "convex", "vector_weight":
/// 0.5, "scale": "mean_3sd"}` (`"min_max"` the other scale; a missing one
/// is the default) or `{"method": "rrf", "k": 60}`.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
#[serde(tag = "method", rename_all = "snake_case")]
enum FusionSpec {
    Rrf {
        #[serde(default = "default_k")]
        k: f32,
    },
    Convex {
        #[serde(default = "default_weight")]
        vector_weight: f32,
        #[serde(default)]
        scale: Scale,
    },
}

fn default_k() -> f32 {
    DEFAULT_RRF_K
}

fn default_weight() -> f32 {
    0.5
}

impl TryFrom<FusionSpec> for Fusion {
    type Error = String;

    fn try_from(spec: FusionSpec) -> Result<Self, String> {
        match spec {
            FusionSpec::Rrf { k } if k.is_finite() && k >= 0.0 => Ok(Fusion::Rrf { k }),
            FusionSpec::Rrf { k } => Err(format!("k must be 0 or more, not {k}")),
            FusionSpec::Convex {
                vector_weight: w,
                scale,
            } if (0.0..=1.0).contains(&w) => Ok(Fusion::Convex {
                vector_weight: w,
                scale,
            }),
            FusionSpec::Convex {
                vector_weight: w, ..
            } => Err(format!("vector_weight must be between 0 and 1, not {w}")),
        }
    }
}

impl From<Fusion> for FusionSpec {
    fn from(fusion: Fusion) -> Self {
        match fusion {
            Fusion::Rrf { k } => FusionSpec::Rrf { k },
            Fusion::Convex {
                vector_weight,
                scale,
            } => FusionSpec::Convex {
                vector_weight,
                scale,
            },
        }
    }
}

impl Fusion {
    /// Fuses `lists` of (chunk id, score), best first, into at most `limit`
    /// hits, best first (see [`reciprocal_rank_fusion`] for the order of
    /// ties).
    pub fn fuse(self, lists: &[Vec<(i64, f64)>], limit: usize) -> Vec<FusedHit> {
        let ids: Vec<Vec<i64>> = lists
            .iter()
            .map(|l| l.iter().map(|(id, _)| *id).collect())
            .collect();
        match self {
            Fusion::Rrf { k } => reciprocal_rank_fusion(&ids, k, limit),
            Fusion::Convex {
                vector_weight,
                scale,
            } => {
                let w = f64::from(vector_weight);
                let rest = if lists.len() > 1 {
                    (1.0 - w) / (lists.len() - 1) as f64
                } else {
                    0.0
                };
                let scaled: Vec<Vec<f64>> = lists
                    .iter()
                    .enumerate()
                    .map(|(i, list)| {
                        let weight = if i == 0 { w } else { rest };
                        scale.apply(list).into_iter().map(|s| weight * s).collect()
                    })
                    .collect();
                merge(&ids, limit, |list, position| scaled[list][position])
            }
        }
    }
}

/// Each score of `list` scaled to 0..1 between the list's worst and best;
/// all 1 when they are equal. Scores that are not numbers count as the worst.
fn min_max(list: &[(i64, f64)]) -> Vec<f64> {
    let finite = || list.iter().map(|(_, s)| *s).filter(|s| s.is_finite());
    let (Some(lo), Some(hi)) = (finite().reduce(f64::min), finite().reduce(f64::max)) else {
        return vec![0.0; list.len()];
    };
    list.iter()
        .map(|(_, s)| {
            if !s.is_finite() {
                0.0
            } else if hi > lo {
                (s - lo) / (hi - lo)
            } else {
                1.0
            }
        })
        .collect()
}

/// Each score of `list` scaled so that the list's mean less three standard
/// deviations is 0 and the mean plus three is 1; all 1 when the scores are
/// equal. Scores that are not numbers count as 0.
fn mean_3sd(list: &[(i64, f64)]) -> Vec<f64> {
    let finite: Vec<f64> = list
        .iter()
        .map(|(_, s)| *s)
        .filter(|s| s.is_finite())
        .collect();
    if finite.is_empty() {
        return vec![0.0; list.len()];
    }
    let n = finite.len() as f64;
    let mean = finite.iter().sum::<f64>() / n;
    let sd = (finite.iter().map(|s| (s - mean).powi(2)).sum::<f64>() / n).sqrt();
    list.iter()
        .map(|(_, s)| {
            if !s.is_finite() {
                0.0
            } else if sd > 0.0 {
                (s - mean + 3.0 * sd) / (6.0 * sd)
            } else {
                1.0
            }
        })
        .collect()
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
    merge(lists, limit, |_, position| {
        1.0 / (k + (position + 1) as f64)
    })
}

/// Sums `score(list, position)` over the lists holding each id (at its
/// best position in each), and orders as [`reciprocal_rank_fusion`] says.
fn merge<L: AsRef<[i64]>>(
    lists: &[L],
    limit: usize,
    score: impl Fn(usize, usize) -> f64,
) -> Vec<FusedHit> {
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
            let mut parts: Vec<f64> = ranks
                .iter()
                .enumerate()
                .filter_map(|(list, rank)| rank.map(|r| score(list, r - 1)))
                .collect();
            // Summing in one order makes equal parts give bit-equal scores
            // whatever list they came from.
            parts.sort_by(|a, b| b.total_cmp(a));
            let total: f64 = parts.iter().sum();
            let best = ranks
                .iter()
                .enumerate()
                .filter_map(|(list, rank)| rank.map(|r| (r, list)))
                .min()
                .unwrap_or((usize::MAX, usize::MAX));
            let hit = FusedHit {
                chunk_id,
                score: total as f32,
                ranks,
            };
            (hit, total, best)
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

    #[test]
    fn a_convex_combination_weighs_scaled_scores() {
        // Vector scores 0.9, 0.5, 0.1 scale to 1, 0.5, 0; keyword 20, 10 to 1, 0.
        let vector = vec![(1, 0.9), (2, 0.5), (3, 0.1)];
        let keyword = vec![(3, 20.0), (2, 10.0)];
        let even = Fusion::Convex {
            vector_weight: 0.5,
            scale: Scale::MinMax,
        };
        let fused = even.fuse(&[vector.clone(), keyword.clone()], 10);
        let ids: Vec<i64> = fused.iter().map(|h| h.chunk_id).collect();
        // 1: 0.5; 3: 0 + 0.5 = 0.5 (tie: best rank 1 in the earlier list wins); 2: 0.25.
        assert_eq!(ids, [1, 3, 2]);
        assert!((fused[2].score - 0.25).abs() < 1e-6);
        assert_eq!(fused[1].ranks, vec![Some(3), Some(1)]);
        // Weighted towards keywords: 3 (0.8) before 1 (0.2) and 2 (0.1).
        let keyword_heavy = Fusion::Convex {
            vector_weight: 0.2,
            scale: Scale::MinMax,
        };
        let fused = keyword_heavy.fuse(&[vector.clone(), keyword.clone()], 2);
        assert_eq!(fused.iter().map(|h| h.chunk_id).collect::<Vec<_>>(), [3, 1]);
        // Equal scores scale to 1; a list without numbers adds nothing.
        assert_eq!(min_max(&[(1, 2.0), (2, 2.0)]), [1.0, 1.0]);
        assert_eq!(min_max(&[(1, f64::NAN)]), [0.0]);
        // Reciprocal rank fusion through the same door.
        let rrf = Fusion::Rrf { k: 60.0 }.fuse(&[vector, keyword], 10);
        assert_eq!(
            rrf.iter().map(|h| h.chunk_id).collect::<Vec<_>>(),
            [3, 2, 1]
        );
    }

    #[test]
    fn the_setting_reads_and_checks_its_values() {
        let read =
            |v: serde_json::Value| serde_json::from_value::<Fusion>(v).map_err(|e| e.to_string());
        assert_eq!(
            read(serde_json::json!({"method": "convex", "vector_weight": 0.3, "scale": "min_max"})),
            Ok(Fusion::Convex {
                vector_weight: 0.3,
                scale: Scale::MinMax
            })
        );
        assert_eq!(
            read(serde_json::json!({"method": "convex", "vector_weight": 0.3})),
            Ok(Fusion::Convex {
                vector_weight: 0.3,
                scale: Scale::Mean3sd
            })
        );
        assert_eq!(
            read(
                serde_json::json!({"method": "convex", "vector_weight": 0.5, "scale": "mean_3sd"})
            ),
            Ok(Fusion::Convex {
                vector_weight: 0.5,
                scale: Scale::Mean3sd
            })
        );
        assert!(
            read(serde_json::json!({"method": "convex", "scale": "z"}))
                .unwrap_err()
                .contains("unknown variant")
        );
        assert_eq!(
            read(serde_json::json!({"method": "rrf"})),
            Ok(Fusion::Rrf { k: 60.0 })
        );
        assert!(
            read(serde_json::json!({"method": "convex", "vector_weight": 1.5}))
                .unwrap_err()
                .contains("between 0 and 1")
        );
        assert!(read(serde_json::json!({"method": "rrf", "k": -1})).is_err());
        assert!(read(serde_json::json!({"method": "borda"})).is_err());
        assert_eq!(
            serde_json::to_value(Fusion::default()).unwrap(),
            serde_json::json!({"method": "convex", "vector_weight": 0.5, "scale": "mean_3sd"})
        );
        let min_max = Fusion::Convex {
            vector_weight: 0.5,
            scale: Scale::MinMax,
        };
        assert_eq!(
            serde_json::to_value(min_max).unwrap(),
            serde_json::json!({"method": "convex", "vector_weight": 0.5, "scale": "min_max"})
        );
    }

    #[test]
    fn mean_3sd_keeps_a_lone_leader_ahead() {
        // Mean 1, standard deviation 1: 2 sits at (2 - 1 + 3) / 6, 0 at 2 / 6.
        let scaled = mean_3sd(&[(1, 2.0), (2, 0.0), (3, 2.0), (4, 0.0)]);
        for (got, want) in scaled
            .iter()
            .zip([4.0 / 6.0, 2.0 / 6.0, 4.0 / 6.0, 2.0 / 6.0])
        {
            assert!((got - want).abs() < 1e-12, "{scaled:?}");
        }
        assert_eq!(mean_3sd(&[(1, 2.0), (2, 2.0)]), [1.0, 1.0]);
        assert_eq!(mean_3sd(&[(1, f64::NAN), (2, 1.0)]), [0.0, 1.0]);
        assert_eq!(mean_3sd(&[]), Vec::<f64>::new());
        // A vector list whose best stands far above the rest outweighs a
        // keyword list whose scores are close together, where min-max
        // would score both bests alike.
        let vector = vec![(1, 0.9), (2, 0.3), (3, 0.3), (4, 0.3)];
        let keyword = vec![(5, 10.0), (6, 9.9), (7, 9.8), (8, 9.7)];
        let fuse = |scale| {
            Fusion::Convex {
                vector_weight: 0.5,
                scale,
            }
            .fuse(&[vector.clone(), keyword.clone()], 2)
            .iter()
            .map(|h| h.chunk_id)
            .collect::<Vec<_>>()
        };
        assert_eq!(fuse(Scale::Mean3sd), [1, 5]);
        assert_eq!(fuse(Scale::MinMax), [1, 5]);
        let top = |scale| {
            Fusion::Convex {
                vector_weight: 0.5,
                scale,
            }
            .fuse(&[vector.clone(), keyword.clone()], 8)
        };
        let (mm, m3) = (top(Scale::MinMax), top(Scale::Mean3sd));
        assert!(
            (mm[0].score - mm[1].score).abs() < 1e-6,
            "min-max ties the two bests"
        );
        // 0.5 × (0.789 - 0.724): the vector list's lone leader stays ahead.
        assert_eq!(m3[0].chunk_id, 1);
        assert!(m3[0].score > m3[1].score + 0.03, "{m3:?}");
    }
}
