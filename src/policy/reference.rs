//! `docs/policy.md`, the policy file's reference, rendered from the field docs of the `Raw*`
//! structs (which state every default) and checked against the committed file: a key added
//! to a `Raw*` struct fails this test until the reference is rendered again
//! (`UPDATE_DOCS=1 cargo test --lib policy::reference`).
//!
//! The source text is read with a small line parser (the `///` lines before a struct and
//! before each `pub field: Type,` inside `pub struct Raw… {`): no macro, no new dependency.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

/// The sections in the order a user reads a policy file: where it is served, what it fronts,
/// how tool lists are shaped, who may call, then guards and operations.
const SECTIONS: &[(&str, &str)] = &[
    ("(top level)", "RawPolicy"),
    ("[downstream]", "RawDownstream"),
    ("[[upstream]]", "RawUpstream"),
    ("[aggregate]", "RawAggregate"),
    ("[budget]", "RawBudget"),
    ("[budget.tools.\"server/tool\"]", "RawToolRule"),
    ("[discover]", "RawDiscover"),
    ("[[client]]", "RawClient"),
    ("[[client.rule]]", "RawRule"),
    ("[[client.rule]] args.NAME", "RawConstraint"),
    ("[client.upstream.NAME]", "RawCredentials"),
    ("[auth]", "RawAuth"),
    ("[auth.jwt]", "RawJwt"),
    ("[limits]", "RawLimits"),
    ("[limits.client.NAME]", "RawClientLimits"),
    ("[limits.upstream.NAME]", "RawUpstreamLimits"),
    ("[sanitize] (and [upstream.sanitize])", "RawSanitize"),
    ("[pin]", "RawPin"),
    ("[audit]", "RawAudit"),
    ("[sessions]", "RawSessions"),
    ("[state]", "RawState"),
    ("[telemetry]", "RawTelemetry"),
    ("[admin]", "RawAdmin"),
    ("[llm_api]", "RawLlmApi"),
];

/// The files the `Raw*` structs are in.
const FILES: &[&str] = &[
    "raw.rs",
    "audit.rs",
    "budget.rs",
    "client.rs",
    "discover.rs",
    "limits.rs",
    "llm_api.rs",
    "pin.rs",
    "sanitize.rs",
    "sessions.rs",
    "state.rs",
    "share.rs",
    "telemetry.rs",
];

/// One struct as written: its doc and its fields (name, type, doc).
#[derive(Debug, Default)]
struct RawStruct {
    doc: String,
    fields: Vec<(String, String, String)>,
}

/// Every `pub struct Raw…` of `text`.
fn structs(text: &str, into: &mut BTreeMap<String, RawStruct>) {
    let mut doc: Vec<&str> = Vec::new();
    let mut current: Option<(String, RawStruct)> = None;
    for line in text.lines() {
        let line = line.trim();
        if let Some(d) = line.strip_prefix("///") {
            doc.push(d.strip_prefix(' ').unwrap_or(d));
            continue;
        }
        if line.starts_with("#[") {
            continue;
        }
        let text = doc.join(" ");
        doc.clear();
        if let Some(name) = line
            .strip_prefix("pub struct ")
            .and_then(|rest| rest.strip_suffix(" {"))
            .filter(|name| name.starts_with("Raw"))
        {
            current = Some((
                name.to_owned(),
                RawStruct {
                    doc: text,
                    fields: Vec::new(),
                },
            ));
        } else if line == "}" {
            if let Some((name, s)) = current.take() {
                into.insert(name, s);
            }
        } else if let (Some((_, s)), Some(field)) = (&mut current, line.strip_prefix("pub ")) {
            if let Some((name, ty)) = field.split_once(": ") {
                let ty = ty.trim_end_matches(',');
                s.fields.push((name.to_owned(), toml_type(ty), text));
            }
        }
    }
}

/// A Rust field type as the TOML value it is written as.
fn toml_type(ty: &str) -> String {
    let ty = ty.strip_prefix("Option<").map_or(ty, |t| &t[..t.len() - 1]);
    let inner = |t: &str, prefix: &str| t.strip_prefix(prefix).map(|t| t[..t.len() - 1].to_owned());
    if let Some(item) = inner(ty, "Vec<") {
        return format!("array of {}", plural(&toml_type(&item)));
    }
    if let Some(kv) = inner(ty, "BTreeMap<String, ") {
        return format!("table of {}", plural(&toml_type(&kv)));
    }
    if let Some(item) = inner(ty, "Spanned<") {
        return toml_type(&item);
    }
    match ty.rsplit("::").next().unwrap_or(ty) {
        "bool" => "boolean".into(),
        "String" => "string".into(),
        "PathBuf" => "path".into(),
        "u32" | "u64" | "usize" => "integer".into(),
        "f64" => "number".into(),
        "Value" => "any value".into(),
        "OneOrMany" => "string or array of strings".into(),
        other => match SECTIONS.iter().find(|(_, s)| *s == other) {
            Some((section, _)) => format!("table: [`{section}`](#{})", anchor(section)),
            None => other.to_owned(),
        },
    }
}

fn plural(t: &str) -> String {
    match t {
        "string" | "path" | "integer" | "number" => format!("{t}s"),
        other => other.to_owned(),
    }
}

/// A doc line as Markdown for a user: intra-doc links become plain code; "See
/// [`RawX::key`]." is that key's doc.
fn user_doc(doc: &str, all: &BTreeMap<String, RawStruct>) -> String {
    if let Some(target) = doc
        .strip_prefix("See [`")
        .and_then(|rest| rest.strip_suffix("`]."))
    {
        if let Some((ty, key)) = target.split_once("::") {
            let found = all
                .get(ty)
                .and_then(|s| s.fields.iter().find(|f| f.0 == key));
            if let Some((_, _, doc)) = found {
                return user_doc(doc, all);
            }
        }
    }
    doc.replace("[`", "`")
        .replace("`]", "`")
        .replace('|', "\\|")
}

/// The anchor GitHub gives the heading of `section`.
fn anchor(section: &str) -> String {
    (section.chars())
        .filter(|c| c.is_ascii_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
        .map(|c| {
            if c == ' ' {
                '-'
            } else {
                c.to_ascii_lowercase()
            }
        })
        .collect()
}

/// The whole reference.
fn render(all: &BTreeMap<String, RawStruct>) -> String {
    let mut out = String::from(
        "# Policy file reference\n\n\
         <!-- Generated from the field docs of the `Raw*` structs in `src/policy/`; do not edit.\n     \
         After changing a key: `UPDATE_DOCS=1 cargo test --lib policy::reference`. -->\n\n\
         A policy is a TOML file with `version = 1` at the top. Unknown keys are errors (with\n\
         the key you probably meant); `mcp-budget check FILE` reports every problem with its\n\
         line. Sections, in the order a policy is usually read:\n\n",
    );
    for (section, _) in SECTIONS {
        let anchor: String = (section.chars())
            .filter(|c| c.is_ascii_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
            .map(|c| {
                if c == ' ' {
                    '-'
                } else {
                    c.to_ascii_lowercase()
                }
            })
            .collect();
        let _ = writeln!(out, "- [`{section}`](#{anchor})");
    }
    for (section, name) in SECTIONS {
        let Some(s) = all.get(*name) else {
            panic!("{name} is not in {FILES:?}");
        };
        let _ = write!(out, "\n## `{section}`\n\n{}\n\n", user_doc(&s.doc, all));
        out.push_str("| key | type | what, and the default |\n|---|---|---|\n");
        for (key, ty, doc) in &s.fields {
            let _ = writeln!(out, "| `{key}` | {ty} | {} |", user_doc(doc, all));
        }
    }
    out
}

#[test]
fn docs_policy_md_is_rendered_from_the_raw_structs() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut all = BTreeMap::new();
    for file in FILES {
        let text = std::fs::read_to_string(root.join("src/policy").join(file)).unwrap();
        structs(&text, &mut all);
    }
    for name in all.keys() {
        assert!(
            SECTIONS.iter().any(|(_, s)| s == name),
            "{name} has no place in docs/policy.md: add it to SECTIONS"
        );
    }
    let rendered = render(&all);
    let path = root.join("docs/policy.md");
    if std::env::var_os("UPDATE_DOCS").is_some() {
        std::fs::write(&path, &rendered).unwrap();
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == rendered,
        "docs/policy.md is stale: run `UPDATE_DOCS=1 cargo test --lib policy::reference`"
    );
}

#[test]
fn types_read_as_toml() {
    assert_eq!(toml_type("Option<u64>"), "integer");
    assert_eq!(toml_type("Vec<String>"), "array of strings");
    assert_eq!(toml_type("BTreeMap<String, String>"), "table of strings");
    assert_eq!(toml_type("Option<Vec<toml::Value>>"), "array of any value");
    assert_eq!(
        toml_type("Vec<Spanned<RawUpstream>>"),
        "array of table: [`[[upstream]]`](#upstream)"
    );
}
