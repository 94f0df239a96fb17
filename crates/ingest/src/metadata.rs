//! What extraction produces besides the text: document metadata, headings, page spans and
//! tables, plus the helpers every format shares (language, counts, dates).

use chrono::{DateTime, NaiveDate, NaiveDateTime};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use unicode_segmentation::UnicodeSegmentation;

/// One file turned into text. Every character offset anywhere in the system indexes into `text`,
/// counted in Unicode scalar values (PostgreSQL's `substr` unit on a UTF-8 database).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Extracted {
    pub mime: String,
    pub text: String,
    pub metadata: DocMetadata,
    pub tables: Vec<ExtractedTable>,
}

/// Stored as JSONB next to the document and shown by `document_info`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DocMetadata {
    pub title: Option<String>,
    /// ISO 639-1 code such as "en": declared by the file or detected with confidence.
    pub language: Option<String>,
    pub headings: Vec<Heading>,
    /// Words as Unicode word segmentation (UAX #29) counts them: punctuation is not a word,
    /// "don't" is one word, each CJK ideograph is one word.
    pub word_count: u64,
    pub char_count: u64,
    pub page_count: Option<u32>,
    pub pages: Vec<PageSpan>,
    /// RFC 3339.
    pub created_at: Option<String>,
    /// RFC 3339.
    pub modified_at: Option<String>,
    pub author: Option<String>,
    pub description: Option<String>,
    pub tables: Vec<TableSummary>,
    /// Short name of the reader that produced the text: "text", "markdown", "html", "csv",
    /// "json" or "pdf".
    pub format: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Heading {
    /// 1 for a top-level heading, down to 6.
    pub level: u8,
    pub text: String,
    /// Where the heading starts in the extracted text.
    pub char_offset: u64,
}

/// The part of the text that came from one PDF page; end-exclusive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PageSpan {
    /// 1-based, as readers number pages.
    pub page: u32,
    pub char_start: u64,
    pub char_end: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableSummary {
    pub name: String,
    pub columns: Vec<ColumnInfo>,
    pub row_count: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ColumnInfo {
    pub name: String,
    pub kind: ColumnKind,
}

/// The type every non-empty value of a column agrees on; `Text` when they disagree.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ColumnKind {
    Integer,
    Number,
    Boolean,
    Date,
    Text,
}

impl ColumnKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ColumnKind::Integer => "integer",
            ColumnKind::Number => "number",
            ColumnKind::Boolean => "boolean",
            ColumnKind::Date => "date",
            ColumnKind::Text => "text",
        }
    }
}

/// Tabular data found in a file, with typed JSON values (numbers as numbers, empty cells as
/// null) so that SQL over JSONB can compare and sum them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExtractedTable {
    pub name: String,
    pub columns: Vec<ColumnInfo>,
    pub rows: Vec<Map<String, Value>>,
}

impl ExtractedTable {
    pub fn summary(&self) -> TableSummary {
        TableSummary {
            name: self.name.clone(),
            columns: self.columns.clone(),
            row_count: self.rows.len() as u64,
        }
    }
}

/// Fills in what every format computes the same way, once the text is final.
pub(crate) fn finish(
    mut metadata: DocMetadata,
    text: &str,
    tables: &[ExtractedTable],
) -> DocMetadata {
    metadata.char_count = text.chars().count() as u64;
    metadata.word_count = text.unicode_words().count() as u64;
    if metadata.language.is_none() {
        metadata.language = detect_language(text);
    }
    metadata.tables = tables.iter().map(ExtractedTable::summary).collect();
    metadata.title = metadata
        .title
        .map(|t| collapse_whitespace(&t))
        .filter(|t| !t.is_empty());
    metadata.author = metadata
        .author
        .map(|t| collapse_whitespace(&t))
        .filter(|t| !t.is_empty());
    metadata.description = metadata
        .description
        .map(|t| collapse_whitespace(&t))
        .filter(|t| !t.is_empty());
    metadata
}

/// Detection on a bounded sample: whatlang is linear in its input and a few thousand
/// characters decide as well as a whole book does.
const LANGUAGE_SAMPLE_CHARS: usize = 4000;

/// The ISO 639-1 code of the text's language, only when the detector is confident.
pub fn detect_language(text: &str) -> Option<String> {
    let end = text
        .char_indices()
        .nth(LANGUAGE_SAMPLE_CHARS)
        .map_or(text.len(), |(i, _)| i);
    let info = whatlang::detect(&text[..end])?;
    if !info.is_reliable() {
        return None;
    }
    iso639_1(info.lang().code()).map(str::to_string)
}

/// `lang="en-US"` and friends reduced to the primary ISO 639-1 subtag.
pub(crate) fn language_tag(tag: &str) -> Option<String> {
    let primary = tag.trim().split(['-', '_']).next()?.to_ascii_lowercase();
    (primary.len() == 2 && primary.chars().all(|c| c.is_ascii_alphabetic())).then_some(primary)
}

fn iso639_1(code3: &str) -> Option<&'static str> {
    Some(match code3 {
        "afr" => "af",
        "aka" => "ak",
        "amh" => "am",
        "ara" => "ar",
        "aze" => "az",
        "bel" => "be",
        "ben" => "bn",
        "bul" => "bg",
        "cat" => "ca",
        "ces" => "cs",
        "cmn" => "zh",
        "dan" => "da",
        "deu" => "de",
        "ell" => "el",
        "eng" => "en",
        "epo" => "eo",
        "est" => "et",
        "fin" => "fi",
        "fra" => "fr",
        "guj" => "gu",
        "heb" => "he",
        "hin" => "hi",
        "hrv" => "hr",
        "hun" => "hu",
        "hye" => "hy",
        "ind" => "id",
        "ita" => "it",
        "jav" => "jv",
        "jpn" => "ja",
        "kan" => "kn",
        "kat" => "ka",
        "khm" => "km",
        "kor" => "ko",
        "lat" => "la",
        "lav" => "lv",
        "lit" => "lt",
        "mal" => "ml",
        "mar" => "mr",
        "mkd" => "mk",
        "mya" => "my",
        "nep" => "ne",
        "nld" => "nl",
        "nob" => "nb",
        "ori" => "or",
        "pan" => "pa",
        "pes" => "fa",
        "pol" => "pl",
        "por" => "pt",
        "ron" => "ro",
        "rus" => "ru",
        "sin" => "si",
        "slk" => "sk",
        "slv" => "sl",
        "sna" => "sn",
        "spa" => "es",
        "srp" => "sr",
        "swe" => "sv",
        "tam" => "ta",
        "tel" => "te",
        "tgl" => "tl",
        "tha" => "th",
        "tuk" => "tk",
        "tur" => "tr",
        "ukr" => "uk",
        "urd" => "ur",
        "uzb" => "uz",
        "vie" => "vi",
        "yid" => "yi",
        "zul" => "zu",
        _ => return None,
    })
}

/// A date or timestamp as found in file metadata, normalised to RFC 3339; `None` when it cannot
/// be read, so the stored field always parses. Values without a zone are taken as UTC.
pub(crate) fn normalize_date(raw: &str) -> Option<String> {
    let raw = raw.trim();
    if let Ok(dt) = DateTime::parse_from_rfc3339(raw) {
        return Some(dt.to_rfc3339());
    }
    if let Ok(dt) = DateTime::parse_from_rfc2822(raw) {
        return Some(dt.to_rfc3339());
    }
    for format in [
        "%Y-%m-%dT%H:%M:%S%.f",
        "%Y-%m-%d %H:%M:%S%.f",
        "%Y-%m-%dT%H:%M",
    ] {
        if let Ok(dt) = NaiveDateTime::parse_from_str(raw, format) {
            return Some(dt.and_utc().to_rfc3339());
        }
    }
    for format in ["%Y-%m-%d %H:%M:%S%z", "%Y-%m-%dT%H:%M:%S%z"] {
        if let Ok(dt) = DateTime::parse_from_str(raw, format) {
            return Some(dt.to_rfc3339());
        }
    }
    let date = NaiveDate::parse_from_str(raw, "%Y-%m-%d").ok()?;
    Some(date.and_hms_opt(0, 0, 0)?.and_utc().to_rfc3339())
}

pub(crate) fn collapse_whitespace(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_become_rfc3339() {
        let check = |raw: &str, expected: Option<&str>| {
            assert_eq!(normalize_date(raw).as_deref(), expected, "input {raw:?}");
        };
        check("2024-03-05", Some("2024-03-05T00:00:00+00:00"));
        check("2024-03-05T10:20:30Z", Some("2024-03-05T10:20:30+00:00"));
        check(
            "2024-03-05T10:20:30+02:00",
            Some("2024-03-05T10:20:30+02:00"),
        );
        check("2024-03-05 10:20:30", Some("2024-03-05T10:20:30+00:00"));
        check(
            "Tue, 5 Mar 2024 10:20:30 GMT",
            Some("2024-03-05T10:20:30+00:00"),
        );
        check("last tuesday", None);
        check("", None);
    }

    #[test]
    fn language_tags_reduce_to_iso639_1() {
        assert_eq!(language_tag("en-US").as_deref(), Some("en"));
        assert_eq!(language_tag(" FR ").as_deref(), Some("fr"));
        assert_eq!(language_tag("de_CH").as_deref(), Some("de"));
        assert_eq!(language_tag("x-klingon"), None);
        assert_eq!(language_tag(""), None);
    }

    #[test]
    fn language_is_detected_only_when_confident() {
        let english = "The quick brown fox jumps over the lazy dog while the farmer watches \
                       from the porch and wonders whether the weather will hold until evening.";
        let german = "Der schnelle braune Fuchs springt über den faulen Hund, während der Bauer \
                      von der Veranda aus zusieht und sich fragt, ob das Wetter hält.";
        assert_eq!(detect_language(english).as_deref(), Some("en"));
        assert_eq!(detect_language(german).as_deref(), Some("de"));
        assert_eq!(detect_language("12 34 56"), None);
        assert_eq!(detect_language(""), None);
    }
}
