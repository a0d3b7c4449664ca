//! What a new policy changes, decided before anything is touched: which upstreams start, stop,
//! restart or stay, and which settings only a restart can apply.

use super::sessions::{SealKeySource, SessionsPolicy};
use super::{Downstream, Policy, UpstreamSpec};

/// What happens to the upstreams and settings when `new` replaces `old`.
///
/// Upstreams are matched by name. One whose spec is equal in both (transport, command, env,
/// headers, timeout, protocol, roots, `volatile`) is *kept*: its connection and sessions stay as
/// they are, even when it moved in the list.
///
/// ```
/// use mcp_budget::policy::Policy;
/// use mcp_budget::policy::Reconcile;
///
/// let old = Policy::from_toml_str(
///     "version = 1\n[[upstream]]\nname = \"a\"\ncommand = \"a\"\n[[upstream]]\nname = \"b\"\ncommand = \"b\"\n",
///     "old",
/// )
/// .unwrap();
/// let new = Policy::from_toml_str(
///     "version = 1\n[[upstream]]\nname = \"b\"\ncommand = \"b2\"\n[[upstream]]\nname = \"c\"\ncommand = \"c\"\n",
///     "new",
/// )
/// .unwrap();
/// let plan = Reconcile::between(&old, &new);
/// assert_eq!(plan.stop, ["a"]);
/// assert_eq!(plan.restart, ["b"]);
/// assert_eq!(plan.start, ["c"]);
/// assert!(plan.keep.is_empty());
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reconcile {
    /// Upstreams only the new policy names: started.
    pub start: Vec<String>,
    /// Upstreams only the old policy names: stopped once their calls in flight end.
    pub stop: Vec<String>,
    /// Upstreams in both whose spec changed: stopped as above, then started with the new spec.
    pub restart: Vec<String>,
    /// Upstreams in both with an equal spec: untouched.
    pub keep: Vec<String>,
    /// The exposed names change for every upstream (the separator changed) or their order did:
    /// the catalog is rebuilt even where no upstream changed.
    pub renames: bool,
    /// Settings that differ but apply only at the next start (the `[downstream]` section: the
    /// listen address, stdio, and the transports' limits and checks; the `[sessions]` seal key
    /// and lifetime, read once into the sealer; `[state]`, whose store is connected once), named
    /// as in the policy file.
    pub needs_restart: Vec<&'static str>,
}

impl Reconcile {
    /// Compares two policies.
    #[must_use]
    pub fn between(old: &Policy, new: &Policy) -> Self {
        // Every section named: a new one does not compile until someone decides whether a
        // reload applies it (the stack is rebuilt from the new policy) or only a restart does.
        let Policy {
            downstream,
            separator,
            upstreams,
            sessions,
            state,
            llm_api,
            // Applied by a reload: the stack and the gateway's rooms are built from them.
            resolve_names: _,
            budget: _,
            discover: _,
            clients: _,
            auth: _,
            audit: _,
            sanitize: _,
            // `recheck_secs` too: the gateway's recheck task reads it every tick.
            pin: _,
            limits: _,
            telemetry: _,
            admin: _,
            credentials: _,
            // Read when a manifest is loaded or saved.
            manifest_dir: _,
            save_manifests: _,
            source: _,
            import_warnings: _,
        } = old;
        let find = |list: &[UpstreamSpec], name: &str| list.iter().position(|u| u.name == name);
        let mut plan = Self::default();
        for up in &new.upstreams {
            match find(upstreams, &up.name) {
                None => plan.start.push(up.name.clone()),
                Some(i) if upstreams[i] == *up => plan.keep.push(up.name.clone()),
                Some(_) => plan.restart.push(up.name.clone()),
            }
        }
        for up in upstreams {
            if find(&new.upstreams, &up.name).is_none() {
                plan.stop.push(up.name.clone());
            }
        }
        let names = |list: &[UpstreamSpec]| list.iter().map(|u| u.name.clone()).collect::<Vec<_>>();
        plan.renames = *separator != new.separator || names(upstreams) != names(&new.upstreams);
        plan.needs_restart = downstream_changes(downstream, &new.downstream);
        plan.needs_restart
            .extend(sessions_changes(sessions, &new.sessions));
        // The store's connection and heartbeat are made once, when the gateway starts.
        if *state != new.state {
            plan.needs_restart.push("state");
        }
        // The LLM API listener is bound, and its rewrite options made, when `serve` starts.
        if *llm_api != new.llm_api {
            plan.needs_restart.push("llm_api");
        }
        plan
    }

    /// Whether any upstream starts, stops or restarts.
    #[must_use]
    pub fn touches_upstreams(&self) -> bool {
        !(self.start.is_empty() && self.stop.is_empty() && self.restart.is_empty())
    }

    /// The warning a reload logs when it leaves settings for the next restart, naming them:
    /// `None` when every change was applied.
    ///
    /// ```
    /// use mcp_budget::policy::Policy;
    /// use mcp_budget::policy::Reconcile;
    ///
    /// let old = Policy::from_toml_str("version = 1\n", "old").unwrap();
    /// let new = Policy::from_toml_str("version = 1\n[sessions]\nseal_key_env = \"K\"\n", "new").unwrap();
    /// let warning = Reconcile::between(&old, &new).restart_warning().unwrap();
    /// assert!(warning.ends_with("sessions.seal_key_env"));
    /// assert_eq!(Reconcile::between(&old, &old).restart_warning(), None);
    /// ```
    #[must_use]
    pub fn restart_warning(&self) -> Option<String> {
        (!self.needs_restart.is_empty()).then(|| {
            format!(
                "Settings changed that apply only at the next restart (still served as before): {}",
                self.needs_restart.join(", ")
            )
        })
    }

    /// One line for the log: `started [c], stopped [a], restarted [b], kept 3`.
    #[must_use]
    pub fn summary(&self) -> String {
        let list = |names: &[String]| names.join(", ");
        let mut parts = Vec::new();
        for (verb, names) in [
            ("started", &self.start),
            ("stopped", &self.stop),
            ("restarted", &self.restart),
        ] {
            if !names.is_empty() {
                parts.push(format!("{verb} [{}]", list(names)));
            }
        }
        parts.push(format!("kept {}", self.keep.len()));
        if !self.needs_restart.is_empty() {
            parts.push(format!(
                "not applied until restart: {}",
                self.needs_restart.join(", ")
            ));
        }
        parts.join(", ")
    }
}

/// `[(key, whether field differs in b)]` for `key => field` pairs, `field` bound to a's value.
macro_rules! changed {
    [$b:ident; $($key:literal => $field:ident,)*] => {
        [$(($key, *$field != $b.$field)),*]
    };
}

/// The `[downstream]` keys whose values differ: the transports read them once, when they
/// start serving. Every field is named, so that a new one does not compile until it is listed.
fn downstream_changes(a: &Downstream, b: &Downstream) -> Vec<&'static str> {
    let Downstream {
        stdio,
        http,
        allowed_origins,
        allowed_hosts,
        max_message_bytes,
        body_timeout,
        max_connections,
        max_connections_per_client,
        max_sessions,
        max_sessions_per_client,
        session_idle,
        max_outbound_messages,
        max_json_depth,
        strict_accept,
        stdio_client,
        allow_anonymous,
        trusted_proxies,
        forwarded_header,
    } = a;
    changed![b;
        "downstream.http" => http,
        "downstream.stdio" => stdio,
        "downstream.allowed_origins" => allowed_origins,
        "downstream.allowed_hosts" => allowed_hosts,
        "downstream.max_message_bytes" => max_message_bytes,
        "downstream.max_json_depth" => max_json_depth,
        "downstream.body_timeout_secs" => body_timeout,
        "downstream.max_connections" => max_connections,
        "downstream.max_connections_per_client" => max_connections_per_client,
        "downstream.max_sessions" => max_sessions,
        "downstream.max_sessions_per_client" => max_sessions_per_client,
        "downstream.session_idle_secs" => session_idle,
        "downstream.max_outbound_messages" => max_outbound_messages,
        "downstream.strict_accept" => strict_accept,
        "downstream.stdio_client" => stdio_client,
        "downstream.allow_anonymous" => allow_anonymous,
        "downstream.trusted_proxies" => trusted_proxies,
        "downstream.forwarded_header" => forwarded_header,
    ]
    .into_iter()
    .filter_map(|(key, differs)| differs.then_some(key))
    .collect()
}

/// The `[sessions]` keys whose values differ: the HTTP transport builds its sealer (the key
/// and how long a sealed id lives) once, when it starts serving. Every field is named, as in
/// [`downstream_changes`].
fn sessions_changes(a: &SessionsPolicy, b: &SessionsPolicy) -> Vec<&'static str> {
    let SessionsPolicy {
        seal_key,
        max_lifetime,
    } = a;
    let env = |key: &Option<SealKeySource>| match key {
        Some(SealKeySource::Env(var)) => Some(var.clone()),
        _ => None,
    };
    let file = |key: &Option<SealKeySource>| match key {
        Some(SealKeySource::File(path)) => Some(path.clone()),
        _ => None,
    };
    [
        ("sessions.seal_key_env", env(seal_key) != env(&b.seal_key)),
        (
            "sessions.seal_key_file",
            file(seal_key) != file(&b.seal_key),
        ),
        (
            "sessions.max_lifetime_secs",
            *max_lifetime != b.max_lifetime,
        ),
    ]
    .into_iter()
    .filter_map(|(key, differs)| differs.then_some(key))
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(text: &str) -> Policy {
        Policy::from_toml_str(&format!("version = 1\n{text}"), "test").expect("valid policy")
    }

    fn stdio(name: &str, command: &str) -> String {
        format!("[[upstream]]\nname = \"{name}\"\ncommand = \"{command}\"\n")
    }

    #[test]
    fn an_equal_policy_keeps_everything() {
        let text = format!("{}{}", stdio("a", "x"), stdio("b", "y"));
        let plan = Reconcile::between(&policy(&text), &policy(&text));
        assert_eq!(plan.keep, ["a", "b"]);
        assert!(!plan.touches_upstreams());
        assert!(!plan.renames);
        assert_eq!(plan.summary(), "kept 2");
    }

    #[test]
    fn a_moved_upstream_is_kept_but_the_names_are_rebuilt() {
        let old = policy(&format!("{}{}", stdio("a", "x"), stdio("b", "y")));
        let new = policy(&format!("{}{}", stdio("b", "y"), stdio("a", "x")));
        let plan = Reconcile::between(&old, &new);
        assert_eq!(plan.keep, ["b", "a"]);
        assert!(!plan.touches_upstreams());
        assert!(plan.renames);
    }

    #[test]
    fn any_spec_field_restarts_the_upstream() {
        let old = policy(&stdio("a", "x"));
        for changed in [
            stdio("a", "x2"),
            format!("{}args = [\"-v\"]\n", stdio("a", "x")),
            format!("{}env = {{ K = \"v\" }}\n", stdio("a", "x")),
            format!("{}timeout_secs = 7\n", stdio("a", "x")),
            format!("{}volatile = true\n", stdio("a", "x")),
        ] {
            let plan = Reconcile::between(&old, &policy(&changed));
            assert_eq!(plan.restart, ["a"], "{changed}");
            assert!(plan.keep.is_empty());
        }
    }

    #[test]
    fn transport_changes_restart_and_listen_changes_wait_for_a_restart() {
        let old = policy(&format!(
            "[downstream]\nhttp = \"127.0.0.1:1\"\n{}",
            stdio("a", "x")
        ));
        let new = policy(
            "[downstream]\nhttp = \"127.0.0.1:2\"\n[[upstream]]\nname = \"a\"\nurl = \"http://127.0.0.1:9/mcp\"\n",
        );
        let plan = Reconcile::between(&old, &new);
        assert_eq!(plan.restart, ["a"]);
        assert_eq!(plan.needs_restart, ["downstream.http"]);
        assert!(
            plan.summary()
                .ends_with("not applied until restart: downstream.http")
        );
        // The transports' limits are read once, when they start serving.
        let limits = policy("[downstream]\nmax_sessions = 3\nstrict_accept = true\n");
        let plan = Reconcile::between(&policy(""), &limits);
        assert_eq!(
            plan.needs_restart,
            ["downstream.max_sessions", "downstream.strict_accept"]
        );
    }

    #[test]
    fn state_changes_wait_for_a_restart() {
        let redis = policy("[state]\nbackend = \"redis\"\nurl_env = \"U\"\n");
        assert!(Reconcile::between(&redis, &redis).needs_restart.is_empty());
        assert_eq!(
            Reconcile::between(&policy(""), &redis).needs_restart,
            ["state"]
        );
        let slower = policy("[state]\nbackend = \"redis\"\nurl_env = \"U\"\ntimeout_ms = 50\n");
        assert_eq!(Reconcile::between(&redis, &slower).needs_restart, ["state"]);
    }

    #[test]
    fn sessions_changes_wait_for_a_restart_named_by_their_keys() {
        let env = policy("[sessions]\nseal_key_env = \"K\"\n");
        assert!(Reconcile::between(&env, &env).needs_restart.is_empty());
        let plan = Reconcile::between(&policy(""), &env);
        assert_eq!(plan.needs_restart, ["sessions.seal_key_env"]);
        // From one source to the other: both keys changed.
        let file = policy("[sessions]\nseal_key_file = \"/k\"\nmax_lifetime_secs = 60\n");
        let plan = Reconcile::between(&env, &file);
        assert_eq!(
            plan.needs_restart,
            [
                "sessions.seal_key_env",
                "sessions.seal_key_file",
                "sessions.max_lifetime_secs"
            ]
        );
        // Listed after `[downstream]`'s, in one line of the summary.
        let both = policy(
            "[downstream]\nmax_sessions = 3\n[sessions]\nseal_key_env = \"K\"\nmax_lifetime_secs = 60\n",
        );
        let plan = Reconcile::between(&env, &both);
        assert!(plan.summary().ends_with(
            "not applied until restart: downstream.max_sessions, sessions.max_lifetime_secs"
        ));
    }

    #[test]
    fn a_new_separator_renames_without_touching_upstreams() {
        let old = policy(&stdio("a", "x"));
        let new = policy(&format!(
            "[aggregate]\nseparator = \"_\"\n{}",
            stdio("a", "x")
        ));
        let plan = Reconcile::between(&old, &new);
        assert!(plan.renames);
        assert_eq!(plan.keep, ["a"]);
    }
}
