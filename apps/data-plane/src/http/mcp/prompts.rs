//! The prompts /mcp offers: requests a person starts from, carrying the
//! chat agent's own instructions and the documents they name, and the
//! completion of their document arguments (docs/mcp.md, "Prompts").

use data_plane_agent::prompt::{PromptFacts, PromptTool};
use data_plane_registry::ToolContext;
use rmcp::ErrorData as McpError;
use rmcp::model::{
    CompleteRequestParams, ContentBlock, EmbeddedResource, GetPromptRequestParams,
    GetPromptResponse, GetPromptResult, ListPromptsResult, PaginatedRequestParams, Prompt,
    PromptArgument, PromptMessage, Role,
};
use rmcp::service::{RequestContext, RoleServer};
use serde_json::Value;

use super::resources::{COMPLETIONS, Entries, paths};
use super::{McpServer, caller_of, refused};
use crate::http::context::space_facts;

impl McpServer {
    /// The chat agent's system prompt, rendered as a chat in this
    /// endpoint's space with its tools would be: the same template, so a
    /// prompt asks what the agent is asked.
    pub(super) async fn instructions(
        &self,
        rq: &RequestContext<RoleServer>,
        ctx: &ToolContext,
    ) -> Result<String, McpError> {
        let template = self
            .state
            .agent
            .as_ref()
            .and_then(|agent| agent.config().system_prompt.clone())
            .unwrap_or_default();
        let space = match ctx.space_id {
            Some(space) => Some(
                space_facts(&self.state, &caller_of(rq)?, space)
                    .await
                    .map_err(refused)?,
            ),
            None => None,
        };
        let offered = self.state.registry.offered(ctx);
        let tools = PromptTool::offered(&offered);
        let facts = PromptFacts {
            space,
            today: chrono::Utc::now().date_naive(),
        };
        Ok(template.render(&facts, &tools))
    }

    /// The prompts: requests a person starts from, with the instructions
    /// the chat agent follows (docs/mcp.md, "Prompts").
    pub(super) async fn prompt_list(
        &self,
        _request: Option<PaginatedRequestParams>,
        rq: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        self.tool_context(&rq).await?;
        let argument = |name: &str, description: &str| {
            PromptArgument::new(name)
                .with_description(description)
                .with_required(true)
        };
        let document = "The document: its path in the endpoint's space (completed as you type), its resource URI, or its id.";
        let prompts = vec![
            Prompt::new(
                ANSWER,
                Some("Answer a question from the space's documents, citing the passages used."),
                Some(vec![argument("question", "What to answer.")]),
            )
            .with_title("Answer with citations"),
            Prompt::new(
                SUMMARISE,
                Some("Summarise one document, citing the passages used."),
                Some(vec![argument("document", document)]),
            )
            .with_title("Summarise a document"),
            Prompt::new(
                COMPARE,
                Some("Compare two documents: what they share, where they differ."),
                Some(vec![
                    argument("first", document),
                    argument("second", document),
                ]),
            )
            .with_title("Compare two documents"),
        ];
        Ok(ListPromptsResult::with_all_items(prompts))
    }

    /// A prompt's messages: the chat agent's own instructions, rendered
    /// for this endpoint (its space, the tools it offers), then the
    /// request, with the documents it names embedded as read_document
    /// reads them.
    pub(super) async fn prompt_get(
        &self,
        request: GetPromptRequestParams,
        rq: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        let ctx = self.tool_context(&rq).await?;
        let arguments = request.arguments.unwrap_or_default();
        let argument = |name: &str| {
            arguments
                .get(name)
                .and_then(Value::as_str)
                .map(str::trim)
                .filter(|v| !v.is_empty())
                .map(str::to_string)
                .ok_or_else(|| {
                    McpError::invalid_params(
                        format!("the prompt {:?} needs the argument {name:?}", request.name),
                        None,
                    )
                })
        };
        let (task, documents) = match request.name.as_str() {
            ANSWER => (argument("question")?, Vec::new()),
            SUMMARISE => (
                "Summarise this document: its subject, its main points and its conclusions."
                    .to_string(),
                vec![argument("document")?],
            ),
            COMPARE => (
                "Compare these two documents: what they agree on, where they differ, and what only one of them covers."
                    .to_string(),
                vec![argument("first")?, argument("second")?],
            ),
            other => {
                return Err(McpError::invalid_params(
                    format!("no prompt {other:?}; prompts/list names them"),
                    None,
                ));
            }
        };
        let mut messages = vec![PromptMessage::new_text(
            Role::User,
            self.instructions(&rq, &ctx).await?,
        )];
        for document in documents {
            let uri = self.document_uri(&ctx, document).await?;
            let contents = self.read_text(&rq, uri).await?;
            messages.push(PromptMessage::new(
                Role::User,
                ContentBlock::Resource(EmbeddedResource::new(contents)),
            ));
        }
        messages.push(PromptMessage::new_text(Role::User, task));
        Ok(GetPromptResult::new(messages).into())
    }

    /// Completes a prompt's document arguments with the paths of the
    /// space's documents that begin with what was typed (case aside), as
    /// far as the caller may read them; other arguments have nothing to
    /// complete.
    pub(super) async fn complete_prompt(
        &self,
        prompt: &str,
        request: &CompleteRequestParams,
        ctx: &ToolContext,
    ) -> Result<Vec<String>, McpError> {
        let documents = match prompt {
            ANSWER => false,
            SUMMARISE => request.argument.name == "document",
            COMPARE => ["first", "second"].contains(&request.argument.name.as_str()),
            other => {
                return Err(McpError::invalid_params(
                    format!("no prompt {other:?}; prompts/list names them"),
                    None,
                ));
            }
        };
        let Some(space) = ctx
            .space_id
            .filter(|_| documents && self.reads_documents(ctx))
        else {
            return Ok(Vec::new());
        };
        let typed = Entries::AtPath(request.argument.value.trim(), true);
        let found = self.entries(ctx, space, typed, COMPLETIONS + 1).await?;
        Ok(paths(found))
    }
}

/// The prompts' names.
const ANSWER: &str = "answer_with_citations";

const SUMMARISE: &str = "summarise_document";

const COMPARE: &str = "compare_documents";
