//! Tag-style calls for models without function calling: a tool's one-line
//! form (`SEARCH: vacuum full`), checked against the tool's definition and
//! compiled once at start-up, and the prompt block that teaches the tags of
//! the tools a context offers.

use regex::Regex;
use serde_json::{Map, Value};

use crate::TagSpec;

/// A [`TagSpec`] checked against its tool's definition, its pattern
/// compiled.
#[derive(Debug, Clone)]
pub struct Tag {
    spec: TagSpec,
    /// The pattern anchored at both ends: it must take the whole argument
    /// text.
    regex: Regex,
    /// The named groups, in the pattern's order.
    groups: Vec<String>,
}

impl Tag {
    /// Checks `spec` against the definition's `parameters`: the prefix is
    /// upper-case ASCII letters and underscores, the pattern compiles, each
    /// named group is a property, every required property is a named group,
    /// and the example is a line of this tag that fits the pattern. Every
    /// problem is returned, in words that name the values.
    pub fn compile(spec: TagSpec, parameters: &Value) -> Result<Tag, Vec<String>> {
        let mut problems = Vec::new();
        let prefix = spec.tag_prefix;
        if prefix.is_empty() || !prefix.bytes().all(|b| b.is_ascii_uppercase() || b == b'_') {
            problems.push(format!(
                "tag prefix {prefix:?} must be upper-case ASCII letters or underscores"
            ));
        }
        let regex = match Regex::new(&format!("^(?:{})$", spec.pattern)) {
            Ok(regex) => regex,
            Err(e) => {
                problems.push(format!(
                    "the pattern of tag {prefix} does not compile: {}",
                    one_line(&e.to_string())
                ));
                return Err(problems);
            }
        };
        let groups: Vec<String> = regex.capture_names().flatten().map(String::from).collect();
        let properties = parameters.get("properties").and_then(Value::as_object);
        for group in &groups {
            if !properties.is_some_and(|p| p.contains_key(group)) {
                problems.push(format!(
                    "the pattern of tag {prefix} has the group {group:?}, which is not a parameter of the tool"
                ));
            }
        }
        let required = parameters
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str);
        for name in required {
            if !groups.iter().any(|g| g == name) {
                problems.push(format!(
                    "the pattern of tag {prefix} has no group for the required parameter {name:?}"
                ));
            }
        }
        if groups.is_empty() && problems.is_empty() {
            problems.push(format!(
                "the pattern of tag {prefix} has no named group, so a call could carry no argument"
            ));
        }
        let tag = Tag {
            spec,
            regex,
            groups,
        };
        let fits = spec
            .example
            .strip_prefix(prefix)
            .and_then(|rest| rest.strip_prefix(':'))
            .is_some_and(|text| tag.arguments(text).is_some());
        if !fits {
            problems.push(format!(
                "the example of tag {prefix} ({:?}) is not a line `{prefix}: …` that fits its pattern",
                spec.example
            ));
        }
        if problems.is_empty() {
            Ok(tag)
        } else {
            Err(problems)
        }
    }

    /// The word that opens a call line (`SEARCH`).
    pub fn prefix(&self) -> &'static str {
        self.spec.tag_prefix
    }

    pub fn spec(&self) -> &TagSpec {
        &self.spec
    }

    /// Whether the call line is kept out of the text the user sees.
    pub fn strip_from_display(&self) -> bool {
        self.spec.strip_from_display
    }

    /// The arguments the text after `PREFIX:` stands for: each named group
    /// that took part, trimmed, as a string (an empty one is left out, so
    /// the registry names a missing required argument). `None` when the
    /// text does not fit the pattern.
    pub fn arguments(&self, text: &str) -> Option<Map<String, Value>> {
        let captures = self.regex.captures(text.trim())?;
        let mut arguments = Map::new();
        for group in &self.groups {
            if let Some(value) = captures.name(group).map(|m| m.as_str().trim())
                && !value.is_empty()
            {
                arguments.insert(group.clone(), Value::String(value.to_string()));
            }
        }
        Some(arguments)
    }

    /// How the prompt writes the line's form: `SEARCH: <query>`.
    pub fn form(&self) -> String {
        let groups: Vec<String> = self.groups.iter().map(|g| format!("<{g}>")).collect();
        format!("{}: {}", self.prefix(), groups.join(" "))
    }
}

/// The regex crate's errors draw the pattern over several lines.
fn one_line(message: &str) -> String {
    message.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The instructions for `tools` (each tool's tag and short description),
/// or nothing when there are none.
pub(crate) fn prompt_block<'a>(tools: impl IntoIterator<Item = (&'a Tag, &'a str)>) -> String {
    let lines: Vec<String> = tools
        .into_iter()
        .map(|(tag, does)| format!("{} — {does} — e.g. {}", tag.form(), tag.spec.example))
        .collect();
    if lines.is_empty() {
        return String::new();
    }
    format!(
        "To use a tool, write a line in one of these forms:\n{}\n\n\
         Rules: one call per line, at the start of the line, with nothing else on it; \
         several lines make several calls. After your calls, stop and wait: the results \
         come back in the next message. Write such a line only to call the tool.",
        lines.join("\n")
    )
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn parameters() -> Value {
        json!({
            "type": "object",
            "properties": { "query": {}, "limit": {} },
            "required": ["query"]
        })
    }

    fn spec(tag_prefix: &'static str, pattern: &'static str, example: &'static str) -> TagSpec {
        TagSpec {
            tag_prefix,
            pattern,
            example,
            strip_from_display: true,
        }
    }

    #[test]
    fn a_tag_is_checked_against_the_definition() {
        // (spec, the problems' words, one fragment each; none: it compiles)
        let check = |spec: TagSpec, expected: &[&str]| {
            let problems = Tag::compile(spec, &parameters()).err().unwrap_or_default();
            assert_eq!(problems.len(), expected.len(), "{spec:?}: {problems:#?}");
            for (problem, words) in problems.iter().zip(expected) {
                assert!(problem.contains(words), "{problem:?} lacks {words:?}");
            }
        };
        check(spec("SEARCH", "(?P<query>.+)", "SEARCH: vacuum full"), &[]);
        check(
            spec("S_2", "(?P<query>.+)", "S_2: x"),
            &["tag prefix \"S_2\" must be upper-case"],
        );
        check(
            spec("Search", "(?P<query>.+)", "Search: x"),
            &["tag prefix \"Search\" must be upper-case"],
        );
        check(
            spec("SEARCH", "(?P<query>.+", "SEARCH: x"),
            &["the pattern of tag SEARCH does not compile"],
        );
        check(
            spec("SEARCH", "(?P<query>\\S+) (?P<count>\\d+)", "SEARCH: x 3"),
            &["has the group \"count\", which is not a parameter"],
        );
        check(
            spec("SEARCH", "(?P<limit>\\d+)", "SEARCH: 3"),
            &["has no group for the required parameter \"query\""],
        );
        check(
            spec("SEARCH", "(?P<query>\\d+)", "SEARCH: words"),
            &["the example of tag SEARCH (\"SEARCH: words\")"],
        );
        check(
            spec("SEARCH", "(?P<query>.+)", "FIND: x"),
            &["the example of tag SEARCH"],
        );
    }

    #[test]
    fn arguments_come_from_the_named_groups_trimmed() {
        let tag = Tag::compile(
            spec(
                "SEARCH",
                "(?P<query>.+?)(?:\\s+limit\\s+(?P<limit>\\d+))?",
                "SEARCH: x",
            ),
            &parameters(),
        )
        .unwrap();
        let check = |text: &str, expected: Option<Value>| {
            assert_eq!(tag.arguments(text).map(Value::Object), expected, "{text:?}");
        };
        check("  vacuum full ", Some(json!({ "query": "vacuum full" })));
        check(
            "vacuum limit 3",
            Some(json!({ "query": "vacuum", "limit": "3" })),
        );
        check("", None);
        assert_eq!(tag.form(), "SEARCH: <query> <limit>");
    }

    #[test]
    fn the_prompt_block_lists_each_tag_then_the_rules() {
        let search = Tag::compile(
            spec("SEARCH", "(?P<query>.+)", "SEARCH: vacuum full"),
            &parameters(),
        )
        .unwrap();
        assert_eq!(prompt_block(std::iter::empty()), "");
        let block = prompt_block([(&search, "search passages")]);
        assert!(
            block.starts_with(
                "To use a tool, write a line in one of these forms:\n\
                 SEARCH: <query> — search passages — e.g. SEARCH: vacuum full\n\nRules: one call per line"
            ),
            "{block}"
        );
    }
}
