//! The registry's tools over MCP: listed with titles, annotations and the
//! output schema, called through the whole pipeline with progress and log
//! notifications on the call's own stream (docs/mcp.md, "Tools").

use data_plane_registry::{Annotations, Report, ToolContext, ToolEntry, ToolEvent};
use rmcp::ErrorData as McpError;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ListToolsResult,
    PaginatedRequestParams, ProgressNotificationParam, Tool,
};
use rmcp::service::{RequestContext, RoleServer};
use serde_json::{Value, json};

use super::McpServer;
use super::logging::{Note, log_note};
use super::tasks::{ASK_FOR_TASK, task_support};

impl McpServer {
    pub(super) async fn tool_list(
        &self,
        _request: Option<PaginatedRequestParams>,
        rq: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let ctx = self.tool_context(&rq).await?;
        let tools = self
            .state
            .registry
            .available_entries(&ctx)
            .iter()
            .map(|entry| mcp_tool(entry, &ctx))
            .collect::<Result<Vec<Tool>, _>>()
            .map_err(|e| McpError::internal_error(format!("a tool cannot be listed: {e}"), None))?;
        Ok(ListToolsResult::with_all_items(tools))
    }

    pub(super) async fn tool_call(
        &self,
        request: CallToolRequestParams,
        rq: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let ctx = match self.tool_context(&rq).await {
            Ok(ctx) => ctx,
            // The call cannot run here: the client's model reads why.
            Err(e) => return Ok(CallToolResult::error(vec![ContentBlock::text(e.message)]).into()),
        };
        let call_id = super::call_id();
        let ctx = ctx.with_call_id(call_id.clone());
        let args = request.arguments.map(Value::Object).unwrap_or(Value::Null);
        if self.runs_as_task(&rq, &request.name) {
            return self.start_task(request.name.into_owned(), args, ctx).await;
        }
        let progress = rq.meta.get_progress_token();
        let level = self.log_level(&rq).await;
        let mut sent = 0u32;
        // A notification that cannot be delivered is logged; the call goes
        // on (its result may still reach the client).
        let peer = &rq.peer;
        let forward = |report: Report| {
            let note = match report {
                Report::Event(event) => progress
                    .as_ref()
                    .filter(|_| !is_the_call_itself(&event, &call_id))
                    .map(|token| {
                        sent += 1;
                        let message = serde_json::to_string(&event).unwrap_or_default();
                        Note::Progress(
                            ProgressNotificationParam::new(token.clone(), f64::from(sent))
                                .with_message(message),
                        )
                    }),
                Report::Log(line) => log_note(&line, level),
            };
            async move {
                if let Some(note) = note
                    && let Err(e) = note.deliver(peer).await
                {
                    tracing::debug!(error = %e, "a notification was not delivered");
                }
                true
            }
        };
        let call = self
            .state
            .registry
            .execute_streaming(&request.name, args, &ctx, forward);
        let result = tokio::select! {
            result = call => result,
            // Dropping the call stops it (a model request, a fetch, a
            // remote module's call); the client hears nothing more.
            () = rq.ct.cancelled() => None,
        };
        let Some(result) = result else {
            return Err(McpError::internal_error("the call was cancelled", None));
        };
        self.state.metrics.tool_call(&result);
        Ok(call_result(&result).into())
    }
}

/// The call's own tool_call and tool_result: the client made the call and
/// gets the result; only what happens inside is progress.
fn is_the_call_itself(event: &ToolEvent, call_id: &str) -> bool {
    match event {
        ToolEvent::ToolCall { call_id: id, .. } | ToolEvent::ToolResult { call_id: id, .. } => {
            id == call_id
        }
        _ => false,
    }
}

/// A ToolResult as MCP's CallToolResult: the data as structured content
/// (and its JSON as text, for clients that read only text), or a failure
/// as `isError` with the error's message (and its code in the structured
/// content), which the client's model reads.
pub(super) fn call_result(result: &data_plane_registry::ToolResult) -> CallToolResult {
    if !result.success {
        let message = result
            .error
            .as_ref()
            .map_or("the tool failed", |e| e.message.as_str());
        let mut out = CallToolResult::error(vec![ContentBlock::text(message.to_string())]);
        out.structured_content = Some(json!({ "error": result.error }));
        return out;
    }
    match &result.data {
        Some(data @ Value::Object(_)) => CallToolResult::structured(data.clone()),
        Some(other) => CallToolResult::success(vec![ContentBlock::text(other.to_string())]),
        None => CallToolResult::success(Vec::new()),
    }
}

/// A registry entry as an MCP tool: the name and parameters the model is
/// offered in `ctx`, a title, and the annotations as MCP's hints.
fn mcp_tool(entry: &ToolEntry, ctx: &ToolContext) -> Result<Tool, serde_json::Error> {
    let definition = entry.definition_for(ctx);
    let name = definition["name"]
        .as_str()
        .unwrap_or(&entry.name)
        .to_string();
    let mut schema = definition
        .get("parameters")
        .cloned()
        .unwrap_or_else(|| json!({ "type": "object" }));
    if schema.get("type").is_none() {
        schema["type"] = json!("object");
    }
    let title = title(&entry.name);
    let Annotations {
        read_only,
        destructive,
        idempotent,
        open_world,
        ..
    } = entry.annotations;
    let mut tool = json!({
        "name": name,
        "title": title,
        "description": definition["description"],
        "inputSchema": schema,
        "annotations": {
            "title": title,
            "readOnlyHint": read_only,
            "destructiveHint": destructive,
            "idempotentHint": idempotent,
            "openWorldHint": open_world,
        },
    });
    if let Some(output) = &entry.output_schema {
        tool["outputSchema"] = Value::clone(output);
    }
    // Whether its calls run as tasks for a client that takes them
    // (docs/mcp.md, "Tasks").
    tool["_meta"] = json!({ ASK_FOR_TASK: task_support(entry.meta.timeout) });
    serde_json::from_value(tool)
}

/// `search_documents` → "Search documents"; a remote module's tool keeps
/// its module in front ("weather: Get forecast").
fn title(name: &str) -> String {
    let (module, tool) = match name.split_once('.') {
        Some((module, tool)) => (Some(module), tool),
        None => (None, name),
    };
    let words = tool.replace(['_', '-'], " ");
    let mut chars = words.chars();
    let sentence: String = chars
        .next()
        .map(|first| first.to_uppercase().chain(chars).collect())
        .unwrap_or_default();
    match module {
        Some(module) => format!("{module}: {sentence}"),
        None => sentence,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn titles_read_as_words() {
        assert_eq!(title("search_documents"), "Search documents");
        assert_eq!(title("analyze_document"), "Analyze document");
        assert_eq!(title("weather.get_forecast"), "weather: Get forecast");
        assert_eq!(title(""), "");
    }
}
