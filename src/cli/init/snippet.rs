//! The entry that makes a host start the gateway instead of its servers, in the host's own
//! format, with the `env` the policy's `${env:…}` references read.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde_json::{Map, Value, json};

use super::Source;
use crate::import::mcp_json::Host;

/// The entry for `host`: `command` and `args` start the gateway, `vars` go in its `env`;
/// `scope` is Claude Code's (`user`, `project`).
pub(super) fn for_host(
    host: Host,
    scope: &str,
    command: &str,
    args: &[&str],
    vars: &BTreeMap<String, Source>,
) -> String {
    let printed = match host {
        Host::ClaudeDesktop => {
            // Claude Desktop expands nothing: its files hold values only.
            let entry = entry(command, args, vars, |name, _| format!("<value of {name}>"));
            format!(
                "claude_desktop_config.json:\n{}",
                pretty(&json!({ "mcpServers": { "mcp-budget": entry } }))
            )
        }
        Host::ClaudeCode => {
            let value = |name: &str, v: &Source| match v {
                Source::Env(Some(d)) => format!("${{{name}:-{d}}}"),
                Source::Value(_) | Source::Env(None) | Source::Input(_) => format!("${{{name}}}"),
            };
            let mut line = format!("claude mcp add --scope {scope} mcp-budget");
            for (name, source) in vars {
                let _ = write!(
                    line,
                    " -e {}",
                    shell_quote(&format!("{name}={}", value(name, source)))
                );
            }
            line.push_str(" --");
            for word in std::iter::once(command).chain(args.iter().copied()) {
                line.push(' ');
                line.push_str(&shell_quote(word));
            }
            let entry = entry(command, args, vars, value);
            format!(
                "{line}\n\nor, for a project, in .mcp.json:\n{}",
                pretty(&json!({ "mcpServers": { "mcp-budget": entry } }))
            )
        }
        Host::VsCode => {
            let entry = entry(command, args, vars, |name, v| match v {
                Source::Env(Some(d)) => format!("${{env:{name}:-{d}}}"),
                Source::Value(_) | Source::Env(None) => format!("${{env:{name}}}"),
                Source::Input(id) => format!("${{input:{id}}}"),
            });
            let mut server = Map::new();
            server.insert("type".into(), "stdio".into());
            if let Value::Object(fields) = entry {
                server.extend(fields);
            }
            let inputs: Vec<&str> = vars
                .values()
                .filter_map(|v| match v {
                    Source::Input(id) => Some(id.as_str()),
                    _ => None,
                })
                .collect();
            let keep = if inputs.is_empty() {
                String::new()
            } else {
                format!("\n(keep the \"inputs\" {} next to it)", inputs.join(", "))
            };
            format!(
                ".vscode/mcp.json:\n{}{keep}",
                pretty(&json!({ "servers": { "mcp-budget": server } }))
            )
        }
    };
    printed + &unprinted(host, vars)
}

/// The note on the values the host file wrote out (tokens, most often), which the entry above
/// does not print: where they are and where they go. Empty when there are none.
fn unprinted(host: Host, vars: &BTreeMap<String, Source>) -> String {
    let names: Vec<&str> = (vars.iter())
        .filter(|(_, v)| matches!(v, Source::Value(_)))
        .map(|(name, _)| name.as_str())
        .collect();
    if names.is_empty() {
        return String::new();
    }
    let put = match host {
        Host::ClaudeDesktop => "write each in place of its <value of …> placeholder",
        Host::ClaudeCode | Host::VsCode => {
            "set each in the environment the host starts with, or write it in place of its ${…}"
        }
    };
    format!(
        "\n(not printed, as they may be secrets: the values of {} — they are in your host \
         file's current entries; {put})",
        names.join(", ")
    )
}

/// `{command, args, env}` with each variable's value given by `value(name, source)`.
fn entry(
    command: &str,
    args: &[&str],
    vars: &BTreeMap<String, Source>,
    value: impl Fn(&str, &Source) -> String,
) -> Value {
    let env: Map<String, Value> = vars
        .iter()
        .map(|(name, source)| (name.clone(), Value::String(value(name, source))))
        .collect();
    let mut entry = json!({ "command": command, "args": args });
    if !env.is_empty() {
        entry["env"] = Value::Object(env);
    }
    entry
}

fn pretty(value: &Value) -> String {
    serde_json::to_string_pretty(value).expect("a JSON value always serializes")
}

/// `word` as one POSIX shell word.
fn shell_quote(word: &str) -> String {
    if !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:@%+,".contains(c))
    {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}
