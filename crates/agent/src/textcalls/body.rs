//! Reading the inside of call markup once it is complete: a `<tool_call>`
//! body, a `<function=NAME>` body, what follows `[TOOL_CALLS]`, and a bare
//! JSON array, object or Python call list, each turned into calls or a
//! reason why not. Argument values are fitted to the tool's schema here.

use serde_json::{Map, Value};

use super::schema::{self, Schemas};
use super::{Segment, TextCall, python, xml};

/// Longest piece of offending input quoted in a reason.
const QUOTE_MAX: usize = 80;

/// Keys a bare-array element may carry besides its name and arguments.
const BARE_KEYS: [&str; 6] = ["name", "arguments", "parameters", "id", "type", "function"];

/// The Mistral marker before its calls.
pub(super) const MISTRAL: &str = "[TOOL_CALLS]";

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
pub(super) fn tool_call(
    body: &str,
    raw: &str,
    terminated: bool,
    schemas: &Schemas,
) -> Vec<Segment> {
    let inner = strip_fence(body.trim());
    if inner.is_empty() {
        let reason = if terminated {
            "empty tool_call"
        } else {
            "unterminated tool_call"
        };
        return vec![malformed(raw, reason.to_string())];
    }
    if let Some(rest) = inner
        .strip_prefix("<function=")
        .or_else(|| inner.strip_prefix("<function name="))
    {
        if !terminated {
            return vec![malformed(raw, "unterminated tool_call".to_string())];
        }
        let rest = rest.strip_suffix("</function>").unwrap_or(rest);
        return function(rest, raw, schemas);
    }
    if xml::is_glm(inner) {
        if !terminated {
            return vec![malformed(raw, "unterminated tool_call".to_string())];
        }
        return match xml::glm_call(inner, schemas) {
            Ok(call) => vec![Segment::Call(call)],
            Err(reason) => vec![malformed(raw, reason)],
        };
    }
    if let Some(calls) = python_body(inner, schemas) {
        return calls.into_iter().map(Segment::Call).collect();
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
            Ok(Value::Object(map)) => objects(map, raw, schemas, &mut out),
            Ok(Value::Array(items)) => {
                for item in items {
                    match item {
                        Value::Object(map) => objects(map, raw, schemas, &mut out),
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

/// A Python call list, or one call without its brackets, as Llama 4 writes
/// them between `<|python_start|>` and `<|python_end|>`.
fn python_body(inner: &str, schemas: &Schemas) -> Option<Vec<TextCall>> {
    let calls = if inner.starts_with('[') {
        python::call_list(inner)?
    } else if python::starts_call(inner.as_bytes()) == Some(true) {
        python::call_list(&format!("[{inner}]"))?
    } else {
        return None;
    };
    calls
        .into_iter()
        .map(|(name, args)| {
            check_name(&name).ok()?;
            Some(TextCall {
                arguments: Value::Object(schema::fit_arguments(&name, args, schemas)),
                name,
            })
        })
        .collect()
}

/// One call object, or a `{"tool_calls": [...]}` wrapper of several.
fn objects(map: Map<String, Value>, raw: &str, schemas: &Schemas, out: &mut Vec<Segment>) {
    if let Some(Value::Array(items)) = map.get("tool_calls")
        && !map.contains_key("name")
    {
        for item in items {
            match item {
                Value::Object(inner) => out.push(segment_from_object(inner, raw, schemas)),
                other => out.push(malformed(
                    raw,
                    format!(
                        "tool_calls holds a non-object: {}",
                        quote(&other.to_string())
                    ),
                )),
            }
        }
        return;
    }
    out.push(segment_from_object(&map, raw, schemas));
}

fn segment_from_object(map: &Map<String, Value>, raw: &str, schemas: &Schemas) -> Segment {
    match call_from_object(map, schemas) {
        Ok(call) => Segment::Call(call),
        Err(reason) => malformed(raw, reason),
    }
}

/// A name as a template left it unrendered (`{{ tc.name }}`) names no tool.
pub(super) fn check_name(name: &str) -> Result<(), String> {
    if name.contains("{{") || name.contains("}}") || name.contains("{%") {
        return Err(format!(
            "tool name is an unrendered template: {}",
            quote(name)
        ));
    }
    Ok(())
}

/// `{"name", "arguments"}`, with `parameters` as a synonym of `arguments`,
/// or OpenAI's own `{"type": "function", "function": {…}}`.
fn call_from_object(map: &Map<String, Value>, schemas: &Schemas) -> Result<TextCall, String> {
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
    check_name(&name)?;
    let arguments = arguments(
        &name,
        map.get("arguments").or_else(|| map.get("parameters")),
        schemas,
    )?;
    Ok(TextCall { name, arguments })
}

/// Arguments as an object fitted to the tool's schema: missing or null is
/// `{}`, a JSON string holding an object is decoded (OpenAI's wire form), a
/// plain string is the value of the tool's one required (or only)
/// parameter, or else passed on as the string it is (the registry then
/// tells the model what it expects); anything else is refused.
fn arguments(name: &str, value: Option<&Value>, schemas: &Schemas) -> Result<Value, String> {
    let map = match value {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(map)) => map.clone(),
        Some(Value::String(text)) if text.trim().is_empty() => Map::new(),
        Some(Value::String(text)) => match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(map)) => map,
            // A string that only looks like JSON is no value for one
            // argument: it goes on as written.
            _ if text.trim_start().starts_with(['{', '[']) => {
                return Ok(Value::String(text.clone()));
            }
            _ => match schema::sole(schemas, name) {
                Some(key) => Map::from_iter([(key, Value::String(text.clone()))]),
                None => return Ok(Value::String(text.clone())),
            },
        },
        Some(other) => {
            return Err(format!(
                "arguments of {name} are not a json object: {}",
                quote(&other.to_string())
            ));
        }
    };
    Ok(Value::Object(schema::fit_arguments(name, map, schemas)))
}

/// What follows `<function=` (or `<function name=`) up to (not including)
/// `</function>`, read as `xml.rs` does.
pub(super) fn function(text: &str, raw: &str, schemas: &Schemas) -> Vec<Segment> {
    match xml::function_call(text, schemas) {
        Ok(call) => vec![Segment::Call(call)],
        Err(reason) => vec![malformed(raw, reason)],
    }
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

/// A complete bare JSON array or object, or a Python call list, counts as
/// calls only when every element is a call, every name is a tool on offer
/// and every call's arguments agree with that tool's schema; anything else
/// is the JSON (or code) the user asked for. A bare object must carry its
/// arguments (`arguments` or `parameters`, possibly inside `function`), or
/// be a `{"tool_calls": [...]}` wrapper. An array's objects may be
/// separated by blanks alone.
pub(super) fn bare_calls(
    text: &str,
    known_tools: &[String],
    schemas: &Schemas,
) -> Option<Vec<TextCall>> {
    let parsed = serde_json::from_str::<Value>(text).or_else(|err| loose_array(text).ok_or(err));
    let items = match parsed {
        Ok(Value::Array(items)) => items,
        Ok(Value::Object(mut map)) => match map.remove("tool_calls") {
            Some(Value::Array(items)) if map.is_empty() => items,
            Some(_) => return None,
            None => {
                let inner = match map.get("function") {
                    Some(Value::Object(inner)) => inner,
                    _ => &map,
                };
                if !inner.contains_key("arguments") && !inner.contains_key("parameters") {
                    return None;
                }
                vec![Value::Object(map)]
            }
        },
        Ok(_) => return None,
        Err(_) => return python_calls(text, known_tools, schemas),
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
            let call = call_from_object(map, schemas).ok()?;
            (known_tools.contains(&call.name)
                && schema::validates(schemas, &call.name, &call.arguments))
            .then_some(call)
        })
        .collect()
}

/// `[{…} {…}]`: the objects of an array written without commas between
/// them (or with them), as one array.
fn loose_array(text: &str) -> Option<Value> {
    let inner = text.trim().strip_prefix('[')?.strip_suffix(']')?;
    let mut items = Vec::new();
    let mut rest = inner;
    loop {
        rest = rest.trim_start_matches(|c: char| c.is_whitespace() || c == ',');
        if rest.is_empty() {
            break;
        }
        if !rest.starts_with('{') {
            return None;
        }
        let mut stream = serde_json::Deserializer::from_str(rest).into_iter::<Value>();
        let item = stream.next()?.ok()?;
        let consumed = stream.byte_offset();
        items.push(item);
        rest = &rest[consumed..];
    }
    (!items.is_empty()).then_some(Value::Array(items))
}

/// Where in `text` (a cut-off bare call's rest) a later object starts that
/// is a complete call to a tool on offer with arguments its schema admits.
pub(super) fn later_call(text: &str, schemas: &Schemas) -> Option<usize> {
    const TRIES: usize = 8;
    text.match_indices('{')
        .filter(|(at, _)| text[at + 1..].trim_start().starts_with("\"name\""))
        .take(TRIES)
        .find_map(|(at, _)| {
            let mut stream = serde_json::Deserializer::from_str(&text[at..]).into_iter::<Value>();
            stream.next()?.ok()?;
            let end = at + stream.byte_offset();
            bare_calls(&text[at..end], schemas.names(), schemas).map(|_| at)
        })
}

/// `[f(a=1), g(b="x")]` when every name is a tool on offer.
fn python_calls(text: &str, known_tools: &[String], schemas: &Schemas) -> Option<Vec<TextCall>> {
    python::call_list(text)?
        .into_iter()
        .map(|(name, args)| {
            let arguments = Value::Object(schema::fit_arguments(&name, args, schemas));
            (known_tools.contains(&name) && schema::validates(schemas, &name, &arguments))
                .then_some(TextCall { arguments, name })
        })
        .collect()
}

/// What follows `[TOOL_CALLS]`, read once the reply has ended: a JSON array
/// (or object) of calls, or `name{json}` / `name[ARGS]{json}` as newer
/// Mistral templates write it, repeated, possibly each after its own
/// marker. Junk before the first call is skipped; text after the last one
/// is text. Prose with no JSON at all is text (the marker is dropped);
/// nothing at all is one malformed segment.
pub(super) fn mistral(body: &str, raw: &str, schemas: &Schemas) -> Vec<Segment> {
    let prose = body.replace(MISTRAL, " ");
    let prose = prose.trim();
    if !prose.is_empty() && !prose.contains(['[', '{']) {
        return vec![Segment::Text(prose.to_string())];
    }
    let mut out = Vec::new();
    let mut rest = body;
    loop {
        rest = rest.trim_start();
        if let Some(after) = rest.strip_prefix(MISTRAL) {
            rest = after;
            continue;
        }
        if rest.is_empty() {
            break;
        }
        let (name, json) = match rest.as_bytes()[0] {
            b'[' | b'{' => (None, rest),
            _ => match named_call(rest) {
                Some((name, json)) => (Some(name), json),
                None if out.is_empty() => {
                    // Junk between the marker and the calls.
                    match rest.find(['[', '{']) {
                        Some(at) if at > 0 => {
                            rest = &rest[at..];
                            continue;
                        }
                        _ => break,
                    }
                }
                None => break,
            },
        };
        let mut stream = serde_json::Deserializer::from_str(json).into_iter::<Value>();
        let value = match stream.next() {
            Some(Ok(value)) => value,
            Some(Err(err)) if out.is_empty() => {
                out.push(malformed(
                    raw,
                    format!(
                        "invalid json after [TOOL_CALLS]: {}",
                        err.to_string().to_lowercase()
                    ),
                ));
                return out;
            }
            _ => break,
        };
        let consumed = stream.byte_offset();
        match (name, value) {
            (Some(name), Value::Object(args)) => {
                let call = check_name(name).map(|()| TextCall {
                    name: name.to_string(),
                    arguments: Value::Object(schema::fit_arguments(name, args, schemas)),
                });
                out.push(match call {
                    Ok(call) => Segment::Call(call),
                    Err(reason) => malformed(raw, reason),
                });
            }
            (Some(name), other) => out.push(malformed(
                raw,
                format!(
                    "arguments of {name} are not a json object: {}",
                    quote(&other.to_string())
                ),
            )),
            (None, Value::Object(map)) => objects(map, raw, schemas, &mut out),
            (None, Value::Array(items)) => {
                for item in items {
                    match item {
                        Value::Object(map) => objects(map, raw, schemas, &mut out),
                        other => out.push(malformed(
                            raw,
                            format!(
                                "[TOOL_CALLS] array holds a non-object: {}",
                                quote(&other.to_string())
                            ),
                        )),
                    }
                }
            }
            (None, other) => out.push(malformed(
                raw,
                format!(
                    "[TOOL_CALLS] holds a non-object: {}",
                    quote(&other.to_string())
                ),
            )),
        }
        rest = &json[consumed..];
    }
    if out.is_empty() {
        return vec![malformed(
            raw,
            "no tool call after [TOOL_CALLS]".to_string(),
        )];
    }
    // A fence the junk before the calls opened closes after them.
    let trailing = rest.trim();
    let trailing = trailing.strip_prefix("```").unwrap_or(trailing).trim();
    if !trailing.is_empty() {
        out.push(Segment::Text(trailing.to_string()));
    }
    out
}

/// `name{…}`, `name [ARGS] {…}` or `name[CALL_ID]id[ARGS]{…}`: the name and
/// where its JSON starts.
fn named_call(text: &str) -> Option<(&str, &str)> {
    let end = text
        .bytes()
        .position(|b| !(b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.')))?;
    if end == 0 {
        return None;
    }
    let name = &text[..end];
    let mut rest = text[end..].trim_start();
    if let Some(after) = rest.strip_prefix("[CALL_ID]") {
        let stop = after.find('[')?;
        rest = &after[stop..];
    }
    rest = rest.strip_prefix("[ARGS]").unwrap_or(rest).trim_start();
    rest.starts_with('{').then_some((name, rest))
}

/// Whether a bare array cut off by the end of the stream had begun a call
/// to a tool on offer: its first `"name"` is one of them. Only the first is
/// looked at, so JSON for the user that merely runs on is not taken for a
/// call because of some later string.
pub(super) fn names_known_tool(partial: &str, known_tools: &[String]) -> bool {
    if let Some(name) = python::first_name(partial) {
        return known_tools.iter().any(|tool| tool == name);
    }
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
