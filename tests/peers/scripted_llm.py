"""A scripted OpenAI-compatible endpoint for the bad-input tests of `mcp-budget eval` (not a
model: tests/it/eval.rs runs the real one). Prints `listening http://127.0.0.1:PORT`.

    python3 scripted_llm.py ok-then-fail N   # N chat completions calling a tool, then HTTP 500
    python3 scripted_llm.py garbage          # HTTP 200 with an HTML page
    python3 scripted_llm.py echo             # HTTP 200: {"path": ..., "body": the request body}
    python3 scripted_llm.py bare N           # as ok-then-fail, calling the tool by its bare
                                             # name (`get_current_time` for `time__get_current_time`)
"""

import http.server
import json
import sys

MODE = sys.argv[1]
LIMIT = int(sys.argv[2]) if len(sys.argv) > 2 else 0
served = 0


class Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_POST(self):
        global served
        length = int(self.headers.get("content-length", 0))
        body = json.loads(self.rfile.read(length) or b"{}")
        if MODE == "echo":
            seen = {"path": self.path, "body": body}
            return self.answer(200, json.dumps(seen).encode(), "application/json")
        if MODE == "garbage":
            return self.answer(200, b"<html><body>Bad Gateway</body></html>", "text/html")
        served += 1
        if served > LIMIT:
            return self.answer(500, b'{"error": "scripted failure"}', "application/json")
        tools = body.get("tools") or []
        name = tools[0]["function"]["name"] if tools else None
        if name and MODE == "bare":
            name = name.split("__", 1)[-1]
        message = {"role": "assistant", "content": "OK"}
        if name:
            message["content"] = "```json\n" + json.dumps({"name": name, "arguments": {}}) + "\n```"
        completion = {"choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
                      "usage": {"prompt_tokens": 100, "completion_tokens": 10}}
        self.answer(200, json.dumps(completion).encode(), "application/json")

    def answer(self, status, body, kind):
        self.send_response(status)
        self.send_header("content-type", kind)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
print(f"listening http://127.0.0.1:{server.server_address[1]}", flush=True)
server.serve_forever()
