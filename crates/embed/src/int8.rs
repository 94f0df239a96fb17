//! Dense layers in 8-bit integers: `x · Wᵀ + b` with the weight quantised
//! once at load and each row of `x` quantised as it comes.
//!
//! - **Weights**: symmetric, per output column: `W[j][k] ≈ t_j · w[j][k]`,
//!   `w` in −127..=127. They are packed in blocks of 16 columns by 4 inputs,
//!   the layout the AVX-512 VNNI instruction `vpdpbusd` reads: one 64-byte
//!   load gives 16 columns four inputs deep.
//! - **Activations**: asymmetric, per row: `x[r][k] ≈ s_r · (q[r][k] − z_r)`,
//!   `q` in 0..=255, the range always holding zero. A row's rounding never
//!   depends on its neighbours, so a text gets the same vector in any batch.
//! - **Product**: `Σₖ q·w` exact in 32-bit integers (at most 255 · 127 ·
//!   inputs, far inside i32 for any BERT), then
//!   `out = float(Σ q·w − z_r · Σₖ w[j][k]) · (s_r · t_j) + b_j`.
//!
//! Three kernels compute the same integers and round the same floats in the
//! same order, so their vectors are identical bit for bit (`archmage`
//! supplies the safe call into code compiled for the features each needs,
//! checked once at run time):
//!
//! - **VNNI** (archmage's x86-64-v4x level: AVX-512 with VNNI, VBMI2, GFNI
//!   and the rest of Ice Lake's set): `vpdpbusd` on the bytes as packed.
//! - **AVX2** (x86-64-v3, AVX2 and FMA, below the VNNI kernel's level:
//!   Haswell to Cooper Lake, Zen 1-3, Intel's hybrid parts): the weights
//!   widened once to 16 bits in the same layout and each row's values to
//!   16 bits as it is quantised, summed by `vpmaddwd`, which is exact
//!   (`vpmaddubsw` on the bytes would be faster but saturates at 16 bits
//!   for the products of 8 bits these hold).
//! - **Portable**, in plain Rust for every other CPU, slower than the float
//!   path there.
//!
//! (Attention and the row kernels give the same bits on AVX-512 and AVX2,
//! NaN results aside; without either, attention runs general products,
//! whose vectors differ in their last bits.)

use std::ops::Range;

/// Output columns per packed block: one 512-bit register of i32 sums.
const BLOCK: usize = 16;
/// Inputs per group: `vpdpbusd` sums four byte products into each i32 lane.
const GROUP: usize = 4;

/// A dense layer's weight, quantised per output column and packed for the kernels.
pub(crate) struct QuantizedMatrix {
    /// Inputs per row of `x`, padded to a multiple of [`GROUP`] (padding weighs 0).
    inputs: usize,
    /// Output columns, before padding to a multiple of [`BLOCK`].
    outputs: usize,
    /// Blocks of [`BLOCK`] columns; in each, groups of [`GROUP`] inputs; in
    /// each group, every column's [`GROUP`] weights side by side.
    packed: Vec<i8>,
    /// `t_j` per column (padded columns 0).
    scales: Vec<f32>,
    /// `Σₖ w[j][k]` per column, for the activations' zero point.
    sums: Vec<i32>,
    /// `packed` widened to 16 bits, same layout, for the AVX2 kernel (empty
    /// for the others).
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    wide: Vec<i16>,
}

impl QuantizedMatrix {
    /// Quantises `weight`, given as `outputs` rows of `inputs` values each
    /// (the checkpoint's `(outputs, inputs)` layout).
    pub(crate) fn quantize(weight: &[f32], inputs: usize, outputs: usize) -> Self {
        assert_eq!(weight.len(), inputs * outputs);
        let padded_inputs = inputs.next_multiple_of(GROUP);
        let padded_outputs = outputs.next_multiple_of(BLOCK);
        let groups = padded_inputs / GROUP;
        let mut packed = vec![0i8; padded_outputs * padded_inputs];
        let mut scales = vec![0.0f32; padded_outputs];
        let mut sums = vec![0i32; padded_outputs];
        for (j, column) in weight.chunks_exact(inputs.max(1)).enumerate() {
            let largest = column.iter().fold(0.0f32, |m, &v| m.max(v.abs()));
            let scale = if largest > 0.0 { largest / 127.0 } else { 1.0 };
            scales[j] = scale;
            let (block, lane) = (j / BLOCK, j % BLOCK);
            for (k, &v) in column.iter().enumerate() {
                let q = (v / scale).round_ties_even().clamp(-127.0, 127.0) as i8;
                sums[j] += i32::from(q);
                let at = ((block * groups + k / GROUP) * BLOCK + lane) * GROUP + k % GROUP;
                packed[at] = q;
            }
        }
        Self {
            inputs: padded_inputs,
            outputs,
            packed,
            scales,
            sums,
            wide: Vec::new(),
        }
    }

    pub(crate) fn outputs(&self) -> usize {
        self.outputs
    }

    /// The packed bytes of column block `block`: `groups × 64`.
    fn block(&self, block: usize) -> &[i8] {
        let size = self.inputs * BLOCK;
        &self.packed[block * size..(block + 1) * size]
    }

    /// The same block widened to 16 bits (AVX2 kernel only).
    #[cfg(target_arch = "x86_64")]
    fn wide_block(&self, block: usize) -> &[i16] {
        let size = self.inputs * BLOCK;
        &self.wide[block * size..(block + 1) * size]
    }
}

/// Rows of activations quantised for one product.
pub(crate) struct QuantizedRows {
    /// Values per row, padded to a multiple of [`GROUP`].
    inputs: usize,
    values: Vec<u8>,
    scales: Vec<f32>,
    zeros: Vec<i32>,
    /// For the AVX2 kernel (empty for the others): each group of
    /// [`GROUP`] values as four 16-bit lanes of one word, ready to broadcast.
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    wide: Vec<i64>,
}

impl QuantizedRows {
    pub(crate) fn rows(&self) -> usize {
        self.scales.len()
    }

    fn row(&self, r: usize) -> &[u8] {
        &self.values[r * self.inputs..(r + 1) * self.inputs]
    }
}

/// Which kernel computes the integer products.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Kernel {
    #[cfg(target_arch = "x86_64")]
    Vnni(archmage::X64V4xToken),
    #[cfg(target_arch = "x86_64")]
    Avx2(archmage::X64V3Token),
    Portable,
}

impl Kernel {
    /// The fastest kernel this CPU runs.
    pub(crate) fn detect() -> Self {
        Self::available()[0]
    }

    /// Every kernel this CPU runs, fastest first (the portable one last).
    pub(crate) fn available() -> Vec<Self> {
        #[cfg(target_arch = "x86_64")]
        let fast = {
            use archmage::SimdToken;
            [
                archmage::X64V4xToken::summon().map(Self::Vnni),
                archmage::X64V3Token::summon().map(Self::Avx2),
            ]
        };
        #[cfg(not(target_arch = "x86_64"))]
        let fast: [Option<Self>; 0] = [];
        fast.into_iter().flatten().chain([Self::Portable]).collect()
    }

    /// Quantises a dense layer's weight for this kernel; see
    /// [`QuantizedMatrix::quantize`].
    pub(crate) fn quantize_matrix(
        self,
        weight: &[f32],
        inputs: usize,
        outputs: usize,
    ) -> QuantizedMatrix {
        #[cfg_attr(not(target_arch = "x86_64"), allow(unused_mut))]
        let mut matrix = QuantizedMatrix::quantize(weight, inputs, outputs);
        #[cfg(target_arch = "x86_64")]
        if let Self::Avx2(_) = self {
            matrix.wide = matrix.packed.iter().map(|&w| i16::from(w)).collect();
        }
        matrix
    }

    /// Whether this kernel is faster than the float path on this CPU.
    pub(crate) fn is_fast(self) -> bool {
        !matches!(self, Self::Portable)
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            #[cfg(target_arch = "x86_64")]
            Self::Vnni(_) => "int8 (AVX-512 VNNI)",
            #[cfg(target_arch = "x86_64")]
            Self::Avx2(_) => "int8 (AVX2)",
            Self::Portable => "int8 (portable)",
        }
    }

    /// Quantises `x` (rows of `inputs` values, back to back) for products
    /// with a matrix of `inputs` inputs.
    pub(crate) fn quantize_rows(self, x: &[f32], inputs: usize) -> QuantizedRows {
        match self {
            #[cfg(target_arch = "x86_64")]
            Self::Vnni(token) => vnni::quantize_rows(token, x, inputs),
            #[cfg(target_arch = "x86_64")]
            Self::Avx2(token) => avx2::quantize_rows(token, x, inputs),
            Self::Portable => portable_quantize_rows(x, inputs),
        }
    }

    /// `out[r][c] = b[c] + Σₖ x[r][k] · W[columns.start + c][k]` for every
    /// row of `x` and every column of `columns`, which starts on a multiple
    /// of 16; `out` holds `x.rows()` rows of `columns.len()` values and
    /// `bias` one value per column of `columns`.
    pub(crate) fn product(
        self,
        x: &QuantizedRows,
        weight: &QuantizedMatrix,
        columns: Range<usize>,
        bias: &[f32],
        out: &mut [f32],
    ) {
        assert_eq!(x.inputs, weight.inputs, "rows quantised for another matrix");
        assert!(columns.start.is_multiple_of(BLOCK) && columns.end <= weight.outputs);
        assert_eq!(bias.len(), columns.len());
        assert_eq!(out.len(), x.rows() * columns.len());
        match self {
            #[cfg(target_arch = "x86_64")]
            Self::Vnni(token) => vnni::product(token, x, weight, columns, bias, out),
            #[cfg(target_arch = "x86_64")]
            Self::Avx2(token) => {
                assert!(
                    weight.wide.len() == weight.packed.len()
                        && x.wide.len() * GROUP == x.values.len(),
                    "matrix or rows quantised for another kernel"
                );
                avx2::product(token, x, weight, columns, bias, out)
            }
            Self::Portable => portable_product(x, weight, columns, bias, out),
        }
    }
}

/// Rows quantised for a matrix of `inputs` inputs, each row's values
/// written by `quantize(row, inverse scale, zero point, out)`.
#[inline(always)]
fn quantize_rows_with(
    x: &[f32],
    inputs: usize,
    mut quantize: impl FnMut(&[f32], f32, i32, &mut [u8]),
) -> QuantizedRows {
    assert!(inputs > 0 && x.len().is_multiple_of(inputs));
    let padded = inputs.next_multiple_of(GROUP);
    let rows = x.len() / inputs;
    let mut values = vec![0u8; rows * padded];
    let mut scales = Vec::with_capacity(rows);
    let mut zeros = Vec::with_capacity(rows);
    for (row, out) in x.chunks_exact(inputs).zip(values.chunks_exact_mut(padded)) {
        let (low, high) = range(row);
        let step = (high - low) / 255.0;
        let (scale, inverse, zero) = if !finite(row) {
            // A NaN or an infinity makes the row's results NaN, as in
            // float32, rather than a vector that looks fine.
            (f32::NAN, 0.0, 0)
        } else if step >= f32::MIN_POSITIVE {
            let inverse = 1.0 / step;
            let zero = (-low * inverse).round_ties_even().clamp(0.0, 255.0) as i32;
            (step, inverse, zero)
        } else {
            // All zeros, or a range too small for its inverse to be finite.
            (1.0, 1.0, 0)
        };
        let (head, padding) = out.split_at_mut(inputs);
        quantize(row, inverse, zero, head);
        // Padding takes the zero point, so it adds nothing once corrected.
        padding.fill(zero as u8);
        scales.push(scale);
        zeros.push(zero);
    }
    QuantizedRows {
        inputs: padded,
        values,
        scales,
        zeros,
        wide: Vec::new(),
    }
}

/// The smallest and largest value of a row, zero included (so that zero is
/// exact); sixteen lanes so the compiler vectorises it, and exact whatever
/// the order.
#[inline(always)]
fn range(row: &[f32]) -> (f32, f32) {
    let mut low = [0.0f32; BLOCK];
    let mut high = [0.0f32; BLOCK];
    let (chunks, tail) = row.as_chunks::<BLOCK>();
    for chunk in chunks {
        // Comparisons rather than `f32::min`, whose NaN rule keeps the
        // compiler from using the vector min and max instructions.
        for ((l, h), &v) in low.iter_mut().zip(&mut high).zip(chunk) {
            *l = if v < *l { v } else { *l };
            *h = if v > *h { v } else { *h };
        }
    }
    let fold = |init: (f32, f32), values: &[f32]| {
        values.iter().fold(init, |(l, h), &v| (l.min(v), h.max(v)))
    };
    let (l, _) = fold((0.0, 0.0), &low);
    let (_, h) = fold((0.0, 0.0), &high);
    fold((l, h), tail)
}

/// Whether every value of a row is a number (a reduction the compiler
/// vectorises, unlike `all`, which stops early).
#[inline(always)]
fn finite(row: &[f32]) -> bool {
    row.iter().fold(true, |ok, v| ok & v.is_finite())
}

/// One value quantised as AVX-512's conversion does it: rounded to the
/// nearest step (ties to even), anything outside i32 (and NaN) taken as
/// `i32::MIN`, shifted by the zero point with wrapping, held to a byte.
#[inline(always)]
fn quantize_value(v: f32, inverse: f32, zero: i32) -> u8 {
    let steps = (v * inverse).round_ties_even();
    let steps = if (-2_147_483_648.0..2_147_483_648.0).contains(&steps) {
        steps as i32
    } else {
        i32::MIN
    };
    steps.wrapping_add(zero).clamp(0, 255) as u8
}

fn portable_quantize_rows(x: &[f32], inputs: usize) -> QuantizedRows {
    quantize_rows_with(x, inputs, |row, inverse, zero, out| {
        for (q, &v) in out.iter_mut().zip(row) {
            *q = quantize_value(v, inverse, zero);
        }
    })
}

/// The float result of one integer sum; both kernels round exactly these
/// operations in this order.
#[inline(always)]
fn dequantize(sum: i32, zero: i32, column_sum: i32, row_scale: f32, scale: f32, bias: f32) -> f32 {
    (sum.wrapping_sub(zero.wrapping_mul(column_sum)) as f32) * (row_scale * scale) + bias
}

/// A block of 16 columns at a time, so that the compiler can vectorise the
/// sixteen sums; integers are exact in any order, so this gives the VNNI
/// kernel's sums.
fn portable_product(
    x: &QuantizedRows,
    weight: &QuantizedMatrix,
    columns: Range<usize>,
    bias: &[f32],
    out: &mut [f32],
) {
    let width = columns.len();
    for block in columns.start / BLOCK..columns.end.div_ceil(BLOCK) {
        let panel = weight.block(block).as_chunks::<{ BLOCK * GROUP }>().0;
        let first = block * BLOCK;
        let live = (columns.end - first).min(BLOCK);
        let c = first - columns.start;
        for r in 0..x.rows() {
            let mut sums = [0i32; BLOCK];
            for (values, weights) in x.row(r).as_chunks::<GROUP>().0.iter().zip(panel) {
                for (sum, lane) in sums.iter_mut().zip(weights.as_chunks::<GROUP>().0) {
                    for (&q, &w) in values.iter().zip(lane) {
                        *sum += i32::from(q) * i32::from(w);
                    }
                }
            }
            for (l, (o, &b)) in out[r * width + c..][..live]
                .iter_mut()
                .zip(&bias[c..c + live])
                .enumerate()
            {
                let j = first + l;
                *o = dequantize(
                    sums[l],
                    x.zeros[r],
                    weight.sums[j],
                    x.scales[r],
                    weight.scales[j],
                    b,
                );
            }
        }
    }
}

/// Where a kernel's tile starts: its first row, its first column block of
/// the matrix, and that block's first column in `out`.
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy)]
struct Tile {
    row: usize,
    block: usize,
    column: usize,
}

#[cfg(target_arch = "x86_64")]
mod vnni {
    //! The AVX-512 VNNI kernel. A tile of up to [`ROWS`] rows by
    //! [`BLOCKS`] column blocks keeps its 16 sums in registers while it
    //! walks the inputs four at a time: per group, one 64-byte weight load
    //! per block, one 4-byte broadcast per row and one `vpdpbusd` per sum.
    //! The weight panel of a tile's columns (at most 96 KB) stays in the
    //! L2 cache while every row of the block passes over it.

    use std::ops::Range;

    use archmage::prelude::*;

    use super::{BLOCK, GROUP, QuantizedMatrix, QuantizedRows, Tile};

    const ROWS: usize = 4;
    const BLOCKS: usize = 4;

    /// The portable quantisation's arithmetic sixteen values at a time:
    /// `vcvtps2dq` rounds to nearest even and gives `i32::MIN` for NaN and
    /// anything out of range, as `quantize_value` does.
    #[arcane(import_intrinsics)]
    pub(super) fn quantize_rows(_token: X64V4xToken, x: &[f32], inputs: usize) -> QuantizedRows {
        super::quantize_rows_with(x, inputs, |row, inverse, zero, out| {
            let (chunks, tail) = row.as_chunks::<BLOCK>();
            let (bytes, rest) = out.as_chunks_mut::<BLOCK>();
            let scale = _mm512_set1_ps(inverse);
            let shift = _mm512_set1_epi32(zero);
            let (floor, ceiling) = (_mm512_setzero_si512(), _mm512_set1_epi32(255));
            for (chunk, bytes) in chunks.iter().zip(bytes) {
                let steps = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(chunk), scale));
                let q = _mm512_min_epi32(
                    _mm512_max_epi32(_mm512_add_epi32(steps, shift), floor),
                    ceiling,
                );
                _mm_storeu_si128(bytes, _mm512_cvtepi32_epi8(q));
            }
            for (q, &v) in rest.iter_mut().zip(tail) {
                *q = super::quantize_value(v, inverse, zero);
            }
        })
    }

    #[arcane]
    pub(super) fn product(
        _token: X64V4xToken,
        x: &QuantizedRows,
        weight: &QuantizedMatrix,
        columns: Range<usize>,
        bias: &[f32],
        out: &mut [f32],
    ) {
        let first_block = columns.start / BLOCK;
        let blocks = columns.len().div_ceil(BLOCK);
        let mut done = 0;
        while done < blocks {
            let count = (blocks - done).min(BLOCKS);
            let mut row = 0;
            while row < x.rows() {
                let height = (x.rows() - row).min(ROWS);
                let at = Tile {
                    row,
                    block: first_block + done,
                    column: done * BLOCK,
                };
                // Whole tiles in registers; a short tail runs one block at a time.
                macro_rules! tiles {
                    ($($h:literal)*) => {
                        match (height, count) {
                            $(($h, BLOCKS) => tile::<$h, BLOCKS>(x, weight, &columns, bias, out, at),)*
                            _ => {
                                for b in 0..count {
                                    let at = Tile { block: at.block + b, column: at.column + b * BLOCK, ..at };
                                    match height {
                                        $($h => tile::<$h, 1>(x, weight, &columns, bias, out, at),)*
                                        _ => unreachable!("at most {ROWS} rows"),
                                    }
                                }
                            }
                        }
                    };
                }
                tiles!(1 2 3 4);
                row += height;
            }
            done += count;
        }
    }

    #[allow(clippy::needless_range_loop)] // the indices address several arrays at once
    #[rite(v4x, import_intrinsics)]
    fn tile<const R: usize, const B: usize>(
        x: &QuantizedRows,
        weight: &QuantizedMatrix,
        columns: &Range<usize>,
        bias: &[f32],
        out: &mut [f32],
        at: Tile,
    ) {
        let groups = x.inputs / GROUP;
        // Sliced to exactly `groups` so that indexing below needs no checks.
        let mut rows: [&[[u8; GROUP]]; R] = [&[]; R];
        for (r, row) in rows.iter_mut().enumerate() {
            *row = &x.row(at.row + r).as_chunks().0[..groups];
        }
        let mut panels: [&[[i8; BLOCK * GROUP]]; B] = [&[]; B];
        for (b, panel) in panels.iter_mut().enumerate() {
            *panel = &weight.block(at.block + b).as_chunks().0[..groups];
        }
        // Loops rather than `array::from_fn` here and above: it is not
        // always inlined into code compiled for other features.
        let mut sums = [[_mm512_setzero_si512(); B]; R];
        for g in 0..groups {
            let mut w = [_mm512_setzero_si512(); B];
            for b in 0..B {
                w[b] = _mm512_loadu_si512(&panels[b][g]);
            }
            for r in 0..R {
                let a = _mm512_set1_epi32(i32::from_ne_bytes(rows[r][g]));
                for b in 0..B {
                    sums[r][b] = _mm512_dpbusd_epi32(sums[r][b], a, w[b]);
                }
            }
        }
        let width = columns.len();
        for b in 0..B {
            let c = at.column + b * BLOCK;
            // Both are padded to whole blocks.
            let column_sums = _mm512_loadu_si512(&weight.sums.as_chunks::<BLOCK>().0[at.block + b]);
            let scales = _mm512_loadu_ps(&weight.scales.as_chunks::<BLOCK>().0[at.block + b]);
            // The last block of a range may be partly padding: only the
            // columns inside the range are written.
            let live = (width - c).min(BLOCK);
            for r in 0..R {
                let row = at.row + r;
                let corrected = _mm512_sub_epi32(
                    sums[r][b],
                    _mm512_mullo_epi32(_mm512_set1_epi32(x.zeros[row]), column_sums),
                );
                let scaled = _mm512_mul_ps(
                    _mm512_cvtepi32_ps(corrected),
                    _mm512_mul_ps(_mm512_set1_ps(x.scales[row]), scales),
                );
                let mut values = [0.0f32; BLOCK];
                _mm512_storeu_ps(&mut values, scaled);
                let target = &mut out[row * width + c..][..live];
                for ((o, &v), &b) in target.iter_mut().zip(&values).zip(&bias[c..c + live]) {
                    *o = v + b;
                }
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    //! The AVX2 kernel. A tile of up to [`ROWS`] rows by one block of 16
    //! columns keeps its sums in registers while it walks the inputs four
    //! at a time: per group, four 32-byte loads of 16-bit weights (four
    //! columns by four inputs each), one 8-byte broadcast per row and one
    //! `vpmaddwd` per register of sums, each lane holding two products of
    //! one column. Adjacent lanes are added once at the end.

    use std::ops::Range;

    use archmage::prelude::*;

    use super::{BLOCK, GROUP, QuantizedMatrix, QuantizedRows, Tile};

    const ROWS: usize = 2;
    /// 16-bit weights per register: four columns of [`GROUP`] inputs.
    const LANES: usize = 16;
    /// Registers per block of [`BLOCK`] columns.
    const VECTORS: usize = BLOCK * GROUP / LANES;

    /// The portable quantisation compiled for AVX2 (rounding in vector
    /// instructions rather than calls), then each group widened.
    #[arcane]
    pub(super) fn quantize_rows(_token: X64V3Token, x: &[f32], inputs: usize) -> QuantizedRows {
        let mut rows = super::quantize_rows_with(x, inputs, |row, inverse, zero, out| {
            for (q, &v) in out.iter_mut().zip(row) {
                *q = super::quantize_value(v, inverse, zero);
            }
        });
        rows.wide = rows
            .values
            .as_chunks::<GROUP>()
            .0
            .iter()
            .map(|&[a, b, c, d]| {
                i64::from(a) | i64::from(b) << 16 | i64::from(c) << 32 | i64::from(d) << 48
            })
            .collect();
        rows
    }

    #[arcane]
    pub(super) fn product(
        _token: X64V3Token,
        x: &QuantizedRows,
        weight: &QuantizedMatrix,
        columns: Range<usize>,
        bias: &[f32],
        out: &mut [f32],
    ) {
        let first_block = columns.start / BLOCK;
        // Block by block, so a block's weights (at most 48 KB) stay in the
        // cache while every row passes over them.
        for b in 0..columns.len().div_ceil(BLOCK) {
            let mut row = 0;
            while row < x.rows() {
                let height = (x.rows() - row).min(ROWS);
                let at = Tile {
                    row,
                    block: first_block + b,
                    column: b * BLOCK,
                };
                if height == ROWS {
                    tile::<ROWS>(x, weight, &columns, bias, out, at);
                } else {
                    tile::<1>(x, weight, &columns, bias, out, at);
                }
                row += height;
            }
        }
    }

    #[allow(clippy::needless_range_loop)] // the indices address several arrays at once
    #[rite(v3, import_intrinsics)]
    fn tile<const R: usize>(
        x: &QuantizedRows,
        weight: &QuantizedMatrix,
        columns: &Range<usize>,
        bias: &[f32],
        out: &mut [f32],
        at: Tile,
    ) {
        let groups = x.inputs / GROUP;
        let mut rows: [&[i64]; R] = [&[]; R];
        for (r, row) in rows.iter_mut().enumerate() {
            *row = &x.wide[(at.row + r) * groups..][..groups];
        }
        let panel = &weight
            .wide_block(at.block)
            .as_chunks::<LANES>()
            .0
            .as_chunks::<VECTORS>()
            .0[..groups];
        let mut sums = [[_mm256_setzero_si256(); VECTORS]; R];
        for g in 0..groups {
            let mut w = [_mm256_setzero_si256(); VECTORS];
            for v in 0..VECTORS {
                w[v] = _mm256_loadu_si256(&panel[g][v]);
            }
            for r in 0..R {
                let a = _mm256_set1_epi64x(rows[r][g]);
                for v in 0..VECTORS {
                    sums[r][v] = _mm256_add_epi32(sums[r][v], _mm256_madd_epi16(w[v], a));
                }
            }
        }
        let width = columns.len();
        let c = at.column;
        // The last block of a range may be partly padding: only the columns
        // inside the range are written.
        let live = (width - c).min(BLOCK);
        // Both are padded to whole blocks.
        let column_sums = weight.sums.as_chunks::<BLOCK>().0[at.block]
            .as_chunks::<8>()
            .0;
        let scales = weight.scales.as_chunks::<BLOCK>().0[at.block]
            .as_chunks::<8>()
            .0;
        for r in 0..R {
            let row = at.row + r;
            let mut values = [[0.0f32; 8]; 2];
            for half in 0..2 {
                // Per 128-bit lane, the pairs of columns 0-1 and 4-5, then
                // 2-3 and 6-7: put back in order.
                let pairs = _mm256_hadd_epi32(sums[r][2 * half], sums[r][2 * half + 1]);
                let totals = _mm256_permute4x64_epi64::<0b11_01_10_00>(pairs);
                let corrected = _mm256_sub_epi32(
                    totals,
                    _mm256_mullo_epi32(
                        _mm256_set1_epi32(x.zeros[row]),
                        _mm256_loadu_si256(&column_sums[half]),
                    ),
                );
                let scaled = _mm256_mul_ps(
                    _mm256_cvtepi32_ps(corrected),
                    _mm256_mul_ps(
                        _mm256_set1_ps(x.scales[row]),
                        _mm256_loadu_ps(&scales[half]),
                    ),
                );
                _mm256_storeu_ps(&mut values[half], scaled);
            }
            let target = &mut out[row * width + c..][..live];
            for ((o, &v), &b) in target
                .iter_mut()
                .zip(values.as_flattened())
                .zip(&bias[c..c + live])
            {
                *o = v + b;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Deterministic values in [-1, 1) with a few large outliers, like a
    /// transformer's activations.
    fn values(n: usize, seed: u64) -> Vec<f32> {
        let mut state = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
        (0..n)
            .map(|i| {
                state = state
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1_442_695_040_888_963_407);
                let v = ((state >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0;
                if i % 97 == 5 { v * 12.0 } else { v }
            })
            .collect()
    }

    fn run(
        kernel: Kernel,
        rows: usize,
        inputs: usize,
        outputs: usize,
        columns: Range<usize>,
    ) -> Vec<f32> {
        let w = values(inputs * outputs, 1);
        let x = values(rows * inputs, 2);
        let bias = values(outputs, 3);
        let matrix = kernel.quantize_matrix(&w, inputs, outputs);
        let q = kernel.quantize_rows(&x, inputs);
        let mut out = vec![0.0; rows * columns.len()];
        kernel.product(&q, &matrix, columns.clone(), &bias[columns], &mut out);
        out
    }

    #[test]
    fn the_product_is_close_to_the_float_product() {
        let (rows, inputs, outputs) = (7, 384, 48);
        let w = values(inputs * outputs, 1);
        let x = values(rows * inputs, 2);
        let bias = values(outputs, 3);
        let out = run(Kernel::Portable, rows, inputs, outputs, 0..outputs);
        for r in 0..rows {
            for j in 0..outputs {
                let exact: f64 = (0..inputs)
                    .map(|k| f64::from(x[r * inputs + k]) * f64::from(w[j * inputs + k]))
                    .sum::<f64>()
                    + f64::from(bias[j]);
                let norm: f64 = (0..inputs)
                    .map(|k| {
                        f64::from(x[r * inputs + k]).abs() * f64::from(w[j * inputs + k]).abs()
                    })
                    .sum();
                let error = (f64::from(out[r * outputs + j]) - exact).abs();
                // Each factor carries at most half a step of rounding: a few
                // percent of the sum of absolute products.
                assert!(
                    error < 0.02 * norm,
                    "row {r} column {j}: {error} against {norm}"
                );
            }
        }
    }

    #[test]
    fn every_kernel_gives_the_portable_bits_at_every_shape() {
        let kernels = Kernel::available();
        if kernels.len() == 1 {
            eprintln!("no AVX2 or AVX-512 VNNI on this CPU: only the portable kernel runs");
            return;
        }
        for kernel in kernels {
            same_bits_as_portable(kernel);
        }
    }

    fn same_bits_as_portable(kernel: Kernel) {
        for (rows, inputs, outputs) in [
            (1, 4, 16),
            (13, 384, 1152),
            (7, 30, 40),
            (6, 1536, 384),
            (65, 384, 100),
        ] {
            let whole = run(kernel, rows, inputs, outputs, 0..outputs);
            assert_eq!(
                whole,
                run(Kernel::Portable, rows, inputs, outputs, 0..outputs),
                "{} {rows}×{inputs}→{outputs}",
                kernel.name()
            );
            // A thread's share of the columns gives the same values as the whole.
            let start = (outputs / 2)
                .next_multiple_of(BLOCK)
                .min(outputs - outputs % BLOCK);
            let part = run(kernel, rows, inputs, outputs, start..outputs);
            for r in 0..rows {
                assert_eq!(
                    part[r * (outputs - start)..][..outputs - start],
                    whole[r * outputs + start..][..outputs - start]
                );
            }
        }
    }

    #[test]
    fn a_row_with_nan_or_infinity_gives_nan_and_a_tiny_row_zeros_on_every_kernel() {
        let inputs = 20;
        let mut x = vec![0.5f32; 4 * inputs];
        x[3] = f32::NAN;
        x[inputs + 7] = f32::INFINITY;
        x[2 * inputs..3 * inputs].fill(1e-38);
        x[2 * inputs + 1] = -2e-38;
        x[3 * inputs + 2] = -1.0;
        let w: Vec<f32> = (0..16 * inputs).map(|i| (i % 7) as f32 - 3.0).collect();
        let bias = [0.0f32; 16];
        let mut results = Vec::new();
        for kernel in Kernel::available() {
            let matrix = kernel.quantize_matrix(&w, inputs, 16);
            let q = kernel.quantize_rows(&x, inputs);
            let mut out = vec![0.0; 4 * 16];
            kernel.product(&q, &matrix, 0..16, &bias, &mut out);
            assert!(out[..32].iter().all(|v| v.is_nan()), "{out:?}");
            assert!(out[32..48].iter().all(|v| v.abs() < 1e-30), "{out:?}");
            assert!(out[48..].iter().all(|v| v.is_finite()));
            results.push((q.values, out[32..].to_vec()));
        }
        for other in &results[1..] {
            assert_eq!(&results[0], other);
        }
    }

    #[test]
    fn a_row_of_zeros_is_exact_and_a_constant_row_within_float_rounding() {
        for kernel in Kernel::available() {
            zeros_and_constants(kernel);
        }
    }

    fn zeros_and_constants(kernel: Kernel) {
        let inputs = 8;
        let mut x = vec![0.0f32; 2 * inputs];
        x[inputs..].fill(0.5);
        // Weights that 8 bits hold exactly: each column's largest is 127 steps.
        let w: Vec<f32> = (0..16 * inputs).map(|i| [1.0, -1.0, 0.0][i % 3]).collect();
        let matrix = kernel.quantize_matrix(&w, inputs, 16);
        let q = kernel.quantize_rows(&x, inputs);
        let mut out = vec![0.0; 2 * 16];
        kernel.product(&q, &matrix, 0..16, &[0.25; 16], &mut out);
        for j in 0..16 {
            assert_eq!(out[j], 0.25);
            let exact: f32 = w[j * inputs..(j + 1) * inputs]
                .iter()
                .map(|v| v * 0.5)
                .sum::<f32>()
                + 0.25;
            assert!(
                (out[16 + j] - exact).abs() < 1e-5,
                "{} against {exact}",
                out[16 + j]
            );
        }
    }
}
