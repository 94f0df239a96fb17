//! One text's attention for one head, on AVX-512 or else AVX2 and FMA
//! where the CPU has them (checked once, through `archmage`), without the
//! operand packing a general matrix product does on every call.
//!
//! A head is small (`len × d` with `d` = 32 for MiniLM): the general
//! product copied Q, Kᵀ, the scores and V into panels for each of the
//! twelve heads of every text in every layer, which was a quarter of
//! attention's time. Here:
//!
//! - **Scores** `Q·Kᵀ`: K is transposed once into a `d × len` scratch
//!   (padded with zeros to whole 16-lane vectors), so each score row is a
//!   sum over `k` of `q[i][k]` times a contiguous row of Kᵀ: a tile of four
//!   query rows by four vectors of keys keeps sixteen sums in registers.
//! - **Softmax** per row over the `len` real scores (the padding is skipped).
//! - **Context** `P·V`: each output row is a sum over keys of `p[i][j]`
//!   times V's row `j`, read straight out of the packed QKV buffer.
//!
//! On AVX2 the same walk runs on 256-bit registers, a 16-value vector of
//! the scratches being two of them, in smaller tiles (sixteen registers).
//! The scale 1/√d is already folded into the query weights. Off x86-64
//! there is no such kernel and `available` says so.

#![cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]

#[cfg(target_arch = "x86_64")]
use archmage::prelude::*;
use ndarray::ArrayViewMut2;

#[cfg(target_arch = "x86_64")]
use crate::kernels;

const LANES: usize = 16;
/// Query rows and 16-lane vectors per tile: sixteen sums, four vectors of
/// the other operand and one broadcast fit the 32 AVX-512 registers.
const ROWS: usize = 4;
const VECTORS: usize = 4;

/// Rows per tile on AVX2, for the scores (one 16-value vector of keys, two
/// registers) and the context (one 16-value vector of values): eight sums,
/// two loads and a broadcast in sixteen registers.
const NARROW_ROWS: usize = 4;

/// Proof that the CPU has AVX-512, or AVX2 and FMA; only heads of a
/// multiple of 16 values take this path.
#[derive(Clone, Copy)]
pub(crate) enum Wide {
    #[cfg(target_arch = "x86_64")]
    Avx512(X64V4Token),
    #[cfg(target_arch = "x86_64")]
    Avx2(X64V3Token),
}

impl Wide {
    /// The widest kernel this CPU runs for heads of `head_size` values.
    pub(crate) fn available(head_size: usize) -> Option<Self> {
        Self::all(head_size).into_iter().next()
    }

    /// Every kernel this CPU runs for heads of `head_size` values, widest
    /// first.
    pub(crate) fn all(head_size: usize) -> Vec<Self> {
        #[allow(unused_mut)] // only x86-64 has kernels
        let mut kernels = Vec::new();
        if head_size == 0 || !head_size.is_multiple_of(LANES) {
            return kernels;
        }
        #[cfg(target_arch = "x86_64")]
        {
            if let Some(token) = X64V4Token::summon() {
                kernels.push(Self::Avx512(token));
            }
            if let Some(token) = X64V3Token::summon() {
                kernels.push(Self::Avx2(token));
            }
        }
        kernels
    }

    /// The context of one text and head: rows `first..first + len` of the
    /// QKV buffer (`stride` values a row), the head's query, key and value
    /// at `query`, `key` and `value` within a row, `d` values each; written
    /// into `out` (`len × d`). `scratch` is reused between calls.
    #[cfg(target_arch = "x86_64")]
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn head(
        self,
        qkv: &[f32],
        stride: usize,
        first: usize,
        len: usize,
        [query, key, value]: [usize; 3],
        d: usize,
        scratch: &mut Vec<f32>,
        out: &mut ArrayViewMut2<f32>,
    ) {
        assert_eq!(out.dim(), (len, d));
        assert!(query + d <= stride && key + d <= stride && value + d <= stride);
        assert!((first + len) * stride <= qkv.len());
        if len == 0 {
            return;
        }
        let padded = len.next_multiple_of(LANES);
        // Every score is written before it is read, and Kᵀ's padding is
        // zeroed below, so the scratch is only grown, never cleared.
        let need = (d + len) * padded;
        if scratch.len() < need {
            scratch.resize(need, 0.0);
        }
        let (transposed, scores) = scratch[..need].split_at_mut(d * padded);
        for (k, keys) in transposed.chunks_exact_mut(padded).enumerate() {
            for (j, slot) in keys[..len].iter_mut().enumerate() {
                *slot = qkv[(first + j) * stride + key + k];
            }
            keys[len..].fill(0.0);
        }
        let text = Text {
            qkv,
            stride,
            first,
            len,
            padded,
            d,
        };
        let transposed = transposed.as_chunks::<LANES>().0;
        let chunks = scores.as_chunks_mut::<LANES>().0;
        match self {
            Self::Avx512(token) => scores_wide(token, &text, query, transposed, chunks),
            Self::Avx2(token) => scores_narrow(token, &text, query, transposed, chunks),
        }
        for row in scores.chunks_exact_mut(padded) {
            kernels::softmax_in_place(&mut row[..len]);
        }
        match self {
            Self::Avx512(token) => context_wide(token, &text, value, scores, out),
            Self::Avx2(token) => context_narrow(token, &text, value, scores, out),
        }
    }

    /// Off x86-64 there is no kernel, so no `Wide` to call this on.
    #[cfg(not(target_arch = "x86_64"))]
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn head(
        self,
        _qkv: &[f32],
        _stride: usize,
        _first: usize,
        _len: usize,
        _at: [usize; 3],
        _d: usize,
        _scratch: &mut Vec<f32>,
        _out: &mut ArrayViewMut2<f32>,
    ) {
        match self {}
    }
}

/// Where one text's rows lie in the QKV buffer, and the head's shapes.
struct Text<'a> {
    qkv: &'a [f32],
    stride: usize,
    first: usize,
    len: usize,
    /// `len` rounded up to whole vectors: the row length of the scratches.
    padded: usize,
    d: usize,
}

impl Text<'_> {
    /// `d` values of row `i` starting at `at` within the row.
    #[inline(always)]
    fn part(&self, i: usize, at: usize) -> &[f32] {
        &self.qkv[(self.first + i) * self.stride + at..][..self.d]
    }
}

/// Expands to a `match` over the tile heights and widths, each a call of
/// `$tile::<R, V>`, a short tail one vector at a time.
#[cfg(target_arch = "x86_64")]
macro_rules! tiles {
    ($tile:ident, $height:expr, $width:expr, ($($arg:expr),*)) => {
        match ($height, $width) {
            (4, VECTORS) => $tile::<4, VECTORS>($($arg),*),
            (3, VECTORS) => $tile::<3, VECTORS>($($arg),*),
            (2, VECTORS) => $tile::<2, VECTORS>($($arg),*),
            (1, VECTORS) => $tile::<1, VECTORS>($($arg),*),
            (4, _) => $tile::<4, 1>($($arg),*),
            (3, _) => $tile::<3, 1>($($arg),*),
            (2, _) => $tile::<2, 1>($($arg),*),
            (1, _) => $tile::<1, 1>($($arg),*),
            _ => unreachable!("at most {ROWS} rows"),
        }
    };
}

#[cfg(target_arch = "x86_64")]
#[arcane]
fn scores_wide(
    _token: X64V4Token,
    text: &Text,
    query: usize,
    transposed: &[[f32; LANES]],
    scores: &mut [[f32; LANES]],
) {
    let vectors = text.padded / LANES;
    for row in (0..text.len).step_by(ROWS) {
        let height = (text.len - row).min(ROWS);
        let mut vector = 0;
        while vector < vectors {
            let width = if vectors - vector >= VECTORS {
                VECTORS
            } else {
                1
            };
            tiles!(
                score_tile,
                height,
                width,
                (text, query, transposed, scores, row, vector)
            );
            vector += width;
        }
    }
}

/// Scores of `R` query rows from `row` against the keys of `V` vectors from
/// `vector`.
#[cfg(target_arch = "x86_64")]
#[rite(v4, import_intrinsics)]
fn score_tile<const R: usize, const V: usize>(
    text: &Text,
    query: usize,
    transposed: &[[f32; LANES]],
    scores: &mut [[f32; LANES]],
    row: usize,
    vector: usize,
) {
    let mut queries: [&[f32]; R] = [&[]; R];
    for (r, q) in queries.iter_mut().enumerate() {
        *q = text.part(row + r, query);
    }
    let mut sums = [[_mm512_setzero_ps(); V]; R];
    let vectors = text.padded / LANES;
    for k in 0..text.d {
        let mut factors = [0.0; R];
        for r in 0..R {
            factors[r] = queries[r][k];
        }
        accumulate_wide(&mut sums, factors, &transposed[k * vectors + vector..][..V]);
    }
    for (r, sums) in sums.iter().enumerate() {
        for (v, &sum) in sums.iter().enumerate() {
            _mm512_storeu_ps(&mut scores[(row + r) * vectors + vector + v], sum);
        }
    }
}

/// `sums[r][v] += factors[r] · vectors[v]`: both wide tiles' step.
#[cfg(target_arch = "x86_64")]
#[rite(v4, import_intrinsics)]
fn accumulate_wide<const R: usize, const V: usize>(
    sums: &mut [[__m512; V]; R],
    factors: [f32; R],
    vectors: &[[f32; LANES]],
) {
    let mut lanes = [_mm512_setzero_ps(); V];
    for (lane, values) in lanes.iter_mut().zip(vectors) {
        *lane = _mm512_loadu_ps(values);
    }
    for (sums, &factor) in sums.iter_mut().zip(&factors) {
        let factor = _mm512_set1_ps(factor);
        for (sum, &lane) in sums.iter_mut().zip(&lanes) {
            *sum = _mm512_fmadd_ps(factor, lane, *sum);
        }
    }
}

/// Rows per tile of the context: with a head of two vectors (MiniLM's 32
/// values), eight rows give sixteen independent sums, enough to keep both
/// FMA pipes busy through their latency.
const CONTEXT_ROWS: usize = 8;

#[cfg(target_arch = "x86_64")]
#[arcane]
fn context_wide(
    _token: X64V4Token,
    text: &Text,
    value: usize,
    scores: &[f32],
    out: &mut ArrayViewMut2<f32>,
) {
    let vectors = text.d / LANES;
    for row in (0..text.len).step_by(CONTEXT_ROWS) {
        let height = (text.len - row).min(CONTEXT_ROWS);
        let mut vector = 0;
        while vector < vectors {
            let width = if vectors - vector >= 2 { 2 } else { 1 };
            let args = (text, value, scores, &mut *out, row, vector);
            macro_rules! heights {
                ($($h:literal)*) => {
                    match (height, width) {
                        $(($h, 2) => context_tile::<$h, 2>(args.0, args.1, args.2, args.3, args.4, args.5),)*
                        $(($h, _) => context_tile::<$h, 1>(args.0, args.1, args.2, args.3, args.4, args.5),)*
                        _ => unreachable!("at most {CONTEXT_ROWS} rows"),
                    }
                };
            }
            heights!(1 2 3 4 5 6 7 8);
            vector += width;
        }
    }
}

/// Context of `R` rows from `row`, `V` vectors of values from `vector`.
#[allow(clippy::needless_range_loop)] // `j` indexes every row's weights
#[cfg(target_arch = "x86_64")]
#[rite(v4, import_intrinsics)]
fn context_tile<const R: usize, const V: usize>(
    text: &Text,
    value: usize,
    scores: &[f32],
    out: &mut ArrayViewMut2<f32>,
    row: usize,
    vector: usize,
) {
    let mut weights: [&[f32]; R] = [&[]; R];
    for (r, w) in weights.iter_mut().enumerate() {
        *w = &scores[(row + r) * text.padded..][..text.len];
    }
    let mut sums = [[_mm512_setzero_ps(); V]; R];
    for j in 0..text.len {
        let mut factors = [0.0; R];
        for r in 0..R {
            factors[r] = weights[r][j];
        }
        let values = text.part(j, value).as_chunks::<LANES>().0;
        accumulate_wide(&mut sums, factors, &values[vector..][..V]);
    }
    for (r, sums) in sums.iter().enumerate() {
        let mut target = out.row_mut(row + r);
        for (v, &sum) in sums.iter().enumerate() {
            let first = (vector + v) * LANES;
            // A head's columns of a row are contiguous in the context
            // buffer; element by element in case a view ever is not.
            match target.as_slice_mut() {
                Some(target) => _mm512_storeu_ps(&mut target.as_chunks_mut().0[vector + v], sum),
                None => {
                    let mut lanes = [0.0f32; LANES];
                    _mm512_storeu_ps(&mut lanes, sum);
                    for (l, &value) in lanes.iter().enumerate() {
                        target[first + l] = value;
                    }
                }
            }
        }
    }
}

/// Expands to a call of `$tile::<R>` for the `$left` rows left, at most
/// [`NARROW_ROWS`].
#[cfg(target_arch = "x86_64")]
macro_rules! narrow_rows {
    ($tile:ident, $left:expr, ($($arg:expr),*)) => {
        match ($left).min(NARROW_ROWS) {
            4 => $tile::<4>($($arg),*),
            3 => $tile::<3>($($arg),*),
            2 => $tile::<2>($($arg),*),
            _ => $tile::<1>($($arg),*),
        }
    };
}

#[cfg(target_arch = "x86_64")]
#[arcane]
fn scores_narrow(
    _token: X64V3Token,
    text: &Text,
    query: usize,
    transposed: &[[f32; LANES]],
    scores: &mut [[f32; LANES]],
) {
    for row in (0..text.len).step_by(NARROW_ROWS) {
        for vector in 0..text.padded / LANES {
            narrow_rows!(
                score_tile_narrow,
                text.len - row,
                (text, query, transposed, &mut *scores, row, vector)
            );
        }
    }
}

/// Scores of `R` query rows from `row` against the 16 keys of `vector`,
/// as two 256-bit halves.
#[allow(clippy::needless_range_loop)] // the indices address several arrays at once
#[cfg(target_arch = "x86_64")]
#[rite(v3, import_intrinsics)]
fn score_tile_narrow<const R: usize>(
    text: &Text,
    query: usize,
    transposed: &[[f32; LANES]],
    scores: &mut [[f32; LANES]],
    row: usize,
    vector: usize,
) {
    let mut queries: [&[f32]; R] = [&[]; R];
    for (r, q) in queries.iter_mut().enumerate() {
        *q = text.part(row + r, query);
    }
    let mut sums = [[_mm256_setzero_ps(); 2]; R];
    let vectors = text.padded / LANES;
    for k in 0..text.d {
        let mut factors = [0.0; R];
        for r in 0..R {
            factors[r] = queries[r][k];
        }
        accumulate(&mut sums, factors, &transposed[k * vectors + vector]);
    }
    for (r, sums) in sums.iter().enumerate() {
        let halves = scores[(row + r) * vectors + vector].as_chunks_mut::<8>().0;
        for (half, &sum) in halves.iter_mut().zip(sums) {
            _mm256_storeu_ps(half, sum);
        }
    }
}

/// `sums[r] += factors[r] · values` for a 16-value vector held as two
/// 256-bit halves: both narrow tiles' step.
#[cfg(target_arch = "x86_64")]
#[rite(v3, import_intrinsics)]
fn accumulate<const R: usize>(
    sums: &mut [[__m256; 2]; R],
    factors: [f32; R],
    values: &[f32; LANES],
) {
    let (halves, _) = values.as_chunks::<8>();
    let lanes = [_mm256_loadu_ps(&halves[0]), _mm256_loadu_ps(&halves[1])];
    for (sums, &factor) in sums.iter_mut().zip(&factors) {
        let factor = _mm256_set1_ps(factor);
        for (sum, &lane) in sums.iter_mut().zip(&lanes) {
            *sum = _mm256_fmadd_ps(factor, lane, *sum);
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[arcane]
fn context_narrow(
    _token: X64V3Token,
    text: &Text,
    value: usize,
    scores: &[f32],
    out: &mut ArrayViewMut2<f32>,
) {
    for row in (0..text.len).step_by(NARROW_ROWS) {
        for vector in 0..text.d / LANES {
            narrow_rows!(
                context_tile_narrow,
                text.len - row,
                (text, value, scores, &mut *out, row, vector)
            );
        }
    }
}

/// Context of `R` rows from `row`, the 16 values of `vector`, as two
/// 256-bit halves.
#[allow(clippy::needless_range_loop)] // `j` indexes every row's weights
#[cfg(target_arch = "x86_64")]
#[rite(v3, import_intrinsics)]
fn context_tile_narrow<const R: usize>(
    text: &Text,
    value: usize,
    scores: &[f32],
    out: &mut ArrayViewMut2<f32>,
    row: usize,
    vector: usize,
) {
    let mut weights: [&[f32]; R] = [&[]; R];
    for (r, w) in weights.iter_mut().enumerate() {
        *w = &scores[(row + r) * text.padded..][..text.len];
    }
    let mut sums = [[_mm256_setzero_ps(); 2]; R];
    for j in 0..text.len {
        let mut factors = [0.0; R];
        for r in 0..R {
            factors[r] = weights[r][j];
        }
        accumulate(
            &mut sums,
            factors,
            &text.part(j, value).as_chunks::<LANES>().0[vector],
        );
    }
    for (r, sums) in sums.iter().enumerate() {
        let mut target = out.row_mut(row + r);
        let mut lanes = [[0.0f32; 8]; 2];
        for (half, &sum) in lanes.iter_mut().zip(sums) {
            _mm256_storeu_ps(half, sum);
        }
        let first = vector * LANES;
        for (l, &value) in lanes.as_flattened().iter().enumerate() {
            target[first + l] = value;
        }
    }
}

#[cfg(test)]
mod tests {
    use ndarray::Array2;

    use super::*;

    /// Every length around the tile and vector edges against plain f64
    /// attention.
    #[test]
    fn a_head_gives_plain_attention_at_every_length() {
        let kernels = Wide::all(32);
        if kernels.is_empty() {
            eprintln!("no AVX2 or AVX-512 on this CPU: the general product runs instead");
        }
        let results: Vec<_> = kernels
            .into_iter()
            .map(plain_attention_at_every_length)
            .collect();
        // The same sums in the same order on every vector width.
        for other in results.iter().skip(1) {
            assert!(
                results[0]
                    .iter()
                    .zip(other)
                    .all(|(a, b)| a.to_bits() == b.to_bits()),
                "AVX-512 and AVX2 give other bits"
            );
        }
    }

    /// Checks one kernel against plain f64 attention; its outputs, every
    /// length after the other.
    fn plain_attention_at_every_length(wide: Wide) -> Vec<f32> {
        let mut all = Vec::new();
        let (d, heads) = (32, 2);
        let stride = 3 * d * heads;
        let mut value = crate::test_values(5);
        let mut scratch = Vec::new();
        for len in [1, 2, 5, 15, 16, 17, 63, 64, 65, 130] {
            let first = 3;
            let qkv: Vec<f32> = (0..(first + len) * stride).map(|_| value() * 2.0).collect();
            let head = 1;
            let at = [head * d, heads * d + head * d, 2 * heads * d + head * d];
            let mut out = Array2::<f32>::from_elem((len, d), f32::NAN);
            wide.head(
                &qkv,
                stride,
                first,
                len,
                at,
                d,
                &mut scratch,
                &mut out.view_mut(),
            );
            let part = |i: usize, offset: usize, k: usize| {
                f64::from(qkv[(first + i) * stride + offset + k])
            };
            for i in 0..len {
                let scores: Vec<f64> = (0..len)
                    .map(|j| (0..d).map(|k| part(i, at[0], k) * part(j, at[1], k)).sum())
                    .collect();
                let top = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                let weights: Vec<f64> = scores.iter().map(|s| (s - top).exp()).collect();
                let total: f64 = weights.iter().sum();
                for k in 0..d {
                    let want: f64 = (0..len)
                        .map(|j| weights[j] / total * part(j, at[2], k))
                        .sum();
                    let got = f64::from(out[[i, k]]);
                    assert!(
                        (got - want).abs() < 1e-4,
                        "length {len}, row {i}, column {k}: {got} against {want}"
                    );
                }
            }
            all.extend(out.iter().copied());
        }
        all
    }
}
