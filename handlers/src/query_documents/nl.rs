//! query_documents' natural-language path: the question, the tables' names,
//! typed columns and a few sample rows go to the language model, which
//! answers with one SELECT. The SQL it writes is treated like any caller's:
//! it goes through the same guard and executor. An answer the guard refuses
//! gets one more try, with the refusal fed back.

use async_openai::types::chat::{
    ChatCompletionRequestAssistantMessage, ChatCompletionRequestAssistantMessageContent,
    ChatCompletionRequestMessage, ChatCompletionRequestSystemMessage,
    ChatCompletionRequestSystemMessageContent, ChatCompletionRequestUserMessage,
    ChatCompletionRequestUserMessageContent,
};
use data_plane_agent::{AgentConfig, AgentError};
use data_plane_registry::ToolError;
use data_plane_store::ScopedTx;
use serde_json::Value;

use super::guard::{self, Refusal};
use super::typed::{Table, describe, show_ident};
use super::{NAME, names};
use crate::deps::internal;

/// Rows of each table shown to the model: enough to see what the values
/// look like (units, spelling, date formats), few enough to stay small.
pub const SAMPLE_ROWS: i64 = 3;

/// Longest sample cell, in characters, before it is cut with '…'.
const SAMPLE_CELL_CHARS: usize = 80;

/// Longest piece of a refused answer quoted back in an error.
const QUOTE_CHARS: usize = 500;

const SYSTEM_PROMPT: &str = "You translate questions about tabular data into SQL. \
Answer with exactly one PostgreSQL SELECT statement (it may start with WITH) in a \
```sql code block and nothing else. Rules: read only the tables listed, by the names \
shown (quote names the way they are shown); the columns have the types shown; use \
only built-in aggregate, window, math, string, date and JSON functions; no other \
tables, schemas, system catalogs or functions, no writes, no statements other than \
the one SELECT. Prefer returning few rows: aggregate, filter, order and limit as the \
question needs, and give computed columns clear names.";

/// The first rows of each table, as stored (a JSON object per row).
pub async fn sample_rows(
    tx: &mut ScopedTx,
    tables: &[Table],
) -> Result<Vec<Vec<Value>>, ToolError> {
    let mut samples = Vec::with_capacity(tables.len());
    for table in tables {
        let rows: Vec<Value> = sqlx::query_scalar(
            "SELECT data FROM table_rows WHERE table_id = $1 ORDER BY row_number LIMIT $2",
        )
        .bind(table.id)
        .bind(SAMPLE_ROWS)
        .fetch_all(&mut **tx)
        .await
        .map_err(|e| internal(NAME, e))?;
        samples.push(rows);
    }
    Ok(samples)
}

/// What the model is told about the tables and the question.
pub fn user_prompt(question: &str, tables: &[Table], samples: &[Vec<Value>]) -> String {
    let mut out = String::from("The tables:\n");
    for (table, rows) in tables.iter().zip(samples) {
        let columns = table
            .columns
            .iter()
            .map(|c| format!("{} {}", show_ident(&c.name), c.kind.sql_type()))
            .collect::<Vec<_>>()
            .join(", ");
        out.push_str(&format!(
            "\n{} ({} rows)\n  columns: {columns}\n",
            show_ident(&table.name),
            table.row_count
        ));
        if !rows.is_empty() {
            out.push_str(&format!("  first {} rows:\n", rows.len()));
            for row in rows {
                let cells = table
                    .columns
                    .iter()
                    .map(|c| sample_cell(row.get(&c.name)))
                    .collect::<Vec<_>>()
                    .join(" | ");
                out.push_str(&format!("    {cells}\n"));
            }
        }
    }
    out.push_str(&format!("\nQuestion: {question}"));
    out
}

fn sample_cell(cell: Option<&Value>) -> String {
    let text = match cell {
        None | Some(Value::Null) => "NULL".to_string(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    };
    let text = text.replace(['\n', '\r'], " ");
    if text.chars().count() > SAMPLE_CELL_CHARS {
        let cut: String = text.chars().take(SAMPLE_CELL_CHARS).collect();
        format!("{cut}…")
    } else {
        text
    }
}

/// The SQL in a model's answer: the first fenced block (```sql or plain),
/// else the whole answer; `<think>` sections and a trailing semicolon are
/// dropped. `None` when nothing is left.
pub fn extract_sql(answer: &str) -> Option<String> {
    let mut text = answer.to_string();
    while let Some(start) = text.find("<think>") {
        let end = text[start..]
            .find("</think>")
            .map_or(text.len(), |e| start + e + "</think>".len());
        text.replace_range(start..end, "");
    }
    let body = match text.find("```") {
        Some(open) => {
            let after = &text[open + 3..];
            // The info string (`sql`, `postgresql`) ends at the first newline.
            let after = match after.find('\n') {
                Some(nl) if !after[..nl].trim().contains(' ') => &after[nl + 1..],
                _ => after,
            };
            match after.find("```") {
                Some(close) => &after[..close],
                None => after,
            }
        }
        None => text.as_str(),
    };
    let sql = body.trim().trim_end_matches(';').trim();
    (!sql.is_empty()).then(|| sql.to_string())
}

/// Asks the model for SQL answering `question` and returns the first answer
/// the guard accepts (as the model wrote it; the caller checks it again and
/// runs it). One retry, with the refusal fed back.
pub async fn write_sql(
    config: &AgentConfig,
    question: &str,
    tables: &[Table],
    samples: &[Vec<Value>],
) -> Result<String, ToolError> {
    let mut messages = vec![
        ChatCompletionRequestMessage::System(ChatCompletionRequestSystemMessage {
            content: ChatCompletionRequestSystemMessageContent::Text(SYSTEM_PROMPT.into()),
            name: None,
        }),
        user(user_prompt(question, tables, samples)),
    ];
    let allowed = names(tables);
    let mut last = None;
    for attempt in 1..=2 {
        let completion = data_plane_agent::complete(config, messages.clone(), Some(0.0))
            .await
            .map_err(model_error)?;
        let refusal = match extract_sql(&completion.text) {
            None => Refusal("the answer holds no SQL".into()),
            Some(sql) => match guard::check(&sql, &allowed) {
                Ok(_) => return Ok(sql),
                Err(refusal) => refusal,
            },
        };
        tracing::debug!(tool = NAME, attempt, reason = %refusal.0, "the model's sql was refused");
        if attempt == 1 {
            messages.push(ChatCompletionRequestMessage::Assistant(
                ChatCompletionRequestAssistantMessage {
                    content: Some(ChatCompletionRequestAssistantMessageContent::Text(
                        completion.text.clone(),
                    )),
                    ..Default::default()
                },
            ));
            messages.push(user(format!(
                "That answer was refused: {}. Answer again with one SELECT over the tables \
                 above, in a ```sql code block.",
                refusal.0
            )));
        }
        last = Some((refusal, completion.text));
    }
    let (refusal, answer) = last.unwrap_or_else(|| (Refusal("no answer".into()), String::new()));
    Err(ToolError::invalid(format!(
        "the language model did not write an acceptable query for the question, twice: {}; \
         its last answer was {:?}; rephrase the question or pass `sql` yourself; the \
         document's tables: {}",
        refusal.0,
        quote(answer.trim()),
        describe(tables)
    )))
}

fn user(text: String) -> ChatCompletionRequestMessage {
    ChatCompletionRequestMessage::User(ChatCompletionRequestUserMessage {
        content: ChatCompletionRequestUserMessageContent::Text(text),
        name: None,
    })
}

fn quote(text: &str) -> String {
    if text.chars().count() <= QUOTE_CHARS {
        text.to_string()
    } else {
        let cut: String = text.chars().take(QUOTE_CHARS).collect();
        format!("{cut}…")
    }
}

fn model_error(e: AgentError) -> ToolError {
    match e {
        AgentError::Config(_) | AgentError::InvalidRequest(_) => internal(NAME, e),
        other => ToolError::unavailable(format!(
            "the language model could not turn the question into sql: {other}; try again, or pass `sql` yourself"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sql_is_found_in_the_answer() {
        let check = |answer: &str, expected: Option<&str>| {
            assert_eq!(
                extract_sql(answer).as_deref(),
                expected,
                "answer {answer:?}"
            );
        };
        check("```sql\nSELECT 1;\n```", Some("SELECT 1"));
        check(
            "Here it is:\n```sql\nSELECT city\nFROM cities\n```\nDone.",
            Some("SELECT city\nFROM cities"),
        );
        check("```\nSELECT 2\n```", Some("SELECT 2"));
        check("```postgresql\nSELECT 3\n```", Some("SELECT 3"));
        check("```SELECT 4```", Some("SELECT 4"));
        check("SELECT 5 ;", Some("SELECT 5"));
        check(
            "<think>count rows? maybe ```sql DELETE```</think>\nSELECT count(*) FROM t",
            Some("SELECT count(*) FROM t"),
        );
        check("```sql\nSELECT 6", Some("SELECT 6"));
        check("   ", None);
        check("```sql\n```", None);
        check("<think>nothing", None);
    }

    #[test]
    fn sample_cells_are_short_single_lines() {
        assert_eq!(sample_cell(None), "NULL");
        assert_eq!(sample_cell(Some(&Value::from(42))), "42");
        assert_eq!(sample_cell(Some(&Value::from("a\nb"))), "a b");
        let long = "x".repeat(200);
        let shown = sample_cell(Some(&Value::from(long)));
        assert_eq!(shown.chars().count(), SAMPLE_CELL_CHARS + 1);
        assert!(shown.ends_with('…'));
    }
}
