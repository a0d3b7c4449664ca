//! `check`: validate policy files (and mcpServers JSON files) without starting anything.
//!
//! Every problem of a file is reported in one run, each with its line and field path
//! ([`crate::policy::ConfigError`]); then the warnings of each valid policy
//! ([`Policy::warnings`]), and with `--tools` the tool rules that match none of the saved
//! tools ([`Policy::unmatched_rules`]) and the namespaced names of the saved tools that collide
//! under the policy ([`crate::catalog::Collision`]: resolved, but hosts see other names).
//! Warnings are errors with `--strict`, for CI. With `--live` (instead of `--tools`), each
//! valid policy's upstreams are started, listed and stopped ([`super::live`]), and the rules
//! and names are checked against what they list, and the tools of strict upstreams
//! (`[sanitize] arguments = "strict"`) whose input schema cannot be checked are listed (their
//! calls are refused); an upstream that does not start is an error.
//! A `[sessions]` seal key is read as `serve` reads it: one that does not decode (or a key file
//! that cannot be read) is an error, an unset variable a warning (it may be set where the
//! gateway runs). A `[state] backend = "redis"` whose `url_env` is unset (or holds no Redis
//! URL) is an error: the replicas would not share their limits.

use std::path::PathBuf;

use crate::catalog::Item;
use crate::policy::sessions::SealKeyProblem;
use crate::policy::{Policy, Problem};

/// Arguments of `check`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Policy files.
    pub files: Vec<PathBuf>,
    /// mcpServers JSON files (Claude Desktop / Claude Code) to validate as upstreams (of the
    /// last policy file, when one is given).
    #[arg(long = "mcp-json")]
    pub mcp_json: Vec<PathBuf>,
    /// Saved tools/list results (a file's stem is the server id), or directories of them:
    /// tool rules that match none of these tools, and tool names that collide, are reported.
    #[arg(long = "tools", num_args = 1..)]
    pub tools: Vec<PathBuf>,
    /// Treat warnings as errors.
    #[arg(long)]
    pub strict: bool,
    /// Start each policy's upstreams (and stop them): tool rules and names are checked
    /// against what they list, as with --tools.
    #[arg(long, conflicts_with = "tools")]
    pub live: bool,
    /// With --live or --lock: seconds the upstreams get to be ready.
    #[arg(long, default_value_t = 30)]
    pub ready_timeout_secs: u64,
    /// A policy file (as the positional files; the one `--lock` applies to, with it).
    #[arg(long)]
    pub policy: Option<PathBuf>,
    /// A lockfile (`mcp-budget pin`): connect to the policy's upstreams and fail, printing the
    /// differences, when what they serve differs from it (for CI).
    #[arg(long, requires = "policy")]
    pub lock: Option<PathBuf>,
}

/// What `check` found.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Outcome {
    /// Files that did not validate.
    pub errors: usize,
    /// Warnings, over all valid files.
    pub warnings: usize,
}

impl Outcome {
    /// Whether `check` succeeds: no errors, and no warnings under `--strict`.
    #[must_use]
    pub fn ok(self, strict: bool) -> bool {
        self.errors == 0 && (!strict || self.warnings == 0)
    }
}

/// Runs `check`: results on `out`, problems and warnings on `err`.
///
/// # Errors
/// Only when writing to `out` or `err` fails; problems found are in the [`Outcome`].
pub fn run(
    args: &Args,
    out: &mut dyn std::io::Write,
    err: &mut dyn std::io::Write,
) -> std::io::Result<Outcome> {
    let mut outcome = Outcome::default();
    let loaded = load(args, &mut outcome, out, err)?;
    let tool_ids = match crate::catalog::load_saved(&args.tools) {
        Ok(tools) => tools
            .iter()
            .map(|t| format!("{}/{}", t.server, t.name))
            .collect::<Vec<_>>(),
        Err(e) => {
            writeln!(err, "--tools: {e}")?;
            outcome.errors += 1;
            Vec::new()
        }
    };
    for (origin, policy) in &loaded {
        let warnings = warnings(args, policy, origin, &tool_ids, &mut outcome, err)?;
        for w in &warnings {
            writeln!(err, "warning: {origin}: {w}")?;
        }
        outcome.warnings += warnings.len();
    }
    if loaded.is_empty() && !args.tools.is_empty() {
        // No policy given: the names the saved tools get on their own.
        let found = collisions(&Policy::default(), &args.tools);
        for w in &found {
            writeln!(err, "warning: {w}")?;
        }
        outcome.warnings += found.len();
    }
    if let (Some(lock), Some((_, policy))) = (&args.lock, loaded.last()) {
        outcome.errors += check_lock(lock, policy, args.ready_timeout_secs, out, err)?;
    }
    if outcome.warnings > 0 {
        let tail = if args.strict {
            "errors under --strict"
        } else {
            "use --strict to fail on them"
        };
        writeln!(err, "{} warning(s): {tail}", outcome.warnings)?;
    }
    Ok(outcome)
}

/// The policy files that validate, the `--mcp-json` files added to the last of them; each
/// file that does not is reported on `err` and counted.
fn load(
    args: &Args,
    outcome: &mut Outcome,
    out: &mut dyn std::io::Write,
    err: &mut dyn std::io::Write,
) -> std::io::Result<Vec<(String, Policy)>> {
    let mut loaded: Vec<(String, Policy)> = Vec::new();
    for file in args.files.iter().chain(&args.policy) {
        match Policy::load(file) {
            Ok(p) => {
                writeln!(
                    out,
                    "{}: ok ({} upstreams)",
                    file.display(),
                    p.upstreams.len()
                )?;
                loaded.push((file.display().to_string(), p));
            }
            Err(e) => {
                // With its cause: "cannot read FILE: not a regular file".
                writeln!(err, "{:#}", anyhow::Error::new(e))?;
                outcome.errors += 1;
            }
        }
    }
    if loaded.is_empty() && !args.mcp_json.is_empty() {
        loaded.push(("(mcp-json)".into(), Policy::default()));
    }
    for file in &args.mcp_json {
        let Some((_, policy)) = loaded.last_mut() else {
            break;
        };
        match policy.add_mcp_json(file) {
            Ok(()) => writeln!(out, "{}: ok", file.display())?,
            Err(e) => {
                // With its cause: "cannot read FILE: not a regular file".
                writeln!(err, "{:#}", anyhow::Error::new(e))?;
                outcome.errors += 1;
            }
        }
    }
    Ok(loaded)
}

/// The warnings of one valid policy: its own, the seal key's, and with `--tools` or `--live`
/// the rules and names checked against the tools; errors (a seal key that does not decode,
/// upstreams that do not start) are reported on `err` and counted.
fn warnings(
    args: &Args,
    policy: &Policy,
    origin: &str,
    tool_ids: &[String],
    outcome: &mut Outcome,
    err: &mut dyn std::io::Write,
) -> std::io::Result<Vec<Problem>> {
    let mut warnings = policy.warnings();
    // The seal key as `serve` will read it: a variable unset here may be set where the
    // gateway runs, a key that does not decode is wrong everywhere.
    match policy.sealer() {
        Ok(_) => {}
        Err(SealKeyProblem::Unset(p)) => warnings.push(p),
        Err(e) => {
            writeln!(err, "{origin}: {}", e.problem())?;
            outcome.errors += 1;
        }
    }
    // The `[state]` store's URL as `serve` will read it: with `backend = "redis"` and no URL
    // the replicas would not share their limits, so an unset variable is an error here.
    match policy.state_url() {
        Err(p) => {
            writeln!(err, "{origin}: {p}")?;
            outcome.errors += 1;
        }
        Ok(Some(url)) if args.live => match probe_store(policy, &url) {
            Ok(what) => writeln!(err, "{origin}: state: {what} answers; the scripts load")?,
            Err(e) => {
                writeln!(err, "{origin}: state: {e}")?;
                outcome.errors += 1;
            }
        },
        Ok(_) => {}
    }
    if !args.tools.is_empty() {
        warnings.extend(policy.unmatched_rules(tool_ids));
        warnings.extend(collisions(policy, &args.tools));
    }
    if args.live {
        match live_problems(policy, args.ready_timeout_secs) {
            Ok(found) => warnings.extend(found),
            Err(e) => {
                writeln!(err, "{origin}: {e:#}")?;
                outcome.errors += 1;
            }
        }
    }
    Ok(warnings)
}

/// `check --live` of the `[state]` store at `url` ([`crate::state::probe`]).
fn probe_store(policy: &Policy, url: &str) -> Result<String, String> {
    let crate::policy::state::Backend::Redis(settings) = &policy.state.backend else {
        return Err("no store configured".to_owned());
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    runtime.block_on(crate::state::probe(settings, url))
}

/// The tool rules that match none of the tools `policy`'s upstreams list, and the names that
/// collide among them; `Err` names the upstreams that did not start.
fn live_problems(policy: &Policy, timeout_secs: u64) -> anyhow::Result<Vec<Problem>> {
    let options = super::live::LiveArgs {
        ready_timeout_secs: timeout_secs,
        allow_failed: false,
    };
    let live = super::live::snapshot(policy, &options)?;
    let mut found = crate::server::unknown_rules(policy, &live.catalog);
    found.extend(live.catalog.collisions().iter().map(|c| Problem {
        path: "upstreams".into(),
        line: None,
        message: c.to_string(),
    }));
    found.extend(unchecked_tools(policy, live.catalog.tools()));
    Ok(found)
}

/// The tools of strict upstreams (`[sanitize] arguments = "strict"`) whose input schema cannot
/// be checked: the gateway refuses their calls (`mcp_budget.arguments.uncheckable`).
fn unchecked_tools(policy: &Policy, tools: &[crate::catalog::CatalogTool]) -> Vec<Problem> {
    use crate::sanitize::arguments::{Arguments, Compiled};
    tools
        .iter()
        .filter(|t| policy.sanitize.rules_for(&t.server).arguments == Arguments::Strict)
        .filter_map(|t| {
            let why = match t.input_schema() {
                Some(schema) => Compiled::new(schema).err()?,
                None => "the tool lists no input schema".to_owned(),
            };
            Some(Problem {
                path: "sanitize.arguments".into(),
                line: None,
                message: format!(
                    "tool {:?} is unchecked: its input schema cannot be checked, so its calls are refused under \"strict\" (mcp_budget.arguments.uncheckable): {why}",
                    t.id()
                ),
            })
        })
        .collect()
}

/// Compares what `policy`'s upstreams serve with `lock`: the differences on `err`, and 1
/// (one failed check) when there are any or the comparison cannot be made.
fn check_lock(
    lock: &std::path::Path,
    policy: &Policy,
    ready_timeout_secs: u64,
    out: &mut dyn std::io::Write,
    err: &mut dyn std::io::Write,
) -> std::io::Result<usize> {
    let pinned = match crate::files::read_text(lock)
        .map_err(|e| e.to_string())
        .and_then(|text| crate::pin::Lock::parse(&text))
    {
        Ok(pinned) => pinned,
        Err(e) => {
            writeln!(err, "{}: {e}", lock.display())?;
            return Ok(1);
        }
    };
    // `live_lock` resolves `${env:…}` itself, once.
    let live = super::pin::live_lock(policy, std::time::Duration::from_secs(ready_timeout_secs))
        .map_err(|e| format!("{e:#}"));
    let live = match live {
        Ok(live) => live,
        Err(e) => {
            writeln!(err, "{}: {e}", lock.display())?;
            return Ok(1);
        }
    };
    // A lock from before prompts and templates were pinned: said, not failed (serve trusts
    // them on first use until the lock is written again).
    for kind in Item::ALL.into_iter().filter(|k| !pinned.pins(*k)) {
        let live = live.entries().filter(|e| e.kind == kind).count();
        if live > 0 {
            writeln!(
                err,
                "{}: warning: the lock pins no {} ({live} served, not compared); run \
                 `mcp-budget pin` to pin them",
                lock.display(),
                kind.plural()
            )?;
        }
    }
    let differences = pinned.diff(&live);
    if differences.is_empty() {
        let counts: Vec<String> = Item::ALL
            .into_iter()
            .filter(|k| pinned.pins(*k))
            .map(|k| {
                let n = pinned.entries().filter(|e| e.kind == k).count();
                format!("{n} {}", k.plural())
            })
            .collect();
        writeln!(out, "{}: ok ({} pinned)", lock.display(), counts.join(", "))?;
        return Ok(0);
    }
    for d in &differences {
        writeln!(err, "{}: {d}", lock.display())?;
    }
    writeln!(
        err,
        "{}: {} difference(s); review them and run `mcp-budget pin` to update the lock",
        lock.display(),
        differences.len()
    )?;
    Ok(1)
}

/// The name collisions among the saved `tools` under `policy` (its upstreams' names and order,
/// its separator), one each (nothing when they cannot be read: reported above).
fn collisions(policy: &Policy, tools: &[PathBuf]) -> Vec<Problem> {
    let names: Vec<String> = policy.upstreams.iter().map(|u| u.name.clone()).collect();
    let Ok(catalog) = crate::catalog::Catalog::from_saved(tools, &names, &policy.separator) else {
        return Vec::new();
    };
    catalog
        .collisions()
        .iter()
        .map(|c| Problem {
            path: "--tools".into(),
            line: None,
            message: c.to_string(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(policy: &str) -> (Outcome, String) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.toml");
        let key = dir.path().join("seal");
        std::fs::write(&key, "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=\n").unwrap();
        let bad = dir.path().join("bad");
        std::fs::write(&bad, "not a key\n").unwrap();
        let text = policy
            .replace("KEY_FILE", &key.display().to_string())
            .replace("BAD_FILE", &bad.display().to_string());
        std::fs::write(&path, format!("version = 1\n{text}")).unwrap();
        let args = Args {
            files: vec![path],
            mcp_json: Vec::new(),
            tools: Vec::new(),
            strict: false,
            live: false,
            ready_timeout_secs: 30,
            policy: None,
            lock: None,
        };
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let outcome = run(&args, &mut out, &mut err).unwrap();
        (outcome, String::from_utf8(err).unwrap())
    }

    #[test]
    fn the_seal_key_is_read_as_serve_reads_it() {
        let (ok, err) = check("[sessions]\nseal_key_file = \"KEY_FILE\"\n");
        assert_eq!(ok, Outcome::default(), "{err}");
        let (bad, err) = check("[sessions]\nseal_key_file = \"BAD_FILE\"\n");
        assert_eq!(bad.errors, 1, "{err}");
        assert!(
            err.contains("line 3: sessions.seal_key_file: seal key 1: not base64"),
            "{err}"
        );
        let (unset, err) = check("[sessions]\nseal_key_env = \"MCPB_TEST_NO_SUCH_VARIABLE\"\n");
        assert_eq!((unset.errors, unset.warnings), (0, 1), "{err}");
        assert!(
            err.contains("MCPB_TEST_NO_SUCH_VARIABLE is not set"),
            "{err}"
        );
    }

    #[test]
    fn an_unset_store_url_is_an_error() {
        let (unset, err) =
            check("[state]\nbackend = \"redis\"\nurl_env = \"MCPB_TEST_NO_SUCH_REDIS_URL\"\n");
        assert_eq!((unset.errors, unset.warnings), (1, 0), "{err}");
        assert!(
            err.contains(
                "line 4: state.url_env: environment variable MCPB_TEST_NO_SUCH_REDIS_URL is not set"
            ),
            "{err}"
        );
        let (memory, err) = check("[state]\nbackend = \"memory\"\n");
        assert_eq!(memory, Outcome::default(), "{err}");
    }
}
