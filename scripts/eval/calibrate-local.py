#!/usr/bin/env python3
"""How a local model's tokenizer counts tool lists, against the gateway's counts.

For each saved tools/list result in TOOLS_DIR: the tools as OpenAI functions
(`mcp-budget render --format openai --mode full --level off`), put in a one-message chat by the
model server's own chat template (llama.cpp's `/apply-template`) and tokenized by its
`/tokenize`, minus the same chat without tools; beside it the gateway's count of the same list
(`mcp-budget inspect`, o200k and cl100k, `openai` rendering). Prints one line per server and a
least-squares fit `model = overhead + calibration x gateway` over all servers: the
`overhead_tokens` and `calibration_permille` of the model family's profile (src/profile.rs).

    scripts/eval/calibrate-local.py URL TOOLS_DIR [--binary PATH]
"""
import argparse
import json
import pathlib
import subprocess
import urllib.request


def post(url, body):
    req = urllib.request.Request(url, json.dumps(body).encode(), {"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as resp:
        return json.load(resp)


def model_tokens(url, tools):
    messages = [{"role": "user", "content": "x"}]
    body = {"messages": messages}
    if tools:
        body["tools"] = tools
    prompt = post(url + "/apply-template", body)["prompt"]
    return len(post(url + "/tokenize", {"content": prompt})["tokens"])


def gateway(binary, tools_dir, model):
    """Per server: the gateway's count of its tools in full (`inspect`)."""
    out = subprocess.run([binary, "inspect", "--tools", tools_dir, "--model", model, "--format", "json"],
                         check=True, capture_output=True, text=True).stdout
    return {s["server"]: s["tokens"]["off"] for s in json.loads(out)["servers"]}


def template_overhead(url):
    """The chat template's fixed tool instructions: one tool's prompt minus the prompt without
    tools minus what the tool itself adds (the second tool's cost)."""
    tool = {"type": "function", "function": {"name": "x", "description": "d",
                                             "parameters": {"type": "object", "properties": {}}}}
    none, one, two = (model_tokens(url, t) for t in (None, [tool], [tool, tool]))
    return one - none - (two - one)


def fit(xs, ys):
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    return my - slope * mx, slope


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("url")
    ap.add_argument("tools_dir")
    ap.add_argument("--binary", default="target/debug/mcp-budget")
    args = ap.parse_args()
    url = args.url.rstrip("/")
    base = model_tokens(url, None)
    o200k = gateway(args.binary, args.tools_dir, "gpt-4o")
    cl100k = gateway(args.binary, args.tools_dir, "gpt-4-turbo")
    raw = gateway(args.binary, args.tools_dir, "gemini-2-5-flash")
    rendered = subprocess.run([args.binary, "render", "--tools", args.tools_dir, "--model", "gpt-4o",
                               "--mode", "full", "--level", "off", "--format", "openai"],
                              check=True, capture_output=True, text=True).stdout
    tools = json.loads(rendered)
    tools = tools.get("tools", tools) if isinstance(tools, dict) else tools
    by_server = {}
    for tool in tools:
        name = tool["function"]["name"]
        server = max((s for s in o200k if name.startswith(s + "__")), key=len, default=None)
        by_server.setdefault(server, []).append(tool)
    rows = []
    for server in sorted(o200k):
        listed = by_server.get(server, [])
        if not listed:
            continue
        m = model_tokens(url, listed) - base
        rows.append((server, len(listed), m, o200k[server], cl100k[server], raw[server]))
        print(f"{server:32} {len(listed):4} tools  model {m:6}  o200k {o200k[server]:6}  cl100k {cl100k[server]:6}"
              f"  raw-o200k {raw[server]:6}", flush=True)
    fixed = template_overhead(url)
    print(f"the template's fixed tool instructions: {fixed} tokens")
    for name, col in (("openai-o200k", 3), ("openai-cl100k", 4), ("raw-o200k", 5)):
        xs = [r[col] for r in rows]
        ys = [r[2] for r in rows]
        overhead, slope = fit(xs, ys)
        ratio = sum(ys) / sum(xs)
        calibration = (sum(ys) - fixed * len(rows)) / sum(xs)
        errors = sorted(abs(fixed + calibration * x - y) / y for x, y in zip(xs, ys))
        print(f"{name}: {len(rows)} servers, {sum(r[1] for r in rows)} tools; model {sum(ys)} vs {sum(xs)} "
              f"(ratio {ratio:.3f}); fit overhead {overhead:.0f} + {slope:.3f} x; with the fixed {fixed}: "
              f"calibration {calibration:.3f}, per-server error median {errors[len(errors) // 2]:.1%}, "
              f"90th percentile {errors[int(len(errors) * 0.9)]:.1%}")


if __name__ == "__main__":
    main()
