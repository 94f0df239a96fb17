// What the chat page's browser tests (chat_page.mjs, chat_views.mjs)
// share: their settings from the environment, named steps, checks, and a
// driver that opens Debian's Chromium through playwright-core, watches the
// page for errors, and on the first failure says which step failed and
// what the last answer showed, then exits non-zero.

import { chromium } from "playwright-core";

export const TIMEOUT = 20_000;

export function env(name) {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set`);
  return value;
}

export function check(condition, message) {
  if (!condition) throw new Error(message);
}

export async function textOf(locator) {
  return (await locator.textContent()) ?? "";
}

// Runs `body({ page, step })` on a fresh 1100×900 page, `permissions`
// granted to `origin` (CHROMIUM names the browser).
export async function drive(title, { origin, permissions = [] }, body) {
  const browser = await chromium.launch({ executablePath: env("CHROMIUM"), headless: true });
  const pageErrors = [];
  let stepName = "start";
  let page = null;
  const step = (name) => {
    stepName = name;
    console.log(`step: ${name}`);
  };
  try {
    const context = await browser.newContext({ viewport: { width: 1100, height: 900 } });
    if (permissions.length > 0) await context.grantPermissions(permissions, { origin });
    context.setDefaultTimeout(TIMEOUT);
    page = await context.newPage();
    page.on("pageerror", (e) => pageErrors.push(String(e)));
    page.on("console", (m) => {
      if (m.type() === "error") console.log(`browser console: ${m.text()}`);
    });
    await body({ page, step });
    check(pageErrors.length === 0, `the page threw: ${pageErrors.join("; ")}`);
    console.log(`${title}: all steps passed`);
  } catch (error) {
    console.error(`${title}: step "${stepName}" failed: ${error.message}`);
    if (pageErrors.length) console.error(`page errors: ${pageErrors.join("; ")}`);
    const last = await page
      ?.locator(".message.assistant")
      .last()
      .innerText({ timeout: 1000 })
      .catch(() => "");
    if (last) console.error(`the last answer reads:\n${last.slice(0, 4000)}`);
    process.exitCode = 1;
  } finally {
    await browser.close();
  }
}
