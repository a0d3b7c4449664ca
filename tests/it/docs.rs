//! The generated reference pages in `docs/` say what the code says: each is rendered from the
//! source file it documents and compared with the committed copy.
//!
//! `docs/errors.md` comes from `src/error/kind.rs` (its constants, their doc lines and `ALL`),
//! `docs/metrics.md` from `src/telemetry/names.rs` (the metric, label and value constants and
//! their doc lines). The source is read as text, not through the crate, so that a doc line is
//! the page's text word for word. After changing either file, rewrite the pages with
//! `UPDATE_DOCS=1 cargo test --test it docs_` and commit them.

use std::fmt::Write as _;
use std::path::Path;

/// A `pub const NAME: &str = "value";` with the `///` lines above it, joined into one line.
#[derive(Debug)]
struct Constant {
    name: String,
    value: String,
    doc: String,
}

/// Every string constant of `source`, in file order.
fn constants(source: &str) -> Vec<Constant> {
    let mut found = Vec::new();
    let mut doc: Vec<&str> = Vec::new();
    let mut lines = source.lines();
    while let Some(line) = lines.next() {
        let line = line.trim();
        if let Some(text) = line.strip_prefix("///") {
            doc.push(text.trim());
            continue;
        }
        if line.starts_with("#[") {
            continue;
        }
        if let Some(rest) = line.strip_prefix("pub const ") {
            if let Some((name, after)) = rest.split_once(": &str =") {
                // rustfmt puts a long value on the next line.
                let value_line = if after.trim().is_empty() {
                    lines.next().unwrap_or_default().to_owned()
                } else {
                    after.to_owned()
                };
                let value = value_line.trim().trim_end_matches(';').trim_matches('"');
                found.push(Constant {
                    name: name.trim().to_owned(),
                    value: value.to_owned(),
                    doc: doc.join(" "),
                });
            }
        }
        doc.clear();
    }
    found
}

/// The `//!` paragraphs of `source` after its summary line, without code blocks and without
/// paragraphs about the module's own code ("This module …"): the part a reader of the page
/// needs.
fn module_doc(source: &str) -> Vec<String> {
    let mut paragraphs = vec![String::new()];
    let mut in_code = false;
    for line in source.lines().map_while(|l| l.strip_prefix("//!")) {
        let line = line.trim();
        if line.starts_with("```") {
            in_code = !in_code;
            continue;
        }
        if in_code {
            continue;
        }
        if line.is_empty() {
            paragraphs.push(String::new());
        } else {
            let last = paragraphs.last_mut().expect("starts with one");
            if !last.is_empty() {
                last.push(' ');
            }
            last.push_str(line);
        }
    }
    paragraphs
        .into_iter()
        .skip(1)
        .filter(|p| !p.is_empty() && !p.starts_with("This module"))
        .collect()
}

/// Rustdoc links made plain: `` [`NAME`] `` of a constant of the same file becomes its value,
/// any other `` [`path`] `` stays as code.
fn plain(text: &str, constants: &[Constant]) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find("[`") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find("`]") else {
            out.push_str(&rest[start..]);
            return out;
        };
        let target = &after[..end];
        match constants.iter().find(|c| c.name == target) {
            Some(c) => write!(out, "`{}`", c.value).unwrap(),
            None => write!(out, "`{target}`").unwrap(),
        }
        rest = &after[end + 2..];
    }
    out.push_str(rest);
    out
}

/// Text fit for one table cell.
fn cell(text: &str) -> String {
    text.replace('|', "\\|")
}

/// The header every generated page starts with.
fn header(title: &str, source: &str, test: &str) -> String {
    format!(
        "# {title}\n\n<!-- Generated from {source} by tests/it/docs.rs; do not edit. Rewrite it with \
         `UPDATE_DOCS=1 cargo test --test it {test}`. -->\n\n"
    )
}

/// The JSON-RPC code a kind's doc line names first (`` `-32000` ``).
fn code_of(doc: &str) -> &str {
    doc.find("`-32")
        .and_then(|start| {
            let code = &doc[start + 1..];
            code.find('`').map(|end| &code[..end])
        })
        .unwrap_or("—")
}

/// The HTTP status a kind's doc line names (`HTTP 404 for a 2026-07-28 request`), else 200
/// (a JSON-RPC error in a normal answer), or "—" for what is sent to an upstream.
fn http_of(doc: &str) -> String {
    if let Some(start) = doc.find("HTTP ") {
        let status = &doc[start + 5..];
        if status.starts_with(|c: char| c.is_ascii_digit()) {
            let end = status.find([')', ';']).unwrap_or(status.len());
            let status = status[..end].trim();
            return if status.contains("for a 2026-07-28 request") {
                format!("200 ({status})")
            } else {
                status.to_owned()
            };
        }
    }
    let lower = doc.to_lowercase();
    if [
        "sent to an upstream",
        "sent to the upstream",
        "the upstream gets this",
    ]
    .iter()
    .any(|s| lower.contains(s))
    {
        "—".to_owned()
    } else {
        "200".to_owned()
    }
}

/// `docs/errors.md` from the text of `src/error/kind.rs`.
fn render_errors(source: &str) -> String {
    let constants = constants(source);
    let all = source
        .split_once("pub const ALL: &[&str] = &[")
        .and_then(|(_, rest)| rest.split_once("];"))
        .map(|(list, _)| list)
        .expect("kind.rs has `pub const ALL`");
    let mut page = header("Errors", "src/error/kind.rs", "docs_errors_md_is_fresh");
    page.push_str(
        "Errors carry a stable `error.data.type` (constants in `mcp_budget::error::kind`; never \
         renamed, only added to), listed here in the order of `kind::ALL`.\n\n",
    );
    for paragraph in module_doc(source) {
        writeln!(page, "{}\n", plain(&paragraph, &constants)).unwrap();
    }
    page.push_str("| `data.type` | JSON-RPC code | HTTP | when |\n|---|---|---|---|\n");
    for name in all.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        let kind = constants
            .iter()
            .find(|c| c.name == name)
            .unwrap_or_else(|| panic!("{name} in ALL is not a constant of kind.rs"));
        writeln!(
            page,
            "| `{}` | {} | {} | {} |",
            kind.value,
            code_of(&kind.doc),
            cell(&http_of(&kind.doc)),
            cell(&plain(&kind.doc, &constants)),
        )
        .unwrap();
    }
    page.push_str(
        "\nHTTP 200 is a JSON-RPC error in a normal answer (2025-era sessions; stdio has no \
         status); a 2026-07-28 request gets the status of its code instead: 404 for `-32601`, \
         400 for `-32700`, `-32600`, `-32602`, `-32020`, `-32021` and `-32022`. \"—\" marks \
         errors the gateway sends to an upstream or keeps inside.\n",
    );
    page
}

/// The type of each metric, from the `METRICS` table of `names.rs`: (constant, type).
fn metric_types(source: &str) -> Vec<(String, String)> {
    let table = source
        .split_once("pub const METRICS")
        .and_then(|(_, rest)| rest.split_once("];"))
        .map(|(table, _)| table)
        .expect("names.rs has `pub const METRICS`");
    let pieces: Vec<&str> = table.split("MetricType::").collect();
    pieces
        .windows(2)
        .map(|pair| {
            let name = pair[0]
                .trim()
                .trim_end_matches(',')
                .rsplit('(')
                .next()
                .unwrap_or("");
            let kind: String = pair[1]
                .chars()
                .take_while(char::is_ascii_alphabetic)
                .collect();
            (name.trim().to_owned(), kind.to_lowercase())
        })
        .collect()
}

/// `docs/metrics.md` from the text of `src/telemetry/names.rs`.
fn render_metrics(source: &str) -> String {
    let constants = constants(source);
    let types = metric_types(source);
    let mut page = header(
        "Metrics",
        "src/telemetry/names.rs",
        "docs_metrics_md_is_fresh",
    );
    page.push_str(
        "On `[admin] http`, `GET /metrics` answers in the Prometheus text format \
         ([observability.md](observability.md) has the admin listener). The names are \
         constants in `mcp_budget::telemetry::names`; they never change.\n\n",
    );
    for paragraph in module_doc(source) {
        writeln!(page, "{}\n", plain(&paragraph, &constants)).unwrap();
    }
    page.push_str("| metric | type | what |\n| --- | --- | --- |\n");
    for metric in constants
        .iter()
        .filter(|c| c.value.starts_with("mcp_budget_"))
    {
        let kind = types
            .iter()
            .find(|(name, _)| *name == metric.name)
            .map_or_else(|| panic!("{} is not in METRICS", metric.name), |(_, t)| t);
        writeln!(
            page,
            "| `{}` | {kind} | {} |",
            metric.value,
            cell(&plain(&metric.doc, &constants))
        )
        .unwrap();
    }
    page.push_str("\n## Labels and their values\n\n| label or value | what |\n| --- | --- |\n");
    for label in constants
        .iter()
        .filter(|c| !c.value.starts_with("mcp_budget_"))
    {
        writeln!(
            page,
            "| `{}` | {} |",
            label.value,
            cell(&plain(&label.doc, &constants))
        )
        .unwrap();
    }
    page
}

/// Compares `rendered` with the committed `page`, or writes it when `UPDATE_DOCS=1`.
fn assert_fresh(page: &str, rendered: &str, test: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(page);
    if std::env::var_os("UPDATE_DOCS").is_some_and(|v| v == "1") {
        std::fs::write(&path, rendered).unwrap();
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    if committed != rendered {
        let line = committed
            .lines()
            .zip(rendered.lines())
            .position(|(a, b)| a != b)
            .map_or_else(|| "its end".to_owned(), |n| format!("line {}", n + 1));
        panic!(
            "{page} is stale (first difference at {line}): run `UPDATE_DOCS=1 cargo test \
             --test it {test}` and commit it"
        );
    }
}

fn source(path: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(path)).unwrap()
}

#[test]
fn docs_errors_md_is_fresh() {
    let rendered = render_errors(&source("src/error/kind.rs"));
    assert_fresh("docs/errors.md", &rendered, "docs_errors_md_is_fresh");
}

#[test]
fn docs_metrics_md_is_fresh() {
    let rendered = render_metrics(&source("src/telemetry/names.rs"));
    assert_fresh("docs/metrics.md", &rendered, "docs_metrics_md_is_fresh");
}

#[test]
fn every_metric_of_metrics_is_on_the_page() {
    let names = source("src/telemetry/names.rs");
    let page = render_metrics(&names);
    let types = metric_types(&names);
    assert_eq!(types.len(), mcp_budget::telemetry::names::METRICS.len());
    for (name, _, _) in mcp_budget::telemetry::names::METRICS {
        assert!(page.contains(&format!("| `{name}` |")), "{name}");
    }
}

#[test]
fn the_parsers_read_what_rustfmt_writes() {
    let source = "//! Summary.\n//!\n//! Kept, with [`A`] and [`x::Y`].\n//!\n//! This module \
                  is about code.\n//!\n//! ```\n//! let hidden = 1;\n//! ```\n\n/// One \
                  (`-32600`; HTTP 404 for a 2026-07-28 request).\n/// Two.\npub const A: &str = \
                  \"a.b\";\n/// Sent to an upstream (`-32601`).\npub const LONG: &str =\n    \
                  \"long.value\";\n";
    let found = constants(source);
    assert_eq!(found.len(), 2);
    assert_eq!(found[1].value, "long.value");
    assert_eq!(
        module_doc(source),
        ["Kept, with [`A`] and [`x::Y`]."].map(String::from)
    );
    assert_eq!(
        plain("with [`A`] and [`x::Y`]", &found),
        "with `a.b` and `x::Y`"
    );
    assert_eq!(code_of(&found[0].doc), "-32600");
    assert_eq!(http_of(&found[0].doc), "200 (404 for a 2026-07-28 request)");
    assert_eq!(http_of(&found[1].doc), "—");
    assert_eq!(http_of("Plain (`-32000`)."), "200");
}

/// The summary the quick start prints, as the gateway prints it now on `policies/default.toml`:
/// run over stdio with stdin at its end (it stops after the summary), the line that says so
/// dropped, the listening port as the policy's, and log lines left out.
fn quickstart_summary() -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let stderr = crate::harness::cli(["serve", "--policy", "policies/default.toml", "--stdio"])
        .current_dir(root)
        .args(["--http", "127.0.0.1:0"])
        .env("MCP_BUDGET_LOG", "off")
        .ok()
        .stderr;
    let mut summary = String::new();
    for line in stderr.lines().filter(|l| *l != "  serving MCP on stdio") {
        let line = match line.split_once("listening on http://127.0.0.1:") {
            Some((head, _)) => format!("{head}listening on http://127.0.0.1:8931/mcp"),
            None => line.to_owned(),
        };
        summary.push_str(&line);
        summary.push('\n');
    }
    summary
}

/// `text` with the startup time of its first line (`in 1193 ms`) left out: it varies per run.
fn without_time(text: &str) -> String {
    let (head, rest) = text.split_once(" in ").unwrap_or((text, ""));
    let rest = rest.split_once(" ms").map_or(rest, |(_, tail)| tail);
    format!("{head} in _ ms{rest}")
}

#[test]
fn docs_readme_quickstart_summary_is_fresh() {
    const MARK: &str = "scripts/update-docs.sh` rewrites it. -->\n```\n";
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md");
    let readme = std::fs::read_to_string(&path).unwrap();
    let start = readme.find(MARK).expect("the README marks its sample") + MARK.len();
    let end = start
        + readme[start..]
            .find("```\n")
            .expect("the sample's block ends");
    let summary = quickstart_summary();
    if std::env::var_os("UPDATE_DOCS").is_some_and(|v| v == "1") {
        let updated = format!("{}{summary}{}", &readme[..start], &readme[end..]);
        std::fs::write(&path, updated).unwrap();
        return;
    }
    assert_eq!(
        without_time(&readme[start..end]),
        without_time(&summary),
        "the README's quick-start summary is stale: run scripts/update-docs.sh and commit it"
    );
}

/// The steps of `layered` in `src/stack.rs`, outermost first: per `.layer(…)` or
/// `.option_layer(…)`, the layer its argument names (`TraceLayer::new` is `trace`, the
/// budget's `budget.cloned()` is `budget`).
fn stack_steps(stack: &str) -> Vec<String> {
    let body = stack
        .split_once("pub(crate) fn layered")
        .expect("stack.rs has fn layered")
        .1;
    let body = body
        .split_once(".service(inner)")
        .expect("layered ends with .service(inner)")
        .0;
    // Comments say why a step sits where it does; they name no step.
    let body: String = body
        .lines()
        .map(|l| l.split_once("//").map_or(l, |(code, _)| code))
        .collect::<Vec<_>>()
        .join("\n");
    let mut steps = Vec::new();
    for (at, _) in body.match_indices("layer(") {
        if !(body[..at].ends_with('.') || body[..at].ends_with(".option_")) {
            continue;
        }
        // The argument, up to its closing parenthesis.
        let rest = &body[at + "layer(".len()..];
        let mut depth = 0usize;
        let end = rest
            .char_indices()
            .find(|&(_, c)| {
                match c {
                    '(' => depth += 1,
                    ')' if depth == 0 => return true,
                    ')' => depth -= 1,
                    _ => {}
                }
                false
            })
            .map_or(rest.len(), |(i, _)| i);
        let words: Vec<&str> = rest[..end]
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .filter(|w| !w.is_empty())
            .collect();
        // The first `XLayer` type the argument names, else its first identifier.
        let name = words
            .iter()
            .find(|w| w.len() > 5 && w.ends_with("Layer") && w.starts_with(char::is_uppercase))
            .map_or_else(
                || words.first().copied().unwrap_or_default().to_owned(),
                |t| snake(&t[..t.len() - "Layer".len()]),
            );
        steps.push(name);
    }
    steps
}

fn snake(camel: &str) -> String {
    let mut out = String::new();
    for (i, c) in camel.chars().enumerate() {
        if c.is_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(c.to_ascii_lowercase());
    }
    out
}

/// The layers a Markdown table lists, in its order: the first backticked word of each row of
/// the first table after `heading` (rows without one, such as the gateway's, are not layers).
fn table_layers(text: &str, heading: &str) -> Vec<String> {
    let after = text
        .split_once(heading)
        .unwrap_or_else(|| panic!("no heading {heading:?}"))
        .1;
    after
        .lines()
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .filter_map(|row| row.strip_prefix("| `"))
        .filter_map(|cell| cell.split_once('`').map(|(name, _)| name.to_owned()))
        .collect()
}

/// Each step once, in first-seen order (the inner `trace` is the same module).
fn distinct(steps: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for s in steps {
        if !out.contains(s) {
            out.push(s.clone());
        }
    }
    out
}

#[test]
fn docs_layers_are_listed_where_stack_rs_orders_them() {
    let stack = source("src/stack.rs");
    let steps = stack_steps(&stack);
    let layers = distinct(&steps);
    // Every layer module is a step (a module left out of the stack is not a layer).
    for module in std::fs::read_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/layer"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "rs") && !p.ends_with("mod.rs"))
    {
        let name = module.file_stem().unwrap().to_string_lossy().into_owned();
        assert!(
            layers.contains(&name),
            "src/layer/{name}.rs is not in stack.rs's layered: {layers:?}"
        );
    }
    let mut wrong = String::new();
    let mut expect = |place: &str, listed: Vec<String>, wanted: &[String]| {
        if listed != wanted {
            let _ = writeln!(
                wrong,
                "{place} lists {listed:?}\n    stack.rs has {wanted:?}"
            );
        }
    };
    // The tables and the module doc list every step (the inner trace too), outermost first.
    expect(
        "README.md",
        table_layers(&source("README.md"), "## Layers (outermost first"),
        &steps,
    );
    expect(
        "ARCHITECTURE.md",
        table_layers(&source("ARCHITECTURE.md"), "## The layers"),
        &steps,
    );
    let bullets: Vec<String> = stack
        .lines()
        .take_while(|l| l.starts_with("//!"))
        .filter_map(|l| l.strip_prefix("//! - `"))
        .filter_map(|l| l.split_once('`').map(|(name, _)| name.to_owned()))
        .collect();
    expect("src/stack.rs's doc", bullets, &steps);
    // The crate doc names each layer module once, in the same order.
    let lib = source("src/lib.rs");
    let modules = lib
        .split_once("the tower layers of mcp-budget's own stack (")
        .expect("lib.rs lists the layers")
        .1;
    let modules: Vec<String> = modules
        .split_once(')')
        .unwrap()
        .0
        .split(',')
        .map(|m| m.trim().trim_start_matches("//!").trim().to_owned())
        .collect();
    expect("src/lib.rs's doc", modules, &layers);
    assert!(
        wrong.is_empty(),
        "a layer list has drifted from src/stack.rs:\n{wrong}"
    );
}

#[test]
fn the_layer_list_reader_reads_layered() {
    let stack = "pub(crate) fn layered() {\n    ServiceBuilder::new()\n        .layer(RecoverLayer)\n        // a comment naming .layer(NotOne)\n        .option_layer(budget.cloned())\n        .option_layer(x.then(|| TraceLayer::inner_calls(c)))\n        .layer(\n            RateLimitLayer::new(a),\n        )\n        .service(inner);\n}\n";
    assert_eq!(
        stack_steps(stack),
        ["recover", "budget", "trace", "rate_limit"]
    );
}
