//! Argument values typed by the offered tool's JSON schema, as inference
//! servers do for text calls: a model writing `<parameter=limit>5</parameter>`
//! or `days="3"` means the integer when the schema says integer. A value
//! that does not convert is left as it was; the registry's validation then
//! names the problem.

use std::collections::HashMap;

use serde_json::{Map, Number, Value};

use super::python;

/// The offered tools' names and parameter schemas (`{"type": "object",
/// "properties": …}`), read once: each argument's admitted types and each
/// tool's sole property are what typing a call needs, so a call costs a
/// lookup or two rather than a walk of its schema. Built once for a set of
/// offered tools and shared (`Arc`) by every parser reading replies to it.
#[derive(Debug, Default, Clone)]
pub struct Schemas {
    /// The known tools' names, in the order they were given.
    names: Vec<String>,
    tools: HashMap<String, Tool>,
}

#[derive(Debug, Default, Clone)]
struct Tool {
    /// Absent when `properties` is not an object.
    properties: Option<HashMap<String, Types>>,
    /// The one argument a plain-string `arguments` stands for.
    sole: Option<String>,
    /// Required properties.
    required: Vec<String>,
    /// `additionalProperties: false`: only the listed properties may be given.
    closed: bool,
}

/// The types one argument's schema admits, in its order (see `types`).
/// Empty when it says nothing.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct Types(Vec<Kind>);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    String,
    Null,
    Boolean,
    Integer,
    Number,
    Object,
    Array,
    /// A type name of no use here (it still counts as a type given).
    Other,
}

impl Kind {
    fn of(name: &str) -> Kind {
        match name {
            "string" => Kind::String,
            "null" => Kind::Null,
            "boolean" => Kind::Boolean,
            "integer" => Kind::Integer,
            "number" => Kind::Number,
            "object" => Kind::Object,
            "array" => Kind::Array,
            _ => Kind::Other,
        }
    }
}

impl Kind {
    /// Whether `value` is of this type (`Other` holds anything).
    fn holds(self, value: &Value) -> bool {
        match self {
            Kind::String => value.is_string(),
            Kind::Null => value.is_null(),
            Kind::Boolean => value.is_boolean(),
            Kind::Integer => value.is_i64() || value.is_u64(),
            Kind::Number => value.is_number(),
            Kind::Object => value.is_object(),
            Kind::Array => value.is_array(),
            Kind::Other => true,
        }
    }
}

impl Types {
    fn admits(&self, kind: Kind) -> bool {
        self.0.contains(&kind)
    }
}

impl Schemas {
    /// The tools named, without schemas: only their names are known.
    pub fn named(names: Vec<String>) -> Schemas {
        Schemas {
            names,
            tools: HashMap::new(),
        }
    }

    /// The tools' parameter schemas by name (see `insert`).
    pub fn of<V: std::borrow::Borrow<Value>>(tools: impl IntoIterator<Item = (String, V)>) -> Self {
        let mut schemas = Schemas::default();
        for (name, schema) in tools {
            schemas.insert(name, schema.borrow());
        }
        schemas
    }

    /// Adds `other`'s tools; its schema wins for a name both know.
    pub(super) fn merge(&mut self, other: &Schemas) {
        for name in &other.names {
            if !self.names.contains(name) {
                self.names.push(name.clone());
            }
            if let Some(tool) = other.tools.get(name) {
                self.tools.insert(name.clone(), tool.clone());
            }
        }
    }

    /// The names of the known tools.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// The parameter schema of `tool`, whose name becomes known; a later
    /// one for the same name wins.
    pub fn insert(&mut self, tool: String, schema: &Value) {
        if !self.names.contains(&tool) {
            self.names.push(tool.clone());
        }
        let properties = match schema.get("properties") {
            Some(Value::Object(props)) => Some(
                props
                    .iter()
                    .map(|(key, prop)| (key.clone(), admitted(prop)))
                    .collect(),
            ),
            _ => None,
        };
        let sole = sole_property(schema);
        let required = match schema.get("required") {
            Some(Value::Array(keys)) => keys
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect(),
            _ => Vec::new(),
        };
        let closed = schema.get("additionalProperties") == Some(&Value::Bool(false));
        self.tools.insert(
            tool,
            Tool {
                properties,
                sole,
                required,
                closed,
            },
        );
    }
}

/// Whether `tool`'s schema lists `key` among its parameters; `None` when
/// it lists none (nothing is known of the tool's parameters).
pub(super) fn has_property(schemas: &Schemas, tool: &str, key: &str) -> Option<bool> {
    let properties = schemas.tools.get(tool)?.properties.as_ref()?;
    Some(properties.contains_key(key))
}

/// Whether `tool` may take an argument `key`: its schema lists it, lists
/// no properties, or does not forbid others.
pub(super) fn may_take(schemas: &Schemas, tool: &str, key: &str) -> bool {
    match schemas.tools.get(tool) {
        Some(t) => match &t.properties {
            Some(properties) => properties.contains_key(key) || !t.closed,
            None => true,
        },
        None => true,
    }
}

/// Whether `arguments` of a call to `tool` agree with its schema: an
/// object holding every required property, no property the schema forbids,
/// and each listed one of a type it admits. A tool without a schema takes
/// any object.
pub(super) fn validates(schemas: &Schemas, tool: &str, arguments: &Value) -> bool {
    let Value::Object(map) = arguments else {
        return false;
    };
    let Some(t) = schemas.tools.get(tool) else {
        return true;
    };
    if t.required.iter().any(|key| !map.contains_key(key)) {
        return false;
    }
    let Some(properties) = &t.properties else {
        return true;
    };
    map.iter().all(|(key, value)| match properties.get(key) {
        Some(types) => types.0.is_empty() || types.0.iter().any(|kind| kind.holds(value)),
        None => !t.closed,
    })
}

/// The admitted types of one argument of `tool`, if its schema has it.
pub(super) fn property<'a>(schemas: &'a Schemas, tool: &str, key: &str) -> Option<&'a Types> {
    schemas.tools.get(tool)?.properties.as_ref()?.get(key)
}

/// The types a schema admits: `type` (a name or a list), `nullable`, and
/// the members of `anyOf` / `oneOf`. Empty when it says nothing.
fn types(schema: &Value, out: &mut Vec<Kind>, depth: usize) {
    if depth > 8 {
        return;
    }
    match schema.get("type") {
        Some(Value::String(name)) => out.push(Kind::of(name)),
        Some(Value::Array(names)) => {
            out.extend(names.iter().filter_map(Value::as_str).map(Kind::of));
        }
        _ => {}
    }
    if schema.get("nullable") == Some(&Value::Bool(true)) {
        out.push(Kind::Null);
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(Value::Array(members)) = schema.get(key) {
            for member in members {
                types(member, out, depth + 1);
            }
        }
    }
}

fn admitted(schema: &Value) -> Types {
    let mut out = Vec::new();
    types(schema, &mut out, 0);
    Types(out)
}

/// A value written as text (a `<parameter>` body, a string argument) as the
/// schema's type. `None` when the schema gives no type to go by.
pub(super) fn from_text(text: &str, types: &Types) -> Option<Value> {
    if types.0.is_empty() {
        return None;
    }
    let trimmed = text.trim();
    // A nullable argument written as a null is the null, even where a
    // string would also do.
    if types.admits(Kind::Null) && is_null(trimmed) {
        return Some(Value::Null);
    }
    if types.admits(Kind::String) {
        return Some(Value::String(text.to_string()));
    }
    for kind in &types.0 {
        let converted = match kind {
            Kind::Null => is_null(trimmed).then_some(Value::Null),
            Kind::Boolean => match trimmed {
                "true" | "True" | "TRUE" => Some(Value::Bool(true)),
                "false" | "False" | "FALSE" => Some(Value::Bool(false)),
                _ => None,
            },
            Kind::Integer => integer(trimmed),
            Kind::Number => integer(trimmed).or_else(|| {
                trimmed
                    .parse::<f64>()
                    .ok()
                    .filter(|f| f.is_finite())
                    .and_then(Number::from_f64)
                    .map(Value::Number)
            }),
            Kind::Object => structured(trimmed).filter(Value::is_object),
            Kind::Array => structured(trimmed).filter(Value::is_array),
            Kind::String | Kind::Other => None,
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

fn is_null(text: &str) -> bool {
    matches!(text, "null" | "None" | "none" | "NULL")
}

/// JSON first, then a Python literal (`{'key': 'value'}`, `[1, None]`); a
/// JSON string is read once more, as models write an object as the JSON
/// encoding of its text (`"{'a': 1}"`).
fn structured(text: &str) -> Option<Value> {
    match serde_json::from_str::<Value>(text) {
        Ok(Value::String(inner)) => {
            let inner = inner.trim();
            serde_json::from_str::<Value>(inner)
                .ok()
                .filter(|v| !v.is_string())
                .or_else(|| python::literal(inner).filter(|v| !v.is_string()))
        }
        Ok(value) => Some(value),
        Err(_) => python::literal(text),
    }
}

/// A value that arrived typed (JSON, a Python literal) fitted to the schema:
/// a string where a non-string is wanted is converted; a number or boolean
/// where only a string is wanted becomes its text.
fn fit(value: Value, types: &Types) -> Value {
    if types.0.is_empty() {
        return value;
    }
    let admits = |kind: Kind| types.admits(kind);
    match value {
        Value::String(text) if !admits(Kind::String) => {
            from_text(&text, types).unwrap_or(Value::String(text))
        }
        Value::Number(n)
            if !admits(Kind::Number) && !admits(Kind::Integer) && admits(Kind::String) =>
        {
            Value::String(n.to_string())
        }
        Value::Bool(b) if !admits(Kind::Boolean) && admits(Kind::String) => {
            Value::String(b.to_string())
        }
        Value::Number(n) if admits(Kind::Integer) && !admits(Kind::Number) => match n.as_f64() {
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
    let Some(properties) = schemas.tools.get(tool).and_then(|t| t.properties.as_ref()) else {
        return arguments;
    };
    for (key, value) in arguments.iter_mut() {
        if let Some(types) = properties.get(key) {
            *value = fit(std::mem::take(value), types);
        }
    }
    arguments
}

/// The one argument a plain-string `arguments` stands for: the tool's only
/// required property, or its only property.
pub(super) fn sole(schemas: &Schemas, tool: &str) -> Option<String> {
    schemas.tools.get(tool)?.sole.clone()
}

fn sole_property(schema: &Value) -> Option<String> {
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
