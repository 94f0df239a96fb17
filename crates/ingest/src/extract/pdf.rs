//! PDF: text page by page and document information, as data-plane-extract reads them, with
//! each page's span in the text.

use data_plane_extract::{Error, Limits};

use crate::IngestError;
use crate::metadata::{self, DocMetadata, Extracted, PageSpan};

pub(super) use data_plane_extract::pdf::looks_like_pdf;

pub(super) fn extract(
    file_name: &str,
    bytes: &[u8],
    limits: &Limits,
) -> Result<Extracted, IngestError> {
    let pdf = data_plane_extract::pdf::read(bytes, limits).map_err(|e| match e {
        Error::Limit(e) => IngestError::limit(file_name, e),
        Error::Corrupt(reason) => IngestError::corrupt(file_name, reason),
    })?;
    let mut meta = DocMetadata {
        format: "pdf".to_string(),
        title: pdf.info.title,
        author: pdf.info.author,
        description: pdf.info.subject,
        created_at: pdf.info.created,
        modified_at: pdf.info.modified,
        page_count: Some(pdf.page_count),
        ..DocMetadata::default()
    };
    let mut text = String::new();
    let mut chars = 0u64;
    for (index, page_text) in pdf.pages.iter().enumerate() {
        if !text.is_empty() && !page_text.is_empty() {
            text.push_str("\n\n");
            chars += 2;
        }
        let start = chars;
        chars += page_text.chars().count() as u64;
        text.push_str(page_text);
        meta.pages.push(PageSpan {
            page: u32::try_from(index + 1).unwrap_or(u32::MAX),
            char_start: start,
            char_end: chars,
        });
    }
    let metadata = metadata::finish(meta, &text, &[]);
    Ok(Extracted {
        mime: "application/pdf".to_string(),
        text,
        metadata,
        tables: Vec::new(),
    })
}
