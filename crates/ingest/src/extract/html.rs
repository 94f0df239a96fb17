//! HTML: the whole document's readable text, headings and head metadata, as
//! data-plane-extract renders them, in an uploaded document's terms.

use data_plane_extract::Limits;
use data_plane_extract::charset::{self, Hints};

use crate::IngestError;
use crate::metadata::{self, DocMetadata, Extracted, Heading};

pub(super) fn extract(
    file_name: &str,
    bytes: &[u8],
    limits: &Limits,
) -> Result<Extracted, IngestError> {
    let hints = Hints {
        html: true,
        ..Hints::default()
    };
    let source = charset::decode_strict(bytes, hints)
        .map_err(|e| IngestError::corrupt(file_name, e.to_string()))?;
    let document = data_plane_extract::html::text::document(&source, limits);
    let head = document.head;
    let meta = DocMetadata {
        format: "html".to_string(),
        title: head.title,
        description: head.description,
        author: head.author,
        created_at: head.created.as_deref().and_then(metadata::normalize_date),
        modified_at: head.modified.as_deref().and_then(metadata::normalize_date),
        language: head.language.as_deref().and_then(metadata::language_tag),
        headings: document
            .headings
            .into_iter()
            .map(|h| Heading {
                level: h.level,
                text: h.text,
                char_offset: h.char_offset,
            })
            .collect(),
        ..DocMetadata::default()
    };
    let text = document.text;
    let metadata = metadata::finish(meta, &text, &[]);
    Ok(Extracted {
        mime: "text/html".to_string(),
        text,
        metadata,
        tables: Vec::new(),
    })
}
