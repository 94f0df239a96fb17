//! Tag lines, the call form of models without function calling: a line
//! that starts with an offered tool's prefix and a colon (`SEARCH: vacuum
//! full`) is a call, its arguments the named groups of the tag's pattern.
//! Read only when the parser is given [`Tags`] (the agent's tags mode);
//! prefixes of tools not offered are text.

use std::borrow::Cow;

use data_plane_registry::Tag;
use serde_json::Value;

use super::schema::{self, Schemas};
use super::{Prefix, Segment, TextCall};

/// A call written as a tag line.
#[derive(Debug, Clone, PartialEq)]
pub struct TagLine {
    /// The line as written, from its prefix to its end, without the line
    /// break.
    pub line: String,
    /// The call, or why the line does not fit its tag's pattern.
    pub call: Result<TextCall, String>,
    /// The tag keeps its lines visible: the line was also released as text
    /// just before this segment.
    pub shown: bool,
}

/// The tags of the tools on offer, each with its tool's name.
#[derive(Debug, Clone, Default)]
pub struct Tags {
    tags: Vec<(String, Tag)>,
}

const ZERO_WIDTH_SPACE: char = '\u{200B}';

impl Tags {
    /// `tags`: (tool name, its tag) for every offered tool that has one.
    pub fn new(tags: impl IntoIterator<Item = (String, Tag)>) -> Tags {
        Tags {
            tags: tags.into_iter().collect(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.tags.is_empty()
    }

    /// Whether `rest`, at the start of a line, opens a tag line: `Full`
    /// with the tag's index once `PREFIX:` is all there, `Partial` while
    /// it may still come.
    pub(super) fn opening(&self, rest: &[u8], eof: bool) -> Prefix {
        let mut partial = false;
        for (index, (_, tag)) in self.tags.iter().enumerate() {
            let prefix = tag.prefix().as_bytes();
            let head = &rest[..rest.len().min(prefix.len())];
            if !prefix.starts_with(head) {
                continue;
            }
            match rest.get(prefix.len()) {
                Some(b':') => return Prefix::Full(index),
                Some(_) => {}
                None => partial = true,
            }
        }
        if partial && !eof {
            Prefix::Partial
        } else {
            Prefix::No
        }
    }

    /// The length of `PREFIX:` of tag `index`.
    pub(super) fn opening_len(&self, index: usize) -> usize {
        self.tags[index].1.prefix().len() + 1
    }

    pub(super) fn strips(&self, index: usize) -> bool {
        self.tags[index].1.strip_from_display()
    }

    /// The segment for `line` of tag `index`, whose text after `PREFIX:`
    /// is `text`; argument values are typed by the tool's schema.
    pub(super) fn read(&self, index: usize, line: &str, text: &str, schemas: &Schemas) -> Segment {
        let (tool, tag) = &self.tags[index];
        let call = match tag.arguments(text) {
            Some(arguments) => Ok(TextCall {
                name: tool.clone(),
                arguments: Value::Object(schema::fit_arguments(tool, arguments, schemas)),
            }),
            None => Err(format!(
                "the line {line:?} does not fit the form {}, e.g. {}",
                tag.form(),
                tag.spec().example
            )),
        };
        Segment::Tag(TagLine {
            line: line.to_string(),
            call,
            shown: !tag.strip_from_display(),
        })
    }

    /// `text` with every line that opens one of these tags made inert by a
    /// zero-width space in front (see `neutralise`); borrowed when there
    /// was none. A tool result quoted verbatim then calls nothing.
    pub fn neutralise<'a>(&self, text: &'a str) -> Cow<'a, str> {
        if self.is_empty() {
            return Cow::Borrowed(text);
        }
        let mut out = String::new();
        let mut copied = 0;
        let mut line_start = true;
        for (at, byte) in text.bytes().enumerate() {
            match byte {
                b'\n' => line_start = true,
                b' ' | b'\t' | b'\r' => {}
                _ => {
                    if line_start
                        && matches!(self.opening(&text.as_bytes()[at..], true), Prefix::Full(_))
                    {
                        out.push_str(&text[copied..at]);
                        out.push(ZERO_WIDTH_SPACE);
                        copied = at;
                    }
                    line_start = false;
                }
            }
        }
        if out.is_empty() {
            return Cow::Borrowed(text);
        }
        out.push_str(&text[copied..]);
        Cow::Owned(out)
    }

    /// Every string in `value`, keys included, passed through
    /// [`Tags::neutralise`].
    pub fn neutralise_value(&self, value: &Value) -> Value {
        match value {
            Value::String(text) => Value::String(self.neutralise(text).into_owned()),
            Value::Array(items) => {
                Value::Array(items.iter().map(|v| self.neutralise_value(v)).collect())
            }
            Value::Object(map) => Value::Object(
                map.iter()
                    .map(|(key, value)| {
                        (
                            self.neutralise(key).into_owned(),
                            self.neutralise_value(value),
                        )
                    })
                    .collect(),
            ),
            other => other.clone(),
        }
    }
}
