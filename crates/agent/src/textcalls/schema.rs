//! Argument values typed by the offered tool's JSON schema, as inference
//! servers do for text calls: a model writing `<parameter=limit>5</parameter>`
//! or `days="3"` means the integer when the schema says integer. A value
//! that does not convert is left as it was; the registry's validation then
//! names the problem.

use std::collections::HashMap;

use serde_json::{Map, Number, Value};

use super::python;

/// Parameter schemas (`{"type": "object", "properties": …}`) by tool name.
pub type Schemas = HashMap<String, Value>;

/// The schema of one argument of `tool`, if it has one.
pub(super) fn property<'a>(schemas: &'a Schemas, tool: &str, key: &str) -> Option<&'a Value> {
    schemas.get(tool)?.get("properties")?.get(key)
}

/// The types a schema admits: `type` (a name or a list), `nullable`, and
/// the members of `anyOf` / `oneOf`. Empty when it says nothing.
fn types<'a>(schema: &'a Value, out: &mut Vec<&'a str>, depth: usize) {
    if depth > 8 {
        return;
    }
    match schema.get("type") {
        Some(Value::String(name)) => out.push(name),
        Some(Value::Array(names)) => out.extend(names.iter().filter_map(Value::as_str)),
        _ => {}
    }
    if schema.get("nullable") == Some(&Value::Bool(true)) {
        out.push("null");
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(Value::Array(members)) = schema.get(key) {
            for member in members {
                types(member, out, depth + 1);
            }
        }
    }
}

fn admitted(schema: &Value) -> Vec<&str> {
    let mut out = Vec::new();
    types(schema, &mut out, 0);
    out
}

/// A value written as text (a `<parameter>` body, a string argument) as the
/// schema's type. `None` when the schema gives no type to go by.
pub(super) fn from_text(text: &str, schema: &Value) -> Option<Value> {
    let types = admitted(schema);
    if types.is_empty() {
        return None;
    }
    if types.contains(&"string") {
        return Some(Value::String(text.to_string()));
    }
    let trimmed = text.trim();
    for kind in &types {
        let converted = match *kind {
            "null" => matches!(trimmed, "null" | "None" | "none" | "NULL").then_some(Value::Null),
            "boolean" => match trimmed {
                "true" | "True" | "TRUE" => Some(Value::Bool(true)),
                "false" | "False" | "FALSE" => Some(Value::Bool(false)),
                _ => None,
            },
            "integer" => integer(trimmed),
            "number" => integer(trimmed).or_else(|| {
                trimmed
                    .parse::<f64>()
                    .ok()
                    .filter(|f| f.is_finite())
                    .and_then(Number::from_f64)
                    .map(Value::Number)
            }),
            "object" => structured(trimmed).filter(Value::is_object),
            "array" => structured(trimmed).filter(Value::is_array),
            _ => None,
        };
        if converted.is_some() {
            return converted;
        }
    }
    Some(Value::String(text.to_string()))
}

fn integer(text: &str) -> Option<Value> {
    if let Ok(n) = text.parse::<i64>() {
        return Some(Value::Number(n.into()));
    }
    // `3.0` is an integer written as a float.
    let float = text.parse::<f64>().ok()?;
    (float.fract() == 0.0 && float.abs() < 9.0e15).then(|| Value::Number((float as i64).into()))
}

/// JSON first, then a Python literal (`{'key': 'value'}`, `[1, None]`).
fn structured(text: &str) -> Option<Value> {
    serde_json::from_str::<Value>(text)
        .ok()
        .or_else(|| python::literal(text))
}

/// A value that arrived typed (JSON, a Python literal) fitted to the schema:
/// a string where a non-string is wanted is converted; a number or boolean
/// where only a string is wanted becomes its text.
fn fit(value: Value, schema: &Value) -> Value {
    let types = admitted(schema);
    if types.is_empty() {
        return value;
    }
    let admits = |t: &str| types.contains(&t);
    match value {
        Value::String(text) if !admits("string") => {
            from_text(&text, schema).unwrap_or(Value::String(text))
        }
        Value::Number(n) if !admits("number") && !admits("integer") && admits("string") => {
            Value::String(n.to_string())
        }
        Value::Bool(b) if !admits("boolean") && admits("string") => Value::String(b.to_string()),
        Value::Number(n) if admits("integer") && !admits("number") => match n.as_f64() {
            Some(f) if n.is_f64() && f.fract() == 0.0 && f.abs() < 9.0e15 => {
                Value::Number((f as i64).into())
            }
            _ => Value::Number(n),
        },
        other => other,
    }
}

/// Every top-level argument of a call to `tool` fitted to its schema.
pub(super) fn fit_arguments(
    tool: &str,
    mut arguments: Map<String, Value>,
    schemas: &Schemas,
) -> Map<String, Value> {
    let Some(Value::Object(properties)) = schemas.get(tool).and_then(|s| s.get("properties"))
    else {
        return arguments;
    };
    for (key, value) in arguments.iter_mut() {
        if let Some(schema) = properties.get(key) {
            *value = fit(std::mem::take(value), schema);
        }
    }
    arguments
}

/// The one argument a plain-string `arguments` stands for: the tool's only
/// required property, or its only property.
pub(super) fn sole_property(schemas: &Schemas, tool: &str) -> Option<String> {
    let schema = schemas.get(tool)?;
    if let Some(Value::Array(required)) = schema.get("required")
        && let [Value::String(only)] = required.as_slice()
    {
        return Some(only.clone());
    }
    match schema.get("properties") {
        Some(Value::Object(props)) if props.len() == 1 => props.keys().next().cloned(),
        _ => None,
    }
}
