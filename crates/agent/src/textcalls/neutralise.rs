//! Making tool-call markup in untrusted text inert before the model reads
//! it. A document, a search hit or a fetched page may carry
//! `<tool_call>…</tool_call>` or a bare call line; if the model quoted it
//! verbatim, the parser would run it. After [`neutralise`] a verbatim quote
//! is text: tag openings get a look-alike `‹` instead of `<`, Mistral's
//! marker gets full-width brackets, and a bracket that opens what could be
//! read as a bare JSON or Python call (at the start of a line or after
//! text) gets a zero-width space right after it, which breaks the call's
//! form. Everything else is left exactly as it was.

use std::borrow::Cow;

use serde_json::Value;

/// What follows `<` in the tags the parser reads (and in chat-template
/// tokens such as `<|python_tag|>` and `<|im_start|>`).
const TAG_BODIES: [&str; 22] = [
    "think>",
    "/think>",
    "tool_call>",
    "/tool_call>",
    "function=",
    "function name=",
    "/function>",
    "parameter=",
    "/parameter>",
    "tools>",
    "/tools>",
    "tool>",
    "/tool>",
    "response>",
    "/response>",
    "function_call>",
    "/function_call>",
    "arg_key>",
    "/arg_key>",
    "arg_value>",
    "/arg_value>",
    "|",
];

const MISTRAL: &str = "[TOOL_CALLS]";
const MISTRAL_INERT: &str = "［TOOL_CALLS］";
const LOOK_ALIKE: char = '‹';
const ZERO_WIDTH_SPACE: char = '\u{200B}';

/// `text` with every piece of tool-call markup made inert; borrowed when
/// there was none.
pub fn neutralise(text: &str) -> Cow<'_, str> {
    if !text.contains(['<', '[', '{']) {
        return Cow::Borrowed(text);
    }
    let bytes = text.as_bytes();
    let mut out = String::new();
    let mut copied = 0;
    let mut line_start = true;
    let mut prev = b'\n';
    for (at, &byte) in bytes.iter().enumerate() {
        let replacement: Option<(usize, Cow<'static, str>)> = match byte {
            b'<' if TAG_BODIES
                .iter()
                .any(|tag| bytes[at + 1..].starts_with(tag.as_bytes())) =>
            {
                Some((1, Cow::Owned(LOOK_ALIKE.to_string())))
            }
            b'[' if bytes[at..].starts_with(MISTRAL.as_bytes()) => {
                Some((MISTRAL.len(), Cow::Borrowed(MISTRAL_INERT)))
            }
            b'[' | b'{' if (line_start || super::inline_after(prev)) && call_head(&bytes[at..]) => {
                Some((1, Cow::Owned(format!("{}{ZERO_WIDTH_SPACE}", byte as char))))
            }
            _ => None,
        };
        if let Some((skip, with)) = replacement
            && at >= copied
        {
            out.push_str(&text[copied..at]);
            out.push_str(&with);
            copied = at + skip;
        }
        match byte {
            b'\n' => line_start = true,
            b' ' | b'\t' | b'\r' => {}
            _ => line_start = false,
        }
        prev = byte;
    }
    if copied == 0 && out.is_empty() {
        return Cow::Borrowed(text);
    }
    out.push_str(&text[copied..]);
    Cow::Owned(out)
}

/// Every string in `value`, keys included, neutralised.
pub fn neutralise_value(value: &Value) -> Value {
    match value {
        Value::String(text) => Value::String(neutralise(text).into_owned()),
        Value::Array(items) => Value::Array(items.iter().map(neutralise_value).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(key, value)| (neutralise(key).into_owned(), neutralise_value(value)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// Whether the bracket at the start of `rest` begins what the parser could
/// take for a bare call: `{` then a key a call starts with, `[` then `{`,
/// or `[` then `name(`.
fn call_head(rest: &[u8]) -> bool {
    let open = rest[0];
    let mut i = 1;
    while i < rest.len() && rest[i].is_ascii_whitespace() {
        i += 1;
    }
    match (open, rest.get(i)) {
        (b'{', Some(b'"')) => super::FIRST_KEYS.iter().any(|key| {
            rest[i + 1..].starts_with(key.as_bytes()) && rest.get(i + 1 + key.len()) == Some(&b'"')
        }),
        (b'[', Some(b'{')) => true,
        (b'[', Some(b)) if b.is_ascii_alphabetic() || *b == b'_' => {
            let name_end = rest[i..]
                .iter()
                .position(|b| !(b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.')))
                .map_or(rest.len(), |n| i + n);
            rest[name_end..].iter().find(|b| !matches!(b, b' ' | b'\t')) == Some(&b'(')
        }
        _ => false,
    }
}
