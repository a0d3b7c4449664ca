//! Raw policy → [`Policy`]: each section validates itself ([`Section`]) at its path; what is
//! here is the order they go in and the rules that join sections.

use std::collections::{BTreeMap, HashSet};

use super::UpstreamSpec;
use super::client::ClientSpec;
use super::limits::Names;
use super::problems::{At, Problems, Section};
use super::raw::{RawAggregate, RawPolicy, RawUpstream};
use super::sanitize::{RawSanitize, SanitizePolicy};
use super::{BudgetPolicy, DiscoverPolicy, Downstream, Policy, Problem, ResolveNames};
use crate::sanitize::Rules;
use serde_spanned::Spanned;

/// Validates every section, then the rules between them; every problem is reported, each
/// with its path and line in `text`.
pub(super) fn validate(raw: RawPolicy, text: &str) -> Result<Policy, Vec<Problem>> {
    let mut problems = Problems::new();
    let mut root = problems.root();
    match raw.version {
        Some(1) => {}
        Some(v) => root.push_at(
            "version",
            format!("unsupported policy version {v}; this gateway reads version 1"),
        ),
        None => root.push_at(
            "version",
            "missing; put `version = 1` at the top of the file",
        ),
    }
    let (separator, start_defaults, resolve_names) =
        raw.aggregate.validate((), root.at("aggregate"));
    let downstream = raw.downstream.validate((), root.at("downstream"));

    let (upstreams, own_sanitize) =
        upstreams(raw.upstream, text, &start_defaults, root.at("upstream"));
    let budget = raw.budget.validate((), root.at("budget"));
    let discover = raw.discover.validate((), root.at("discover"));
    let mut clients = Vec::new();
    let mut credentials = Vec::new();
    let mut in_client = root.at("client");
    for (i, mut c) in raw.client.into_iter().enumerate() {
        credentials.push((c.name.clone(), std::mem::take(&mut c.upstream)));
        let spec = c.validate(&clients, in_client.index(i));
        clients.push(spec);
    }
    let auth = raw.auth.validate((), root.at("auth"));
    let credentials = super::share::credentials(
        (credentials.iter()).map(|(name, tables)| (name.as_str(), tables)),
        &upstreams,
        root.reborrow(),
    );
    cross_section(&budget, &discover, &downstream, &clients, root.reborrow());
    let audit = raw.audit.map(|a| a.validate((), root.at("audit")));
    let pin = raw.pin.validate((), root.at("pin"));
    let limits = limits(raw.limits, &clients, &upstreams, root.at("limits"));
    let telemetry = raw.telemetry.validate((), root.at("telemetry"));
    let admin = raw.admin.validate((), root.at("admin"));
    let llm_api = raw.llm_api.validate((), root.at("llm_api"));
    let sessions = raw.sessions.validate((), root.at("sessions"));
    let state = raw.state.validate((), root.at("state"));
    // `[sanitize]` is reported last; upstreams' own tables build on it.
    let mut guard = Problems::new();
    let sanitize = sanitize(raw.sanitize, own_sanitize, guard.root());
    problems.append(guard);
    if !problems.is_empty() {
        return Err(problems.into_problems(text));
    }
    Ok(Policy {
        downstream,
        separator,
        manifest_dir: start_defaults.manifest_dir,
        save_manifests: false,
        resolve_names,
        upstreams,
        budget,
        discover,
        clients,
        auth,
        audit,
        sanitize,
        pin,
        limits,
        telemetry,
        admin,
        llm_api,
        sessions,
        state,
        credentials,
        source: super::Source(Some(text.into())),
        import_warnings: Vec::new(),
    })
}

/// `[limits]`, whose tables name the policy's clients (the anonymous one when there are
/// none) and upstreams.
fn limits(
    raw: super::limits::RawLimits,
    clients: &[ClientSpec],
    upstreams: &[UpstreamSpec],
    at: At<'_>,
) -> crate::limits::Limits {
    let mut names: Vec<&str> = clients.iter().map(|c| c.name.as_str()).collect();
    if names.is_empty() {
        names.push(super::client::ANONYMOUS);
    }
    let ups: Vec<&str> = upstreams.iter().map(|u| u.name.as_str()).collect();
    let names = Names {
        clients: &names,
        upstreams: &ups,
    };
    raw.validate(names, at)
}

/// An upstream's own `[upstream.sanitize]`: its index, its name and the table.
type OwnSanitize = Vec<(usize, String, RawSanitize)>;

/// Every `[[upstream]]` (the valid ones), and their own `sanitize` tables, set aside for
/// [`sanitize`].
fn upstreams(
    raw: Vec<Spanned<RawUpstream>>,
    text: &str,
    defaults: &super::start::StartDefaults,
    mut at: At<'_>,
) -> (Vec<UpstreamSpec>, OwnSanitize) {
    let mut seen = HashSet::new();
    let mut upstreams = Vec::new();
    let mut own_sanitize = Vec::new();
    // Entries come in file order, so one pass over the text numbers them all (counting from
    // the start for each entry made `check` quadratic in the number of upstreams).
    let mut lines = super::lines::Lines::new(text);
    for (i, spanned) in raw.into_iter().enumerate() {
        let line = lines.at(spanned.span().start);
        let mut up = spanned.into_inner();
        if let Some(own) = up.sanitize.take() {
            own_sanitize.push((i, up.name.clone(), own));
        }
        upstreams.extend(up.validate((&mut seen, defaults), at.index(i).on_line(line)));
    }
    (upstreams, own_sanitize)
}

/// `[sanitize]`, then each upstream's own table on top of it.
fn sanitize(global: RawSanitize, own: OwnSanitize, mut root: At<'_>) -> SanitizePolicy {
    let global = global.validate(&Rules::default(), root.at("sanitize"));
    let mut upstreams = BTreeMap::new();
    let mut in_upstream = root.at("upstream");
    for (i, name, own) in own {
        let rules = own.validate(&global, in_upstream.index(i).at("sanitize"));
        upstreams.insert(name, rules);
    }
    SanitizePolicy { global, upstreams }
}

/// The rules that join sections: a client's model is a budget profile, the meta-tools need
/// the budget layer, `stdio_client` names a client.
fn cross_section(
    budget: &BudgetPolicy,
    discover: &DiscoverPolicy,
    downstream: &Downstream,
    clients: &[ClientSpec],
    mut root: At<'_>,
) {
    for (i, c) in clients.iter().enumerate() {
        if let Some(model) = &c.model {
            if let Err(e) = budget.with_model(model) {
                (root.at("client").index(i)).push_at("model", e.to_string());
            }
        }
    }
    let needs_budget =
        "needs the budget layer, which [budget] enabled = false leaves out; drop one of the two";
    if discover.native_disclosure && !budget.enabled {
        root.at("discover")
            .push_at("native_disclosure", needs_budget);
    }
    if discover.code_mode.is_some() && !budget.enabled {
        root.at("discover").push_at("code_mode", needs_budget);
    }
    if let Some(name) = &downstream.stdio_client {
        if !clients.iter().any(|c| &c.name == name) {
            (root.at("downstream")).push_at(
                "stdio_client",
                format!("{name:?} is no [[client]] of this policy"),
            );
        }
    }
}

impl Section for RawAggregate {
    /// The separator, what every upstream starts with, and what becomes of names that
    /// resolve.
    type Valid = (String, super::start::StartDefaults, ResolveNames);
    type Context<'c> = ();

    fn validate(self, (): (), mut at: At<'_>) -> Self::Valid {
        let defaults = super::start::defaults(
            self.start.as_deref(),
            self.idle_stop_secs,
            self.manifest_dir,
            &mut at,
        );
        let separator = self.separator.unwrap_or_else(|| "__".to_owned());
        if separator.is_empty()
            || !separator
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            at.push_at(
                "separator",
                "must be non-empty and use only A-Z a-z 0-9 _ - (tool names must be valid for LLM APIs)",
            );
        }
        let resolve = self.resolve_names.as_deref();
        let resolve = at
            .parse("resolve_names", resolve, str::parse)
            .unwrap_or_default();
        (separator, defaults, resolve)
    }
}

#[cfg(test)]
mod tests {
    use super::super::{ConfigError, Policy};

    #[test]
    fn reports_every_problem_with_path_and_line() {
        let text = "version = 1\n\n[[upstream]]\nname = \"a b\"\n\n[[upstream]]\nname = \"x\"\ncommand = \"c\"\nurl = \"http://h/mcp\"\n";
        let Err(ConfigError::Invalid { problems, .. }) = Policy::from_toml_str(text, "t.toml")
        else {
            panic!("expected problems");
        };
        let shown: Vec<String> = problems.iter().map(ToString::to_string).collect();
        assert!(
            shown
                .iter()
                .any(|p| p.starts_with("line 4: upstream[0].name")),
            "{shown:?}"
        );
        assert!(
            shown
                .iter()
                .any(|p| p.starts_with("line 3: upstream[0].command")),
            "{shown:?}"
        );
        assert!(
            shown
                .iter()
                .any(|p| p.starts_with("line 8: upstream[1].command")),
            "{shown:?}"
        );
    }

    #[test]
    fn unknown_keys_are_errors_with_a_line() {
        let err = Policy::from_toml_str("version = 1\n[downstream]\nstdoi = true\n", "t.toml")
            .unwrap_err()
            .to_string();
        assert!(err.contains("line 3"), "{err}");
        assert!(err.contains("stdoi"), "{err}");
    }

    #[test]
    fn upstream_protocol_is_auto_by_default_and_checked() {
        let text = "version = 1\n[[upstream]]\nname = \"a\"\ncommand = \"c\"\n[[upstream]]\nname = \"b\"\ncommand = \"c\"\nprotocol = \"2025-11-25\"\n";
        let policy = Policy::from_toml_str(text, "t.toml").unwrap();
        assert_eq!(
            policy.upstreams[0].protocol,
            super::super::UpstreamProtocol::Auto
        );
        assert_eq!(
            policy.upstreams[1].protocol,
            super::super::UpstreamProtocol::Legacy
        );
        let bad = text.replace("2025-11-25", "2024-01-01");
        let err = Policy::from_toml_str(&bad, "t.toml")
            .unwrap_err()
            .to_string();
        assert!(err.contains("upstream[1].protocol"), "{err}");
    }

    #[test]
    fn downstream_limits_have_defaults_and_must_be_positive() {
        let policy = Policy::from_toml_str("version = 1\n", "t.toml").unwrap();
        let d = &policy.downstream;
        assert_eq!(d.body_timeout.as_secs(), 30);
        assert_eq!(
            (d.max_connections.get(), d.max_connections_per_client.get()),
            (512, 128)
        );
        assert_eq!(
            (d.max_sessions.get(), d.max_sessions_per_client.get()),
            (4096, 256)
        );
        assert_eq!(d.session_idle.as_secs(), 1800);
        assert_eq!(d.max_outbound_messages.get(), 1024);

        let text = "version = 1\n[downstream]\nbody_timeout_secs = 2\nmax_sessions = 3\n";
        let policy = Policy::from_toml_str(text, "t.toml").unwrap();
        assert_eq!(policy.downstream.body_timeout.as_secs(), 2);
        assert_eq!(policy.downstream.max_sessions.get(), 3);

        let keys = [
            "body_timeout_secs",
            "max_connections",
            "max_connections_per_client",
            "max_sessions",
            "max_sessions_per_client",
            "session_idle_secs",
            "max_outbound_messages",
        ];
        let zeros: String = keys.iter().map(|k| format!("{k} = 0\n")).collect();
        let err = Policy::from_toml_str(&format!("version = 1\n[downstream]\n{zeros}"), "t.toml")
            .unwrap_err()
            .to_string();
        for key in keys {
            assert!(
                err.contains(&format!("downstream.{key}: must be greater than 0")),
                "{key}: {err}"
            );
        }
    }

    #[test]
    fn json_depth_has_a_default_and_must_be_positive() {
        let policy = Policy::from_toml_str("version = 1\n", "t.toml").unwrap();
        assert_eq!(policy.downstream.max_json_depth, 128);
        let text = "version = 1\n[downstream]\nmax_json_depth = 16\n";
        let policy = Policy::from_toml_str(text, "t.toml").unwrap();
        assert_eq!(policy.downstream.max_json_depth, 16);
        let err = Policy::from_toml_str(&text.replace("16", "0"), "t.toml")
            .unwrap_err()
            .to_string();
        assert!(err.contains("downstream.max_json_depth"), "{err}");
    }

    #[test]
    fn outbound_messages_has_a_default_and_must_be_positive_too() {
        let policy = Policy::from_toml_str("version = 1\n", "t.toml").unwrap();
        assert_eq!(policy.downstream.max_outbound_messages.get(), 1024);
        let text = "version = 1\n[downstream]\nmax_outbound_messages = 8\n";
        let policy = Policy::from_toml_str(text, "t.toml").unwrap();
        assert_eq!(policy.downstream.max_outbound_messages.get(), 8);
        let err = Policy::from_toml_str(&text.replace('8', "0"), "t.toml")
            .unwrap_err()
            .to_string();
        assert!(err.contains("downstream.max_outbound_messages"), "{err}");
    }

    #[test]
    fn missing_version_is_reported() {
        let err = Policy::from_toml_str("", "t.toml").unwrap_err().to_string();
        assert!(err.contains("version = 1"), "{err}");
    }

    fn upstream(extra: &str) -> String {
        format!("version = 1\n[[upstream]]\nname = \"a\"\ncommand = \"c\"\n{extra}\n")
    }

    fn problems(text: &str) -> Vec<String> {
        match Policy::from_toml_str(text, "t.toml") {
            Err(ConfigError::Invalid { problems, .. }) => {
                problems.iter().map(ToString::to_string).collect()
            }
            other => panic!("expected problems, got {other:?}"),
        }
    }

    #[test]
    fn roots_are_absent_empty_or_mcp_root_objects() {
        let policy = Policy::from_toml_str(&upstream(""), "t.toml").unwrap();
        assert_eq!(policy.upstreams[0].roots, None);
        let policy = Policy::from_toml_str(&upstream("roots = []"), "t.toml").unwrap();
        assert_eq!(policy.upstreams[0].roots, Some(vec![]));
        let text = upstream(
            r#"roots = ["file:///srv/data", { uri = "file://localhost/srv/My%20Files", name = "Other" }, { uri = "file:///" }]"#,
        );
        let policy = Policy::from_toml_str(&text, "t.toml").unwrap();
        assert_eq!(
            policy.upstreams[0].roots,
            Some(vec![
                serde_json::json!({"uri": "file:///srv/data"}),
                serde_json::json!({"uri": "file://localhost/srv/My%20Files", "name": "Other"}),
                serde_json::json!({"uri": "file:///"}),
            ])
        );
    }

    #[test]
    fn roots_problems_name_the_entry_and_field() {
        let text = upstream(
            r#"roots = ["https://example.com/x", 3, { uri = "file:///a", name = 1 }, { name = "n" }, { uri = "file:///a b", label = "x" }, { uri = 7 }]"#,
        );
        let shown = problems(&text);
        for expected in [
            "line 5: upstream[0].roots[0]: \"https://example.com/x\" is not a file URI",
            "line 5: upstream[0].roots[1]: must be a URI string or a",
            "line 5: upstream[0].roots[2].name: must be a string, not integer",
            "line 5: upstream[0].roots[3].uri: missing",
            "line 5: upstream[0].roots[4].uri: \"file:///a b\" is not a file URI",
            "line 5: upstream[0].roots[4].label: unknown key",
            "line 5: upstream[0].roots[5].uri: must be a string, not integer",
        ] {
            assert!(
                shown.iter().any(|p| p.starts_with(expected)),
                "{expected:?} not in {shown:#?}"
            );
        }
        assert_eq!(shown.len(), 7, "{shown:#?}");
    }

    #[test]
    fn root_uris_must_be_file_uris() {
        for good in [
            "file:///srv/data",
            "file:///",
            "file://localhost/srv",
            "file://host.example/share/a-b_c~d",
            "file:///C:/Users/me",
            "file:///home/jos%C3%A9",
            "file:///home/josé",
        ] {
            assert_eq!(
                super::super::upstream::check_file_uri(good),
                Ok(()),
                "{good}"
            );
        }
        for bad in [
            "/srv/data",
            "srv/data",
            "file:/srv/data",
            "FILE:///srv",
            "https://example.com/",
            "file://srv",
            "file://user@host/srv",
            "file://host:22/srv",
            "file:///srv data",
            "file:///srv?x=1",
            "file:///srv#top",
            "file:///srv%2",
            "file:///srv%zz",
            "file:///a\nb",
            "file:///a\\b",
        ] {
            assert!(
                super::super::upstream::check_file_uri(bad).is_err(),
                "{bad} accepted"
            );
        }
    }

    #[test]
    fn inherit_env_is_off_by_default_and_for_command_upstreams_only() {
        let stdio = |text: &str| {
            let policy = Policy::from_toml_str(text, "t.toml").unwrap();
            match &policy.upstreams[0].transport {
                super::super::Transport::Stdio { inherit_env, .. } => *inherit_env,
                _ => panic!("not stdio"),
            }
        };
        assert!(!stdio(&upstream("")));
        assert!(stdio(&upstream("inherit_env = true")));
        let url = "version = 1\n[[upstream]]\nname = \"a\"\nurl = \"http://127.0.0.1:1/mcp\"\ninherit_env = true\n";
        let shown = problems(url);
        assert!(
            shown
                .iter()
                .any(|p| p.starts_with("line 4: upstream[0].url: args, env, inherit_env and cwd")),
            "{shown:#?}"
        );
    }
}
