//! `x · Wᵀ + b` for a handful of rows (a search query is 10–20 word
//! pieces), reading each weight once and never copying it.
//!
//! A general matrix product (`matrixmultiply`, behind `ndarray`) packs both
//! operands into panels on every call. For a large block that copy is paid
//! back many times over; for a lone query it is not: the six layers' 42 MB
//! of weights were read, written to a panel and read again for a dozen rows,
//! which made the query wait on memory. Here the weight stays in the
//! checkpoint's own `(outputs, inputs)` layout, every output column's
//! weights contiguous, and each column is a dot product with each row: a
//! few columns and rows at a time, so every weight loaded from memory meets
//! two rows and every row element four columns while they sit in registers.
//!
//! Only x86-64 with AVX2 and FMA takes this path (checked once at run time
//! through `pulp`, which compiles the loop for those features without any
//! `unsafe` here); elsewhere `available` is `None` and the caller keeps the
//! general product. The sums run in a fixed order, so results do not depend
//! on the thread count.

#![cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]

use ndarray::ArrayViewMut2;

/// Rows and output columns handled together: eight accumulators, two row
/// vectors and one weight vector fit the sixteen AVX registers.
const ROWS: usize = 2;
const COLUMNS: usize = 4;
const LANES: usize = 8;

/// The CPU's vector unit, when it has what the loop is written for.
#[derive(Clone, Copy)]
pub(crate) struct Simd {
    #[cfg(target_arch = "x86_64")]
    v3: pulp::x86::V3,
}

impl Simd {
    #[cfg(target_arch = "x86_64")]
    pub(crate) fn available() -> Option<Simd> {
        pulp::x86::V3::try_new().map(|v3| Simd { v3 })
    }

    #[cfg(not(target_arch = "x86_64"))]
    pub(crate) fn available() -> Option<Simd> {
        None
    }

    /// `out[r][j] = bias[j] + Σₖ x[r][k] · weight[j][k]` for every row `r`
    /// of `x` (rows of `inputs` values, back to back) and every column `j`
    /// of `out`; `weight` holds one row of `inputs` values per column.
    pub(crate) fn product(
        self,
        x: &[f32],
        inputs: usize,
        weight: &[f32],
        bias: &[f32],
        out: &mut ArrayViewMut2<f32>,
    ) {
        assert!(inputs > 0 && x.len().is_multiple_of(inputs));
        assert_eq!(out.dim(), (x.len() / inputs, bias.len()));
        assert_eq!(weight.len(), bias.len() * inputs);
        #[cfg(target_arch = "x86_64")]
        self.v3.vectorize(Product {
            simd: self.v3,
            x,
            inputs,
            weight,
            bias,
            out,
        });
        #[cfg(not(target_arch = "x86_64"))]
        unreachable!("no few-rows product without AVX2 and FMA");
    }
}

/// One product as the function `pulp` compiles for AVX2 and FMA: its body
/// is inlined there (`#[inline(always)]` all the way down), which a closure
/// is only likely to be.
#[cfg(target_arch = "x86_64")]
struct Product<'a, 'o> {
    simd: pulp::x86::V3,
    x: &'a [f32],
    inputs: usize,
    weight: &'a [f32],
    bias: &'a [f32],
    out: &'a mut ArrayViewMut2<'o, f32>,
}

#[cfg(target_arch = "x86_64")]
impl pulp::NullaryFnOnce for Product<'_, '_> {
    type Output = ();

    #[inline(always)]
    fn call(self) {
        product_blocks(
            self.simd,
            self.x,
            self.inputs,
            self.weight,
            self.bias,
            self.out,
        );
    }
}

#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn product_blocks(
    simd: pulp::x86::V3,
    x: &[f32],
    inputs: usize,
    weight: &[f32],
    bias: &[f32],
    out: &mut ArrayViewMut2<f32>,
) {
    let rows: Vec<&[f32]> = x.chunks_exact(inputs).collect();
    let columns: Vec<&[f32]> = weight.chunks_exact(inputs).collect();
    // The columns taken together lie a quarter of the matrix apart, so the
    // weight is read as four long forward streams (the hardware prefetcher
    // follows those) rather than as short hops through one block of rows.
    let quarter = columns.len() / COLUMNS;
    for first in 0..quarter {
        let at: [usize; COLUMNS] = std::array::from_fn(|c| first + c * quarter);
        let block = at.map(|j| columns[j]);
        for (r, pair) in rows.chunks(ROWS).enumerate() {
            let sums = match *pair {
                [a, b] => dots::<ROWS, COLUMNS>(simd, [a, b], block),
                [a] => {
                    let [sums] = dots::<1, COLUMNS>(simd, [a], block);
                    [sums, [0.0; COLUMNS]]
                }
                _ => unreachable!("chunks of {ROWS}"),
            };
            store(out, bias, r * ROWS, pair.len(), &at, &sums);
        }
    }
    for (j, &column) in columns.iter().enumerate().skip(quarter * COLUMNS) {
        for (r, pair) in rows.chunks(ROWS).enumerate() {
            let sums = match *pair {
                [a, b] => dots::<ROWS, 1>(simd, [a, b], [column]),
                [a] => [dots::<1, 1>(simd, [a], [column])[0], [0.0]],
                _ => unreachable!("chunks of {ROWS}"),
            };
            store(out, bias, r * ROWS, pair.len(), &[j], &sums);
        }
    }
}

/// Writes the first `height` rows of `sums` (columns `at`) from row `first`,
/// each with its column's bias.
#[inline(always)]
fn store<const C: usize>(
    out: &mut ArrayViewMut2<f32>,
    bias: &[f32],
    first: usize,
    height: usize,
    at: &[usize; C],
    sums: &[[f32; C]; ROWS],
) {
    for (dr, row) in sums.iter().enumerate().take(height) {
        for (&j, sum) in at.iter().zip(row) {
            out[[first + dr, j]] = sum + bias[j];
        }
    }
}

/// The dot products of `R` rows with `C` weight columns, all of one length,
/// eight lanes at a time.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn dots<const R: usize, const C: usize>(
    simd: pulp::x86::V3,
    rows: [&[f32]; R],
    columns: [&[f32]; C],
) -> [[f32; C]; R] {
    use pulp::{cast, f32x8};

    let len = rows[0].len();
    let rows = rows.map(|row| row.split_at(len - len % LANES));
    let columns = columns.map(|column| column.split_at(len - len % LANES));
    let row_lanes = rows.map(|(head, _)| head.as_chunks::<LANES>().0);
    let column_lanes = columns.map(|(head, _)| head.as_chunks::<LANES>().0);
    let chunks = len / LANES;
    for lanes in row_lanes.iter().chain(column_lanes.iter()) {
        assert_eq!(lanes.len(), chunks);
    }
    let mut acc = [[simd.splat_f32x8(0.0); C]; R];
    for i in 0..chunks {
        let xs: [f32x8; R] = std::array::from_fn(|r| cast(row_lanes[r][i]));
        for c in 0..C {
            let w: f32x8 = cast(column_lanes[c][i]);
            for r in 0..R {
                acc[r][c] = simd.mul_add_f32x8(xs[r], w, acc[r][c]);
            }
        }
    }
    let mut out = [[0.0f32; C]; R];
    for r in 0..R {
        for c in 0..C {
            let lanes: [f32; LANES] = cast(acc[r][c]);
            // Pairwise, in the same order every time.
            let quads: [f32; 4] = std::array::from_fn(|l| lanes[l] + lanes[l + 4]);
            let pairs = [quads[0] + quads[2], quads[1] + quads[3]];
            let mut sum = pairs[0] + pairs[1];
            for (a, b) in rows[r].1.iter().zip(columns[c].1) {
                sum = a.mul_add(*b, sum);
            }
            out[r][c] = sum;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use ndarray::{Array2, Axis, Slice};

    use super::*;

    /// The same products in f64, for comparison.
    fn reference(x: &[f32], inputs: usize, weight: &[f32], bias: &[f32]) -> Vec<f32> {
        let columns = bias.len();
        let mut out = Vec::new();
        for row in x.chunks_exact(inputs) {
            for j in 0..columns {
                let w = &weight[j * inputs..(j + 1) * inputs];
                let sum: f64 = row
                    .iter()
                    .zip(w)
                    .map(|(a, b)| f64::from(*a) * f64::from(*b))
                    .sum();
                out.push((sum + f64::from(bias[j])) as f32);
            }
        }
        out
    }

    fn values(n: usize, seed: u32) -> Vec<f32> {
        // A small linear congruential sequence in [-1, 1).
        let mut state = seed;
        (0..n)
            .map(|_| {
                state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                (state >> 8) as f32 / (1u32 << 23) as f32 - 1.0
            })
            .collect()
    }

    #[test]
    fn every_shape_matches_the_plain_sums() {
        let Some(simd) = Simd::available() else {
            eprintln!("no AVX2 and FMA here: the general product serves every size");
            return;
        };
        // Rows and columns that are and are not whole blocks, and lengths
        // with and without a tail shorter than a vector.
        for (rows, inputs, columns) in [
            (1, 8, 1),
            (2, 16, 4),
            (3, 13, 5),
            (5, 384, 7),
            (14, 384, 1152),
            (15, 1536, 384),
        ] {
            let x = values(rows * inputs, 1);
            let weight = values(columns * inputs, 2);
            let bias = values(columns, 3);
            // Written into part of a wider matrix, to check that nothing
            // outside it is touched.
            let mut out = Array2::from_elem((rows, columns + 3), f32::NAN);
            let mut part = out.slice_axis_mut(Axis(1), Slice::from(0..columns));
            simd.product(&x, inputs, &weight, &bias, &mut part);
            let expected = reference(&x, inputs, &weight, &bias);
            for r in 0..rows {
                for j in 0..columns + 3 {
                    let got = out[[r, j]];
                    if j >= columns {
                        assert!(
                            got.is_nan(),
                            "{rows}×{inputs}×{columns}: wrote outside at {r},{j}"
                        );
                        continue;
                    }
                    let want = expected[r * columns + j];
                    assert!(
                        (got - want).abs() <= 1e-4 * (1.0 + want.abs()),
                        "{rows}×{inputs}×{columns} at {r},{j}: {got} against {want}"
                    );
                }
            }
        }
    }
}
