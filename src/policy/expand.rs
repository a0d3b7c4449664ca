//! `${…}` references in configuration values, resolved the way each file's home host does.
//!
//! - Claude Code (`.mcp.json`): `${VAR}` and `${VAR:-default}` from the environment, in
//!   `command`, `args`, `env`, `url` and `headers`.
//! - VS Code (`mcp.json`): `${env:VAR}`, `${userHome}`, `${workspaceFolder}`; `${input:id}`
//!   (VS Code asks the user) cannot be answered by a gateway and is an error that says what to
//!   write instead.
//! - The TOML policy: `${env:VAR}` and `${env:VAR:-default}` in `url` and `headers` (resolved
//!   when the policy loads) and in stdio `env` (resolved when the child starts, where
//!   `${VAR}` works too and `$$` is a written `$`: [`Syntax::ChildEnv`]).
//!
//! Claude Desktop does not expand anything, so its files are imported as written.
//!
//! ```
//! use mcp_budget::policy::expand::{expand, Syntax};
//!
//! let env = |name: &str| (name == "TOKEN").then(|| "s3cret".to_owned());
//! let claude_code = Syntax::Shell;
//! assert_eq!(expand("Bearer ${TOKEN}", &claude_code, &env).unwrap(), "Bearer s3cret");
//! assert_eq!(expand("${PORT:-3001}", &claude_code, &env).unwrap(), "3001");
//! let err = expand("${GITHUB_TOKEN}", &claude_code, &env).unwrap_err();
//! assert!(err.contains("GITHUB_TOKEN is not set"), "{err}");
//! assert_eq!(expand("${env:TOKEN}", &Syntax::Policy, &env).unwrap(), "s3cret");
//! ```

use std::path::PathBuf;

/// Which references a value may hold.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Syntax {
    /// Claude Code: `${VAR}`, `${VAR:-default}`.
    Shell,
    /// VS Code: `${env:VAR}`, `${userHome}`, `${workspaceFolder}` (the folder given), and
    /// `${input:id}` (an error).
    VsCode {
        /// The workspace folder (`None` when the file is not in a workspace's `.vscode/`).
        workspace: Option<PathBuf>,
    },
    /// The TOML policy: `${env:VAR}`, `${env:VAR:-default}`; other `${…}` stay as written.
    Policy,
    /// A stdio upstream's `env` values, resolved from the gateway's environment when the child
    /// starts: `${VAR}`, `${env:VAR}`, either with `:-default`; `$$` is a written `$`, any
    /// other `$` stays as written.
    ///
    /// ```
    /// use mcp_budget::policy::expand::{expand, Syntax};
    ///
    /// let env = |name: &str| (name == "TOKEN").then(|| "s3cret".to_owned());
    /// let child = Syntax::ChildEnv;
    /// assert_eq!(expand("${TOKEN} ${env:TOKEN}", &child, &env).unwrap(), "s3cret s3cret");
    /// assert_eq!(expand("$$5 and $PATH", &child, &env).unwrap(), "$5 and $PATH");
    /// ```
    ChildEnv,
}

/// Resolves the references in `value`; `env` looks a variable up.
///
/// # Errors
/// A message naming the reference that cannot be resolved and what to do: an unset variable
/// without a default, a VS Code input, a `${` without `}`.
pub fn expand(
    value: &str,
    syntax: &Syntax,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<String, String> {
    let mut out = String::with_capacity(value.len());
    for piece in split(value, *syntax == Syntax::ChildEnv)? {
        match piece {
            Piece::Text(text) => out.push_str(text),
            Piece::Reference(reference) => match resolve(reference, syntax, env)? {
                Some(text) => out.push_str(&text),
                None => {
                    out.push_str("${");
                    out.push_str(reference);
                    out.push('}');
                }
            },
        }
    }
    Ok(out)
}

/// A part of a value: text as written, or the inside of one `${…}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Piece<'a> {
    /// Written text.
    Text(&'a str),
    /// What is between `${` and `}`.
    Reference(&'a str),
}

/// `value` cut into text and references.
///
/// # Errors
/// A `${` without `}`.
#[cfg_attr(not(feature = "cli"), allow(dead_code))]
pub(crate) fn pieces(value: &str) -> Result<Vec<Piece<'_>>, String> {
    split(value, false)
}

/// [`pieces`], where with `escapes` a `$$` is the text `$` (so `$${X}` is the text `${X}`).
fn split(value: &str, escapes: bool) -> Result<Vec<Piece<'_>>, String> {
    let mut out = Vec::new();
    let mut rest = value;
    let marker = if escapes { "$" } else { "${" };
    while let Some(at) = rest.find(marker) {
        let after = &rest[at + 1..];
        let Some(body) = after.strip_prefix('{') else {
            // Only with `escapes`: `$$` keeps its first `$`, a lone `$` stays as written.
            out.push(Piece::Text(&rest[..=at]));
            rest = after.strip_prefix('$').unwrap_or(after);
            continue;
        };
        if at > 0 {
            out.push(Piece::Text(&rest[..at]));
        }
        let Some(end) = body.find('}') else {
            return Err(format!("\"${{\" without a closing \"}}\" in {value:?}"));
        };
        out.push(Piece::Reference(&body[..end]));
        rest = &body[end + 1..];
    }
    if !rest.is_empty() {
        out.push(Piece::Text(rest));
    }
    Ok(out)
}

/// The text of one `${reference}`; `None` leaves it as written.
fn resolve(
    reference: &str,
    syntax: &Syntax,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<String>, String> {
    let variable = |name: &str, default: Option<&str>, shown: &str| match (env(name), default) {
        (Some(v), _) => Ok(Some(v)),
        (None, Some(d)) => Ok(Some(d.to_owned())),
        (None, None) => Err(format!(
            "{name} is not set in the environment of mcp-budget (set it, or write a default: \
             ${{{shown}:-value}})"
        )),
    };
    let (head, default) = match reference.split_once(":-") {
        Some((head, default)) => (head, Some(default)),
        None => (reference, None),
    };
    match syntax {
        Syntax::Shell => variable(head, default, head),
        Syntax::ChildEnv => variable(head.strip_prefix("env:").unwrap_or(head), default, head),
        Syntax::Policy => match head.strip_prefix("env:") {
            Some(name) => variable(name, default, head),
            None => Ok(None),
        },
        Syntax::VsCode { workspace } => {
            if let Some(name) = head.strip_prefix("env:") {
                return variable(name, default, head);
            }
            if let Some(id) = head.strip_prefix("input:") {
                return Err(format!(
                    "${{input:{id}}} is a value VS Code asks the user for; mcp-budget cannot ask: \
                     put it in the environment (e.g. export {}=...) and write ${{env:{}}}",
                    env_name(id),
                    env_name(id)
                ));
            }
            match head {
                "userHome" => variable("HOME", None, "env:HOME"),
                "workspaceFolder" => match workspace {
                    Some(dir) => Ok(Some(dir.display().to_string())),
                    None => Err(
                        "${workspaceFolder} is only known for a file in a workspace's .vscode/ folder"
                            .to_owned(),
                    ),
                },
                _ => Ok(None),
            }
        }
    }
}

/// An environment variable name suggested for a VS Code input id (`github-token` →
/// `GITHUB_TOKEN`).
pub(crate) fn env_name(id: &str) -> String {
    id.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_uppercase()
            } else {
                '_'
            }
        })
        .collect()
}

/// Whether `value` holds a `${` reference at all.
#[must_use]
pub(crate) fn has_reference(value: &str) -> bool {
    value.contains("${")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        match name {
            "HOME" => Some("/home/ada".into()),
            "TOKEN" => Some("t$k".into()),
            "EMPTY" => Some(String::new()),
            _ => None,
        }
    }

    #[test]
    fn shell_syntax_expands_every_reference_and_keeps_other_dollars() {
        let s = Syntax::Shell;
        assert_eq!(
            expand("a ${TOKEN} b ${X:-y} $5", &s, &env).unwrap(),
            "a t$k b y $5"
        );
        assert_eq!(expand("${X:-}", &s, &env).unwrap(), "");
        assert!(
            expand("${X", &s, &env)
                .unwrap_err()
                .contains("without a closing")
        );
    }

    #[test]
    fn policy_syntax_only_touches_env_references() {
        let s = Syntax::Policy;
        assert_eq!(
            expand("${env:TOKEN}/${other}", &s, &env).unwrap(),
            "t$k/${other}"
        );
        let err = expand("${env:NOPE}", &s, &env).unwrap_err();
        assert!(err.contains("NOPE is not set"), "{err}");
        assert!(err.contains("${env:NOPE:-value}"), "{err}");
    }

    #[test]
    fn child_env_syntax_takes_both_forms_and_a_doubled_dollar() {
        let s = Syntax::ChildEnv;
        assert_eq!(expand("${TOKEN}", &s, &env).unwrap(), "t$k");
        assert_eq!(
            expand("Bearer ${env:TOKEN}!", &s, &env).unwrap(),
            "Bearer t$k!"
        );
        assert_eq!(
            expand("${MISSING:-fallback}", &s, &env).unwrap(),
            "fallback"
        );
        assert_eq!(expand("${env:MISSING:-}", &s, &env).unwrap(), "");
        assert_eq!(expand("${EMPTY:-fallback}", &s, &env).unwrap(), "");
        assert_eq!(
            expand("$$5 and $PATH $", &s, &env).unwrap(),
            "$5 and $PATH $"
        );
        assert_eq!(expand("$${TOKEN}", &s, &env).unwrap(), "${TOKEN}");
        assert_eq!(expand("$$$${TOKEN}", &s, &env).unwrap(), "$${TOKEN}");
        assert_eq!(expand("$$${TOKEN}", &s, &env).unwrap(), "$t$k");
        assert_eq!(expand("plain", &s, &env).unwrap(), "plain");
        let err = expand("${MISSING}", &s, &env).unwrap_err();
        assert!(
            err.contains("MISSING is not set in the environment"),
            "{err}"
        );
        assert!(err.contains("${MISSING:-value}"), "{err}");
        let err = expand("${env:MISSING}", &s, &env).unwrap_err();
        assert!(err.contains("${env:MISSING:-value}"), "{err}");
        assert!(
            expand("${TOKEN", &s, &env)
                .unwrap_err()
                .contains("without a closing")
        );
    }

    #[test]
    fn only_the_child_env_syntax_reads_a_doubled_dollar() {
        assert_eq!(expand("$${TOKEN}", &Syntax::Shell, &env).unwrap(), "$t$k");
        assert_eq!(
            pieces("$${X}").unwrap(),
            [Piece::Text("$"), Piece::Reference("X")]
        );
    }

    #[test]
    fn vscode_syntax_knows_env_home_workspace_and_refuses_inputs() {
        let s = Syntax::VsCode {
            workspace: Some(PathBuf::from("/src/app")),
        };
        assert_eq!(
            expand("${userHome}/x ${workspaceFolder}/y ${env:TOKEN}", &s, &env).unwrap(),
            "/home/ada/x /src/app/y t$k"
        );
        let err = expand("${input:github-token}", &s, &env).unwrap_err();
        assert!(err.contains("write ${env:GITHUB_TOKEN}"), "{err}");
        let no_workspace = Syntax::VsCode { workspace: None };
        assert!(expand("${workspaceFolder}", &no_workspace, &env).is_err());
    }
}
