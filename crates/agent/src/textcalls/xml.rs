//! The XML-parameter call forms: Qwen3-Coder's
//! `<function=NAME><parameter=K>V</parameter></function>` and GLM-4.5's
//! `NAME<arg_key>K</arg_key><arg_value>V</arg_value>` inside `<tool_call>`.
//!
//! A value is text up to its closing tag, but a model writing a file may
//! well put call markup in it (`</parameter>`, `<parameter=path>`, a whole
//! `<tool_call>`). So a value ends only where the structure can end it: at
//! a `</parameter>` outside any `<function=…>` the value itself opened,
//! followed by the next parameter of the tool (one not given yet) or by the
//! end of the function. A body that cannot be read that way (a model that
//! forgot its closing tags) is read again leniently: each value then ends
//! at the first marker after it.

use serde_json::{Map, Value};

use super::schema::{self, Schemas};
use super::{TextCall, python};

const PARAM_OPEN: &str = "<parameter=";
const PARAM_CLOSE: &str = "</parameter>";
const FUNCTION_OPEN: &str = "<function=";
const FUNCTION_NAME_OPEN: &str = "<function name=";
const FUNCTION_CLOSE: &str = "</function>";
const KEY_OPEN: &str = "<arg_key>";
const KEY_CLOSE: &str = "</arg_key>";
const VALUE_OPEN: &str = "<arg_value>";
const VALUE_CLOSE: &str = "</arg_value>";

/// Longest piece of offending input quoted in a reason.
const QUOTE_MAX: usize = 80;

fn quote(s: &str) -> String {
    match s.char_indices().nth(QUOTE_MAX) {
        Some((cut, _)) => format!("{}…", &s[..cut]),
        None => s.to_string(),
    }
}

/// Whether a `<function=…>` body (what follows `<function=`, up to a
/// possible closing tag, which is not included) is complete in the strict
/// reading: the closing tag that follows it may end the call.
pub(super) fn function_ends_here(text: &str, schemas: &Schemas) -> bool {
    match split_name(text) {
        Ok((name, body)) => strict(name, body, schemas).is_some(),
        Err(_) => true,
    }
}

/// Whether the inside of a `<tool_call>` holding a function may end where
/// it does: the function is strictly complete, closed or not, and nothing
/// but blanks follows it.
pub(super) fn tool_call_ends_here(inner: &str, schemas: &Schemas) -> bool {
    let inner = inner.trim();
    let Some(rest) = inner
        .strip_prefix(FUNCTION_OPEN)
        .or_else(|| inner.strip_prefix(FUNCTION_NAME_OPEN))
    else {
        return true;
    };
    let rest = rest.strip_suffix(FUNCTION_CLOSE).unwrap_or(rest);
    function_ends_here(rest, schemas)
}

/// What follows `<function=` (or `<function name=`) up to (not including)
/// `</function>`: `NAME>` (the name possibly quoted) then
/// `<parameter=K>V</parameter>` pairs or one JSON object of arguments.
pub(super) fn function_call(text: &str, schemas: &Schemas) -> Result<TextCall, String> {
    let (name, body) = split_name(text)?;
    let trimmed = body.trim();
    if trimmed.starts_with('{') {
        return match serde_json::from_str::<Value>(trimmed) {
            Ok(Value::Object(map)) => Ok(TextCall {
                name: name.to_string(),
                arguments: Value::Object(schema::fit_arguments(name, map, schemas)),
            }),
            Ok(other) => Err(format!(
                "arguments of {name} are not a json object: {}",
                quote(&other.to_string())
            )),
            Err(err) => Err(format!(
                "invalid json in function {name}: {}",
                err.to_string().to_lowercase()
            )),
        };
    }
    let pairs = match strict(name, body, schemas) {
        Some(pairs) => pairs,
        None => lenient(name, body)?,
    };
    let mut args = Map::new();
    for (key, raw) in pairs {
        args.insert(key.to_string(), typed(name, key, raw, schemas));
    }
    Ok(TextCall {
        name: name.to_string(),
        arguments: Value::Object(args),
    })
}

/// `NAME>` and the body after it.
fn split_name(text: &str) -> Result<(&str, &str), String> {
    let Some(gt) = text.find('>') else {
        return Err(format!(
            "function tag is not closed: {}",
            quote(text.trim())
        ));
    };
    let name = text[..gt].trim();
    let name = name
        .strip_prefix('"')
        .and_then(|n| n.strip_suffix('"'))
        .or_else(|| name.strip_prefix('\'').and_then(|n| n.strip_suffix('\'')))
        .unwrap_or(name)
        .trim();
    if name.is_empty() {
        return Err("function tag without a name".to_string());
    }
    if name.contains(['<', '\n']) {
        return Err(format!("function tag is not closed: {}", quote(name)));
    }
    super::body::check_name(name)?;
    Ok((name, &text[gt + 1..]))
}

/// `<parameter=KEY>` at the start of `text`: the key and what follows the
/// tag.
fn param_open(text: &str) -> Option<(&str, &str)> {
    let rest = text.strip_prefix(PARAM_OPEN)?;
    let gt = rest.find('>')?;
    let key = rest[..gt].trim();
    let key = key
        .strip_prefix('"')
        .and_then(|k| k.strip_suffix('"'))
        .unwrap_or(key);
    (!key.is_empty() && !key.contains(['<', '\n'])).then(|| (key, &rest[gt + 1..]))
}

/// Whether `key` may be the next parameter of `tool`: not given yet, and
/// one the tool may take.
fn may_follow(tool: &str, key: &str, given: &[(&str, &str)], schemas: &Schemas) -> bool {
    !given.iter().any(|(k, _)| *k == key) && schema::may_take(schemas, tool, key)
}

/// The strict reading of a function's parameters, or `None` where the
/// structure cannot end a value (see the module's notes).
fn strict<'a>(tool: &str, body: &'a str, schemas: &Schemas) -> Option<Vec<(&'a str, &'a str)>> {
    let mut pairs: Vec<(&str, &str)> = Vec::new();
    let mut rest = body;
    loop {
        rest = rest.trim_start();
        if rest.is_empty() {
            return Some(pairs);
        }
        let (key, value) = param_open(rest)?;
        let end = value_end(tool, key, value, &pairs, schemas)?;
        pairs.push((key, &value[..end]));
        rest = &value[end + PARAM_CLOSE.len()..];
    }
}

/// Where the value of `key` (the text after its tag) ends: the offset of
/// the `</parameter>` the structure lets end it.
fn value_end(
    tool: &str,
    key: &str,
    value: &str,
    given: &[(&str, &str)],
    schemas: &Schemas,
) -> Option<usize> {
    let bytes = value.as_bytes();
    let mut depth = 0usize;
    let mut from = 0;
    while let Some(at) = memchr::memchr(b'<', &bytes[from..]).map(|at| from + at) {
        let rest = &value[at..];
        from = at + 1;
        if rest.starts_with(FUNCTION_OPEN) || rest.starts_with(FUNCTION_NAME_OPEN) {
            depth += 1;
        } else if rest.starts_with(FUNCTION_CLOSE) {
            depth = depth.saturating_sub(1);
        } else if depth > 0 {
            continue;
        } else if rest.starts_with(PARAM_CLOSE) {
            let after = value[at + PARAM_CLOSE.len()..].trim_start();
            let ends = match param_open(after) {
                _ if after.is_empty() => true,
                Some((next, _)) => next != key && may_follow(tool, next, given, schemas),
                None => false,
            };
            if ends {
                return Some(at);
            }
        } else if let Some((next, _)) = param_open(rest)
            && next != key
            && schema::has_property(schemas, tool, next) == Some(true)
            && may_follow(tool, next, given, schemas)
        {
            // The next parameter of the tool opened inside this value: the
            // model forgot this value's closing tag.
            return None;
        }
    }
    None
}

/// Each value ends at its closing tag or at the next `<parameter=`,
/// whichever comes first; the last one may also run to the end.
fn lenient<'a>(tool: &str, body: &'a str) -> Result<Vec<(&'a str, &'a str)>, String> {
    let mut pairs = Vec::new();
    let mut rest = body;
    loop {
        rest = rest.trim_start();
        if rest.is_empty() {
            return Ok(pairs);
        }
        let Some(param) = rest.strip_prefix(PARAM_OPEN) else {
            return Err(format!(
                "unexpected text in function {tool}: {}",
                quote(rest)
            ));
        };
        let Some(gt) = param.find('>') else {
            return Err(format!(
                "parameter tag in function {tool} is not closed: {}",
                quote(param)
            ));
        };
        let Some((key, value)) = param_open(rest) else {
            return Err(format!(
                "parameter without a name in function {tool}: {}",
                quote(&param[..gt])
            ));
        };
        let close = value.find(PARAM_CLOSE);
        let next_open = value[..close.unwrap_or(value.len())].find(PARAM_OPEN);
        let (raw, after) = match (close, next_open) {
            (_, Some(open)) => (&value[..open], &value[open..]),
            (Some(close), None) => (&value[..close], &value[close + PARAM_CLOSE.len()..]),
            (None, None) => (value, ""),
        };
        pairs.push((key, raw));
        rest = after;
    }
}

/// A value written as text, typed by the tool's schema: the blanks a
/// template puts around a value are layout and go; inside, it is kept as
/// written.
fn typed(tool: &str, key: &str, raw: &str, schemas: &Schemas) -> Value {
    let text = raw.trim();
    match schema::property(schemas, tool, key) {
        Some(prop) => schema::from_text(text, prop).unwrap_or_else(|| untyped(text)),
        None => untyped(text),
    }
}

/// Without a schema: JSON numbers, booleans, null, objects and arrays are
/// taken as such; everything else (a JSON string included, whose quotes may
/// well be meant) stays the text it is.
pub(super) fn untyped(text: &str) -> Value {
    let json_like = text.starts_with(['{', '[', '-'])
        || text.starts_with(|c: char| c.is_ascii_digit())
        || matches!(text, "true" | "false" | "null");
    if json_like && let Ok(value) = serde_json::from_str::<Value>(text) {
        return value;
    }
    Value::String(text.to_string())
}

/// Whether the inside of a `<tool_call>` is GLM's form: a tool name, then
/// `<arg_key>` pairs or nothing.
pub(super) fn is_glm(inner: &str) -> bool {
    let name_end = inner.find(['<', '\n']).unwrap_or(inner.len());
    let name = inner[..name_end].trim();
    is_tool_name(name) && {
        let rest = inner[name_end..].trim_start();
        rest.is_empty() || rest.starts_with(KEY_OPEN)
    }
}

fn is_tool_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b':'))
}

/// GLM-4.5's call: `NAME` then `<arg_key>K</arg_key><arg_value>V</arg_value>`
/// pairs. A value is typed by the schema; without one, JSON (as the
/// template writes values that are not strings) or else the text.
pub(super) fn glm_call(inner: &str, schemas: &Schemas) -> Result<TextCall, String> {
    let name_end = inner.find(['<', '\n']).unwrap_or(inner.len());
    let name = inner[..name_end].trim();
    super::body::check_name(name)?;
    let mut args = Map::new();
    let mut rest = inner[name_end..].trim_start();
    while !rest.is_empty() {
        let Some(after) = rest.strip_prefix(KEY_OPEN) else {
            return Err(format!(
                "unexpected text in tool_call {name}: {}",
                quote(rest)
            ));
        };
        let Some(close) = after.find(KEY_CLOSE) else {
            return Err(format!("arg_key in tool_call {name} is not closed"));
        };
        let key = after[..close].trim();
        let after = after[close + KEY_CLOSE.len()..].trim_start();
        let Some(after) = after.strip_prefix(VALUE_OPEN) else {
            return Err(format!("arg_key {key} of {name} has no arg_value"));
        };
        // A value ends at a closing tag followed by the next key or the end.
        let mut end = None;
        let mut from = 0;
        while let Some(at) = after[from..].find(VALUE_CLOSE).map(|at| from + at) {
            let next = after[at + VALUE_CLOSE.len()..].trim_start();
            if next.is_empty() || next.starts_with(KEY_OPEN) {
                end = Some(at);
                break;
            }
            from = at + 1;
        }
        let Some(end) = end.or_else(|| after.find(VALUE_CLOSE)) else {
            return Err(format!("arg_value {key} of {name} is not closed"));
        };
        let raw = after[..end].trim();
        let value = match schema::property(schemas, name, key) {
            Some(prop) => schema::from_text(raw, prop).unwrap_or_else(|| glm_untyped(raw)),
            None => glm_untyped(raw),
        };
        args.insert(key.to_string(), value);
        rest = after[end + VALUE_CLOSE.len()..].trim_start();
    }
    Ok(TextCall {
        name: name.to_string(),
        arguments: Value::Object(args),
    })
}

fn glm_untyped(text: &str) -> Value {
    serde_json::from_str::<Value>(text)
        .ok()
        .filter(|v| !v.is_string())
        .or_else(|| python::literal(text).filter(|v| v.is_object() || v.is_array()))
        .unwrap_or_else(|| Value::String(text.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schemas() -> Schemas {
        Schemas::of([(
            "write_file".to_string(),
            json!({"type": "object", "additionalProperties": false, "properties": {
                "path": {"type": "string"}, "content": {"type": "string"},
                "mode": {"type": ["string", "null"]}, "n": {"type": "array"}
            }}),
        )])
    }

    #[test]
    fn values_end_where_the_structure_can_end_them() {
        let s = schemas();
        let body = "write_file>\n<parameter=path>\n  a.xml\n  </parameter>\n<parameter=content>\nx</parameter> y\n<parameter=path>q</parameter>\n</parameter>\n";
        let call = function_call(body, &s).expect("a call");
        assert_eq!(
            call.arguments,
            json!({"path": "a.xml", "content": "x</parameter> y\n<parameter=path>q</parameter>"})
        );
        assert!(!function_ends_here(
            "write_file><parameter=content>see <function=f><parameter=a>1</parameter>\n",
            &s
        ));
        let forgot = "write_file><parameter=path>a\n<parameter=content>b\n</parameter>";
        assert!(strict("write_file", &forgot[11..], &s).is_none());
        let call = function_call(forgot, &s).expect("a lenient call");
        assert_eq!(call.arguments, json!({"path": "a", "content": "b"}));
        let call = function_call("write_file><parameter=mode>None</parameter>", &s)
            .expect("a nullable value");
        assert_eq!(call.arguments, json!({"mode": null}));
    }

    #[test]
    fn glm_pairs() {
        let s = schemas();
        let inner = "write_file\n<arg_key>path</arg_key>\n<arg_value>a</arg_value>\n<arg_key>n</arg_key>\n<arg_value>[1, 2]</arg_value>\n";
        assert!(is_glm(inner));
        let call = glm_call(inner, &s).expect("a glm call");
        assert_eq!(call.arguments, json!({"path": "a", "n": [1, 2]}));
        assert!(!is_glm("some words here"));
        assert!(is_glm("get_time"));
    }
}
