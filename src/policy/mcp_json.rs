//! Import of the `mcpServers` JSON that Claude Desktop and Claude Code users already have.
//!
//! An imported stdio server gets a clean environment, as a `[[upstream]]` without `inherit_env`
//! does: the small base plus the entry's `env`. That is what the official SDKs' stdio clients,
//! which hosts build on, give a server (their default environment with `env` on top), so an
//! entry written for them works here, and the gateway's own secrets stay out of servers imported
//! from a file written for another tool.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Deserialize;

use super::{validate, ConfigError, Problem, Transport, UpstreamSpec, DEFAULT_TIMEOUT};

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct File {
    mcp_servers: BTreeMap<String, Server>,
}

// Lenient on purpose: these files carry keys of other tools (`disabled`, `autoApprove`, ...).
#[derive(Deserialize)]
struct Server {
    command: Option<String>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    cwd: Option<PathBuf>,
    url: Option<String>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    #[serde(default)]
    disabled: bool,
}

pub(crate) fn parse(text: &str, origin: &str) -> Result<Vec<UpstreamSpec>, ConfigError> {
    let file: File = serde_json::from_str(text).map_err(|e| ConfigError::Parse {
        path: origin.to_owned(),
        message: format!("not an mcpServers JSON file: {e}"),
    })?;
    let mut problems = Vec::new();
    let mut specs = Vec::new();
    for (name, server) in file.mcp_servers {
        if server.disabled {
            continue;
        }
        let path = format!("mcpServers.{name}");
        let mut problem = |message: String| {
            problems.push(Problem {
                path: path.clone(),
                line: None,
                message,
            });
        };
        if let Err(message) = validate::check_name(&name) {
            problem(message);
        }
        let transport = match (server.command, server.url) {
            (Some(command), None) => Transport::Stdio {
                command,
                args: server.args,
                env: server.env,
                inherit_env: false,
                cwd: server.cwd,
            },
            (None, Some(url)) => Transport::Http {
                url,
                headers: server.headers,
            },
            _ => {
                problem("needs exactly one of \"command\" and \"url\"".into());
                continue;
            }
        };
        specs.push(UpstreamSpec {
            name,
            transport,
            timeout: DEFAULT_TIMEOUT,
            volatile: false,
            protocol: super::UpstreamProtocol::Auto,
            roots: None,
        });
    }
    if problems.is_empty() {
        Ok(specs)
    } else {
        Err(ConfigError::Invalid {
            path: origin.to_owned(),
            problems,
        })
    }
}
