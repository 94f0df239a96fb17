//! analyze_document: a nested agent studies one document and its final
//! answer is the tool's result. It runs inside this handler's future (so
//! dropping the parent call stops it), through the same registry, with its
//! own allow-list of read-only document tools, a context scoped to the one
//! document, its own step limit and token budget, and no sub-agents of its
//! own. Its progress goes to the parent's callbacks as sub-agent events.

use std::time::Duration;

use async_openai::types::chat::{
    ChatCompletionRequestMessage, ChatCompletionRequestSystemMessage,
    ChatCompletionRequestSystemMessageContent, ChatCompletionRequestUserMessage,
    ChatCompletionRequestUserMessageContent,
};
use data_plane_agent::{Agent, AgentError, ChatRequest, FinishReason, SubAgentSink};
use data_plane_registry::{
    AnnotationHints, Callbacks, Category, CostTier, ErrorCode, Permission, RateLimits, ToolContext,
    ToolError, ToolEvent, ToolMeta,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::Deps;
use crate::deps::internal;

/// The arguments, as definitions/analyze_document.json describes them.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Args {
    /// The document to analyse.
    pub document_id: Uuid,
    /// What to find out about the document.
    pub question: String,
}

pub const META: ToolMeta = ToolMeta {
    category: Category::Document,
    short_description: "a nested agent studies one document",
    available_when: "always",
    aliases: &["analyse_document"],
    // Reads only, but a model answers differently each time, and a
    // retry spends its budget again.
    annotations: AnnotationHints {
        idempotent: Some(false),
        ..AnnotationHints::DERIVED
    },
    cost: CostTier::Expensive,
    permission: Permission::User,
    timeout: Duration::from_millis(300000),
    limits: RateLimits {
        cooldown: None,
        daily_limit: Some(200),
    },
    requires_gate: true,
    defer_loading: false,
    tag: None,
};

pub fn available(_ctx: &ToolContext) -> bool {
    true
}

const NAME: &str = "analyze_document";

/// The agent profile of the sub-agent (definitions/agents/analyze_document.json):
/// tools that read the caller's own data and take a `document_id`, which
/// the registry pins to the analysed document. Whatever the file says, the
/// sub-agent never gets analyze_document itself (no nesting) nor an
/// open-world tool (a document could steer an agent that can fetch URLs
/// into leaking it).
pub const PROFILE: &str = "analyze_document";

#[derive(Debug, Serialize, JsonSchema)]
pub struct Output {
    pub document_id: Uuid,
    /// The sub-agent's final answer.
    pub analysis: String,
    /// `stop` when it finished; `step_limit`, `token_budget` or `length`
    /// when it was cut short (the note says so).
    pub finish_reason: FinishReason,
    /// Model requests made.
    pub steps: u32,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub total_tokens: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// What the sub-agent is told about its document.
struct Document {
    path: String,
    title: Option<String>,
    chars: i64,
    tables: i64,
}

pub async fn run(
    deps: &Deps,
    args: Args,
    ctx: &ToolContext,
    callbacks: &dyn Callbacks,
) -> Result<Output, ToolError> {
    // The document must be one the caller can read, whatever happens next.
    let document = read_document_facts(deps, args.document_id, ctx).await?;
    if ctx.parent_call_id.is_some() || ctx.document_scope.is_some() {
        return Err(ToolError::new(
            ErrorCode::NotAvailable,
            "analyze_document is not available to a sub-agent: it cannot start one of its own",
        ));
    }
    let Some(model) = deps.model() else {
        return Err(ToolError::new(
            ErrorCode::NotAvailable,
            "analyze_document needs a language model and none is configured (set OPENAI_BASE_URL and DATA_PLANE_MODEL); read the document with read_document instead",
        ));
    };
    let Some(registry) = model.registry.upgrade() else {
        return Err(ToolError::unavailable(
            "analyze_document cannot start: the server is shutting down",
        ));
    };
    let limits = model.settings.sub_agent;
    let mut config = model.settings.agent.clone();
    config.max_steps = limits.max_steps;
    config.token_budget = Some(limits.token_budget);
    config.system_prompt = None;
    let agent = Agent::new(config, registry.clone()).map_err(|e| internal(NAME, e))?;

    // The registry fills the call id in before a handler runs; a direct
    // caller without one still gets events that belong together.
    let parent_call_id = ctx
        .call_id
        .clone()
        .unwrap_or_else(|| format!("call_{}", Uuid::new_v4().simple()));
    let mut sub_ctx = ToolContext::new(ctx.user_id, ctx.space_id, ctx.permission)
        .with_settings(ctx.settings.clone())
        .with_request_id(ctx.request_id.clone())
        .with_document_scope(args.document_id);
    sub_ctx.parent_call_id = Some(parent_call_id.clone());
    sub_ctx.deployment = ctx.deployment;
    // A call of the sub-agent that needs approval asks the same person.
    sub_ctx.approver = ctx.approver.clone();
    let allowed = registry
        .resolve_profile(PROFILE, ctx.deployment)
        .map_err(|e| {
            tracing::error!(tool = NAME, error = %e, "the sub-agent's profile is missing");
            ToolError::internal(format!("{NAME} cannot start its sub-agent: {e}"))
        })?;
    let allowed: Vec<String> = allowed
        .iter()
        // Never wider than the parent's own allow-list.
        .filter(|t| {
            t.as_str() != NAME
                && ctx.allows(t)
                && registry.get(t).is_some_and(|e| !e.annotations.open_world)
        })
        .cloned()
        .collect();
    let mut sub_ctx = sub_ctx.with_allow_list(PROFILE, allowed.into());
    // The profile's discovery default holds for the sub-agent as for any agent.
    sub_ctx.tool_search = registry
        .profile(PROFILE)
        .is_some_and(|p| p.spec.tool_search);

    let request = ChatRequest {
        messages: vec![
            ChatCompletionRequestMessage::System(ChatCompletionRequestSystemMessage {
                content: ChatCompletionRequestSystemMessageContent::Text(system_prompt(
                    args.document_id,
                    &document,
                    limits.max_steps,
                )),
                name: None,
            }),
            ChatCompletionRequestMessage::User(ChatCompletionRequestUserMessage {
                content: ChatCompletionRequestUserMessageContent::Text(args.question.clone()),
                name: None,
            }),
        ],
        ..ChatRequest::default()
    };
    let label = document.title.as_deref().unwrap_or(&document.path);
    callbacks.emit(ToolEvent::SubagentStart {
        parent_call_id: parent_call_id.clone(),
        task: format!("{label}: {}", args.question),
    });
    let sink = SubAgentSink::new(callbacks, parent_call_id.clone());
    // Nothing cancels this token: cancellation is dropping this future,
    // which drops the run and its model request and tools with it.
    let never = CancellationToken::new();
    let outcome = match agent.run(request, &sub_ctx, &sink, &never).await {
        Ok(outcome) => outcome,
        Err(e) => {
            callbacks.emit(ToolEvent::SubagentEnd {
                parent_call_id,
                summary: format!("failed: {e}"),
            });
            return Err(model_error(e));
        }
    };
    let usage = outcome.usage;
    let cut_short = match outcome.reason {
        FinishReason::Stop => None,
        FinishReason::StepLimit => Some(format!(
            "the analysis used all {} of its steps before it finished",
            outcome.steps
        )),
        FinishReason::TokenBudget => Some(format!(
            "the analysis spent its budget of {} tokens ({} used) before it finished",
            limits.token_budget,
            usage.total()
        )),
        FinishReason::Length => {
            Some("the analysis was cut at the model's answer length limit".to_string())
        }
        FinishReason::Deadline => {
            Some("the analysis reached its time limit before it finished".to_string())
        }
        FinishReason::Repetition => {
            Some("the analysis was cut because the model kept repeating itself".to_string())
        }
        FinishReason::Empty => Some("the model gave no analysis".to_string()),
    };
    let analysis = outcome.text.trim().to_string();
    let summary = match &cut_short {
        None => format!(
            "finished in {} steps, {} tokens",
            outcome.steps,
            usage.total()
        ),
        Some(why) => format!("stopped: {why}"),
    };
    callbacks.emit(ToolEvent::SubagentEnd {
        parent_call_id,
        summary,
    });
    if analysis.is_empty() {
        let why = cut_short.unwrap_or_else(|| "the analysis ended without an answer".into());
        return Err(ToolError::invalid(format!(
            "{why}, and wrote no answer; ask a narrower question about document {}, or read it with read_document",
            args.document_id
        )));
    }
    Ok(Output {
        document_id: args.document_id,
        analysis,
        finish_reason: outcome.reason,
        steps: outcome.steps,
        prompt_tokens: usage.prompt_tokens,
        completion_tokens: usage.completion_tokens,
        total_tokens: usage.total(),
        note: cut_short.map(|why| format!("{why}: the analysis above may be incomplete")),
    })
}

async fn read_document_facts(
    deps: &Deps,
    document_id: Uuid,
    ctx: &ToolContext,
) -> Result<Document, ToolError> {
    let mut tx = deps.read(NAME, ctx).await?;
    let row: Option<(String, Option<String>, i64, i64)> = sqlx::query_as(
        "SELECT d.path, d.title, char_length(d.content)::bigint,
                (SELECT count(*) FROM doc_tables t WHERE t.document_id = d.id)
           FROM documents d
          WHERE d.id = $1 AND ($2::uuid IS NULL OR d.space_id = $2)",
    )
    .bind(document_id)
    .bind(ctx.space_id)
    .fetch_optional(&mut *tx)
    .await
    .map_err(|e| internal(NAME, e))?;
    let Some((path, title, chars, tables)) = row else {
        return Err(crate::document_info::not_found(document_id));
    };
    Ok(Document {
        path,
        title,
        chars,
        tables,
    })
}

fn system_prompt(document_id: Uuid, document: &Document, max_steps: u32) -> String {
    let title = document
        .title
        .as_deref()
        .map_or(String::new(), |t| format!("titled {t:?}, "));
    let tables = if document.tables > 0 {
        format!(
            " It has {} table(s): query_documents answers questions over them in SQL.",
            document.tables
        )
    } else {
        String::new()
    };
    format!(
        "You analyse one document to answer the user's question. The document is {} ({title}\
         id {document_id}, {} characters).{tables}\n\
         Your tools read only this document: document_info for its metadata and outline, \
         read_document to read it by character range (follow `next` to continue), \
         grep_documents and search_documents to find passages in it. Any document_id you pass \
         must be {document_id}; you may leave it out.\n\
         You have at most {max_steps} steps (each model answer is one), so read what the \
         question needs, not everything. Base your answer only on what you read, cite \
         character offsets or quotes for the claims that matter, and say plainly when the \
         document does not answer the question. Your final message is handed back as the \
         analysis: make it complete and self-contained.",
        document.path, document.chars
    )
}

/// A run that ended without an answer, as a result the caller can act on.
fn model_error(e: AgentError) -> ToolError {
    match e {
        AgentError::Config(_) | AgentError::InvalidRequest(_) => internal(NAME, e),
        AgentError::Cancelled => ToolError::unavailable("the analysis was cancelled"),
        other => ToolError::unavailable(format!(
            "the analysis stopped because the language model failed: {other}"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sub_agents_prompt_names_its_document_tools_and_budget() {
        let id = Uuid::from_u128(0x0123_4567_89ab_cdef_0123_4567_89ab_cdef);
        let document = Document {
            path: "guides/vacuum.md".into(),
            title: Some("Routine Vacuuming".into()),
            chars: 48_210,
            tables: 2,
        };
        expect_test::expect![[r#"
            You analyse one document to answer the user's question. The document is guides/vacuum.md (titled "Routine Vacuuming", id 01234567-89ab-cdef-0123-456789abcdef, 48210 characters). It has 2 table(s): query_documents answers questions over them in SQL.
            Your tools read only this document: document_info for its metadata and outline, read_document to read it by character range (follow `next` to continue), grep_documents and search_documents to find passages in it. Any document_id you pass must be 01234567-89ab-cdef-0123-456789abcdef; you may leave it out.
            You have at most 8 steps (each model answer is one), so read what the question needs, not everything. Base your answer only on what you read, cite character offsets or quotes for the claims that matter, and say plainly when the document does not answer the question. Your final message is handed back as the analysis: make it complete and self-contained."#]].assert_eq(&system_prompt(id, &document, 8));
        let untitled = Document {
            title: None,
            tables: 0,
            ..document
        };
        let plain = system_prompt(id, &untitled, 8);
        assert!(plain.contains("(id 01234567-89ab-cdef-0123-456789abcdef, 48210 characters)."));
        assert!(!plain.contains("table"));
    }
}
