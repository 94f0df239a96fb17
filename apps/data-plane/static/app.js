// The chat page: sign-in (signin.js) or a pasted token, space picker, a streamed chat over POST /v1/chat and
// the admin settings. Plain browser JavaScript, served as is by the server.
//
// Each turn is a run (docs/runs.md): the page keeps the conversation's run
// ids in sessionStorage, so a reload replays them from the server and
// reattaches to the one still running; a broken connection reattaches with
// Last-Event-ID; Stop asks the server to stop the run; a call that needs
// approval shows a card with Approve and Deny.
//
// Everything the model or a tool produced is put on the page with
// textContent or as text nodes, never innerHTML, so no answer can inject
// markup or script: answers go through markdown.js, which builds elements
// itself, and tool results through views.js.
"use strict";

const TOKEN_KEY = "data-plane.token";
const SPACE_KEY = "data-plane.space";
// This tab's conversation: its id and each turn's question and run id.
const CHAT_KEY = "data-plane.chat";
// Attempts to reattach to a run after the connection broke, and the first
// pause between them (doubling).
const REATTACH_TRIES = 6;
const REATTACH_PAUSE_MS = 500;
// Longest JSON shown in a card; the rest stays in the conversation.
const SHOWN_CHARS = 20000;

const $ = (id) => document.getElementById(id);

const state = {
  token: localStorage.getItem(TOKEN_KEY) || "",
  // The conversation in OpenAI's format, sent whole with every turn.
  messages: [],
  // The turn in flight, if any: { controller, turn, runId }.
  running: null,
  // What sessionStorage keeps: { conversationId, space, turns: [{ text, runId }] }.
  chat: loadChat(),
  // The conversation's cited passages by number (citation events; numbers
  // continue across turns).
  citations: new Map(),
  // The document viewer (views.js), made at start.
  viewer: null,
};

function loadChat() {
  try {
    const saved = JSON.parse(sessionStorage.getItem(CHAT_KEY) || "null");
    if (saved && Array.isArray(saved.turns)) return saved;
  } catch (_) {
    // A damaged entry: start afresh.
  }
  return { conversationId: null, space: "", turns: [] };
}

function saveChat() {
  sessionStorage.setItem(CHAT_KEY, JSON.stringify(state.chat));
}

// ---- HTTP -----------------------------------------------------------------

class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

async function readError(response) {
  let code = "http_" + response.status;
  let message = response.statusText || "request failed";
  try {
    const body = await response.json();
    if (body && body.error) {
      code = body.error.code || code;
      message = body.error.message || message;
    }
  } catch (_) {
    // Not JSON: keep the status line.
  }
  return new ApiError(response.status, code, message);
}

async function api(method, path, body, signal) {
  await SignIn.fresh();
  const send = () => {
    const headers = { Authorization: "Bearer " + state.token };
    if (body !== undefined) headers["Content-Type"] = "application/json";
    return fetch(path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      signal,
    });
  };
  let response = await send();
  // Signed in through the provider, a refused token is renewed and the
  // request sent once more.
  if (response.status === 401 && SignIn.signedIn()) {
    const renewed = await SignIn.refresh().then(() => true, () => false);
    if (renewed) response = await send();
  }
  if (!response.ok) throw await readError(response);
  return response;
}

// ---- Server-Sent Events -----------------------------------------------------

// A parser for the text/event-stream format, fed decoded text in pieces of
// any size; calls onEvent({event, data, id}) for each complete event.
class SseParser {
  constructor(onEvent) {
    this.onEvent = onEvent;
    this.buffer = "";
    this.reset();
  }

  reset() {
    this.event = "";
    this.data = [];
    this.id = null;
  }

  push(text) {
    this.buffer += text;
    for (;;) {
      const match = /\r\n|\r|\n/.exec(this.buffer);
      // A lone \r at the end may be the first half of \r\n: wait for more.
      if (!match || (match[0] === "\r" && match.index === this.buffer.length - 1)) break;
      const line = this.buffer.slice(0, match.index);
      this.buffer = this.buffer.slice(match.index + match[0].length);
      this.line(line);
    }
  }

  line(line) {
    if (line === "") {
      if (this.data.length > 0) {
        this.onEvent({ event: this.event || "message", data: this.data.join("\n"), id: this.id });
      }
      this.reset();
      return;
    }
    if (line.startsWith(":")) return; // a comment: the heartbeat
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "event") this.event = value;
    else if (field === "data") this.data.push(value);
    else if (field === "id") this.id = value;
  }
}

// ---- small DOM helpers --------------------------------------------------------

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

function pretty(value) {
  let text;
  try {
    text = typeof value === "string" ? value : JSON.stringify(value, null, 2);
  } catch (_) {
    text = String(value);
  }
  if (text === undefined) text = "";
  if (text.length > SHOWN_CHARS) {
    text = text.slice(0, SHOWN_CHARS) + "\n… (" + (text.length - SHOWN_CHARS) + " more characters)";
  }
  return text;
}

function scrollToEnd() {
  const log = $("log");
  const nearEnd = log.scrollHeight - log.scrollTop - log.clientHeight < 120;
  if (nearEnd) log.scrollTop = log.scrollHeight;
}

function setStatus(id, text, kind) {
  const node = $(id);
  node.textContent = text || "";
  node.dataset.kind = kind || "";
}

// ---- views --------------------------------------------------------------------

function show(view) {
  for (const name of ["chat", "admin", "token"]) {
    $("view-" + name).hidden = name !== view;
    $("nav-" + name).setAttribute("aria-pressed", String(name === view));
  }
  if (view === "chat") {
    loadSpaces();
    $("message").focus();
  } else if (view === "admin") {
    loadSettings();
  } else {
    // The pasted token only: the provider's tokens are never shown.
    $("token-input").value = localStorage.getItem(TOKEN_KEY) || "";
    if (!SignIn.available()) $("token-input").focus();
  }
}

function needToken() {
  if (SignIn.available()) {
    setStatus("signin-status", "Sign in to start.", "info");
  } else {
    setStatus("token-status", "Paste a bearer token to start.", "info");
  }
  show("token");
}

// Shows who is signed in, and which of Sign in and Sign out applies; the
// token sent is the provider's while signed in, else the pasted one.
function signInChanged(error) {
  state.token = SignIn.bearer() || localStorage.getItem(TOKEN_KEY) || "";
  const who = SignIn.who();
  $("signin-who").textContent = who ? "Signed in as " + who + "." : "";
  $("signin-button").hidden = SignIn.signedIn();
  $("signout-button").hidden = !SignIn.signedIn();
  if (error) setStatus("signin-status", "Signed out: " + error.message, "error");
}

function handleAuthError(error, statusId) {
  if (error instanceof ApiError && error.status === 401) {
    if (SignIn.signedIn()) {
      setStatus("signin-status", "The server refused the sign-in (" + error.message + "). Sign in again.", "error");
    } else {
      setStatus("token-status", "The server refused the token (" + error.message + "). Paste a new one.", "error");
    }
    show("token");
    return true;
  }
  setStatus(statusId, describe(error), "error");
  return false;
}

function describe(error) {
  if (error instanceof ApiError) return error.message + " (" + error.code + ")";
  return "The server cannot be reached: " + error.message;
}

// ---- token --------------------------------------------------------------------

function saveToken(event) {
  event.preventDefault();
  const value = $("token-input").value.trim().replace(/^Bearer\s+/i, "");
  if (!value) return;
  state.token = value;
  localStorage.setItem(TOKEN_KEY, value);
  setStatus("token-status", "Token saved.", "ok");
  show("chat");
}

function forgetToken() {
  state.token = "";
  localStorage.removeItem(TOKEN_KEY);
  $("token-input").value = "";
  setStatus("token-status", "Token forgotten.", "info");
}

// ---- spaces -------------------------------------------------------------------

async function loadSpaces() {
  if (!state.token) return needToken();
  const select = $("space-select");
  const wanted = select.value || localStorage.getItem(SPACE_KEY) || "";
  try {
    const response = await api("GET", "/v1/spaces");
    const body = await response.json();
    select.replaceChildren();
    select.append(new Option("All spaces", ""));
    for (const space of body.spaces || []) {
      select.append(new Option(space.name, space.id));
    }
    select.value = [...select.options].some((o) => o.value === wanted) ? wanted : "";
    if ((body.spaces || []).length === 0) {
      setStatus("chat-status", "You are not a member of any space yet; chat runs across none.", "info");
    } else if ($("chat-status").dataset.kind !== "error") {
      setStatus("chat-status", "");
    }
  } catch (error) {
    handleAuthError(error, "chat-status");
  }
}

// ---- one assistant turn, as it streams ---------------------------------------

// Renders one turn's events and collects the messages it adds to the
// conversation: one assistant message per model step (its text and tool
// calls), each followed by one tool message per call.
class Turn {
  constructor(container, runId) {
    this.runId = runId || null;
    this.lastId = 0; // the id of the last event shown, for reattaching
    this.approvals = new Map(); // call_id -> approval box
    this.bubble = el("div", "message assistant");
    this.bubble.setAttribute("aria-label", "Assistant");
    this.bubble.dataset.state = "streaming";
    container.append(this.bubble);
    this.ended = false;
    this.clear();
  }

  // Nothing drawn yet: the state of a turn before its first event.
  clear() {
    this.bubble.replaceChildren();
    this.approvals = new Map();
    this.text = null; // the text block being written to
    this.cards = new Map(); // call_id -> card
    this.byIndex = new Map(); // index -> card, for fragments not yet named
    this.steps = [];
    this.step = { text: "", calls: [] };
    this.blocks = []; // the answer's Markdown blocks, drawn again when a citation arrives
    this.seen = []; // every event drawn, for a takeover that takes some back
  }

  // Another server took the run over (docs/runs.md, "Takeover"): what was
  // sent after `after` did not happen, and calls run again lose what was
  // shown of them but their start. The turn is drawn again from the events
  // that stand, then goes on.
  resumed(data) {
    const rerun = new Set(data.rerun || []);
    const stands = (e) =>
      (e.id === null || e.id <= data.after) &&
      !rerun.has(e.data.parent_call_id) &&
      !(e.kind === "tool_result" && rerun.has(e.data.call_id));
    const kept = this.seen.filter(stands);
    this.clear();
    for (const e of kept) this.handle(e.kind, e.data, e.id);
    const note = el("p", "resumed", "The server answering stopped; another one continued from step " + data.step + ".");
    note.setAttribute("role", "status");
    this.bubble.append(note);
    this.text = null;
  }

  // A new model step begins once every call of the current one has its result.
  maybeNextStep() {
    const s = this.step;
    if (s.calls.length > 0 && s.calls.every((c) => c.result !== undefined)) {
      this.steps.push(s);
      this.step = { text: "", calls: [] };
    }
  }

  handle(kind, data, id = null) {
    if (kind === "resumed") return this.resumed(data);
    this.seen.push({ id, kind, data });
    switch (kind) {
      case "text_delta": return this.textDelta(data.text || "");
      case "tool_call": return data.partial ? this.callFragment(data) : this.callStarted(data);
      case "tool_result": return this.toolResult(data);
      case "subagent_start": return this.subStart(data);
      case "subagent_chunk": return this.subChunk(data);
      case "subagent_tool_call": return this.subCall(data);
      case "subagent_tool_result": return this.subResult(data);
      case "subagent_end": return this.subEnd(data);
      case "approval_request": return this.approvalRequest(data);
      case "approval_result": return this.approvalResult(data);
      case "citation": return this.citation(data);
      case "error": return this.fail(data.message || "the stream reported an error", data.code);
      case "done": return this.done(data);
      default: return undefined; // unknown kinds are for newer pages
    }
  }

  textDelta(text) {
    this.maybeNextStep();
    this.step.text += text;
    if (!this.text) {
      this.text = markdownBlock("text", citeButton);
      this.blocks.push(this.text);
      this.bubble.append(this.text);
    }
    this.text.write(text);
  }

  card(callId, name) {
    const card = el("details", "tool");
    card.open = true;
    card.dataset.callId = callId;
    card.dataset.state = "streaming";
    const summary = el("summary");
    summary.append(el("span", "tool-label", "Tool"), el("span", "tool-name", name || "…"), el("span", "tool-state", "preparing"));
    const args = el("pre", "tool-args");
    args.setAttribute("aria-label", "Arguments");
    card.append(summary, args);
    card.parts = { name: summary.children[1], state: summary.children[2], args, raw: "" };
    this.bubble.append(card);
    // Text after a tool call starts a new block below it.
    this.text = null;
    return card;
  }

  setCardState(card, state, label) {
    card.dataset.state = state;
    card.parts.state.textContent = label;
  }

  callFragment(data) {
    this.maybeNextStep();
    let card = (data.call_id && this.cards.get(data.call_id)) || this.byIndex.get(data.index);
    if (!card) {
      card = this.card(data.call_id, data.name);
      this.byIndex.set(data.index, card);
    }
    if (data.call_id && !this.cards.has(data.call_id)) {
      this.cards.set(data.call_id, card);
      card.dataset.callId = data.call_id;
    }
    if (data.name) card.parts.name.textContent = data.name;
    card.parts.raw += data.arguments_delta || "";
    card.parts.args.textContent = card.parts.raw;
    scrollToEnd();
  }

  callStarted(data) {
    this.byIndex.clear();
    let card = this.cards.get(data.call_id);
    const entry = this.step.calls.find((c) => c.id === data.call_id);
    if (!card) {
      card = this.card(data.call_id, data.name);
      this.cards.set(data.call_id, card);
    }
    card.parts.name.textContent = data.name;
    card.parts.args.textContent = pretty(data.arguments);
    card.parts.arguments = data.arguments;
    // A call is announced once (a retry stays inside it: its result says
    // how many attempts it took).
    if (!entry) {
      this.step.calls.push({ id: data.call_id, name: data.name, arguments: JSON.stringify(data.arguments ?? {}) });
    }
    this.setCardState(card, "running", "running");
  }

  toolResult(data) {
    const card = this.cards.get(data.call_id) || this.callStartedLate(data);
    const result = data.result || {};
    const ok = result.success === true;
    this.setCardState(card, ok ? "ok" : "failed", ok ? "done" + timing(result) : "failed" + timing(result));
    showResult(card, card.parts.name.textContent, result, card.parts.arguments);
    const entry = this.step.calls.find((c) => c.id === data.call_id);
    if (entry) {
      // What the model reads back, as the server builds it.
      entry.result = JSON.stringify(ok ? { success: true, data: result.data ?? null } : { success: false, error: result.error ?? null });
    }
    scrollToEnd();
  }

  // A result for a call never announced (should not happen): show it anyway.
  callStartedLate(data) {
    const card = this.card(data.call_id, data.name);
    this.cards.set(data.call_id, card);
    return card;
  }

  nested(parentId) {
    let card = this.cards.get(parentId);
    if (!card) card = this.callStartedLate({ call_id: parentId, name: "sub-agent" });
    let box = card.querySelector(":scope > .subagent");
    if (!box) {
      box = el("div", "subagent");
      box.setAttribute("aria-label", "Nested agent");
      box.append(el("div", "subagent-title", "Nested agent"));
      box.cards = new Map();
      box.text = null;
      // Before the result, which arrives last.
      const result = card.querySelector(":scope > .tool-result");
      card.insertBefore(box, result);
    }
    return box;
  }

  subStart(data) {
    const box = this.nested(data.parent_call_id);
    box.append(el("div", "subagent-task", "Task: " + (data.task || "")));
    scrollToEnd();
  }

  subChunk(data) {
    const box = this.nested(data.parent_call_id);
    if (!box.text) {
      box.text = markdownBlock("subagent-text", null);
      this.blocks.push(box.text);
      box.append(box.text);
    }
    box.text.write(data.text || "");
    scrollToEnd();
  }

  subCall(data) {
    const box = this.nested(data.parent_call_id);
    const card = el("details", "tool nested-tool");
    card.dataset.state = "running";
    card.arguments = data.arguments;
    const summary = el("summary");
    summary.append(el("span", "tool-label", "Tool"), el("span", "tool-name", data.name), el("span", "tool-state", "running"));
    card.append(summary, el("pre", "tool-args", pretty(data.arguments)));
    box.cards.set(data.call_id, card);
    box.text = null;
    box.append(card);
    scrollToEnd();
  }

  subResult(data) {
    const box = this.nested(data.parent_call_id);
    let card = box.cards.get(data.call_id);
    if (!card) {
      this.subCall({ parent_call_id: data.parent_call_id, call_id: data.call_id, name: data.name, arguments: {} });
      card = box.cards.get(data.call_id);
    }
    const result = data.result || {};
    const ok = result.success === true;
    card.dataset.state = ok ? "ok" : "failed";
    card.querySelector(".tool-state").textContent = (ok ? "done" : "failed") + timing(result);
    showResult(card, data.name || card.querySelector(".tool-name").textContent, result, card.arguments);
    scrollToEnd();
  }

  subEnd(data) {
    const box = this.nested(data.parent_call_id);
    box.append(el("div", "subagent-end", "Finished" + (data.summary ? ": " + data.summary : "")));
    box.text = null;
    scrollToEnd();
  }

  // The card of a call, top-level or inside a sub-agent's box.
  cardOf(callId, parentId) {
    if (parentId) {
      const box = this.nested(parentId);
      return box.cards.get(callId) || null;
    }
    return this.cards.get(callId) || null;
  }

  approvalRequest(data) {
    let card = this.cardOf(data.call_id, data.parent_call_id);
    if (!card && !data.parent_call_id) card = this.callStartedLate({ call_id: data.call_id, name: data.tool });
    const host = card || this.nested(data.parent_call_id);
    if (card) {
      card.open = true;
      card.dataset.state = "waiting";
      const label = card.querySelector(":scope > summary .tool-state");
      if (label) label.textContent = "waiting for approval";
    }
    const box = el("div", "approval");
    box.setAttribute("role", "group");
    box.setAttribute("aria-label", "Approval for " + data.tool);
    box.dataset.callId = data.call_id;
    box.append(el("p", "approval-question", "Allow " + data.tool + " to run?"));
    if (data.why) box.append(el("p", "approval-why", data.why));
    const reasonId = "reason-" + data.call_id;
    const reasonLabel = el("label", "approval-label", "Reason (told to the assistant if you deny)");
    reasonLabel.htmlFor = reasonId;
    const reason = el("input", "approval-reason");
    reason.id = reasonId;
    reason.type = "text";
    reason.maxLength = 2000;
    const rememberId = "remember-" + data.call_id;
    const remember = el("input");
    remember.type = "checkbox";
    remember.id = rememberId;
    const rememberLabel = el("label", "approval-label", "Don't ask again in this conversation");
    rememberLabel.htmlFor = rememberId;
    const approve = el("button", "primary", "Approve");
    approve.type = "button";
    const deny = el("button", "deny", "Deny");
    deny.type = "button";
    const status = el("p", "approval-status");
    status.setAttribute("role", "status");
    const buttons = el("div", "row approval-buttons");
    buttons.append(approve, deny);
    const rememberRow = el("div", "switch");
    rememberRow.append(remember, rememberLabel);
    box.append(reasonLabel, reason, rememberRow, buttons, status);
    box.controls = [approve, deny, reason, remember];
    box.status = status;
    const answer = (approved) => this.answerApproval(box, data.call_id, approved, reason.value, remember.checked);
    approve.addEventListener("click", () => answer(true));
    deny.addEventListener("click", () => answer(false));
    const result = host.querySelector(":scope > .tool-result");
    host.insertBefore(box, result);
    this.approvals.set(data.call_id, box);
    this.text = null;
    approve.focus({ preventScroll: true });
    scrollToEnd();
  }

  async answerApproval(box, callId, approved, reason, remember) {
    if (!this.runId) return;
    for (const c of box.controls) c.disabled = true;
    box.status.textContent = approved ? "Approving…" : "Denying…";
    const body = { approved, remember: approved && remember };
    if (!approved && reason.trim()) body.reason = reason.trim();
    try {
      await api("POST", "/v1/runs/" + this.runId + "/approvals/" + encodeURIComponent(callId), body);
    } catch (error) {
      if (error instanceof ApiError && error.status === 409) {
        box.status.textContent = error.message;
        return;
      }
      box.status.textContent = describe(error);
      for (const c of box.controls) c.disabled = false;
    }
  }

  approvalResult(data) {
    const box = this.approvals.get(data.call_id);
    const card = this.cardOf(data.call_id, data.parent_call_id);
    const words = {
      approved: data.remember ? "Approved for this conversation." : "Approved.",
      denied: "Denied" + (data.reason ? ": " + data.reason : "."),
      expired: "Nobody answered in time; the call was not run.",
    };
    if (box) {
      for (const c of box.controls) c.remove();
      for (const l of box.querySelectorAll("label")) l.remove();
      box.querySelector(".approval-buttons")?.remove();
      box.querySelector(".switch")?.remove();
      box.dataset.state = data.status;
      box.status.textContent = words[data.status] || data.status;
    }
    if (card && card.dataset.state === "waiting") {
      card.dataset.state = "running";
      const label = card.querySelector(":scope > summary .tool-state");
      if (label) label.textContent = data.approved ? "running" : "not approved";
    }
  }

  fail(message, code) {
    const box = el("div", "error-box", message + (code ? " (" + code + ")" : ""));
    box.setAttribute("role", "alert");
    this.bubble.append(box);
    this.finish("error");
  }

  done(data) {
    if (data && (data.reason === "stopped" || data.reason === "abandoned")) return this.stopped();
    const notes = {
      length: "The answer was cut at the model's length limit.",
      step_limit: "Stopped at the step limit before running the last tool calls.",
      token_budget: "Stopped when the token budget was spent.",
    };
    if (data && notes[data.reason]) this.bubble.append(el("div", "note", notes[data.reason]));
    this.finish("done");
  }

  stopped() {
    this.bubble.append(el("div", "note", "Stopped."));
    for (const card of this.cards.values()) {
      if (["running", "streaming", "waiting"].includes(card.dataset.state)) {
        this.setCardState(card, "stopped", "stopped");
      }
    }
    this.finish("stopped");
  }

  // A passage the answer cites, numbered as it is cited: listed under the
  // answer; opening it reads the document around the span and marks it.
  citation(data) {
    state.citations.set(data.index, data);
    // Markers already drawn as text become buttons.
    for (const block of this.blocks) block.draw();
    if (!this.sources) {
      this.sources = el("section", "sources");
      this.sources.setAttribute("aria-label", "Sources");
      this.sources.append(el("h3", "sources-title", "Sources"), el("ol", "sources-list"));
    }
    const item = el("li", "source");
    item.value = data.index;
    const button = el("button", "source-open", `[${data.index}] ${data.path || "document"}`);
    button.type = "button";
    if (data.title) button.append(el("span", "source-title", " — " + data.title));
    button.setAttribute("aria-expanded", "false");
    const view = el("blockquote", "source-view");
    view.hidden = true;
    button.addEventListener("click", () => toggleSource(button, view, data));
    const open = el("button", "source-viewer", "Open in the document");
    open.type = "button";
    open.setAttribute("aria-label", `Open source ${data.index} in the document viewer`);
    open.addEventListener("click", () => openCitation(data, open));
    item.append(button, open, view);
    this.sources.lastChild.append(item);
    // The list stays under everything the answer shows.
    this.bubble.append(this.sources);
  }

  finish(how) {
    if (this.ended) return;
    this.ended = true;
    for (const block of this.blocks) block.draw();
    if (this.sources) this.bubble.append(this.sources);
    this.bubble.dataset.state = how;
    // A card nobody answered cannot be answered any more.
    for (const box of this.approvals.values()) {
      if (box.dataset.state) continue;
      for (const c of box.controls) c.disabled = true;
      box.dataset.state = "expired";
      box.status.textContent = "The run ended before an answer.";
    }
  }

  // The messages this turn adds to the conversation. Calls that never got a
  // result (the turn was stopped) are left out: the API wants every call
  // answered.
  messages() {
    const out = [];
    for (const step of [...this.steps, this.step]) {
      const calls = step.calls.filter((c) => c.result !== undefined);
      if (!step.text && calls.length === 0) continue;
      const message = { role: "assistant", content: step.text || null };
      if (calls.length > 0) {
        message.tool_calls = calls.map((c) => ({
          id: c.id,
          type: "function",
          function: { name: c.name, arguments: c.arguments },
        }));
      }
      out.push(message);
      for (const c of calls) out.push({ role: "tool", tool_call_id: c.id, content: c.result });
    }
    return out;
  }
}

// Characters of context shown on each side of a cited span.
const SOURCE_CONTEXT = 300;

// Opens or closes a cited source. Opening reads the document around the
// span (read_document, offsets in code points) and marks the span; when
// that fails, the quoted passage from the citation is shown marked.
async function toggleSource(button, view, data) {
  const open = view.hidden;
  view.hidden = !open;
  button.setAttribute("aria-expanded", String(open));
  if (!open || view.dataset.loaded) return;
  view.dataset.loaded = "1";
  view.textContent = "Reading the document…";
  const start = Math.max(0, data.char_start - SOURCE_CONTEXT);
  const span = Math.max(0, data.char_end - data.char_start);
  try {
    const read = await readDocument(data.document_id, start, span + 2 * SOURCE_CONTEXT);
    showSpan(view, read.text || "", data.char_start - read.start, data.char_end - read.start, read);
  } catch (error) {
    const quote = data.text || "";
    showSpan(view, quote, 0, Array.from(quote).length, null);
    view.append(el("p", "source-note", "The document could not be read now (" + describe(error) + "); this is the quoted passage."));
  }
  view.querySelector("mark")?.scrollIntoView({ block: "nearest" });
}

// `text` with the code points [from, to) marked, as the viewer marks them,
// and "…" where the document goes on.
function showSpan(view, text, from, to, read) {
  view.textContent = "";
  const paragraph = el("p", "source-text");
  if (read && read.start > 0) paragraph.append("…");
  Views.markedRanges(paragraph, text, [[from, to]]);
  if (read && read.end < read.total_chars) paragraph.append("…");
  view.append(paragraph);
}

function timing(result) {
  const time = typeof result.duration_ms === "number" ? " in " + result.duration_ms + " ms" : "";
  return result.attempts > 1 ? time + " (" + result.attempts + " attempts)" : time;
}

// A block of model text drawn as Markdown: write() appends and draws again
// at the next animation frame (so a fast stream costs one draw per frame),
// draw() draws now.
function markdownBlock(className, cite) {
  const block = el("div", className + " markdown");
  block.raw = "";
  block.pending = false;
  block.draw = () => {
    block.pending = false;
    // Drawn anew from the text: the log keeps following the end, and a
    // control that had the focus (Copy, a link, a citation) hands it to its
    // new copy, found at the same place among the block's controls.
    const log = $("log");
    const following = log.scrollHeight - log.scrollTop - log.clientHeight < 120;
    const controls = () => [...block.querySelectorAll("button, a")];
    const focused = controls().indexOf(document.activeElement);
    block.replaceChildren(Markdown.render(block.raw, { cite }));
    if (focused >= 0) controls()[focused]?.focus({ preventScroll: true });
    if (following) log.scrollTop = log.scrollHeight;
  };
  block.write = (text) => {
    block.raw += text;
    if (block.pending) return;
    block.pending = true;
    requestAnimationFrame(() => {
      if (block.pending) block.draw();
    });
  };
  return block;
}

// A cited number in an answer: a button opening the passage in the
// viewer, when the conversation has a citation by that number.
function citeButton(index, label) {
  const data = state.citations.get(index);
  if (!data) return null;
  const button = el("button", "cite", label);
  button.type = "button";
  // The viewer gives the focus back to the button by this key, should the
  // answer have been drawn again while it was open.
  button.dataset.focusKey = "cite-" + index;
  button.title = (data.path || "document") + (data.title ? " — " + data.title : "");
  button.setAttribute("aria-label", `Source ${index}: ${data.path || "document"}`);
  button.addEventListener("click", () => openCitation(data, button));
  return button;
}

function openCitation(data, opener) {
  state.viewer.open({
    document_id: data.document_id,
    start: data.char_start,
    end: data.char_end,
    label: data.path,
    opener,
  });
}

// A card's result: the tool's view (views.js) when it has one, and the raw
// JSON, folded, one click away.
function showResult(card, tool, result, args) {
  for (const old of card.querySelectorAll(":scope > .view, :scope > .raw, :scope > .tool-result")) old.remove();
  const ok = result.success === true;
  const view = Views.render(tool, result, args, { openDocument: (doc) => state.viewer.open(doc) });
  const out = el("pre", "tool-result", ok ? pretty(result.data) : pretty(result.error || result));
  out.setAttribute("aria-label", "Result");
  if (!view) {
    card.append(out);
    return;
  }
  const raw = el("details", "raw");
  raw.append(el("summary", "raw-title", "Raw JSON"), out);
  card.append(view, raw);
}

// read_document over executeTool, in the conversation's space.
async function readDocument(documentId, start, maxLength) {
  const response = await api("POST", "/v1/tools/read_document/execute", {
    args: { document_id: documentId, start, max_length: maxLength },
    spaceId: state.chat?.space || null,
  });
  const result = await response.json();
  if (!result.success) throw new Error(result.error?.message || "the document could not be read");
  return result.data;
}

// ---- sending, following and stopping runs -----------------------------------------

function setRunning(running) {
  state.running = running;
  const busy = running !== null;
  $("send").disabled = busy;
  $("stop").disabled = !busy;
  $("space-select").disabled = busy;
  $("new-chat").disabled = busy;
}

const pause = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// Reads one response's events into the turn, skipping those it has shown
// (by id); `turn.lastId` follows every event, so a read that breaks off
// leaves it at the last one shown.
async function readEvents(response, turn) {
  const parser = new SseParser((e) => {
    let data = {};
    try {
      data = JSON.parse(e.data);
    } catch (_) {
      return;
    }
    const id = Number(e.id);
    if (e.id !== null && Number.isInteger(id)) {
      if (id <= turn.lastId) return; // shown before the connection broke
      turn.lastId = id;
    }
    const kind = data.type || e.event;
    if (kind === "run") {
      turn.runId = data.run_id;
      if (data.conversation_id && !state.chat.conversationId) {
        state.chat.conversationId = data.conversation_id;
        saveChat();
      }
    }
    turn.handle(kind, data, e.id !== null && Number.isInteger(id) ? id : null);
    scrollToEnd();
  });
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    parser.push(value);
  }
  parser.push("\n\n"); // a last event the server did not terminate
}

// Follows a run to its end: this response first, then, whenever the
// connection breaks before the run's last event, the run again from the
// last event seen (the server replays what was missed).
async function follow(turn, first, signal) {
  let response = first;
  let tries = 0;
  for (;;) {
    try {
      if (!response) {
        await SignIn.fresh();
        const headers = { Authorization: "Bearer " + state.token, "Last-Event-ID": String(turn.lastId) };
        response = await fetch("/v1/runs/" + turn.runId + "/events", { headers, signal });
        if (!response.ok) throw await readError(response);
      }
      await readEvents(response, turn);
      tries = 0;
      if (turn.ended) return;
    } catch (error) {
      if (signal.aborted) throw error;
      if (error instanceof ApiError) throw error;
      if (!turn.runId || tries >= REATTACH_TRIES) throw error;
    }
    response = null;
    if (tries >= REATTACH_TRIES) {
      turn.fail("the stream broke off and the run could not be reached again", "incomplete");
      return;
    }
    setStatus("chat-status", "The connection broke; reattaching…", "info");
    await pause(REATTACH_PAUSE_MS * 2 ** tries);
    tries += 1;
  }
}

function addQuestion(text) {
  const user = el("div", "message user", text);
  user.setAttribute("aria-label", "You");
  $("log").append(user);
}

// Runs `turn` to its end (from `response`, or the run's start), keeps the
// messages it adds, and frees the composer.
async function runTurn(turn, response, controller = new AbortController()) {
  setRunning({ controller, turn });
  setStatus("chat-status", "Answering…", "info");
  try {
    await follow(turn, response, controller.signal);
    setStatus("chat-status", "");
  } catch (error) {
    if (controller.signal.aborted) {
      turn.stopped();
      setStatus("chat-status", "Stopped.", "info");
    } else if (error instanceof ApiError && error.status === 401) {
      turn.fail(error.message, error.code);
      handleAuthError(error, "chat-status");
    } else {
      turn.fail(describe(error));
      setStatus("chat-status", "");
    }
  } finally {
    state.messages.push(...turn.messages());
    setRunning(null);
  }
}

async function send(event) {
  event.preventDefault();
  if (state.running) return;
  if (!state.token) return needToken();
  const input = $("message");
  const text = input.value.trim();
  if (!text) return;
  input.value = "";
  addQuestion(text);
  state.messages.push({ role: "user", content: text });
  const log = $("log");
  const turn = new Turn(log);
  log.scrollTop = log.scrollHeight;
  const space = $("space-select").value;
  const options = {};
  if (state.chat.conversationId) options.conversationId = state.chat.conversationId;
  // Busy from here: a second Enter sends nothing.
  const controller = new AbortController();
  setRunning({ controller, turn });
  let response = null;
  try {
    response = await api("POST", "/v1/chat", { messages: state.messages, spaceId: space || null, options }, controller.signal);
  } catch (error) {
    if (controller.signal.aborted) turn.stopped();
    else turn.fail(error instanceof ApiError ? error.message : describe(error), error.code);
    if (error instanceof ApiError && error.status === 401) handleAuthError(error, "chat-status");
    state.messages.pop();
    setRunning(null);
    input.focus();
    return;
  }
  turn.runId = response.headers.get("x-run-id");
  state.chat.space = space;
  state.chat.turns.push({ text, runId: turn.runId });
  saveChat();
  await runTurn(turn, response, controller);
  input.focus();
}

// Asks the server to stop the run; its stream then ends with `done`
// reason `stopped`. If the server cannot be told, the page stops reading.
async function stop() {
  const running = state.running;
  if (!running) return;
  $("stop").disabled = true;
  setStatus("chat-status", "Stopping…", "info");
  if (!running.turn.runId) return running.controller.abort();
  try {
    await api("POST", "/v1/runs/" + running.turn.runId + "/stop");
  } catch (_) {
    running.controller.abort();
  }
}

function newChat() {
  if (state.running) return;
  state.messages = [];
  state.citations.clear();
  state.chat = { conversationId: null, space: $("space-select").value, turns: [] };
  saveChat();
  $("log").replaceChildren();
  setStatus("chat-status", "");
  $("message").focus();
}

// After a reload: the conversation's runs replayed from the server, the
// last one followed live if it still runs.
async function restoreChat() {
  const turns = state.chat.turns;
  if (turns.length === 0 || !state.token) return;
  setStatus("chat-status", "Restoring the conversation…", "info");
  const log = $("log");
  // Busy while the earlier turns are drawn: nothing is sent half-restored.
  setRunning({ controller: new AbortController(), turn: { runId: null } });
  $("stop").disabled = true; // nothing runs yet: the earlier turns are being drawn
  for (let i = 0; i < turns.length; i++) {
    const { text, runId } = turns[i];
    addQuestion(text);
    state.messages.push({ role: "user", content: text });
    const turn = new Turn(log, runId);
    if (i === turns.length - 1) {
      log.scrollTop = log.scrollHeight;
      setRunning(null);
      await runTurn(turn, null);
      continue;
    }
    try {
      await follow(turn, null, new AbortController().signal);
    } catch (error) {
      turn.fail(describe(error));
    }
    state.messages.push(...turn.messages());
  }
  log.scrollTop = log.scrollHeight;
}

// ---- admin ------------------------------------------------------------------

async function loadSettings() {
  if (!state.token) return needToken();
  const fields = $("settings-fields");
  const approvals = $("approvals-fields");
  fields.disabled = true;
  approvals.disabled = true;
  setStatus("admin-status", "Loading…", "info");
  try {
    const settings = await (await api("GET", "/v1/admin/settings")).json();
    showSettings(settings);
    fields.hidden = false;
    fields.disabled = false;
    approvals.hidden = false;
    approvals.disabled = false;
    setStatus("admin-status", "");
  } catch (error) {
    if (error instanceof ApiError && error.status === 403) {
      // Whatever an earlier token saw is not this caller's to see.
      fields.hidden = true;
      approvals.hidden = true;
      setStatus("admin-status", "Only admins can see and change settings. Ask an admin, or use a token made with --role admin.", "error");
    } else {
      handleAuthError(error, "admin-status");
    }
  }
}

function showSettings(settings) {
  for (const box of document.querySelectorAll("[data-setting]")) {
    box.checked = settings[box.dataset.setting] === true;
  }
  const rules = settings.approvals || {};
  $("trusted-hosts").value = (settings.fetch_web_page_trusted_hosts || []).join("\n");
  $("approval-tools").value = (rules.tools || []).join(", ");
  for (const box of document.querySelectorAll("[data-category]")) {
    box.checked = (rules.categories || []).includes(box.dataset.category);
  }
  for (const box of document.querySelectorAll("[data-annotation]")) {
    box.checked = (rules.annotations || []).includes(box.dataset.annotation);
  }
}

const listed = (text, separator) =>
  text
    .split(separator)
    .map((item) => item.trim())
    .filter((item) => item !== "");

async function saveApprovals(event) {
  event.preventDefault();
  const fields = $("approvals-fields");
  const checked = (attribute) =>
    [...document.querySelectorAll("[" + attribute + "]")].filter((b) => b.checked).map((b) => b.getAttribute(attribute));
  const change = {
    fetch_web_page_trusted_hosts: listed($("trusted-hosts").value, /\n/),
    approvals: {
      tools: listed($("approval-tools").value, ","),
      categories: checked("data-category"),
      annotations: checked("data-annotation"),
    },
  };
  fields.disabled = true;
  setStatus("approvals-status", "Saving…", "info");
  try {
    const settings = await (await api("PUT", "/v1/admin/settings", change)).json();
    showSettings(settings);
    setStatus("approvals-status", "Saved: chats ask by these rules from their next call.", "ok");
  } catch (error) {
    if (error instanceof ApiError && error.status === 403) {
      setStatus("approvals-status", "Only admins can change settings.", "error");
    } else {
      // The message names what the server refused (an unknown tool, say).
      handleAuthError(error, "approvals-status");
    }
  } finally {
    fields.disabled = false;
  }
}

async function changeSetting(event) {
  const box = event.target;
  if (!box.dataset.setting) return;
  const fields = $("settings-fields");
  fields.disabled = true;
  setStatus("admin-status", "Saving…", "info");
  try {
    const settings = await (await api("PUT", "/v1/admin/settings", { [box.dataset.setting]: box.checked })).json();
    showSettings(settings);
    setStatus("admin-status", "Saved: " + box.labels[0].textContent + " is " + (box.checked ? "on" : "off") + ".", "ok");
  } catch (error) {
    box.checked = !box.checked;
    if (error instanceof ApiError && error.status === 403) {
      setStatus("admin-status", "Only admins can change settings.", "error");
    } else {
      handleAuthError(error, "admin-status");
    }
  } finally {
    fields.disabled = false;
    box.focus();
  }
}

// ---- wiring ---------------------------------------------------------------------

async function start() {
  state.viewer = new Views.Viewer($("viewer"), readDocument);
  if (await SignIn.load()) {
    $("signin").hidden = false;
    SignIn.onChange(signInChanged);
    $("signin-button").addEventListener("click", () => {
      SignIn.begin().catch((e) => setStatus("signin-status", "Signing in failed: " + e.message, "error"));
    });
    $("signout-button").addEventListener("click", () => {
      SignIn.signOut().then(() => setStatus("signin-status", "Signed out.", "info"));
    });
    document.addEventListener("visibilitychange", () => {
      if (document.visibilityState === "visible") SignIn.fresh();
    });
    const problem = await SignIn.resume();
    signInChanged();
    if (problem) setStatus("signin-status", problem, "error");
  }
  $("nav-chat").addEventListener("click", () => show("chat"));
  $("nav-admin").addEventListener("click", () => show("admin"));
  $("nav-token").addEventListener("click", () => show("token"));
  $("token-form").addEventListener("submit", saveToken);
  $("token-clear").addEventListener("click", forgetToken);
  $("composer").addEventListener("submit", send);
  $("message").addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      $("composer").requestSubmit();
    }
  });
  $("stop").addEventListener("click", stop);
  $("new-chat").addEventListener("click", newChat);
  $("space-select").addEventListener("change", (e) => localStorage.setItem(SPACE_KEY, e.target.value));
  $("settings-form").addEventListener("change", changeSetting);
  $("settings-form").addEventListener("submit", (e) => e.preventDefault());
  $("approvals-form").addEventListener("submit", saveApprovals);
  if (state.token) {
    // The restored conversation's space, picked before the list loads.
    if (state.chat.turns.length > 0) localStorage.setItem(SPACE_KEY, state.chat.space || "");
    show("chat");
    restoreChat();
  } else {
    needToken();
  }
}

start();
