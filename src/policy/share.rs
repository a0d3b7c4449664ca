//! `share` of an `[[upstream]]` and the per-client credentials of `[client.upstream.<name>]`:
//! whether every client shares one running instance of an upstream (`"global"`, the default)
//! or each client gets its own (`"per_client"`), started on its first call with that
//! client's environment variables (stdio) or headers (HTTP) on top of the upstream's own.
//!
//! ```toml
//! [[upstream]]
//! name = "github"
//! command = "github-mcp-server"
//! share = "per_client"
//! idle_secs = 600      # stop an instance after this long without calls
//! max_instances = 32   # instances of this upstream running at once
//!
//! [[client]]
//! name = "alice"
//! api_key_env = "ALICE_KEY"
//!
//! [client.upstream.github]
//! env = { GITHUB_TOKEN = "${env:ALICE_GITHUB_TOKEN}" }
//! ```
//!
//! Credential values come from the gateway's side (`${env:VAR}`, resolved as the upstream's
//! own `env` and `headers` are), never from what the client sends.

use std::collections::BTreeMap;
use std::num::NonZeroUsize;
use std::time::Duration;

use serde::Deserialize;

use super::problems::At;
use super::{Transport, UpstreamSpec};

/// Default `idle_secs`: a per-client instance without calls for ten minutes is stopped.
pub const DEFAULT_IDLE: Duration = Duration::from_secs(600);
/// Default `max_instances`: per-client instances of one upstream running at once.
pub const DEFAULT_MAX_INSTANCES: NonZeroUsize = super::nonzero(32);

/// Who shares one running instance of an upstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Share {
    /// One instance for every client (the default).
    #[default]
    Global,
    /// One instance per client, started on its first call.
    PerClient(PerClient),
}

/// The settings of a `share = "per_client"` upstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PerClient {
    /// How long an instance may go without calls before it is stopped (`idle_secs`).
    pub idle: Duration,
    /// Most instances running at once (`max_instances`).
    pub max_instances: NonZeroUsize,
}

/// One `[client.upstream.<name>]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "snake_case")]
pub struct RawCredentials {
    /// Environment variables of this client's instance of a stdio upstream, on top of the
    /// upstream's `env`. Default: none.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Headers of this client's instance of an HTTP upstream, on top of the upstream's
    /// `headers`. Default: none.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
}

/// What one client's instance of one upstream gets on top of the upstream's own settings.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Credentials {
    /// Environment variables (stdio).
    pub env: BTreeMap<String, String>,
    /// Headers (HTTP).
    pub headers: BTreeMap<String, String>,
}

/// The credentials of every client, by (client name, upstream name).
pub type ClientCredentials = BTreeMap<(String, String), Credentials>;

/// The spec of `client`'s instance of `base`: the upstream's own settings with the client's
/// environment variables (stdio) or headers (HTTP) on top.
///
/// ```
/// use mcp_budget::policy::share::{instance_spec, Credentials};
/// use mcp_budget::policy::{Transport, UpstreamSpec};
///
/// let base = UpstreamSpec::stdio("gh", "github-mcp-server", &[]);
/// let alice = Credentials { env: [("GITHUB_TOKEN".into(), "a".into())].into(), ..Default::default() };
/// let spec = instance_spec(&base, Some(&alice));
/// let Transport::Stdio { env, .. } = &spec.transport else { unreachable!() };
/// assert_eq!(env["GITHUB_TOKEN"], "a");
/// ```
#[must_use]
pub fn instance_spec(base: &UpstreamSpec, credentials: Option<&Credentials>) -> UpstreamSpec {
    let mut spec = base.clone();
    // An instance starts on its client's first call and stops after `idle_secs` already.
    spec.start = super::Start::Eager;
    if let Some(own) = credentials {
        match &mut spec.transport {
            Transport::Stdio { env, .. } => env.extend(own.env.clone()),
            Transport::Http { headers, .. } => headers.extend(own.headers.clone()),
            // Its credentials are the embedder's business.
            Transport::InProcess(_) => {}
        }
    }
    spec
}

/// `share`, `idle_secs` and `max_instances` of one `[[upstream]]`, problems at `at` (the
/// upstream).
pub(super) fn share(
    share: Option<&str>,
    idle_secs: Option<u64>,
    max_instances: Option<usize>,
    mut at: At<'_>,
) -> Share {
    let per_client = at.one_of(
        "share",
        share,
        false,
        &[("global", false), ("per_client", true)],
    );
    if !per_client {
        for (key, set) in [
            ("idle_secs", idle_secs.is_some()),
            ("max_instances", max_instances.is_some()),
        ] {
            if set {
                at.push_at(key, "applies to share = \"per_client\" upstreams only");
            }
        }
        return Share::Global;
    }
    Share::PerClient(PerClient {
        idle: at.secs("idle_secs", idle_secs, DEFAULT_IDLE),
        max_instances: at.positive("max_instances", max_instances, DEFAULT_MAX_INSTANCES),
    })
}

/// Checks every `[client.upstream.<name>]` against the upstreams, and that a per-client
/// upstream has clients to be per; returns the credentials by (client, upstream). Problems at
/// `root` (the top of the file).
pub(super) fn credentials<'a>(
    clients: impl Iterator<Item = (&'a str, &'a BTreeMap<String, RawCredentials>)>,
    upstreams: &[UpstreamSpec],
    mut root: At<'_>,
) -> ClientCredentials {
    let mut found = ClientCredentials::new();
    let mut any_client = false;
    for (i, (client, tables)) in clients.enumerate() {
        any_client = true;
        for (name, raw) in tables {
            let mut in_client = root.at("client");
            let mut in_entry = in_client.index(i);
            let mut in_upstream = in_entry.at("upstream");
            let mut at = in_upstream.at(name);
            let Some(spec) = upstreams.iter().find(|u| &u.name == name) else {
                at.push(format!("{name:?} is no [[upstream]] of this policy"));
                continue;
            };
            if spec.share == Share::Global {
                at.push(format!(
                    "upstream {name:?} is shared by every client: credentials apply to share = \"per_client\" upstreams only"
                ));
            }
            match &spec.transport {
                Transport::Stdio { .. } if !raw.headers.is_empty() => {
                    at.push_at("headers", "headers apply to url upstreams only");
                }
                Transport::Http { .. } if !raw.env.is_empty() => {
                    at.push_at("env", "env applies to command upstreams only");
                }
                _ => {}
            }
            for header in raw.headers.keys() {
                if http::HeaderName::from_bytes(header.as_bytes()).is_err() {
                    at.push_at("headers", format!("{header:?} is not a header name"));
                }
            }
            let credentials = Credentials {
                env: raw.env.clone(),
                headers: raw.headers.clone(),
            };
            found.insert((client.to_owned(), name.clone()), credentials);
        }
    }
    if !any_client {
        for (i, spec) in upstreams.iter().enumerate() {
            if matches!(spec.share, Share::PerClient(_)) {
                (root.at("upstream").index(i)).push_at(
                    "share",
                    "\"per_client\" needs [[client]] entries: anonymous callers cannot be told apart, so they are refused",
                );
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::problems::Problems;

    fn per_client(idle: u64, max: usize) -> Share {
        Share::PerClient(PerClient {
            idle: Duration::from_secs(idle),
            max_instances: NonZeroUsize::new(max).unwrap(),
        })
    }

    #[test]
    fn share_is_global_by_default_and_per_client_has_defaults() {
        let mut problems = Problems::new();
        assert_eq!(share(None, None, None, problems.root()), Share::Global);
        assert_eq!(
            share(Some("per_client"), None, None, problems.root()),
            per_client(600, 32)
        );
        assert_eq!(
            share(Some("per_client"), Some(5), Some(2), problems.root()),
            per_client(5, 2)
        );
        assert!(problems.is_empty(), "{problems:?}");
    }

    #[test]
    fn share_problems_name_their_key() {
        let mut found = Problems::new();
        share(Some("per_user"), Some(5), None, found.root());
        share(Some("per_client"), Some(0), Some(0), found.root());
        let problems = found.pairs();
        let keys: Vec<&str> = problems.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["share", "idle_secs", "idle_secs", "max_instances"]);
        assert!(problems[1].1.contains("per_client"), "{problems:?}");
    }

    #[test]
    fn credentials_are_checked_against_the_upstreams() {
        let mut github = UpstreamSpec::stdio("github", "gh", &[]);
        github.share = per_client(600, 32);
        let mut web = UpstreamSpec::http("web", "http://127.0.0.1:1/mcp");
        web.share = per_client(600, 32);
        let time = UpstreamSpec::stdio("time", "time", &[]);
        let raw = |env: &[(&str, &str)], headers: &[(&str, &str)]| RawCredentials {
            env: env
                .iter()
                .map(|(k, v)| ((*k).into(), (*v).into()))
                .collect(),
            headers: headers
                .iter()
                .map(|(k, v)| ((*k).into(), (*v).into()))
                .collect(),
        };
        let tables: BTreeMap<String, RawCredentials> = [
            ("github".into(), raw(&[("T", "a")], &[("X-A", "1")])),
            ("web".into(), raw(&[("T", "a")], &[("bad header", "1")])),
            ("time".into(), raw(&[("T", "a")], &[])),
            ("nope".into(), raw(&[], &[])),
        ]
        .into();
        let mut collected = Problems::new();
        let found = credentials(
            [("alice", &tables)].into_iter(),
            &[github, web, time],
            collected.root(),
        );
        let problems = collected.pairs();
        let paths: Vec<&str> = problems.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(
            paths,
            [
                "client[0].upstream.github.headers",
                "client[0].upstream.nope",
                "client[0].upstream.time",
                "client[0].upstream.web.env",
                "client[0].upstream.web.headers",
            ]
        );
        assert_eq!(found[&("alice".into(), "github".into())].env["T"], "a");
    }

    #[test]
    fn a_per_client_upstream_needs_clients() {
        let mut github = UpstreamSpec::stdio("github", "gh", &[]);
        github.share = per_client(600, 32);
        let mut collected = Problems::new();
        credentials(std::iter::empty(), &[github], collected.root());
        let problems = collected.pairs();
        assert_eq!(problems.len(), 1);
        assert_eq!(problems[0].0, "upstream[0].share");
        assert!(problems[0].1.contains("[[client]]"), "{problems:?}");
    }

    #[test]
    fn an_instance_gets_the_clients_env_or_headers_on_top() {
        let mut base = UpstreamSpec::stdio("gh", "gh", &[]);
        if let Transport::Stdio { env, .. } = &mut base.transport {
            env.insert("MODE".into(), "ro".into());
            env.insert("TOKEN".into(), "base".into());
        }
        let own = Credentials {
            env: [("TOKEN".into(), "alice".into())].into(),
            headers: BTreeMap::new(),
        };
        let Transport::Stdio { env, .. } = instance_spec(&base, Some(&own)).transport else {
            unreachable!()
        };
        assert_eq!(env["TOKEN"], "alice");
        assert_eq!(env["MODE"], "ro");
        assert_eq!(instance_spec(&base, None), base);
        let web = UpstreamSpec::http("web", "http://127.0.0.1:1/mcp");
        let own = Credentials {
            env: BTreeMap::new(),
            headers: [("Authorization".into(), "Bearer a".into())].into(),
        };
        let Transport::Http { headers, .. } = instance_spec(&web, Some(&own)).transport else {
            unreachable!()
        };
        assert_eq!(headers["Authorization"], "Bearer a");
    }
}
