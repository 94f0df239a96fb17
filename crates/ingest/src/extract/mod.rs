//! Format dispatch: one file's name and bytes in, `Extracted` out.

mod html;
mod markdown;
mod pdf;
mod tabular;
mod text;

use data_plane_extract::Limits;

use crate::IngestError;
use crate::metadata::Extracted;

const SUPPORTED: &[&str] = &[
    "csv", "htm", "html", "json", "log", "markdown", "md", "pdf", "text", "tsv", "txt",
];

/// The file extensions `extract` reads, lowercase and without the dot.
pub fn supported_extensions() -> &'static [&'static str] {
    SUPPORTED
}

/// Reads one file under the default limits (see `extract_with`).
pub fn extract(file_name: &str, bytes: &[u8]) -> Result<Extracted, IngestError> {
    extract_with(file_name, bytes, &Limits::default())
}

/// Reads one file. The extension (case-insensitive) picks the reader; a PDF is recognised by
/// its header whatever its name, and a file without extension is sniffed for HTML, JSON and
/// plain text. A PDF is pre-scanned for decompression bombs, HTML nesting is capped, and
/// text longer than `limits.max_chars` is refused (the time limit is the caller's: see
/// `pipeline`).
pub fn extract_with(
    file_name: &str,
    bytes: &[u8],
    limits: &Limits,
) -> Result<Extracted, IngestError> {
    let extension = extension_of(file_name);
    let extracted = if pdf::looks_like_pdf(bytes) {
        pdf::extract(file_name, bytes, limits)
    } else {
        match extension.as_str() {
            "txt" | "text" | "log" => text::extract(file_name, bytes),
            "md" | "markdown" => markdown::extract(file_name, bytes),
            "html" | "htm" => html::extract(file_name, bytes, limits),
            "csv" => tabular::extract_csv(file_name, bytes, None),
            "tsv" => tabular::extract_csv(file_name, bytes, Some(b'\t')),
            "json" => tabular::extract_json(file_name, bytes),
            "pdf" => pdf::extract(file_name, bytes, limits),
            "" => sniff(file_name, bytes, limits),
            _ => Err(IngestError::Unsupported {
                file: file_name.to_string(),
                extension,
            }),
        }
    }?;
    data_plane_extract::check_chars(&extracted.text, limits)
        .map_err(|e| IngestError::limit(file_name, e))?;
    Ok(extracted)
}

/// A name without extension (README, LICENSE, a saved page): its first bytes decide.
fn sniff(file_name: &str, bytes: &[u8], limits: &Limits) -> Result<Extracted, IngestError> {
    let unsupported = || IngestError::Unsupported {
        file: file_name.to_string(),
        extension: String::new(),
    };
    let text = text::decode(file_name, bytes).map_err(|_| unsupported())?;
    let head: String = text
        .trim_start()
        .chars()
        .take(64)
        .collect::<String>()
        .to_ascii_lowercase();
    if head.starts_with("<!doctype html") || head.starts_with("<html") {
        return html::extract(file_name, bytes, limits);
    }
    if (head.starts_with('{') || head.starts_with('['))
        && serde_json::from_str::<serde::de::IgnoredAny>(&text).is_ok()
    {
        return tabular::extract_json(file_name, bytes);
    }
    text::extract(file_name, bytes)
}

/// Lowercase extension of the last path component; empty for none, and for dot-files such as
/// ".env" whose only dot starts the name.
fn extension_of(file_name: &str) -> String {
    let base = file_name.rsplit(['/', '\\']).next().unwrap_or(file_name);
    match base.rsplit_once('.') {
        Some((stem, ext)) if !stem.is_empty() => ext.to_ascii_lowercase(),
        _ => String::new(),
    }
}

/// The file name without directories and extension: the name given to its tables.
pub(crate) fn stem_of(file_name: &str) -> String {
    let base = file_name.rsplit(['/', '\\']).next().unwrap_or(file_name);
    match base.rsplit_once('.') {
        Some((stem, _)) if !stem.is_empty() => stem.to_string(),
        _ => base.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extensions_and_stems() {
        let check = |name: &str, ext: &str, stem: &str| {
            assert_eq!(extension_of(name), ext, "extension of {name:?}");
            assert_eq!(stem_of(name), stem, "stem of {name:?}");
        };
        check("a/b/Report.PDF", "pdf", "Report");
        check("notes.tar.md", "md", "notes.tar");
        check(".env", "", ".env");
        check("README", "", "README");
        check("dir.d/README", "", "README");
        check("C:\\docs\\x.Txt", "txt", "x");
    }
}
