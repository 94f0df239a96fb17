"""Signs in to data-plane's /mcp with the official MCP Python SDK's OAuth
client, the way a desktop agent does, then lists and calls tools.

Run by apps/data-plane/tests/oidc.rs with the venv `make setup` builds
(.data/mcp/venv), against a server whose OpenID provider is oidc-provider
(tests/e2e/oidc_provider.mjs). Reads DATA_PLANE_URL and LOGIN. The SDK
finds everything itself: the 401's resource_metadata, the protected
resource metadata, the provider's metadata; it registers itself (dynamic
client registration), sends the person to the provider's authorization
endpoint with PKCE and the RFC 8707 resource, and trades the code for a
token. Where a desktop client opens a browser, this script plays the
person: it follows the authorization URL, fills the provider's own login
and consent forms, and hands the code the provider redirects with to the
SDK. Prints one JSON object of what happened, for the Rust test to check.
"""

import asyncio
import json
import os
import sys
from html.parser import HTMLParser
from urllib.parse import parse_qs, urljoin, urlparse

import httpx2
from mcp import ClientSession
from mcp.client.auth import OAuthClientProvider, TokenStorage
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

# Nothing listens here: the provider's redirect to it is read, not followed.
REDIRECT_URI = "http://127.0.0.1:9/oauth/callback"


class Memory(TokenStorage):
    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


class Form(HTMLParser):
    """The first form of a page: its action and the inputs it sends."""

    def __init__(self) -> None:
        super().__init__()
        self.action: str | None = None
        self.fields: list[tuple[str, str]] = []
        self.password: set[str] = set()
        self.done = False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if self.done:
            return
        if tag == "form" and self.action is None:
            self.action = attrs.get("action")
        elif tag == "input" and self.action is not None and attrs.get("name"):
            self.fields.append((attrs["name"], attrs.get("value") or ""))
            if attrs.get("type") == "password":
                self.password.add(attrs["name"])

    def handle_endtag(self, tag):
        if tag == "form" and self.action is not None:
            self.done = True


class Person:
    """Plays the person at the provider's pages."""

    def __init__(self, login: str) -> None:
        self.login = login
        self.result: AuthorizationCodeResult | None = None
        self.saw_login_page = False

    async def open(self, authorization_url: str) -> None:
        url, data = authorization_url, None
        async with httpx2.AsyncClient(follow_redirects=False, timeout=30.0) as browser:
            for _ in range(20):
                if data is None:
                    response = await browser.get(url)
                else:
                    response = await browser.post(url, data=data)
                if response.is_redirect:
                    target = urljoin(url, response.headers["location"])
                    if target.startswith(REDIRECT_URI):
                        query = parse_qs(urlparse(target).query)
                        if "error" in query:
                            raise RuntimeError(f"the provider refused: {query}")
                        self.result = AuthorizationCodeResult(
                            code=query["code"][0],
                            state=query.get("state", [None])[0],
                            iss=query.get("iss", [None])[0],
                        )
                        return
                    url, data = target, None
                    continue
                if response.status_code != 200:
                    raise RuntimeError(f"{response.status_code} at {url}: {response.text[:500]}")
                form = Form()
                form.feed(response.text)
                if form.action is None:
                    raise RuntimeError(f"no form at {url}: {response.text[:500]}")
                fields = {}
                for name, value in form.fields:
                    if name in form.password:
                        value = "any password"
                    elif name == "login":
                        value = self.login
                        self.saw_login_page = True
                    fields[name] = value
                url, data = urljoin(url, form.action), fields
        raise RuntimeError("the sign-in did not come back")

    async def callback(self) -> AuthorizationCodeResult:
        if self.result is None:
            raise RuntimeError("no code came back")
        return self.result


async def main() -> dict:
    base = os.environ["DATA_PLANE_URL"]
    person = Person(os.environ["LOGIN"])
    storage = Memory()
    auth = OAuthClientProvider(
        server_url=f"{base}/mcp",
        client_metadata=OAuthClientMetadata(
            client_name="data-plane test agent",
            redirect_uris=[REDIRECT_URI],
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            token_endpoint_auth_method="none",
        ),
        storage=storage,
        redirect_handler=person.open,
        callback_handler=person.callback,
    )
    out: dict = {}
    async with httpx2.AsyncClient(auth=auth, timeout=httpx2.Timeout(30.0, read=60.0)) as http:
        async with streamable_http_client(f"{base}/mcp", http_client=http) as (read, write):
            async with ClientSession(read, write) as session:
                init = await session.initialize()
                out["server"] = init.server_info.name
                listed = await session.list_tools()
                out["tools"] = [t.name for t in listed.tools]
                result = await session.call_tool("search_documents", {"query": "vacuum"})
                out["call"] = {"isError": bool(result.is_error)}
    out["login_page"] = person.saw_login_page
    out["client_id"] = storage.client.client_id if storage.client else None
    out["token_type"] = storage.tokens.token_type if storage.tokens else None
    return out


if __name__ == "__main__":
    try:
        print(json.dumps(asyncio.run(main())))
    except Exception as e:  # the Rust test shows what went wrong
        print(f"{type(e).__name__}: {e}", file=sys.stderr)
        raise
