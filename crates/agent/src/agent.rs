//! The loop: ask the model, stream its text, run the tools it calls, feed
//! the results back, ask again.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_openai::types::chat::{
    ChatCompletionMessageToolCall, ChatCompletionMessageToolCalls,
    ChatCompletionRequestAssistantMessage, ChatCompletionRequestAssistantMessageContent,
    ChatCompletionRequestMessage, ChatCompletionRequestSystemMessage,
    ChatCompletionRequestSystemMessageContent, ChatCompletionRequestToolMessage,
    ChatCompletionRequestToolMessageContent, ChatCompletionRequestUserMessage,
    ChatCompletionRequestUserMessageContent, ChatCompletionStreamOptions, ChatCompletionTools,
    CreateChatCompletionRequest, FinishReason as ModelFinish, FunctionCall,
};
use data_plane_registry::{
    Callbacks, ChannelCallbacks, OfferedTool, Registry, Report, ToolContext, ToolError, ToolEvent,
    ToolMode, ToolResult, forward_events,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::citations::Citations;
use crate::config::MaxTokensField;
use crate::model::{ChunkStream, ModelClient};
use crate::prompt::{PromptFacts, PromptTool};
use crate::repetition::RepetitionGuard;
use crate::resume::{Checkpoint, PlannedStep, Resume, ResumePlan, StepCall, interrupted_error};
use crate::textcalls::{self, Segment, StreamParser, TagLine, Tags};
use crate::{AgentConfig, AgentError, AgentEvent, EventSink};

/// Name under which an unreadable text-format call is fed back to the model
/// (it has no readable name of its own; the result says what went wrong).
const MALFORMED_CALL: &str = "unreadable_tool_call";

/// One conversation to continue.
#[derive(Debug, Clone, Default)]
pub struct ChatRequest {
    /// The conversation so far, in OpenAI's format.
    pub messages: Vec<ChatCompletionRequestMessage>,
    /// Lowers the configured step limit for this run.
    pub max_steps: Option<u32>,
    pub temperature: Option<f32>,
    /// Lowers the configured output limit of each model request (tokens).
    pub max_tokens: Option<u32>,
    /// Lowers the configured wall-clock deadline of the run.
    pub deadline: Option<Duration>,
    /// What the system prompt says about this run (space, date); `None`:
    /// every readable space, today.
    pub facts: Option<PromptFacts>,
    /// How many calls wait for a person's approval: while above 0 the
    /// deadline's clock stands still (a person reading a card is not the
    /// run taking long).
    pub waiting: Option<tokio::sync::watch::Receiver<usize>>,
}

/// Why a run ended with an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum FinishReason {
    /// The model answered without calling a tool.
    Stop,
    /// The model's answer was cut at its token limit.
    Length,
    /// The model still wanted tools when the last step was used; its last
    /// calls were not run.
    StepLimit,
    /// The token budget was spent; the last calls were not run.
    TokenBudget,
    /// The run's wall-clock deadline passed; what was streamed stands, a
    /// model request or tool still running was stopped.
    Deadline,
    /// The reply kept repeating itself and was cut; calls in it were not run.
    Repetition,
    /// The model answered with neither text nor a tool call, and again when
    /// asked once more.
    Empty,
}

/// Tokens the endpoint reported, summed over the steps.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
}

impl Usage {
    pub fn total(&self) -> u64 {
        self.prompt_tokens + self.completion_tokens
    }
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunOutcome {
    pub reason: FinishReason,
    /// Model requests made.
    pub steps: u32,
    pub usage: Usage,
    /// The text of the model's last answer (what a parent agent reports).
    pub text: String,
}

/// The model loop, shared by every request (and by nested agents with
/// their own configuration).
#[derive(Debug)]
pub struct Agent {
    config: AgentConfig,
    registry: Arc<Registry>,
    client: ModelClient,
    digests: SchemaDigests,
}

/// The text-call parser's digest of the offered tools' schemas, built once
/// for each set of offered tools and shared by every run offered the same
/// set: a run waiting on the model holds a parser, and the digest was about
/// a ninth of what an idle chat stream cost. A set is the same when its
/// names and definitions are: the definitions are mostly `Arc`s shared with
/// the registry, so the address answers first, and a definition a context
/// reshaped is compared by value. The most recently used sets are kept.
#[derive(Debug, Default)]
struct SchemaDigests(Mutex<Vec<(OfferedKey, Arc<textcalls::Schemas>)>>);

/// A set of offered tools as a digest's key: each one's name and definition.
type OfferedKey = Vec<(String, Arc<Value>)>;

/// Sets of offered tools whose digests are kept (profiles, discovery on or
/// off, a document scope reshaping a definition).
const DIGESTS_KEPT: usize = 16;

impl SchemaDigests {
    fn get(&self, offered: &[OfferedTool]) -> Arc<textcalls::Schemas> {
        let same = |key: &[(String, Arc<Value>)]| {
            key.len() == offered.len()
                && key.iter().zip(offered).all(|((name, def), t)| {
                    *name == t.name && (Arc::ptr_eq(def, &t.definition) || **def == *t.definition)
                })
        };
        let mut kept = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(i) = kept.iter().position(|(key, _)| same(key)) {
            let entry = kept.remove(i);
            let digest = entry.1.clone();
            kept.insert(0, entry);
            return digest;
        }
        let digest = Arc::new(textcalls::Schemas::of(schema_names(offered)));
        let key = offered
            .iter()
            .map(|t| (t.name.clone(), t.definition.clone()))
            .collect();
        kept.insert(0, (key, digest.clone()));
        kept.truncate(DIGESTS_KEPT);
        digest
    }
}

/// A call the model made, natively or as text, as it will be run.
#[derive(Debug, Clone)]
pub(crate) struct PlannedCall {
    pub(crate) id: String,
    pub(crate) name: String,
    /// The arguments as the model wrote them (fed back verbatim).
    pub(crate) raw_arguments: String,
    /// Parsed arguments, or why they could not be parsed.
    pub(crate) arguments: Result<Value, String>,
    /// How the model wrote the call in its text (`SEARCH: vacuum full`, or
    /// the name and arguments of another text form); `None` for a native
    /// call. In tags mode such a call's result goes back in a user message.
    pub(crate) written: Option<String>,
}

/// What one model request produced.
#[derive(Debug, Default)]
struct Turn {
    text: String,
    /// The reply as the model will read it back in tags mode: the text
    /// with the tag lines that were kept from the user.
    transcript: String,
    /// The transcript ends with a tag line kept from the user.
    after_tag: bool,
    native: BTreeMap<u32, PendingCall>,
    text_calls: Vec<PlannedCall>,
    malformed: Vec<(String, String)>,
    finish: Option<ModelFinish>,
    usage: Usage,
    /// Cut because it kept repeating itself.
    repeated: bool,
}

/// How far a run has come, kept outside the run's future so that the
/// deadline can report it after stopping the run.
#[derive(Debug, Default)]
struct Progress {
    steps: u32,
    usage: Usage,
    /// Text of the current step so far.
    text: String,
    /// The passages the run's tools returned and the ones its answer
    /// cited; `None` when the run has no system prompt of ours to ask for
    /// citations (a sub-agent, a bare conversation).
    citations: Option<Citations>,
}

impl Progress {
    fn outcome(&self, reason: FinishReason) -> RunOutcome {
        RunOutcome {
            reason,
            steps: self.steps,
            usage: self.usage,
            text: self.text.clone(),
        }
    }
}

/// Resolves once `limit` has passed, not counting the time spent while
/// `waiting` is above 0.
async fn deadline_passes(limit: Duration, waiting: Option<tokio::sync::watch::Receiver<usize>>) {
    let Some(mut waiting) = waiting else {
        return tokio::time::sleep(limit).await;
    };
    let mut end = tokio::time::Instant::now() + limit;
    loop {
        if *waiting.borrow_and_update() > 0 {
            let paused = tokio::time::Instant::now();
            // The sender gone: nobody waits any more.
            let _ = waiting.wait_for(|n| *n == 0).await;
            end += paused.elapsed();
            continue;
        }
        tokio::select! {
            () = tokio::time::sleep_until(end) => return,
            changed = waiting.changed() => {
                if changed.is_err() {
                    return tokio::time::sleep_until(end).await;
                }
            }
        }
    }
}

fn lock(progress: &Mutex<Progress>) -> std::sync::MutexGuard<'_, Progress> {
    progress.lock().unwrap_or_else(PoisonError::into_inner)
}

#[derive(Debug, Default)]
struct PendingCall {
    id: String,
    name: String,
    arguments: String,
}

/// `id`, or when the run used it already, `id_2`, `id_3`... (recorded as used).
fn unique_id(id: &str, used: &mut HashSet<String>) -> String {
    let mut unique = id.to_string();
    let mut n = 1;
    while used.contains(&unique) {
        n += 1;
        unique = format!("{id}_{n}");
    }
    used.insert(unique.clone());
    unique
}

fn new_call_id() -> String {
    format!("call_{}", uuid::Uuid::new_v4().simple())
}

impl Agent {
    pub fn new(config: AgentConfig, registry: Arc<Registry>) -> Result<Agent, AgentError> {
        if config.max_steps == 0 {
            return Err(AgentError::Config("max_steps must be at least 1".into()));
        }
        let client = ModelClient::new(&config)?;
        Ok(Agent {
            config,
            registry,
            client,
            digests: SchemaDigests::default(),
        })
    }

    pub fn config(&self) -> &AgentConfig {
        &self.config
    }

    /// Runs the conversation until the model answers, a limit is reached
    /// (steps, tokens, the deadline), the reply loops, `cancel` fires or
    /// `sink` stops listening. Offers what the registry offers up front in
    /// `ctx` (the tools its allow-list leaves, or the discovery meta-tools)
    /// and runs every call under `ctx`; dropping the returned future stops
    /// the model request and every running tool at once.
    pub async fn run(
        &self,
        request: ChatRequest,
        ctx: &ToolContext,
        sink: &dyn EventSink,
        cancel: &CancellationToken,
    ) -> Result<RunOutcome, AgentError> {
        self.run_from(request, None, ctx, sink, cancel).await
    }

    /// Continues a run that another server began, from what it recorded
    /// (`resume`, as [`Agent::resume_plan`] read it into `plan`): the
    /// conversation is rebuilt from the recorded steps and results without
    /// asking the model or running a tool again; calls that were cut off
    /// run again or end `interrupted` as the plan says; then the loop goes
    /// on as [`Agent::run`] does. The turn's deadline counts from now.
    pub async fn resume(
        &self,
        request: ChatRequest,
        resume: Resume,
        plan: ResumePlan,
        ctx: &ToolContext,
        sink: &dyn EventSink,
        cancel: &CancellationToken,
    ) -> Result<RunOutcome, AgentError> {
        self.run_from(request, Some((resume, plan)), ctx, sink, cancel)
            .await
    }

    /// How a run taken over goes on: the step asked (again), and which of
    /// the calls that had begun without a recorded result run again
    /// (idempotent by their annotations, or never reached their tool) and
    /// which end `interrupted`.
    pub fn resume_plan(&self, resume: &Resume, ctx: &ToolContext) -> ResumePlan {
        let planned = resume.planned();
        let last = planned.last();
        let (step, asked_before, asked_again) = match (resume.asking(), last) {
            (Some((step, again)), _) => (step, true, again),
            (None, Some(last)) => (last.step + 1, false, last.asked_again),
            (None, None) => (1, false, false),
        };
        let mut plan = ResumePlan {
            step,
            asked_before,
            asked_again,
            ..ResumePlan::default()
        };
        // Only the last planned step can have calls without results: the
        // next step is asked once all of them returned.
        let Some(last) = last else {
            return plan;
        };
        let began = resume.began(last.step);
        for call in &last.calls {
            let started = resume.started.contains(&call.id) || began.contains(call.id.as_str());
            if resume.results.contains_key(&call.id) || !started {
                continue;
            }
            // A call with unreadable arguments or no such tool never
            // reached one.
            let annotations = call
                .arguments
                .as_ref()
                .and_then(|args| self.registry.call_annotations(&call.name, args, ctx));
            let again =
                annotations.is_none_or(|a| a.idempotent) || resume.not_run.contains(&call.id);
            if again {
                plan.rerun.push(call.id.clone());
            } else {
                plan.interrupted.push(call.id.clone());
            }
        }
        plan
    }

    async fn run_from(
        &self,
        request: ChatRequest,
        resume: Option<(Resume, ResumePlan)>,
        ctx: &ToolContext,
        sink: &dyn EventSink,
        cancel: &CancellationToken,
    ) -> Result<RunOutcome, AgentError> {
        let deadline = match (self.config.turn_deadline, request.deadline) {
            (Some(configured), Some(asked)) => Some(asked.min(configured)),
            (configured, asked) => configured.or(asked),
        };
        let waiting = request.waiting.clone();
        let expired = async move {
            match deadline {
                Some(limit) => deadline_passes(limit, waiting).await,
                None => std::future::pending().await,
            }
        };
        let citations = self.config.system_prompt.is_some().then(|| {
            // Numbers already used in the conversation stay theirs.
            Citations::after_history(&serde_json::to_string(&request.messages).unwrap_or_default())
        });
        let progress = Mutex::new(Progress {
            citations,
            ..Progress::default()
        });
        tokio::select! {
            biased;
            _ = cancel.cancelled() => Err(AgentError::Cancelled),
            () = expired => {
                tracing::info!(deadline_secs = deadline.map(|d| d.as_secs_f64()), "the run reached its deadline");
                Ok(lock(&progress).outcome(FinishReason::Deadline))
            }
            outcome = self.run_steps(request, resume, ctx, sink, &progress) => outcome,
        }
    }

    /// The loop: ask the model, end when its answer says so, run its
    /// calls, hand the results back, ask again. A run taken over starts
    /// after the steps it recorded.
    async fn run_steps(
        &self,
        request: ChatRequest,
        resume: Option<(Resume, ResumePlan)>,
        ctx: &ToolContext,
        sink: &dyn EventSink,
        progress: &Mutex<Progress>,
    ) -> Result<RunOutcome, AgentError> {
        let mut plan = self.plan(request, ctx)?;
        // Call ids the model gave in this run: some models number their
        // calls afresh each step, and a call must stay one call in the
        // events, the approvals and the conversation.
        let mut used_ids: HashSet<String> = HashSet::new();
        let mut usage = Usage::default();
        let mut step = 0;
        let mut asked_again_after_empty = false;
        if let Some((resume, resume_plan)) = resume {
            let at = self
                .replay(&mut plan, &resume, &resume_plan, ctx, sink, progress)
                .await?;
            used_ids = at.used_ids;
            usage = at.usage;
            asked_again_after_empty = resume_plan.asked_again;
            step = resume_plan.step - 1;
        }
        loop {
            step += 1;
            {
                let mut p = lock(progress);
                p.steps = step;
                p.usage = usage;
                p.text.clear();
            }
            let asking = Checkpoint::Asking {
                step,
                asked_again: asked_again_after_empty,
            };
            if !sink.checkpoint(&asking).await {
                return Err(AgentError::Cancelled);
            }
            let opened = self.open_step(&mut plan).await;
            let mut turn = self
                .turn(
                    opened?,
                    &plan.offered,
                    &plan.tags,
                    sink,
                    progress,
                    &mut used_ids,
                )
                .await?;
            let transcript = std::mem::take(&mut turn.transcript);
            usage.prompt_tokens += turn.usage.prompt_tokens;
            usage.completion_tokens += turn.usage.completion_tokens;
            lock(progress).usage = usage;
            let (finish, repeated) = (turn.finish, turn.repeated);
            let (text, calls, malformed) = turn.into_calls();
            let answered = calls.is_empty() && malformed.is_empty();
            if answered
                && text.trim().is_empty()
                && finish != Some(ModelFinish::Length)
                && !repeated
                && !asked_again_after_empty
                && step < plan.max_steps
            {
                asked_again_after_empty = true;
                tracing::info!(step, "the model answered nothing; asking once more");
                continue;
            }
            let end = if repeated {
                Some(FinishReason::Repetition)
            } else if answered {
                Some(answer_reason(finish, &text))
            } else {
                self.limit_reached(step, plan.max_steps, usage)
            };
            if let Some(reason) = end {
                return Ok(RunOutcome {
                    reason,
                    steps: step,
                    usage,
                    text,
                });
            }
            let planned = Checkpoint::Planned(PlannedStep {
                step,
                text: text.clone(),
                transcript: transcript.clone(),
                calls: calls.iter().map(StepCall::from).collect(),
                malformed: malformed.clone(),
                usage,
                asked_again: asked_again_after_empty,
            });
            if !sink.checkpoint(&planned).await {
                return Err(AgentError::Cancelled);
            }
            let mut results = self
                .execute_all(step, &calls, ctx, sink, &HashSet::new())
                .await?;
            number_passages(progress, &mut results);
            let answer = Answer {
                text,
                transcript,
                malformed,
            };
            feed_back(&mut plan, answer, &calls, results);
        }
    }

    /// Rebuilds a run taken over up to the step it goes on from: each
    /// recorded step's answer and results go back into the conversation
    /// as they did the first time (passages numbered the same way, the
    /// citations already made counted), and the last step's calls that had
    /// no result are settled as `plan` says. Runs no tool that had
    /// returned, and asks the model nothing.
    async fn replay(
        &self,
        plan: &mut Plan,
        resume: &Resume,
        resume_plan: &ResumePlan,
        ctx: &ToolContext,
        sink: &dyn EventSink,
        progress: &Mutex<Progress>,
    ) -> Result<Replayed, AgentError> {
        let steps = resume.planned();
        let mut at = Replayed::default();
        for (i, step) in steps.iter().enumerate() {
            let last = i + 1 == steps.len();
            let calls: Vec<PlannedCall> = step.calls.iter().map(PlannedCall::from).collect();
            at.used_ids.extend(calls.iter().map(|c| c.id.clone()));
            at.usage = step.usage;
            if let Some(citations) = lock(progress).citations.as_mut() {
                // Citations made by this step's text were reported then.
                let _ = citations.scan(&step.text);
                citations.end_of_text();
            }
            // The calls to run now: in the last step, those never started
            // and those the plan runs again.
            let began = resume.began(step.step);
            let to_run: Vec<PlannedCall> = calls
                .iter()
                .filter(|c| {
                    let started = resume.started.contains(&c.id) || began.contains(c.id.as_str());
                    last && !resume.results.contains_key(&c.id)
                        && (!started || resume_plan.rerun.contains(&c.id))
                })
                .cloned()
                .collect();
            let mut ran: HashMap<String, ToolResult> = HashMap::new();
            if !to_run.is_empty() {
                let announced: HashSet<String> = to_run
                    .iter()
                    .filter(|c| resume.started.contains(&c.id))
                    .map(|c| c.id.clone())
                    .collect();
                let results = self
                    .execute_all(step.step, &to_run, ctx, sink, &announced)
                    .await?;
                ran = to_run.iter().map(|c| c.id.clone()).zip(results).collect();
            }
            let mut results = Vec::with_capacity(calls.len());
            for call in &calls {
                let result = match (resume.results.get(&call.id), ran.remove(&call.id)) {
                    (Some(recorded), _) => recorded.clone(),
                    (None, Some(result)) => result,
                    (None, None) => {
                        let result = ToolResult::failed(
                            &call.name,
                            &call.id,
                            &interrupted_error(&call.name),
                            0,
                        );
                        if last {
                            // Said on the stream: the call's card ends.
                            let event = ToolEvent::ToolResult {
                                call_id: call.id.clone(),
                                name: call.name.clone(),
                                result: result.clone(),
                            };
                            if !sink.emit(event.into()).await {
                                return Err(AgentError::Cancelled);
                            }
                        }
                        result
                    }
                };
                results.push(result);
            }
            number_passages(progress, &mut results);
            let answer = Answer {
                text: step.text.clone(),
                transcript: step.transcript.clone(),
                malformed: step.malformed.clone(),
            };
            feed_back(plan, answer, &calls, results);
        }
        Ok(at)
    }

    /// What every step of a run shares: the tools offered (natively or as
    /// tags), the conversation with the system prompt in front, the limits.
    fn plan(&self, request: ChatRequest, ctx: &ToolContext) -> Result<Plan, AgentError> {
        if request.messages.is_empty() {
            return Err(AgentError::InvalidRequest("messages is empty".into()));
        }
        let entries = self.registry.available_entries(ctx);
        // Tags mode: no `tools` field; the system prompt teaches the tags,
        // and lines written in them are the calls.
        let tags_mode = ctx.tool_mode == ToolMode::Tags;
        let tags = if tags_mode {
            Tags::new(
                entries
                    .iter()
                    .filter_map(|e| e.tag.clone().map(|tag| (e.name.clone(), tag))),
            )
        } else {
            Tags::default()
        };
        let prompt_block = if tags_mode {
            let mut block = self.registry.prompt_block(ctx);
            // Tools with no one-line form stay reachable through the
            // `<tool_call>` text format, when text calls are read.
            if self.config.text_calls {
                let rest = untagged_block(&entries, ctx);
                if !rest.is_empty() {
                    if !block.is_empty() {
                        block.push_str("\n\n");
                    }
                    block.push_str(&rest);
                }
            }
            block
        } else {
            String::new()
        };
        // What the model is offered up front: the tools, or the discovery
        // meta-tools that find and run them.
        let offered = self.registry.offered(ctx);
        // What a run holds while it waits on the model is what an idle
        // stream costs: the definitions stay shared with the registry, and
        // the typed request is built for each step and dropped once sent.
        let mut messages = request.messages;
        // Ours first, then the request's own system messages, if any.
        if let Some(template) = &self.config.system_prompt {
            let prompt_tools = PromptTool::offered(&offered);
            let facts = request.facts.unwrap_or_else(PromptFacts::today);
            let mut system = template.render(&facts, &prompt_tools);
            if !prompt_block.is_empty() {
                system.push_str("\n\n");
                system.push_str(&prompt_block);
            }
            messages.insert(0, system_message(system));
        } else if !prompt_block.is_empty() {
            messages.insert(0, system_message(prompt_block));
        }
        let max_steps = request
            .max_steps
            .map_or(self.config.max_steps, |m| m.clamp(1, self.config.max_steps));
        let max_tokens = match (self.config.max_completion_tokens, request.max_tokens) {
            (Some(configured), Some(asked)) => Some(asked.min(configured)),
            (configured, asked) => configured.or(asked),
        };
        Ok(Plan {
            tags_mode,
            tags,
            offered,
            messages,
            max_steps,
            max_tokens,
            temperature: request.temperature,
        })
    }

    /// Sends the conversation to the model, streaming. The request (the
    /// tools' typed copies, the model's name) is dropped once it is sent,
    /// before the answer streams.
    async fn open_step(&self, plan: &mut Plan) -> Result<ChunkStream, AgentError> {
        let tools = if plan.tags_mode {
            Vec::new()
        } else {
            openai_tools(&plan.offered)?
        };
        let field = self.config.max_tokens_field;
        #[allow(deprecated)] // `max_tokens` is what some servers read
        let model_request = CreateChatCompletionRequest {
            model: self.config.model.clone(),
            // Lent to the request and taken back once it is sent.
            messages: std::mem::take(&mut plan.messages),
            stream: Some(true),
            stream_options: Some(ChatCompletionStreamOptions {
                include_usage: Some(true),
                include_obfuscation: None,
            }),
            tools: (!tools.is_empty()).then_some(tools),
            temperature: plan.temperature,
            max_completion_tokens: plan
                .max_tokens
                .filter(|_| field == MaxTokensField::MaxCompletionTokens),
            max_tokens: plan
                .max_tokens
                .filter(|_| field == MaxTokensField::MaxTokens),
            ..Default::default()
        };
        let opened = self.client.open(&model_request).await;
        plan.messages = model_request.messages;
        opened
    }

    /// The limit a step that still wants tools has reached, if any: its
    /// calls are then not run.
    fn limit_reached(&self, step: u32, max_steps: u32, usage: Usage) -> Option<FinishReason> {
        if step >= max_steps {
            return Some(FinishReason::StepLimit);
        }
        self.config
            .token_budget
            .is_some_and(|budget| usage.total() >= budget)
            .then_some(FinishReason::TokenBudget)
    }

    /// One model request, streamed: text to the sink as it comes, argument
    /// fragments as they come, calls assembled by index.
    async fn turn(
        &self,
        mut stream: ChunkStream,
        offered: &[OfferedTool],
        tags: &Tags,
        sink: &dyn EventSink,
        progress: &Mutex<Progress>,
        used_ids: &mut HashSet<String>,
    ) -> Result<Turn, AgentError> {
        let mut parser = StreamParser::new(Vec::new())
            .shared_schemas(self.digests.get(offered))
            .tags(tags.clone())
            .text_calls(self.config.text_calls)
            .think_start(self.config.think_start);
        let mut turn = Turn::default();
        let mut guard = RepetitionGuard::default();
        'chunks: while let Some(chunk) = stream.next().await? {
            if let Some(u) = &chunk.usage {
                turn.usage.prompt_tokens = u64::from(u.prompt_tokens);
                turn.usage.completion_tokens = u64::from(u.completion_tokens);
            }
            // We ask for one choice; a server sending more is followed on the first.
            for choice in chunk.choices.iter().filter(|c| c.index == 0) {
                if let Some(text) = &choice.delta.content {
                    for segment in parser.push(text) {
                        turn.take(segment, sink, progress).await?;
                    }
                    if guard.push(text) {
                        tracing::info!("the reply repeats itself; cutting it");
                        turn.repeated = true;
                        break 'chunks;
                    }
                }
                for delta in choice.delta.tool_calls.iter().flatten() {
                    let pending = turn.native.entry(delta.index).or_default();
                    if let Some(id) = delta.id.as_deref().filter(|id| !id.is_empty())
                        && pending.id.is_empty()
                    {
                        pending.id = unique_id(id, used_ids);
                    }
                    let Some(function) = &delta.function else {
                        continue;
                    };
                    // Servers that repeat the name on every fragment must not double it.
                    if let Some(name) = &function.name
                        && pending.name != *name
                    {
                        pending.name.push_str(name);
                    }
                    if let Some(fragment) = function.arguments.as_deref().filter(|a| !a.is_empty())
                    {
                        pending.arguments.push_str(fragment);
                        if pending.id.is_empty() {
                            pending.id = new_call_id();
                        }
                        // A remote tool is called as `module__tool` and
                        // named `module.tool` in every event.
                        let name = match self.registry.get(&pending.name) {
                            Some(entry) if entry.module.is_some() => entry.name.clone(),
                            _ => pending.name.clone(),
                        };
                        let event = AgentEvent::ToolCallDelta {
                            call_id: pending.id.clone(),
                            index: delta.index,
                            name,
                            arguments_delta: fragment.to_string(),
                        };
                        if !sink.emit(event).await {
                            return Err(AgentError::Cancelled);
                        }
                    }
                }
                if let Some(finish) = choice.finish_reason {
                    turn.finish = Some(finish);
                }
            }
        }
        // Closes the model's connection now when the reply was cut.
        drop(stream);
        for segment in parser.finish() {
            turn.take(segment, sink, progress).await?;
        }
        if let Some(citations) = lock(progress).citations.as_mut() {
            citations.end_of_text();
        }
        Ok(turn)
    }

    /// Runs the calls; consecutive read-only calls run together (an
    /// execute_tool call counts as the tool it runs). Results come back in
    /// the calls' order.
    /// Calls in `announced` had their start reported by the server that
    /// began the run: their `tool_call` is not reported twice.
    async fn execute_all(
        &self,
        step: u32,
        calls: &[PlannedCall],
        ctx: &ToolContext,
        sink: &dyn EventSink,
        announced: &HashSet<String>,
    ) -> Result<Vec<ToolResult>, AgentError> {
        let read_only = |c: &PlannedCall| {
            c.arguments.as_ref().is_ok_and(|args| {
                self.registry
                    .call_annotations(&c.name, args, ctx)
                    .is_some_and(|a| a.read_only)
            })
        };
        let mut results = Vec::with_capacity(calls.len());
        let mut start = 0;
        while start < calls.len() {
            let mut end = start + 1;
            if read_only(&calls[start]) {
                while end < calls.len() && read_only(&calls[end]) {
                    end += 1;
                }
            }
            // Written before any of them can have an effect.
            let running = Checkpoint::Running {
                step,
                calls: calls[start..end].iter().map(|c| c.id.clone()).collect(),
            };
            if !sink.checkpoint(&running).await {
                return Err(AgentError::Cancelled);
            }
            let (callbacks, reports) = ChannelCallbacks::<Report>::channel();
            let batch = futures::future::join_all(
                calls[start..end]
                    .iter()
                    .map(|call| self.execute_one(call, ctx, &callbacks)),
            );
            let batch_results = forward_events(batch, reports, |report| match report {
                Report::Event(ToolEvent::ToolCall { call_id, .. })
                    if announced.contains(&call_id) =>
                {
                    Box::pin(std::future::ready(true))
                }
                Report::Event(event) => sink.emit(event.into()),
                Report::Log(line) => {
                    sink.log(line);
                    Box::pin(std::future::ready(true))
                }
            })
            .await
            .ok_or(AgentError::Cancelled)?;
            results.extend(batch_results);
            start = end;
        }
        Ok(results)
    }

    /// One call through the registry, which retries it once when it failed
    /// in a way a retry may fix and the tool is idempotent (calling it
    /// twice does no more than calling it once; for execute_tool, the tool
    /// it runs): the retry stays inside the one call, with one id.
    async fn execute_one(
        &self,
        call: &PlannedCall,
        ctx: &ToolContext,
        callbacks: &ChannelCallbacks<Report>,
    ) -> ToolResult {
        let args = match &call.arguments {
            Ok(args) => args,
            Err(reason) => {
                callbacks.emit(ToolEvent::ToolCall {
                    call_id: call.id.clone(),
                    name: call.name.clone(),
                    arguments: Value::String(call.raw_arguments.clone()),
                });
                let error = ToolError::invalid(format!(
                    "the arguments of {} are not a JSON object: {reason}",
                    call.name
                ));
                let result = ToolResult::failed(&call.name, &call.id, &error, 0);
                callbacks.emit(ToolEvent::ToolResult {
                    call_id: call.id.clone(),
                    name: call.name.clone(),
                    result: result.clone(),
                });
                return result;
            }
        };
        let ctx = ctx.clone().with_call_id(call.id.clone()).with_retry_once();
        self.registry
            .execute_tool(&call.name, args.clone(), &ctx, callbacks)
            .await
    }
}

impl Turn {
    async fn take(
        &mut self,
        segment: Segment,
        sink: &dyn EventSink,
        progress: &Mutex<Progress>,
    ) -> Result<(), AgentError> {
        match segment {
            Segment::Text(text) => {
                if text.is_empty() {
                    return Ok(());
                }
                self.text.push_str(&text);
                // Text right after a kept-back tag line starts a line of its own.
                if std::mem::take(&mut self.after_tag) && !text.starts_with(['\n', '\r']) {
                    self.transcript.push('\n');
                }
                self.transcript.push_str(&text);
                let cited = {
                    let mut p = lock(progress);
                    p.text.push_str(&text);
                    p.citations
                        .as_mut()
                        .map(|c| c.scan(&text))
                        .unwrap_or_default()
                };
                if !sink.emit(AgentEvent::TextDelta { text }).await {
                    return Err(AgentError::Cancelled);
                }
                for citation in cited {
                    if !sink.emit(AgentEvent::Citation(citation)).await {
                        return Err(AgentError::Cancelled);
                    }
                }
            }
            Segment::Call(call) => {
                let arguments = match call.arguments {
                    Value::Null => json!({}),
                    other => other,
                };
                let written = format!("{} {arguments}", call.name);
                // In tags mode the model reads its reply back as text: the
                // call goes back in the form it was taught, where it was.
                self.transcript_line(&format!(
                    "<tool_call>{}</tool_call>",
                    json!({ "name": call.name, "arguments": arguments })
                ));
                self.text_calls.push(PlannedCall {
                    id: new_call_id(),
                    name: call.name,
                    raw_arguments: arguments.to_string(),
                    arguments: if arguments.is_object() {
                        Ok(arguments)
                    } else {
                        Err(format!("expected an object, got {arguments}"))
                    },
                    written: Some(written),
                });
            }
            Segment::Malformed { raw, reason } => {
                self.transcript_line(&raw);
                self.malformed.push((raw, reason));
            }
            Segment::Tag(TagLine { line, call, shown }) => {
                if !shown {
                    // The model reads its own line back where it wrote it.
                    self.transcript_line(&line);
                }
                match call {
                    Ok(call) => {
                        let raw_arguments = call.arguments.to_string();
                        self.text_calls.push(PlannedCall {
                            id: new_call_id(),
                            name: call.name,
                            raw_arguments,
                            arguments: Ok(call.arguments),
                            written: Some(line),
                        });
                    }
                    Err(reason) => self.malformed.push((line, reason)),
                }
            }
        }
        Ok(())
    }

    /// Puts `line`, kept from the user, back in the transcript on a line of
    /// its own.
    fn transcript_line(&mut self, line: &str) {
        if !self.transcript.is_empty() && !self.transcript.ends_with('\n') {
            self.transcript.push('\n');
        }
        self.transcript
            .push_str(line.trim_end_matches(['\r', '\n']));
        self.after_tag = true;
    }

    /// The visible text, the calls to run (native first, in index order,
    /// then those written as text), and the unreadable ones.
    fn into_calls(self) -> (String, Vec<PlannedCall>, Vec<(String, String)>) {
        let mut calls: Vec<PlannedCall> = self
            .native
            .into_values()
            .map(|p| {
                let raw = if p.arguments.trim().is_empty() {
                    "{}".to_string()
                } else {
                    p.arguments
                };
                let arguments = match serde_json::from_str::<Value>(&raw) {
                    Ok(v) if v.is_object() => Ok(v),
                    Ok(v) => Err(format!("expected an object, got {v}")),
                    Err(e) => Err(format!("not valid JSON ({e})")),
                };
                PlannedCall {
                    id: if p.id.is_empty() { new_call_id() } else { p.id },
                    name: p.name,
                    raw_arguments: raw,
                    arguments,
                    written: None,
                }
            })
            .collect();
        calls.extend(self.text_calls);
        (self.text, calls, self.malformed)
    }
}

/// A step's answer as it goes back into the conversation.
struct Answer {
    text: String,
    transcript: String,
    malformed: Vec<(String, String)>,
}

/// Where a replayed run stands after its recorded steps.
#[derive(Default)]
struct Replayed {
    used_ids: HashSet<String>,
    usage: Usage,
}

/// The step's answer and its calls' results into the conversation, in the
/// run's mode.
fn feed_back(plan: &mut Plan, answer: Answer, calls: &[PlannedCall], results: Vec<ToolResult>) {
    let Answer {
        text,
        transcript,
        malformed,
    } = answer;
    if plan.tags_mode {
        feed_back_tags(
            &mut plan.messages,
            transcript,
            calls,
            results,
            malformed,
            &plan.tags,
        );
    } else {
        feed_back_native(
            &mut plan.messages,
            text,
            calls,
            results,
            malformed,
            &plan.tags,
        );
    }
}

/// What the steps of one run share (see [`Agent::plan`]).
struct Plan {
    tags_mode: bool,
    tags: Tags,
    offered: Vec<OfferedTool>,
    messages: Vec<ChatCompletionRequestMessage>,
    max_steps: u32,
    max_tokens: Option<u32>,
    temperature: Option<f32>,
}

/// Why a step that called no tool ended the run.
fn answer_reason(finish: Option<ModelFinish>, text: &str) -> FinishReason {
    if finish == Some(ModelFinish::Length) {
        FinishReason::Length
    } else if text.trim().is_empty() {
        FinishReason::Empty
    } else {
        FinishReason::Stop
    }
}

/// The step's answer and its calls' results, as the conversation goes on
/// with native tool calls: the assistant message with its calls (and the
/// malformed ones, under a name no tool has), then one tool message each.
fn feed_back_native(
    messages: &mut Vec<ChatCompletionRequestMessage>,
    text: String,
    calls: &[PlannedCall],
    results: Vec<ToolResult>,
    malformed: Vec<(String, String)>,
    tags: &Tags,
) {
    let mut tool_calls: Vec<ChatCompletionMessageToolCalls> = calls
        .iter()
        .map(|c| native_call(&c.id, &c.name, &c.raw_arguments))
        .collect();
    let malformed: Vec<(String, String)> = malformed
        .into_iter()
        .map(|(raw, reason)| (new_call_id(), format!("{reason} (in {raw:?})")))
        .collect();
    tool_calls.extend(
        malformed
            .iter()
            .map(|(id, _)| native_call(id, MALFORMED_CALL, "{}")),
    );
    messages.push(ChatCompletionRequestMessage::Assistant(
        ChatCompletionRequestAssistantMessage {
            content: (!text.is_empty())
                .then_some(ChatCompletionRequestAssistantMessageContent::Text(text)),
            tool_calls: Some(tool_calls),
            ..Default::default()
        },
    ));
    for (call, result) in calls.iter().zip(results) {
        messages.push(tool_message(&call.id, result_for_model(&result, tags)));
    }
    for (id, reason) in &malformed {
        let error = ToolError::invalid(format!(
            "your tool call could not be read: {reason}; write it again with a valid tool name and a JSON object of arguments"
        ));
        // Written again, the call may well succeed.
        let result = ToolResult::failed(MALFORMED_CALL, id, &error, 0).retryable(true);
        messages.push(tool_message(id, own_failure_for_model(&result)));
    }
}

/// Tags mode: the model's reply goes back as it wrote it (tag lines
/// included) with any native calls it still made, their results as
/// tool messages; the results of the calls it wrote as text, and what
/// could not be read, follow in one user message, since a model without
/// function calling has no use for tool messages.
fn feed_back_tags(
    messages: &mut Vec<ChatCompletionRequestMessage>,
    transcript: String,
    calls: &[PlannedCall],
    results: Vec<ToolResult>,
    malformed: Vec<(String, String)>,
    tags: &Tags,
) {
    let native: Vec<ChatCompletionMessageToolCalls> = calls
        .iter()
        .filter(|c| c.written.is_none())
        .map(|c| native_call(&c.id, &c.name, &c.raw_arguments))
        .collect();
    messages.push(ChatCompletionRequestMessage::Assistant(
        ChatCompletionRequestAssistantMessage {
            content: (!transcript.is_empty()).then_some(
                ChatCompletionRequestAssistantMessageContent::Text(transcript),
            ),
            tool_calls: (!native.is_empty()).then_some(native),
            ..Default::default()
        },
    ));
    let mut parts = Vec::new();
    for (call, result) in calls.iter().zip(results) {
        let body = result_for_model(&result, tags);
        match &call.written {
            None => messages.push(tool_message(&call.id, body)),
            Some(written) => parts.push(format!("Results of {written}:\n{body}")),
        }
    }
    for (raw, reason) in malformed {
        parts.push(format!(
            "Your call {raw:?} could not be read: {reason}. Write it again in one of the forms you were given."
        ));
    }
    if !parts.is_empty() {
        messages.push(ChatCompletionRequestMessage::User(
            ChatCompletionRequestUserMessage {
                content: ChatCompletionRequestUserMessageContent::Text(parts.join("\n\n")),
                name: None,
            },
        ));
    }
}

fn native_call(id: &str, name: &str, arguments: &str) -> ChatCompletionMessageToolCalls {
    ChatCompletionMessageToolCalls::Function(ChatCompletionMessageToolCall {
        id: id.to_string(),
        function: FunctionCall {
            name: name.to_string(),
            arguments: arguments.to_string(),
        },
    })
}

/// What a model in tags mode is told about the offered tools that have no
/// tag: one line each, `name(argument, optional?) — what it does`, and how
/// to write a call to them as text.
fn untagged_block(
    entries: &[std::sync::Arc<data_plane_registry::ToolEntry>],
    ctx: &ToolContext,
) -> String {
    let lines: Vec<String> = entries
        .iter()
        .filter(|e| e.tag.is_none())
        .map(|e| {
            let definition = e.definition_for(ctx);
            let parameters = &definition["parameters"];
            let required: Vec<&str> = parameters["required"]
                .as_array()
                .map(|r| r.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let arguments: Vec<String> = parameters["properties"]
                .as_object()
                .map(|p| {
                    p.keys()
                        .map(|k| {
                            if required.contains(&k.as_str()) {
                                k.clone()
                            } else {
                                format!("{k}?")
                            }
                        })
                        .collect()
                })
                .unwrap_or_default();
            format!(
                "{}({}) — {}",
                definition["name"].as_str().unwrap_or(&e.name),
                arguments.join(", "),
                e.summary
            )
        })
        .collect();
    if lines.is_empty() {
        return String::new();
    }
    format!(
        "Tools without a one-line form (arguments marked ? are optional):\n{}\n\n\
         To call one, write on a line of its own \
         <tool_call>{{\"name\": \"TOOL\", \"arguments\": {{...}}}}</tool_call> \
         with the arguments as a JSON object, then stop and wait for the result.",
        lines.join("\n")
    )
}

fn system_message(content: String) -> ChatCompletionRequestMessage {
    ChatCompletionRequestMessage::System(ChatCompletionRequestSystemMessage {
        content: ChatCompletionRequestSystemMessageContent::Text(content),
        name: None,
    })
}

/// Numbers the passages of the step's results for citing, before the
/// model reads them.
fn number_passages(progress: &Mutex<Progress>, results: &mut [ToolResult]) {
    if let Some(citations) = lock(progress).citations.as_mut() {
        for result in results {
            citations.number(result);
        }
    }
}

fn tool_message(call_id: &str, content: String) -> ChatCompletionRequestMessage {
    ChatCompletionRequestMessage::Tool(ChatCompletionRequestToolMessage {
        content: ChatCompletionRequestToolMessageContent::Text(content),
        tool_call_id: call_id.to_string(),
    })
}

/// The result as the model reads it: data or the error, without the
/// bookkeeping (call id, duration) it has no use for.
///
/// Data and errors may quote documents and web pages: they come framed as
/// untrusted, with any tool-call markup in them made inert (in tags mode,
/// lines opening with an offered tag too), so that the model quoting them
/// cannot call a tool.
fn result_for_model(result: &ToolResult, tags: &Tags) -> String {
    let inert = |value: Value| {
        let value = textcalls::neutralise_value(&value);
        if tags.is_empty() {
            value
        } else {
            tags.neutralise_value(&value)
        }
    };
    let body = if result.success {
        json!({
            "success": true,
            "notice": textcalls::UNTRUSTED_NOTICE,
            "data": inert(json!(result.data)),
        })
    } else {
        json!({
            "success": false,
            "error": inert(json!(result.error)),
        })
    };
    body.to_string()
}

/// A failure of the model's own making as it reads it: like
/// [`result_for_model`], but the message, which quotes the model's own
/// markup back to it so it can write the call again, is left as it is.
fn own_failure_for_model(result: &ToolResult) -> String {
    json!({ "success": false, "error": result.error }).to_string()
}

/// The offered tools in the request's `tools` field; a definition the
/// types cannot hold is the deployment's error.
fn openai_tools(offered: &[OfferedTool]) -> Result<Vec<ChatCompletionTools>, AgentError> {
    offered
        .iter()
        .map(|t| {
            serde_json::from_value::<ChatCompletionTools>(t.openai_tool()).map_err(|err| {
                AgentError::Config(format!("definition of {} does not fit: {err}", t.name))
            })
        })
        .collect()
}

/// Names and parameter schemas, for calls the model writes as text. A
/// remote tool is offered as `module__tool` (function names hold no dot)
/// and known as `module.tool`: a call may use either.
fn schema_names(offered: &[OfferedTool]) -> impl Iterator<Item = (String, &Value)> {
    offered.iter().flat_map(|t| {
        let wire = t.function_name();
        let own = (t.name.clone(), t.parameters());
        let wired = (wire != t.name).then(|| (wire.to_string(), t.parameters()));
        std::iter::once(own).chain(wired)
    })
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;

    use super::*;

    fn tool(name: &str, definition: &Arc<Value>) -> OfferedTool {
        OfferedTool {
            name: name.to_string(),
            short_description: Cow::Borrowed(""),
            definition: definition.clone(),
        }
    }

    fn definition(name: &str, kind: &str) -> Arc<Value> {
        Arc::new(json!({
            "name": name,
            "parameters": {"type": "object", "properties": {"limit": {"type": kind}}}
        }))
    }

    #[test]
    fn one_digest_per_set_of_offered_tools() {
        let digests = SchemaDigests::default();
        let search = definition("search", "integer");
        let grep = definition("grep", "integer");
        let both = [tool("search", &search), tool("grep", &grep)];
        let first = digests.get(&both);
        assert_eq!(first.names(), ["search", "grep"]);
        // The same set again, or a copy of it equal by value: the same digest.
        assert!(Arc::ptr_eq(&first, &digests.get(&both)));
        let copy = Arc::new(Value::clone(&grep));
        let again = [tool("search", &search), tool("grep", &copy)];
        assert!(Arc::ptr_eq(&first, &digests.get(&again)));
        // Another set, or a definition that says something else: another.
        let one = digests.get(&both[..1]);
        assert!(!Arc::ptr_eq(&first, &one));
        assert_eq!(one.names(), ["search"]);
        let reshaped = definition("grep", "string");
        let other = digests.get(&[tool("search", &search), tool("grep", &reshaped)]);
        assert!(!Arc::ptr_eq(&first, &other));
        // The digest types arguments by its own schemas.
        let typed = |schemas: Arc<textcalls::Schemas>| {
            let mut parser = StreamParser::new(Vec::new()).shared_schemas(schemas);
            let mut out = parser
                .push(r#"<tool_call>{"name": "grep", "arguments": {"limit": "5"}}</tool_call>"#);
            out.extend(parser.finish());
            out.into_iter()
                .find_map(|s| match s {
                    Segment::Call(call) => Some(call.arguments),
                    _ => None,
                })
                .unwrap()
        };
        assert_eq!(typed(first), json!({"limit": 5}));
        assert_eq!(typed(other), json!({"limit": "5"}));
    }

    #[test]
    fn the_most_recent_sets_are_kept() {
        let digests = SchemaDigests::default();
        let kept = definition("kept", "integer");
        let first = digests.get(&[tool("kept", &kept)]);
        for i in 0..DIGESTS_KEPT * 2 {
            let name = format!("tool{i}");
            digests.get(&[tool(&name, &definition(&name, "integer"))]);
            // Used all along, it stays.
            assert!(Arc::ptr_eq(&first, &digests.get(&[tool("kept", &kept)])));
        }
        assert_eq!(digests.0.lock().unwrap().len(), DIGESTS_KEPT);
    }
}
