//! Tool discovery: the three meta-tools (search_tools, describe_tool,
//! execute_tool) a model gets instead of the whole tool list, their
//! definitions, and the BM25 ranking behind search_tools.
//!
//! The meta-tools are answered by the registry itself, not by handlers:
//! they only read the registry, and execute_tool hands its call to the
//! pipeline under the real tool's name.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

use serde_json::{Value, json};

use crate::entry::DefinitionFile;
use crate::entry::ToolEntry;
use crate::{Annotations, ToolContext};

/// The names of the discovery meta-tools; no tool may take them.
pub const META_TOOLS: [&str; 3] = [SEARCH_TOOLS, DESCRIBE_TOOL, EXECUTE_TOOL];

pub(crate) const SEARCH_TOOLS: &str = "search_tools";
pub(crate) const DESCRIBE_TOOL: &str = "describe_tool";
pub(crate) const EXECUTE_TOOL: &str = "execute_tool";

/// How many tools search_tools answers when the call does not say.
const DEFAULT_LIMIT: usize = 5;
/// The most it answers.
const MAX_LIMIT: u64 = 12;

/// What search_tools and describe_tool are: they read the registry and
/// nothing else. (execute_tool takes the annotations of the tool it runs.)
pub(crate) const META_ANNOTATIONS: Annotations = Annotations {
    read_only: true,
    destructive: false,
    idempotent: true,
    open_world: false,
    requires_confirmation: false,
};

/// A tool as it is offered to a model up front: a real tool, or one of
/// the discovery meta-tools.
#[derive(Debug, Clone, PartialEq)]
pub struct OfferedTool {
    pub name: String,
    /// One line for the system prompt's tool summary.
    pub short_description: Cow<'static, str>,
    /// The OpenAI function object (name, description, parameters) as
    /// offered in the context it was listed for; shared with the registry
    /// unless the context shaped it.
    pub definition: Arc<Value>,
}

impl OfferedTool {
    /// The tool in OpenAI's `tools` format.
    pub fn openai_tool(&self) -> Value {
        json!({ "type": "function", "function": *self.definition })
    }

    /// The name the model calls it by (`module__tool` for a remote tool).
    pub fn function_name(&self) -> &str {
        self.definition["name"].as_str().unwrap_or(&self.name)
    }

    /// The JSON Schema of its arguments.
    pub fn parameters(&self) -> &Value {
        &self.definition["parameters"]
    }
}

/// The one-line summaries of the meta-tools, in [`META_TOOLS`] order.
pub(crate) fn short_description(name: &str) -> &'static str {
    match name {
        SEARCH_TOOLS => "find the tools for a task, best first",
        DESCRIBE_TOOL => "a tool's full description and argument schema",
        _ => "run a tool found with search_tools",
    }
}

/// The meta-tools' names and definitions, in [`META_TOOLS`] order, each
/// definition as a file the registry checks like any tool's (the file name
/// only labels a start-up error; no such file exists).
pub(crate) fn definition_files() -> Vec<(&'static str, DefinitionFile)> {
    let definitions = [
        json!({
            "name": SEARCH_TOOLS,
            "description": "Find the tools you can use for a task. Say what you want to do in a few words (\"find text by regular expression\", \"read a web page\"); the answer lists the best-matching tools, best first, each with its name, a one-line summary and its category. Then call describe_tool for a tool's arguments and execute_tool to run it.",
            "parameters": {
                "type": "object",
                "properties": {
                    "query": {
                        "type": "string",
                        "minLength": 1,
                        "description": "What you want to do, in a few words."
                    },
                    "limit": {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": MAX_LIMIT,
                        "description": format!("How many tools to list at most (default {DEFAULT_LIMIT}).")
                    }
                },
                "required": ["query"],
                "additionalProperties": false
            }
        }),
        json!({
            "name": DESCRIBE_TOOL,
            "description": "Describe one tool found with search_tools: its full description, the JSON Schema of its arguments, what it does to the world (annotations), its cost and the permission it needs. Read it before the first execute_tool of that tool.",
            "parameters": {
                "type": "object",
                "properties": {
                    "name": {
                        "type": "string",
                        "minLength": 1,
                        "description": "The tool's name, as search_tools gave it."
                    }
                },
                "required": ["name"],
                "additionalProperties": false
            }
        }),
        json!({
            "name": EXECUTE_TOOL,
            "description": "Run a tool found with search_tools. The arguments must follow the schema describe_tool gave; the answer is the tool's own result.",
            "parameters": {
                "type": "object",
                "properties": {
                    "name": {
                        "type": "string",
                        "minLength": 1,
                        "description": "The tool to run, as search_tools gave it."
                    },
                    "arguments": {
                        "type": "object",
                        "description": "The tool's arguments: a JSON object that follows its schema. Leave it out for a tool that needs none."
                    }
                },
                "required": ["name"],
                "additionalProperties": false
            }
        }),
    ];
    META_TOOLS
        .into_iter()
        .zip(definitions)
        .map(|(name, d)| {
            let file = DefinitionFile {
                file: format!("discovery/{name}.json"),
                text: d.to_string(),
            };
            (name, file)
        })
        .collect()
}

/// The arguments of a search_tools call, already checked against its schema.
pub(crate) fn search_arguments(args: &Value) -> (&str, usize) {
    let query = args["query"].as_str().unwrap_or_default();
    let limit = args["limit"]
        .as_u64()
        .and_then(|l| usize::try_from(l).ok())
        .unwrap_or(DEFAULT_LIMIT);
    (query, limit)
}

/// search_tools' answer: the offered tools that match `query`, best first,
/// at most `limit`; when none does, a note naming every offered tool.
pub(crate) fn search(
    query: &str,
    limit: usize,
    offered: &[Arc<ToolEntry>],
    ctx: &ToolContext,
) -> Value {
    let documents: Vec<Vec<String>> = offered.iter().map(|e| index_terms(e, ctx)).collect();
    let ranked = Bm25::new(&documents).rank(&terms(query));
    let tools: Vec<Value> = ranked
        .into_iter()
        .take(limit)
        .map(|i| {
            let e = &offered[i];
            json!({
                "name": e.name,
                "short_description": e.summary,
                "category": e.meta.category,
            })
        })
        .collect();
    if tools.is_empty() {
        let names: Vec<&str> = offered.iter().map(|e| e.name.as_str()).collect();
        return json!({
            "query": query,
            "tools": [],
            "note": format!(
                "no tool matches {query:?}; the tools you may use: {}",
                names.join(", ")
            ),
        });
    }
    json!({ "query": query, "tools": tools })
}

/// describe_tool's answer for a tool offered in `ctx`.
pub(crate) fn describe(entry: &ToolEntry, ctx: &ToolContext) -> Value {
    let definition = entry.definition_for(ctx);
    json!({
        "name": entry.name,
        "description": definition["description"],
        "parameters": definition["parameters"],
        "category": entry.meta.category,
        "aliases": entry.meta.aliases,
        "annotations": entry.annotations,
        "cost": entry.meta.cost,
        "permission": entry.meta.permission,
    })
}

/// The terms a tool is found by, the parts that say most about it
/// repeated: its name (split at `_`) three times, its aliases and summary
/// twice, its description once.
fn index_terms(entry: &ToolEntry, ctx: &ToolContext) -> Vec<String> {
    let definition = entry.definition_for(ctx);
    let description = definition["description"].as_str().unwrap_or_default();
    let name = terms(&entry.name);
    let aliases: Vec<String> = entry.meta.aliases.iter().flat_map(|a| terms(a)).collect();
    let summary = terms(&entry.summary);
    let mut all = Vec::new();
    for _ in 0..3 {
        all.extend(name.iter().cloned());
    }
    for _ in 0..2 {
        all.extend(aliases.iter().cloned());
        all.extend(summary.iter().cloned());
    }
    all.extend(terms(description));
    all
}

/// Words too common in tool descriptions and queries to tell tools apart.
const STOP_WORDS: &[&str] = &[
    "a", "an", "and", "any", "are", "as", "at", "be", "by", "can", "do", "for", "from", "i", "in",
    "into", "is", "it", "its", "me", "my", "of", "on", "one", "or", "that", "the", "their", "them",
    "then", "this", "to", "use", "want", "what", "when", "which", "with", "you", "your",
];

/// Lower-case words of `text`, split at anything not a letter or digit
/// (so `grep_documents` is `grep document`), without stop words, each
/// reduced to a rough stem so that "documents" finds "document".
fn terms(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .filter(|w| !STOP_WORDS.contains(&w.as_str()))
        .map(|w| stem(&w))
        .collect()
}

/// Strips the commonest English inflections; crude, but applied alike to
/// queries and tools, which is all matching needs.
fn stem(word: &str) -> String {
    let strip = |suffix: &str, keep: usize| {
        word.strip_suffix(suffix)
            .filter(|rest| rest.chars().count() >= keep)
    };
    if let Some(rest) = strip("ies", 3) {
        return format!("{rest}y");
    }
    for (suffix, keep) in [("ing", 3), ("ed", 3), ("es", 4)] {
        if let Some(rest) = strip(suffix, keep)
            && (suffix != "es" || rest.ends_with(['s', 'x', 'h']))
        {
            return rest.to_string();
        }
    }
    match strip("s", 3) {
        Some(rest) if !word.ends_with("ss") => rest.to_string(),
        _ => word.to_string(),
    }
}

/// Okapi BM25 over a handful of documents (k1 = 1.2, b = 0.75).
struct Bm25<'a> {
    documents: &'a [Vec<String>],
    frequencies: Vec<HashMap<&'a str, usize>>,
    /// In how many documents each term appears.
    document_frequency: HashMap<&'a str, usize>,
    average_length: f64,
}

impl<'a> Bm25<'a> {
    const K1: f64 = 1.2;
    const B: f64 = 0.75;

    fn new(documents: &'a [Vec<String>]) -> Self {
        let mut frequencies = Vec::with_capacity(documents.len());
        let mut document_frequency: HashMap<&str, usize> = HashMap::new();
        for document in documents {
            let mut tf: HashMap<&str, usize> = HashMap::new();
            for term in document {
                *tf.entry(term.as_str()).or_default() += 1;
            }
            for term in tf.keys() {
                *document_frequency.entry(term).or_default() += 1;
            }
            frequencies.push(tf);
        }
        let total: usize = documents.iter().map(Vec::len).sum();
        Bm25 {
            documents,
            frequencies,
            document_frequency,
            average_length: total as f64 / documents.len().max(1) as f64,
        }
    }

    /// Indexes of the documents matching at least one query term, best
    /// first; equal scores keep the documents' order.
    fn rank(&self, query: &[String]) -> Vec<usize> {
        let n = self.documents.len() as f64;
        let mut query: Vec<&str> = query.iter().map(String::as_str).collect();
        query.sort_unstable();
        query.dedup();
        let mut scored: Vec<(f64, usize)> = self
            .frequencies
            .iter()
            .enumerate()
            .filter_map(|(i, tf)| {
                let length = self.documents[i].len() as f64;
                let score: f64 = query
                    .iter()
                    .filter_map(|term| {
                        let f = *tf.get(term)? as f64;
                        let df = self.document_frequency.get(term).copied().unwrap_or(0) as f64;
                        let idf = ((n - df + 0.5) / (df + 0.5)).ln_1p();
                        let norm = Self::K1
                            * (1.0 - Self::B + Self::B * length / self.average_length.max(1.0));
                        Some(idf * f * (Self::K1 + 1.0) / (f + norm))
                    })
                    .sum();
                (score > 0.0).then_some((score, i))
            })
            .collect();
        scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        scored.into_iter().map(|(_, i)| i).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terms_split_names_drop_stop_words_and_stem() {
        let check = |text: &str, expected: &[&str]| assert_eq!(terms(text), expected, "{text}");
        check("grep_documents", &["grep", "document"]);
        check(
            "Find text in files by regular expression",
            &["find", "text", "file", "regular", "expression"],
        );
        check("matches, searching; queries", &["match", "search", "query"]);
        check("class glass is", &["class", "glass"]);
        check("", &[]);
    }

    #[test]
    fn bm25_prefers_rare_terms_and_ignores_non_matches() {
        let docs: Vec<Vec<String>> = ["read a document", "search document text", "fetch web page"]
            .iter()
            .map(|d| terms(d))
            .collect();
        let bm25 = Bm25::new(&docs);
        assert_eq!(bm25.rank(&terms("search the documents")), vec![1, 0]);
        assert_eq!(bm25.rank(&terms("web")), vec![2]);
        assert!(bm25.rank(&terms("nothing here")).is_empty());
    }
}
