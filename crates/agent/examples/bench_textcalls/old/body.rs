//! Reading the inside of call markup once it is complete: a `<tool_call>`
//! body, a `<function=NAME>` body and a bare JSON array, each turned into
//! calls or a reason why not.

use serde_json::{Map, Value};

use super::{Segment, TextCall};

/// Longest piece of offending input quoted in a reason.
const QUOTE_MAX: usize = 80;

/// Keys a bare-array element may carry besides its name and arguments.
const BARE_KEYS: [&str; 6] = ["name", "arguments", "parameters", "id", "type", "function"];

fn malformed(raw: &str, reason: String) -> Segment {
    Segment::Malformed {
        raw: raw.to_string(),
        reason,
    }
}

/// The first `QUOTE_MAX` characters of `s`, with an ellipsis when cut.
fn quote(s: &str) -> String {
    match s.char_indices().nth(QUOTE_MAX) {
        Some((cut, _)) => format!("{}…", &s[..cut]),
        None => s.to_string(),
    }
}

/// The body of `<tool_call>…</tool_call>`: JSON (one or several objects, or
/// an array of them) or a `<function=NAME>` call. `terminated` is false when
/// the stream ended before `</tool_call>`: complete JSON is still a call,
/// anything else is reported as unterminated.
pub(super) fn tool_call(body: &str, raw: &str, terminated: bool) -> Vec<Segment> {
    let inner = strip_fence(body.trim());
    if inner.is_empty() {
        let reason = if terminated {
            "empty tool_call"
        } else {
            "unterminated tool_call"
        };
        return vec![malformed(raw, reason.to_string())];
    }
    if let Some(rest) = inner.strip_prefix("<function=") {
        if !terminated {
            return vec![malformed(raw, "unterminated tool_call".to_string())];
        }
        let rest = rest.strip_suffix("</function>").unwrap_or(rest);
        return function(rest, raw);
    }
    if !inner.starts_with('{') && !inner.starts_with('[') {
        return vec![malformed(
            raw,
            format!(
                "tool_call holds neither json nor a function tag: {}",
                quote(inner)
            ),
        )];
    }
    let mut out = Vec::new();
    for item in serde_json::Deserializer::from_str(inner).into_iter::<Value>() {
        match item {
            Ok(Value::Object(map)) => out.push(segment_from_object(&map, raw)),
            Ok(Value::Array(items)) => {
                for item in items {
                    match item {
                        Value::Object(map) => out.push(segment_from_object(&map, raw)),
                        other => out.push(malformed(
                            raw,
                            format!(
                                "tool_call array holds a non-object: {}",
                                quote(&other.to_string())
                            ),
                        )),
                    }
                }
            }
            Ok(other) => out.push(malformed(
                raw,
                format!(
                    "tool_call holds a non-object: {}",
                    quote(&other.to_string())
                ),
            )),
            Err(err) => {
                // serde_json's messages quote no input, so lowercasing them
                // ("EOF while parsing…") changes no offending value.
                let message = err.to_string().to_lowercase();
                out.push(malformed(
                    raw,
                    format!("invalid json in tool_call: {message}"),
                ));
                break;
            }
        }
    }
    let complete = out.iter().all(|s| matches!(s, Segment::Call(_)));
    if !terminated && !complete {
        return vec![malformed(raw, "unterminated tool_call".to_string())];
    }
    out
}

fn segment_from_object(map: &Map<String, Value>, raw: &str) -> Segment {
    match call_from_object(map) {
        Ok(call) => Segment::Call(call),
        Err(reason) => malformed(raw, reason),
    }
}

/// `{"name", "arguments"}`, with `parameters` as a synonym of `arguments`,
/// or OpenAI's own `{"type": "function", "function": {…}}`.
fn call_from_object(map: &Map<String, Value>) -> Result<TextCall, String> {
    let map = match map.get("function") {
        Some(Value::Object(inner)) => inner,
        _ => map,
    };
    let name = match map.get("name") {
        Some(Value::String(name)) if !name.trim().is_empty() => name.trim().to_string(),
        None | Some(Value::String(_)) | Some(Value::Null) => {
            return Err("tool call without a name".to_string());
        }
        Some(other) => {
            return Err(format!(
                "tool call name is not a string: {}",
                quote(&other.to_string())
            ));
        }
    };
    let arguments = arguments(
        &name,
        map.get("arguments").or_else(|| map.get("parameters")),
    )?;
    Ok(TextCall { name, arguments })
}

/// Arguments as an object: missing or null is `{}`, a JSON string holding
/// an object is decoded (OpenAI's wire form), anything else is refused.
fn arguments(name: &str, value: Option<&Value>) -> Result<Value, String> {
    match value {
        None | Some(Value::Null) => Ok(Value::Object(Map::new())),
        Some(Value::Object(map)) => Ok(Value::Object(map.clone())),
        Some(Value::String(text)) if text.trim().is_empty() => Ok(Value::Object(Map::new())),
        Some(Value::String(text)) => match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(map)) => Ok(Value::Object(map)),
            _ => Err(format!(
                "arguments of {name} are a string that is not a json object: {}",
                quote(text)
            )),
        },
        Some(other) => Err(format!(
            "arguments of {name} are not a json object: {}",
            quote(&other.to_string())
        )),
    }
}

/// What follows `<function=` up to (not including) `</function>`:
/// `NAME>` then `<parameter=K>V</parameter>` pairs.
pub(super) fn function(text: &str, raw: &str) -> Vec<Segment> {
    match function_call(text) {
        Ok(call) => vec![Segment::Call(call)],
        Err(reason) => vec![malformed(raw, reason)],
    }
}

fn function_call(text: &str) -> Result<TextCall, String> {
    let Some(gt) = text.find('>') else {
        return Err(format!(
            "function tag is not closed: {}",
            quote(text.trim())
        ));
    };
    let name = text[..gt].trim();
    if name.is_empty() {
        return Err("function tag without a name".to_string());
    }
    if name.contains(['<', '\n']) {
        return Err(format!("function tag is not closed: {}", quote(name)));
    }
    let mut args = Map::new();
    let mut rest = &text[gt + 1..];
    loop {
        rest = rest.trim_start();
        if rest.is_empty() {
            break;
        }
        let Some(param) = rest.strip_prefix("<parameter=") else {
            return Err(format!(
                "unexpected text in function {name}: {}",
                quote(rest)
            ));
        };
        let Some(gt) = param.find('>') else {
            return Err(format!(
                "parameter tag in function {name} is not closed: {}",
                quote(param)
            ));
        };
        let key = param[..gt].trim();
        if key.is_empty() || key.contains(['<', '\n']) {
            return Err(format!(
                "parameter without a name in function {name}: {}",
                quote(&param[..gt])
            ));
        }
        let value = &param[gt + 1..];
        // A value ends at its closing tag; models that forget the closing tag
        // still start the next parameter, so that ends it too.
        let close = value.find("</parameter>");
        let next_open = value[..close.unwrap_or(value.len())].find("<parameter=");
        let (raw_value, after) = match (close, next_open) {
            (_, Some(open)) => (&value[..open], &value[open..]),
            (Some(close), None) => (&value[..close], &value[close + "</parameter>".len()..]),
            (None, None) => (value, ""),
        };
        args.insert(key.to_string(), parameter_value(raw_value));
        rest = after;
    }
    Ok(TextCall {
        name: name.to_string(),
        arguments: Value::Object(args),
    })
}

/// A parameter's text: one leading and one trailing newline belong to the
/// markup's layout, not the value. JSON numbers, booleans, null, objects and
/// arrays are taken as such; everything else (a JSON string included, whose
/// quotes may well be meant) stays the text it is.
fn parameter_value(text: &str) -> Value {
    let text = text
        .strip_prefix("\r\n")
        .or_else(|| text.strip_prefix('\n'))
        .unwrap_or(text);
    let text = text
        .strip_suffix("\r\n")
        .or_else(|| text.strip_suffix('\n'))
        .unwrap_or(text);
    let trimmed = text.trim();
    let json_like = trimmed.starts_with(['{', '[', '-'])
        || trimmed.starts_with(|c: char| c.is_ascii_digit())
        || matches!(trimmed, "true" | "false" | "null");
    if json_like && let Ok(value) = serde_json::from_str::<Value>(trimmed) {
        return value;
    }
    Value::String(text.to_string())
}

/// A code fence around a tool call's JSON (some models add one).
fn strip_fence(text: &str) -> &str {
    let Some(rest) = text.strip_prefix("```") else {
        return text;
    };
    let Some(newline) = rest.find('\n') else {
        return text;
    };
    let inner = &rest[newline + 1..];
    inner.trim_end().strip_suffix("```").unwrap_or(inner).trim()
}

/// A complete bare JSON array counts as calls only when every element is a
/// call object and every name is a tool on offer; anything else is the JSON
/// the user asked for.
pub(super) fn bare_calls(json: &str, known_tools: &[String]) -> Option<Vec<TextCall>> {
    let Ok(Value::Array(items)) = serde_json::from_str::<Value>(json) else {
        return None;
    };
    if items.is_empty() {
        return None;
    }
    items
        .iter()
        .map(|item| {
            let map = item.as_object()?;
            if map.keys().any(|key| !BARE_KEYS.contains(&key.as_str())) {
                return None;
            }
            let call = call_from_object(map).ok()?;
            known_tools.contains(&call.name).then_some(call)
        })
        .collect()
}

/// Whether a bare array cut off by the end of the stream had begun a call
/// to a tool on offer: its first `"name"` is one of them. Only the first is
/// looked at, so JSON for the user that merely runs on is not taken for a
/// call because of some later string.
pub(super) fn names_known_tool(partial: &str, known_tools: &[String]) -> bool {
    let Some(at) = partial.find("\"name\"") else {
        return false;
    };
    let value = partial[at + "\"name\"".len()..].trim_start();
    let Some(value) = value.strip_prefix(':') else {
        return false;
    };
    let Some(value) = value.trim_start().strip_prefix('"') else {
        return false;
    };
    value
        .find('"')
        .is_some_and(|end| known_tools.iter().any(|tool| tool == &value[..end]))
}
