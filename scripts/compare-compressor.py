#!/usr/bin/env python3
"""Compare our compression levels with mcp-compressor's, side by side, on the saved toolsets.

For the GitHub server alone and for all saved toolsets together, this prints per level of each
gateway the tokens of the `tools/list` result a host receives and the selection fidelity of the
text that result exposes per tool.

Like for like:
- Both gateways hide the tools behind wrapper tools and list each tool as a one-line entry
  (theirs: `<tool>name(params): summary</tool>` in `*_get_tool_schema`'s description, one set
  of wrappers per server; ours: `- server__name(params?): summary` catalog lines in
  `search_tools`' description, one set of meta-tools in all). So ours is our progressive
  listing (`mcp-budget render --mode progressive --level L`), and theirs is what an
  mcp-compressor session lists (`CompressedSession.list_tools`, `input_schema` renamed
  `inputSchema` as in MCP), with each saved toolset served to it by a stub MCP server (this
  script with `--serve FILE`).
- Tokens: o200k of the compact JSON bytes of each whole `tools/list` result (the
  `count_tokens` example), the same counter for both.
- Fidelity: the reference plain BM25 (the one `examples/measure_budget.rs` uses: same words,
  stop words, k1 = 1.2, b = 0.75) over one document per tool: the tool's entry as exposed,
  with its server id (ours carries it in the name; theirs in the wrapper's name). Per query,
  a hit at k when any gold tool or one of its `gold_alternatives` is in the top k, on the dev
  queries whose gold tools are in the catalog ranked.

mcp-compressor is not a test dependency. It is installed into its own venv, given by `--venv`
or `MCPC_VENV` (default: `$TMPDIR/mcp-compressor-venv`), created with
`python3 -m venv DIR && DIR/bin/pip install mcp-compressor` when it does not exist
(`--mcpc-version` pins a version).

Usage: scripts/compare-compressor.py [--venv DIR] [--data DIR] [--profile release|debug]
                                     [--no-build] [--keep DIR] [--check]
With --check the exit status is 1 when one of their levels is not dominated (one of ours with
at most its tokens and at least its hit@1 and hit@5).
"""

import argparse
import collections
import json
import math
import os
import re
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OURS = ["off", "low", "medium", "high", "extreme"]
THEIRS = ["low", "medium", "high", "max"]
KS = (1, 5)
STOP = {"the", "a", "an", "of", "to", "and", "or", "in", "for", "is", "on", "with", "me", "my",
        "i", "you", "be", "it", "this", "that"}

# Run by the venv's interpreter: one mcp-compressor session per level over every toolset given.
SESSION = r"""
import json, sys
from mcp_compressor import start_compressed_session, CompressedSessionConfig, BackendConfig
script, level, out, files = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
backends = [BackendConfig(f.rsplit("/", 1)[-1][:-len(".json")], sys.executable,
                          [script, "--serve", f]) for f in files]
session = start_compressed_session(
    CompressedSessionConfig(compression_level=level, bridge=False), backends)
tools = [{"name": t["name"], "description": t.get("description"), "inputSchema": t.get("input_schema")}
         for t in session.list_tools()]
session.close()
with open(out, "w", encoding="utf-8") as f:
    json.dump({"tools": tools}, f, separators=(",", ":"), ensure_ascii=False)
"""


def serve(path):
    """A stub MCP server over stdio that lists the tools of one saved `tools/list` result."""
    with open(path, encoding="utf-8") as f:
        tools = json.load(f)["tools"]
    for line in sys.stdin:
        if not line.strip():
            continue
        msg = json.loads(line)
        if "id" not in msg:
            continue
        method = msg.get("method")
        if method == "initialize":
            result = {"protocolVersion": msg.get("params", {}).get("protocolVersion", "2025-06-18"),
                      "capabilities": {"tools": {}}, "serverInfo": {"name": "saved", "version": "1"}}
        elif method == "tools/list":
            result = {"tools": tools}
        else:
            result = {}
        sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}) + "\n")
        sys.stdout.flush()
    return 0


def venv_python(venv, version):
    python = os.path.join(venv, "bin", "python")
    if not os.path.exists(python):
        print(f"creating {venv} with mcp-compressor", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "venv", venv], check=True)
        spec = f"mcp-compressor=={version}" if version else "mcp-compressor"
        subprocess.run([os.path.join(venv, "bin", "pip"), "install", "-q", spec], check=True)
    got = subprocess.run([python, "-c", "import importlib.metadata as m; print(m.version('mcp-compressor'))"],
                         check=True, capture_output=True, text=True).stdout.strip()
    return python, got


def words(text):
    """The reference BM25's words: alphanumeric runs, split at lower→upper, lower-cased."""
    out, cur, prev_lower = [], [], False
    for c in text:
        if (not c.isalnum() or (c.isupper() and prev_lower)) and cur:
            out.append("".join(cur))
            cur = []
        if c.isalnum():
            cur.append(c.lower())
        prev_lower = c.islower()
    if cur:
        out.append("".join(cur))
    return [w for w in out if w not in STOP]


class Bm25:
    def __init__(self, texts):
        self.docs = [collections.Counter(words(t)) for t in texts]
        self.lens = [sum(d.values()) for d in self.docs]
        self.avg = sum(self.lens) / max(len(self.lens), 1)
        self.df = collections.Counter(w for d in self.docs for w in d)

    def top(self, query, k):
        n = len(self.docs)
        q = words(query)
        scores = []
        for i, tf in enumerate(self.docs):
            s = 0.0
            for w in q:
                f = tf.get(w)
                if f:
                    df = self.df[w]
                    idf = math.log((n - df + 0.5) / (df + 0.5) + 1.0)
                    s += idf * f * 2.2 / (f + 1.2 * (0.25 + 0.75 * self.lens[i] / self.avg))
            scores.append((-s, i))
        scores.sort()
        return [i for _, i in scores[:k]]


def entry_name(entry):
    return re.split(r"[(:]", entry, maxsplit=1)[0].strip()


def their_texts(result, servers):
    """Tool id → exposed entry, from mcp-compressor's `*get_tool_schema` descriptions (one per
    server, named `<server>_get_tool_schema`; a lone server's may carry no prefix)."""
    texts = {}
    for tool in result["tools"]:
        if not tool["name"].endswith("get_tool_schema"):
            continue
        named = [s for s in servers if tool["name"] == f"{s}_get_tool_schema"]
        server = named[0] if named else servers[0] if len(servers) == 1 else None
        if server is None:
            raise SystemExit(f"cannot tell the server of {tool['name']}")
        for entry in re.findall(r"<tool>(.*?)</tool>", tool.get("description") or "", re.S):
            texts[f"{server}/{entry_name(entry)}"] = f"{server} {entry}"
    return texts


def our_texts(result, separator="__"):
    """Tool id → catalog line, from our `search_tools` description."""
    texts = {}
    for tool in result["tools"]:
        if tool["name"] != "search_tools":
            continue
        for line in (tool.get("description") or "").splitlines():
            if line.startswith("- ") and separator in line:
                server, name = entry_name(line[2:]).split(separator, 1)
                texts[f"{server}/{name}"] = line[2:]
    return texts


def fidelity(texts, ids, rows):
    """hit@k per k over the queries with a gold tool among `ids`; None when there are none."""
    known = set(ids)
    index = Bm25([texts.get(i, i.replace("/", " ")) for i in ids])
    hits, total = collections.Counter(), 0
    for row in rows:
        alts = row.get("gold_alternatives", {})
        gold = {g for g0 in row["gold"] for g in [g0] + alts.get(g0, [])}
        if not gold & known:
            continue
        total += 1
        top = [ids[i] for i in index.top(row["query"], max(KS))]
        for k in KS:
            hits[k] += any(t in gold for t in top[:k])
    return {k: hits[k] / total for k in KS} if total else None, total


def count_tokens(counter, files):
    out = subprocess.run([counter, *files], check=True, capture_output=True, text=True).stdout
    return {path: int(n) for n, path in (line.split("\t", 1) for line in out.splitlines())}


def scenario(label, files, args, tools):
    work = args.work
    tag = label.split()[0].removesuffix(".json")
    servers = [os.path.basename(f)[: -len(".json")] for f in files]
    ids = sorted(f"{s}/{t['name']}" for s, f in zip(servers, files) for t in tools[f])
    outputs = {}
    for level in THEIRS:
        out = os.path.join(work, f"{tag}-theirs-{level}.json")
        subprocess.run([args.python, "-c", SESSION, os.path.abspath(__file__), level, out, *files],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        outputs[("mcp-compressor", level)] = out
    for level, mode in [("direct", "full")] + [(level, "progressive") for level in OURS]:
        out = os.path.join(work, f"{tag}-ours-{level}.json")
        cmd = [args.binary, "render", "--tools", *files, "--model", "gpt-4o", "--rendering", "raw",
               "--mode", mode, "--level", "off" if level == "direct" else level]
        with open(out, "w", encoding="utf-8") as f:
            subprocess.run(cmd, check=True, stdout=f)
        outputs[("mcp-budget", level)] = out
    tokens = count_tokens(args.counter, list(outputs.values()))
    direct = tokens[outputs[("mcp-budget", "direct")]]
    rows = []
    for (gateway, level), path in outputs.items():
        if level == "direct":
            continue
        with open(path, encoding="utf-8") as f:
            result = json.load(f)
        texts = their_texts(result, servers) if gateway == "mcp-compressor" else our_texts(result)
        missing = len(set(ids) - set(texts))
        fid, n = fidelity(texts, ids, args.rows)
        rows.append({"gateway": gateway, "level": level, "tokens": tokens[path], "fid": fid,
                     "n": n, "missing": missing})
    print(f"\n### {label} ({len(ids)} tools; direct listing at `off`: {direct} tokens)\n")
    print("| gateway | level | tokens | % of direct | " + " | ".join(f"hit@{k}" for k in KS)
          + " | dominated by |")
    print("|---|---|---|---|" + "---|" * len(KS) + "---|")
    ours = [r for r in rows if r["gateway"] == "mcp-budget"]
    undominated = []
    for r in rows:
        cells = [f"{r['fid'][k]:.3f}" if r["fid"] else "n/a" for k in KS]
        by = ""
        if r["gateway"] == "mcp-compressor":
            winners = [o for o in ours if o["tokens"] <= r["tokens"]
                       and (r["fid"] is None or all(o["fid"][k] >= r["fid"][k] for k in KS))]
            by = ", ".join(f"`{o['level']}`" for o in winners) or "**none**"
            if not winners:
                undominated.append(f"{label}: {r['level']}")
        note = f" ({r['missing']} tools not listed)" if r["missing"] else ""
        print(f"| {r['gateway']} | {r['level']}{note} | {r['tokens']} | "
              f"{100 * r['tokens'] / direct:.1f}% | " + " | ".join(cells) + f" | {by} |")
    n = rows[0]["n"]
    print(f"\nFidelity on {n} dev queries" + (" (none has a gold tool in this catalog)" if not n else "")
          + ".")
    return undominated


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--serve":
        return serve(sys.argv[2])
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--venv", default=os.environ.get("MCPC_VENV",
                                                         os.path.join(tempfile.gettempdir(), "mcp-compressor-venv")))
    parser.add_argument("--mcpc-version", help="mcp-compressor version to install (default: newest)")
    parser.add_argument("--data", default=os.path.join(REPO, "..", "shared", "data"))
    parser.add_argument("--profile", default="release", choices=["release", "debug"])
    parser.add_argument("--no-build", action="store_true")
    parser.add_argument("--keep", help="directory to keep every tools/list result in")
    parser.add_argument("--check", action="store_true", help="exit 1 when one of their levels is not dominated")
    args = parser.parse_args()

    toolsets = os.path.join(args.data, "toolsets")
    queries = os.path.join(args.data, "retrieval-dev.jsonl")
    if not os.path.isdir(toolsets) or not os.path.isfile(queries):
        print(f"no evaluation data under {args.data}; nothing to do", file=sys.stderr)
        return 0
    args.python, version = venv_python(args.venv, args.mcpc_version)
    target = os.path.join(os.environ.get("CARGO_TARGET_DIR", os.path.join(REPO, "target")), args.profile)
    if not args.no_build:
        flag = ["--release"] if args.profile == "release" else []
        subprocess.run(["cargo", "build", "--quiet", *flag, "--bin", "mcp-budget", "--example", "count_tokens"],
                       cwd=REPO, check=True)
    args.binary = os.path.join(target, "mcp-budget")
    args.counter = os.path.join(target, "examples", "count_tokens")
    with open(queries, encoding="utf-8") as f:
        args.rows = [json.loads(line) for line in f if line.strip()]
    files = sorted(os.path.join(toolsets, n) for n in os.listdir(toolsets) if n.endswith(".json"))
    tools = {}
    for path in files:
        with open(path, encoding="utf-8") as f:
            tools[path] = json.load(f)["tools"]
    github = [f for f in files if os.path.basename(f) == "github.json"]

    with tempfile.TemporaryDirectory() as tmp:
        args.work = args.keep or tmp
        os.makedirs(args.work, exist_ok=True)
        print(f"mcp-compressor {version} vs mcp-budget ({args.profile} build); o200k tokens of the "
              f"compact tools/list result; reference BM25 over each tool's exposed entry")
        undominated = []
        if github:
            undominated += scenario("github.json", github, args, tools)
        undominated += scenario(f"all toolsets ({len(files)} servers)", files, args, tools)
    if undominated:
        print("\nnot dominated: " + "; ".join(undominated))
    return 1 if args.check and undominated else 0


if __name__ == "__main__":
    sys.exit(main())
