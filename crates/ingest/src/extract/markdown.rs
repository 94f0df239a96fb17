//! Markdown: the source itself is the text; headings come from the parsed structure and
//! metadata from a YAML-style front-matter block.

use pulldown_cmark::{Event, Options, Parser, Tag, TagEnd};

use crate::IngestError;
use crate::metadata::{self, DocMetadata, Extracted, Heading};
use crate::offsets::CharCursor;

pub(super) fn extract(file_name: &str, bytes: &[u8]) -> Result<Extracted, IngestError> {
    let text = super::text::decode(file_name, bytes)?;
    let mut meta = DocMetadata {
        format: "markdown".to_string(),
        ..DocMetadata::default()
    };
    front_matter(&text, &mut meta);
    meta.headings = headings(&text);
    if meta.title.is_none() {
        meta.title = meta
            .headings
            .iter()
            .find(|h| h.level == 1)
            .map(|h| h.text.clone());
    }
    let metadata = metadata::finish(meta, &text, &[]);
    Ok(Extracted {
        mime: "text/markdown".to_string(),
        text,
        metadata,
        tables: Vec::new(),
    })
}

fn headings(text: &str) -> Vec<Heading> {
    let options = Options::ENABLE_YAML_STYLE_METADATA_BLOCKS
        | Options::ENABLE_TABLES
        | Options::ENABLE_STRIKETHROUGH
        | Options::ENABLE_FOOTNOTES;
    let mut cursor = CharCursor::new(text);
    let mut found = Vec::new();
    let mut open: Option<(u8, usize, String)> = None;
    for (event, range) in Parser::new_ext(text, options).into_offset_iter() {
        match event {
            Event::Start(Tag::Heading { level, .. }) => {
                open = Some((level as u8, range.start, String::new()))
            }
            Event::Text(s) | Event::Code(s) | Event::InlineMath(s) | Event::DisplayMath(s) => {
                if let Some((_, _, heading)) = open.as_mut() {
                    heading.push_str(&s);
                }
            }
            Event::SoftBreak | Event::HardBreak => {
                if let Some((_, _, heading)) = open.as_mut() {
                    heading.push(' ');
                }
            }
            Event::End(TagEnd::Heading(_)) => {
                if let Some((level, start, heading)) = open.take() {
                    let heading = metadata::collapse_whitespace(&heading);
                    if !heading.is_empty() {
                        found.push(Heading {
                            level,
                            text: heading,
                            char_offset: cursor.char_at(start),
                        });
                    }
                }
            }
            _ => {}
        }
    }
    found
}

/// Reads the flat `key: value` lines of a leading `---` block; nested YAML is ignored because
/// only a handful of top-level keys matter here.
fn front_matter(text: &str, meta: &mut DocMetadata) {
    let Some(rest) = text.strip_prefix("---\n") else {
        return;
    };
    let mut lines = Vec::new();
    let mut closed = false;
    for line in rest.lines() {
        if line.trim_end() == "---" || line.trim_end() == "..." {
            closed = true;
            break;
        }
        lines.push(line);
    }
    if !closed {
        return;
    }
    for line in lines {
        if line.starts_with([' ', '\t', '-', '#']) {
            continue;
        }
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let value = unquote(value.trim());
        if value.is_empty() {
            continue;
        }
        let value = value.to_string();
        match key.trim().to_ascii_lowercase().as_str() {
            "title" => meta.title = Some(value),
            "description" | "summary" => meta.description = Some(value),
            "author" => meta.author = Some(value),
            "date" | "created" | "created_at" => meta.created_at = metadata::normalize_date(&value),
            "updated" | "modified" | "lastmod" | "last_modified" | "modified_at" => {
                meta.modified_at = metadata::normalize_date(&value)
            }
            "lang" | "language" => meta.language = metadata::language_tag(&value),
            _ => {}
        }
    }
}

fn unquote(value: &str) -> &str {
    for quote in ['"', '\''] {
        if let Some(inner) = value
            .strip_prefix(quote)
            .and_then(|v| v.strip_suffix(quote))
        {
            return inner;
        }
    }
    value
}
