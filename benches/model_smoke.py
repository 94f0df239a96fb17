"""Chat turns through a running data-plane server backed by a real model.

Reads /v1/chat's event stream with the standard library only and prints,
per turn and in total: time to the first text, completion tokens per
second (the model's own count over the turn's time after its first text),
steps, the tools called, how the turn ended, and whether it ended within
its bounds (a `done` or `error` event before the turn's deadline plus a
margin). Used by benches/model_smoke.sh.
"""

import argparse
import json
import statistics
import sys
import time
import urllib.error
import urllib.request

QUESTIONS = [
    "What is a transaction in PostgreSQL? Search the documents and cite them.",
    "Which documents explain foreign keys? Give their paths.",
    "Summarise what the tutorial says about window functions.",
    "How do I create a table with a primary key? Answer from the documents.",
    "Wie fragt man mehrere Tabellen gleichzeitig ab (joins)?",
]


def spaces(base, token):
    req = urllib.request.Request(
        base + "/v1/spaces", headers={"Authorization": "Bearer " + token}
    )
    with urllib.request.urlopen(req, timeout=30) as resp:
        return json.load(resp)["spaces"]


def events(resp):
    """Yields (event type, data) from a text/event-stream response."""
    name, data = None, []
    for raw in resp:
        line = raw.decode("utf-8").rstrip("\r\n")
        if not line:
            if data:
                yield name, json.loads("\n".join(data))
            name, data = None, []
        elif line.startswith(":"):
            continue
        elif line.startswith("event:"):
            name = line[6:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].lstrip())


def turn(base, token, space_id, question, deadline):
    body = {
        "messages": [{"role": "user", "content": question}],
        "spaceId": space_id,
        "options": {"deadlineSecs": deadline},
    }
    req = urllib.request.Request(
        base + "/v1/chat",
        data=json.dumps(body).encode(),
        headers={
            "Authorization": "Bearer " + token,
            "Content-Type": "application/json",
        },
        method="POST",
    )
    started = time.monotonic()
    first_text = None
    deltas = 0
    text = []
    tools = []
    end = None
    # The client waits longer than the server's deadline: a turn that the
    # server does not end in time shows up as "no end".
    try:
        resp = urllib.request.urlopen(req, timeout=deadline + 60)
    except urllib.error.HTTPError as e:
        sys.exit(f"/v1/chat answered {e.code}: {e.read().decode(errors='replace')}")
    with resp:
        for kind, data in events(resp):
            if kind == "text_delta":
                if first_text is None:
                    first_text = time.monotonic() - started
                deltas += 1
                text.append(data.get("text", ""))
            elif kind == "tool_call" and not data.get("partial"):
                tools.append(data.get("name"))
            elif kind in ("done", "error"):
                end = (kind, data)
                break
    elapsed = time.monotonic() - started
    return {
        "question": question,
        "elapsed": elapsed,
        "first_text": first_text,
        "text": "".join(text),
        "deltas": deltas,
        "tools": tools,
        "end": end,
        "within_bounds": end is not None and elapsed <= deadline + 15,
    }


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--token", required=True)
    parser.add_argument("--space", required=True)
    parser.add_argument("--deadline", type=int, default=120)
    parser.add_argument("--turns", type=int, default=len(QUESTIONS))
    args = parser.parse_args()

    space_id = next(
        (s["id"] for s in spaces(args.url, args.token) if s["name"] == args.space), None
    )
    if space_id is None:
        sys.exit(f"no space named {args.space!r}")

    results = []
    for question in QUESTIONS[: args.turns]:
        r = turn(args.url, args.token, space_id, question, args.deadline)
        results.append(r)
        kind, data = r["end"] or ("none", {})
        usage = data.get("usage", {}) if kind == "done" else {}
        tokens = usage.get("completion_tokens", 0)
        # Servers that send no usage while streaming (llama-cpp-python):
        # count text deltas instead, about one token each there.
        counted = "tokens"
        if not tokens:
            tokens, counted = r["deltas"], "deltas"
        streaming = r["elapsed"] - (r["first_text"] or r["elapsed"])
        r["tokens_per_s"] = tokens / streaming if tokens and streaming > 0 else None
        ttft = f"{r['first_text']:.1f}s" if r["first_text"] is not None else "no text"
        tps = f"{r['tokens_per_s']:.1f}" if r["tokens_per_s"] else "n/a"
        reason = data.get("reason") or data.get("code") or "no end"
        print(
            f"turn: {question[:50]!r} ttft {ttft} total {r['elapsed']:.1f}s "
            f"{counted} {tokens} {counted}/s {tps} steps {data.get('steps', '-')} "
            f"tools {r['tools'] or 'none'} end {kind}:{reason} "
            f"within_bounds {r['within_bounds']}"
        )
        print(f"  text: {r['text'][:160]!r}")

    ttfts = [r["first_text"] for r in results if r["first_text"] is not None]
    rates = [r["tokens_per_s"] for r in results if r["tokens_per_s"]]
    print(f"turns {len(results)}")
    if ttfts:
        print(f"ttft_first_s {ttfts[0]:.1f}")
        print(f"ttft_median_s {statistics.median(ttfts):.1f}")
    if rates:
        print(f"tokens_per_s_median {statistics.median(rates):.1f} (text deltas where the server sent no usage)")
    print(f"turns_with_tool_calls {sum(1 for r in results if r['tools'])}")
    print(f"turns_ended_within_bounds {sum(1 for r in results if r['within_bounds'])}")
    ends = {}
    for r in results:
        kind, data = r["end"] or ("none", {})
        key = f"{kind}:{data.get('reason') or data.get('code') or '-'}"
        ends[key] = ends.get(key, 0) + 1
    print("ends " + " ".join(f"{k}={v}" for k, v in sorted(ends.items())))
    if not all(r["within_bounds"] for r in results):
        sys.exit("a turn did not end within its bounds")


if __name__ == "__main__":
    main()
