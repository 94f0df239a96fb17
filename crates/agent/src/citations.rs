//! Citations: the passages a run's tools returned are numbered as the
//! model reads them (`"cite": 3` on each search hit, grep line and read
//! range), the system prompt asks the model to cite with those numbers in
//! square brackets, and the answer's text is watched for them as it
//! streams. Each source's first citation becomes a `citation` event naming
//! the document, the path, the character span and the quoted text, so a
//! client can number its sources and open the span.
//!
//! The older form `[path, chars START-END]` (what earlier prompts asked
//! for) is understood too, matched against the passages the run has seen.
//! A number or a path the run's tools never returned cites nothing, and
//! nothing inside a fenced code block is read as a citation.

use std::collections::{HashMap, HashSet};

use data_plane_registry::ToolResult;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The longest quote a citation carries (characters); a longer passage (a
/// read range) is cut at a word boundary with an ellipsis.
const QUOTE_CHARS: usize = 1000;

/// A bracket left open this long is not a citation.
const LONGEST_MARKER: usize = 200;

/// One cited source.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Citation {
    /// The number the model cites it by (1, 2, 3, … in the order the
    /// passages were returned).
    pub index: usize,
    pub document_id: String,
    pub path: String,
    /// The section heading of a search hit, the document's title of a
    /// read range, when there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Unicode code points into the document, end exclusive (what
    /// read_document's `start` takes).
    pub char_start: u64,
    pub char_end: u64,
    /// The passage's text (cut when long: see `truncated`).
    pub text: String,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub truncated: bool,
    /// The tool and the call that returned it.
    pub tool: String,
    pub call_id: String,
}

/// A run's numbered passages and what its answer has cited so far.
#[derive(Debug, Default)]
pub(crate) struct Citations {
    /// Numbers up to this one were given in earlier turns of the
    /// conversation; this run's start after it, so that an old `[2]` in
    /// the history never names a new passage.
    offset: usize,
    sources: Vec<Citation>,
    /// (document, start, end) → index, so the same passage keeps its number.
    known: HashMap<(String, u64, u64), usize>,
    cited: HashSet<usize>,
    /// Text after an unclosed `[`, waiting for the rest of the marker.
    pending: String,
    /// Inside a fenced code block (backticks that may start a fence split
    /// across deltas wait in `pending`).
    in_fence: bool,
}

impl Citations {
    /// Citations for a run whose conversation so far holds `history` (its
    /// messages as JSON): numbering starts after the highest number cited
    /// or given there.
    pub fn after_history(history: &str) -> Citations {
        Citations {
            offset: highest_number(history),
            ..Citations::default()
        }
    }

    /// Numbers the passages in `result` and writes each one's number into
    /// the data the model will read (`cite`). Results of other tools, and
    /// failures, are left as they are.
    pub fn number(&mut self, result: &mut ToolResult) {
        if !result.success {
            return;
        }
        let tool = result.tool.clone();
        let call_id = result.call_id.clone();
        let Some(data) = result.data.as_mut() else {
            return;
        };
        match tool.as_str() {
            "search_documents" | "grep_documents" => {
                let Some(hits) = data.get_mut("results").and_then(Value::as_array_mut) else {
                    return;
                };
                for hit in hits {
                    if let Some(source) = passage(&tool, hit) {
                        let index = self.add(source, &tool, &call_id);
                        hit["cite"] = Value::from(index);
                    }
                }
            }
            "read_document" => {
                if let Some(source) = passage(&tool, data) {
                    let index = self.add(source, &tool, &call_id);
                    data["cite"] = Value::from(index);
                }
            }
            _ => {}
        }
    }

    fn add(&mut self, mut source: Citation, tool: &str, call_id: &str) -> usize {
        let key = (
            source.document_id.clone(),
            source.char_start,
            source.char_end,
        );
        if let Some(&index) = self.known.get(&key) {
            return index;
        }
        let index = self.offset + self.sources.len() + 1;
        source.index = index;
        source.tool = tool.to_string();
        source.call_id = call_id.to_string();
        self.sources.push(source);
        self.known.insert(key, index);
        index
    }

    /// Reads the next piece of the answer; the sources it cites for the
    /// first time.
    pub fn scan(&mut self, text: &str) -> Vec<Citation> {
        if self.sources.is_empty() {
            return Vec::new();
        }
        let mut found = Vec::new();
        let mut buffer = std::mem::take(&mut self.pending);
        buffer.push_str(text);
        let mut rest = buffer.as_str();
        loop {
            if self.in_fence {
                match rest.find("```") {
                    Some(at) => {
                        self.in_fence = false;
                        rest = &rest[at + 3..];
                        continue;
                    }
                    None => {
                        // Keep backticks that may open the closing fence.
                        let tail = rest.len() - rest.trim_end_matches('`').len();
                        self.pending = rest[rest.len() - tail.min(2)..].to_string();
                        return found;
                    }
                }
            }
            let fence = rest.find("```");
            let open = rest.find('[');
            match (fence, open) {
                (Some(f), o) if o.is_none_or(|o| f < o) => {
                    self.in_fence = true;
                    rest = &rest[f + 3..];
                }
                (_, Some(o)) => {
                    let after = &rest[o + 1..];
                    // A bracket never closes inside a code fence.
                    let fence = after.find("```");
                    let close = after.find(']').filter(|c| fence.is_none_or(|f| *c < f));
                    match close {
                        Some(close) => {
                            let inner = &after[..close];
                            self.cite(inner, &mut found);
                            rest = &after[close + 1..];
                        }
                        None if fence.is_some() => rest = after,
                        None if after.len() < LONGEST_MARKER => {
                            self.pending = rest[o..].to_string();
                            return found;
                        }
                        None => rest = after,
                    }
                }
                (None, None) => {
                    // Backticks at the very end may start a fence.
                    let tail = rest.len() - rest.trim_end_matches('`').len();
                    self.pending = rest[rest.len() - tail.min(2)..].to_string();
                    return found;
                }
                (Some(_), None) => unreachable!("matched by the first arm"),
            }
        }
    }

    /// The step's text ended: an open bracket will not close.
    pub fn end_of_text(&mut self) {
        self.pending.clear();
    }

    /// What a bracket holds: numbers (`3`, `1, 4`, `^2`), or a path with a
    /// span (`guides/vacuum.md, chars 120-480`).
    fn cite(&mut self, inner: &str, found: &mut Vec<Citation>) {
        let inner = inner.trim();
        let numbers: Option<Vec<usize>> = inner
            .split([',', ';'])
            .map(|part| {
                let part = part.trim().trim_start_matches('^').trim();
                let part = part.strip_prefix('#').unwrap_or(part);
                part.parse::<usize>().ok()
            })
            .collect();
        let indexes = match numbers {
            Some(numbers) => numbers,
            None => self.by_path(inner).into_iter().collect(),
        };
        for index in indexes {
            let Some(at) = index.checked_sub(self.offset + 1) else {
                continue;
            };
            if at >= self.sources.len() || !self.cited.insert(index) {
                continue;
            }
            found.push(self.sources[at].clone());
        }
    }

    /// `path, chars START-END` (also `chars START–END`, `char START-END`):
    /// the source of that path whose span holds or overlaps it the most.
    fn by_path(&self, inner: &str) -> Option<usize> {
        let (path, span) = inner.rsplit_once(',')?;
        let path = path.trim().trim_matches('`');
        let span = span.trim();
        let span = span
            .strip_prefix("chars")
            .or_else(|| span.strip_prefix("char"))?
            .trim();
        let (start, end) = span.split_once(['-', '–'])?;
        let start: u64 = start.trim().parse().ok()?;
        let end: u64 = end.trim().parse().ok()?;
        self.sources
            .iter()
            .filter(|s| s.path == path)
            .map(|s| {
                let overlap = s.char_end.min(end).saturating_sub(s.char_start.max(start));
                (overlap, s.index)
            })
            .filter(|(overlap, _)| *overlap > 0)
            .max_by_key(|(overlap, index)| (*overlap, std::cmp::Reverse(*index)))
            .map(|(_, index)| index)
    }
}

/// The highest citation number in `text`: a `[N]` marker (or a list of
/// numbers in brackets) or a `cite` field (`"cite":N`, also escaped inside
/// a JSON string); 0 when there is none.
fn highest_number(text: &str) -> usize {
    let mut highest = 0;
    for (at, _) in text.match_indices('[') {
        let inner = &text[at + 1..];
        let Some(close) = inner.find(']').filter(|c| *c <= 40) else {
            continue;
        };
        let numbers: Option<Vec<usize>> = inner[..close]
            .split([',', ';'])
            .map(|p| p.trim().trim_start_matches('^').trim().parse().ok())
            .collect();
        if let Some(numbers) = numbers {
            highest = numbers.into_iter().fold(highest, usize::max);
        }
    }
    for (at, _) in text.match_indices("cite") {
        let rest = text[at + 4..].trim_start_matches(['\\', '"', ':', ' ']);
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        if let Ok(n) = digits.parse::<usize>() {
            highest = highest.max(n);
        }
    }
    highest
}

/// The passage a search hit, a grep line or a read range stands for.
fn passage(tool: &str, value: &Value) -> Option<Citation> {
    let document_id = value.get("document_id")?.as_str()?.to_string();
    let path = value.get("path")?.as_str()?.to_string();
    let text = value.get("text")?.as_str()?;
    let (start, end, title) = match tool {
        "search_documents" => (
            value.get("char_start")?.as_u64()?,
            value.get("char_end")?.as_u64()?,
            value.get("heading").and_then(Value::as_str),
        ),
        "grep_documents" => {
            let start = value.get("text_start")?.as_u64()?;
            (start, start + text.chars().count() as u64, None)
        }
        _ => (
            value.get("start")?.as_u64()?,
            value.get("end")?.as_u64()?,
            value.get("title").and_then(Value::as_str),
        ),
    };
    let (text, truncated) = quote(text);
    Some(Citation {
        index: 0,
        document_id,
        path,
        title: title.filter(|t| !t.is_empty()).map(str::to_string),
        char_start: start,
        char_end: end,
        text,
        truncated,
        tool: String::new(),
        call_id: String::new(),
    })
}

/// At most [`QUOTE_CHARS`] characters of `text`, cut after a word.
fn quote(text: &str) -> (String, bool) {
    let Some((cut, _)) = text.char_indices().nth(QUOTE_CHARS) else {
        return (text.to_string(), false);
    };
    let head = &text[..cut];
    let head = match head.rfind(char::is_whitespace) {
        Some(space) if space > cut / 2 => &head[..space],
        _ => head,
    };
    (format!("{}…", head.trim_end()), true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn search_result() -> ToolResult {
        ToolResult::ok(
            "search_documents",
            "call_s",
            json!({"results": [
                {"document_id": "d1", "path": "guides/vacuum.md", "heading": "Vacuuming",
                 "char_start": 0, "char_end": 62, "text": "VACUUM reclaims storage."},
                {"document_id": "d2", "path": "guides/index.md", "heading": "",
                 "char_start": 100, "char_end": 180, "text": "Indexes speed up reads."},
            ]}),
            3,
        )
    }

    fn numbered() -> Citations {
        let mut c = Citations::default();
        let mut result = search_result();
        c.number(&mut result);
        assert_eq!(result.data.as_ref().unwrap()["results"][0]["cite"], 1);
        assert_eq!(result.data.as_ref().unwrap()["results"][1]["cite"], 2);
        c
    }

    fn indexes(found: &[Citation]) -> Vec<usize> {
        found.iter().map(|c| c.index).collect()
    }

    #[test]
    fn passages_are_numbered_once_across_calls_and_tools() {
        let mut c = numbered();
        // The same hit again keeps its number; a read range and a grep
        // line get the next ones.
        let mut again = search_result();
        c.number(&mut again);
        assert_eq!(again.data.as_ref().unwrap()["results"][1]["cite"], 2);
        let mut read = ToolResult::ok(
            "read_document",
            "call_r",
            json!({"document_id": "d1", "path": "guides/vacuum.md", "title": "Vacuuming",
                   "start": 0, "end": 5000, "total_chars": 9000, "text": "word ".repeat(1000)}),
            1,
        );
        c.number(&mut read);
        assert_eq!(read.data.as_ref().unwrap()["cite"], 3);
        let mut grep = ToolResult::ok(
            "grep_documents",
            "call_g",
            json!({"results": [{"document_id": "d2", "path": "guides/index.md", "name": "index.md",
                   "line": 4, "text": "CREATE INDEX ä", "text_start": 140, "matches": []}]}),
            1,
        );
        c.number(&mut grep);
        assert_eq!(grep.data.as_ref().unwrap()["results"][0]["cite"], 4);
        let found = c.scan("See [3] and [4].");
        assert_eq!(indexes(&found), [3, 4]);
        assert_eq!(found[0].tool, "read_document");
        assert!(found[0].truncated);
        assert!(found[0].text.chars().count() <= QUOTE_CHARS + 1);
        assert_eq!((found[1].char_start, found[1].char_end), (140, 154));
        // A failure and another tool are left alone.
        let mut other = ToolResult::ok("list_sources", "c", json!({"results": []}), 1);
        c.number(&mut other);
        assert_eq!(other.data, Some(json!({"results": []})));
    }

    #[test]
    fn markers_are_read_across_deltas_once_each() {
        let mut c = numbered();
        assert!(c.scan("VACUUM reclaims space [").is_empty());
        let found = c.scan("1] and more");
        assert_eq!(indexes(&found), [1]);
        assert_eq!(found[0].path, "guides/vacuum.md");
        assert_eq!(found[0].title.as_deref(), Some("Vacuuming"));
        assert_eq!(found[0].text, "VACUUM reclaims storage.");
        // Cited again: nothing new. Lists, carets and a second source.
        assert!(c.scan(" again [1].").is_empty());
        assert_eq!(indexes(&c.scan("Both [^1, 2][2].")), [2]);
    }

    #[test]
    fn unknown_numbers_links_and_code_cite_nothing() {
        let mut c = numbered();
        assert!(
            c.scan("See [7] and [0] and [the manual](https://x.org) [a, b]")
                .is_empty()
        );
        assert!(c.scan("```python\nrows = [1, 2]\n``").is_empty());
        assert!(c.scan("`\nNow [2]").iter().map(|c| c.index).eq([2]));
        // A bracket never closed within reach is dropped.
        let long = format!("[{}", "x".repeat(LONGEST_MARKER + 5));
        assert!(c.scan(&long).is_empty());
        assert!(c.scan("1]").is_empty());
        // Nothing numbered yet: nothing to find.
        assert!(Citations::default().scan("[1]").is_empty());
    }

    #[test]
    fn the_path_and_span_form_finds_the_passage_it_overlaps() {
        let mut c = numbered();
        let found = c.scan("It reclaims space [guides/index.md, chars 120–150].");
        assert_eq!(indexes(&found), [2]);
        assert!(c.scan("[guides/vacuum.md, chars 500-600]").is_empty());
        assert!(c.scan("[other.md, chars 0-10]").is_empty());
        assert_eq!(indexes(&c.scan("[`guides/vacuum.md`, chars 10-20]")), [1]);
    }

    #[test]
    fn a_later_turn_numbers_after_the_conversation_so_far() {
        // The history: an answer citing [1] and [3], a tool result with
        // cite 4 inside a JSON string.
        let history = r#"[{"role":"assistant","content":"As said [1] and [3]."},{"role":"tool","content":"{\"results\":[{\"cite\":4}]}"}]"#;
        assert_eq!(highest_number(history), 4);
        assert_eq!(
            highest_number("no numbers [a] [12345678901234567890123]"),
            0
        );
        let mut c = Citations::after_history(history);
        let mut result = search_result();
        c.number(&mut result);
        assert_eq!(result.data.as_ref().unwrap()["results"][0]["cite"], 5);
        // An old number cites nothing new; the new ones do.
        assert!(c.scan("Before [1][4]. ").is_empty());
        assert_eq!(indexes(&c.scan("Now [6] and [5].")), [6, 5]);
    }

    #[test]
    fn a_bracket_does_not_pair_with_one_inside_a_fence() {
        let mut c = numbered();
        // The `]` inside the fence closes nothing; the fence is seen, and
        // a marker after it counts.
        assert!(c.scan("See [this\n```\nx = a[0]\n```\n").is_empty());
        assert_eq!(indexes(&c.scan("then [2].")), [2]);
    }
}
