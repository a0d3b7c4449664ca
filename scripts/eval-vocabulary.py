#!/usr/bin/env python3
"""Measure query expansion from systematic sources on labelled queries (issue 33, item 3).

Builds two vocabulary files (`[discover] vocabulary_file` / `search --vocabulary` format,
`{"word": ["equivalent", ...]}`) from sources that owe nothing to the queries, then scores the
dev queries with each through `mcp-budget search --report` and counts the false matches each
adds (tools entering a query's top 5 that are not its gold):

- `wordnet`: WordNet 3.0 (Princeton; Debian's `wordnet-base`, /usr/share/wordnet): for every
  single-word verb and noun lemma, the other lemmas of its most frequent sense's synset (senses
  are listed by frequency) that occur in the catalog's tool names and descriptions.
- `cooccurrence`: words of the catalog's tool names and first description sentences that come
  together (in at least MIN tools, PMI > 1, P(other | word) >= 0.5), top 3 per word.

Usage: scripts/eval-vocabulary.py [--data DIR] [--binary PATH] [--keep DIR]
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
WORDNET = "/usr/share/wordnet"
STOP = set("a an the of to in for and or with by on from at is are be this that it its as into "
           "via using use used your you can will which when all any each per not no if then than "
           "also get set list".split())


def tools_of(toolsets):
    for name in sorted(os.listdir(toolsets)):
        if name.endswith(".json"):
            with open(os.path.join(toolsets, name), encoding="utf-8") as f:
                yield from json.load(f).get("tools", [])


def split_words(text):
    text = re.sub(r"([a-z])([A-Z])", r"\1 \2", text)
    return [w.lower() for w in re.findall(r"[A-Za-z]+", text)]


def wordnet_table(toolsets):
    catalog = set()
    for t in tools_of(toolsets):
        catalog.update(split_words(t["name"] + " " + (t.get("description") or "")))
    table = collections.defaultdict(set)
    for pos in ("verb", "noun"):
        synsets = {}
        with open(os.path.join(WORDNET, "data." + pos), encoding="latin-1") as f:
            for line in f:
                if line.startswith("  "):
                    continue
                parts = line.split()
                count = int(parts[3], 16)
                synsets[parts[0]] = [re.sub(r"\(.*\)$", "", parts[4 + 2 * i]).lower()
                                     for i in range(count)]
        with open(os.path.join(WORDNET, "index." + pos), encoding="latin-1") as f:
            for line in f:
                if line.startswith("  "):
                    continue
                p = line.split()
                lemma, pointers = p[0], int(p[3])
                offsets = p[4 + pointers + 2:]
                if not lemma.isalpha() or not offsets:
                    continue
                for word in synsets[offsets[0]]:
                    if word != lemma and word.isalpha() and word in catalog:
                        table[lemma].add(word)
    return {k: sorted(v) for k, v in sorted(table.items())}


def cooccurrence_table(toolsets, least=3, top=3, share=0.5):
    docs = []
    for t in tools_of(toolsets):
        desc = (t.get("description") or "").strip()
        first = re.split(r"(?<=[.!?])\s|\n", desc, maxsplit=1)[0]
        docs.append({w for w in split_words(t["name"] + " " + first)
                     if len(w) >= 3 and w not in STOP})
    n = len(docs)
    df = collections.Counter(w for d in docs for w in d)
    pairs = collections.Counter()
    for d in docs:
        words = sorted(d)
        for i, a in enumerate(words):
            for b in words[i + 1:]:
                pairs[(a, b)] += 1
    table = collections.defaultdict(list)
    for (a, b), k in pairs.items():
        if k < least or math.log(k * n / (df[a] * df[b])) <= 1.0:
            continue
        for x, y in ((a, b), (b, a)):
            if k / df[x] >= share:
                table[x].append((k / df[x], y))
    return {x: [y for _, y in sorted(v, reverse=True)[:top]] for x, v in sorted(table.items())}


def run(binary, toolsets, queries, vocabulary, report):
    cmd = [binary, "search", "--tools", toolsets, "--queries", queries]
    cmd += ["--report", "--format", "json"] if report else ["--top-k", "5"]
    if vocabulary:
        cmd += ["--vocabulary", vocabulary]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    if report:
        return json.loads(out)
    return {json.loads(l)["id"]: json.loads(l)["results"] for l in out.splitlines() if l}


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=os.path.join(REPO, "..", "shared", "data"))
    parser.add_argument("--binary", default=os.path.join(
        os.environ.get("CARGO_TARGET_DIR", os.path.join(REPO, "target")), "release", "mcp-budget"))
    parser.add_argument("--keep", help="write the vocabulary files into this folder")
    args = parser.parse_args()
    toolsets = os.path.join(args.data, "toolsets")
    queries = os.path.join(args.data, "retrieval-dev.jsonl")
    if not os.path.isfile(queries):
        print(f"no evaluation data under {args.data}; nothing to do", file=sys.stderr)
        return 0
    if not os.path.isdir(WORDNET):
        print(f"no WordNet at {WORDNET}: apt-get install wordnet-base", file=sys.stderr)
        return 1
    with open(queries, encoding="utf-8") as f:
        gold = {r["id"]: set(r["gold"]) for r in (json.loads(l) for l in f if l.strip())}
    out = args.keep or tempfile.mkdtemp()
    os.makedirs(out, exist_ok=True)
    files = {"none": None}
    for name, table in (("wordnet", wordnet_table(toolsets)),
                        ("cooccurrence", cooccurrence_table(toolsets))):
        files[name] = os.path.join(out, name + ".json")
        with open(files[name], "w", encoding="utf-8") as f:
            json.dump(table, f, indent=0)
        print(f"{name}: {len(table)} words, {sum(map(len, table.values()))} equivalents",
              file=sys.stderr)
    base = run(args.binary, toolsets, queries, None, False)
    print("source        strict hit@1 hit@5  MRR   lenient hit@1 hit@5  MRR   "
          "changed entered false gained lost")
    for name, path in files.items():
        o = run(args.binary, toolsets, queries, path, True)["overall"]
        s, l = o["strict"], o["lenient"]
        top = run(args.binary, toolsets, queries, path, False)
        changed = [q for q in base if base[q] != top[q]]
        entered = [t for q in changed for t in set(top[q]) - set(base[q])]
        false = sum(1 for q in changed for t in set(top[q]) - set(base[q]) if t not in gold[q])
        gained = sum(1 for q in changed if not set(base[q]) & gold[q] and set(top[q]) & gold[q])
        lost = sum(1 for q in changed if set(base[q]) & gold[q] and not set(top[q]) & gold[q])
        print(f"{name:13} {s['hit@1']:12.3f} {s['hit@5']:5.3f} {s['mrr@10']:5.3f} "
              f"{l['hit@1']:13.3f} {l['hit@5']:5.3f} {l['mrr@10']:5.3f} "
              f"{len(changed):7} {len(entered):7} {false:5} {gained:6} {lost:4}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
