#!/usr/bin/env python3
"""Measure `[discover] usage_prior` on labelled queries with simulated usage histories.

A 2-fold split of the queries (by sha256(id), as eval-search.py --folds): the queries of one
half are scored with the usage history the other half would have left (each gold tool of each
query called once: a deployment whose users asked for the same kinds of things), so no query
sees its own label. A second history, "unrelated", calls 300 tools drawn from the whole catalog
with Zipf weights (seeded): a deployment whose usage has nothing to do with the queries, which
the prior must not hurt. Prints hit@1 / hit@5 / MRR@10 (strict, per query) per weight, for each
half, from `mcp-budget search --queries F --report --format json --usage U --usage-prior W`.

With `--embedding-model DIR` it also prints the four configurations of issue 33 at the
default weight (`--configs-weight`, 0.3), over all queries (each half with the other half's
related history): lexical, lexical + usage, lexical + semantic, and all three.

Usage: scripts/eval-usage-prior.py [--data DIR] [--binary PATH] [--weights 0,0.1,0.2,0.3]
                                   [--embedding-model DIR [--configs-weight W]]
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


def scores(binary, toolsets, queries, usage, weight, model=None):
    cmd = [binary, "search", "--tools", toolsets, "--queries", queries, "--report",
           "--format", "json"]
    if usage is not None:
        cmd += ["--usage", usage, "--usage-prior", str(weight)]
    if model is not None:
        cmd += ["--embedding-model", model]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out)["overall"]


def report(binary, toolsets, queries, usage, weight):
    s = scores(binary, toolsets, queries, usage, weight)["strict"]
    return f"{s['hit@1']:.3f} {s['hit@5']:.3f} {s['mrr@10']:.3f}"


def configs(binary, toolsets, halves, model, weight):
    """The four configurations over both halves together: (name, strict, lenient) sums."""
    rows = []
    for name, use_usage, use_model in (("lexical", False, False),
                                       ("lexical + usage", True, False),
                                       ("lexical + semantic", False, True),
                                       ("all three", True, True)):
        total = {"strict": collections.Counter(), "lenient": collections.Counter()}
        for queries, usage in halves:
            o = scores(binary, toolsets, queries, usage if use_usage else None, weight,
                       model if use_model else None)
            for kind in total:
                n = o[kind]["n"]
                total[kind]["n"] += n
                for key in ("hit@1", "hit@5", "mrr@10"):
                    total[kind][key] += o[kind][key] * n
        rows.append((name, *(total[k] for k in ("strict", "lenient"))))
    print("\nconfiguration          strict hit@1 hit@5 MRR@10   lenient hit@1 hit@5 MRR@10")
    for name, strict, lenient in rows:
        cells = [c[key] / c["n"] for c in (strict, lenient) for key in ("hit@1", "hit@5", "mrr@10")]
        print(f"{name:22} {cells[0]:12.3f} {cells[1]:5.3f} {cells[2]:6.3f} "
              f"{cells[3]:13.3f} {cells[4]:5.3f} {cells[5]:6.3f}")


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=os.path.join(REPO, "..", "shared", "data"))
    parser.add_argument("--binary", default=os.path.join(
        os.environ.get("CARGO_TARGET_DIR", os.path.join(REPO, "target")), "release", "mcp-budget"))
    parser.add_argument("--weights", default="0.05,0.1,0.2,0.3,0.5")
    parser.add_argument("--embedding-model", help="a sentence-transformers model directory")
    parser.add_argument("--configs-weight", type=float, default=0.3)
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
        halves = []
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
                if label == "related":
                    halves.append((queries, usage))
                cells = [report(args.binary, toolsets, queries, usage, w) for w in weights]
                print(f"{half:<6} {label:10} {base:17} " + " ".join(f"{c:17}" for c in cells))
        if args.embedding_model:
            configs(args.binary, toolsets, halves, args.embedding_model, args.configs_weight)
    return 0


if __name__ == "__main__":
    sys.exit(main())
