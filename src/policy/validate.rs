//! Raw policy → [`Policy`]: every problem reported with its field path and line.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::time::Duration;

use super::raw::RawPolicy;
use super::{
    Downstream, Policy, Problem, Transport, UpstreamSpec, DEFAULT_MAX_JSON_DEPTH,
    DEFAULT_MAX_MESSAGE_BYTES, DEFAULT_MAX_OUTBOUND_MESSAGES,
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
    let max_outbound_messages = match raw.downstream.max_outbound_messages {
        Some(0) => {
            push(
                "downstream.max_outbound_messages".into(),
                None,
                "must be greater than 0".into(),
            );
            DEFAULT_MAX_OUTBOUND_MESSAGES
        }
        Some(n) => n,
        None => DEFAULT_MAX_OUTBOUND_MESSAGES,
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
    for (i, spanned) in raw.upstream.into_iter().enumerate() {
        let line = Some(line_of(text, spanned.span().start));
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
        let transport = match (up.command, up.url) {
            (Some(command), None) => {
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
                    cwd: up.cwd,
                }
            }
            (None, Some(url)) => {
                if !up.args.is_empty() || !up.env.is_empty() || up.cwd.is_some() {
                    push(
                        path("url"),
                        line,
                        "args, env and cwd apply to command upstreams only".into(),
                    );
                }
                match url.parse::<http::Uri>() {
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
        upstreams.push(UpstreamSpec {
            name: up.name,
            transport,
            timeout,
            volatile: up.volatile,
            protocol,
        });
    }

    let mut section_problems = Vec::new();
    let budget = raw.budget.validate(&mut section_problems);
    let discover = raw.discover.validate(&mut section_problems);
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
                max_json_depth,
                max_outbound_messages,
            },
            separator,
            upstreams,
            budget,
            discover,
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

fn line_of(text: &str, offset: usize) -> usize {
    text.get(..offset).map_or(0, |t| t.matches('\n').count()) + 1
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
                .any(|p| p.starts_with("line 3: upstream[0].name")),
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
                .any(|p| p.starts_with("line 6: upstream[1].command")),
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
    fn outbound_messages_has_a_default_and_must_be_positive() {
        let policy = Policy::from_toml_str("version = 1\n", "t.toml").unwrap();
        assert_eq!(policy.downstream.max_outbound_messages, 1024);
        let text = "version = 1\n[downstream]\nmax_outbound_messages = 8\n";
        let policy = Policy::from_toml_str(text, "t.toml").unwrap();
        assert_eq!(policy.downstream.max_outbound_messages, 8);
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
}
