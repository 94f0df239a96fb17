// The chat page signing a person in through the deployment's OpenID
// provider, in headless Chromium: Sign in, the provider's own login and
// consent pages, back on the page with a token only in memory (the refresh
// token in sessionStorage, nothing in localStorage), the API answering,
// a reload that keeps the session, the access token renewed before it
// expires, and Sign out through the provider's end-session page. Started
// by apps/data-plane/tests/chat_page.rs with BASE (the server), ISSUER,
// LOGIN (a user the provider knows), EMAIL (theirs), SPACE (a space they
// are a member of) and CHROMIUM.

import { check, drive, env, textOf } from "./harness.mjs";

const base = env("BASE");
const issuer = env("ISSUER");
const login = env("LOGIN");
const email = env("EMAIL");
const spaceName = env("SPACE");
const shots = env("SHOT_DIR");

async function storage(page) {
  return page.evaluate(() => ({
    local: Object.fromEntries(Object.entries(localStorage)),
    session: Object.fromEntries(Object.entries(sessionStorage)),
  }));
}

await drive("sign-in", { origin: base }, async ({ page, step }) => {
  step("the page offers Sign in");
  await page.goto(base + "/");
  const signIn = page.getByRole("button", { name: "Sign in", exact: true });
  await signIn.waitFor();

  step("the provider's login page");
  await signIn.click();
  await page.waitForURL((url) => url.href.startsWith(issuer));
  await page.locator("input[name=login]").fill(login);
  await page.locator("input[name=password]").fill("any password");
  await page.screenshot({ path: `${shots}/provider-login.png` });
  await page.locator("button[type=submit]").click();

  step("the provider's consent page");
  // oidc-provider asks for consent to the scopes (offline_access above all).
  await page.waitForURL((url) => url.href.startsWith(issuer + "/interaction/"));
  await page.locator("button[type=submit]").click();

  step("back on the page, signed in");
  const spaces = page.waitForResponse((r) => r.url().endsWith("/v1/spaces") && r.request().method() === "GET");
  await page.waitForURL((url) => url.href.startsWith(base + "/"));
  check((await spaces).status() === 200, `GET /v1/spaces answered ${(await spaces).status()}`);
  await page.locator("#space-select option", { hasText: spaceName }).waitFor({ state: "attached" });
  check(!page.url().includes("code="), `the code stays in the address bar: ${page.url()}`);
  const sent = await (await spaces).request().headerValue("authorization");
  check(sent && sent.startsWith("Bearer ey"), `the request carried ${sent}`);
  const token = sent.slice("Bearer ".length);
  let kept = await storage(page);
  check(
    !Object.values(kept.local).some((v) => v.includes(token.slice(0, 40)) || v.startsWith("ey")),
    `a token is in localStorage: ${JSON.stringify(kept.local)}`,
  );
  check(
    !Object.values(kept.session).some((v) => v.includes(token.slice(0, 40))),
    "the access token is in sessionStorage",
  );
  check(kept.session["data-plane.signin.refresh"], "no refresh token kept for a reload");
  await page.getByRole("button", { name: "Token", exact: true }).click();
  const who = await textOf(page.locator("#signin-who"));
  check(who.includes(email), `the page says ${who}`);
  check(await page.locator("#token-input").inputValue() === "", "the provider's token shown as a pasted one");
  await page.screenshot({ path: `${shots}/signed-in.png` });

  step("the access token is renewed before it expires");
  const renewed = await page.waitForRequest(
    (r) => r.url().startsWith(issuer) && r.method() === "POST" && (r.postData() || "").includes("grant_type=refresh_token"),
    { timeout: 30_000 },
  );
  check((await renewed.response()).status() === 200, "the refresh was refused");
  const after = page.waitForResponse((r) => r.url().endsWith("/v1/spaces") && r.request().method() === "GET");
  await page.getByRole("button", { name: "Chat", exact: true }).click();
  const again = await after;
  check(again.status() === 200, `after the refresh GET /v1/spaces answered ${again.status()}`);
  const renewedToken = (await again.request().headerValue("authorization")).slice("Bearer ".length);
  check(renewedToken !== token, "the page still sends the first access token");

  step("a reload keeps the session");
  const reloaded = page.waitForResponse((r) => r.url().endsWith("/v1/spaces") && r.request().method() === "GET");
  await page.reload();
  check((await reloaded).status() === 200, "after a reload the server refused the page");

  step("Sign out ends the session at the provider");
  await page.getByRole("button", { name: "Token", exact: true }).click();
  await page.getByRole("button", { name: "Sign out", exact: true }).click();
  await page.waitForURL((url) => url.href.startsWith(issuer));
  // oidc-provider asks whether to sign out of the provider too.
  await page.locator("button[type=submit]", { hasText: /yes/i }).first().click();
  await page.waitForURL((url) => url.href.startsWith(base + "/"));
  await page.getByRole("button", { name: "Sign in", exact: true }).waitFor();
  kept = await storage(page);
  check(!kept.session["data-plane.signin.refresh"], "the refresh token outlived the sign-out");
  await page.screenshot({ path: `${shots}/signed-out.png` });
});
