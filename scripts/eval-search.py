#!/usr/bin/env python3
"""Evaluate `mcp-budget search` on labelled retrieval queries.

Builds the CLI in release mode, runs it with `--queries` for the default ranker and for the plain
BM25 baseline (`--ranker bm25`), and prints hit@1, hit@5 and MRR@10 per `source` and overall,
strict and lenient, side by side.

Scoring (shared/data/toolsets/SOURCES.md §2): each gold tool of a query is a slot; a slot is
hit strictly when its gold id is in the top k, leniently when the gold id or any of its
`gold_alternatives` is. MRR uses the best rank of the slot's accepted ids within the top 10
(0 when absent). Two tables: per query (a query is hit when any of its slots is; this is how
the reference plain-BM25 figures were computed) and per slot (micro-average over gold tools).

With --folds, the per-query table is also printed for each half of a 2-fold split of the queries
(by `sha256(id)`, even / odd): a change should help, or not hurt, on both halves.

Usage: scripts/eval-search.py [--data DIR] [--queries FILE] [--misses] [--folds] [--no-build] [--debug]
Defaults: DIR = ../shared/data relative to the repository, FILE = DIR/retrieval-dev.jsonl.
"""

import argparse
import collections
import hashlib
import json
import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOP = 10


def run_cli(binary, toolsets, queries, ranker):
    out = subprocess.run(
        [binary, "search", "--tools", toolsets, "--queries", queries,
         "--top-k", str(TOP), "--ranker", ranker],
        check=True, capture_output=True, text=True,
    ).stdout
    results = {}
    for line in out.splitlines():
        row = json.loads(line)
        results[row["id"]] = row["results"]
    return results


def slot_scores(results, accepted):
    ranks = [results.index(t) + 1 for t in accepted if t in results]
    best = min(ranks) if ranks else None
    return (
        1.0 if best == 1 else 0.0,
        1.0 if best is not None and best <= 5 else 0.0,
        1.0 / best if best else 0.0,
    )


def evaluate(rows, results, unit):
    """source -> mode -> [hit1, hit5, mrr, count].

    unit "slot": every gold tool is counted; unit "query": a query counts once, scored by its
    best slot (hit when any of its gold tools is found, as the reference BM25 figures are).
    """
    table = collections.defaultdict(lambda: {m: [0.0, 0.0, 0.0, 0] for m in ("strict", "lenient")})
    for row in rows:
        got = results.get(row["id"], [])
        alternatives = row.get("gold_alternatives", {})
        for mode in ("strict", "lenient"):
            scores = []
            for gold in row["gold"]:
                accepted = [gold] + (alternatives.get(gold, []) if mode == "lenient" else [])
                scores.append(slot_scores(got, accepted))
            if unit == "query":
                scores = [tuple(max(s[i] for s in scores) for i in range(3))]
            for source in (row["source"], "overall"):
                cell = table[source][mode]
                for h1, h5, rr in scores:
                    cell[0] += h1
                    cell[1] += h5
                    cell[2] += rr
                    cell[3] += 1
    return table


def fold(row):
    """The half (0 or 1) of the 2-fold split a query falls in."""
    return int(hashlib.sha256(row["id"].encode("utf-8")).hexdigest()[:8], 16) % 2


def fmt(cell):
    n = cell[3] or 1
    return f"{cell[0] / n:.2f} {cell[1] / n:.2f} {cell[2] / n:.2f}"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=os.path.join(REPO, "..", "shared", "data"))
    parser.add_argument("--queries")
    parser.add_argument("--misses", action="store_true", help="print the slots missed at 5 (default ranker)")
    parser.add_argument("--folds", action="store_true", help="also score each half of a 2-fold split")
    parser.add_argument("--no-build", action="store_true")
    parser.add_argument("--debug", action="store_true",
                        help="build and run the debug binary (no release build needed)")
    args = parser.parse_args()

    toolsets = os.path.join(args.data, "toolsets")
    queries = args.queries or os.path.join(args.data, "retrieval-dev.jsonl")
    if not os.path.isdir(toolsets) or not os.path.isfile(queries):
        print(f"no evaluation data under {args.data}; nothing to do", file=sys.stderr)
        return 0
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(REPO, "target"))
    profile = "debug" if args.debug else "release"
    if not args.no_build:
        build = ["cargo", "build", "--quiet"] + ([] if args.debug else ["--release"])
        subprocess.run(build, cwd=REPO, check=True)
    binary = os.path.join(target, profile, "mcp-budget")

    with open(queries, encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    results = {r: run_cli(binary, toolsets, queries, r) for r in ("bm25", "fielded")}
    print(f"{len(rows)} queries, catalog {toolsets}")
    views = [(rows, "query", "per query (hit = any gold tool found; the reference BM25 figures)"),
             (rows, "slot", "per gold tool (each gold tool a slot, micro-average)")]
    if args.folds:
        for half in (0, 1):
            part = [r for r in rows if fold(r) == half]
            views.append((part, "query", f"fold {half} of 2 ({len(part)} queries), per query"))
    for subset, unit, title in views:
        tables = {r: evaluate(subset, results[r], unit) for r in results}
        sources = sorted(s for s in tables["fielded"] if s != "overall") + ["overall"]
        print(f"\n{title}; columns: hit@1 hit@5 MRR@{TOP}")
        header = (f"{'source':26} {'n':>4} | {'bm25 strict':14} | {'bm25 lenient':14} | "
                  f"{'strict':14} | {'lenient':14}")
        print(header)
        print("-" * len(header))
        for s in sources:
            b, d = tables["bm25"][s], tables["fielded"][s]
            print(f"{s:26} {d['strict'][3]:4} | {fmt(b['strict']):14} | {fmt(b['lenient']):14} | "
                  f"{fmt(d['strict']):14} | {fmt(d['lenient']):14}")

    if args.misses:
        print()
        for row in rows:
            got = results["fielded"].get(row["id"], [])
            alternatives = row.get("gold_alternatives", {})
            for gold in row["gold"]:
                accepted = [gold] + alternatives.get(gold, [])
                if not any(t in got[:5] for t in accepted):
                    print(f"MISS {row['source']}: {row['query'][:110]!r}\n  gold {gold}\n  got  {got[:5]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
