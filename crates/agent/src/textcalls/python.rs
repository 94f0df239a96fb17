//! Python call lists and literals, as Llama 3.2 and 4 write tool calls:
//! `[get_weather(city="Paris", days=3), other(x=[1, 2], y=None)]`.
//!
//! A small recursive-descent reader, not an evaluator: it knows keyword
//! arguments, strings (single, double and triple quoted, with the common
//! escapes and an `r` prefix), integers, floats, `True`, `False`, `None`
//! (and JSON's `true`, `false`, `null`), lists, tuples and dicts with
//! string keys. Anything else makes the whole list unreadable.

use serde_json::{Map, Number, Value};

/// Nesting deeper than this is refused rather than recursed into.
const DEPTH_MAX: usize = 64;

/// `[name(k=v, …), …]` (the brackets included) as calls in order; `None`
/// when it is not exactly such a list.
pub(super) fn call_list(text: &str) -> Option<Vec<(String, Map<String, Value>)>> {
    let mut reader = Reader::new(text);
    reader.ws();
    reader.eat(b'[')?;
    let mut calls = Vec::new();
    loop {
        reader.ws();
        if reader.eat(b']').is_some() {
            break;
        }
        if !calls.is_empty() {
            reader.eat(b',')?;
            reader.ws();
            if reader.eat(b']').is_some() {
                break;
            }
        }
        calls.push(reader.call()?);
    }
    reader.ws();
    (reader.at == text.len() && !calls.is_empty()).then_some(calls)
}

/// One Python (or JSON) literal, the whole of `text` apart from blanks at
/// its edges.
pub(super) fn literal(text: &str) -> Option<Value> {
    let mut reader = Reader::new(text);
    reader.ws();
    let value = reader.value(0)?;
    reader.ws();
    (reader.at == text.len()).then_some(value)
}

/// Whether `text` starts like a call: an identifier, blanks, `(`.
pub(super) fn starts_call(text: &[u8]) -> Option<bool> {
    let mut i = 0;
    match text.first() {
        None => return None,
        Some(b) if b.is_ascii_alphabetic() || *b == b'_' => {}
        Some(_) => return Some(false),
    }
    while i < text.len() && is_ident(text[i]) {
        i += 1;
    }
    while i < text.len() && matches!(text[i], b' ' | b'\t') {
        i += 1;
    }
    match text.get(i) {
        None => None,
        Some(b'(') => Some(true),
        Some(_) => Some(false),
    }
}

/// The name a possible call list begins with (for a list cut off).
pub(super) fn first_name(text: &str) -> Option<&str> {
    let rest = text.trim_start().strip_prefix('[')?.trim_start();
    let end = rest.bytes().position(|b| !is_ident(b))?;
    rest[end..]
        .trim_start()
        .starts_with('(')
        .then(|| &rest[..end])
}

fn is_ident(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'.'
}

struct Reader<'a> {
    text: &'a str,
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn new(text: &'a str) -> Self {
        Reader {
            text,
            bytes: text.as_bytes(),
            at: 0,
        }
    }

    fn ws(&mut self) {
        while self.at < self.bytes.len() && self.bytes[self.at].is_ascii_whitespace() {
            self.at += 1;
        }
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.at).copied()
    }

    fn eat(&mut self, b: u8) -> Option<()> {
        (self.peek() == Some(b)).then(|| self.at += 1)
    }

    fn ident(&mut self) -> Option<&'a str> {
        let start = self.at;
        match self.peek() {
            Some(b) if b.is_ascii_alphabetic() || b == b'_' => {}
            _ => return None,
        }
        while self.peek().is_some_and(is_ident) {
            self.at += 1;
        }
        Some(&self.text[start..self.at])
    }

    fn call(&mut self) -> Option<(String, Map<String, Value>)> {
        let name = self.ident()?.to_string();
        self.ws();
        self.eat(b'(')?;
        let mut args = Map::new();
        loop {
            self.ws();
            if self.eat(b')').is_some() {
                break;
            }
            if !args.is_empty() {
                self.eat(b',')?;
                self.ws();
                if self.eat(b')').is_some() {
                    break;
                }
            }
            let key = self.ident()?.to_string();
            self.ws();
            self.eat(b'=')?;
            self.ws();
            let value = self.value(0)?;
            args.insert(key, value);
        }
        Some((name, args))
    }

    fn value(&mut self, depth: usize) -> Option<Value> {
        if depth > DEPTH_MAX {
            return None;
        }
        match self.peek()? {
            b'"' | b'\'' => self.string().map(Value::String),
            b'r' | b'R' if matches!(self.bytes.get(self.at + 1), Some(b'"' | b'\'')) => {
                self.at += 1;
                self.raw_string().map(Value::String)
            }
            b'[' => self.sequence(b'[', b']', depth),
            b'(' => self.sequence(b'(', b')', depth),
            b'{' => self.dict(depth),
            b'-' | b'+' | b'0'..=b'9' | b'.' => self.number(),
            _ => match self.ident()? {
                "True" | "true" => Some(Value::Bool(true)),
                "False" | "false" => Some(Value::Bool(false)),
                "None" | "null" => Some(Value::Null),
                _ => None,
            },
        }
    }

    fn sequence(&mut self, open: u8, close: u8, depth: usize) -> Option<Value> {
        self.eat(open)?;
        let mut items = Vec::new();
        loop {
            self.ws();
            if self.eat(close).is_some() {
                break;
            }
            if !items.is_empty() {
                self.eat(b',')?;
                self.ws();
                if self.eat(close).is_some() {
                    break;
                }
            }
            items.push(self.value(depth + 1)?);
        }
        Some(Value::Array(items))
    }

    fn dict(&mut self, depth: usize) -> Option<Value> {
        self.eat(b'{')?;
        let mut map = Map::new();
        loop {
            self.ws();
            if self.eat(b'}').is_some() {
                break;
            }
            if !map.is_empty() {
                self.eat(b',')?;
                self.ws();
                if self.eat(b'}').is_some() {
                    break;
                }
            }
            let key = match self.value(depth + 1)? {
                Value::String(key) => key,
                Value::Number(n) => n.to_string(),
                _ => return None,
            };
            self.ws();
            self.eat(b':')?;
            self.ws();
            map.insert(key, self.value(depth + 1)?);
        }
        Some(Value::Object(map))
    }

    fn number(&mut self) -> Option<Value> {
        let start = self.at;
        while self
            .peek()
            .is_some_and(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'+' | b'.' | b'_'))
        {
            self.at += 1;
        }
        let text: String = self.text[start..self.at]
            .chars()
            .filter(|c| *c != '_')
            .collect();
        let text = text.strip_prefix('+').unwrap_or(&text);
        if let Ok(n) = text.parse::<i64>() {
            return Some(Value::Number(n.into()));
        }
        let float = text.parse::<f64>().ok()?;
        Number::from_f64(float).map(Value::Number)
    }

    fn string(&mut self) -> Option<String> {
        let quote = self.peek()?;
        let triple = self.bytes[self.at..].starts_with(&[quote; 3]);
        self.at += if triple { 3 } else { 1 };
        let mut out = String::new();
        loop {
            let b = self.peek()?;
            if b == quote && (!triple || self.bytes[self.at..].starts_with(&[quote; 3])) {
                self.at += if triple { 3 } else { 1 };
                return Some(out);
            }
            if b == b'\n' && !triple {
                return None;
            }
            if b == b'\\' {
                self.at += 1;
                let e = self.peek()?;
                self.at += 1;
                match e {
                    b'n' => out.push('\n'),
                    b't' => out.push('\t'),
                    b'r' => out.push('\r'),
                    b'0' => out.push('\0'),
                    b'\\' | b'\'' | b'"' => out.push(e as char),
                    b'\n' => {}
                    b'u' | b'x' => {
                        let len = if e == b'u' { 4 } else { 2 };
                        let hex = self.text.get(self.at..self.at + len)?;
                        let code = u32::from_str_radix(hex, 16).ok()?;
                        out.push(char::from_u32(code).unwrap_or('\u{fffd}'));
                        self.at += len;
                    }
                    _ => {
                        out.push('\\');
                        self.at -= 1;
                    }
                }
                continue;
            }
            let ch = self.text[self.at..].chars().next()?;
            out.push(ch);
            self.at += ch.len_utf8();
        }
    }

    fn raw_string(&mut self) -> Option<String> {
        let quote = self.peek()?;
        self.at += 1;
        let start = self.at;
        while self.peek()? != quote {
            if self.peek()? == b'\\' {
                self.at += 1;
            }
            self.at += 1;
        }
        let out = self.text.get(start..self.at)?.to_string();
        self.at += 1;
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_calls_and_literals() {
        let calls = call_list(
            "[get_weather(city='Paris', days=3), other(x=[1, 2.5, -3], y={'a': None}, z=True, w=\"it's\")]",
        )
        .expect("a call list");
        assert_eq!(calls[0].0, "get_weather");
        assert_eq!(
            Value::Object(calls[0].1.clone()),
            json!({"city": "Paris", "days": 3})
        );
        assert_eq!(
            Value::Object(calls[1].1.clone()),
            json!({"x": [1, 2.5, -3], "y": {"a": null}, "z": true, "w": "it's"})
        );
        assert_eq!(call_list("[f()]").expect("empty call").len(), 1);
        assert!(call_list("[f(x)]").is_none());
        assert!(call_list("[f(x=1) g(y=2)]").is_none());
        assert!(call_list("[]").is_none());
        assert_eq!(literal(" ('a', 1) "), Some(json!(["a", 1])));
        assert_eq!(literal("'''two\nlines'''"), Some(json!("two\nlines")));
        assert_eq!(literal("r'C:\\x'"), Some(json!("C:\\x")));
        assert_eq!(literal("'\\u00e9\\n'"), Some(json!("é\n")));
        assert_eq!(literal("nope"), None);
        assert_eq!(first_name("[search(q='x"), Some("search"));
        assert_eq!(starts_call(b"abc ("), Some(true));
        assert_eq!(starts_call(b"abc]"), Some(false));
        assert_eq!(starts_call(b"abc"), None);
    }
}
