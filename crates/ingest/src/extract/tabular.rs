//! CSV, TSV and JSON: typed rows for SQL, and a line-per-row text rendering for search.

use chrono::{DateTime, NaiveDate};
use serde_json::{Map, Number, Value};

use crate::IngestError;
use crate::metadata::{self, ColumnInfo, ColumnKind, DocMetadata, Extracted, ExtractedTable};

/// Delimiters tried when sniffing, in order of preference on a tie.
const DELIMITERS: &[u8] = b",;\t|";

/// Records read to choose a delimiter; enough to see a consistent shape, cheap on big files.
const SNIFF_RECORDS: usize = 50;

pub(super) fn extract_csv(
    file_name: &str,
    bytes: &[u8],
    preferred: Option<u8>,
) -> Result<Extracted, IngestError> {
    let source = super::text::decode(file_name, bytes)?;
    let delimiter = sniff_delimiter(&source, preferred);
    let mut reader = csv::ReaderBuilder::new()
        .delimiter(delimiter)
        .has_headers(false)
        .flexible(false)
        .from_reader(source.as_bytes());
    let mut records = reader.records();
    let header = match records.next() {
        None => Vec::new(),
        Some(Ok(record)) => record.iter().map(str::to_string).collect(),
        Some(Err(e)) => return Err(csv_error(file_name, &e)),
    };
    let names = column_names(&header);
    let mut cells: Vec<Vec<String>> = Vec::new();
    for record in records {
        let record = record.map_err(|e| csv_error(file_name, &e))?;
        // A trailing line of only separators is an artefact of spreadsheet exports, not data.
        if record.iter().all(|c| c.trim().is_empty()) {
            continue;
        }
        cells.push(record.iter().map(str::to_string).collect());
    }
    let kinds: Vec<ColumnKind> = (0..names.len())
        .map(|i| infer_kind(cells.iter().map(|row| row[i].as_str())))
        .collect();
    let columns: Vec<ColumnInfo> = names
        .iter()
        .zip(&kinds)
        .map(|(name, &kind)| ColumnInfo {
            name: name.clone(),
            kind,
        })
        .collect();
    let rows = cells
        .iter()
        .map(|row| {
            names
                .iter()
                .zip(&kinds)
                .zip(row)
                .map(|((n, &k), v)| (n.clone(), typed_value(v, k)))
                .collect()
        })
        .collect();
    let table = ExtractedTable {
        name: super::stem_of(file_name),
        columns,
        rows,
    };
    let text = render_table(&table);
    let mime = if delimiter == b'\t' {
        "text/tab-separated-values"
    } else {
        "text/csv"
    };
    let format = if delimiter == b'\t' { "tsv" } else { "csv" };
    Ok(finish(mime, format, text, vec![table]))
}

fn finish(mime: &str, format: &str, text: String, tables: Vec<ExtractedTable>) -> Extracted {
    let meta = DocMetadata {
        format: format.to_string(),
        ..DocMetadata::default()
    };
    let metadata = metadata::finish(meta, &text, &tables);
    Extracted {
        mime: mime.to_string(),
        text,
        metadata,
        tables,
    }
}

fn csv_error(file_name: &str, error: &csv::Error) -> IngestError {
    let reason = match error.kind() {
        csv::ErrorKind::UnequalLengths {
            pos,
            expected_len,
            len,
        } => {
            let line = pos.as_ref().map_or(0, csv::Position::line);
            format!("ragged csv: line {line} has {len} fields where the header has {expected_len}")
        }
        _ => format!("invalid csv: {error}"),
    };
    IngestError::corrupt(file_name, reason)
}

/// The delimiter under which the first records agree on a field count above one; the most
/// fields wins among those that agree, so a comma inside a semicolon file does not fool it.
fn sniff_delimiter(source: &str, preferred: Option<u8>) -> u8 {
    let mut best: Option<(u8, usize)> = None;
    let candidates = preferred
        .into_iter()
        .chain(DELIMITERS.iter().copied().filter(|&d| Some(d) != preferred));
    for delimiter in candidates {
        let mut reader = csv::ReaderBuilder::new()
            .delimiter(delimiter)
            .has_headers(false)
            .flexible(true)
            .from_reader(source.as_bytes());
        let mut counts = reader
            .records()
            .take(SNIFF_RECORDS)
            .map(|r| r.map(|r| r.len()));
        let Some(Ok(first)) = counts.next() else {
            continue;
        };
        let consistent = counts.all(|c| c.is_ok_and(|c| c == first));
        if consistent && first > 1 && best.is_none_or(|(_, fields)| first > fields) {
            best = Some((delimiter, first));
        }
    }
    best.map_or(preferred.unwrap_or(b','), |(d, _)| d)
}

/// Header cells as column names: blank ones get a positional name and repeats a suffix, since
/// rows become JSON objects and keys must be unique.
fn column_names(header: &[String]) -> Vec<String> {
    let mut names: Vec<String> = Vec::with_capacity(header.len());
    for (i, raw) in header.iter().enumerate() {
        let base = metadata::collapse_whitespace(raw);
        let base = if base.is_empty() {
            format!("column_{}", i + 1)
        } else {
            base
        };
        let mut name = base.clone();
        let mut n = 2;
        while names.contains(&name) {
            name = format!("{base}_{n}");
            n += 1;
        }
        names.push(name);
    }
    names
}

fn infer_kind<'a>(values: impl Iterator<Item = &'a str>) -> ColumnKind {
    let mut kind: Option<ColumnKind> = None;
    for value in values.map(str::trim).filter(|v| !v.is_empty()) {
        let this = kind_of(value);
        kind = Some(match (kind, this) {
            (None, k) => k,
            (Some(a), b) if a == b => a,
            (Some(ColumnKind::Integer), ColumnKind::Number)
            | (Some(ColumnKind::Number), ColumnKind::Integer) => ColumnKind::Number,
            _ => return ColumnKind::Text,
        });
    }
    kind.unwrap_or(ColumnKind::Text)
}

fn kind_of(value: &str) -> ColumnKind {
    if parse_integer(value).is_some() {
        ColumnKind::Integer
    } else if parse_number(value).is_some() {
        ColumnKind::Number
    } else if parse_bool(value).is_some() {
        ColumnKind::Boolean
    } else if is_date(value) {
        ColumnKind::Date
    } else {
        ColumnKind::Text
    }
}

/// Leading zeros mark identifiers (postal codes, part numbers) whose zeros matter, so "007"
/// stays text.
fn parse_integer(value: &str) -> Option<i64> {
    let digits = value.strip_prefix(['-', '+']).unwrap_or(value);
    if digits.is_empty()
        || !digits.bytes().all(|b| b.is_ascii_digit())
        || (digits.len() > 1 && digits.starts_with('0'))
    {
        return None;
    }
    value.parse().ok()
}

fn parse_number(value: &str) -> Option<f64> {
    let digits = value.strip_prefix(['-', '+']).unwrap_or(value);
    let plain = digits
        .bytes()
        .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'-' | b'+'));
    let leading_zero = digits.len() > 1 && digits.starts_with('0') && !digits.starts_with("0.");
    if !plain || leading_zero || !digits.starts_with(|c: char| c.is_ascii_digit() || c == '.') {
        return None;
    }
    value.parse::<f64>().ok().filter(|f| f.is_finite())
}

fn parse_bool(value: &str) -> Option<bool> {
    match value.to_ascii_lowercase().as_str() {
        "true" => Some(true),
        "false" => Some(false),
        _ => None,
    }
}

fn is_date(value: &str) -> bool {
    NaiveDate::parse_from_str(value, "%Y-%m-%d").is_ok()
        || DateTime::parse_from_rfc3339(value).is_ok()
}

fn typed_value(raw: &str, kind: ColumnKind) -> Value {
    let value = raw.trim();
    if value.is_empty() {
        return Value::Null;
    }
    match kind {
        ColumnKind::Integer => parse_integer(value).map(Value::from),
        ColumnKind::Number => parse_number(value)
            .and_then(Number::from_f64)
            .map(Value::Number),
        ColumnKind::Boolean => parse_bool(value).map(Value::Bool),
        ColumnKind::Date | ColumnKind::Text => None,
    }
    .unwrap_or_else(|| Value::String(raw.to_string()))
}

/// A header line naming the columns, then one `column: value | …` line per row (empty cells
/// left out), so a keyword or semantic hit on one line carries its column names with it.
fn render_table(table: &ExtractedTable) -> String {
    let mut text = table
        .columns
        .iter()
        .map(|c| c.name.as_str())
        .collect::<Vec<_>>()
        .join(" | ");
    for row in &table.rows {
        let line = table
            .columns
            .iter()
            .filter_map(|c| {
                let value = row.get(&c.name)?;
                let shown = match value {
                    Value::Null => return None,
                    Value::String(s) => metadata::collapse_whitespace(s),
                    other => other.to_string(),
                };
                (!shown.is_empty()).then(|| format!("{}: {shown}", c.name))
            })
            .collect::<Vec<_>>()
            .join(" | ");
        text.push('\n');
        text.push_str(&line);
    }
    text
}

pub(super) fn extract_json(file_name: &str, bytes: &[u8]) -> Result<Extracted, IngestError> {
    let source = super::text::decode(file_name, bytes)?;
    if source.trim().is_empty() {
        return Ok(finish(
            "application/json",
            "json",
            String::new(),
            Vec::new(),
        ));
    }
    let mut value: Value = serde_json::from_str(&source)
        .map_err(|e| IngestError::corrupt(file_name, format!("invalid json: {e}")))?;
    strip_nul(&mut value);
    let text = serde_json::to_string_pretty(&value).map_err(|e| {
        IngestError::Internal(format!("json of {file_name:?} does not serialise: {e}"))
    })?;
    let tables = json_records(&value)
        .map(|rows| vec![json_table(super::stem_of(file_name), rows)])
        .unwrap_or_default();
    Ok(finish("application/json", "json", text, tables))
}

/// PostgreSQL rejects U+0000 in text and JSONB alike.
fn strip_nul(value: &mut Value) {
    match value {
        Value::String(s) if s.contains('\0') => s.retain(|c| c != '\0'),
        Value::Array(items) => items.iter_mut().for_each(strip_nul),
        Value::Object(map) => {
            let keys: Vec<String> = map.keys().filter(|k| k.contains('\0')).cloned().collect();
            for key in keys {
                if let Some(v) = map.remove(&key) {
                    map.insert(key.replace('\0', ""), v);
                }
            }
            map.values_mut().for_each(strip_nul);
        }
        _ => {}
    }
}

/// The rows of a JSON document that is a table: an array of objects, or an object whose only
/// array-of-objects member holds them (`{"count": 2, "items": [{…}, {…}]}`).
fn json_records(value: &Value) -> Option<&Vec<Value>> {
    let is_records = |v: &Value| matches!(v, Value::Array(items) if !items.is_empty() && items.iter().all(Value::is_object));
    match value {
        Value::Array(items) if is_records(value) => Some(items),
        Value::Object(map) => {
            let mut arrays = map.values().filter(|v| is_records(v));
            let only = arrays.next()?;
            if arrays.next().is_some() {
                return None;
            }
            only.as_array()
        }
        _ => None,
    }
}

fn json_table(name: String, records: &[Value]) -> ExtractedTable {
    let mut names: Vec<String> = Vec::new();
    for record in records.iter().filter_map(Value::as_object) {
        for key in record.keys() {
            if !names.contains(key) {
                names.push(key.clone());
            }
        }
    }
    let columns = names
        .iter()
        .map(|name| {
            let values = records
                .iter()
                .filter_map(|r| r.get(name))
                .filter(|v| !v.is_null());
            ColumnInfo {
                name: name.clone(),
                kind: json_kind(values),
            }
        })
        .collect();
    let rows = records
        .iter()
        .filter_map(Value::as_object)
        .cloned()
        .collect::<Vec<Map<String, Value>>>();
    ExtractedTable {
        name,
        columns,
        rows,
    }
}

fn json_kind<'a>(values: impl Iterator<Item = &'a Value>) -> ColumnKind {
    let mut kind: Option<ColumnKind> = None;
    for value in values {
        let this = match value {
            Value::Number(n) if n.is_i64() || n.is_u64() => ColumnKind::Integer,
            Value::Number(_) => ColumnKind::Number,
            Value::Bool(_) => ColumnKind::Boolean,
            Value::String(s) if is_date(s.trim()) => ColumnKind::Date,
            _ => ColumnKind::Text,
        };
        kind = Some(match (kind, this) {
            (None, k) => k,
            (Some(a), b) if a == b => a,
            (Some(ColumnKind::Integer), ColumnKind::Number)
            | (Some(ColumnKind::Number), ColumnKind::Integer) => ColumnKind::Number,
            _ => return ColumnKind::Text,
        });
    }
    kind.unwrap_or(ColumnKind::Text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cell_kinds() {
        let check = |value: &str, expected: ColumnKind| {
            assert_eq!(kind_of(value), expected, "value {value:?}")
        };
        check("42", ColumnKind::Integer);
        check("-7", ColumnKind::Integer);
        check("007", ColumnKind::Text);
        check("0", ColumnKind::Integer);
        check("3.14", ColumnKind::Number);
        check("0.5", ColumnKind::Number);
        check("1e3", ColumnKind::Number);
        check("NaN", ColumnKind::Text);
        check("inf", ColumnKind::Text);
        check("TRUE", ColumnKind::Boolean);
        check("2024-02-29", ColumnKind::Date);
        check("2024-02-30", ColumnKind::Text);
        check("2024-02-01T10:00:00Z", ColumnKind::Date);
        check("1,5", ColumnKind::Text);
    }

    #[test]
    fn delimiters() {
        let check = |source: &str, expected: u8| {
            assert_eq!(
                sniff_delimiter(source, None) as char,
                expected as char,
                "source {source:?}"
            )
        };
        check("a,b,c\n1,2,3\n", b',');
        check("a;b;c\n1,5;2;3\n", b';');
        check("a\tb\n1\t2\n", b'\t');
        check("a|b\n1|2\n", b'|');
        check("single\nvalue\n", b',');
    }
}
