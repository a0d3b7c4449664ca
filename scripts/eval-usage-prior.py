#!/usr/bin/env python3
"""Measure `[discover] usage_prior` on labelled queries with simulated usage histories.

A 2-fold split of the queries (by sha256(id), as eval-search.py --folds): the queries of one
half are scored with the usage history the other half would have left (each gold tool of each
query called once: a deployment whose users asked for the same kinds of things), so no query
sees its own label. A second history, "unrelated", calls 300 tools drawn from the whole catalog
with Zipf weights (seeded): a deployment whose usage has nothing to do with the queries, which
the prior must not hurt. Prints hit@1 / hit@5 / MRR@10 (strict, per query) per weight, for each
half, from `mcp-budget search --queries F --report --format json --usage U --usage-prior W`.

Usage: scripts/eval-usage-prior.py [--data DIR] [--binary PATH] [--weights 0,0.1,0.2,0.3]
"""

import argparse
import collections
import hashlib
import json
import os
import random
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def fold(row):
    return int(hashlib.sha256(row["id"].encode("utf-8")).hexdigest()[:8], 16) % 2


def catalog_ids(toolsets):
    ids = []
    for name in sorted(os.listdir(toolsets)):
        if name.endswith(".json"):
            with open(os.path.join(toolsets, name), encoding="utf-8") as f:
                tools = json.load(f).get("tools", [])
            ids += [f"{name[:-5]}/{t['name']}" for t in tools]
    return ids


def report(binary, toolsets, queries, usage, weight):
    cmd = [binary, "search", "--tools", toolsets, "--queries", queries, "--report",
           "--format", "json"]
    if usage is not None:
        cmd += ["--usage", usage, "--usage-prior", str(weight)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    s = json.loads(out)["overall"]["strict"]
    return f"{s['hit@1']:.3f} {s['hit@5']:.3f} {s['mrr@10']:.3f}"


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=os.path.join(REPO, "..", "shared", "data"))
    parser.add_argument("--binary", default=os.path.join(
        os.environ.get("CARGO_TARGET_DIR", os.path.join(REPO, "target")), "release", "mcp-budget"))
    parser.add_argument("--weights", default="0.05,0.1,0.2,0.3,0.5")
    args = parser.parse_args()
    toolsets = os.path.join(args.data, "toolsets")
    dev = os.path.join(args.data, "retrieval-dev.jsonl")
    if not os.path.isfile(dev):
        print(f"no evaluation data under {args.data}; nothing to do", file=sys.stderr)
        return 0
    with open(dev, encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    ids = catalog_ids(toolsets)
    rng = random.Random(20261203)
    zipf = [1.0 / (k + 1) for k in range(len(ids))]
    shuffled = ids[:]
    rng.shuffle(shuffled)
    unrelated = collections.Counter(rng.choices(shuffled, weights=zipf, k=300))
    weights = [float(w) for w in args.weights.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        print(f"{len(rows)} queries; columns: hit@1 hit@5 MRR@10 (strict, per query)")
        print(f"{'half':6} {'history':10} {'none':17} " +
              " ".join(f"{'w=' + str(w):17}" for w in weights))
        for half in (0, 1):
            mine = [r for r in rows if fold(r) == half]
            other = [r for r in rows if fold(r) != half]
            queries = os.path.join(tmp, f"q{half}.jsonl")
            with open(queries, "w", encoding="utf-8") as f:
                f.writelines(json.dumps(r) + "\n" for r in mine)
            related = collections.Counter(g for r in other for g in r["gold"])
            base = report(args.binary, toolsets, queries, None, 0)
            for label, history in (("related", related), ("unrelated", unrelated)):
                usage = os.path.join(tmp, f"u{half}{label}.json")
                with open(usage, "w", encoding="utf-8") as f:
                    json.dump(dict(history), f)
                cells = [report(args.binary, toolsets, queries, usage, w) for w in weights]
                print(f"{half:<6} {label:10} {base:17} " + " ".join(f"{c:17}" for c in cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
