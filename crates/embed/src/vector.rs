//! Small vector helpers shared by both providers and handy for callers.

/// Scales `v` to unit length in place; the zero vector is left as it is.
///
/// Matches torch's `F.normalize`: the norm is clamped at 1e-12 rather than
/// dividing by zero.
pub fn normalise(v: &mut [f32]) {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-12);
    for x in v.iter_mut() {
        *x /= norm;
    }
}

/// Cosine similarity of two vectors of equal length; 0 when either is zero.
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let na = a.iter().map(|x| x * x).sum::<f32>().sqrt();
    let nb = b.iter().map(|x| x * x).sum::<f32>().sqrt();
    if na == 0.0 || nb == 0.0 {
        0.0
    } else {
        dot / (na * nb)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check_normalise(input: &[f32], expected: &[f32]) {
        let mut v = input.to_vec();
        normalise(&mut v);
        for (got, want) in v.iter().zip(expected) {
            assert!(
                (got - want).abs() < 1e-6,
                "{input:?} -> {v:?}, want {expected:?}"
            );
        }
    }

    #[test]
    fn normalise_scales_to_unit_length() {
        check_normalise(&[3.0, 4.0], &[0.6, 0.8]);
        check_normalise(&[0.0, -2.0], &[0.0, -1.0]);
        check_normalise(&[0.0, 0.0], &[0.0, 0.0]);
    }

    #[test]
    fn cosine_of_known_pairs() {
        let check = |a: &[f32], b: &[f32], want: f32| {
            let got = cosine(a, b);
            assert!(
                (got - want).abs() < 1e-6,
                "cosine({a:?}, {b:?}) = {got}, want {want}"
            );
        };
        check(&[1.0, 0.0], &[2.0, 0.0], 1.0);
        check(&[1.0, 0.0], &[0.0, 3.0], 0.0);
        check(&[1.0, 1.0], &[-1.0, -1.0], -1.0);
        check(&[0.0, 0.0], &[1.0, 0.0], 0.0);
    }
}
