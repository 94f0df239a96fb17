//! Tells when a model's reply has started repeating itself: the same
//! sentence, line or paragraph over and over, the way small models loop
//! when sampling goes wrong. A loop like that never reaches a stop token
//! and the idle timeout cannot catch it (the model keeps talking), so the
//! turn is ended as soon as the loop is certain.
//!
//! The test is exact periodicity of the reply's tail: the last `L` bytes
//! repeat with a period `p` (every byte equals the one `p` before it), with
//! `L` at least [`MIN_SPAN`] and at least [`MIN_REPEATS`] periods. Periods
//! up to [`MAX_PERIOD`] bytes are seen. Near-repetition (a counter that
//! changes on every line) is left to the token limit.

/// Shortest repeating tail that counts (bytes): long enough that a ruler of
/// dashes or a short list of zeros in an honest answer does not trip it.
const MIN_SPAN: usize = 400;
/// The unit must be seen this many times in a row.
const MIN_REPEATS: usize = 3;
/// Longest unit looked for (bytes): about a paragraph.
const MAX_PERIOD: usize = 1024;
/// Bytes of the reply kept for the test.
const WINDOW: usize = MAX_PERIOD * MIN_REPEATS + MAX_PERIOD;
/// The tail is tested after this many new bytes (the test reads the whole
/// window, so testing on every chunk would cost more for nothing).
const CHECK_EVERY: usize = 64;

/// Watches one reply as it streams.
#[derive(Debug, Default)]
pub(crate) struct RepetitionGuard {
    tail: Vec<u8>,
    unchecked: usize,
    /// Scratch for the prefix function, kept to avoid reallocating.
    table: Vec<usize>,
}

impl RepetitionGuard {
    /// Adds streamed text; true once the reply is looping.
    pub(crate) fn push(&mut self, text: &str) -> bool {
        self.tail.extend_from_slice(text.as_bytes());
        if self.tail.len() > WINDOW {
            let excess = self.tail.len() - WINDOW;
            self.tail.drain(..excess);
        }
        self.unchecked += text.len();
        if self.unchecked < CHECK_EVERY || self.tail.len() < MIN_SPAN {
            return false;
        }
        self.unchecked = 0;
        self.is_looping()
    }

    /// The prefix function of the reversed tail gives, for every length
    /// `L`, the smallest period of the last `L` bytes: `L - pi[L - 1]`.
    fn is_looping(&mut self) -> bool {
        let n = self.tail.len();
        let at = |i: usize| self.tail[n - 1 - i];
        self.table.clear();
        self.table.resize(n, 0);
        for i in 1..n {
            let mut k = self.table[i - 1];
            while k > 0 && at(i) != at(k) {
                k = self.table[k - 1];
            }
            if at(i) == at(k) {
                k += 1;
            }
            self.table[i] = k;
        }
        (MIN_SPAN..=n).any(|len| {
            let period = len - self.table[len - 1];
            period <= MAX_PERIOD && len >= MIN_REPEATS * period
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loops_after(text: &str, chunk: usize) -> Option<usize> {
        let mut guard = RepetitionGuard::default();
        let mut fed = 0;
        let bytes: Vec<char> = text.chars().collect();
        for piece in bytes.chunks(chunk) {
            let piece: String = piece.iter().collect();
            fed += piece.len();
            if guard.push(&piece) {
                return Some(fed);
            }
        }
        None
    }

    #[test]
    fn a_sentence_said_over_and_over_is_caught_within_a_few_repeats() {
        let sentence = "I am sorry, but I cannot find that in your documents. ";
        let text = format!("Let me look.\n{}", sentence.repeat(40));
        let at = loops_after(&text, 7).expect("the loop is seen");
        assert!(
            at < 13 + MIN_SPAN + sentence.len() * 2 + CHECK_EVERY,
            "{at}"
        );
    }

    #[test]
    fn a_repeated_paragraph_and_endless_newlines_are_caught() {
        let paragraph = "The report covers 2019 to 2023. Revenue grew in every year, \
            most in 2021, when the new product line launched in three markets. \
            Costs rose more slowly, so the margin widened from 12 to 19 percent.\n\n";
        assert!(loops_after(&paragraph.repeat(6), 5).is_some());
        assert!(loops_after(&"\n".repeat(1000), 1).is_some());
        assert!(loops_after(&"ा".repeat(400), 3).is_some());
    }

    #[test]
    fn honest_answers_are_left_alone() {
        let mut answer = String::new();
        for i in 1..=60 {
            answer.push_str(&format!(
                "{i}. Section {i} of the manual explains step {} of the set-up.\n",
                i * 7
            ));
        }
        answer.push_str("| a | b |\n|---|---|\n| 1 | 2 |\n");
        answer.push_str(&"-".repeat(120));
        answer.push_str("\nDone.");
        assert_eq!(loops_after(&answer, 4), None);
        let prose = include_str!("../prompts/system.md").repeat(2);
        // Twice is not a loop (three times at least).
        assert_eq!(loops_after(&prose, 11), None);
    }

    #[test]
    fn a_unit_longer_than_the_longest_period_is_not_looked_for() {
        let mut seed: u32 = 12345;
        let unit: String = (0..MAX_PERIOD + 100)
            .map(|_| {
                seed = seed.wrapping_mul(1_103_515_245).wrapping_add(12_345);
                char::from(b'a' + ((seed >> 16) % 26) as u8)
            })
            .collect();
        assert_eq!(loops_after(&unit.repeat(4), 50), None);
        let short = &unit[..MAX_PERIOD - 24];
        assert!(loops_after(&short.repeat(4), 50).is_some());
    }
}
