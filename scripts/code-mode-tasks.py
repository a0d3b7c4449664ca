"""Code mode vs direct tool calls, with no LLM in the loop: a few multi-step tasks over real
servers through the gateway, each done once as the equivalent direct call sequence and once as
one fixed `run_code` script. Counts the tokens that would enter the model's context (o200k, the
project's own counter: `examples/count_tokens.rs`) and the wall time of each, then the per-run
overhead (an empty script vs a direct `tools/call`, same session). Prints a Markdown table.

  tests/peers/.venv/bin/python scripts/code-mode-tasks.py        # after `cargo build`

Context counted, direct: the definitions of the tools the task uses (the least a host must have
listed) + every result the calls returned (each one is input on every later turn; counted once
here, so the figure is a lower bound). Code mode: the `run_code` definition + the API
description the script's author read (`tools.describe(query)`) + the script + its result.

Servers: `@modelcontextprotocol/server-everything`, `mcp-server-git` on this repository, and the
saved github toolset (`tests/fixtures/toolsets/github.json` listed by `tests/peers/saved_server.py`).
"""
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from mcp import Client, StdioServerParameters

ROOT = Path(__file__).resolve().parent.parent
PEERS = ROOT / "tests" / "peers"
GATEWAY = ROOT / "target" / "debug" / "mcp-budget"
PYTHON = PEERS / ".venv" / "bin" / "python"


def policy(dir_: Path) -> Path:
    text = f"""version = 1

[budget]
mode = "progressive"

[discover]
code_mode = true
code_mode_timeout_ms = 20000
code_mode_max_steps = 1000000
code_mode_max_result_tokens = 20000

[[upstream]]
name = "e"
command = {json.dumps(str(PEERS / "node_modules" / ".bin" / "mcp-server-everything"))}

[[upstream]]
name = "git"
command = {json.dumps(str(PEERS / ".venv" / "bin" / "mcp-server-git"))}
args = ["--repository", {json.dumps(str(ROOT))}]

[[upstream]]
name = "gh"
command = {json.dumps(str(PYTHON))}
args = [{json.dumps(str(PEERS / "saved_server.py"))}, {json.dumps(str(ROOT / "tests/fixtures/toolsets/github.json"))}]
"""
    path = dir_ / "policy.toml"
    path.write_text(text)
    return path


def count_tokens(texts: list[str]) -> list[int]:
    """o200k counts of `texts`, by the project's own tokenizer."""
    with tempfile.TemporaryDirectory() as d:
        files = []
        for i, t in enumerate(texts):
            f = Path(d) / f"{i}.txt"
            f.write_text(t)
            files.append(str(f))
        out = subprocess.run(
            ["cargo", "run", "--quiet", "--example", "count_tokens", "--", *files],
            cwd=ROOT, check=True, capture_output=True, text=True,
        ).stdout
    return [int(line.split("\t")[0]) for line in out.splitlines()]


def text_of(result) -> str:
    dumped = result.model_dump(mode="json", by_alias=True, exclude_none=True)
    dumped.pop("_meta", None)
    return json.dumps(dumped)


async def call(client, name, args):
    return await client.call_tool(name, args)


async def schema(client, name, listed) -> str:
    """A tool's definition: as listed (the meta-tools), else as `get_tool_schema` gives it."""
    for tool in listed:
        if tool.name == name:
            return json.dumps(tool.model_dump(mode="json", by_alias=True, exclude_none=True))
    res = await call(client, "get_tool_schema", {"name": name})
    return res.content[0].text


async def run_code(client, code):
    res = await call(client, "run_code", {"code": code})
    if res.is_error:
        raise RuntimeError(res.content[0].text)
    return res


REPO = str(ROOT)

PAIRS = [(i, i * 7 % 11) for i in range(1, 11)]


async def task_sums_direct(client):
    results = []
    for a, b in PAIRS:
        results.append(await call(client, "e__get-sum", {"a": a, "b": b}))
    sums = [int(r.content[0].text.rstrip(".").split()[-1]) for r in results]
    results.append(await call(client, "e__echo", {"message": f"largest sum: {max(sums)}"}))
    return ["e__get-sum", "e__echo"], results


SUMS_SCRIPT = f"""
const pairs = {json.dumps(PAIRS)};
const sums = pairs.map(([a, b]) => Number(tools.call("e__get-sum", {{a, b}}).match(/(\\d+)\\.?$/)[1]));
return tools.call("e__echo", {{message: "largest sum: " + Math.max(...sums)}});
"""


async def task_git_direct(client):
    log = await call(client, "git__git_log", {"repo_path": REPO, "max_count": 10})
    results = [log]
    hashes = [line.split()[1] for line in log.content[0].text.splitlines() if line.startswith("Commit: ")]
    for h in hashes:
        results.append(await call(client, "git__git_show", {"repo_path": REPO, "revision": h}))
    return ["git__git_log", "git__git_show"], results


GIT_SCRIPT = f"""
const repo = {json.dumps(REPO)};
const log = tools.call("git__git_log", {{repo_path: repo, max_count: 10}});
const hashes = [...log.matchAll(/^Commit: (\\w+)/gm)].map(m => m[1]);
const files = new Set();
for (const revision of hashes) {{
  const show = tools.call("git__git_show", {{repo_path: repo, revision}});
  for (const m of show.matchAll(/^\\+\\+\\+ b\\/(src\\/\\S+)/gm)) files.add(m[1]);
}}
return [...files].sort();
"""


async def task_github_direct(client):
    found = await call(client, "search_tools", {"query": "pull request", "limit": 10})
    results = [found]
    names = [t["name"] for t in found.structured_content["tools"]]
    for n in names:
        results.append(await call(client, "get_tool_schema", {"name": n}))
    return ["search_tools", "get_tool_schema"], results


GITHUB_SCRIPT = """
const out = {};
for (const t of tools.search("pull request").slice(0, 10)) {
  const s = tools.schema(t.name);
  out[t.name] = s.inputSchema.required ?? [];
}
return out;
"""

TASKS = [
    ("sum 10 pairs (everything), echo the largest", task_sums_direct, SUMS_SCRIPT, "get-sum echo"),
    ("files under src/ changed by the last 10 commits (git)", task_git_direct, GIT_SCRIPT, "git_log git_show"),
    ("pull-request tools and their required parameters (saved github toolset)", task_github_direct, GITHUB_SCRIPT, None),
]


async def overhead(client, n=30):
    def timed(samples):
        return statistics.median(samples) * 1000

    empty, direct = [], []
    for _ in range(n):
        t = time.perf_counter()
        await run_code(client, "return 1")
        empty.append(time.perf_counter() - t)
        t = time.perf_counter()
        await call(client, "e__echo", {"message": "x"})
        direct.append(time.perf_counter() - t)
    return timed(empty), timed(direct)


async def main():
    if not GATEWAY.exists():
        sys.exit("build the gateway first: cargo build")
    with tempfile.TemporaryDirectory() as d:
        target = StdioServerParameters(
            command=str(GATEWAY), args=["serve", "--policy", str(policy(Path(d))), "--stdio"],
            env=dict(os.environ),
        )
        async with Client(target, mode="legacy") as client:
            listed = (await client.list_tools()).tools
            run_def = next(t for t in listed if t.name == "run_code")
            run_def_text = json.dumps(run_def.model_dump(mode="json", by_alias=True, exclude_none=True))
            rows = []
            for title, direct, script, describe_query in TASKS:
                t = time.perf_counter()
                used, results = await direct(client)
                direct_ms = (time.perf_counter() - t) * 1000
                definitions = [await schema(client, n, listed) for n in used]
                t = time.perf_counter()
                final = await run_code(client, script)
                code_ms = (time.perf_counter() - t) * 1000
                api = ""
                if describe_query:
                    described = await run_code(client, f"return tools.describe({json.dumps(describe_query)})")
                    api = json.loads(described.content[0].text)
                rows.append((title, definitions, [text_of(r) for r in results], direct_ms,
                             api, script, text_of(final), code_ms, len(results)))
            empty_ms, direct_call_ms = await overhead(client)
    texts = [run_def_text]
    for _, defs, results, _, api, script, final, _, _ in rows:
        texts += [*defs, *results, api, script, final]
    counts = iter(count_tokens(texts))
    run_def_tokens = next(counts)
    print("| task | calls | direct: tokens (definitions + results) | direct: wall ms | code mode: tokens (run_code + API + script + result) | code mode: wall ms | saved |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for title, defs, results, direct_ms, api, script, final, code_ms, calls in rows:
        d_defs = sum(next(counts) for _ in defs)
        d_results = sum(next(counts) for _ in results)
        c_api, c_script, c_final = next(counts), next(counts), next(counts)
        direct_total = d_defs + d_results
        code_total = run_def_tokens + c_api + c_script + c_final
        saved = 100 * (1 - code_total / direct_total) if direct_total else 0
        print(f"| {title} | {calls} | {direct_total:,} ({d_defs:,} + {d_results:,}) | {direct_ms:.0f} | "
              f"{code_total:,} ({run_def_tokens} + {c_api:,} + {c_script:,} + {c_final:,}) | {code_ms:.0f} | {saved:.0f} % |")
    print()
    print(f"Per-run overhead (median of 30, same session): empty script `return 1` {empty_ms:.1f} ms, "
          f"direct `tools/call` of e__echo {direct_call_ms:.1f} ms.")


asyncio.run(main())
