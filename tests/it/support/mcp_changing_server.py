#!/usr/bin/env python3
"""A tiny MCP server over stdio (newline-delimited JSON-RPC 2.0) for what server-everything cannot show:
tool names the model providers refuse (`files.read`, a 70-character one, two that clean to the same name),
and a tool list that changes: calling `add_tool` adds `added_tool` and sends
`notifications/tools/list_changed` before answering, as a server whose tools depend on state does.
Every request it gets is appended to $MCP_TRACE (one JSON line each) when set."""

import json
import os
import sys

LONG = "create_or_update_a_repository_file_with_a_very_long_descriptive_name_x"  # 70 characters
tools = ["files.read", "files_read", "files/read", LONG, "add_tool"]


def send(msg):
    sys.stdout.write(json.dumps(msg) + "\n")
    sys.stdout.flush()


def tool(name):
    return {
        "name": name,
        "description": f"the tool {name}",
        "inputSchema": {"type": "object", "properties": {"x": {"type": "string"}}},
    }


for line in sys.stdin:
    msg = json.loads(line)
    if os.environ.get("MCP_TRACE"):
        with open(os.environ["MCP_TRACE"], "a") as f:
            f.write(line if line.endswith("\n") else line + "\n")
    method, mid = msg.get("method"), msg.get("id")
    if mid is None:
        continue
    if method == "initialize":
        result = {
            "protocolVersion": msg["params"]["protocolVersion"],
            "capabilities": {"tools": {"listChanged": True}},
            "serverInfo": {"name": "changing", "version": "1"},
        }
    elif method == "tools/list":
        result = {"tools": [tool(t) for t in tools]}
    elif method == "tools/call":
        name = msg["params"]["name"]
        if name not in tools:
            send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32602, "message": f"no tool {name}"}})
            continue
        if name == "add_tool" and "added_tool" not in tools:
            tools.append("added_tool")
            send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
        args = json.dumps(msg["params"].get("arguments") or {})
        result = {"content": [{"type": "text", "text": f"called {name} with {args}"}]}
    else:
        send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": f"no method {method}"}})
        continue
    send({"jsonrpc": "2.0", "id": mid, "result": result})
