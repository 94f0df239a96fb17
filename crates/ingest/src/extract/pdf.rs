//! PDF: text page by page (pdf-extract), document information (lopdf).

use std::panic::{AssertUnwindSafe, catch_unwind};

use chrono::{FixedOffset, NaiveDate, TimeZone};
use data_plane_extract::Limits;
use lopdf::{Document, Object};

use crate::IngestError;
use crate::metadata::{self, DocMetadata, Extracted, PageSpan};

/// Readers accept the header anywhere in the first kilobyte, so sniffing does too.
pub(super) fn looks_like_pdf(bytes: &[u8]) -> bool {
    let head = &bytes[..bytes.len().min(1024)];
    head.windows(5).any(|w| w == b"%PDF-")
}

pub(super) fn extract(
    file_name: &str,
    bytes: &[u8],
    limits: &Limits,
) -> Result<Extracted, IngestError> {
    if !looks_like_pdf(bytes) {
        return Err(IngestError::corrupt(
            file_name,
            "not a pdf: no %PDF- header in the first 1024 bytes",
        ));
    }
    // The parsers decode every stream whole, once per reference: a bomb must be refused
    // before they see it.
    data_plane_extract::pdf::prescan(bytes, limits)
        .map_err(|e| IngestError::limit(file_name, e))?;
    // lopdf and pdf-extract panic on some malformed files (arithmetic on bogus offsets, unwraps
    // on missing objects); a bad upload must become an error for that file, not a dead worker.
    // Nothing shared is observed after a panic, only the owned result, so unwind safety holds.
    let parsed = catch_unwind(AssertUnwindSafe(
        || -> Result<(Vec<String>, DocMetadata), String> {
            let document = Document::load_mem(bytes).map_err(|e| format!("invalid pdf: {e}"))?;
            let info = info_metadata(&document);
            let page_count = document.get_pages().len();
            drop(document);
            let pages = pdf_extract::extract_text_from_mem_by_pages(bytes)
                .map_err(|e| format!("pdf text cannot be extracted: {e}"))?;
            let mut info = info;
            info.page_count = Some(u32::try_from(page_count.max(pages.len())).unwrap_or(u32::MAX));
            Ok((pages, info))
        },
    ));
    let (pages, mut meta) = match parsed {
        Ok(Ok(parsed)) => parsed,
        Ok(Err(reason)) => return Err(IngestError::corrupt(file_name, reason)),
        Err(_) => {
            return Err(IngestError::corrupt(
                file_name,
                "invalid pdf: the parser gave up on its structure",
            ));
        }
    };

    let mut text = String::new();
    let mut chars = 0u64;
    for (index, page) in pages.iter().enumerate() {
        let page_text = clean_page(page);
        if !text.is_empty() && !page_text.is_empty() {
            text.push_str("\n\n");
            chars += 2;
        }
        let start = chars;
        chars += page_text.chars().count() as u64;
        text.push_str(&page_text);
        meta.pages.push(PageSpan {
            page: u32::try_from(index + 1).unwrap_or(u32::MAX),
            char_start: start,
            char_end: chars,
        });
    }
    meta.format = "pdf".to_string();
    let metadata = metadata::finish(meta, &text, &[]);
    Ok(Extracted {
        mime: "application/pdf".to_string(),
        text,
        metadata,
        tables: Vec::new(),
    })
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

fn info_metadata(document: &Document) -> DocMetadata {
    let mut meta = DocMetadata::default();
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
    meta.description = text(b"Subject");
    meta.created_at = text(b"CreationDate").and_then(|d| pdf_date(&d));
    meta.modified_at = text(b"ModDate").and_then(|d| pdf_date(&d));
    meta
}

/// `D:YYYYMMDDHHmmSSOHH'mm'` (every part after the year optional) to RFC 3339.
pub(crate) fn pdf_date(raw: &str) -> Option<String> {
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
    }
}
