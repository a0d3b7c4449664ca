"""A stdio MCP server that asks its client things with a delay, for the gateway's two-client
isolation tests (tests/it/isolation.rs). Plain Python JSON-RPC, no SDK, so that what it sends and
what it records are exactly what the tests see.

usage: ask_server.py

Speaks the 2025-11-25 / 2025-06-18 `initialize` handshake, declares `tools` and `logging`.
Tools (arguments in braces):
  slow {seconds}                 answers after `seconds` (keeps a call in flight)
  ask_sampling {delay, secret, name_token?}
                                 after `delay` s sends `sampling/createMessage` whose prompt holds
                                 `secret`; with `name_token` true the request carries the call's
                                 own `_meta.progressToken` (as the gateway sent it). Returns the
                                 answer's text, or `ERROR <error object as JSON>` (isError)
  ask_elicit {delay, secret}     the same with `elicitation/create` (form mode, one string field
                                 `answer`); returns `{"action", "content"}` as JSON, or `ERROR ...`
  ask_roots {delay}              sends `roots/list`; returns the result as JSON, or `ERROR ...`
  roots_seen                     JSON list of every `roots/list` outcome so far, each
                                 `{"source", "result"}` or `{"source", "error"}`; source is
                                 `ask_roots`, or `initialized` / `list_changed` for the asks this
                                 server makes by itself, outside any call, after
                                 `notifications/initialized` and each
                                 `notifications/roots/list_changed`
  log_later {delay, text}        answers at once; after `delay` s sends `notifications/message`
                                 (level info, logger `ask`, data `text`) outside any call
  log_now {text}                 sends that log, then answers (inside the call)
  errors_seen                    JSON list of `{"method", "error"}`: every JSON-RPC error it got in
                                 answer to its own requests
An answer to its own request that does not come within ANSWER_WAIT seconds counts as the error
`{"timeout": ANSWER_WAIT}`.
"""
import json
import sys
import threading
import time

ANSWER_WAIT = 10.0
VERSIONS = ("2025-11-25", "2025-06-18")

write_lock = threading.Lock()
state_lock = threading.Lock()
pending = {}  # our request id -> [threading.Event, answer message]
next_id = [0]
roots_seen = []
errors_seen = []


def send(obj):
    line = json.dumps(obj) + "\n"
    with write_lock:
        sys.stdout.write(line)
        sys.stdout.flush()


def ask(method, params):
    """Sends a request to the client and waits for its answer: ("result", r) or ("error", e)."""
    with state_lock:
        next_id[0] += 1
        rid = next_id[0]
        slot = [threading.Event(), None]
        pending[rid] = slot
    send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
    answered = slot[0].wait(ANSWER_WAIT)
    with state_lock:
        pending.pop(rid, None)
    if not answered:
        err = {"timeout": ANSWER_WAIT}
    elif "error" in slot[1]:
        err = slot[1]["error"]
    else:
        return "result", slot[1].get("result")
    with state_lock:
        errors_seen.append({"method": method, "error": err})
    return "error", err


def ask_roots(source):
    kind, value = ask("roots/list", {})
    with state_lock:
        roots_seen.append({"source": source, kind: value})
    return kind, value


def text_result(mid, text, is_error=False):
    send({"jsonrpc": "2.0", "id": mid, "result": {
        "content": [{"type": "text", "text": text}], "isError": is_error}})


def log_message(text):
    send({"jsonrpc": "2.0", "method": "notifications/message",
          "params": {"level": "info", "logger": "ask", "data": text}})


def call_tool(mid, params):
    name = str(params.get("name"))
    args = params.get("arguments") or {}
    token = (params.get("_meta") or {}).get("progressToken")
    delay = float(args.get("delay", 0))
    if name.startswith("ask_"):
        time.sleep(delay)
    if name == "slow":
        time.sleep(float(args.get("seconds", 1)))
        text_result(mid, f"slept {args.get('seconds', 1)}")
    elif name == "ask_sampling":
        request = {
            "messages": [{"role": "user", "content": {
                "type": "text", "text": f"Say something about {args.get('secret')}"}}],
            "maxTokens": 16,
        }
        if args.get("name_token") and token is not None:
            request["_meta"] = {"progressToken": token}
        kind, value = ask("sampling/createMessage", request)
        if kind == "error":
            text_result(mid, "ERROR " + json.dumps(value), True)
        else:
            text_result(mid, str((value.get("content") or {}).get("text")))
    elif name == "ask_elicit":
        kind, value = ask("elicitation/create", {
            "mode": "form",
            "message": f"Tell me about {args.get('secret')}",
            "requestedSchema": {"type": "object",
                                "properties": {"answer": {"type": "string"}},
                                "required": ["answer"]},
        })
        if kind == "error":
            text_result(mid, "ERROR " + json.dumps(value), True)
        else:
            text_result(mid, json.dumps({"action": value.get("action"),
                                         "content": value.get("content")}))
    elif name == "ask_roots":
        kind, value = ask_roots("ask_roots")
        if kind == "error":
            text_result(mid, "ERROR " + json.dumps(value), True)
        else:
            text_result(mid, json.dumps(value))
    elif name == "roots_seen":
        with state_lock:
            text_result(mid, json.dumps(roots_seen))
    elif name == "errors_seen":
        with state_lock:
            text_result(mid, json.dumps(errors_seen))
    elif name == "log_later":
        text_result(mid, "later")
        time.sleep(delay)
        log_message(args.get("text"))
    elif name == "log_now":
        log_message(args.get("text"))
        text_result(mid, "logged")
    else:
        send({"jsonrpc": "2.0", "id": mid,
              "error": {"code": -32602, "message": f"unknown tool {name}"}})


def schema(**props):
    return {"type": "object", "properties": {k: {"type": t} for k, t in props.items()}}


TOOLS = [
    {"name": "slow", "description": "Answers after `seconds`.",
     "inputSchema": schema(seconds="number")},
    {"name": "ask_sampling", "description": "Asks the client for a sampling.",
     "inputSchema": schema(delay="number", secret="string", name_token="boolean")},
    {"name": "ask_elicit", "description": "Asks the client a form question.",
     "inputSchema": schema(delay="number", secret="string")},
    {"name": "ask_roots", "description": "Asks the client for its roots.",
     "inputSchema": schema(delay="number")},
    {"name": "roots_seen", "description": "Every roots/list outcome so far.",
     "inputSchema": schema()},
    {"name": "log_later", "description": "Answers, then logs `text` after `delay`.",
     "inputSchema": schema(delay="number", text="string")},
    {"name": "log_now", "description": "Logs `text`, then answers.",
     "inputSchema": schema(text="string")},
    {"name": "errors_seen", "description": "Every error answer to this server's requests.",
     "inputSchema": schema()},
]


def spawn(target, *args):
    threading.Thread(target=target, args=args, daemon=True).start()


def main():
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        msg = json.loads(line)
        method, mid = msg.get("method"), msg.get("id")
        if method is None:
            # An answer to one of our requests.
            with state_lock:
                slot = pending.get(mid)
            if slot is not None:
                slot[1] = msg
                slot[0].set()
            continue
        if mid is None:
            if method == "notifications/initialized":
                spawn(ask_roots, "initialized")
            elif method == "notifications/roots/list_changed":
                spawn(ask_roots, "list_changed")
            continue
        if method == "initialize":
            asked = (msg.get("params") or {}).get("protocolVersion")
            send({"jsonrpc": "2.0", "id": mid, "result": {
                "protocolVersion": asked if asked in VERSIONS else VERSIONS[0],
                "capabilities": {"tools": {}, "logging": {}},
                "serverInfo": {"name": "ask-server", "version": "0"}}})
        elif method == "tools/list":
            send({"jsonrpc": "2.0", "id": mid, "result": {"tools": TOOLS}})
        elif method == "tools/call":
            spawn(call_tool, mid, msg.get("params") or {})
        elif method in ("ping", "logging/setLevel"):
            send({"jsonrpc": "2.0", "id": mid, "result": {}})
        else:
            send({"jsonrpc": "2.0", "id": mid,
                  "error": {"code": -32601, "message": "Method not found"}})


main()
