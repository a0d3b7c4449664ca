//! What a valid policy may still get wrong: things that work, but probably not as meant.
//!
//! Warnings never stop the gateway; `check --strict` turns them into errors (for CI).
//!
//! ```
//! use mcp_budget::policy::Policy;
//!
//! let policy = Policy::from_toml_str(
//!     "version = 1\n[downstream]\nhttp = \"0.0.0.0:8931\"\n[[upstream]]\nname = \"git\"\ncommand = \"mcp-server-git\"\n[budget.tools.\"github/*\"]\npin = true\n",
//!     "p.toml",
//! )?;
//! let shown: Vec<String> = policy.warnings().iter().map(ToString::to_string).collect();
//! assert!(shown[0].starts_with("line 3: downstream.http: serves every client that can reach 0.0.0.0:8931"), "{shown:?}");
//! assert!(shown[1].starts_with("line 7: budget.tools.\"github/*\": no upstream is named `github`"), "{shown:?}");
//! // Rules checked against the tools the upstreams really have (e.g. saved lists).
//! let unmatched = policy.unmatched_rules(&["git/git_status".to_owned()]);
//! assert_eq!(unmatched.len(), 0, "the github rule is reported by warnings() already");
//! # Ok::<(), mcp_budget::policy::ConfigError>(())
//! ```

use super::{Policy, Problem, lines};

impl Policy {
    /// Problems that do not stop the gateway: what importing host configs reported
    /// ([`Policy::add_mcp_json`]), a listen address reachable from other machines, trusted
    /// proxy ranges so wide that clients could name any address,
    /// tool rules (`[budget.tools]`, `[discover] never_defer`) naming a server that is not an
    /// upstream. Each with its line when the policy came from a file.
    #[must_use]
    pub fn warnings(&self) -> Vec<Problem> {
        let mut out = self.import_warnings.clone();
        if let Some(addr) = self.downstream.http {
            // With clients, every request must authenticate: reachable from elsewhere is fine.
            if !addr.ip().is_loopback() && self.clients.is_empty() && self.auth.jwt.is_none() {
                out.push(self.problem(
                    "downstream.http".into(),
                    format!(
                        "serves every client that can reach {addr}, from other machines too, and \
                         no [[client]] is configured, so nobody is asked who they are; bind \
                         127.0.0.1 (the default), add [[client]] entries, or keep \
                         allow_anonymous = true only behind a proxy that authenticates them"
                    ),
                ));
            }
        }
        out.extend(self.starving_upstream_caps());
        for (path, message) in self.downstream.forwarding_warnings() {
            out.push(self.problem(path, message));
        }
        if self.upstreams.is_empty() {
            return out;
        }
        for (path, server) in self.rule_servers() {
            if !self.upstreams.iter().any(|u| u.name == server) {
                let names: Vec<&str> = self.upstreams.iter().map(|u| u.name.as_str()).collect();
                out.push(self.problem(
                    path,
                    format!(
                        "no upstream is named `{server}`, so this rule applies to nothing \
                         (upstreams: {})",
                        names.join(", ")
                    ),
                ));
            }
        }
        out
    }

    /// Tool rules that match none of `tool_ids` (`server/tool`, the tools the upstreams
    /// really list) although their server exists: a misspelt or removed tool. Rules of servers
    /// that are not upstreams are [`Policy::warnings`]' business.
    #[must_use]
    pub fn unmatched_rules(&self, tool_ids: &[String]) -> Vec<Problem> {
        self.unmatched_rules_among(tool_ids, |_| true)
    }

    /// [`Policy::unmatched_rules`] for the rules of the servers `listed` accepts only: those
    /// whose tools `tool_ids` holds (a server still starting has listed none yet).
    #[must_use]
    pub fn unmatched_rules_among(
        &self,
        tool_ids: &[String],
        listed: impl Fn(&str) -> bool,
    ) -> Vec<Problem> {
        let mut out = Vec::new();
        let budget = self.budget.tools.iter().map(|(pattern, _)| {
            let matches = |id: &String| match pattern.strip_suffix('*') {
                Some(prefix) => id.starts_with(prefix),
                None => id == pattern,
            };
            (
                format!("budget.tools.{pattern:?}"),
                pattern.as_str(),
                tool_ids.iter().any(matches),
            )
        });
        let never = self.discover.never_defer.iter().enumerate().map(|(i, p)| {
            let hit = tool_ids.iter().any(|id| {
                let exposed = id.replacen('/', &self.separator, 1);
                self.discover.never_deferred(id, &exposed)
            });
            (format!("discover.never_defer[{i}]"), p.as_str(), hit)
        });
        for (path, pattern, hit) in budget.chain(never) {
            let known_server = pattern
                .split_once('/')
                .is_some_and(|(s, _)| listed(s) && self.upstreams.iter().any(|u| u.name == s));
            if !hit && known_server {
                out.push(self.problem(
                    path,
                    format!("`{pattern}` matches none of the upstream's tools"),
                ));
            }
        }
        out
    }

    /// `[limits.upstream.NAME] in_flight` caps calls to one upstream across all clients: a
    /// client without a smaller cap of its own (`[limits] in_flight`, or its
    /// `[limits.client.NAME]`) can hold every slot while the others wait.
    fn starving_upstream_caps(&self) -> Vec<Problem> {
        let limits = &self.limits;
        // The default applies to the clients without limits of their own (to everyone when
        // there is no `[[client]]`).
        let default_applies = self.clients.is_empty()
            || (self.clients.iter()).any(|c| !limits.clients.contains_key(&c.name));
        let mut clients = Vec::new();
        if default_applies {
            clients.push(("every client", &limits.default));
        }
        clients.extend(limits.clients.iter().map(|(n, l)| (n.as_str(), l)));
        let mut out = Vec::new();
        for (upstream, &cap) in &limits.upstream_in_flight {
            let open: Vec<&str> = clients
                .iter()
                .filter(|(_, l)| l.in_flight.is_none_or(|own| own >= cap))
                .map(|(name, _)| *name)
                .collect();
            if open.is_empty() {
                continue;
            }
            out.push(self.problem(
                format!("limits.upstream.{upstream}.in_flight"),
                format!(
                    "caps calls to `{upstream}` at {cap} across all clients, but {} may hold \
                     all {cap} slots (no in_flight of its own below {cap}), so one client can \
                     starve the others; set [limits] in_flight (per client) below {cap}",
                    open.join(", ")
                ),
            ));
        }
        out
    }

    /// `(path, server)` of every tool rule that names a server (`server/…`).
    fn rule_servers(&self) -> Vec<(String, String)> {
        let budget = self
            .budget
            .tools
            .iter()
            .map(|(p, _)| (format!("budget.tools.{p:?}"), p.as_str()));
        let never = self
            .discover
            .never_defer
            .iter()
            .enumerate()
            .map(|(i, p)| (format!("discover.never_defer[{i}]"), p.as_str()));
        budget
            .chain(never)
            .filter_map(|(path, pattern)| {
                let (server, _) = pattern.split_once('/')?;
                (!server.contains(['*', '?'])).then(|| (path, server.to_owned()))
            })
            .collect()
    }

    fn problem(&self, path: String, message: String) -> Problem {
        let line = self
            .source
            .0
            .as_deref()
            .and_then(|t| lines::line_of(t, &path));
        Problem {
            path,
            line,
            message,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(extra: &str) -> Policy {
        let text = format!(
            "version = 1\n[[upstream]]\nname = \"git\"\ncommand = \"mcp-server-git\"\n{extra}"
        );
        Policy::from_toml_str(&text, "t.toml").expect("valid")
    }

    #[test]
    fn loopback_binds_and_known_servers_give_no_warning() {
        let p = policy(
            "[downstream]\nhttp = \"127.0.0.1:1\"\n[budget.tools.\"git/*\"]\npin = true\n[discover]\nnever_defer = [\"git/git_status\", \"git__git_log\"]\n",
        );
        assert_eq!(p.warnings(), []);
        let ids = ["git/git_status".to_owned(), "git/git_log".to_owned()];
        assert_eq!(p.unmatched_rules(&ids), []);
    }

    #[test]
    fn a_wildcard_or_ipv6_unspecified_bind_warns() {
        for addr in ["0.0.0.0:8931", "[::]:8931", "192.168.1.2:80"] {
            let p = policy(&format!("[downstream]\nhttp = \"{addr}\"\n"));
            let w = p.warnings();
            assert_eq!(w.len(), 1, "{addr}: {w:?}");
            assert_eq!(
                (w[0].path.as_str(), w[0].line),
                ("downstream.http", Some(6))
            );
        }
    }

    #[test]
    fn an_upstream_cap_without_a_smaller_client_cap_warns() {
        let warned = |extra: &str| -> Vec<String> {
            policy(extra)
                .warnings()
                .iter()
                .map(ToString::to_string)
                .collect()
        };
        let alone = warned("[limits.upstream.git]\nin_flight = 4\n");
        assert_eq!(alone.len(), 1, "{alone:?}");
        assert!(
            alone[0].starts_with("line 6: limits.upstream.git.in_flight: caps calls to `git` at 4"),
            "{alone:?}"
        );
        assert!(
            alone[0].contains("every client may hold all 4 slots"),
            "{alone:?}"
        );
        let as_large = warned("[limits]\nin_flight = 4\n[limits.upstream.git]\nin_flight = 4\n");
        assert_eq!(as_large.len(), 1, "{as_large:?}");
        let smaller = warned("[limits]\nin_flight = 2\n[limits.upstream.git]\nin_flight = 4\n");
        assert!(smaller.is_empty(), "{smaller:?}");
    }

    #[test]
    fn catch_all_and_very_wide_trusted_proxies_warn() {
        let p = policy(
            "[downstream]\ntrusted_proxies = [\"0.0.0.0/0\", \"10.0.0.0/8\", \"::/0\", \"64.0.0.0/2\", \"fc00::/7\", \"2001:db8::/32\", \"2000::/3\", \"127.0.0.1\"]\n",
        );
        let w: Vec<(String, Option<usize>)> =
            p.warnings().into_iter().map(|w| (w.path, w.line)).collect();
        let at = |i: usize| (format!("downstream.trusted_proxies[{i}]"), Some(6));
        assert_eq!(w, [at(0), at(2), at(3), at(6)]);
        let first = &p.warnings()[0].message;
        assert!(
            first.starts_with("0.0.0.0/0 trusts every address: any client")
                && first.contains("`x-forwarded-for`"),
            "{first}"
        );
        // Narrow ranges, private or not, are what deployments list.
        let p = policy("[downstream]\ntrusted_proxies = [\"10.0.0.0/8\", \"203.0.113.0/24\"]\n");
        assert_eq!(p.warnings(), []);
        // A header nothing reads.
        let p = policy("[downstream]\nforwarded_header = \"Forwarded\"\n");
        let w = p.warnings();
        assert_eq!(w.len(), 1, "{w:?}");
        assert_eq!(w[0].path, "downstream.forwarded_header");
    }

    #[test]
    fn rules_for_servers_that_are_not_upstreams_warn() {
        let p = policy(
            "[budget.tools.\"gitub/create_issue\"]\npin = true\n[discover]\nnever_defer = [\"sentry/*\", \"*/search\"]\n",
        );
        let w: Vec<(String, Option<usize>)> =
            p.warnings().into_iter().map(|w| (w.path, w.line)).collect();
        assert_eq!(
            w,
            [
                ("budget.tools.\"gitub/create_issue\"".to_owned(), Some(5)),
                ("discover.never_defer[0]".to_owned(), Some(8)),
            ]
        );
    }

    #[test]
    fn rules_matching_no_tool_of_a_known_server_are_unmatched() {
        let p = policy(
            "[budget.tools.\"git/git_stauts\"]\npin = true\n[budget.tools.\"git/git_*\"]\nmin_level = \"high\"\n[discover]\nnever_defer = [\"git/nope\"]\n",
        );
        let ids = ["git/git_status".to_owned()];
        let u: Vec<String> = p
            .unmatched_rules(&ids)
            .into_iter()
            .map(|u| u.path)
            .collect();
        assert_eq!(
            u,
            ["budget.tools.\"git/git_stauts\"", "discover.never_defer[0]"]
        );
    }
}
