// A real OpenID provider for the server's integration tests: panva's
// oidc-provider (OpenID certified) on 127.0.0.1, with its development login
// and consent pages, PKCE, open dynamic client registration, resource
// indicators that give RS256 JWT access tokens for one audience, refresh
// tokens for public clients, and CORS for every origin. Started by
// apps/data-plane/tests/common/oidc.rs.
//
// Configuration: JSON in OIDC_CONFIG
//   { "port": 0, "resource": "http://127.0.0.1:1234/", "audience": "data-plane-test",
//     "clients": [{ "client_id": "...", "redirect_uris": ["..."], "public": true }],
//     "users": { "alice": { "email": "...", "email_verified": true, "roles": ["user"] } },
//     "access_token_ttl": 300 }
// A client without "public" needs "client_secret"; other fields of a client
// are passed to the provider as client metadata. A login name that is not in
// "users" signs in with no claims but `sub`.
//
// Prints one line, {"issuer":"http://127.0.0.1:PORT"}, once it listens; exits
// when stdin closes or on SIGTERM. Test-only endpoints on the same port:
//   POST /__rotate  a new RSA signing key, first in the JWKS; answers {"kid"}
//   POST /__retire  drops every key but the newest
//   GET  /__keys    the private JWKS
//   POST /__sign    {"header": {...}, "claims": {...}}: a JWT signed with
//                   the current key (RS256), its header and claims those of
//                   a good access token for alice with these changes (a
//                   null removes one): for forgeries a verifier must refuse
// Keys are given to a Provider when it is made, so rotating makes a new
// Provider over the new key set; they share one memory store, so sessions,
// grants, registered clients and tokens survive.

import * as crypto from "node:crypto";
import * as http from "node:http";

import Provider, { errors } from "oidc-provider";
import { createMemoryAdapter } from "oidc-provider/lib/adapters/memory_adapter.js";

// oidc-provider writes its notices with console.info, which is stdout; the
// test reads stdout for the issuer line alone.
console.info = (...args) => console.error(...args);

const config = JSON.parse(process.env.OIDC_CONFIG ?? "{}");
const users = config.users ?? {};
const ttl = config.access_token_ttl ?? 300;
const audience = config.audience ?? "data-plane-test";
const resource = new URL(config.resource ?? "http://127.0.0.1/").href;
const scopes = ["openid", "email", "profile", "roles", "offline_access"];
const cookieKeys = [crypto.randomBytes(32).toString("base64url")];
// One store for every Provider this process makes (each would otherwise
// get a memory store of its own), so a rotation loses nothing.
const adapter = createMemoryAdapter(15);

function newKey() {
  const { privateKey } = crypto.generateKeyPairSync("rsa", { modulusLength: 2048 });
  const kid = crypto.randomBytes(12).toString("base64url");
  return { ...privateKey.export({ format: "jwk" }), kid, alg: "RS256", use: "sig" };
}

function clientMetadata({ public: isPublic, ...client }) {
  return {
    grant_types: ["authorization_code", "refresh_token"],
    response_types: ["code"],
    token_endpoint_auth_method: isPublic ? "none" : "client_secret_basic",
    ...client,
  };
}

function claimsOf(sub) {
  const user = users[sub] ?? {};
  const claims = {};
  for (const name of ["email", "email_verified", "name", "preferred_username", "roles"]) {
    if (user[name] !== undefined) claims[name] = user[name];
  }
  return claims;
}

function sameResource(indicator) {
  return URL.parse(indicator)?.href === resource;
}

function makeProvider(issuer, keys) {
  const provider = new Provider(issuer, {
    clients: (config.clients ?? []).map(clientMetadata),
    jwks: { keys },
    adapter,
    responseTypes: ["code"],
    cookies: { keys: cookieKeys },
    scopes,
    claims: {
      openid: ["sub"],
      email: ["email", "email_verified"],
      profile: ["name", "preferred_username"],
      roles: ["roles"],
    },
    // Scope claims in the ID token from the token endpoint too, not only
    // from userinfo.
    conformIdTokenClaims: false,
    async findAccount(_ctx, sub) {
      return {
        accountId: sub,
        async claims() {
          return { sub, ...claimsOf(sub) };
        },
      };
    },
    async extraTokenClaims(_ctx, token) {
      return token.accountId ? claimsOf(token.accountId) : undefined;
    },
    clientBasedCORS: () => true,
    clientDefaults: {
      grant_types: ["authorization_code", "refresh_token"],
      response_types: ["code"],
      token_endpoint_auth_method: "none",
      id_token_signed_response_alg: "RS256",
    },
    pkce: { required: (_ctx, client) => client.clientAuthMethod === "none" },
    rotateRefreshToken: () => true,
    ttl: {
      AccessToken: ttl,
      IdToken: ttl,
      RefreshToken: 24 * 60 * 60,
      Interaction: 10 * 60,
      Session: 24 * 60 * 60,
      Grant: 24 * 60 * 60,
    },
    features: {
      devInteractions: { enabled: true },
      registration: { enabled: true, initialAccessToken: false },
      resourceIndicators: {
        enabled: true,
        async defaultResource(_ctx, _client, oneOf) {
          if (oneOf) return oneOf.find(sameResource) ?? oneOf[0];
          return resource;
        },
        // Without `resource` at the token endpoint, the granted one: a JWT
        // for the audience rather than an opaque token for userinfo.
        useGrantedResource: async () => true,
        async getResourceServerInfo(_ctx, indicator) {
          if (!sameResource(indicator)) throw new errors.InvalidTarget();
          return {
            scope: scopes.join(" "),
            audience,
            accessTokenTTL: ttl,
            accessTokenFormat: "jwt",
            jwt: { sign: { alg: "RS256" } },
          };
        },
      },
    },
  });
  provider.on("server_error", (_ctx, error) => console.error("oidc server_error:", error));
  return provider;
}

let keys = [newKey()];
let issuer;
let handle;

function use(newKeys) {
  keys = newKeys;
  handle = makeProvider(issuer, keys).callback();
}

function changed(base, changes) {
  const out = { ...base };
  for (const [name, value] of Object.entries(changes)) {
    if (value === null) delete out[name];
    else out[name] = value;
  }
  return out;
}

function sign(headerChanges, claimChanges) {
  const key = keys[0];
  const now = Math.floor(Date.now() / 1000);
  const header = changed({ alg: "RS256", typ: "at+jwt", kid: key.kid }, headerChanges);
  const claims = changed(
    { iss: issuer, aud: audience, sub: "alice", iat: now, exp: now + ttl, ...claimsOf("alice") },
    claimChanges,
  );
  const part = (v) => Buffer.from(JSON.stringify(v)).toString("base64url");
  const input = `${part(header)}.${part(claims)}`;
  const privateKey = crypto.createPrivateKey({ key, format: "jwk" });
  return `${input}.${crypto.sign("sha256", Buffer.from(input), privateKey).toString("base64url")}`;
}

function answer(res, status, body) {
  res.writeHead(status, { "content-type": "application/json", "cache-control": "no-store" });
  res.end(JSON.stringify(body));
}

const server = http.createServer((req, res) => {
  const path = new URL(req.url, "http://x").pathname;
  const control = {
    "/__rotate": ["POST", () => {
      const key = newKey();
      use([key, ...keys]);
      return { kid: key.kid };
    }],
    "/__retire": ["POST", () => {
      use(keys.slice(0, 1));
      return { kids: keys.map((k) => k.kid) };
    }],
    "/__keys": ["GET", () => ({ keys })],
    "/__sign": ["POST", (body) => ({ token: sign(body.header ?? {}, body.claims ?? {}) })],
  }[path];
  if (control) {
    const [method, act] = control;
    if (req.method !== method) return answer(res, 405, { error: `use ${method}` });
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", () => {
      const text = Buffer.concat(chunks).toString() || "{}";
      answer(res, 200, act(JSON.parse(text)));
    });
    return;
  }
  // Dynamic registration has no CORS of its own; browser clients register.
  if (path === "/reg") {
    res.setHeader("access-control-allow-origin", req.headers.origin ?? "*");
    res.setHeader("vary", "Origin");
    if (req.method === "OPTIONS") {
      res.setHeader("access-control-allow-methods", "GET,POST");
      res.setHeader(
        "access-control-allow-headers",
        req.headers["access-control-request-headers"] ?? "content-type,authorization",
      );
      res.writeHead(204);
      return res.end();
    }
  }
  return handle(req, res);
});

server.listen(config.port ?? 0, "127.0.0.1", () => {
  issuer = `http://127.0.0.1:${server.address().port}`;
  use(keys);
  process.stdout.write(`${JSON.stringify({ issuer })}\n`);
});

function stop() {
  server.close();
  process.exit(0);
}
process.stdin.on("end", stop);
process.stdin.on("close", stop);
process.stdin.resume();
process.on("SIGTERM", stop);
