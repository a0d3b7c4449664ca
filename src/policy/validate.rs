//! Raw policy → [`Policy`]: every problem reported with its field path and line.

use std::collections::{BTreeMap, HashSet};
use std::net::SocketAddr;
use std::num::NonZeroUsize;
use std::time::Duration;

use serde_json::Value;

use super::raw::RawPolicy;
use super::{
    DEFAULT_MAX_JSON_DEPTH, DEFAULT_MAX_MESSAGE_BYTES, Downstream, Policy, Problem, Transport,
    UpstreamSpec,
};

/// Longest server id: leaves room for the separator and a tool name within 64 characters.
const MAX_NAME: usize = 32;

pub(super) fn validate(raw: RawPolicy, text: &str) -> Result<Policy, Vec<Problem>> {
    let mut problems = Vec::new();
    let mut push = |path: String, line: Option<usize>, message: String| {
        problems.push(Problem {
            path,
            line,
            message,
        });
    };
    match raw.version {
        Some(1) => {}
        Some(v) => push(
            "version".into(),
            None,
            format!("unsupported policy version {v}; this gateway reads version 1"),
        ),
        None => push(
            "version".into(),
            None,
            "missing; put `version = 1` at the top of the file".into(),
        ),
    }

    let separator = raw.aggregate.separator.unwrap_or_else(|| "__".to_owned());
    if separator.is_empty()
        || !separator
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        push(
            "aggregate.separator".into(),
            None,
            "must be non-empty and use only A-Z a-z 0-9 _ - (tool names must be valid for LLM APIs)"
                .into(),
        );
    }

    let http = match raw.downstream.http.as_deref().map(str::parse::<SocketAddr>) {
        None => None,
        Some(Ok(addr)) => Some(addr),
        Some(Err(e)) => {
            push(
                "downstream.http".into(),
                None,
                format!("not a socket address such as 127.0.0.1:8931: {e}"),
            );
            None
        }
    };
    let max_message_bytes = match raw.downstream.max_message_bytes {
        Some(0) => {
            push(
                "downstream.max_message_bytes".into(),
                None,
                "must be greater than 0".into(),
            );
            DEFAULT_MAX_MESSAGE_BYTES
        }
        Some(n) => n,
        None => DEFAULT_MAX_MESSAGE_BYTES,
    };
    let d = &raw.downstream;
    let mut positive = |key: &str, value: Option<usize>, default: NonZeroUsize| match value {
        None => default,
        Some(n) => NonZeroUsize::new(n).unwrap_or_else(|| {
            push(
                format!("downstream.{key}"),
                None,
                "must be greater than 0".into(),
            );
            default
        }),
    };
    let max_connections = positive(
        "max_connections",
        d.max_connections,
        super::DEFAULT_MAX_CONNECTIONS,
    );
    let max_connections_per_client = positive(
        "max_connections_per_client",
        d.max_connections_per_client,
        super::DEFAULT_MAX_CONNECTIONS_PER_CLIENT,
    );
    let max_sessions = positive("max_sessions", d.max_sessions, super::DEFAULT_MAX_SESSIONS);
    let max_sessions_per_client = positive(
        "max_sessions_per_client",
        d.max_sessions_per_client,
        super::DEFAULT_MAX_SESSIONS_PER_CLIENT,
    );
    let max_outbound_messages = positive(
        "max_outbound_messages",
        d.max_outbound_messages,
        super::DEFAULT_MAX_OUTBOUND_MESSAGES,
    );
    let body_timeout = positive_secs(
        "body_timeout_secs",
        d.body_timeout_secs,
        super::DEFAULT_BODY_TIMEOUT,
        &mut push,
    );
    let session_idle = positive_secs(
        "session_idle_secs",
        d.session_idle_secs,
        super::DEFAULT_SESSION_IDLE,
        &mut push,
    );
    let max_json_depth = match raw.downstream.max_json_depth {
        Some(0) => {
            push(
                "downstream.max_json_depth".into(),
                None,
                "must be greater than 0 (a message is an object: level 1)".into(),
            );
            DEFAULT_MAX_JSON_DEPTH
        }
        Some(n) => n,
        None => DEFAULT_MAX_JSON_DEPTH,
    };
    for (i, origin) in raw.downstream.allowed_origins.iter().enumerate() {
        if !(origin.starts_with("http://") || origin.starts_with("https://")) {
            push(
                format!("downstream.allowed_origins[{i}]"),
                None,
                format!("{origin:?} is not an origin such as https://app.example.com"),
            );
        }
    }

    let mut seen = HashSet::new();
    let mut upstreams = Vec::new();
    // `[sanitize]` first: upstreams' own `sanitize` tables build on it.
    let mut guard_problems = Vec::new();
    let sanitize_global = raw.sanitize.validate(
        "sanitize",
        &crate::sanitize::Rules::default(),
        &mut guard_problems,
    );
    let mut sanitize_upstreams = BTreeMap::new();
    for (i, spanned) in raw.upstream.into_iter().enumerate() {
        let line = Some(super::parse::line_at(text, spanned.span().start));
        let up = spanned.into_inner();
        let path = |field: &str| format!("upstream[{i}].{field}");
        if let Err(message) = check_name(&up.name) {
            push(path("name"), line, message);
        }
        if !seen.insert(up.name.clone()) {
            push(
                path("name"),
                line,
                format!(
                    "{:?} is used by an earlier upstream; names must be unique",
                    up.name
                ),
            );
        }
        let timeout = match up.timeout_secs {
            Some(0) => {
                push(path("timeout_secs"), line, "must be greater than 0".into());
                super::DEFAULT_TIMEOUT
            }
            Some(secs) => Duration::from_secs(secs),
            None => super::DEFAULT_TIMEOUT,
        };
        let protocol = match up.protocol.as_deref() {
            None | Some("auto") => super::UpstreamProtocol::Auto,
            Some("2026-07-28" | "modern") => super::UpstreamProtocol::Modern,
            Some("2025-11-25" | "legacy") => super::UpstreamProtocol::Legacy,
            Some(other) => {
                push(
                    path("protocol"),
                    line,
                    format!("{other:?} is not one of \"auto\", \"2026-07-28\", \"2025-11-25\""),
                );
                super::UpstreamProtocol::Auto
            }
        };
        let roots = up.roots.map(|raw| {
            let (roots, root_problems) = check_roots(raw, &path("roots"));
            for (at, message) in root_problems {
                push(at, line, message);
            }
            roots
        });
        let raw_http = super::http::RawHttp {
            transport: up.transport,
            ca_file: up.ca_file,
            client_cert_file: up.client_cert_file,
            client_key_file: up.client_key_file,
        };
        let http_keys = raw_http.any();
        let (http_options, http_problems) = raw_http.validate();
        if let Some(own) = &up.sanitize {
            let rules = own.validate(&path("sanitize"), &sanitize_global, &mut guard_problems);
            sanitize_upstreams.insert(up.name.clone(), rules);
        }
        let transport = match (up.command, up.url) {
            (Some(command), None) => {
                if http_keys {
                    push(
                        path("transport"),
                        line,
                        "transport, ca_file, client_cert_file and client_key_file apply to url upstreams only".into(),
                    );
                }
                if !up.headers.is_empty() {
                    push(
                        path("headers"),
                        line,
                        "headers apply to url upstreams only".into(),
                    );
                }
                if command.trim().is_empty() {
                    push(path("command"), line, "must not be empty".into());
                }
                Transport::Stdio {
                    command,
                    args: up.args,
                    env: up.env,
                    inherit_env: up.inherit_env,
                    cwd: up.cwd,
                }
            }
            (None, Some(url)) => {
                if !up.args.is_empty() || !up.env.is_empty() || up.inherit_env || up.cwd.is_some() {
                    push(
                        path("url"),
                        line,
                        "args, env, inherit_env and cwd apply to command upstreams only".into(),
                    );
                }
                // `${env:…}` is resolved when the gateway starts (`Policy::resolve_env`): check
                // the URL's shape with the defaults, else with a stand-in value.
                let syntax = super::expand::Syntax::Policy;
                let probe = super::expand::expand(&url, &syntax, &|_| None)
                    .or_else(|_| super::expand::expand(&url, &syntax, &|_| Some("x".to_owned())))
                    .unwrap_or_else(|_| url.clone());
                match probe.parse::<http::Uri>() {
                    Ok(uri) if matches!(uri.scheme_str(), Some("http" | "https")) => {}
                    _ => push(
                        path("url"),
                        line,
                        format!("{url:?} is not an http(s) URL such as http://127.0.0.1:3001/mcp"),
                    ),
                }
                for name in up.headers.keys() {
                    if http::HeaderName::from_bytes(name.as_bytes()).is_err() {
                        push(
                            path("headers"),
                            line,
                            format!("{name:?} is not a header name"),
                        );
                    }
                }
                for (field, message) in http_problems {
                    push(path(field), line, message);
                }
                if http_options.transport == super::HttpTransport::Sse
                    && protocol == super::UpstreamProtocol::Modern
                {
                    push(
                        path("transport"),
                        line,
                        "the 2024-11-05 HTTP+SSE transport cannot carry protocol 2026-07-28".into(),
                    );
                }
                Transport::Http {
                    url,
                    headers: up.headers,
                }
            }
            (Some(_), Some(_)) => {
                push(
                    path("command"),
                    line,
                    "give either command or url, not both".into(),
                );
                continue;
            }
            (None, None) => {
                push(
                    path("command"),
                    line,
                    "needs command (a stdio server) or url (a streamable HTTP server)".into(),
                );
                continue;
            }
        };
        let mut share_problems = Vec::new();
        let share = super::share::share(
            up.share.as_deref(),
            up.idle_secs,
            up.max_instances,
            &mut share_problems,
        );
        for (field, message) in share_problems {
            push(path(field), line, message);
        }
        upstreams.push(UpstreamSpec {
            name: up.name,
            transport,
            timeout,
            volatile: up.volatile,
            protocol,
            roots,
            http: http_options,
            required: up.required.unwrap_or(true),
            share,
        });
    }

    let mut section_problems = Vec::new();
    let budget = raw.budget.validate(&mut section_problems);
    let discover = raw.discover.validate(&mut section_problems);
    let (clients, auth) = super::client::validate(&raw.client, &raw.auth, &mut section_problems);
    let credentials = super::share::credentials(
        (raw.client.iter()).map(|c| (c.name.as_str(), &c.upstream)),
        &upstreams,
        &mut section_problems,
    );
    for (i, c) in clients.iter().enumerate() {
        if let Some(model) = &c.model {
            if let Err(e) = budget.with_model(model) {
                section_problems.push((format!("client[{i}].model"), e.to_string()));
            }
        }
    }
    if discover.native_disclosure && !budget.enabled {
        section_problems.push((
            "discover.native_disclosure".into(),
            "needs the budget layer, which [budget] enabled = false leaves out; drop one of the two"
                .into(),
        ));
    }
    if discover.code_mode.is_some() && !budget.enabled {
        section_problems.push((
            "discover.code_mode".into(),
            "needs the budget layer, which [budget] enabled = false leaves out; drop one of the two"
                .into(),
        ));
    }
    if let Some(name) = &raw.downstream.stdio_client {
        if !clients.iter().any(|c| &c.name == name) {
            section_problems.push((
                "downstream.stdio_client".into(),
                format!("{name:?} is no [[client]] of this policy"),
            ));
        }
    }
    let audit = raw
        .audit
        .as_ref()
        .map(|a| a.validate(&mut section_problems));
    let pin = raw.pin.validate(&mut section_problems);
    let limits = {
        let mut names: Vec<&str> = clients.iter().map(|c| c.name.as_str()).collect();
        if names.is_empty() {
            names.push(crate::identity::ANONYMOUS);
        }
        let ups: Vec<&str> = upstreams.iter().map(|u| u.name.as_str()).collect();
        raw.limits.validate(&names, &ups, &mut section_problems)
    };
    let telemetry = raw.telemetry.validate(&mut section_problems);
    let admin = raw.admin.validate(&mut section_problems);
    let sessions = raw.sessions.validate(&mut section_problems);
    section_problems.append(&mut guard_problems);
    for (path, message) in section_problems {
        push(path, None, message);
    }

    if problems.is_empty() {
        Ok(Policy {
            downstream: Downstream {
                stdio: raw.downstream.stdio,
                http,
                allowed_origins: raw.downstream.allowed_origins,
                allowed_hosts: raw.downstream.allowed_hosts,
                max_message_bytes,
                body_timeout,
                max_connections,
                max_connections_per_client,
                max_sessions,
                max_sessions_per_client,
                session_idle,
                max_json_depth,
                max_outbound_messages,
                strict_accept: raw.downstream.strict_accept,
                stdio_client: raw.downstream.stdio_client,
                allow_anonymous: raw.downstream.allow_anonymous,
            },
            separator,
            source: super::Source(Some(text.into())),
            import_warnings: Vec::new(),
            upstreams,
            budget,
            discover,
            clients,
            auth,
            audit,
            sanitize: super::sanitize::SanitizePolicy {
                global: sanitize_global,
                upstreams: sanitize_upstreams,
            },
            pin,
            limits,
            telemetry,
            admin,
            sessions,
            credentials,
        })
    } else {
        Err(problems)
    }
}

/// A server id must be usable as a tool-name prefix on every LLM API.
pub(super) fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > MAX_NAME {
        return Err(format!("must be 1 to {MAX_NAME} characters long"));
    }
    if !name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        return Err(format!(
            "{name:?} may use only A-Z a-z 0-9 _ - (it prefixes tool names sent to LLM APIs)"
        ));
    }
    Ok(())
}

/// `roots` entries (`"file:///..."` or `{ uri = "file:///...", name = "..." }`) as MCP `Root`
/// objects, and every problem with the path of its entry (`<path>[i]`, `<path>[i].uri`, ...).
fn check_roots(raw: Vec<toml::Value>, path: &str) -> (Vec<Value>, Vec<(String, String)>) {
    let mut roots = Vec::new();
    let mut problems = Vec::new();
    for (i, entry) in raw.into_iter().enumerate() {
        let at = format!("{path}[{i}]");
        let (uri, uri_at, name) = match entry {
            toml::Value::String(uri) => (Some(uri), at, None),
            toml::Value::Table(mut table) => {
                let uri_at = format!("{at}.uri");
                let uri = match table.remove("uri") {
                    Some(toml::Value::String(uri)) => Some(uri),
                    Some(other) => {
                        let kind = other.type_str();
                        problems.push((uri_at.clone(), format!("must be a string, not {kind}")));
                        None
                    }
                    None => {
                        let message = "missing; a root needs a URI such as file:///srv/data";
                        problems.push((uri_at.clone(), message.into()));
                        None
                    }
                };
                let name = match table.remove("name") {
                    Some(toml::Value::String(name)) => Some(name),
                    Some(other) => {
                        let kind = other.type_str();
                        problems.push((
                            format!("{at}.name"),
                            format!("must be a string, not {kind}"),
                        ));
                        None
                    }
                    None => None,
                };
                for key in table.keys() {
                    let message = "unknown key; a root table has only `uri` and `name`";
                    problems.push((format!("{at}.{key}"), message.into()));
                }
                (uri, uri_at, name)
            }
            other => {
                let kind = other.type_str();
                let message = format!(
                    "must be a URI string or a {{ uri = \"...\", name = \"...\" }} table, not {kind}"
                );
                problems.push((at, message));
                continue;
            }
        };
        let Some(uri) = uri else { continue };
        if let Err(message) = check_file_uri(&uri) {
            problems.push((uri_at, message));
            continue;
        }
        let mut root = serde_json::Map::new();
        root.insert("uri".into(), Value::String(uri));
        if let Some(name) = name {
            root.insert("name".into(), Value::String(name));
        }
        roots.push(Value::Object(root));
    }
    (roots, problems)
}

/// MCP roots are `file://` URIs (RFC 8089): an optional host, then an absolute path. Spaces,
/// controls and the characters a URI path cannot hold must be percent-encoded; a query or a
/// fragment means nothing for a root. Non-ASCII is accepted as written (an IRI).
fn check_file_uri(uri: &str) -> Result<(), String> {
    let bad = |why: &str| {
        format!(
            "{uri:?} is not a file URI such as file:///srv/data: {why} (MCP roots are file:// URIs)"
        )
    };
    let rest = uri
        .strip_prefix("file://")
        .ok_or_else(|| bad("it must start with file://"))?;
    let slash = rest
        .find('/')
        .ok_or_else(|| bad("the path must be absolute"))?;
    let (host, path) = rest.split_at(slash);
    if !host
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.')
    {
        return Err(bad("the host may only be a name (no user, no port)"));
    }
    let mut chars = path.chars();
    while let Some(c) = chars.next() {
        match c {
            '%' => {
                let hex = (chars.next(), chars.next());
                if !matches!(hex, (Some(a), Some(b)) if a.is_ascii_hexdigit() && b.is_ascii_hexdigit())
                {
                    return Err(bad("a % must start an escape such as %20"));
                }
            }
            '?' | '#' => return Err(bad("a root has no query or fragment")),
            c if c.is_ascii_control() || " \"<>\\^`{|}".contains(c) => {
                return Err(bad(&format!("{c:?} must be percent-encoded")));
            }
            _ => {}
        }
    }
    Ok(())
}

/// A `[downstream]` duration in whole seconds, greater than 0.
fn positive_secs(
    key: &str,
    value: Option<u64>,
    default: Duration,
    push: &mut impl FnMut(String, Option<usize>, String),
) -> Duration {
    match value {
        None => default,
        Some(0) => {
            push(
                format!("downstream.{key}"),
                None,
                "must be greater than 0".into(),
            );
            default
        }
        Some(secs) => Duration::from_secs(secs),
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
            assert_eq!(super::check_file_uri(good), Ok(()), "{good}");
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
            assert!(super::check_file_uri(bad).is_err(), "{bad} accepted");
        }
    }

    #[test]
    fn inherit_env_is_off_by_default_and_for_command_upstreams_only() {
        let stdio = |text: &str| {
            let policy = Policy::from_toml_str(text, "t.toml").unwrap();
            match &policy.upstreams[0].transport {
                super::super::Transport::Stdio { inherit_env, .. } => *inherit_env,
                super::super::Transport::Http { .. } => panic!("not stdio"),
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
