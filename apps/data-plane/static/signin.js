// Sign-in with the deployment's OpenID provider (docs/auth.md): the
// authorization-code flow with PKCE as a public client, run by the page
// itself against the provider GET /v1/auth/config names.
//
// Where tokens live: the access and ID tokens in this script's memory only;
// the refresh token in this tab's sessionStorage, so a reload continues the
// session (it is gone when the tab closes); never localStorage. The access
// token is renewed a minute before it expires. Sign out forgets all of
// them, revokes the refresh token where the provider offers revocation,
// and ends the provider's session where it offers that.
"use strict";

const SignIn = (() => {
  // Only what crosses the provider's redirect: verifier, state, nonce.
  const PENDING_KEY = "data-plane.signin.pending";
  const REFRESH_KEY = "data-plane.signin.refresh";
  // Renew this long before the access token expires.
  const EARLY_MS = 60_000;

  let config = null;
  let tokens = null;
  let timer = null;
  // The refresh under way, shared by everyone who needs a fresh token
  // meanwhile: a rotating refresh token is spent once.
  let renewing = null;
  let onChange = () => {};

  function b64url(bytes) {
    let text = "";
    for (const b of new Uint8Array(bytes)) text += String.fromCharCode(b);
    return btoa(text).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
  }

  function random() {
    return b64url(crypto.getRandomValues(new Uint8Array(32)));
  }

  function claims(jwt) {
    try {
      const part = jwt.split(".")[1].replace(/-/g, "+").replace(/_/g, "/");
      const bytes = Uint8Array.from(atob(part), (c) => c.charCodeAt(0));
      return JSON.parse(new TextDecoder().decode(bytes));
    } catch (_) {
      return {};
    }
  }

  function redirectUri() {
    return location.origin + "/";
  }

  // The sign-in settings, or null when the server signs nobody in itself.
  async function load() {
    try {
      const response = await fetch("/v1/auth/config");
      const body = await response.json();
      config = body.oidc && body.oidc.client_id ? body.oidc : null;
    } catch (_) {
      config = null;
    }
    return config;
  }

  function available() {
    return config !== null;
  }

  // The token the server is sent: the access token, or the ID token where
  // the deployment says so.
  function bearer() {
    if (!tokens) return "";
    return config && config.token === "id_token" ? tokens.id_token || "" : tokens.access_token || "";
  }

  function who() {
    if (!tokens) return null;
    const c = claims(tokens.id_token || tokens.access_token || "");
    return c.email || c.preferred_username || c.name || c.sub || "signed in";
  }

  function endpoints() {
    if (!config.endpoints || !config.endpoints.authorization_endpoint || !config.endpoints.token_endpoint) {
      throw new Error(config.error ? "the provider cannot be reached: " + config.error : "the provider has no authorization or token endpoint");
    }
    return config.endpoints;
  }

  // Sends the person to the provider's sign-in page.
  async function begin() {
    const { authorization_endpoint } = endpoints();
    const verifier = random();
    const challenge = b64url(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(verifier)));
    const pending = { verifier, state: random(), nonce: random() };
    sessionStorage.setItem(PENDING_KEY, JSON.stringify(pending));
    const url = new URL(authorization_endpoint);
    const query = url.searchParams;
    query.set("response_type", "code");
    query.set("client_id", config.client_id);
    query.set("redirect_uri", redirectUri());
    query.set("scope", config.scopes.join(" "));
    query.set("state", pending.state);
    query.set("nonce", pending.nonce);
    query.set("code_challenge", challenge);
    query.set("code_challenge_method", "S256");
    if (config.scopes.includes("offline_access")) query.set("prompt", "consent");
    location.assign(url.toString());
  }

  async function tokenRequest(fields) {
    const { token_endpoint } = endpoints();
    const response = await fetch(token_endpoint, {
      method: "POST",
      headers: { "Content-Type": "application/x-www-form-urlencoded", Accept: "application/json" },
      body: new URLSearchParams({ client_id: config.client_id, ...fields }).toString(),
    });
    const body = await response.json().catch(() => ({}));
    if (!response.ok || !body.access_token) {
      const error = new Error(body.error_description || body.error || "the provider answered " + response.status);
      // A 4xx is the provider's no (invalid_grant: the session is over);
      // a 5xx may pass.
      error.final = response.status >= 400 && response.status < 500;
      throw error;
    }
    return body;
  }

  function keep(answer) {
    const previous = tokens || {};
    const idToken = answer.id_token || previous.id_token;
    // The token sent decides when it expires: the ID token's own `exp`
    // where the page sends that one.
    let expiresAt = Date.now() + 1000 * (Number(answer.expires_in) || 300);
    if (config.token === "id_token") {
      const exp = Number(claims(idToken || "").exp);
      if (!answer.id_token || !exp) throw Object.assign(new Error("the provider sent no new ID token"), { final: true });
      expiresAt = exp * 1000;
    }
    tokens = {
      access_token: answer.access_token,
      id_token: idToken,
      refresh_token: answer.refresh_token || previous.refresh_token,
      expires_at: expiresAt,
    };
    if (tokens.refresh_token) sessionStorage.setItem(REFRESH_KEY, tokens.refresh_token);
    schedule();
    onChange();
  }

  function schedule() {
    clearTimeout(timer);
    if (!tokens || !tokens.refresh_token) return;
    const wait = Math.max(5_000, tokens.expires_at - Date.now() - EARLY_MS);
    timer = setTimeout(() => refresh().catch(() => {}), wait);
  }

  // Renews the tokens. The provider refusing ends the session; a provider
  // that cannot be reached keeps it, and it is tried again shortly.
  function refresh() {
    if (renewing) return renewing;
    renewing = (async () => {
      const refreshToken = (tokens && tokens.refresh_token) || sessionStorage.getItem(REFRESH_KEY);
      if (!refreshToken) throw Object.assign(new Error("no session to renew"), { final: true });
      try {
        keep(await tokenRequest({ grant_type: "refresh_token", refresh_token: refreshToken }));
      } catch (error) {
        if (error.final || !tokens) {
          forget();
          onChange(error);
        } else {
          clearTimeout(timer);
          timer = setTimeout(() => refresh().catch(() => {}), 15_000);
        }
        throw error;
      }
    })().finally(() => {
      renewing = null;
    });
    return renewing;
  }

  // Before a request: renews a token about to expire (a timer can sleep
  // with the laptop or a background tab).
  async function fresh() {
    if (!tokens || Date.now() < tokens.expires_at - 30_000) return;
    if (!tokens.refresh_token) return;
    await refresh().catch(() => {});
  }

  // At start: the provider's redirect back with a code (traded for tokens,
  // the code taken out of the address bar), or a session this tab kept.
  // Answers an error to show, or null.
  async function resume() {
    if (!config) return null;
    const params = new URLSearchParams(location.search);
    if (params.has("code") || params.has("error")) {
      const pending = JSON.parse(sessionStorage.getItem(PENDING_KEY) || "null");
      sessionStorage.removeItem(PENDING_KEY);
      history.replaceState(null, "", location.pathname);
      // Only an answer to this tab's own request is read at all.
      if (!pending || params.get("state") !== pending.state) return "The sign-in answer did not match the request; sign in again.";
      if (params.has("error")) return "The provider refused the sign-in: " + (params.get("error_description") || params.get("error"));
      if (params.has("iss") && params.get("iss") !== config.issuer) return "The sign-in answer came from another issuer.";
      try {
        const answer = await tokenRequest({
          grant_type: "authorization_code",
          code: params.get("code"),
          redirect_uri: redirectUri(),
          code_verifier: pending.verifier,
        });
        if (answer.id_token && claims(answer.id_token).nonce !== pending.nonce) return "The ID token is not the one asked for; sign in again.";
        keep(answer);
        return null;
      } catch (error) {
        return "Signing in failed: " + error.message;
      }
    }
    if (sessionStorage.getItem(REFRESH_KEY)) {
      try {
        await refresh();
      } catch (error) {
        return "The session ended (" + error.message + "); sign in again.";
      }
    }
    return null;
  }

  function forget() {
    clearTimeout(timer);
    tokens = null;
    sessionStorage.removeItem(REFRESH_KEY);
  }

  // Forgets the tokens, revokes the refresh token and ends the provider's
  // session where the provider lets it.
  async function signOut() {
    const held = tokens;
    forget();
    onChange();
    if (!config || !held) return;
    const ends = config.endpoints || {};
    if (ends.revocation_endpoint && held.refresh_token) {
      await fetch(ends.revocation_endpoint, {
        method: "POST",
        headers: { "Content-Type": "application/x-www-form-urlencoded" },
        body: new URLSearchParams({ client_id: config.client_id, token: held.refresh_token, token_type_hint: "refresh_token" }).toString(),
      }).catch(() => {});
    }
    if (ends.end_session_endpoint) {
      const url = new URL(ends.end_session_endpoint);
      url.searchParams.set("client_id", config.client_id);
      url.searchParams.set("post_logout_redirect_uri", redirectUri());
      if (held.id_token) url.searchParams.set("id_token_hint", held.id_token);
      location.assign(url.toString());
    }
  }

  return {
    load,
    available,
    begin,
    resume,
    bearer,
    who,
    refresh,
    fresh,
    signOut,
    signedIn: () => tokens !== null,
    expiresAt: () => (tokens ? tokens.expires_at : 0),
    onChange: (f) => {
      onChange = f;
    },
  };
})();
