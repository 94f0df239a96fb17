//! Plain text, and the byte decoding every text-based format shares.

use data_plane_extract::charset::{self, Hints};

use crate::IngestError;
use crate::metadata::{self, DocMetadata, Extracted};

/// The longest first line taken for a title, in characters and in words.
const TITLE_MAX_CHARS: usize = 300;
const TITLE_MAX_WORDS: usize = 50;

pub(super) fn extract(file_name: &str, bytes: &[u8]) -> Result<Extracted, IngestError> {
    let text = decode(file_name, bytes)?;
    let metadata = DocMetadata {
        format: "text".to_string(),
        title: title_line(&text),
        ..DocMetadata::default()
    };
    let metadata = metadata::finish(metadata, &text, &[]);
    Ok(Extracted {
        mime: "text/plain".to_string(),
        text,
        metadata,
        tables: Vec::new(),
    })
}

/// Bytes to canonical text, as data-plane-extract decodes an uploaded file: a byte-order mark
/// wins, then UTF-8, then the legacy encoding chardetng finds most likely; binary data is
/// refused, line endings become `\n` and NULs are dropped.
pub(crate) fn decode(file_name: &str, bytes: &[u8]) -> Result<String, IngestError> {
    charset::decode_strict(bytes, Hints::default())
        .map_err(|e| IngestError::corrupt(file_name, e.to_string()))
}

/// A plain-text file's title: its first line, when that line stands alone
/// the way titles do (a blank line after it, more text below) and is short
/// enough to be one. It becomes the document's title, which every passage's
/// embedding input starts with (`chunk::embedding_input`), so a passage from
/// the middle of the file still says what the file is about. It is not made
/// a heading: headings are indexed for keywords on every passage with a
/// boost, which on SciFact's abstracts cost keyword search 0.09 nDCG@10
/// (docs/search.md, "Titles of plain-text files"). A file that opens with a
/// paragraph has none.
fn title_line(text: &str) -> Option<String> {
    let rest = text.trim_start();
    let (line, after) = rest.split_once('\n')?;
    let title = line.trim();
    let (blank, body) = after.split_once('\n')?;
    let fits = !title.is_empty()
        && title.chars().count() <= TITLE_MAX_CHARS
        && title.split_whitespace().count() <= TITLE_MAX_WORDS
        && title.chars().any(char::is_alphabetic);
    if !fits || !blank.trim().is_empty() || body.trim().is_empty() {
        return None;
    }
    Some(title.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn title(text: &str) -> Option<String> {
        title_line(text)
    }

    #[test]
    fn a_first_line_standing_alone_is_the_title() {
        assert_eq!(
            title("Vacuuming basics\n\nVACUUM reclaims storage.\n"),
            Some("Vacuuming basics".into())
        );
        // Titles may end with a full stop; leading blank lines are skipped.
        assert_eq!(
            title("\n\n  Dead tuples and their cost.  \n\nThe text.\nMore.\n"),
            Some("Dead tuples and their cost.".into())
        );
        assert_eq!(
            title("\u{a0}é\nÜnïcode títle\n\nbody"),
            None,
            "a first line followed by text is no title"
        );
        assert_eq!(
            title("\n\n\nÜnïcode títle\n\nbody"),
            Some("Ünïcode títle".into())
        );
    }

    #[test]
    fn a_paragraph_or_a_lone_line_is_no_title() {
        // No blank line after the first line: a paragraph.
        assert_eq!(title("First line\nsecond line\n\nmore"), None);
        // Nothing below it.
        assert_eq!(title("Only a line\n\n"), None);
        assert_eq!(title("Only a line"), None);
        // Too long, or no letters.
        let long = "word ".repeat(60);
        assert_eq!(title(&format!("{long}\n\nbody")), None);
        assert_eq!(title(&format!("{}\n\nbody", "x".repeat(301))), None);
        assert_eq!(title("----- 2024 -----\n\nbody"), None);
    }

    #[test]
    fn every_passage_embeds_with_the_title_and_none_has_a_heading() {
        let body = "Autovacuum wakes once a minute. ".repeat(80);
        let extracted = extract(
            "notes.txt",
            format!("Autovacuum notes\n\n{body}").as_bytes(),
        )
        .unwrap();
        assert_eq!(
            extracted.metadata.title.as_deref(),
            Some("Autovacuum notes")
        );
        assert!(extracted.metadata.headings.is_empty());
        let chunks = crate::chunk::chunk(
            &extracted.text,
            &extracted.metadata.headings,
            &[],
            &crate::chunk::ChunkOptions::default(),
        );
        assert!(chunks.len() > 1, "{} chunks", chunks.len());
        for chunk in &chunks {
            assert!(chunk.heading_path.is_empty());
            let input = crate::chunk::embedding_input(chunk, extracted.metadata.title.as_deref());
            assert!(input.starts_with("Autovacuum notes\n\n"), "{input:.60}");
        }
    }
}
