//! Plain text, and the byte decoding every text-based format shares.

use chardetng::{EncodingDetector, Iso2022JpDetection, Utf8Detection};
use encoding_rs::Encoding;

use crate::IngestError;
use crate::metadata::{self, DocMetadata, Extracted};

pub(super) fn extract(file_name: &str, bytes: &[u8]) -> Result<Extracted, IngestError> {
    let text = decode(file_name, bytes)?;
    let metadata = DocMetadata {
        format: "text".to_string(),
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

/// Bytes to canonical text: a byte-order mark wins, then UTF-8, then the legacy encoding
/// chardetng finds most likely. Line endings become `\n` (so line numbers and offsets mean the
/// same thing on every platform) and NUL characters are dropped, because PostgreSQL text
/// cannot hold them.
pub(crate) fn decode(file_name: &str, bytes: &[u8]) -> Result<String, IngestError> {
    let decoded = if let Some((encoding, bom_len)) = Encoding::for_bom(bytes) {
        let (text, had_errors) = encoding.decode_without_bom_handling(&bytes[bom_len..]);
        if had_errors {
            return Err(IngestError::corrupt(
                file_name,
                format!(
                    "bytes are not valid {} despite its byte-order mark",
                    encoding.name()
                ),
            ));
        }
        text.into_owned()
    } else if let Ok(text) = std::str::from_utf8(bytes) {
        text.to_string()
    } else {
        decode_legacy(file_name, bytes)?
    };
    Ok(normalize(&decoded))
}

fn decode_legacy(file_name: &str, bytes: &[u8]) -> Result<String, IngestError> {
    if let Some(at) = bytes.iter().position(|&b| b == 0) {
        return Err(IngestError::corrupt(
            file_name,
            format!("not text: binary data (NUL byte at offset {at}) and not valid UTF-8"),
        ));
    }
    // UTF-8 already failed and ISO-2022-JP is 7-bit (so it would have passed as UTF-8):
    // neither can be the answer here.
    let mut detector = EncodingDetector::new(Iso2022JpDetection::Deny);
    detector.feed(bytes, true);
    let encoding = detector.guess(None, Utf8Detection::Deny);
    let (text, had_errors) = encoding.decode_without_bom_handling(bytes);
    // Single-byte encodings decode any byte, so binary data shows itself by control characters
    // that no text file carries.
    let controls = text
        .chars()
        .filter(|&c| c.is_control() && !matches!(c, '\t' | '\n' | '\r' | '\x0c'))
        .count();
    if had_errors || controls > 8.max(text.len() / 100) {
        return Err(IngestError::corrupt(
            file_name,
            format!(
                "not text: neither valid UTF-8 nor readable as {}",
                encoding.name()
            ),
        ));
    }
    Ok(text.into_owned())
}

fn normalize(text: &str) -> String {
    if !text.contains(['\r', '\0']) {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\0' => {}
            '\r' => {
                if chars.peek() == Some(&'\n') {
                    chars.next();
                }
                out.push('\n');
            }
            _ => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decoding() {
        let check = |bytes: &[u8], expected: Option<&str>| {
            let got = decode("t.txt", bytes).ok();
            assert_eq!(got.as_deref(), expected, "bytes {bytes:?}");
        };
        check(b"plain", Some("plain"));
        check(b"\xEF\xBB\xBFbom", Some("bom"));
        check(b"\xFF\xFEh\x00i\x00", Some("hi"));
        check(b"\xFE\xFF\x00h\x00i", Some("hi"));
        check(b"a\r\nb\rc\n", Some("a\nb\nc\n"));
        check(b"nul\x00here", Some("nulhere"));
        check(b"caf\xE9 cr\xE8me br\xFBl\xE9e", Some("café crème brûlée"));
        check(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", None);
        check(b"", Some(""));
    }
}
