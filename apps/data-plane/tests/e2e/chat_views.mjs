// Drives the chat page in headless Chromium through three scripted turns
// (apps/data-plane/tests/chat_page.rs scripts the model) and checks that
// each tool's result shows as its view, with the raw JSON a click away:
//
// 1. list_sources, folder_tree, list_folder_contents and find_by_name;
// 2. search_documents, grep_documents, document_info and read_document,
//    then an answer in Markdown that cites a hit and carries markup and
//    script that must stay inert;
// 3. query_documents, fetch_web_page, web_search and a failing call.
//
// It opens the document viewer from a hit, a grep line, a listed document
// and a citation (the cited span marked and scrolled into view, Earlier and
// Later paging, Escape closing it with the focus back where it was), copies
// a code block, and looks at the page in the dark scheme and at 380px.
// Screenshots of each view go to SHOT_DIR.
//
// Environment: DATA_PLANE_URL, ADMIN_TOKEN, SPACE_NAME, LONG_PATH (a long
// guide), NEEDLE (a word in one of its paragraphs), WEB_URL,
// WEB_TITLE and WEB_SENTENCE (the page fetch_web_page reads), CODE_BLOCK
// (the answer's code), SHOT_DIR, CHROMIUM.

import { check, drive, env, textOf } from "./harness.mjs";

const base = env("DATA_PLANE_URL");
const adminToken = env("ADMIN_TOKEN");
const spaceName = env("SPACE_NAME");
const longPath = env("LONG_PATH");
const needle = env("NEEDLE");
const webUrl = env("WEB_URL");
const webTitle = env("WEB_TITLE");
const webSentence = env("WEB_SENTENCE");
const codeBlock = env("CODE_BLOCK");
const shotDir = env("SHOT_DIR");

await drive("chat views", { origin: base, permissions: ["clipboard-read", "clipboard-write"] }, async ({ page, step }) => {
  await page.goto(base + "/");
  await page.getByLabel("Bearer token", { exact: true }).fill(adminToken);
  await page.getByLabel("Bearer token", { exact: true }).press("Enter");
  await page.locator("#space-select option", { hasText: spaceName }).waitFor({ state: "attached" });
  await page.getByLabel("Space", { exact: true }).selectOption({ label: spaceName });
  const message = page.getByLabel("Message", { exact: true });
  const turn = (n) => page.locator(".message.assistant").nth(n);
  const cardOf = (n, callId) => turn(n).locator(`.tool[data-call-id='${callId}']`);
  const viewer = page.locator("#viewer");

  // Every card of a finished turn has its view and the raw JSON folded under it.
  async function rawIsOneClickAway(card, piece) {
    const raw = card.locator(":scope > details.raw");
    check((await raw.count()) === 1, "a card has no raw JSON to unfold");
    check(!(await raw.evaluate((d) => d.open)), "the raw JSON starts unfolded");
    check(await raw.locator("pre.tool-result").isHidden(), "the raw JSON shows while folded");
    await raw.locator("summary").click();
    await raw.locator("pre.tool-result").waitFor({ state: "visible" });
    const json = await textOf(raw.locator("pre.tool-result"));
    check(json.includes(piece), `the raw JSON lacks ${JSON.stringify(piece)}: ${json.slice(0, 200)}`);
    await raw.locator("summary").click();
  }

  // Opens the viewer with `opener` (clicked, or Enter when `keyboard`) and
  // answers its marked text ("" when nothing is marked).
  async function openViewer(opener, keyboard) {
    if (keyboard) {
      await opener.focus();
      await page.keyboard.press("Enter");
    } else {
      await opener.click();
    }
    await viewer.waitFor({ state: "visible" });
    await page.waitForFunction(() => {
      const status = document.querySelector("#viewer .viewer-status");
      return status && status.textContent === "" && document.querySelector("#viewer .viewer-where").textContent !== "";
    });
    const mark = viewer.locator(".viewer-text mark");
    return (await mark.count()) > 0 ? await textOf(mark) : "";
  }

  // A screenshot of one element. The conversation scrolls inside a box of
  // the window's height, which would cut a tall card: the box is let grow
  // first (a style set from script, which the page's CSP allows).
  async function shot(locator, name) {
    await page.evaluate(() => {
      document.getElementById("log").style.maxHeight = "none";
    });
    await locator.screenshot({ path: `${shotDir}/${name}` });
  }

  // The dialog hides at once but its close event, which gives the focus
  // back, comes a task later: the next step starts only once it has, or
  // its own focus would be taken away.
  async function closeViewer(opener, button) {
    if (button) await viewer.locator(".viewer-close").click();
    else await page.keyboard.press("Escape");
    await viewer.waitFor({ state: "hidden" });
    const back = await opener
      .evaluate((node) => new Promise((done) => {
        const until = Date.now() + 5000;
        (function look() {
          if (node === document.activeElement || Date.now() > until) done(node === document.activeElement);
          else setTimeout(look, 20);
        })();
      }));
    check(back, "closing the viewer did not give the focus back to what opened it");
  }

  step("turn 1: the navigation tools show as lists, a table and a tree");
  await message.fill("Show me around the space.");
  await message.press("Enter");
  await page.locator(".message.assistant[data-state='done']").first().waitFor();
  const sources = cardOf(0, "call_sources");
  const sourceRow = sources.locator(".view-sources tbody tr").first();
  check((await textOf(sourceRow)).includes("guides"), `list_sources shows ${await textOf(sourceRow)}`);
  check(
    (await sources.locator(".view-sources thead th").allTextContents()).join(",") === "source,kind,documents,folders,size",
    "list_sources' table has other columns",
  );
  const tree = cardOf(0, "call_tree").locator(".view-tree");
  const maintenance = tree.locator("details.tree-node", { has: page.locator("summary", { hasText: "maintenance/" }) }).first();
  await maintenance.waitFor();
  check(await maintenance.evaluate((d) => d.open), "the tree's first levels start unfolded");
  const tuning = tree.locator("summary", { hasText: "tuning/" });
  check((await tuning.count()) + (await tree.locator(".tree-leaf", { hasText: "tuning/" }).count()) > 0, "the tree lacks tuning/");
  await maintenance.locator(":scope > summary").focus();
  await page.keyboard.press("Enter");
  check(!(await maintenance.evaluate((d) => d.open)), "Enter on a tree node did not fold it");
  await page.keyboard.press("Enter");
  const folder = cardOf(0, "call_folder").locator(".view-folder");
  check((await textOf(folder.locator(".folder-name"))).includes("tuning/"), "list_folder_contents lacks the tuning folder");
  check(
    (await folder.locator(".doc-open").allTextContents()).includes("maintenance/vacuum.md"),
    "list_folder_contents lacks vacuum.md",
  );
  const found = cardOf(0, "call_find").locator(".view-docs .doc-open");
  const names = await found.allTextContents();
  check(names.includes(longPath) && names.includes("maintenance/vacuum.md"), `find_by_name lists ${names.join(", ")}`);
  for (const [id, piece] of [
    ["call_sources", '"sources"'],
    ["call_tree", '"tree"'],
    ["call_folder", '"documents"'],
    ["call_find", '"documents"'],
  ]) {
    await rawIsOneClickAway(cardOf(0, id), piece);
  }
  step("a listed document opens in the viewer at its start");
  const listed = found.filter({ hasText: longPath });
  const nothingMarked = await openViewer(listed, true);
  check(nothingMarked === "", "a document opened from a list has a marked span");
  check((await textOf(viewer.locator(".viewer-where"))).includes("characters 0–"), "the viewer did not start at 0");
  check(await viewer.locator(".viewer-earlier").isDisabled(), "Earlier is enabled at the document's start");
  check(await viewer.locator(".viewer-later").isEnabled(), "Later is disabled in a long document");
  await closeViewer(listed);
  await shot(turn(0), "view-navigation.png");

  step("turn 2: search hits, grep lines, a metadata card and an excerpt");
  await message.fill("How do I tune autovacuum?");
  await message.press("Enter");
  const answer = turn(1);
  // The answer's Markdown shows while it streams.
  await answer.locator(".text h4", { hasText: "Tuning autovacuum" }).waitFor();
  check((await answer.getAttribute("data-state")) === "streaming", "the Markdown did not show before the answer ended");
  await page.locator(".message.assistant[data-state='done']").nth(1).waitFor();
  const search = cardOf(1, "call_search").locator(".view-search");
  const hits = search.locator(".hit");
  check((await hits.count()) >= 1, "search_documents shows no hits");
  const firstHit = hits.first();
  check((await firstHit.locator(".doc-open").count()) === 1, "a hit has no document button");
  const marks = await search.locator(".hit-text mark").allTextContents();
  check(
    marks.some((m) => /^(autovacuum|naptime|launcher)/i.test(m)),
    `no query word is marked in the hits: ${JSON.stringify(marks)}`,
  );
  const retrievers = await search.locator(".hit-found .badge").allTextContents();
  check(
    retrievers.some((r) => /^(keyword|vector) #\d+$/.test(r)),
    `the hits do not say which retriever found them: ${retrievers.join(", ")}`,
  );
  const grep = cardOf(1, "call_grep").locator(".view-grep");
  const grepFile = await textOf(grep.locator(".grep-file > .doc-open"));
  check(grepFile === longPath, `the grep group is ${grepFile}`);
  const matchLine = grep.locator(".grep-line.match").first();
  check((await textOf(matchLine.locator(".grep-open > .line-text mark"))) === needle, "the grep match is not marked");
  const lineNumbers = await grep.locator(".line-no").allTextContents();
  check(lineNumbers.length === 3, `grep shows ${lineNumbers.length} lines, not the match and one each side`);
  const numbers = lineNumbers.map(Number);
  check(numbers[1] === numbers[0] + 1 && numbers[2] === numbers[1] + 1, `the line numbers run ${lineNumbers.join(",")}`);
  const near = cardOf(1, "call_grep_near").locator(".view-grep");
  const nearLines = (await near.locator(".line-no").allTextContents()).join(",");
  check(
    nearLines === "1,2,3,4,5,6,7",
    `overlapping context shows lines ${nearLines}, not 1 to 7 once each: ${(await textOf(cardOf(1, "call_grep_near"))).slice(0, 600)}`,
  );
  const nearMatches = (await near.locator(".grep-line.match .line-no").allTextContents()).join(",");
  check(nearMatches === "3,5", `the matches are on lines ${nearMatches}, not 3 and 5`);
  const info = cardOf(1, "call_info").locator(".view-info");
  const terms = await info.locator("dt").allTextContents();
  check(terms.includes("Type") && terms.includes("Passages"), `document_info shows ${terms.join(", ")}`);
  check((await textOf(info.locator("dd").first())) === longPath, "document_info's path is wrong");
  const read = cardOf(1, "call_read").locator(".view-read");
  check((await textOf(read.locator(".excerpt"))).includes("VACUUM reclaims storage"), "read_document's excerpt lacks the text");
  check((await textOf(read.locator(".view-meta"))).includes("characters 0–"), "read_document's range is missing");
  for (const [id, piece] of [
    ["call_search", '"found_by"'],
    ["call_grep", '"matches"'],
    ["call_info", '"mime"'],
    ["call_read", '"total_chars"'],
  ]) {
    await rawIsOneClickAway(cardOf(1, id), piece);
  }
  await shot(cardOf(1, "call_search"), "view-search.png");

  step("a grep line opens the viewer with the match marked and in view");
  const fromGrep = await openViewer(matchLine.locator(".grep-open"), false);
  check(fromGrep === needle, `the viewer marks ${JSON.stringify(fromGrep)} for the grep line`);
  const inView = await page.evaluate(() => {
    const box = document.querySelector("#viewer .viewer-text").getBoundingClientRect();
    const mark = document.querySelector("#viewer .viewer-text mark").getBoundingClientRect();
    return mark.top >= box.top && mark.bottom <= box.bottom;
  });
  check(inView, "the marked span is not scrolled into the viewer's view");
  await page.screenshot({ path: `${shotDir}/view-viewer.png` });
  step("the viewer pages through the document");
  const where = await textOf(viewer.locator(".viewer-where"));
  check(await viewer.locator(".viewer-later").isEnabled(), "Later is disabled in the middle of a long document");
  await viewer.locator(".viewer-later").click();
  await page.waitForFunction((before) => document.querySelector("#viewer .viewer-where").textContent !== before, where);
  check((await viewer.locator(".viewer-text mark").count()) === 0, "a page past the span still marks it");
  const later = await textOf(viewer.locator(".viewer-where"));
  const [from] = later.match(/characters (\d+)/).slice(1).map(Number);
  const [before] = where.match(/–(\d+)/).slice(1).map(Number);
  check(from === before, `Later read from ${from}, not where the page before ended (${before})`);
  await viewer.locator(".viewer-earlier").click();
  await page.waitForFunction((shown) => document.querySelector("#viewer .viewer-where").textContent !== shown, later);
  await closeViewer(matchLine.locator(".grep-open"), true);

  step("a search hit opens the viewer at its passage");
  const hitOpener = firstHit.locator(".doc-open");
  const fromHit = await openViewer(hitOpener, true);
  const hitText = (await textOf(firstHit.locator(".hit-text"))).replace(/…$/, "");
  check(fromHit.length > 0 && hitText.startsWith(fromHit.slice(0, 80)), `the viewer marks ${JSON.stringify(fromHit.slice(0, 80))}, the hit reads ${JSON.stringify(hitText.slice(0, 80))}`);
  await closeViewer(hitOpener);

  step("the answer is Markdown, and its markup and script stay inert");
  const text = answer.locator(".text");
  check((await text.locator("strong").allTextContents()).includes("busy"), "**busy** is not bold");
  check((await text.locator("code").first().textContent()) === "pg_stat_user_tables", "the code span is missing");
  check((await text.locator("ol > li").count()) === 2, "the numbered list does not have two items");
  check((await text.locator("ol > li ul > li").count()) === 1, "the nested list is missing");
  const manual = text.locator("a", { hasText: "the manual" });
  check(
    (await manual.getAttribute("href")) === "https://www.postgresql.org/docs/current/routine-vacuuming.html",
    "the link's target is wrong",
  );
  check((await manual.getAttribute("rel")) === "noopener noreferrer nofollow", "the link lacks rel=noopener");
  check((await manual.getAttribute("target")) === "_blank", "the link does not open a new tab");
  check((await text.locator("table th").allTextContents()).join(",") === "table,size", "the table's header is wrong");
  check((await textOf(text.locator("table td").nth(1))) === "42", "the table's cell is wrong");
  check(
    (await text.locator("table td").nth(1).evaluate((td) => getComputedStyle(td).textAlign)) === "right",
    "the right-aligned column is not",
  );
  check((await textOf(text.locator(".code-block pre code"))) === codeBlock, "the code block's text is wrong");
  check((await textOf(text.locator(".code-lang"))) === "sql", "the code block's language is missing");
  const inert = await page.evaluate(() => ({
    pwned: window.__pwned,
    elements: document.querySelectorAll("#log script, #log img, #log iframe, #log object, #log embed").length,
    links: [...document.querySelectorAll("#log a")].map((a) => a.getAttribute("href")).filter((h) => !/^https?:\/\//.test(h || "")),
    handlers: [...document.querySelectorAll("#log *")].filter((n) => [...n.attributes].some((a) => a.name.startsWith("on"))).length,
  }));
  check(inert.pwned === undefined, `model text ran script: ${inert.pwned}`);
  check(inert.elements === 0, `model text made ${inert.elements} script, image or frame elements`);
  check(inert.links.length === 0, `links that are not http(s): ${inert.links.join(", ")}`);
  check(inert.handlers === 0, "an element carries an event-handler attribute");
  const shown = await textOf(text);
  check(shown.includes("<script>window.__pwned = 'script'</script>"), "the script tag is not shown as text");
  check(shown.includes('<a href="javascript:alert(1)">raw link</a>'), "the raw link is not shown as text");
  check((await text.locator(".link-dropped", { hasText: "click me" }).count()) === 1, "the javascript: link is not dropped to text");

  step("the renderer holds up on hard input");
  const hard = await page.evaluate(() => {
    const draw = (text) => {
      const box = document.createElement("div");
      box.append(Markdown.render(text, {}));
      return box;
    };
    const timed = (text) => {
      const start = performance.now();
      draw(text);
      return Math.round(performance.now() - start);
    };
    return {
      snake: draw("call search_documents or grep_documents").querySelectorAll("em, strong").length,
      url: draw("see https://example.org/a_(b), then").querySelector("a")?.getAttribute("href"),
      deepQuote: draw(">".repeat(5000) + " deep").textContent.includes("deep"),
      deepList: draw(Array.from({ length: 300 }, (_, i) => " ".repeat(i * 2) + "- level " + i).join("\n")).textContent.includes("level 299"),
      unclosedFence: draw("```js\nlet a = 1;").querySelector("pre code")?.textContent,
      dataLink: draw("[x](data:text/html,<script>alert(1)</script>) ![y](javascript:alert(1))").querySelectorAll("a").length,
      entities: draw("&lt;b&gt; &amp;").textContent,
      table: draw("a | b\n--|--\n1 | 2").querySelectorAll("td").length,
      nested: draw("**bold *inner* text** and ***both***").querySelectorAll("strong em, em strong").length,
      // Unclosed markers in one long paragraph: printed, not asserted.
      unclosedMs: timed("** a `b _c ~~d ".repeat(20000)),
    };
  });
  console.log(`renderer: 20,000 unclosed markers drawn in ${hard.unclosedMs} ms`);
  check(hard.snake === 0, "an underscore inside a word emphasised something");
  check(hard.url === "https://example.org/a_(b)", `the bare URL became ${hard.url}`);
  check(hard.deepQuote && hard.deepList, "deep nesting lost its text");
  check(hard.unclosedFence === "let a = 1;", `an unclosed fence reads ${JSON.stringify(hard.unclosedFence)}`);
  check(hard.dataLink === 0, "a data: or javascript: target became a link");
  check(hard.entities === "&lt;b&gt; &amp;", `entities were decoded: ${hard.entities}`);
  check(hard.table === 2, "a table without outer pipes was not read");
  check(hard.nested === 2, "nested emphasis was not read");

  step("a code block's Copy button copies its code");
  const copy = text.locator(".code-copy");
  await copy.click();
  await text.locator(".code-copy", { hasText: "Copied" }).waitFor();
  const copied = await page.evaluate(() => navigator.clipboard.readText());
  check(copied === codeBlock, `the clipboard holds ${JSON.stringify(copied)}`);
  await shot(answer.locator(".text"), "view-answer.png");

  step("a citation in the answer opens its passage in the viewer");
  const cite = text.locator("button.cite", { hasText: "[1]" });
  check((await cite.count()) === 1, "the [1] in the answer is not a citation button");
  const cited = await openViewer(cite, true);
  check(cited.length > 0 && hitText.startsWith(cited.slice(0, 80)), `the citation marks ${JSON.stringify(cited.slice(0, 80))}`);
  await closeViewer(cite);

  step("turn 3: a table query, a web page, web results and a failure");
  await message.fill("Query the sizes, then read the web.");
  await message.press("Enter");
  await page.locator(".message.assistant[data-state='done']").nth(2).waitFor();
  const query = cardOf(2, "call_query").locator(".view-query");
  check((await textOf(query.locator("pre.sql"))).startsWith("SELECT * FROM"), "the SQL is not shown above the table");
  check(
    (await query.locator("thead th").allTextContents()).join(",") === "table_name,size_mb,dead_tuples",
    `the query's columns are ${(await query.locator("thead th").allTextContents()).join(",")}`,
  );
  check((await query.locator("tbody tr").count()) === 3, "the query's table does not have three rows");
  const webPage = cardOf(2, "call_fetch").locator(".view-web");
  check((await textOf(webPage.locator(".web-title"))) === webTitle, `the page's title is ${await textOf(webPage.locator(".web-title"))}`);
  check((await textOf(webPage.locator(".web-content"))).includes(webSentence), "the page's preview lacks its text");
  const source = webPage.locator(".view-meta a").first();
  check((await source.getAttribute("href")) === webUrl, `the page links to ${await source.getAttribute("href")}`);
  check((await source.getAttribute("rel")) === "noopener noreferrer nofollow", "the page's link lacks rel=noopener");
  const results = cardOf(2, "call_web").locator(".view-websearch .web-results > li");
  check((await results.count()) === 2, `web_search shows ${await results.count()} results`);
  check(
    (await results.first().locator("a").getAttribute("href")) === "https://www.postgresql.org/docs/current/routine-vacuuming.html",
    "the first web result links elsewhere",
  );
  check((await textOf(results.first().locator(".web-snippet"))).includes("autovacuum daemon"), "the web result lacks its snippet");
  const failed = cardOf(2, "call_missing");
  check((await failed.getAttribute("data-state")) === "failed", "the failing call does not show as failed");
  check((await textOf(failed.locator(".failure-title"))) === "Failed: not found", `the failure reads ${await textOf(failed.locator(".failure-title"))}`);
  check((await failed.locator(".failure-hint").count()) === 1, "the failure gives no hint");
  for (const [id, piece] of [
    ["call_query", '"sql"'],
    ["call_fetch", '"final_url"'],
    ["call_web", '"results"'],
    ["call_missing", '"not_found"'],
  ]) {
    await rawIsOneClickAway(cardOf(2, id), piece);
  }
  check((await page.evaluate(() => window.__pwned)) === undefined, "the fetched page's script ran");
  await shot(turn(2), "view-data-web.png");

  step("the page follows a dark system scheme");
  await page.emulateMedia({ colorScheme: "dark" });
  const background = await page.evaluate(() => getComputedStyle(document.body).backgroundColor);
  check(background === "rgb(17, 20, 24)", `the dark scheme's background is ${background}`);
  await shot(turn(1), "view-dark.png");
  await page.emulateMedia({ colorScheme: "light" });

  step("every view fits a 380px screen");
  await page.setViewportSize({ width: 380, height: 800 });
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  check(overflow <= 0, `the page is ${overflow}px wider than a 380px screen`);
  const viewOverflow = await page.evaluate(() =>
    [...document.querySelectorAll(".view, .markdown")]
      .filter((v) => v.getBoundingClientRect().right > window.innerWidth + 1)
      .map((v) => v.className),
  );
  check(viewOverflow.length === 0, `views stick out of a 380px screen: ${viewOverflow.join(", ")}`);
  await page.screenshot({ path: `${shotDir}/view-narrow.png`, fullPage: true });
});
