#!/usr/bin/env python3
"""List the `fn` items of a Rust crate's src/ longer than N lines, tests left out.

usage: long-functions.py [--max N] [--all] [SRC_DIR]
    prints `path:line name length` for every function longer than N lines (default 80), longest
    first, and exits 1 when there is one. --all prints every function (for calibration).

How it measures (the same way as the review of 2026-12-02):
- strings (plain, byte, raw `r#"…"#`), char literals and comments (line, nested block) are masked,
  so a brace inside them is not counted; lifetimes (`'a`) are not char literals;
- a function runs from the line of its `fn` keyword to the line of the `}` that closes its body,
  both included; a nested `fn` is also counted on its own, and its lines stay in its parent's;
- `fn` without a body (trait declarations) and `fn(..)` pointer types are not functions;
- left out as tests: every item under `#[cfg(test)]` (a `mod tests { .. }`, an `impl`, a `fn`),
  every `#[test]` function, the files declared `#[cfg(test)] mod x;` (and their children), and
  every `tests.rs` / `*_tests.rs` file and `tests/` folder.
"""
import os
import re
import sys

IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def mask(text):
    """The text with strings, chars and comments replaced by spaces (newlines kept)."""
    out = list(text)
    i, n = 0, len(text)

    def blank(a, b):
        for k in range(a, b):
            if out[k] != "\n":
                out[k] = " "

    while i < n:
        c = text[i]
        if c == "/" and text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            blank(i, j)
            i = j
        elif c == "/" and text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            blank(i, j)
            i = j
        elif c in "rb" and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            m = re.compile(r'(?:br|rb|r|b)(#*)"').match(text, i)
            if m and "r" in m.group(0)[:2]:
                end = '"' + m.group(1)
                j = text.find(end, m.end())
                j = n if j < 0 else j + len(end)
                blank(i, j)
                i = j
            elif m:  # b"…": an ordinary string with a prefix
                i = skip_string(text, i + 1, blank)
            elif text.startswith("b'", i):
                i = skip_char(text, i + 1, blank)
            else:
                i += 1
        elif c == '"':
            i = skip_string(text, i, blank)
        elif c == "'":
            i = skip_char(text, i, blank)
        else:
            i += 1
    return "".join(out)


def skip_string(text, i, blank):
    j, n = i + 1, len(text)
    while j < n and text[j] != '"':
        j += 2 if text[j] == "\\" else 1
    blank(i, min(j + 1, n))
    return j + 1


def skip_char(text, i, blank):
    """A char literal at i (`'x'`, `'\\n'`, `'\\u{..}'`), or a lifetime / label (left alone)."""
    m = re.compile(r"'(?:\\(?:u\{[0-9a-fA-F_]*\}|x[0-9a-fA-F]{2}|.)|[^\\'\n])'").match(text, i)
    if m:
        blank(i, m.end())
        return m.end()
    return i + 1


def match_brace(m, i):
    """Index of the `}` closing the `{` at i in masked text m."""
    depth = 0
    for j in range(i, len(m)):
        if m[j] == "{":
            depth += 1
        elif m[j] == "}":
            depth -= 1
            if depth == 0:
                return j
    return len(m) - 1


def item_end(m, i):
    """From i (just after an item's attributes), the index where the item ends, and whether it
    ended with `;` (no body) before any `{`."""
    depth = 0
    for j in range(i, len(m)):
        ch = m[j]
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        elif depth == 0 and ch == ";":
            return j, True
        elif depth == 0 and ch == "{":
            return match_brace(m, j), False
    return len(m) - 1, True


ATTR = re.compile(r"#!?\[")


def skip_attrs(m, i):
    """Past whitespace and attributes from i; also returns whether one of them marks a test."""
    test = False
    n = len(m)
    while True:
        while i < n and m[i].isspace():
            i += 1
        a = ATTR.match(m, i)
        if not a or m[i + 1] == "!":
            return i, test
        depth, j = 0, a.end() - 1
        while j < n:
            if m[j] == "[":
                depth += 1
            elif m[j] == "]":
                depth -= 1
                if depth == 0:
                    break
            j += 1
        body = re.sub(r"\s+", "", m[a.end():j])
        if body in ("cfg(test)", "test") or body.startswith("tokio::test"):
            test = True
        i = j + 1


def test_spans(m):
    """Spans (start, end) of the items marked as tests, and the `mod x;` names declared test-only."""
    spans, mods = [], []
    for a in re.finditer(r"#\[", m):
        if any(s <= a.start() <= e for s, e in spans):
            continue
        # only the first attribute of a run starts a scan; later ones are reached through it
        k = a.start() - 1
        while k >= 0 and m[k].isspace():
            k -= 1
        if k >= 0 and m[k] == "]":
            continue
        start = a.start()
        i, test = skip_attrs(m, start)
        if not test:
            continue
        end, bodyless = item_end(m, i)
        spans.append((start, end))
        d = re.compile(r"(?:pub(?:\([^)]*\))?\s+)?mod\s+(" + IDENT.pattern + r")\s*;").match(m, i)
        if d and bodyless:
            mods.append(d.group(1))
    return spans, mods


def impls(m):
    """Spans (start, end, type name) of the `impl` and `trait` blocks, so a method is named
    `Type::name`."""
    out = []
    for b in re.finditer(r"\b(?:impl|trait)\b", m):
        before = re.sub(r"\b(?:unsafe|default|pub(?:\([^)]*\))?)\s*$", "", m[:b.start()]).rstrip()
        if before and before[-1] not in "{};]":
            continue  # `impl Trait` in a type, not an impl block
        end, bodyless = item_end(m, b.end())
        if bodyless:
            continue
        head = m[b.end():m.find("{", b.end())]
        head = re.split(r"\bwhere\b", head)[0]
        depth, flat = 0, []  # the head without its generic arguments
        for ch in head:
            depth += ch == "<"
            if not depth:
                flat.append(ch)
            depth -= ch == ">" and depth > 0
        flat = "".join(flat)
        if b.group(0) == "trait":
            flat = flat.split(":")[0]
        ty = re.split(r"\bfor\b", flat)[-1]
        names = IDENT.findall(ty.replace("dyn", " ").replace("mut", " "))
        if names:
            out.append((b.start(), end, names[-1]))
    return out


def functions(m):
    """(offset of `fn`, name, offset of the closing `}`) for every function with a body."""
    out = []
    blocks = impls(m)
    for f in re.finditer(r"\bfn\s+(" + IDENT.pattern + r")", m):
        if f.start() > 0 and (m[f.start() - 1].isalnum() or m[f.start() - 1] == "_"):
            continue
        end, bodyless = item_end(m, f.end())
        if bodyless:
            continue
        inside = [(s, ty) for s, e, ty in blocks if s < f.start() <= e]
        name = f.group(1)
        if inside:
            name = max(inside)[1] + "::" + name
        out.append((f.start(), name, end))
    return out


def child_dir(path):
    """Where the modules declared in `path` live."""
    d, base = os.path.split(path)
    return d if base in ("mod.rs", "lib.rs", "main.rs") else os.path.join(d, base[:-3])


def scan(src):
    files = sorted(
        os.path.join(root, f) for root, _, fs in os.walk(src) for f in fs if f.endswith(".rs")
    )
    masked = {p: mask(open(p, encoding="utf-8", errors="replace").read()) for p in files}
    test_dirs, test_files = set(), set()
    spans = {}
    for p, m in masked.items():
        s, mods = test_spans(m)
        spans[p] = s
        for name in mods:
            base = os.path.join(child_dir(p), name)
            test_files.add(base + ".rs")
            test_files.add(os.path.join(base, "mod.rs"))
            test_dirs.add(base)
    found = []
    for p, m in masked.items():
        rel = os.path.relpath(p, src)
        parts = rel.split(os.sep)
        if (
            p in test_files
            or any(p.startswith(d + os.sep) for d in test_dirs)
            or parts[-1] in ("tests.rs",)
            or parts[-1].endswith("_tests.rs")
            or "tests" in parts[:-1]
        ):
            continue
        for start, name, end in functions(m):
            if any(s <= start <= e for s, e in spans[p]):
                continue
            line = m.count("\n", 0, start) + 1
            length = m.count("\n", start, end) + 1
            found.append((os.path.join(os.path.basename(os.path.normpath(src)), rel), line, name, length))
    return found


def main(argv):
    limit, show_all, src = 80, False, "src"
    args = list(argv)
    while args:
        a = args.pop(0)
        if a == "--max":
            limit = int(args.pop(0))
        elif a == "--all":
            show_all = True
        elif a in ("-h", "--help"):
            print(__doc__)
            return 0
        else:
            src = a
    found = scan(src)
    over = [f for f in found if f[3] > limit]
    shown = found if show_all else over
    for path, line, name, length in sorted(shown, key=lambda f: (-f[3], f[0], f[1])):
        print(f"{path}:{line} {name} {length}")
    print(f"{len(over)} of {len(found)} functions over {limit} lines (tests left out)")
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
