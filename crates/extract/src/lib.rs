//! Extraction, written once for ingestion and the web: bytes to text
//! (`charset`), HTML to a web page's readable Markdown or an uploaded
//! document's full text with their metadata (`html`), PDF to text and
//! document information (`pdf`), and the limits every extraction obeys.
//!
//! A file is checked before its parser runs where the parser itself cannot be
//! bounded (`pdf::prescan` refuses decompression bombs, `html::cap_nesting`
//! keeps html5ever linear), its text is held to a number of characters
//! (`check_chars`), and the whole extraction to a time (`with_time_limit`).
//! Each refusal is a `LimitError` naming the limit and the setting that raises it.

pub mod charset;
pub mod html;
pub mod pdf;

use std::sync::mpsc;
use std::time::Duration;

/// The extraction limits of a deployment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Most bytes a PDF's streams may decode to, each stream counted once per reference to it.
    pub pdf_max_inflated_bytes: u64,
    /// Most objects a PDF may hold, those packed in object streams included.
    pub pdf_max_objects: u64,
    /// Deepest nesting of HTML elements handed to the parser; tags deeper are dropped, text kept.
    pub html_max_depth: usize,
    /// Most characters of text one document may yield.
    pub max_chars: u64,
    /// Longest one file's extraction may take.
    pub timeout: Duration,
}

impl Limits {
    pub const DEFAULT_PDF_MAX_INFLATED_BYTES: u64 = 256 * 1024 * 1024;
    pub const DEFAULT_PDF_MAX_OBJECTS: u64 = 500_000;
    pub const DEFAULT_HTML_MAX_DEPTH: usize = 256;
    pub const DEFAULT_MAX_CHARS: u64 = 20_000_000;
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            pdf_max_inflated_bytes: Self::DEFAULT_PDF_MAX_INFLATED_BYTES,
            pdf_max_objects: Self::DEFAULT_PDF_MAX_OBJECTS,
            html_max_depth: Self::DEFAULT_HTML_MAX_DEPTH,
            max_chars: Self::DEFAULT_MAX_CHARS,
            timeout: Self::DEFAULT_TIMEOUT,
        }
    }
}

/// A file refused by a limit; the message names the limit and its setting.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LimitError {
    #[error(
        "pdf streams decode to more than {limit} bytes, a likely decompression bomb (raise DATA_PLANE_EXTRACT_PDF_MAX_INFLATED_BYTES to accept it)"
    )]
    PdfInflated { limit: u64 },
    #[error(
        "pdf holds {count} objects, more than {limit} (raise DATA_PLANE_EXTRACT_PDF_MAX_OBJECTS to accept it)"
    )]
    PdfObjects { count: u64, limit: u64 },
    #[error(
        "the text has more than {limit} characters (raise DATA_PLANE_EXTRACT_MAX_CHARS to accept it)"
    )]
    TooManyChars { limit: u64 },
    #[error(
        "extraction took longer than {seconds} s (raise DATA_PLANE_EXTRACT_TIMEOUT_SECS to allow more)"
    )]
    Timeout { seconds: u64 },
    /// The extraction stopped without an answer (its thread could not start or panicked).
    #[error("extraction failed: {0}")]
    Failed(String),
}

/// Why a file could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// A limit refused it.
    #[error(transparent)]
    Limit(#[from] LimitError),
    /// It is not what it claims to be, or its parser gave up on it; the
    /// message says how.
    #[error("{0}")]
    Corrupt(String),
}

/// Refuses `text` when it has more than `limits.max_chars` characters.
pub fn check_chars(text: &str, limits: &Limits) -> Result<(), LimitError> {
    // Bytes bound characters from above: most texts pass without counting.
    if text.len() as u64 <= limits.max_chars || text.chars().count() as u64 <= limits.max_chars {
        return Ok(());
    }
    Err(LimitError::TooManyChars {
        limit: limits.max_chars,
    })
}

/// Runs `work` on a thread of its own and gives up waiting after
/// `limits.timeout`. The parsers cannot be interrupted, so a late thread runs
/// on until it ends, its answer dropped; the pre-scan and the nesting cap keep
/// that rare and bounded. The caller is free at once.
pub fn with_time_limit<T, F>(limits: &Limits, work: F) -> Result<T, LimitError>
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    let (tx, rx) = mpsc::sync_channel(1);
    std::thread::Builder::new()
        .name("extract".to_string())
        .spawn(move || {
            // The receiver is gone when the caller stopped waiting; nothing to tell.
            let _ = tx.send(work());
        })
        .map_err(|e| LimitError::Failed(format!("cannot start the extraction thread: {e}")))?;
    match rx.recv_timeout(limits.timeout) {
        Ok(value) => Ok(value),
        Err(mpsc::RecvTimeoutError::Timeout) => Err(LimitError::Timeout {
            seconds: limits.timeout.as_secs(),
        }),
        Err(mpsc::RecvTimeoutError::Disconnected) => Err(LimitError::Failed(
            "the extraction thread stopped without an answer".to_string(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn characters_are_counted_not_bytes() {
        let limits = Limits {
            max_chars: 3,
            ..Limits::default()
        };
        assert_eq!(check_chars("abc", &limits), Ok(()));
        assert_eq!(check_chars("ééé", &limits), Ok(()));
        assert_eq!(
            check_chars("abcd", &limits),
            Err(LimitError::TooManyChars { limit: 3 })
        );
    }

    #[test]
    fn slow_work_is_abandoned_at_the_deadline() {
        let limits = Limits {
            timeout: Duration::from_millis(50),
            ..Limits::default()
        };
        let started = std::time::Instant::now();
        let late = with_time_limit(&limits, || std::thread::sleep(Duration::from_secs(2)));
        assert_eq!(late, Err(LimitError::Timeout { seconds: 0 }));
        assert!(started.elapsed() < Duration::from_secs(1));
        assert_eq!(with_time_limit(&limits, || 7), Ok(7));
    }
}
