"""Drives data-plane's /mcp endpoint with the official MCP Python SDK.

Run by apps/data-plane/tests/mcp.rs with the venv `make setup` builds
(.data/mcp/venv). Reads DATA_PLANE_URL, USER_TOKEN, SPACE_ID and DOCUMENT_ID,
prints one JSON object of what the SDK saw, for the Rust test to check:

- refused: connecting without a token fails, and how;
- initialize: the server's name and the protocol version agreed;
- tools: every listed tool with its title, annotations and input schema;
- info: document_info's result (structured content, isError);
- bad: a call with arguments the tool refuses;
- analysis: analyze_document's result with the progress messages received;
- cancelled: a call cancelled after its first progress message;
- resources, read: the space's documents, and the first one read;
- prompts, prompt: the prompts, and summarise_document's messages;
- completion: the document argument completed from "GUI";
- logs: the log lines of a call after logging/setLevel (handshake era);
- modern: on a 2026-07-28 connection that takes tasks (an extension of
  the SDK's own kind, resolving the task by polling tasks/get), an
  analysis run as a task, and a call's log lines at the request's level.
"""

import asyncio
import json
import os
import sys

from typing import Any, Literal

import anyio
import httpx2
from mcp import Client, ClientSession, types
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp.client.streamable_http import streamable_http_client
from pydantic import Field


def endpoint() -> str:
    return f"{os.environ['DATA_PLANE_URL']}/mcp?spaceId={os.environ['SPACE_ID']}"


def http_client(token: str | None) -> httpx2.AsyncClient:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30.0, read=60.0))


def result_json(result) -> dict:
    return {
        "isError": bool(result.is_error),
        "text": [c.text for c in result.content if getattr(c, "type", None) == "text"],
        "structured": result.structured_content,
    }


class TaskHandle(types.Result):
    """What tools/call answers when the server runs the call as a task."""

    result_type: Literal["task"]
    task_id: str
    status: str
    poll_interval_ms: int | None = None


class GetTaskParams(types.RequestParams):
    task_id: str


class GetTask(types.Request[GetTaskParams, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"
    name_param = "taskId"


class TaskState(types.Result):
    """A tasks/get answer: the status, and the call's result once completed."""

    result_type: str | None = None
    task_id: str
    status: str
    status_message: str | None = None
    result: dict[str, Any] | None = Field(default=None)


class Tasks(ClientExtension):
    """The tasks extension (io.modelcontextprotocol/tasks) as a client takes
    it: a task handle is resolved by polling tasks/get until it ends."""

    identifier = "io.modelcontextprotocol/tasks"

    def __init__(self) -> None:
        self.seen: list[dict] = []

    def claims(self):
        return [ResultClaim(result_type="task", model=TaskHandle, resolve=self.resolve)]

    async def resolve(self, handle: TaskHandle, ctx: ClaimContext) -> types.CallToolResult:
        self.seen.append({"taskId": handle.task_id, "status": handle.status})
        with anyio.fail_after(30):
            while True:
                state = await ctx.session.send_request(
                    GetTask(params=GetTaskParams(task_id=handle.task_id)), TaskState
                )
                self.seen.append({"taskId": state.task_id, "status": state.status})
                if state.status not in ("working", "input_required"):
                    break
                await anyio.sleep((handle.poll_interval_ms or 500) / 1000)
        if state.status != "completed" or state.result is None:
            raise RuntimeError(f"task {handle.task_id} ended {state.status}: {state.status_message}")
        return types.CallToolResult.model_validate(state.result)


async def modern_run(token: str) -> dict:
    """A 2026-07-28 connection that takes tasks and asks for info logs."""
    logs: list[dict] = []

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logs.append({"level": str(params.level), "data": params.data})

    tasks = Tasks()
    out: dict = {}
    async with http_client(token) as http:
        client = Client(
            streamable_http_client(endpoint(), http_client=http),
            mode="2026-07-28",
            extensions=[tasks],
            log_level="info",
            logging_callback=on_log,
        )
        async with client:
            analysis = await client.call_tool(
                "analyze_document",
                {"document_id": os.environ["DOCUMENT_ID"], "question": "What does a task answer?"},
            )
            out["task"] = result_json(analysis)
            out["polled"] = tasks.seen
            info = await client.call_tool("document_info", {"document_id": os.environ["DOCUMENT_ID"]})
            out["info"] = result_json(info)
    out["logs"] = logs
    return out


async def refused() -> dict:
    try:
        async with http_client(None) as client:
            async with streamable_http_client(endpoint(), http_client=client) as (read, write):
                async with ClientSession(read, write) as session:
                    with anyio.fail_after(20):
                        await session.initialize()
        return {"connected": True}
    except BaseException as e:  # the SDK raises groups from its task group
        return {"connected": False, "error": describe(e)}


def describe(e: BaseException) -> str:
    if isinstance(e, BaseExceptionGroup):
        return "; ".join(describe(x) for x in e.exceptions)
    return f"{type(e).__name__}: {e}"


async def session_run(token: str) -> dict:
    out: dict = {}
    logs: list[dict] = []

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logs.append({"level": str(params.level), "data": params.data})

    async with http_client(token) as client:
        async with streamable_http_client(endpoint(), http_client=client) as (read, write):
            async with ClientSession(read, write, logging_callback=on_log) as session:
                init = await session.initialize()
                out["initialize"] = {
                    "server": init.server_info.name,
                    "protocolVersion": str(init.protocol_version),
                    "tools": init.capabilities.tools is not None,
                }
                listed = await session.list_tools()
                out["tools"] = [
                    {
                        "name": t.name,
                        "title": t.title,
                        "description": t.description,
                        "inputSchema": t.input_schema,
                        "annotations": t.annotations.model_dump(exclude_none=True, by_alias=True)
                        if t.annotations
                        else None,
                    }
                    for t in listed.tools
                ]
                doc = os.environ["DOCUMENT_ID"]
                info = await session.call_tool("document_info", {"document_id": doc})
                out["info"] = result_json(info)
                bad = await session.call_tool("read_document", {"document_id": "not-a-uuid", "offset": -4})
                out["bad"] = result_json(bad)

                progress: list[dict] = []

                async def on_progress(value: float, total: float | None, message: str | None) -> None:
                    progress.append({"progress": value, "total": total, "message": message})

                analysis = await session.call_tool(
                    "analyze_document",
                    {"document_id": doc, "question": "What does VACUUM do?"},
                    progress_callback=on_progress,
                )
                out["analysis"] = result_json(analysis)
                out["analysis"]["progress"] = progress

                # Cancelled once the sub-agent has said something: the SDK
                # closes the call's stream (or sends notifications/cancelled).
                seen: list[str | None] = []
                first = anyio.Event()

                async def on_first(value: float, total: float | None, message: str | None) -> None:
                    seen.append(message)
                    first.set()

                cancelled = {"finished": False}
                async with anyio.create_task_group() as tg:

                    async def call() -> None:
                        await session.call_tool(
                            "analyze_document",
                            {"document_id": doc, "question": "Never answered"},
                            progress_callback=on_first,
                        )
                        cancelled["finished"] = True

                    scope = anyio.CancelScope()

                    async def run_call() -> None:
                        with scope:
                            await call()

                    tg.start_soon(run_call)
                    with anyio.fail_after(20):
                        await first.wait()
                    scope.cancel()
                cancelled["progress"] = seen
                out["cancelled"] = cancelled
                # The session still answers after a cancelled call.
                again = await session.call_tool("document_info", {"document_id": doc})
                out["after_cancel"] = result_json(again)

                # The space's documents as resources, the prompts, and the
                # completion of a prompt's document argument.
                listed = await session.list_resources()
                out["resources"] = [
                    {
                        "uri": str(r.uri),
                        "name": r.name,
                        "title": r.title,
                        "mimeType": r.mime_type,
                        "size": r.size,
                    }
                    for r in listed.resources
                ]
                read = await session.read_resource(listed.resources[0].uri)
                out["read"] = [{"uri": str(c.uri), "text": getattr(c, "text", None)} for c in read.contents]
                prompts = await session.list_prompts()
                out["prompts"] = [
                    {"name": p.name, "arguments": [a.name for a in (p.arguments or [])]}
                    for p in prompts.prompts
                ]
                got = await session.get_prompt("summarise_document", {"document": "guides/vacuum.md"})
                out["prompt"] = [{"role": m.role, "type": m.content.type} for m in got.messages]
                completed = await session.complete(
                    types.PromptReference(type="ref/prompt", name="summarise_document"),
                    {"name": "document", "value": "GUI"},
                )
                out["completion"] = completed.completion.values

                # Logging: the level is kept for this caller, and a call's
                # steps arrive on the call's stream.
                await session.set_logging_level("info")
                logged = await session.call_tool("document_info", {"document_id": doc})
                out["logged"] = result_json(logged)
    out["logs"] = logs
    return out


async def main() -> None:
    out = {"refused": await refused()}
    out.update(await session_run(os.environ["USER_TOKEN"]))
    out["modern"] = await modern_run(os.environ["USER_TOKEN"])
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    asyncio.run(main())
