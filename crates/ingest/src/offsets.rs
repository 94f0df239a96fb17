//! Conversion from byte offsets (what Rust slices and parsers report) to character offsets
//! (what is stored and what PostgreSQL's `substr` counts).

/// Walks the text forward once for increasing offsets, so converting every heading or chunk
/// boundary of a document costs one pass instead of one pass per boundary.
pub(crate) struct CharCursor<'a> {
    text: &'a str,
    byte: usize,
    chars: u64,
}

impl<'a> CharCursor<'a> {
    pub(crate) fn new(text: &'a str) -> Self {
        CharCursor {
            text,
            byte: 0,
            chars: 0,
        }
    }

    /// The character offset of `byte`, which must lie on a char boundary. Short steps back (a
    /// chunk's overlap with the previous one) cost only the distance moved.
    pub(crate) fn char_at(&mut self, byte: usize) -> u64 {
        let byte = byte.min(self.text.len());
        if byte < self.byte {
            let back = self
                .text
                .get(byte..self.byte)
                .map_or(0, |s| s.chars().count());
            self.chars -= back as u64;
        } else {
            let step = self
                .text
                .get(self.byte..byte)
                .map_or(0, |s| s.chars().count());
            self.chars += step as u64;
        }
        self.byte = byte;
        self.chars
    }
}

/// Walks the text forward once to turn increasing character offsets into byte offsets.
pub(crate) struct ByteCursor<'a> {
    text: &'a str,
    byte: usize,
    chars: u64,
}

impl<'a> ByteCursor<'a> {
    pub(crate) fn new(text: &'a str) -> Self {
        ByteCursor {
            text,
            byte: 0,
            chars: 0,
        }
    }

    /// The byte offset of character `index`, clamped to the end of the text.
    pub(crate) fn byte_at(&mut self, index: u64) -> usize {
        if index < self.chars {
            self.byte = 0;
            self.chars = 0;
        }
        let rest = &self.text[self.byte..];
        let wanted = usize::try_from(index - self.chars).unwrap_or(usize::MAX);
        let advance = rest
            .char_indices()
            .nth(wanted)
            .map_or(rest.len(), |(i, _)| i);
        let advanced_chars = if advance == rest.len() {
            rest[..advance].chars().count()
        } else {
            wanted
        };
        self.byte += advance;
        self.chars += advanced_chars as u64;
        self.byte
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_agree_in_both_directions() {
        let text = "aé€😀b";
        let mut to_char = CharCursor::new(text);
        let mut to_byte = ByteCursor::new(text);
        for (index, (byte, _)) in text.char_indices().enumerate() {
            assert_eq!(to_char.char_at(byte), index as u64);
            assert_eq!(to_byte.byte_at(index as u64), byte);
        }
        assert_eq!(to_char.char_at(text.len()), 5);
        assert_eq!(to_byte.byte_at(5), text.len());
        assert_eq!(to_byte.byte_at(99), text.len());
        assert_eq!(to_char.char_at(1), 1);
        assert_eq!(to_byte.byte_at(1), 1);
    }
}
