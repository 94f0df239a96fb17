//! Element-wise kernels of the transformer (exp, GELU, softmax, layer norm),
//! written branch-free over fixed-width lanes so the compiler vectorises them.
//!
//! The library `exp` and an exact `erf` are scalar calls per element; in a
//! BERT forward pass they cost about a fifth of the time. The approximations
//! here are accurate to a few float ulps, far below what changes a sentence
//! vector (the reference test holds cosine ≥ 0.999 against PyTorch).
//!
//! No `mul_add`: the crate is built for baseline x86-64, where it becomes a
//! call into a software fma per element instead of one instruction.
//!
//! The row kernels (softmax, GELU, layer norm) run compiled for AVX-512
//! where the CPU has it (checked once, through `archmage`): the same
//! arithmetic in the same order, sixteen lanes to an instruction instead of
//! four, so the results are the same bits either way.

/// Lanes per accumulator array: wide enough for AVX-512, and a plain array
/// keeps every reduction in a fixed order, so results are reproducible.
const LANES: usize = 16;

const LOG2_E: f32 = std::f32::consts::LOG2_E;
// ln 2 split in two so that `n · ln 2` is subtracted without rounding error
// (Cody–Waite reduction).
const LN2_HI: f32 = 0.693_145_75;
const LN2_LO: f32 = 1.428_606_8e-6;
// 1.5 · 2²³: adding it rounds to an integer and leaves that integer in the
// low mantissa bits, without a float→int conversion the compiler can't vectorise.
const ROUNDING_MAGIC: f32 = 12_582_912.0;

/// `e^x` to about 2 ulp for x in [-87, 88]; inputs outside are clamped, so
/// the result is never zero, infinite or subnormal.
#[inline(always)]
pub(crate) fn exp(x: f32) -> f32 {
    let x = x.clamp(-87.0, 88.0);
    let shifted = x * LOG2_E + ROUNDING_MAGIC;
    let n = shifted - ROUNDING_MAGIC;
    let n_bits = shifted.to_bits().wrapping_sub(ROUNDING_MAGIC.to_bits());
    // n · LN2_HI is exact: n has at most 8 bits and LN2_HI ends in zero bits.
    let r = (x - n * LN2_HI) - n * LN2_LO;
    // Taylor terms to r⁶: |r| ≤ ln2/2 leaves a truncation error below 2e-7.
    let p = 1.0 / 720.0;
    let p = p * r + 1.0 / 120.0;
    let p = p * r + 1.0 / 24.0;
    let p = p * r + 1.0 / 6.0;
    let p = p * r + 0.5;
    let p = p * r + 1.0;
    let p = p * r + 1.0;
    // 2ⁿ built directly in the exponent field; n is within [-126, 127].
    let scale = f32::from_bits(n_bits.wrapping_add(127) << 23);
    p * scale
}

/// GELU with the exact-erf definition BERT was trained with,
/// `x/2 · (1 + erf(x/√2))`, erf by Abramowitz & Stegun 7.1.26 (|error| < 1.5e-7).
#[inline(always)]
fn gelu(x: f32) -> f32 {
    const P: f32 = 0.327_591_1;
    const A1: f32 = 0.254_829_6;
    const A2: f32 = -0.284_496_74;
    const A3: f32 = 1.421_413_8;
    const A4: f32 = -1.453_152_1;
    const A5: f32 = 1.061_405_4;
    let z = x.abs() * std::f32::consts::FRAC_1_SQRT_2;
    let t = 1.0 / (P * z + 1.0);
    let poly = t * (A1 + t * (A2 + t * (A3 + t * (A4 + t * A5))));
    let erf_abs = 1.0 - poly * exp(-z * z);
    0.5 * x * (1.0 + erf_abs.copysign(x))
}

/// The CPU's AVX-512, when it has it.
#[cfg(target_arch = "x86_64")]
fn wide() -> Option<archmage::X64V4Token> {
    use archmage::SimdToken;
    archmage::X64V4Token::summon()
}

/// Calls `$plain($args)` compiled for AVX-512 where the CPU has it.
macro_rules! dispatch {
    ($wide:ident, $plain:ident($($arg:ident: $ty:ty),*)) => {
        #[cfg(target_arch = "x86_64")]
        #[archmage::arcane]
        fn $wide(_token: archmage::X64V4Token, $($arg: $ty),*) {
            $plain($($arg),*)
        }
    };
}

/// Applies GELU to every element in place.
pub(crate) fn gelu_in_place(values: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if let Some(token) = wide() {
        return gelu_wide(token, values);
    }
    gelu_plain(values);
}

dispatch!(gelu_wide, gelu_plain(values: &mut [f32]));

#[inline(always)]
fn gelu_plain(values: &mut [f32]) {
    for v in values.iter_mut() {
        *v = gelu(*v);
    }
}

#[inline(always)]
fn max(values: &[f32]) -> f32 {
    let mut lanes = [f32::NEG_INFINITY; LANES];
    let mut chunks = values.chunks_exact(LANES);
    for chunk in &mut chunks {
        // A comparison, not `f32::max`, whose NaN rule keeps the compiler
        // from using the vector max instruction; the same result for numbers.
        for (lane, &v) in lanes.iter_mut().zip(chunk) {
            *lane = if v > *lane { v } else { *lane };
        }
    }
    let tail = chunks
        .remainder()
        .iter()
        .fold(f32::NEG_INFINITY, |m, &v| m.max(v));
    lanes.iter().fold(tail, |m, &v| m.max(v))
}

#[inline(always)]
fn sum(values: &[f32]) -> f32 {
    let mut lanes = [0.0f32; LANES];
    let mut chunks = values.chunks_exact(LANES);
    for chunk in &mut chunks {
        for (lane, &v) in lanes.iter_mut().zip(chunk) {
            *lane += v;
        }
    }
    chunks.remainder().iter().sum::<f32>() + lanes.iter().sum::<f32>()
}

/// `Σ a[i] · b[i]` of two slices of one length.
pub(crate) fn dot(a: &[f32], b: &[f32]) -> f32 {
    debug_assert_eq!(a.len(), b.len());
    let mut lanes = [0.0f32; LANES];
    let mut a_chunks = a.chunks_exact(LANES);
    let mut b_chunks = b.chunks_exact(LANES);
    for (x, y) in (&mut a_chunks).zip(&mut b_chunks) {
        for ((lane, &x), &y) in lanes.iter_mut().zip(x).zip(y) {
            *lane += x * y;
        }
    }
    let tail: f32 = a_chunks
        .remainder()
        .iter()
        .zip(b_chunks.remainder())
        .map(|(x, y)| x * y)
        .sum();
    tail + lanes.iter().sum::<f32>()
}

/// Sum of squared distances from `mean`.
#[inline(always)]
fn squared_deviation(values: &[f32], mean: f32) -> f32 {
    let mut lanes = [0.0f32; LANES];
    let mut chunks = values.chunks_exact(LANES);
    for chunk in &mut chunks {
        for (lane, &v) in lanes.iter_mut().zip(chunk) {
            let d = v - mean;
            *lane += d * d;
        }
    }
    let tail: f32 = chunks
        .remainder()
        .iter()
        .map(|&v| (v - mean) * (v - mean))
        .sum();
    tail + lanes.iter().sum::<f32>()
}

/// Softmax of one row of attention scores, in place.
pub(crate) fn softmax_in_place(row: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if let Some(token) = wide() {
        return softmax_wide(token, row);
    }
    softmax_plain(row);
}

dispatch!(softmax_wide, softmax_plain(row: &mut [f32]));

#[inline(always)]
fn softmax_plain(row: &mut [f32]) {
    let top = max(row);
    for v in row.iter_mut() {
        *v = exp(*v - top);
    }
    // The largest element became exactly 1, so the sum is at least 1.
    let inverse = 1.0 / sum(row);
    for v in row.iter_mut() {
        *v *= inverse;
    }
}

/// `row ← layer_norm(row + residual)`; with `residual` empty, `layer_norm(row)`.
///
/// Two passes over a row that sits in L1 cache: the textbook variance,
/// without the cancellation of the single-pass `E[x²] − E[x]²`.
pub(crate) fn add_layer_norm(
    row: &mut [f32],
    residual: &[f32],
    gamma: &[f32],
    beta: &[f32],
    eps: f32,
) {
    #[cfg(target_arch = "x86_64")]
    if let Some(token) = wide() {
        return add_layer_norm_wide(token, row, residual, gamma, beta, eps);
    }
    add_layer_norm_plain(row, residual, gamma, beta, eps);
}

dispatch!(
    add_layer_norm_wide,
    add_layer_norm_plain(row: &mut [f32], residual: &[f32], gamma: &[f32], beta: &[f32], eps: f32)
);

#[inline(always)]
fn add_layer_norm_plain(row: &mut [f32], residual: &[f32], gamma: &[f32], beta: &[f32], eps: f32) {
    if !residual.is_empty() {
        for (v, &r) in row.iter_mut().zip(residual) {
            *v += r;
        }
    }
    let n = row.len() as f32;
    let mean = sum(row) / n;
    let inverse_std = 1.0 / (squared_deviation(row, mean) / n + eps).sqrt();
    for ((v, &g), &b) in row.iter_mut().zip(gamma).zip(beta) {
        *v = (*v - mean) * inverse_std * g + b;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The AVX-512 builds of the row kernels give the plain build's bits
    /// (NaN results aside), so vectors do not depend
    /// on which the CPU runs.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn the_avx512_row_kernels_give_the_plain_bits() {
        let Some(token) = wide() else {
            eprintln!("no AVX-512 on this CPU: only the plain kernels run");
            return;
        };
        let mut value = crate::test_values(11);
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        for len in [1, 2, 7, 15, 16, 17, 31, 32, 33, 100, 384, 1536] {
            for scale in [1e-3f32, 1.0, 30.0] {
                let row: Vec<f32> = (0..len).map(|_| value() * scale).collect();
                let other: Vec<f32> = (0..len).map(|_| value()).collect();
                let (mut a, mut b) = (row.clone(), row.clone());
                gelu_wide(token, &mut a);
                gelu_plain(&mut b);
                assert_eq!(bits(&a), bits(&b), "gelu, {len} values at {scale}");
                let (mut a, mut b) = (row.clone(), row.clone());
                softmax_wide(token, &mut a);
                softmax_plain(&mut b);
                assert_eq!(bits(&a), bits(&b), "softmax, {len} values at {scale}");
                let (mut a, mut b) = (row.clone(), row.clone());
                add_layer_norm_wide(token, &mut a, &other, &other, &row, 1e-12);
                add_layer_norm_plain(&mut b, &other, &other, &row, 1e-12);
                assert_eq!(bits(&a), bits(&b), "layer norm, {len} values at {scale}");
            }
        }
    }

    fn check_exp(x: f32) {
        let got = exp(x);
        let want = (x as f64).exp();
        let relative = ((got as f64 - want) / want).abs();
        assert!(
            relative < 5e-7,
            "exp({x}) = {got}, want {want} (relative error {relative:e})"
        );
    }

    #[test]
    fn exp_matches_the_library_over_the_softmax_range() {
        for i in -8700..=8800 {
            check_exp(i as f32 * 0.01);
        }
        for x in [
            0.0,
            -0.0,
            1e-8,
            -1e-8,
            0.346_573_6,
            -0.346_573_6,
            88.0,
            -87.0,
        ] {
            check_exp(x);
        }
    }

    #[test]
    fn exp_saturates_instead_of_overflowing() {
        assert!(exp(-1000.0) > 0.0 && exp(-1000.0) < 1e-37);
        assert!(exp(1000.0).is_finite());
        assert!(exp(f32::NEG_INFINITY) > 0.0);
    }

    fn check_gelu(x: f32, expected: f64) {
        let got = gelu(x) as f64;
        assert!(
            (got - expected).abs() <= 2e-7 + 1e-6 * expected.abs(),
            "gelu({x}) = {got}, want {expected}"
        );
    }

    #[test]
    fn gelu_matches_the_exact_erf_definition() {
        // x · Φ(x), Φ the standard normal distribution function, from tables.
        check_gelu(0.0, 0.0);
        check_gelu(0.5, 0.345_731_230_637_006_6);
        check_gelu(-0.5, -0.154_268_769_362_993_4);
        check_gelu(1.0, 0.841_344_746_068_542_9);
        check_gelu(-1.0, -0.158_655_253_931_457_05);
        check_gelu(2.0, 1.954_499_736_103_641_6);
        check_gelu(-2.0, -0.045_500_263_896_358_4);
        check_gelu(3.0, 2.995_950_302_693_85);
        check_gelu(-3.0, -0.004_049_697_306_15);
        check_gelu(10.0, 10.0);
        check_gelu(-10.0, 0.0);
    }

    fn check_softmax(input: &[f32], expected: &[f32]) {
        let mut row = input.to_vec();
        softmax_in_place(&mut row);
        for (got, want) in row.iter().zip(expected) {
            assert!(
                (got - want).abs() < 1e-6,
                "softmax {input:?} = {row:?}, want {expected:?}"
            );
        }
    }

    #[test]
    fn softmax_gives_probabilities() {
        check_softmax(&[0.0, 0.0], &[0.5, 0.5]);
        check_softmax(
            &[1.0, 2.0, 3.0],
            &[0.090_030_57, 0.244_728_47, 0.665_240_94],
        );
        // Large scores must not overflow.
        check_softmax(&[1000.0, 1000.0, 0.0], &[0.5, 0.5, 0.0]);
        // Longer than one lane block, with a tail.
        let long: Vec<f32> = (0..37).map(|i| i as f32 * 0.1).collect();
        let total: f32 = long.iter().map(|&v| (v as f64).exp() as f32).sum();
        let expected: Vec<f32> = long
            .iter()
            .map(|&v| (v as f64).exp() as f32 / total)
            .collect();
        check_softmax(&long, &expected);
    }

    fn check_layer_norm(row: &[f32], residual: &[f32], expected: &[f32]) {
        let mut got = row.to_vec();
        let gamma = vec![2.0; row.len()];
        let beta = vec![0.5; row.len()];
        add_layer_norm(&mut got, residual, &gamma, &beta, 1e-12);
        for (g, e) in got.iter().zip(expected) {
            assert!(
                (g - e).abs() < 1e-5,
                "layer norm of {row:?} + {residual:?} = {got:?}, want {expected:?}"
            );
        }
    }

    #[test]
    fn layer_norm_centres_scales_and_shifts() {
        // mean 2.5, standard deviation √1.25: normalised ±1.3416, ±0.4472.
        let normalised = [-1.341_640_8, -0.447_213_6, 0.447_213_6, 1.341_640_8];
        let expected: Vec<f32> = normalised.iter().map(|v| v * 2.0 + 0.5).collect();
        check_layer_norm(&[1.0, 2.0, 3.0, 4.0], &[], &expected);
        check_layer_norm(&[0.0, 1.0, 1.0, 3.0], &[1.0, 1.0, 2.0, 1.0], &expected);
        // A constant row has no spread: everything lands on beta.
        check_layer_norm(&[7.0; 20], &[], &[0.5; 20]);
    }
}
