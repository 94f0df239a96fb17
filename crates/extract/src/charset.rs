//! Bytes to text: which character encoding a body is in, and decoding it.
//!
//! The choice follows browsers: a byte-order mark, else the charset a
//! Content-Type declares, else (for HTML) a `<meta>` declaration in the first
//! kilobyte, else UTF-8 when the bytes are valid UTF-8, else the legacy
//! encoding chardetng finds most likely (told the site's top-level domain
//! when there is one). One departure: a declared legacy encoding loses to
//! UTF-8 when the bytes are valid UTF-8 and not plain ASCII, because pages
//! converted to UTF-8 often keep their old declaration, and reading them as
//! declared turns every accented letter into mojibake ("cafÃ©"); legacy text
//! that happens to be valid UTF-8 beyond ASCII is rare enough to lose. `decode` is the lenient reading a fetched page gets;
//! `decode_strict` the one an uploaded file gets, which refuses binary data
//! and gives canonical text.

use std::borrow::Cow;

use chardetng::{EncodingDetector, Iso2022JpDetection, Utf8Detection};
use encoding_rs::{Encoding, UTF_8, WINDOWS_1252};

/// What is known about a body besides its bytes.
#[derive(Debug, Clone, Copy, Default)]
pub struct Hints<'a> {
    /// The Content-Type header, parameters included.
    pub content_type: Option<&'a str>,
    /// The body is HTML, so a `<meta charset>` counts.
    pub html: bool,
    /// The top-level domain of the URL it came from, lowercase.
    pub tld: Option<&'a str>,
}

/// Decodes `body` whatever it holds (undecodable bytes become U+FFFD),
/// returning the text and the encoding used.
pub fn decode<'a>(body: &'a [u8], hints: Hints<'_>) -> (Cow<'a, str>, &'static Encoding) {
    let encoding = Encoding::for_bom(body)
        .map(|(e, _)| e)
        .or_else(|| declared(body, hints).map(|e| utf8_over_declared(body, e)))
        .unwrap_or_else(|| guess(body, hints.tld, Utf8Detection::Allow));
    let (text, used, _) = encoding.decode(body);
    (text, used)
}

/// Why bytes are not text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CharsetError {
    #[error("bytes are not valid {encoding} despite its byte-order mark")]
    BadBom { encoding: &'static str },
    #[error("not text: binary data (NUL byte at offset {at}) and not valid UTF-8")]
    Binary { at: usize },
    #[error("not text: neither valid UTF-8 nor readable as {encoding}")]
    Unreadable { encoding: &'static str },
}

/// Decodes `body` into canonical text, or refuses it as not text: a
/// byte-order mark must be honest, and a legacy reading that holds
/// control characters no text carries is binary data. Line endings become
/// `\n` (so line numbers and offsets mean the same on every platform) and
/// NUL characters are dropped, because PostgreSQL text cannot hold them.
pub fn decode_strict(body: &[u8], hints: Hints<'_>) -> Result<String, CharsetError> {
    let decoded = if let Some((encoding, bom_len)) = Encoding::for_bom(body) {
        let (text, had_errors) = encoding.decode_without_bom_handling(&body[bom_len..]);
        if had_errors {
            return Err(CharsetError::BadBom {
                encoding: encoding.name(),
            });
        }
        text.into_owned()
    } else if let Ok(text) = std::str::from_utf8(body) {
        text.to_string()
    } else {
        decode_legacy(body, hints)?
    };
    Ok(normalize(&decoded))
}

fn decode_legacy(body: &[u8], hints: Hints<'_>) -> Result<String, CharsetError> {
    if let Some(at) = body.iter().position(|&b| b == 0) {
        return Err(CharsetError::Binary { at });
    }
    // A declaration is believed when the bytes bear it out; else a guess. UTF-8
    // already failed and ISO-2022-JP is 7-bit (so it would have passed as UTF-8):
    // neither can be the guess here.
    let declared = declared(body, hints).filter(|e| *e != UTF_8);
    let (encoding, text, had_errors) = match declared
        .map(|e| (e, e.decode_without_bom_handling(body)))
        .filter(|(_, (_, had_errors))| !had_errors)
    {
        Some((e, (text, had_errors))) => (e, text, had_errors),
        None => {
            let e = guess(body, hints.tld, Utf8Detection::Deny);
            let (text, had_errors) = e.decode_without_bom_handling(body);
            (e, text, had_errors)
        }
    };
    // Single-byte encodings decode any byte, so binary data shows itself by control characters
    // that no text file carries.
    let controls = text
        .chars()
        .filter(|&c| c.is_control() && !matches!(c, '\t' | '\n' | '\r' | '\x0c'))
        .count();
    if had_errors || controls > 8.max(text.len() / 100) {
        return Err(CharsetError::Unreadable {
            encoding: encoding.name(),
        });
    }
    Ok(text.into_owned())
}

/// UTF-8 in place of a declared encoding when the bytes are UTF-8 beyond
/// ASCII: read as declared they would be mojibake, read as UTF-8 they are
/// clean. All-ASCII bytes read the same either way, or are a 7-bit encoding
/// such as ISO-2022-JP that the declaration is right about.
fn utf8_over_declared(body: &[u8], declared: &'static Encoding) -> &'static Encoding {
    if declared != UTF_8 && !body.is_ascii() && std::str::from_utf8(body).is_ok() {
        UTF_8
    } else {
        declared
    }
}

/// The encoding the headers or, for HTML, the document itself declares.
fn declared(body: &[u8], hints: Hints<'_>) -> Option<&'static Encoding> {
    hints
        .content_type
        .and_then(header_charset)
        .or_else(|| if hints.html { meta_charset(body) } else { None })
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

/// The encoding a Content-Type's `charset` parameter names.
pub fn header_charset(content_type: &str) -> Option<&'static Encoding> {
    content_type.split(';').skip(1).find_map(|param| {
        let (key, value) = param.split_once('=')?;
        if !key.trim().eq_ignore_ascii_case("charset") {
            return None;
        }
        Encoding::for_label(value.trim().trim_matches(['"', '\'']).as_bytes())
    })
}

/// The charset a `<meta charset>` or `<meta http-equiv=content-type>` tag
/// declares in the first 1024 bytes (the HTML standard's prescan window).
pub fn meta_charset(body: &[u8]) -> Option<&'static Encoding> {
    let head = &body[..body.len().min(1024)];
    let lower = head.to_ascii_lowercase();
    let mut rest = lower.as_slice();
    while let Some(at) = find(rest, b"<meta") {
        let tag_start = &rest[at + 5..];
        let tag_end = tag_start
            .iter()
            .position(|&b| b == b'>')
            .unwrap_or(tag_start.len());
        let tag = &tag_start[..tag_end];
        if let Some(c) = find(tag, b"charset") {
            let value = tag[c + 7..]
                .iter()
                .skip_while(|b| b.is_ascii_whitespace())
                .skip_while(|&&b| b == b'=')
                .skip_while(|b| b.is_ascii_whitespace() || **b == b'"' || **b == b'\'')
                .take_while(|&&b| !(b.is_ascii_whitespace() || b"\"';>/".contains(&b)))
                .copied()
                .collect::<Vec<u8>>();
            if let Some(encoding) = Encoding::for_label(&value) {
                // The standard: a page that says UTF-16 in ASCII bytes is not UTF-16.
                let encoding =
                    if encoding == encoding_rs::UTF_16LE || encoding == encoding_rs::UTF_16BE {
                        UTF_8
                    } else if encoding == encoding_rs::X_USER_DEFINED {
                        WINDOWS_1252
                    } else {
                        encoding
                    };
                return Some(encoding);
            }
        }
        rest = &tag_start[tag_end..];
    }
    None
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

fn guess(body: &[u8], tld: Option<&str>, utf8: Utf8Detection) -> &'static Encoding {
    let mut detector = EncodingDetector::new(Iso2022JpDetection::Deny);
    detector.feed(body, true);
    let tld = tld.filter(|t| {
        !t.is_empty()
            && t.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    });
    detector.guess(tld.map(str::as_bytes), utf8)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strict_decoding() {
        let check = |bytes: &[u8], expected: Option<&str>| {
            let got = decode_strict(bytes, Hints::default()).ok();
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

    #[test]
    fn a_legacy_declaration_loses_to_clean_utf8() {
        // (declaration in a header or a meta tag, body after the head, expected text, encoding used)
        let check = |content_type: Option<&str>,
                     meta: &str,
                     body: &[u8],
                     expected: &str,
                     used: &'static Encoding| {
            let mut page = format!("<html><head>{meta}</head><body>").into_bytes();
            page.extend_from_slice(body);
            page.extend_from_slice(b"</body></html>");
            let hints = Hints {
                content_type,
                html: true,
                tld: None,
            };
            let (text, encoding) = decode(&page, hints);
            assert!(text.contains(expected), "{content_type:?} {meta}: {text}");
            assert_eq!(encoding, used, "{content_type:?} {meta}");
        };
        let win1252 = "<meta charset=\"windows-1252\">";
        let latin1 = "<meta http-equiv=\"Content-Type\" content=\"text/html; charset=iso-8859-1\">";
        let sjis = "<meta charset=\"shift_jis\">";
        let utf8_french = "café crème brûlée – “quoted”";
        let utf8_japanese = "日本語のページです。";
        // Valid UTF-8 beyond ASCII: read as UTF-8 whatever is declared.
        check(None, win1252, utf8_french.as_bytes(), utf8_french, UTF_8);
        check(None, latin1, utf8_french.as_bytes(), utf8_french, UTF_8);
        check(None, sjis, utf8_japanese.as_bytes(), utf8_japanese, UTF_8);
        check(
            Some("text/html; charset=ISO-8859-1"),
            "",
            utf8_french.as_bytes(),
            utf8_french,
            UTF_8,
        );
        check(
            Some("text/html; charset=Shift_JIS"),
            "",
            utf8_japanese.as_bytes(),
            utf8_japanese,
            UTF_8,
        );
        // Bytes that are not UTF-8: the declaration stands.
        check(
            None,
            win1252,
            b"caf\xE9 cr\xE8me \x93quoted\x94",
            "café crème “quoted”",
            WINDOWS_1252,
        );
        check(
            None,
            latin1,
            b"caf\xE9 br\xFBl\xE9e",
            "café brûlée",
            WINDOWS_1252,
        );
        check(
            None,
            sjis,
            b"\x93\xfa\x96\x7b\x8c\xea",
            "日本語",
            encoding_rs::SHIFT_JIS,
        );
        check(
            Some("text/html; charset=shift_jis"),
            "",
            b"\x93\xfa\x96\x7b\x8c\xea",
            "日本語",
            encoding_rs::SHIFT_JIS,
        );
        // Plain ASCII keeps its declaration (a 7-bit encoding is read as one).
        check(
            None,
            "<meta charset=\"iso-2022-jp\">",
            b"\x1b$BF|K\\8l\x1b(B",
            "日本語",
            encoding_rs::ISO_2022_JP,
        );
        check(None, win1252, b"plain", "plain", WINDOWS_1252);
    }

    #[test]
    fn an_html_declaration_is_believed_when_the_bytes_bear_it_out() {
        // Windows-1251 Cyrillic that a guess might read otherwise.
        let page = b"<html><head><meta charset=\"windows-1251\"></head><body>\xcf\xf0\xe8\xe2\xe5\xf2</body></html>";
        let html = Hints {
            html: true,
            ..Hints::default()
        };
        let text = decode_strict(page, html).expect("decodes");
        assert!(text.contains("Привет"), "{text}");
        let (lenient, used) = decode(page, html);
        assert_eq!(used, encoding_rs::WINDOWS_1251);
        assert_eq!(lenient, text);
    }
}
