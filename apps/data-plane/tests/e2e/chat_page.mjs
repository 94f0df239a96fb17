// Drives the chat page in headless Chromium against a running server whose
// model is scripted by the caller (apps/data-plane/tests/chat_page.rs):
// token, space, a turn with a tool call and a streamed answer, Stop on a
// reply that never ends, an upstream error, a nested agent's progress under
// its tool card, an approval denied and one approved (fetch_web_page asks
// before an untrusted host), a reload in the middle of a streamed answer
// (the page replays the conversation and reattaches), and the admin switch
// for web search. Exits non-zero, naming the step, on the first thing that is wrong.
//
// Environment: DATA_PLANE_URL, ADMIN_TOKEN, USER_TOKEN, SPACE_NAME, what the
// scripted model does (TOOL_NAME, TOOL_ARGS_TEXT: part of the arguments as
// shown, RESULT_TEXT: part of the tool's result, ANSWER_START and
// ANSWER_END: the answer's two streamed parts (the second cites the search
// hit as [1]), CITED_PATH and CITED_TEXT: the cited document's path and
// text in the span, SLOW_TEXT: the start of the
// reply that never ends, NESTED_QUESTION, NESTED_TEXT: what the nested agent
// says, NESTED_ANSWER: the answer after it, FETCH_URL: the page the model
// asks to fetch, DENIED_ANSWER and APPROVED_ANSWER: its answers after a
// denial and an approval, RELOAD_START and RELOAD_END: the two parts of the
// answer during which the page is reloaded, LAST_QUESTION: asked after the
// reload), SHOT_DIR (screenshots), CHROMIUM (the browser).

import { TIMEOUT, check, drive, env, textOf } from "./harness.mjs";

const base = env("DATA_PLANE_URL");
const adminToken = env("ADMIN_TOKEN");
const userToken = env("USER_TOKEN");
const spaceName = env("SPACE_NAME");
const toolName = env("TOOL_NAME");
const toolArgsText = env("TOOL_ARGS_TEXT");
const resultText = env("RESULT_TEXT");
const answerStart = env("ANSWER_START");
const answerEnd = env("ANSWER_END");
const citedPath = env("CITED_PATH");
const citedText = env("CITED_TEXT");
const slowText = env("SLOW_TEXT");
const nestedQuestion = env("NESTED_QUESTION");
const nestedText = env("NESTED_TEXT");
const nestedAnswer = env("NESTED_ANSWER");
const fetchUrl = env("FETCH_URL");
const deniedAnswer = env("DENIED_ANSWER");
const approvedAnswer = env("APPROVED_ANSWER");
const reloadStart = env("RELOAD_START");
const reloadEnd = env("RELOAD_END");
const lastQuestion = env("LAST_QUESTION");
const shotDir = env("SHOT_DIR");

// Waits until the nth answer (from 0) has the given state.
async function turnState(page, n, state) {
  await page.waitForFunction(
    ([n, state]) => document.querySelectorAll(".message.assistant")[n]?.dataset.state === state,
    [n, state],
    { timeout: TIMEOUT },
  );
}

await drive("chat page", { origin: base }, async ({ page, step }) => {

  step("the page asks for a token");
  await page.goto(base + "/");
  await page.getByLabel("Bearer token", { exact: true }).waitFor();
  check(await page.locator("#view-chat").isHidden(), "the chat shows before a token is given");

  step("the token is saved with the keyboard and the spaces are listed");
  await page.getByLabel("Bearer token", { exact: true }).fill(adminToken);
  await page.getByLabel("Bearer token", { exact: true }).press("Enter");
  await page.locator("#view-chat").waitFor({ state: "visible" });
  check(
    (await page.evaluate(() => localStorage.getItem("data-plane.token"))) === adminToken,
    "the token was not kept in localStorage",
  );
  const space = page.getByLabel("Space", { exact: true });
  await page.locator("#space-select option", { hasText: spaceName }).waitFor({ state: "attached" });
  const options = await space.locator("option").allTextContents();
  check(options[0] === "All spaces", `the first choice is ${JSON.stringify(options[0])}, not "All spaces"`);
  const focused = await page.evaluate(() => document.activeElement?.id);
  check(focused === "message", `after sign-in the focus is on ${JSON.stringify(focused)}, not the message box`);
  await space.selectOption({ label: spaceName });

  step("a message is sent with Enter and the tool call unfolds");
  const message = page.getByLabel("Message", { exact: true });
  await message.fill("Which sources are in this space?");
  await message.press("Enter");
  await page.locator(".message.user", { hasText: "Which sources are in this space?" }).waitFor();
  const card = page.locator(".message.assistant .tool").first();
  await card.waitFor();
  await card.locator(".tool-name", { hasText: toolName }).waitFor();
  await page.locator(".tool[data-state='ok']").first().waitFor();
  const args = await textOf(card.locator(".tool-args"));
  check(args.includes(toolArgsText), `the card shows arguments ${JSON.stringify(args)}`);
  const result = await textOf(card.locator(".tool-result"));
  check(result.includes(resultText), `the card's result lacks ${JSON.stringify(resultText)}: ${result.slice(0, 300)}`);
  check((await textOf(card.locator(".tool-state"))).startsWith("done"), "the card does not say done");

  step("the answer streams in before it is complete");
  const answer = page.locator(".message.assistant").first();
  await answer.locator(".text", { hasText: answerStart.trim() }).waitFor();
  const midway = await answer.evaluate((node) => ({
    state: node.dataset.state,
    text: node.querySelector(".text")?.textContent ?? "",
  }));
  check(midway.state === "streaming", `the answer was already ${midway.state} when its first words showed`);
  check(!midway.text.includes(answerEnd), "the whole answer arrived at once: nothing streamed");
  check(await page.getByRole("button", { name: "Stop" }).isEnabled(), "Stop is not enabled while answering");
  await page.locator(".message.assistant[data-state='done']").first().waitFor();
  const full = await textOf(answer.locator(".text"));
  check(full === answerStart + answerEnd, `the answer reads ${JSON.stringify(full)}`);

  step("model output is shown as text, never as markup");
  check(/<img[^>]*>/.test(answerEnd), "the scripted answer carries no markup to test with");
  check((await page.locator("#log img").count()) === 0, "the answer's markup became an element");

  step("the cited passage is a numbered source that opens with its span marked");
  const sources = answer.locator(".sources .source");
  check((await sources.count()) === 1, `the answer lists ${await sources.count()} sources, not 1`);
  const open = sources.first().locator(".source-open");
  const label = await textOf(open);
  check(label.startsWith("[1] " + citedPath), `the source reads ${JSON.stringify(label)}`);
  check((await open.getAttribute("aria-expanded")) === "false", "the source starts open");
  await open.focus();
  await page.keyboard.press("Enter");
  const mark = sources.first().locator(".source-view mark");
  await mark.waitFor();
  const marked = await textOf(mark);
  check(marked.includes(citedText), `the marked span reads ${JSON.stringify(marked)}`);
  check((await open.getAttribute("aria-expanded")) === "true", "the opened source does not say so");
  check(
    (await sources.first().locator(".source-note").count()) === 0,
    "the document was not read: the page fell back to the quote",
  );

  await page.screenshot({ path: `${shotDir}/chat.png`, fullPage: true });

  step("Stop ends a reply that never finishes");
  await message.fill("Now think slowly.");
  await message.press("Enter");
  const slow = page.locator(".message.assistant").nth(1);
  await slow.locator(".text", { hasText: slowText }).waitFor();
  check((await slow.getAttribute("data-state")) === "streaming", "the slow reply is not streaming");
  await page.getByRole("button", { name: "Stop" }).click();
  await page.locator(".message.assistant[data-state='stopped']").waitFor();
  check(await page.getByRole("button", { name: "Stop" }).isDisabled(), "Stop is still enabled after stopping");
  check(await page.getByRole("button", { name: "Send" }).isEnabled(), "Send is not enabled after stopping");
  check((await textOf(slow)).includes("Stopped."), "the stopped reply does not say so");

  step("an upstream failure shows as an error");
  await message.fill("And once more?");
  await message.press("Enter");
  const failed = page.locator(".message.assistant").nth(2);
  await failed.locator(".error-box[role='alert']").waitFor();
  check((await failed.getAttribute("data-state")) === "error", "the failed reply is not marked as an error");

  step("the nested agent's progress unfolds under its tool card");
  await message.fill(nestedQuestion);
  await message.press("Enter");
  const nestedTurn = page.locator(".message.assistant").nth(3);
  const parent = nestedTurn.locator(".tool", { has: page.locator(".tool-name", { hasText: "analyze_document" }) }).first();
  await parent.waitFor();
  const box = parent.locator(".subagent");
  await box.locator(".subagent-task").waitFor();
  const inner = box.locator(".nested-tool", { has: page.locator(".tool-name", { hasText: "read_document" }) });
  // Nested cards start folded: their result is in the page but not shown.
  await inner.locator(".tool-result").waitFor({ state: "attached" });
  check((await inner.getAttribute("data-state")) === "ok", "the nested read_document did not succeed");
  const innerResult = await textOf(inner.locator(".tool-result"));
  check(innerResult.includes("VACUUM reclaims storage"), `the nested result reads ${innerResult.slice(0, 200)}`);
  await box.locator(".subagent-text", { hasText: nestedText }).waitFor();
  await box.locator(".subagent-end").waitFor();
  await nestedTurn.locator(".text", { hasText: nestedAnswer }).waitFor();
  await page.locator(".message.assistant[data-state='done']").nth(1).waitFor();
  check((await parent.getAttribute("data-state")) === "ok", "analyze_document's card does not show success");
  await parent.scrollIntoViewIfNeeded();
  await parent.screenshot({ path: `${shotDir}/nested.png` });

  step("a fetch asks first, and a denial reaches the model");
  await message.fill("Fetch the notes page.");
  await message.press("Enter");
  const deniedTurn = page.locator(".message.assistant").nth(4);
  const approval = deniedTurn.getByRole("group", { name: "Approval for fetch_web_page" });
  await approval.waitFor();
  const fetchCard = deniedTurn.locator(".tool", { has: page.locator(".tool-name", { hasText: "fetch_web_page" }) });
  check((await fetchCard.getAttribute("data-state")) === "waiting", "the fetch card does not say it waits");
  check((await textOf(fetchCard.locator(".tool-args"))).includes(fetchUrl), "the card does not show the URL");
  check((await textOf(approval)).includes("not among the trusted hosts"), "the card does not say why it asks");
  check(await page.getByRole("button", { name: "Stop" }).isEnabled(), "Stop is not enabled while a call waits");
  await approval.screenshot({ path: `${shotDir}/approval.png` });
  await approval.getByLabel("Reason (told to the assistant if you deny)").fill("not that host");
  await approval.getByRole("button", { name: "Deny" }).click();
  await approval.locator(".approval-status", { hasText: "Denied: not that host" }).waitFor();
  check((await approval.getByRole("button").count()) === 0, "the answered card still has buttons");
  await deniedTurn.locator(".text", { hasText: deniedAnswer }).waitFor();
  await turnState(page, 4, "done");
  check((await fetchCard.getAttribute("data-state")) === "failed", "the denied call does not show as failed");

  step("an approval lets the call run");
  await message.fill("Fetch it anyway.");
  await message.press("Enter");
  const approvedTurn = page.locator(".message.assistant").nth(5);
  const second = approvedTurn.getByRole("group", { name: "Approval for fetch_web_page" });
  await second.waitFor();
  await second.getByLabel("Don't ask again in this conversation").check();
  await second.getByRole("button", { name: "Approve" }).click();
  await second.locator(".approval-status", { hasText: "Approved for this conversation." }).waitFor();
  // The SSRF guard refuses the private address: the card shows the failure,
  // the raw JSON folded under it.
  await approvedTurn.locator(".view-failure", { hasText: "public internet addresses" }).waitFor();
  await approvedTurn.locator(".tool-result").waitFor({ state: "attached" });
  await approvedTurn.locator(".text", { hasText: approvedAnswer }).waitFor();
  await turnState(page, 5, "done");

  step("a reload in the middle of an answer replays the conversation and reattaches");
  await message.fill("Answer slowly.");
  await message.press("Enter");
  const reloading = page.locator(".message.assistant").nth(6);
  await reloading.locator(".text", { hasText: reloadStart.trim() }).waitFor();
  const questions = await page.locator(".message.user").allTextContents();
  await page.reload();
  await page.locator(".message.assistant").nth(6).locator(".text", { hasText: reloadStart.trim() }).waitFor();
  const restored = page.locator(".message.assistant").nth(6);
  check((await restored.getAttribute("data-state")) === "streaming", "the reattached answer is not streaming");
  check(await page.getByRole("button", { name: "Stop" }).isEnabled(), "Stop is not enabled on the reattached run");
  await turnState(page, 6, "done");
  const whole = await textOf(restored.locator(".text"));
  check(whole === reloadStart + reloadEnd, `after the reload the answer reads ${JSON.stringify(whole)}`);
  const after = await page.locator(".message.user").allTextContents();
  check(JSON.stringify(after) === JSON.stringify(questions), `the questions after the reload are ${JSON.stringify(after)}`);
  check((await page.locator(".message.assistant").count()) === 7, "the reload did not redraw every turn once");
  check((await textOf(page.locator(".message.assistant").nth(1))).includes("Stopped."), "the stopped turn lost its note");
  check(
    (await page.locator(".message.assistant").nth(3).locator(".subagent-text", { hasText: nestedText }).count()) === 1,
    "the nested agent's text was not redrawn",
  );
  const replayed = page.locator(".message.assistant").nth(4).locator(".approval-status", { hasText: "Denied: not that host" });
  check((await replayed.count()) === 1, "the answered approval was not redrawn as answered");
  await page.screenshot({ path: `${shotDir}/reloaded.png`, fullPage: true });
  await message.fill(lastQuestion);
  await message.press("Enter");
  await turnState(page, 7, "done");

  step("the page fits a narrow screen");
  await page.setViewportSize({ width: 380, height: 800 });
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  check(overflow <= 0, `the page is ${overflow}px wider than a 380px screen`);
  await page.screenshot({ path: `${shotDir}/narrow.png`, fullPage: true });
  await page.setViewportSize({ width: 1100, height: 900 });

  step("the admin view switches web search on");
  await page.getByRole("button", { name: "Admin" }).click();
  const webSearch = page.getByLabel("Web search");
  await page.locator("#settings-fields:not([disabled])").waitFor();
  check(!(await webSearch.isChecked()), "web search is on before anyone switched it on");
  check(await page.getByLabel("Fetching web pages").isChecked(), "fetching web pages shows as off");
  await webSearch.check();
  await page.locator("#admin-status", { hasText: "Saved" }).waitFor();
  const tools = await page.evaluate(async (token) => {
    const r = await fetch("/v1/tools", { headers: { Authorization: "Bearer " + token } });
    return (await r.json()).tools.map((t) => t.function.name);
  }, adminToken);
  check(tools.includes("web_search"), `GET /v1/tools lists ${tools.join(", ")}: no web_search`);
  step("the admin view trusts a host and names a tool that asks");
  await page.getByLabel("Trusted hosts for fetch_web_page", { exact: false }).fill("docs.python.org\n*.postgresql.org");
  await page.getByLabel("Tools that ask", { exact: false }).fill("query_documents");
  await page.getByRole("group", { name: "Categories that ask" }).getByLabel("web").check();
  await page.getByRole("button", { name: "Save approvals" }).click();
  await page.locator("#approvals-status", { hasText: "Saved" }).waitFor();
  const saved = await page.evaluate(async (token) => {
    const r = await fetch("/v1/admin/settings", { headers: { Authorization: "Bearer " + token } });
    return await r.json();
  }, adminToken);
  check(
    JSON.stringify(saved.fetch_web_page_trusted_hosts) === JSON.stringify(["docs.python.org", "*.postgresql.org"]),
    `the trusted hosts are ${JSON.stringify(saved.fetch_web_page_trusted_hosts)}`,
  );
  check(
    JSON.stringify(saved.approvals) === JSON.stringify({ tools: ["query_documents"], categories: ["web"], annotations: [] }),
    `the approval rules are ${JSON.stringify(saved.approvals)}`,
  );
  await page.getByLabel("Tools that ask", { exact: false }).fill("no_such_tool");
  await page.getByRole("button", { name: "Save approvals" }).click();
  await page.locator("#approvals-status", { hasText: "no_such_tool" }).waitFor();
  await page.screenshot({ path: `${shotDir}/admin.png`, fullPage: true });

  step("a user who is not an admin is told so");
  await page.getByRole("button", { name: "Token" }).click();
  await page.getByLabel("Bearer token", { exact: true }).fill(userToken);
  await page.getByLabel("Bearer token", { exact: true }).press("Enter");
  await page.getByRole("button", { name: "Admin" }).click();
  await page.locator("#admin-status", { hasText: "Only admins" }).waitFor();
  check(await page.getByLabel("Web search").isHidden(), "a non-admin still sees the switches");
  check(await page.locator("#approvals-fields").isHidden(), "a non-admin still sees the approval rules");
});
