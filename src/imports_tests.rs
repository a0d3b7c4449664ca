//! Imports only run down: no cycle between the crate's top-level modules (the folders and
//! files under `src/`), nor between the sibling files and sub-folders of any folder (`a.rs` and
//! `b/` of `src/x/`, with what `src/x/b/` holds counted as `b`).
//!
//! The graph is read from the source text, as `../shared/tools/rust_imports.py` reads it: every
//! `use crate::…` tree, every `crate::x::…` path in code, and every `super::…` path, each
//! pointing at the longest module prefix that exists. Comments, strings and test code do not
//! count: `#[cfg(test)]` items, files named `tests.rs` or `*_tests.rs`, and any file a parent
//! declares with `#[cfg(test)] mod x;` (with its children).

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::path::{Path, PathBuf};

#[test]
fn no_import_cycle_between_top_level_modules() {
    let graph = Graph::of(&read_tree(&src()));
    let report = graph.report(|folder| folder.is_empty());
    assert!(report.is_empty(), "{report}");
}

#[test]
fn no_import_cycle_between_sibling_files_of_a_folder() {
    let graph = Graph::of(&read_tree(&src()));
    let report = graph.report(|folder| !folder.is_empty());
    assert!(report.is_empty(), "{report}");
}

#[test]
fn the_check_sees_a_cycle_and_ignores_test_code() {
    let files = |list: &[(&str, &str)]| -> BTreeMap<String, String> {
        list.iter()
            .map(|(m, text)| ((*m).to_owned(), (*text).to_owned()))
            .collect()
    };
    // `a` and `b` through a use tree and an inline path; `c` reaches `a` only from test code,
    // a comment and a string; `d::helpers` is declared `#[cfg(test)]`.
    let tree = files(&[
        ("a", "use crate::{b::{self, Thing}, jsonrpc};\n"),
        ("b", "fn f() { crate::a::go() }\n"),
        ("b::x", "use super::super::c::Y;\n"),
        (
            "c",
            "// crate::a::go()\nconst S: &str = \"crate::a\";\n#[cfg(test)]\nmod tests { use crate::a; }\n#[cfg(test)]\nfn only() { crate::a::go() }\nfn real() {}\n",
        ),
        ("d", "#[cfg(test)]\n#[allow(dead_code)]\nmod helpers;\n"),
        ("d::helpers", "use crate::a;\n"),
        ("d::tests", "use crate::a;\n"),
        ("a::more_tests", "use crate::d;\n"),
        ("jsonrpc", ""),
    ]);
    let graph = Graph::of(&tree);
    assert_eq!(graph.cycles(""), [vec!["a".to_owned(), "b".to_owned()]]);
    assert_eq!(
        graph.edges_within("", &["a".to_owned(), "b".to_owned()]),
        "    a -> b\n    b -> a\n"
    );
    let top = &graph.folders[""];
    assert!(top["b"].contains("c"), "{top:?}");
    assert!(top["c"].is_empty(), "{top:?}");
    assert!(top["d"].is_empty(), "{top:?}");
    assert!(!top["a"].contains("d"), "{top:?}");
}

#[test]
fn the_check_sees_a_cycle_between_sibling_files() {
    let tree: BTreeMap<String, String> = [
        // `p::x` ⇄ `p::y` through `super::` and a `crate::` path from a file below `p::y`;
        // `p::z` only uses its folder's `mod.rs` and a sibling (no circle); `q` uses `p::x`
        // (an edge between top-level modules, not inside `p`).
        ("p", "pub use x::X;\n"),
        ("p::x", "use super::y::Y;\n"),
        ("p::y", "mod deep;\n"),
        ("p::y::deep", "fn f() { crate::p::x::go() }\n"),
        ("p::z", "use super::X;\nuse super::x::go;\n"),
        ("q", "use crate::p::x;\n"),
    ]
    .iter()
    .map(|(m, text)| ((*m).to_owned(), (*text).to_owned()))
    .collect();
    let graph = Graph::of(&tree);
    let xy = ["p::x".to_owned(), "p::y".to_owned()];
    assert_eq!(graph.cycles("p"), [xy.to_vec()]);
    assert_eq!(
        graph.edges_within("p", &xy),
        "    p::x -> p::y\n    p::y::deep -> p::x\n"
    );
    assert!(graph.cycles("").is_empty(), "{:?}", graph.folders[""]);
    assert!(graph.cycles("p::y").is_empty());
    assert!(graph.folders["p"]["p::z"].contains("p::x"));
    assert!(graph.report(|f| f == "p").contains("cycle in p: p::x p::y"));
}

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Every module of the library under `src`, by path (`a::b` for `src/a/b.rs` and
/// `src/a/b/mod.rs`, the empty path for `lib.rs`), with its text.
fn read_tree(src: &Path) -> BTreeMap<String, String> {
    let mut files = BTreeMap::new();
    let mut dirs = vec![src.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path: PathBuf = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let rel = path.strip_prefix(src).unwrap().with_extension("");
                let mut parts: Vec<String> = rel
                    .components()
                    .map(|c| c.as_os_str().to_string_lossy().into_owned())
                    .collect();
                if parts.last().is_some_and(|p| p == "mod") {
                    parts.pop();
                }
                if parts == ["main"] {
                    continue; // the binary's own crate
                }
                if parts == ["lib"] {
                    parts.clear(); // the root: read for its `#[cfg(test)] mod x;` only
                }
                files.insert(parts.join("::"), std::fs::read_to_string(&path).unwrap());
            }
        }
    }
    files
}

/// The import graph: per module the modules it uses, and per folder (`""` for `src/`, `a::b`
/// for `src/a/b/`) the edges between its children (files and sub-folders, by full path): `m`
/// using `w` is an edge in the deepest folder holding both, between the children of that folder
/// that hold them.
#[derive(Debug)]
struct Graph {
    modules: BTreeMap<String, BTreeSet<String>>,
    folders: BTreeMap<String, BTreeMap<String, BTreeSet<String>>>,
}

impl Graph {
    fn of(files: &BTreeMap<String, String>) -> Self {
        let code: BTreeMap<&str, String> = files
            .iter()
            .map(|(m, text)| (m.as_str(), strip_tests(&blank_comments_and_strings(text))))
            .collect();
        let tests = test_modules(files);
        let live = |m: &str| !m.is_empty() && !is_test(m, &tests);
        let names: HashSet<&str> = files
            .keys()
            .map(String::as_str)
            .filter(|m| live(m))
            .collect();
        let mut modules = BTreeMap::new();
        let mut folders: BTreeMap<String, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
        for &m in &names {
            // Every module is a node of its folder, even one that uses nothing.
            let (folder, child) = split(m, m);
            folders.entry(folder).or_default().entry(child).or_default();
        }
        for (&m, text) in code.iter().filter(|(m, _)| live(m)) {
            let used: BTreeSet<String> = paths(m, text)
                .iter()
                .filter_map(|p| resolve(p, &names))
                .filter(|w| {
                    w != m && !w.starts_with(&format!("{m}::")) && !m.starts_with(&format!("{w}::"))
                })
                .collect();
            for w in &used {
                let (folder, a) = split(m, w);
                let (_, b) = split(w, m);
                folders
                    .entry(folder)
                    .or_default()
                    .entry(a)
                    .or_default()
                    .insert(b);
            }
            modules.insert(m.to_owned(), used);
        }
        Self { modules, folders }
    }

    /// One `cycle in <folder>: …` paragraph, with the module edges that close it, per circle
    /// in the folders `pick` chooses.
    fn report(&self, pick: impl Fn(&str) -> bool) -> String {
        let mut report = String::new();
        for folder in self.folders.keys().filter(|f| pick(f)) {
            for cycle in self.cycles(folder) {
                let name = if folder.is_empty() { "src" } else { folder };
                report.push_str(&format!(
                    "cycle in {name}: {}\n{}",
                    cycle.join(" "),
                    self.edges_within(folder, &cycle)
                ));
            }
        }
        report
    }

    /// The strongly connected groups of more than one child of `folder`, each sorted.
    fn cycles(&self, folder: &str) -> Vec<Vec<String>> {
        let Some(edges) = self.folders.get(folder) else {
            return Vec::new();
        };
        // Kosaraju: the children reachable both ways from a child form its group.
        let reach = |from: &str, forward: bool| -> BTreeSet<String> {
            let mut seen = BTreeSet::from([from.to_owned()]);
            let mut todo = vec![from.to_owned()];
            while let Some(v) = todo.pop() {
                let next: Vec<&String> = if forward {
                    edges.get(&v).into_iter().flatten().collect()
                } else {
                    edges
                        .iter()
                        .filter(|(_, ws)| ws.contains(&v))
                        .map(|(u, _)| u)
                        .collect()
                };
                for w in next {
                    if seen.insert(w.clone()) {
                        todo.push(w.clone());
                    }
                }
            }
            seen
        };
        let mut groups = BTreeSet::new();
        for v in edges.keys() {
            let group: Vec<String> = reach(v, true)
                .intersection(&reach(v, false))
                .cloned()
                .collect();
            if group.len() > 1 {
                groups.insert(group);
            }
        }
        groups.into_iter().collect()
    }

    /// The module edges between members of `cycle` (children of `folder`), one
    /// `    a::x -> b::y` line each.
    fn edges_within(&self, folder: &str, cycle: &[String]) -> String {
        let child = |m: &str| child_of(folder, m);
        let mut out = String::new();
        for (m, used) in &self.modules {
            for w in used {
                match (child(m), child(w)) {
                    (Some(a), Some(b)) if a != b && cycle.contains(&a) && cycle.contains(&b) => {
                        out.push_str(&format!("    {m} -> {w}\n"));
                    }
                    _ => {}
                }
            }
        }
        out
    }
}

/// The folder holding both `m` and `other` (their longest common module prefix that is a
/// proper prefix of `m`), and the child of that folder that holds `m`.
fn split(m: &str, other: &str) -> (String, String) {
    let mine: Vec<&str> = m.split("::").collect();
    let theirs: Vec<&str> = other.split("::").collect();
    let mut common = mine.iter().zip(&theirs).take_while(|(a, b)| a == b).count();
    common = common.min(mine.len() - 1);
    (mine[..common].join("::"), mine[..=common].join("::"))
}

/// The child of `folder` that holds `module` (`a::b` for `a::b::c` in `a`), if `folder` holds it.
fn child_of(folder: &str, module: &str) -> Option<String> {
    let rest = if folder.is_empty() {
        module
    } else {
        module.strip_prefix(folder)?.strip_prefix("::")?
    };
    let first = rest.split("::").next()?;
    Some(if folder.is_empty() {
        first.to_owned()
    } else {
        format!("{folder}::{first}")
    })
}

/// Modules declared `#[cfg(test)] mod x;` by their parent (the attribute may share the line,
/// or sit among other attributes above it).
fn test_modules(files: &BTreeMap<String, String>) -> HashSet<String> {
    let mut tests = HashSet::new();
    for (m, text) in files {
        let text = blank_comments_and_strings(text);
        let mut rest = text.as_str();
        while let Some(at) = rest.find("#[cfg(test)]") {
            rest = &rest[at + "#[cfg(test)]".len()..];
            let item = skip_attributes(rest);
            let item = item
                .strip_prefix("pub(crate) ")
                .or_else(|| item.strip_prefix("pub "))
                .unwrap_or(item);
            if let Some(decl) = item.strip_prefix("mod ") {
                let name: String = decl.chars().take_while(|c| is_ident(*c)).collect();
                if decl[name.len()..].trim_start().starts_with(';') {
                    tests.insert(if m.is_empty() {
                        name
                    } else {
                        format!("{m}::{name}")
                    });
                }
            }
        }
    }
    tests
}

fn is_test(module: &str, declared: &HashSet<String>) -> bool {
    let mut prefix = String::new();
    for part in module.split("::") {
        if part == "tests" || part.ends_with("_tests") {
            return true;
        }
        if !prefix.is_empty() {
            prefix.push_str("::");
        }
        prefix.push_str(part);
        if declared.contains(&prefix) {
            return true;
        }
    }
    false
}

fn skip_attributes(mut text: &str) -> &str {
    loop {
        text = text.trim_start();
        let Some(attr) = text.strip_prefix("#[") else {
            return text;
        };
        text = &attr[closing(attr, '[', ']').map_or(attr.len(), |i| i + 1)..];
    }
}

/// The index of the `close` that ends a group opened just before `text`.
fn closing(text: &str, open: char, close: char) -> Option<usize> {
    let mut depth = 0usize;
    for (i, c) in text.char_indices() {
        if c == open {
            depth += 1;
        } else if c == close {
            if depth == 0 {
                return Some(i);
            }
            depth -= 1;
        }
    }
    None
}

/// Removes every `#[cfg(test)]` item: an attribute list and what follows up to its `;` or the
/// end of its `{ … }` block, whichever comes first.
fn strip_tests(code: &str) -> String {
    let mut out = String::with_capacity(code.len());
    let mut rest = code;
    while let Some(at) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..at]);
        let item = skip_attributes(&rest[at + "#[cfg(test)]".len()..]);
        let end = match (item.find(';'), item.find('{')) {
            (Some(semi), Some(brace)) if semi < brace => semi + 1,
            (_, Some(brace)) => {
                brace
                    + 1
                    + closing(&item[brace + 1..], '{', '}')
                        .map_or(item.len() - brace - 1, |i| i + 1)
            }
            (Some(semi), None) => semi + 1,
            (None, None) => item.len(),
        };
        rest = &item[end..];
    }
    out.push_str(rest);
    out
}

/// `text` with comments, string literals and character literals blanked out (lifetimes kept),
/// so that neither a path in a doc comment nor a brace in a string is read as code.
fn blank_comments_and_strings(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < b.len() {
        let rest = &text[i..];
        let skip = if rest.starts_with("//") {
            rest.find('\n').unwrap_or(rest.len())
        } else if rest.starts_with("/*") {
            // Block comments nest in Rust.
            let mut depth = 0usize;
            let mut j = 0;
            loop {
                if j >= rest.len() {
                    break rest.len();
                }
                if rest[j..].starts_with("/*") {
                    depth += 1;
                    j += 2;
                } else if rest[j..].starts_with("*/") {
                    depth -= 1;
                    j += 2;
                    if depth == 0 {
                        break j;
                    }
                } else {
                    j += rest[j..].chars().next().map_or(1, char::len_utf8);
                }
            }
        } else if let Some(len) = raw_string(rest) {
            len
        } else if rest.starts_with('"') || rest.starts_with("b\"") {
            let start = usize::from(rest.starts_with('b')) + 1;
            let mut j = start;
            while j < rest.len() && b[i + j] != b'"' {
                j += if b[i + j] == b'\\' { 2 } else { 1 };
            }
            (j + 1).min(rest.len())
        } else if rest.starts_with('\'') || rest.starts_with("b'") {
            char_literal(rest)
        } else {
            0
        };
        if skip > 0 && (i == 0 || !is_ident(char::from(b[i - 1])) || rest.starts_with('/')) {
            // Keep the newlines, so that nothing else shifts lines.
            out.extend(
                rest[..skip]
                    .chars()
                    .map(|c| if c == '\n' { '\n' } else { ' ' }),
            );
            i += skip;
        } else {
            let c = rest.chars().next().unwrap_or(' ');
            out.push(c);
            i += c.len_utf8();
        }
    }
    out
}

/// The length of the character literal (`'x'`, `'\n'`, `b'{'`) `text` starts with; 0 for a
/// lifetime (`'a`).
fn char_literal(text: &str) -> usize {
    let start = usize::from(text.starts_with('b')) + 1;
    let body = &text[start..];
    if body.starts_with('\\') {
        // An escape: `\'`, `\n`, `\u{1F600}`.
        return body[2..].find('\'').map_or(0, |i| start + 2 + i + 1);
    }
    let Some(c) = body.chars().next() else {
        return 0;
    };
    if body[c.len_utf8()..].starts_with('\'') {
        start + c.len_utf8() + 1
    } else {
        0
    }
}

/// The length of the raw string literal (`r"…"`, `r#"…"#`, `br#"…"#`) `text` starts with.
fn raw_string(text: &str) -> Option<usize> {
    let after = text.strip_prefix("br").or_else(|| text.strip_prefix('r'))?;
    let hashes = after.chars().take_while(|c| *c == '#').count();
    if !after[hashes..].starts_with('"') {
        return None;
    }
    let close = format!("\"{}", "#".repeat(hashes));
    let body = text.len() - after.len() + hashes + 1;
    Some(
        text[body..]
            .find(&close)
            .map_or(text.len(), |i| body + i + close.len()),
    )
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Every path `module`'s code names in the crate, from the crate root (`a::b::C`).
fn paths(module: &str, code: &str) -> Vec<String> {
    let mut out = Vec::new();
    let parent: Vec<&str> = module.split("::").collect();
    let bytes = code.as_bytes();
    for (at, _) in code
        .match_indices("crate::")
        .chain(code.match_indices("super::"))
    {
        if at > 0 && is_ident(char::from(bytes[at - 1])) {
            continue;
        }
        // `super::super::x` climbs twice; `crate::` starts at the root.
        let mut base: Vec<String> = Vec::new();
        let mut rest = &code[at..];
        if let Some(r) = rest.strip_prefix("crate::") {
            rest = r;
        } else {
            if at >= 7 && code[..at].ends_with("super::") {
                continue; // counted from the first `super::` of the chain
            }
            let mut up = 0;
            while let Some(r) = rest.strip_prefix("super::") {
                up += 1;
                rest = r;
            }
            if up > parent.len() {
                continue;
            }
            base = parent[..parent.len() - up]
                .iter()
                .map(|s| (*s).to_owned())
                .collect();
        }
        let is_use =
            code[..at].trim_end().ends_with("use") || code[..at].trim_end().ends_with("::{");
        if rest.starts_with('{') || is_use {
            let end = rest.find(';').unwrap_or(rest.len());
            use_tree(&base, &rest[..end], &mut out);
        } else {
            out.push(join(&base, &chain(rest)));
        }
    }
    out
}

/// The identifiers of `a::b::C` at the start of `text`, up to the first non-path character.
fn chain(text: &str) -> Vec<String> {
    let mut parts = Vec::new();
    let mut rest = text;
    loop {
        let name: String = rest.chars().take_while(|c| is_ident(*c)).collect();
        if name.is_empty() {
            break;
        }
        rest = &rest[name.len()..];
        parts.push(name);
        match rest.strip_prefix("::") {
            Some(r) if r.starts_with(|c: char| is_ident(c)) => rest = r,
            _ => break,
        }
    }
    parts
}

/// Every full path of a use tree such as `a::{b, c::{self, d as e}}`.
fn use_tree(base: &[String], tree: &str, out: &mut Vec<String>) {
    let tree = tree.trim();
    if let Some(inner) = tree.strip_prefix('{') {
        let inner = inner.strip_suffix('}').unwrap_or(inner);
        let mut depth = 0usize;
        let mut start = 0;
        for (i, c) in inner.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => depth = depth.saturating_sub(1),
                ',' if depth == 0 => {
                    use_tree(base, &inner[start..i], out);
                    start = i + 1;
                }
                _ => {}
            }
        }
        use_tree(base, &inner[start..], out);
        return;
    }
    let parts = chain(tree);
    if parts.is_empty() {
        return;
    }
    let mut path = base.to_vec();
    path.extend(parts.iter().filter(|p| *p != "self").cloned());
    let joined: usize = parts.iter().map(|p| p.len() + 2).sum();
    match tree.get(joined.saturating_sub(2)..).map(str::trim_start) {
        Some(rest) if rest.starts_with("::{") => use_tree(&path, &rest[2..], out),
        _ => out.push(path.join("::")),
    }
}

fn join(base: &[String], parts: &[String]) -> String {
    base.iter()
        .chain(parts)
        .cloned()
        .collect::<Vec<_>>()
        .join("::")
}

/// The longest prefix of `path` that is a module.
fn resolve(path: &str, modules: &HashSet<&str>) -> Option<String> {
    let parts: Vec<&str> = path.split("::").collect();
    (1..=parts.len())
        .rev()
        .map(|n| parts[..n].join("::"))
        .find(|p| modules.contains(p.as_str()))
}
