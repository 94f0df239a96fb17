//! The pipeline every call takes, in order: resolve the name (or a
//! discovery meta-tool), available here, arguments valid, permission, rate
//! limit checked, the eval gate, approval, the call counted, the handler
//! under its timeout (retried once where the context asks), the audit
//! record; the `tool_call` event before and the `tool_result` after.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::FutureExt;
use serde_json::Value;

use super::{MetaTool, Registry};
use crate::approval::{Approval, ApprovalRequest};
use crate::discovery::{
    self, DESCRIBE_TOOL, EXECUTE_TOOL, META_ANNOTATIONS, META_TOOLS, SEARCH_TOOLS,
};
use crate::entry::ToolEntry;
use crate::gate::{GATE_TIMEOUT, GateCall, GateDecision, GateVerdict};
use crate::ledger::{AuditRecord, LedgerError};
use crate::suggest::close_names;
use crate::{
    CallLog, Callbacks, ErrorCode, LogLevel, RateLimits, ToolContext, ToolError, ToolEvent,
    ToolResult,
};

/// What `Registry::limit` asks of the ledger.
#[derive(Clone, Copy)]
enum Limit {
    /// Whether the call is within its limits now, counting nothing.
    Check,
    /// Count the call, or refuse it.
    Count,
}

/// What a call resolves to before it runs.
enum Plan {
    /// A real tool, through the whole pipeline.
    Run(Arc<ToolEntry>),
    /// An answer the registry gives itself: a meta-tool's, or a refusal.
    Answer(Result<Value, ToolError>),
}

impl Registry {
    /// Runs one call through the whole pipeline. Never panics and never
    /// fails outside the returned [`ToolResult`].
    ///
    /// Where discovery is on ([`Registry::discovery`]), the meta-tools are
    /// answered here, limited to the tools offered in `ctx`; an
    /// execute_tool call runs its tool as if the tool had been called by
    /// name (its events, audit record and result carry the tool's name and
    /// the call's id), and one the tool cannot take is refused like any
    /// call of that tool.
    pub async fn execute_tool(
        &self,
        name: &str,
        args: Value,
        ctx: &ToolContext,
        callbacks: &dyn Callbacks,
    ) -> ToolResult {
        if let Some(meta) = self
            .meta_tools
            .iter()
            .find(|m| m.name == name)
            .filter(|_| self.discovery(ctx))
        {
            let (name, plan, args) = self.plan_meta(meta, args, ctx);
            return self.stamped(&name, plan, args, ctx, callbacks).await;
        }
        let plan = match self.get(name) {
            Some(entry) => Plan::Run(entry),
            None => Plan::Answer(Err(self.unknown_tool(name, ctx))),
        };
        self.stamped(name, plan, args, ctx, callbacks).await
    }

    /// [`Registry::execute_tool`] with its events handed to `forward` as the
    /// call reports them (its `tool_call`, a sub-agent's events, approval
    /// requests, its `tool_result`), through the one pump,
    /// [`crate::forward_events`]. `None` when `forward` answered false (its
    /// reader went away) and the call was stopped.
    ///
    /// `R` says what is handed on: the events alone ([`ToolEvent`]), or
    /// the events and the call's log lines ([`crate::Report`]).
    pub async fn execute_streaming<R, Sent>(
        &self,
        name: &str,
        args: Value,
        ctx: &ToolContext,
        forward: impl FnMut(R) -> Sent,
    ) -> Option<ToolResult>
    where
        R: crate::Reported,
        Sent: Future<Output = bool>,
    {
        let (callbacks, events) = crate::ChannelCallbacks::<R>::channel();
        let call = self.execute_tool(name, args, ctx, &callbacks);
        crate::forward_events(call, events, forward).await
    }

    /// What a meta-tool call comes to: the name it is recorded under, what
    /// to do, and the arguments recorded. search_tools and describe_tool
    /// are answered here; execute_tool becomes a call of the tool it names
    /// (with that tool's arguments), or of an unknown tool when `ctx` does
    /// not offer it: discovery never reveals a tool the context may not use.
    fn plan_meta(&self, meta: &MetaTool, args: Value, ctx: &ToolContext) -> (String, Plan, Value) {
        let args = match args {
            Value::Null => Value::Object(Default::default()),
            other => other,
        };
        let refused =
            |error: ToolError, args: Value| (meta.name.to_string(), Plan::Answer(Err(error)), args);
        if let Err(error) = check_arguments(meta.name, &meta.validator, &args) {
            return refused(error, args);
        }
        let named = args["name"].as_str().unwrap_or_default().to_string();
        let answer = match meta.name {
            SEARCH_TOOLS => {
                let (query, limit) = discovery::search_arguments(&args);
                let offered = self.available_entries(ctx);
                Ok(discovery::search(query, limit, &offered, ctx))
            }
            DESCRIBE_TOOL => match self.offered_entry(&named, ctx) {
                Some(entry) => Ok(discovery::describe(&entry, ctx)),
                None => Err(self.unknown_tool(&named, ctx)),
            },
            _ if META_TOOLS.contains(&named.as_str()) => {
                let error = ToolError::invalid(format!(
                    "execute_tool runs the tools search_tools finds, not {named}; call {named} directly"
                ));
                return refused(error, args);
            }
            _ => {
                let arguments = args.get("arguments").cloned().unwrap_or(Value::Null);
                let plan = match self.offered_entry(&named, ctx) {
                    Some(entry) => Plan::Run(entry),
                    None => Plan::Answer(Err(self.unknown_tool(&named, ctx))),
                };
                return (named, plan, arguments);
            }
        };
        (meta.name.to_string(), Plan::Answer(answer), args)
    }

    /// Carries out `plan` for a call named `name` (a real tool's name,
    /// an alias, a meta-tool's or an unknown name) with the `tool_call`
    /// event before, and the audit record and `tool_result` event after.
    async fn stamped(
        &self,
        name: &str,
        plan: Plan,
        args: Value,
        ctx: &ToolContext,
        callbacks: &dyn Callbacks,
    ) -> ToolResult {
        let started = Instant::now();
        let ts = chrono::Utc::now();
        let call_id = ctx
            .call_id
            .clone()
            .unwrap_or_else(|| format!("call_{}", uuid::Uuid::new_v4().simple()));
        let module = match &plan {
            Plan::Run(entry) => entry.module.clone(),
            Plan::Answer(_) => None,
        };
        let (tool_name, annotations) = match &plan {
            Plan::Run(entry) => (entry.name.clone(), Some(entry.annotations)),
            // execute_tool takes its target's annotations; refused, it has none.
            Plan::Answer(_) if META_TOOLS.contains(&name) && name != EXECUTE_TOOL => {
                (name.to_string(), Some(META_ANNOTATIONS))
            }
            Plan::Answer(_) => (name.to_string(), None),
        };
        let reporting = callbacks.takes_reports();
        if reporting {
            callbacks.emit(ToolEvent::ToolCall {
                call_id: call_id.clone(),
                name: tool_name.clone(),
                arguments: args.clone(),
            });
        }
        let say = |level, message: &dyn Fn() -> String| {
            if reporting {
                callbacks.log(CallLog {
                    level,
                    call_id: call_id.clone(),
                    tool: tool_name.clone(),
                    message: message(),
                    parent_call_id: ctx.parent_call_id.clone(),
                })
            }
        };
        say(LogLevel::Info, &|| format!("{tool_name} started"));

        let side_effects = crate::SideEffects::default();
        let mut trace = Trace::default();
        let outcome = match plan {
            Plan::Answer(answer) => answer,
            Plan::Run(entry) => {
                let mut ctx = ctx.clone();
                ctx.call_id = Some(call_id.clone());
                ctx.side_effects = side_effects.clone();
                self.run(&entry, &args, &ctx, callbacks, &mut trace).await
            }
        };
        let gate = trace.gate.map(GateVerdict::as_str);
        let attempts = trace.attempts.max(1);
        let duration_ms = started.elapsed().as_millis() as u64;
        match &outcome {
            Ok(_) => say(LogLevel::Info, &|| {
                format!(
                    "{tool_name} finished in {duration_ms} ms{}",
                    tried(attempts)
                )
            }),
            Err(e) => say(LogLevel::Error, &|| {
                format!("{tool_name} failed{}: {}", tried(attempts), e.message)
            }),
        }
        let flags = annotations.map(|a| a.flags()).unwrap_or_default();
        let agent = ctx.agent.as_deref().unwrap_or("");
        let side_effects = side_effects.take();
        match &outcome {
            Ok(_) => {
                tracing::debug!(tool = %tool_name, %call_id, duration_ms, annotations = %flags, agent, gate, attempts, side_effects = ?side_effects, "tool call succeeded")
            }
            Err(e) => {
                tracing::info!(tool = %tool_name, %call_id, duration_ms, annotations = %flags, agent, gate, attempts, code = ?e.code, error = %e.message, "tool call failed")
            }
        }
        // The data moves into the result: nothing is copied for a caller
        // that takes no events.
        let mut result = match outcome {
            Ok(data) => ToolResult::ok(&tool_name, &call_id, data, duration_ms),
            Err(e) => ToolResult::failed(&tool_name, &call_id, &e, duration_ms),
        };
        result.side_effects = side_effects;
        result.attempts = attempts;
        let record = AuditRecord {
            tool: tool_name.clone(),
            call_id: call_id.clone(),
            duration_ms,
            ts,
            user_id: ctx.user_id,
            space_id: ctx.space_id,
            request_id: ctx.request_id.clone(),
            parent_call_id: ctx.parent_call_id.clone(),
            success: result.success,
            error: result.error.as_ref().map(|e| e.message.clone()),
            args,
            annotations,
            side_effects: result.side_effects.clone(),
            gate: gate.map(str::to_string),
            agent: ctx.agent.as_deref().map(str::to_string),
            module,
            attempts,
        };
        match self.ledger.record(record).await {
            Ok(()) if ctx.audit_first => self.ledger.written().await,
            Ok(()) => {}
            Err(e) => {
                tracing::warn!(tool = %tool_name, %call_id, error = %e, "could not write the audit record")
            }
        }
        if reporting {
            callbacks.emit(ToolEvent::ToolResult {
                call_id,
                name: tool_name,
                result: result.clone(),
            });
        }
        result
    }

    fn unknown_tool(&self, name: &str, ctx: &ToolContext) -> ToolError {
        let entries = self.available_entries(ctx);
        let offered: Vec<&str> = entries.iter().map(|t| t.name.as_str()).collect();
        // Every name that reaches an offered tool (aliases included), with
        // the tool it reaches.
        let mut names: Vec<(&str, &str)> = self
            .by_name
            .iter()
            .filter(|(_, i)| self.tools[**i].is_offered(ctx))
            .map(|(n, &i)| (n.as_str(), self.tools[i].name.as_str()))
            .collect();
        names.extend(
            entries
                .iter()
                .filter(|e| e.module.is_some())
                .map(|e| (e.name.as_str(), e.name.as_str())),
        );
        // An alias and its tool may both look close; name the tool once.
        let mut close: Vec<&str> = Vec::new();
        for n in close_names(name, names.iter().map(|(n, _)| *n)) {
            let tool = names.iter().find(|(a, _)| *a == n).map_or(n, |(_, t)| *t);
            if !close.contains(&tool) {
                close.push(tool);
            }
        }
        let message = if close.is_empty() {
            format!(
                "unknown tool {name:?}; available tools: {}",
                offered.join(", ")
            )
        } else {
            format!(
                "unknown tool {name:?}; did you mean {}?",
                close
                    .iter()
                    .map(|n| format!("{n:?}"))
                    .collect::<Vec<_>>()
                    .join(" or ")
            )
        };
        ToolError::new(ErrorCode::UnknownTool, message)
    }

    /// The pipeline after the name is resolved. `trace` receives the gate
    /// step's verdict when the call reached it, and how often the handler
    /// ran, for the audit record and the result.
    async fn run(
        &self,
        entry: &ToolEntry,
        args: &Value,
        ctx: &ToolContext,
        callbacks: &dyn Callbacks,
        trace: &mut Trace,
    ) -> Result<Value, ToolError> {
        let name = entry.name.as_str();
        if !(entry.available)(ctx) || !ctx.allows(name) {
            let why = if ctx.allows(name) {
                format!("it is offered only when {}", entry.meta.available_when)
            } else {
                "this agent may not use it".to_string()
            };
            return Err(ToolError::new(
                ErrorCode::NotAvailable,
                format!("tool {name} is not available here: {why}"),
            ));
        }
        let mut args = match args {
            Value::Null => Value::Object(Default::default()),
            other => other.clone(),
        };
        if let Some(document) = ctx.document_scope {
            pin_document(&entry.name, &entry.definition, &mut args, document)?;
        }
        check_arguments(name, &entry.validator, &args)?;
        if ctx.permission < entry.meta.permission {
            return Err(ToolError::new(
                ErrorCode::PermissionDenied,
                format!(
                    "{name} needs permission level {:?} or above; the caller has {:?}",
                    entry.meta.permission, ctx.permission
                )
                .to_lowercase(),
            ));
        }
        // A call counts against its rate limit when it runs: one the gate
        // blocks or a person denies is not counted. One over its limit is
        // refused before the gate is consulted or anyone is asked, by a
        // check that counts nothing.
        let limits = ctx.rate_limits(name, entry.meta.limits);
        let limited = !limits.is_none();
        let mut checked = false;
        // The gate judges the call (`consult_gate`'s own condition).
        if limited && self.gate.is_some() && entry.meta.requires_gate {
            self.limit(ctx, name, &limits, Limit::Check).await?;
            checked = true;
        }
        // Why a person must approve the call first: what refuses it when
        // nobody can answer (annotations, the gate), then what only asks
        // where someone can (an admin's rules, the tool itself).
        // (why, for the person; the refusal when nobody can answer)
        let mut must_ask: Option<(String, String)> = None;
        let nobody =
            format!("{name} needs a person's approval before it runs, and nobody can give it here");
        if let Some((verdict, refusal)) = self.consult_gate(entry, &args, ctx).await {
            trace.gate = Some(verdict);
            let (level, said) = match (&verdict, &refusal) {
                (GateVerdict::FailOpen, _) => (
                    LogLevel::Warning,
                    "the eval gate could not judge the call (it failed or did not answer in time); the call runs".to_string(),
                ),
                (_, Err(GateRefusal::Ask(reason))) => (
                    LogLevel::Notice,
                    format!("the eval gate asks a person to approve the call: {reason}"),
                ),
                (_, Err(GateRefusal::Refused(e))) => (LogLevel::Warning, e.message.clone()),
                (_, Ok(())) => (LogLevel::Info, "the eval gate allowed the call".to_string()),
            };
            callbacks.log(CallLog {
                level,
                call_id: ctx.call_id.clone().unwrap_or_default(),
                tool: name.to_string(),
                message: said,
                parent_call_id: ctx.parent_call_id.clone(),
            });
            match refusal {
                Ok(()) => {}
                Err(GateRefusal::Ask(reason)) => {
                    must_ask = Some((
                        format!("the gate asks: {reason}"),
                        format!("{nobody}: {reason}"),
                    ));
                }
                Err(GateRefusal::Refused(e)) => return Err(e),
            }
        }
        if must_ask.is_none() && entry.annotations.requires_confirmation {
            must_ask = Some((
                format!("{name} is marked as requiring confirmation"),
                nobody,
            ));
        }
        let approver = ctx.approver.as_ref().or(self.approver.as_ref());
        let Some(approver) = approver else {
            if let Some((_, refusal)) = must_ask {
                return Err(ToolError::new(ErrorCode::ApprovalRequired, refusal));
            }
            if limited {
                self.limit(ctx, name, &limits, Limit::Count).await?;
            }
            return self.attempt(entry, args, ctx, callbacks, trace).await;
        };
        let why = must_ask
            .map(|(why, _)| why)
            .or_else(|| ctx.settings.approvals.why(entry))
            .or_else(|| entry.asks.and_then(|asks| asks(&args, ctx)));
        if let Some(why) = why {
            if limited && !checked {
                self.limit(ctx, name, &limits, Limit::Check).await?;
            }
            let request = ApprovalRequest {
                entry,
                args: &args,
                ctx,
                why: &why,
                callbacks,
            };
            match approver.approve(request).await {
                Approval::Approved => {}
                Approval::Denied { reason } => {
                    return Err(ToolError::new(
                        ErrorCode::ApprovalRequired,
                        format!("{name} was not approved: {reason}"),
                    ));
                }
            }
        }
        // Counted now, just before it runs: a call approved while another
        // took the day's last one is refused here, so the limit holds.
        if limited {
            self.limit(ctx, name, &limits, Limit::Count).await?;
        }
        self.attempt(entry, args, ctx, callbacks, trace).await
    }

    /// The handler, run once more after [`RETRY_PAUSE`] when the context
    /// asks for it (`retry_once`), the failure is transient, and running
    /// the tool twice does no more than running it once (idempotent). A
    /// remote module's client has retried what a retry may fix already.
    /// Both attempts are one call: one `tool_call`, one `tool_result` with
    /// `attempts`, one audit row; the call was checked, judged and counted
    /// once, before the first.
    async fn attempt(
        &self,
        entry: &ToolEntry,
        args: Value,
        ctx: &ToolContext,
        callbacks: &dyn Callbacks,
        trace: &mut Trace,
    ) -> Result<Value, ToolError> {
        trace.attempts = 1;
        let retry = ctx.retry_once && entry.annotations.idempotent && entry.module.is_none();
        if !retry {
            return self.call_handler(entry, args, ctx, callbacks).await;
        }
        match self.call_handler(entry, args.clone(), ctx, callbacks).await {
            Err(e) if e.code.retried_at_once() => {
                tracing::debug!(tool = %entry.name, call_id = ctx.call_id.as_deref().unwrap_or(""), code = ?e.code, "retrying a failed tool call once");
                callbacks.log(CallLog {
                    level: LogLevel::Warning,
                    call_id: ctx.call_id.clone().unwrap_or_default(),
                    tool: entry.name.clone(),
                    message: format!("{}; retrying once", e.message),
                    parent_call_id: ctx.parent_call_id.clone(),
                });
                tokio::time::sleep(RETRY_PAUSE).await;
                trace.attempts = 2;
                self.call_handler(entry, args, ctx, callbacks).await
            }
            outcome => outcome,
        }
    }

    /// Asks the ledger whether the call is within its limits (`Check`,
    /// counting nothing) or counts it (`Count`); a refusal is the call's
    /// `rate_limited` error.
    async fn limit(
        &self,
        ctx: &ToolContext,
        name: &str,
        limits: &RateLimits,
        how: Limit,
    ) -> Result<(), ToolError> {
        let outcome = match how {
            Limit::Check => self.ledger.check(ctx, name, limits).await,
            Limit::Count => self.ledger.admit(ctx, name, limits).await,
        };
        match outcome {
            Ok(()) => Ok(()),
            Err(LedgerError::Refused(r)) => Err(ToolError::new(ErrorCode::RateLimited, r.message)),
            Err(e @ LedgerError::Unavailable(_)) => {
                tracing::warn!(tool = name, error = %e, "rate-limit check failed");
                Err(ToolError::unavailable(format!(
                    "{name} could not check its rate limit; try again shortly"
                )))
            }
        }
    }

    /// The handler, under the tool's timeout, a panic caught.
    async fn call_handler(
        &self,
        entry: &ToolEntry,
        args: Value,
        ctx: &ToolContext,
        callbacks: &dyn Callbacks,
    ) -> Result<Value, ToolError> {
        let name = entry.name.as_str();
        let call = AssertUnwindSafe(entry.handler.call(args, ctx, callbacks)).catch_unwind();
        match tokio::time::timeout(entry.meta.timeout, call).await {
            Err(_) => Err(ToolError::new(
                ErrorCode::Timeout,
                format!(
                    "{name} did not finish within {} ms",
                    entry.meta.timeout.as_millis()
                ),
            )),
            Ok(Err(_panic)) => {
                tracing::error!(tool = name, "tool handler panicked");
                Err(ToolError::internal(format!(
                    "{name} failed unexpectedly; the error was logged"
                )))
            }
            Ok(Ok(result)) => result,
        }
    }

    /// Asks the gate about a call of a tool that requires it, under
    /// [`GATE_TIMEOUT`]; `None` when the call does not pass a gate. A gate
    /// that fails or is too slow lets the call run (`fail_open`).
    async fn consult_gate(
        &self,
        entry: &ToolEntry,
        args: &Value,
        ctx: &ToolContext,
    ) -> Option<(GateVerdict, Result<(), GateRefusal>)> {
        let gate = self.gate.as_ref().filter(|_| entry.meta.requires_gate)?;
        let name = entry.name.as_str();
        let call = GateCall { entry, args, ctx };
        let call_id = ctx.call_id.as_deref().unwrap_or("");
        let decision = match tokio::time::timeout(GATE_TIMEOUT, gate.check(&call)).await {
            Ok(Ok(decision)) => decision,
            Ok(Err(e)) => {
                tracing::warn!(tool = name, call_id, gate = "fail_open", reason = %e, "the eval gate failed; the call runs");
                return Some((GateVerdict::FailOpen, Ok(())));
            }
            Err(_) => {
                tracing::warn!(
                    tool = name,
                    call_id,
                    gate = "fail_open",
                    reason = "timeout",
                    "the eval gate did not answer within {} ms; the call runs",
                    GATE_TIMEOUT.as_millis()
                );
                return Some((GateVerdict::FailOpen, Ok(())));
            }
        };
        Some(match decision {
            GateDecision::Allow => {
                tracing::debug!(
                    tool = name,
                    call_id,
                    gate = "allow",
                    "the eval gate allowed the call"
                );
                (GateVerdict::Allow, Ok(()))
            }
            GateDecision::Deny { reason } => {
                tracing::info!(tool = name, call_id, gate = "deny", %reason, "the eval gate blocked the call");
                let message = format!("{name} was blocked by the eval gate: {reason}");
                (
                    GateVerdict::Deny,
                    Err(GateRefusal::Refused(ToolError::new(
                        ErrorCode::Blocked,
                        message,
                    ))),
                )
            }
            GateDecision::Ask { reason } => {
                tracing::info!(tool = name, call_id, gate = "ask", %reason, "the eval gate wants a person's approval");
                (GateVerdict::Ask, Err(GateRefusal::Ask(reason)))
            }
        })
    }
}

/// " after 2 attempts" where the handler ran twice.
fn tried(attempts: u32) -> String {
    if attempts > 1 {
        format!(" after {attempts} attempts")
    } else {
        String::new()
    }
}

/// Pause before the one retry of a call that failed transiently.
const RETRY_PAUSE: Duration = Duration::from_millis(200);

/// What the pipeline noted about one call on its way, for the audit
/// record and the result.
#[derive(Debug, Default)]
struct Trace {
    /// The gate step's verdict, when the call reached it.
    gate: Option<GateVerdict>,
    /// How often the handler ran (0 when it never did; the result and the
    /// audit record count such a call as one attempt).
    attempts: u32,
}

/// Why the gate step did not let a call through.
enum GateRefusal {
    /// A person must approve it first; the gate's reason.
    Ask(String),
    Refused(ToolError),
}

/// Checks `args` against the schema of `name`, naming every violation with
/// its JSON pointer.
fn check_arguments(
    name: &str,
    validator: &jsonschema::Validator,
    args: &Value,
) -> Result<(), ToolError> {
    let violations: Vec<String> = validator
        .iter_errors(args)
        .map(|e| {
            let at = e.instance_path().to_string();
            if at.is_empty() {
                e.to_string()
            } else {
                format!("{at}: {e}")
            }
        })
        .collect();
    if violations.is_empty() {
        return Ok(());
    }
    Err(ToolError::invalid(format!(
        "invalid arguments for {name}: {}",
        violations.join("; ")
    )))
}

/// Holds a call to the one document its context is scoped to: a missing
/// `document_id` becomes that document, another one is refused, and a tool
/// without the argument cannot be limited and is refused too. Checked here,
/// before the handler, so no tool has to remember it.
fn pin_document(
    name: &str,
    definition: &Value,
    args: &mut Value,
    document: uuid::Uuid,
) -> Result<(), ToolError> {
    let takes_document = definition
        .pointer("/parameters/properties/document_id")
        .is_some();
    let Some(map) = args.as_object_mut().filter(|_| takes_document) else {
        return Err(ToolError::new(
            ErrorCode::NotAvailable,
            format!(
                "tool {name} is not available here: this agent may read only document {document}"
            ),
        ));
    };
    match map.get("document_id") {
        None | Some(Value::Null) => {
            map.insert("document_id".into(), Value::String(document.to_string()));
            Ok(())
        }
        Some(Value::String(given)) if uuid::Uuid::parse_str(given).ok() == Some(document) => Ok(()),
        Some(given) => Err(ToolError::new(
            ErrorCode::PermissionDenied,
            format!(
                "document_id {} is out of reach: this agent may read only document {document}; leave document_id out or pass {document}",
                given
                    .as_str()
                    .map_or_else(|| given.to_string(), str::to_string)
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_scoped_call_is_pinned_to_its_document() {
        let doc = uuid::Uuid::from_u128(7);
        let other = uuid::Uuid::from_u128(8);
        let with_id =
            json!({ "parameters": { "properties": { "document_id": {}, "pattern": {} } } });
        let without = json!({ "parameters": { "properties": { "pattern": {} } } });
        // (definition, arguments, arguments after pinning or the error code and words)
        let check =
            |definition: &Value, args: Value, expected: Result<Value, (ErrorCode, &str)>| {
                let mut pinned = args.clone();
                let got = pin_document("tool_x", definition, &mut pinned, doc);
                match (got, expected) {
                    (Ok(()), Ok(want)) => assert_eq!(pinned, want, "{args}"),
                    (Err(e), Err((code, words))) => {
                        assert_eq!(e.code, code, "{args}: {e}");
                        assert!(e.message.contains(words), "{args}: {e}");
                    }
                    (got, want) => panic!("{args}: got {got:?}, expected {want:?}"),
                }
            };
        check(
            &with_id,
            json!({ "pattern": "a" }),
            Ok(json!({ "pattern": "a", "document_id": doc })),
        );
        check(
            &with_id,
            json!({ "document_id": null }),
            Ok(json!({ "document_id": doc })),
        );
        check(
            &with_id,
            json!({ "document_id": doc }),
            Ok(json!({ "document_id": doc })),
        );
        check(
            &with_id,
            json!({ "document_id": doc.to_string().to_uppercase() }),
            Ok(json!({ "document_id": doc.to_string().to_uppercase() })),
        );
        check(
            &with_id,
            json!({ "document_id": other }),
            Err((
                ErrorCode::PermissionDenied,
                &format!("document_id {other} is out of reach"),
            )),
        );
        check(
            &with_id,
            json!({ "document_id": 42 }),
            Err((ErrorCode::PermissionDenied, "out of reach")),
        );
        check(
            &with_id,
            json!({ "document_id": "not-a-uuid" }),
            Err((ErrorCode::PermissionDenied, "not-a-uuid")),
        );
        check(
            &without,
            json!({ "pattern": "a" }),
            Err((ErrorCode::NotAvailable, "tool tool_x is not available here")),
        );
        check(
            &with_id,
            json!([1]),
            Err((ErrorCode::NotAvailable, "may read only document")),
        );
    }
}
