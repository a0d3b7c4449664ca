//! The public API names only public types: no public item of a public module (one `lib.rs`
//! declares `pub mod x;` without `#[doc(hidden)]`) names, in its signature or its public
//! fields, a type that is reachable only through a `#[doc(hidden)]` module.
//!
//! The check reads the source text, as `imports_tests.rs` does, so it runs with the unit tests
//! on stable (rustdoc's JSON output, which would resolve every path, needs nightly). It looks
//! at the lines that make the documented surface:
//! - `pub fn`, `pub type`, `pub const`, `pub static` and tuple `pub struct` signatures, up to
//!   their body or `;` (inherent methods included; trait impls are the trait's surface);
//! - the `pub` fields of `pub struct`s, every line of a `pub enum`, and the method signatures
//!   of a `pub trait`.
//!
//! - the same lines of every type a public module re-exports from a hidden one (its
//!   definition and the inherent `impl` blocks in its own file).
//!
//! It skips comments, test code (`#[cfg(test)]` items and `*tests.rs` files), `pub(crate)`
//! and `#[doc(hidden)]` items, and `#[doc(hidden)] pub mod` submodules. A type counts as
//! hidden when the path it resolves to (through the file's `use` lines, `crate::`, `super::`
//! or an imported module) runs through a hidden module, unless a public module re-exports it
//! (`pub use crate::hidden::Type;`, or a `pub use hidden_mod::*`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

#[test]
fn public_signatures_name_only_public_types() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let tree = Tree::read(&src);
    let found = tree.violations();
    let modules: BTreeSet<&str> = found.iter().map(|v| v.hidden_module()).collect();
    let report: String = found.iter().map(|v| format!("{v}\n")).collect();
    assert!(
        found.is_empty(),
        "{} public signature or field lines name types of {} hidden modules ({}); re-export \
         the type from a public module or make the item pub(crate):\n{report}",
        found.len(),
        modules.len(),
        modules.into_iter().collect::<Vec<_>>().join(", "),
    );
}

#[test]
fn the_check_sees_a_hidden_type_and_ignores_what_is_not_public() {
    let tree = Tree::of(&[
        (
            "",
            "pub mod open;\n#[doc(hidden)]\npub mod inner;\n#[doc(hidden)]\npub mod shown;\n",
        ),
        (
            "open",
            "use crate::inner::{Secret, Other as Renamed};\nuse crate::shown;\n\
             pub use crate::shown::Fine;\n#[doc(hidden)]\npub mod back;\n\
             /// a doc line naming Secret\npub fn leak(s: Secret) -> Fine { todo!() }\n\
             pub(crate) fn quiet(s: Secret) {}\n#[doc(hidden)]\npub fn also_quiet(s: Secret) {}\n\
             pub struct Holder {\n    pub a: Renamed,\n    b: Secret,\n    pub c: shown::Fine,\n    \
             pub d: crate::inner::Deep,\n}\n\
             pub enum Choice {\n    One(Secret),\n    Two,\n}\n\
             #[cfg(test)]\nmod tests {\n    pub fn t(s: super::Secret) {}\n}\n",
        ),
        (
            "open::back",
            "pub fn hidden_too(s: crate::inner::Secret) {}\n",
        ),
        (
            "inner",
            "pub struct Secret;\npub struct Other;\npub struct Deep;\n",
        ),
        (
            "shown",
            "pub struct Fine;\nimpl Fine {\n    pub fn peek(&self) -> crate::inner::Secret { todo!() }\n    \
             pub(crate) fn quiet(&self) -> crate::inner::Secret { todo!() }\n}\n\
             pub fn elsewhere(s: crate::inner::Secret) {}\n",
        ),
    ]);
    let found: Vec<String> = tree.violations().iter().map(ToString::to_string).collect();
    assert_eq!(
        found,
        [
            "src/open.rs:7: pub fn leak(s: Secret) -> Fine names crate::inner::Secret",
            "src/open.rs:12: pub a: Renamed, names crate::inner::Other",
            "src/open.rs:15: pub d: crate::inner::Deep, names crate::inner::Deep",
            "src/open.rs:18: One(Secret), names crate::inner::Secret",
            // A re-exported type's methods are public, the rest of its module is not.
            "src/shown.rs:3: pub fn peek(&self) -> crate::inner::Secret names crate::inner::Secret",
        ]
    );
}

/// One public line that names a hidden type.
struct Violation {
    file: String,
    line: usize,
    text: String,
    hidden: String,
}

impl Violation {
    fn hidden_module(&self) -> &str {
        self.hidden
            .trim_start_matches("crate::")
            .split("::")
            .next()
            .unwrap_or_default()
    }
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}:{}: {} names {}",
            self.file, self.line, self.text, self.hidden
        )
    }
}

/// The library's modules by path (`a::b`; the empty path is `lib.rs`), their file and lines.
struct Tree {
    modules: BTreeMap<String, (String, Vec<String>)>,
}

impl Tree {
    fn read(src: &Path) -> Self {
        let mut modules = BTreeMap::new();
        let mut dirs = vec![src.to_path_buf()];
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    dirs.push(path);
                    continue;
                }
                let rel = path.strip_prefix(src).unwrap().with_extension("");
                let rel = rel.to_string_lossy().replace('\\', "/");
                if path.extension().is_none_or(|e| e != "rs") || rel == "main" {
                    continue;
                }
                let module = if rel == "lib" {
                    ""
                } else {
                    rel.trim_end_matches("/mod")
                };
                let module = module.replace('/', "::");
                let text = std::fs::read_to_string(&path).unwrap();
                modules.insert(
                    module,
                    (
                        format!("src/{rel}.rs"),
                        clean(&text).lines().map(str::to_owned).collect(),
                    ),
                );
            }
        }
        Self { modules }
    }

    fn of(files: &[(&str, &str)]) -> Self {
        let modules = files
            .iter()
            .map(|(m, text)| {
                let file = if m.is_empty() {
                    "lib".to_owned()
                } else {
                    m.replace("::", "/")
                };
                let lines = clean(text).lines().map(str::to_owned).collect();
                ((*m).to_owned(), (format!("src/{file}.rs"), lines))
            })
            .collect();
        Self { modules }
    }

    /// Modules off the documented surface (by path, `a::b`): `#[doc(hidden)] pub mod` and the
    /// private top-level ones (not read), then the private submodules of public ones (read:
    /// their items may be re-exported, and a type they define is public only if it is).
    fn hidden(&self) -> (BTreeSet<String>, BTreeSet<String>) {
        let (mut unread, mut private) = (BTreeSet::new(), BTreeSet::new());
        for (module, (_, lines)) in &self.modules {
            for (i, line) in lines.iter().enumerate() {
                let Some(name) = declared_module(line) else {
                    continue;
                };
                if doc_hidden(lines, i) || (module.is_empty() && !line.starts_with("pub mod ")) {
                    unread.insert(join(module, name));
                } else if !line.trim_start().starts_with("pub mod ") {
                    private.insert(join(module, name));
                }
            }
        }
        private.extend(unread.iter().cloned());
        (unread, private)
    }

    fn is_hidden(module: &str, hidden: &BTreeSet<String>) -> bool {
        let mut prefix = String::new();
        for part in module.split("::") {
            prefix = join(&prefix, part);
            if hidden.contains(&prefix) || part == "tests" || part.ends_with("_tests") {
                return true;
            }
        }
        false
    }

    fn violations(&self) -> Vec<Violation> {
        let (unread, hidden) = self.hidden();
        let reexported: BTreeSet<String> = self
            .reexported(&unread)
            .iter()
            .map(|p| self.canonical(p))
            .collect();
        let mut found = Vec::new();
        for (module, (file, lines)) in &self.modules {
            if !module.is_empty() && !Self::is_hidden(module, &unread) {
                let surface = surface(lines);
                found.extend(self.check(module, file, lines, surface, &hidden, &reexported));
            }
        }
        // A re-exported type's own fields and methods are public too.
        for path in &reexported {
            let Some((module, name)) = path.trim_start_matches("crate::").rsplit_once("::") else {
                continue;
            };
            if let (true, Some((file, lines))) =
                (Self::is_hidden(module, &hidden), self.modules.get(module))
            {
                let surface = surface(&members_of(lines, name));
                found.extend(self.check(module, file, lines, surface, &hidden, &reexported));
            }
        }
        let mut seen = BTreeSet::new();
        found.retain(|v| seen.insert(v.to_string()));
        found
    }

    /// The violations among the `surface` lines of `module`.
    fn check(
        &self,
        module: &str,
        file: &str,
        lines: &[String],
        surface: Vec<(usize, String)>,
        hidden: &BTreeSet<String>,
        reexported: &BTreeSet<String>,
    ) -> Vec<Violation> {
        let mut uses = self.uses(module, lines, false);
        // The types the module defines itself.
        for line in lines.iter().filter(|l| !l.starts_with(char::is_whitespace)) {
            if let Some(name) = defined_name(line) {
                uses.entry(name.to_owned())
                    .or_insert_with(|| format!("crate::{}", join(module, name)));
            }
        }
        let mut found = Vec::new();
        for (line, text) in surface {
            for path in named_types(&text, module, &uses) {
                let path = self.canonical(&path);
                let defined_in = path.rsplit_once("::").map_or("", |(m, _)| m);
                let defined_in = defined_in.trim_start_matches("crate::");
                let public =
                    reexported.contains(&path) || reexported.contains(&format!("{defined_in}::*"));
                if Self::is_hidden(defined_in, hidden) && !public {
                    found.push(Violation {
                        file: file.to_owned(),
                        line: line + 1,
                        text: text.clone(),
                        hidden: path,
                    });
                }
            }
        }
        found
    }

    /// Where the type at `path` is defined, following `use` and `pub use` lines
    /// (`crate::gateway::UpstreamSummary` is `crate::gateway::pool::UpstreamSummary`).
    fn canonical(&self, path: &str) -> String {
        let mut path = path.to_owned();
        for _ in 0..8 {
            let Some((module, name)) = path.rsplit_once("::") else {
                break;
            };
            let module = module.trim_start_matches("crate").trim_start_matches("::");
            let Some((_, lines)) = self.modules.get(module) else {
                break;
            };
            if lines.iter().any(|l| defines(l, name)) {
                break;
            }
            match self.uses(module, lines, false).get(name) {
                Some(next) if next.starts_with("crate::") && *next != path => path.clone_from(next),
                _ => break,
            }
        }
        path
    }

    /// [`uses`], with a path that starts at a child module (`use child::Type;`) made absolute.
    fn uses(&self, module: &str, lines: &[String], reexports: bool) -> BTreeMap<String, String> {
        let mut out = uses(module, lines, reexports);
        if !reexports {
            // A child module is in scope without a `use` (`call::Call` in `audit`).
            let prefix = join(module, "");
            for child in self.modules.keys().filter_map(|m| m.strip_prefix(&prefix)) {
                if !child.contains("::") && !child.is_empty() {
                    out.entry(child.to_owned())
                        .or_insert_with(|| format!("crate::{prefix}{child}"));
                }
            }
        }
        for path in out.values_mut() {
            let first = path.split("::").next().unwrap_or_default();
            if first != "crate" && self.modules.contains_key(&join(module, first)) {
                *path = format!("crate::{}", join(module, path));
            }
        }
        out
    }

    /// What the public modules re-export (`crate::a::Type`, or `a::*` for a glob).
    fn reexported(&self, hidden: &BTreeSet<String>) -> BTreeSet<String> {
        let mut out = BTreeSet::new();
        for (module, (_, lines)) in &self.modules {
            if !Self::is_hidden(module, hidden) {
                for (_, path) in self.uses(module, lines, true) {
                    out.insert(path.strip_suffix("::*").map_or(path.clone(), |m| {
                        format!("{}::*", m.trim_start_matches("crate::"))
                    }));
                }
            }
        }
        out
    }
}

fn join(module: &str, name: &str) -> String {
    if module.is_empty() {
        name.to_owned()
    } else {
        format!("{module}::{name}")
    }
}

/// The name `line` declares as a module (`mod x;`, `pub mod x {`), if it does.
fn declared_module(line: &str) -> Option<&str> {
    let rest = line.trim_start();
    let rest = rest.strip_prefix("pub ").unwrap_or(rest);
    let rest = rest.strip_prefix("pub(crate) ").unwrap_or(rest);
    let name = rest.strip_prefix("mod ")?;
    let end = name.find([';', ' ', '{']).unwrap_or(name.len());
    Some(&name[..end])
}

/// Whether the item on line `i` carries `#[doc(hidden)]` among its attributes.
fn doc_hidden(lines: &[String], i: usize) -> bool {
    lines[..i]
        .iter()
        .rev()
        .map(|l| l.trim())
        .take_while(|l| l.starts_with("#[") || l.is_empty())
        .any(|l| l == "#[doc(hidden)]")
}

/// `text` with comments, string and character literals blanked (newlines kept), so that
/// neither a doc line nor a `'{'` is read as code.
fn blank(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < chars.len() {
        let at = |k: usize| chars.get(i + k).copied().unwrap_or(' ');
        let end = if at(0) == '/' && at(1) == '/' {
            chars[i..]
                .iter()
                .position(|c| *c == '\n')
                .map_or(chars.len(), |n| i + n)
        } else if at(0) == '/' && at(1) == '*' {
            (i + 2..chars.len())
                .find(|&k| chars[k - 1] == '*' && chars[k] == '/')
                .map_or(chars.len(), |k| k + 1)
        } else if at(0) == 'r'
            && (at(1) == '"' || (at(1) == '#' && at(2) == '"'))
            && (i == 0 || !chars[i - 1].is_alphanumeric())
        {
            let hashes = chars[i + 1..].iter().take_while(|c| **c == '#').count();
            let close: String = std::iter::once('"')
                .chain(std::iter::repeat_n('#', hashes))
                .collect();
            let from = i + 2 + hashes;
            let rest: String = chars[from..].iter().collect();
            rest.find(&close).map_or(chars.len(), |n| {
                from + rest[..n].chars().count() + close.chars().count()
            })
        } else if at(0) == '"' {
            let mut k = i + 1;
            while k < chars.len() && chars[k] != '"' {
                k += if chars[k] == '\\' { 2 } else { 1 };
            }
            k + 1
        } else if at(0) == '\'' && at(1) == '\\' {
            (i + 2..chars.len())
                .find(|&k| chars[k] == '\'')
                .map_or(chars.len(), |k| k + 1)
        } else if at(0) == '\'' && at(2) == '\'' {
            i + 3
        } else {
            out.push(at(0));
            i += 1;
            continue;
        };
        let end = end.min(chars.len());
        out.extend(
            chars[i..end]
                .iter()
                .map(|c| if *c == '\n' { '\n' } else { ' ' }),
        );
        i = end;
    }
    out
}

/// `text` without comments and without `#[cfg(test)]` items (each blanked to empty lines, so
/// line numbers stay).
fn clean(text: &str) -> String {
    let mut out = Vec::new();
    let mut skip_depth: Option<i64> = None;
    let mut depth = 0i64;
    let mut pending_test = false;
    for code in blank(text).lines() {
        let opens = code.matches('{').count() as i64 - code.matches('}').count() as i64;
        if code.trim() == "#[cfg(test)]" {
            pending_test = true;
        }
        if pending_test && !code.trim().is_empty() && !code.trim_start().starts_with("#[") {
            pending_test = false;
            if opens > 0 {
                skip_depth = Some(depth);
            }
            depth += opens;
            out.push(String::new());
            continue;
        }
        depth += opens;
        if let Some(d) = skip_depth {
            if depth <= d {
                skip_depth = None;
            }
            out.push(String::new());
            continue;
        }
        out.push(code.to_owned());
    }
    out.join("\n")
}

/// The `use` lines of a module (only its `pub use` lines when `reexports`): the name each
/// brings in, with the crate path it stands for (`crate::a::B`; external paths as written).
fn uses(module: &str, lines: &[String], reexports: bool) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut i = 0;
    while i < lines.len() {
        let start = lines[i].trim_start();
        let public = start.starts_with("pub use ");
        if !(start.starts_with("use ") || public)
            || (reexports && (!public || doc_hidden(lines, i)))
        {
            i += 1;
            continue;
        }
        let mut stmt = String::new();
        while i < lines.len() {
            stmt.push_str(lines[i].trim());
            i += 1;
            if stmt.ends_with(';') {
                break;
            }
        }
        let tree: String = stmt
            .trim_start_matches("pub ")
            .trim_start_matches("use ")
            .trim_end_matches(';')
            .replace(" as ", "@")
            .chars()
            .filter(|c| !c.is_whitespace())
            .collect();
        expand(&absolute(module, &tree), &mut out);
    }
    out
}

/// `crate::…` for a path written relative to `module` (`super::`, `self::`); others as they are.
fn absolute(module: &str, path: &str) -> String {
    let mut base: Vec<&str> = module.split("::").filter(|p| !p.is_empty()).collect();
    let mut rest = path;
    if let Some(r) = rest.strip_prefix("self::") {
        rest = r;
    } else if rest.starts_with("super::") {
        while let Some(r) = rest.strip_prefix("super::") {
            base.pop();
            rest = r;
        }
    } else {
        return path.to_owned();
    }
    let mut out = vec!["crate"];
    out.extend(base);
    out.push(rest);
    out.join("::")
}

/// Flattens a use tree (`crate::a::{B, c::{D as E, self}}`) into names and their paths.
fn expand(tree: &str, out: &mut BTreeMap<String, String>) {
    let Some(open) = tree.find('{') else {
        let (path, name) = tree
            .split_once('@')
            .unwrap_or((tree, tree.rsplit("::").next().unwrap_or(tree)));
        let path = path.strip_suffix("::self").unwrap_or(path);
        let name = if name == "self" {
            path.rsplit("::").next().unwrap_or(path)
        } else {
            name
        };
        out.insert(name.to_owned(), path.to_owned());
        return;
    };
    let prefix = &tree[..open];
    let inner = &tree[open + 1..tree.len() - 1];
    let mut depth = 0;
    let mut start = 0;
    for (i, c) in inner.char_indices().chain([(inner.len(), ',')]) {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                let part = &inner[start..i];
                if !part.is_empty() {
                    expand(&format!("{prefix}{part}"), out);
                }
                start = i + 1;
            }
            _ => {}
        }
    }
}

/// The type `line` defines, if it defines one.
fn defined_name(line: &str) -> Option<&str> {
    let rest = line.trim_start();
    let rest = rest.strip_prefix("pub(crate) ").unwrap_or(rest);
    let rest = rest.strip_prefix("pub ").unwrap_or(rest);
    let rest = ["struct ", "enum ", "trait ", "union ", "type "]
        .iter()
        .find_map(|kind| rest.strip_prefix(kind))?;
    let end = rest
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(rest.len());
    Some(&rest[..end]).filter(|n| !n.is_empty())
}

/// Whether `line` defines the type `name` (a struct, enum, trait, union or type alias).
fn defines(line: &str, name: &str) -> bool {
    let rest = line.trim_start();
    let rest = rest.strip_prefix("pub(crate) ").unwrap_or(rest);
    let rest = rest.strip_prefix("pub ").unwrap_or(rest);
    ["struct ", "enum ", "trait ", "union ", "type "]
        .iter()
        .any(|kind| {
            rest.strip_prefix(kind)
                .and_then(|r| r.strip_prefix(name))
                .is_some_and(|r| !r.starts_with(|c: char| c.is_alphanumeric() || c == '_'))
        })
}

/// `lines` with everything blanked but the definition of `name` and its inherent `impl`
/// blocks (with their attributes).
fn members_of(lines: &[String], name: &str) -> Vec<String> {
    let mut out = vec![String::new(); lines.len()];
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i].trim_start();
        if lines[i].starts_with(char::is_whitespace)
            || !(defines(line, name) || impl_of(line, name))
        {
            i += 1;
            continue;
        }
        let mut first = i;
        while first > 0 && lines[first - 1].trim_start().starts_with("#[") {
            first -= 1;
        }
        let (mut depth, mut j) = (0i64, first);
        while j < lines.len() {
            let l = &lines[j];
            out[j].clone_from(l);
            depth += l.matches('{').count() as i64 - l.matches('}').count() as i64;
            j += 1;
            if j > i && depth <= 0 && (l.contains('}') || l.trim_end().ends_with(';')) {
                break;
            }
        }
        i = j;
    }
    out
}

/// Whether `line` opens an inherent `impl` block of `name` (`impl<T> Name<T> {`).
fn impl_of(line: &str, name: &str) -> bool {
    let Some(mut rest) = line.strip_prefix("impl") else {
        return false;
    };
    if rest.starts_with('<') {
        let mut depth = 0;
        for (k, c) in rest.char_indices() {
            depth += match c {
                '<' => 1,
                '>' => -1,
                _ => 0,
            };
            if depth == 0 {
                rest = &rest[k + 1..];
                break;
            }
        }
    }
    !line.contains(" for ")
        && rest
            .trim_start()
            .strip_prefix(name)
            .is_some_and(|r| !r.starts_with(|c: char| c.is_alphanumeric() || c == '_'))
}

/// The lines of the documented surface: `(index of its first line, its text)`.
fn surface(lines: &[String]) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    // The kind of each open block, by brace depth: 's' pub struct, 'e' pub enum, 't' pub
    // trait, 'i' inherent impl, '-' anything else (a body, a private item, a trait impl).
    let mut blocks: Vec<char> = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i].trim();
        let inside = blocks.last().copied().unwrap_or('m');
        let hidden = doc_hidden(lines, i);
        let item = !hidden && line.starts_with("pub ") && !line.starts_with("pub use ");
        let (kind, first) = (block_kind(line, hidden), i);
        let takes = match inside {
            'm' | 'i' => item && !line.starts_with("pub mod ") && signature_item(line),
            's' => item,
            'e' => !line.is_empty() && !line.starts_with("#[") && line != "}",
            't' => line.starts_with("fn ") || line.starts_with("type "),
            _ => false,
        };
        let mut text = String::new();
        let mut pushed = false;
        loop {
            let l = lines[i].trim();
            text.push_str(if text.is_empty() { "" } else { " " });
            text.push_str(l);
            let end = if takes && inside != 'e' {
                signature_end(&text)
            } else {
                None
            };
            for c in l.chars() {
                match c {
                    '{' => {
                        let nested = if inside == 'e' { 'e' } else { '-' };
                        blocks.push(if pushed || inside == '-' {
                            nested
                        } else {
                            kind
                        });
                        pushed = true;
                    }
                    '}' => drop(blocks.pop()),
                    _ => {}
                }
            }
            i += 1;
            if let Some(end) = end {
                text.truncate(end);
                break;
            }
            let field_end = inside == 's' && l.ends_with(',');
            if !takes || inside == 'e' || i >= lines.len() || field_end || l.ends_with(';') {
                break;
            }
        }
        if takes {
            out.push((first, text.trim().to_owned()));
        }
    }
    out
}

/// Whether a `pub` line at module or impl level opens an item whose signature names types.
fn signature_item(line: &str) -> bool {
    let rest = line.trim_start_matches("pub ");
    [
        "fn ",
        "async fn ",
        "const fn ",
        "unsafe fn ",
        "type ",
        "const ",
        "static ",
    ]
    .iter()
    .any(|p| rest.starts_with(p))
        || (rest.starts_with("struct ") && rest.contains('('))
}

/// Where a signature ends in `text`: before its body's `{`, or after its `;`.
fn signature_end(text: &str) -> Option<usize> {
    let mut depth = 0i32;
    for (i, c) in text.char_indices() {
        match c {
            '(' | '[' | '<' => depth += 1,
            ')' | ']' | '>' if !text[..i].ends_with('-') && !text[..i].ends_with('=') => depth -= 1,
            '{' if depth <= 0 => return Some(i),
            ';' if depth <= 0 => return Some(i + 1),
            _ => {}
        }
    }
    None
}

/// What kind of block `line` opens, if it opens one.
fn block_kind(line: &str, hidden: bool) -> char {
    let public = |p: &str| !hidden && line.starts_with(p);
    if public("pub struct ") {
        's'
    } else if public("pub enum ") {
        'e'
    } else if public("pub trait ") {
        't'
    } else if (line.starts_with("impl ") || line.starts_with("impl<")) && !line.contains(" for ") {
        'i'
    } else {
        '-'
    }
}

/// The crate paths of the types `text` names (`crate::a::B`), through the module's `uses`.
fn named_types(text: &str, module: &str, uses: &BTreeMap<String, String>) -> Vec<String> {
    let text: String = text
        .chars()
        .map(|c| {
            if c.is_alphanumeric() || c == '_' || c == ':' {
                c
            } else {
                ' '
            }
        })
        .collect();
    let mut out = Vec::new();
    for word in text.split_whitespace() {
        let parts: Vec<&str> = word.split("::").filter(|p| !p.is_empty()).collect();
        let Some(last) = parts.last() else { continue };
        let constant = last.len() > 1 && !last.contains(|c: char| c.is_ascii_lowercase());
        if !last.starts_with(|c: char| c.is_ascii_uppercase()) || *last == "Self" || constant {
            continue;
        }
        let path = match parts[0] {
            "crate" | "super" | "self" => absolute(module, &parts.join("::")),
            first => match uses.get(first) {
                Some(to) => [to.as_str()]
                    .into_iter()
                    .chain(parts[1..].iter().copied())
                    .collect::<Vec<_>>()
                    .join("::"),
                None => continue,
            },
        };
        if path.starts_with("crate::") && !out.contains(&path) {
            out.push(path);
        }
    }
    out
}
