//! PDF: the pre-scan that refuses decompression bombs (`prescan`), then the
//! text page by page (pdf-extract) and the document information (lopdf).
//! `read` is the only way a PDF reaches either parser.

mod prescan;

pub use prescan::{Scan, prescan};

use std::panic::{AssertUnwindSafe, catch_unwind};

use chrono::{FixedOffset, NaiveDate, TimeZone};
use lopdf::{Document, Object};

use crate::{Error, Limits};

/// A PDF's text and document information.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Pdf {
    /// Each page's text, in order, trailing spaces and runs of blank lines
    /// removed; a page without text is an empty string.
    pub pages: Vec<String>,
    /// Pages the document declares (at least `pages.len()`).
    pub page_count: u32,
    pub info: Info,
}

/// The document information dictionary; dates in RFC 3339.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Info {
    pub title: Option<String>,
    pub author: Option<String>,
    pub subject: Option<String>,
    pub created: Option<String>,
    pub modified: Option<String>,
}

impl Pdf {
    /// The pages' text joined by blank lines, pages without text left out.
    pub fn text(&self) -> String {
        let mut out = String::new();
        for page in self.pages.iter().filter(|p| !p.is_empty()) {
            if !out.is_empty() {
                out.push_str("\n\n");
            }
            out.push_str(page);
        }
        out
    }
}

/// Readers accept the header anywhere in the first kilobyte, so sniffing does too.
pub fn looks_like_pdf(bytes: &[u8]) -> bool {
    let head = &bytes[..bytes.len().min(1024)];
    head.windows(5).any(|w| w == b"%PDF-")
}

/// Reads a PDF: refuses it when it breaks a limit (before any parser runs)
/// and names what is wrong when it is not a readable PDF.
pub fn read(bytes: &[u8], limits: &Limits) -> Result<Pdf, Error> {
    if !looks_like_pdf(bytes) {
        return Err(Error::Corrupt(
            "not a pdf: no %PDF- header in the first 1024 bytes".to_string(),
        ));
    }
    // The parsers decode every stream whole, once per reference: a bomb must be refused
    // before they see it.
    prescan(bytes, limits)?;
    // lopdf and pdf-extract panic on some malformed files (arithmetic on bogus offsets, unwraps
    // on missing objects); a bad file must become an error for that file, not a dead worker.
    // Nothing shared is observed after a panic, only the owned result, so unwind safety holds.
    let parsed = catch_unwind(AssertUnwindSafe(|| -> Result<Pdf, String> {
        let document = Document::load_mem(bytes).map_err(|e| format!("invalid pdf: {e}"))?;
        let info = info(&document);
        let page_count = document.get_pages().len();
        drop(document);
        let pages = pdf_extract::extract_text_from_mem_by_pages(bytes)
            .map_err(|e| format!("pdf text cannot be extracted: {e}"))?;
        Ok(Pdf {
            page_count: u32::try_from(page_count.max(pages.len())).unwrap_or(u32::MAX),
            pages: pages.iter().map(|p| clean_page(p)).collect(),
            info,
        })
    }));
    match parsed {
        Ok(Ok(pdf)) => Ok(pdf),
        Ok(Err(reason)) => Err(Error::Corrupt(reason)),
        Err(_) => Err(Error::Corrupt(
            "invalid pdf: the parser gave up on its structure".to_string(),
        )),
    }
}

/// Page text without NULs (PostgreSQL refuses them), without trailing spaces on lines and
/// with runs of blank lines cut to one: pdf-extract lays text out by position and leaves
/// plenty of both.
fn clean_page(page: &str) -> String {
    let mut out = String::with_capacity(page.len());
    let mut blank_run = 0;
    for line in page
        .replace('\0', "")
        .replace("\r\n", "\n")
        .replace('\r', "\n")
        .lines()
    {
        let line = line.trim_end();
        if line.is_empty() {
            blank_run += 1;
            continue;
        }
        if !out.is_empty() {
            out.push_str(if blank_run > 0 { "\n\n" } else { "\n" });
        }
        blank_run = 0;
        out.push_str(line);
    }
    out
}

fn info(document: &Document) -> Info {
    let mut meta = Info::default();
    let Ok(info) = document.trailer.get(b"Info") else {
        return meta;
    };
    let Ok((_, Object::Dictionary(info))) = document.dereference(info) else {
        return meta;
    };
    let text = |key: &[u8]| {
        let object = info.get(key).ok()?;
        let (_, object) = document.dereference(object).ok()?;
        lopdf::decode_text_string(object)
            .ok()
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
    };
    meta.title = text(b"Title");
    meta.author = text(b"Author");
    meta.subject = text(b"Subject");
    meta.created = text(b"CreationDate").and_then(|d| pdf_date(&d));
    meta.modified = text(b"ModDate").and_then(|d| pdf_date(&d));
    meta
}

/// `D:YYYYMMDDHHmmSSOHH'mm'` (every part after the year optional) to RFC 3339.
fn pdf_date(raw: &str) -> Option<String> {
    let s = raw.trim();
    let s = s.strip_prefix("D:").unwrap_or(s);
    let digits: String = s.chars().take_while(char::is_ascii_digit).collect();
    if digits.len() < 4 {
        return None;
    }
    let part = |from: usize, len: usize, default: u32| -> Option<u32> {
        match digits.get(from..from + len) {
            Some(p) => p.parse().ok(),
            None => Some(default),
        }
    };
    let year: i32 = digits[..4].parse().ok()?;
    let date = NaiveDate::from_ymd_opt(year, part(4, 2, 1)?, part(6, 2, 1)?)?;
    let datetime = date.and_hms_opt(part(8, 2, 0)?, part(10, 2, 0)?, part(12, 2, 0)?)?;
    let zone = &s[digits.len()..];
    let offset_seconds = match zone.chars().next() {
        Some(sign @ ('+' | '-')) => {
            let numbers: Vec<i32> = zone[1..]
                .split(|c: char| !c.is_ascii_digit())
                .filter(|p| !p.is_empty())
                .filter_map(|p| p.parse().ok())
                .collect();
            let hours = numbers.first().copied().unwrap_or(0);
            let minutes = numbers.get(1).copied().unwrap_or(0);
            let seconds = hours * 3600 + minutes * 60;
            if sign == '-' { -seconds } else { seconds }
        }
        _ => 0,
    };
    let offset = FixedOffset::east_opt(offset_seconds)?;
    Some(offset.from_local_datetime(&datetime).single()?.to_rfc3339())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pdf_dates() {
        let check = |raw: &str, expected: Option<&str>| {
            assert_eq!(pdf_date(raw).as_deref(), expected, "input {raw:?}")
        };
        check("D:20240305102030+02'00'", Some("2024-03-05T10:20:30+02:00"));
        check("D:20240305102030Z", Some("2024-03-05T10:20:30+00:00"));
        check("D:20240305102030-05'30", Some("2024-03-05T10:20:30-05:30"));
        check("D:2024", Some("2024-01-01T00:00:00+00:00"));
        check("20240305", Some("2024-03-05T00:00:00+00:00"));
        check("D:20241305", None);
        check("yesterday", None);
    }

    #[test]
    fn page_cleaning() {
        assert_eq!(clean_page("\n\n  a  \n\n\n\nb\nc   \n\n"), "  a\n\nb\nc");
        assert_eq!(clean_page("x\0y"), "xy");
        assert_eq!(clean_page("a\r\n\r\nb\rc"), "a\n\nb\nc");
    }

    #[test]
    fn pages_without_text_are_left_out_of_the_text() {
        let pdf = Pdf {
            pages: vec!["one".into(), String::new(), "three".into()],
            page_count: 3,
            info: Info::default(),
        };
        assert_eq!(pdf.text(), "one\n\nthree");
    }
}
