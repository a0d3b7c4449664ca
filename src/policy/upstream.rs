//! `[[upstream]]`: the MCP servers behind the gateway, how each is reached and spoken to.

use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;

use super::http::{HttpOptions, HttpTransport, RawHttp};
use super::problems::{At, Section};
use super::raw::RawUpstream;
use super::share::Share;
use crate::authz::Glob;

/// Default per-request upstream timeout.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);
/// Longest server id: leaves room for the separator and a tool name within 64 characters.
const MAX_NAME: usize = 32;

/// One upstream server.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct UpstreamSpec {
    /// Server id.
    pub name: String,
    /// How to reach it.
    pub transport: Transport,
    /// How long a request may go without a sign of life (an answer, progress for it, a
    /// server→client request to its client) before it fails with a timeout.
    pub timeout: Duration,
    /// Its tools are dynamic (listed after the static ones).
    pub volatile: bool,
    /// Which protocol era to speak to it.
    pub protocol: UpstreamProtocol,
    /// Roots the gateway answers this upstream's `roots/list` with itself, as MCP `Root`
    /// objects (`{"uri": "file:///...", "name"?: "..."}`); `None` when the policy declares none.
    pub roots: Option<Vec<serde_json::Value>>,
    /// HTTP transport and TLS files (`url` upstreams only).
    pub http: HttpOptions,
    /// `/readyz` waits for it (`required`, default true).
    pub required: bool,
    /// One instance for every client, or one per client (`share`, default global).
    pub share: Share,
    /// What its 2025-era requests to clients get while several clients have calls in flight
    /// (`server_requests`, default `refuse_ambiguous`).
    pub server_requests: ServerRequests,
    /// How long a request of its to a client waits for the answer
    /// (`server_request_timeout_secs`, default 30 s).
    pub server_request_timeout: Duration,
    /// Which of its tools are served (`include_tools`, `exclude_tools`; default all).
    pub tools: ToolFilter,
    /// When its server runs (`start`, `idle_stop_secs`; default eager).
    pub start: super::Start,
}

/// Which of an upstream's tools the gateway serves, by the server's own tool names
/// (`include_tools`, then `exclude_tools`). Pure.
///
/// ```
/// use mcp_budget::policy::ToolFilter;
///
/// let filter = ToolFilter::new(&["get_*", "list_*"], &["get_secret"]);
/// assert!(filter.keeps("get_issue"));
/// assert!(!filter.keeps("get_secret"));
/// assert!(!filter.keeps("delete_repo"));
/// assert!(ToolFilter::default().keeps("anything"));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolFilter {
    include: Vec<Glob>,
    exclude: Vec<Glob>,
}

impl ToolFilter {
    /// Serves the tools matching one of `include` (all when empty) and none of `exclude`.
    #[must_use]
    pub fn new<S: AsRef<str>>(include: &[S], exclude: &[S]) -> Self {
        let globs = |list: &[S]| list.iter().map(|g| Glob::new(g.as_ref())).collect();
        Self {
            include: globs(include),
            exclude: globs(exclude),
        }
    }

    /// Whether tool `name` (the server's own name) is served.
    #[must_use]
    pub fn keeps(&self, name: &str) -> bool {
        (self.include.is_empty() || self.include.iter().any(|g| g.matches(name)))
            && !self.exclude.iter().any(|g| g.matches(name))
    }

    /// One warning per `include` pattern that matches none of `names` (the server's own tool
    /// names, as it lists them): the pattern, the names closest to it (Jaro-Winkler, when
    /// close) or else a few of the server's names, so that a typo is seen at startup rather
    /// than as a server that lists nothing.
    #[must_use]
    pub fn unmatched(&self, names: &[&str]) -> Vec<String> {
        self.include
            .iter()
            .filter(|g| !names.iter().any(|n| g.matches(n)))
            .map(|g| {
                let pattern = g.as_str();
                let mut near: Vec<(f64, &str)> = (names.iter())
                    .map(|n| (strsim::jaro_winkler(pattern, n), *n))
                    .filter(|(score, _)| *score >= 0.8)
                    .collect();
                near.sort_by(|a, b| b.0.total_cmp(&a.0));
                let hint = if near.is_empty() {
                    let some: Vec<&str> = names.iter().take(5).copied().collect();
                    let more = names.len().saturating_sub(some.len());
                    let more = if more > 0 { format!(", … {more} more") } else { String::new() };
                    format!("its tools: {}{more}", some.join(", "))
                } else {
                    let near: Vec<&str> = near.iter().take(3).map(|(_, n)| *n).collect();
                    format!("did you mean {}?", near.join(", "))
                };
                format!(
                    "include pattern {pattern:?} matches none of the {} tools the server lists ({hint})",
                    names.len()
                )
            })
            .collect()
    }

    /// Whether every tool is served.
    #[must_use]
    pub fn is_all(&self) -> bool {
        self.include.is_empty() && self.exclude.is_empty()
    }
}

/// Default `server_request_timeout_secs`: how long a server→client request waits for its
/// client's answer.
pub const DEFAULT_SERVER_REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// How a 2025-era upstream's requests to clients (sampling, elicitation, roots) find their
/// client when several clients call it at once (`[[upstream]] server_requests`).
///
/// The wire of a 2025-era stdio server does not say which call a request of its belongs to;
/// the gateway knows it only when one client has calls in flight there. HTTP upstreams send a
/// request on the stream of its call, and 2026-07-28 requests are bound to their call, so both
/// are attributed exactly whatever this says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum ServerRequests {
    /// A request with more than one possible owner is refused (`mcp_budget.route.ambiguous`);
    /// calls run side by side.
    #[default]
    RefuseAmbiguous,
    /// A call of a client that declared sampling, elicitation or roots has the upstream to
    /// itself while it is in flight (other calls wait; calls of clients that declared none of
    /// them still run side by side with each other, and also while that call waits on its
    /// client's answer), so every request has exactly one owner.
    Serialize,
}

/// Which protocol era the gateway speaks to an upstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum UpstreamProtocol {
    /// Probe with `server/discover` (2026-07-28); fall back to `initialize` (2025-11-25) when
    /// the server answers with an error. The outcome is kept for restarts.
    #[default]
    Auto,
    /// 2026-07-28 only (stateless; `server/discover`, no `initialize`).
    Modern,
    /// 2025-11-25 and earlier only (`initialize`, sessions); no probe.
    Legacy,
}

impl UpstreamSpec {
    /// A stdio upstream with default settings.
    #[must_use]
    pub fn stdio(name: &str, command: &str, args: &[&str]) -> Self {
        Self::with_defaults(
            name,
            Transport::Stdio {
                command: command.to_owned(),
                args: args.iter().map(|&a| a.to_owned()).collect(),
                env: BTreeMap::new(),
                inherit_env: false,
                cwd: None,
            },
        )
    }

    /// A streamable HTTP upstream with default settings.
    #[must_use]
    pub fn http(name: &str, url: &str) -> Self {
        Self::with_defaults(
            name,
            Transport::Http {
                url: url.to_owned(),
                headers: BTreeMap::new(),
            },
        )
    }

    /// An upstream in the gateway's process with default settings.
    #[must_use]
    pub fn in_process(name: &str, server: super::InProcess) -> Self {
        Self::with_defaults(name, Transport::InProcess(server))
    }

    /// An upstream reached by `transport`, every other setting at its default.
    pub(crate) fn with_defaults(name: &str, transport: Transport) -> Self {
        Self {
            name: name.to_owned(),
            transport,
            timeout: DEFAULT_TIMEOUT,
            volatile: false,
            protocol: UpstreamProtocol::Auto,
            roots: None,
            http: HttpOptions::default(),
            required: true,
            share: Share::Global,
            server_requests: ServerRequests::RefuseAmbiguous,
            server_request_timeout: DEFAULT_SERVER_REQUEST_TIMEOUT,
            tools: ToolFilter::default(),
            start: super::Start::Eager,
        }
    }

    /// Sets the per-request timeout.
    #[must_use]
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Sets the protocol era spoken to it.
    #[must_use]
    pub fn with_protocol(mut self, protocol: UpstreamProtocol) -> Self {
        self.protocol = protocol;
        self
    }

    /// Sets the HTTP transport and TLS files (`url` upstreams).
    #[must_use]
    pub fn with_http(mut self, http: HttpOptions) -> Self {
        self.http = http;
        self
    }

    /// `stdio`, `http` or `in-process`, for logs.
    #[must_use]
    pub fn transport_name(&self) -> &'static str {
        match self.transport {
            Transport::Stdio { .. } => "stdio",
            Transport::Http { .. } => "http",
            Transport::InProcess(_) => "in-process",
        }
    }
}

/// How an upstream is reached.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Transport {
    /// A child process speaking newline-delimited JSON-RPC on stdin/stdout.
    Stdio {
        /// Program.
        command: String,
        /// Arguments, intact; an argument holding `${env:VAR}` gets it from the gateway's
        /// environment when the child starts.
        args: Vec<String>,
        /// Variables set for the child, on top of what it inherits.
        env: BTreeMap<String, String>,
        /// The child inherits the gateway's whole environment; when false it gets only a small
        /// base (`PATH`, `HOME`, locale, ...) plus `env`.
        inherit_env: bool,
        /// Working directory.
        cwd: Option<PathBuf>,
    },
    /// A streamable HTTP endpoint.
    Http {
        /// The endpoint URL.
        url: String,
        /// Extra headers (e.g. `Authorization`).
        headers: BTreeMap<String, String>,
    },
    /// A server in the gateway's process, added through the library
    /// ([`super::Policy::add_in_process`]).
    InProcess(super::InProcess),
}

impl Section for RawUpstream {
    /// `None` when the entry names no single way to reach the server.
    type Valid = Option<UpstreamSpec>;
    /// The names of the upstreams before this one (names must be unique).
    type Context<'c> = (&'c mut HashSet<String>, &'c super::start::StartDefaults);

    fn validate(self, (seen, defaults): Self::Context<'_>, mut at: At<'_>) -> Option<UpstreamSpec> {
        let up = self;
        check_unique_name(&up.name, seen, &mut at);
        let start = super::start::start(up.start.as_deref(), up.idle_stop_secs, defaults, &mut at);
        let timeout = at.secs("timeout_secs", up.timeout_secs, DEFAULT_TIMEOUT);
        let protocol = at
            .parse(
                "protocol",
                up.protocol.as_deref(),
                str::parse::<UpstreamProtocol>,
            )
            .unwrap_or_default();
        let roots = up.roots.map(|raw| check_roots(raw, at.at("roots")));
        let raw_http = RawHttp {
            transport: up.transport,
            ca_file: up.ca_file,
            client_cert_file: up.client_cert_file,
            client_key_file: up.client_key_file,
        };
        let (transport, http) = match (up.command, up.url) {
            (Some(command), None) => {
                let stdio = Stdio {
                    command,
                    args: up.args,
                    env: up.env,
                    inherit_env: up.inherit_env,
                    cwd: up.cwd,
                };
                (
                    stdio.validate(&raw_http, &up.headers, &mut at),
                    HttpOptions::default(),
                )
            }
            (None, Some(url)) => {
                if !up.args.is_empty() || !up.env.is_empty() || up.inherit_env || up.cwd.is_some() {
                    at.push_at(
                        "url",
                        "args, env, inherit_env and cwd apply to command upstreams only",
                    );
                }
                http_transport(url, up.headers, raw_http, protocol, &mut at)
            }
            (Some(_), Some(_)) => {
                at.push_at("command", "give either command or url, not both");
                return None;
            }
            (None, None) => {
                at.push_at(
                    "command",
                    "needs command (a stdio server) or url (a streamable HTTP server)",
                );
                return None;
            }
        };
        let (server_requests, server_request_timeout) = server_requests(
            up.server_requests.as_deref(),
            up.server_request_timeout_secs,
            &mut at,
        );
        let tools = ToolFilter::new(&up.include_tools, &up.exclude_tools);
        let share = super::share::share(up.share.as_deref(), up.idle_secs, up.max_instances, at);
        Some(UpstreamSpec {
            name: up.name,
            transport,
            timeout,
            volatile: up.volatile,
            protocol,
            roots,
            http,
            required: up.required.unwrap_or(true),
            share,
            server_requests,
            server_request_timeout,
            tools,
            start,
        })
    }
}

/// A problem when `name` is no valid server id or an earlier upstream has it.
fn check_unique_name(name: &str, seen: &mut HashSet<String>, at: &mut At<'_>) {
    if let Err(message) = check_name(name) {
        at.push_at("name", message);
    }
    if !seen.insert(name.to_owned()) {
        at.push_at(
            "name",
            format!("{name:?} is used by an earlier upstream; names must be unique"),
        );
    }
}

/// `server_requests` and `server_request_timeout_secs`, checked.
fn server_requests(
    mode: Option<&str>,
    timeout_secs: Option<u64>,
    at: &mut At<'_>,
) -> (ServerRequests, Duration) {
    let mode = at.one_of(
        "server_requests",
        mode,
        ServerRequests::RefuseAmbiguous,
        &[
            ("refuse_ambiguous", ServerRequests::RefuseAmbiguous),
            ("serialize", ServerRequests::Serialize),
        ],
    );
    let timeout = at.secs(
        "server_request_timeout_secs",
        timeout_secs,
        DEFAULT_SERVER_REQUEST_TIMEOUT,
    );
    (mode, timeout)
}

/// The keys of a `command` upstream.
struct Stdio {
    command: String,
    args: Vec<String>,
    env: BTreeMap<String, String>,
    inherit_env: bool,
    cwd: Option<PathBuf>,
}

impl Stdio {
    /// The transport, with a problem for each key that applies to `url` upstreams only.
    fn validate(
        self,
        http: &RawHttp,
        headers: &BTreeMap<String, String>,
        at: &mut At<'_>,
    ) -> Transport {
        if http.any() {
            at.push_at(
                "transport",
                "transport, ca_file, client_cert_file and client_key_file apply to url upstreams only",
            );
        }
        if !headers.is_empty() {
            at.push_at("headers", "headers apply to url upstreams only");
        }
        if self.command.trim().is_empty() {
            at.push_at("command", "must not be empty");
        }
        Transport::Stdio {
            command: self.command,
            args: self.args,
            env: self.env,
            inherit_env: self.inherit_env,
            cwd: self.cwd,
        }
    }
}

/// A `url` upstream's transport and HTTP options.
fn http_transport(
    url: String,
    headers: BTreeMap<String, String>,
    raw: RawHttp,
    protocol: UpstreamProtocol,
    at: &mut At<'_>,
) -> (Transport, HttpOptions) {
    check_url(&url, &headers, at);
    let http = raw.validate((), at.reborrow());
    if http.transport == HttpTransport::Sse && protocol == UpstreamProtocol::Modern {
        at.push_at(
            "transport",
            "the 2024-11-05 HTTP+SSE transport cannot carry protocol 2026-07-28",
        );
    }
    (Transport::Http { url, headers }, http)
}

impl std::str::FromStr for UpstreamProtocol {
    type Err = String;

    /// `protocol` as written: `auto`, `2026-07-28` (`modern`) or `2025-11-25` (`legacy`).
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(Self::Auto),
            "2026-07-28" | "modern" => Ok(Self::Modern),
            "2025-11-25" | "legacy" => Ok(Self::Legacy),
            other => Err(format!(
                "{other:?} is not one of \"auto\", \"2026-07-28\", \"2025-11-25\""
            )),
        }
    }
}

/// A `url` upstream's URL and header names.
fn check_url(url: &str, headers: &BTreeMap<String, String>, at: &mut At<'_>) {
    // `${env:…}` is resolved when the gateway starts (`Policy::resolve_env`): check the URL's
    // shape with the defaults, else with a stand-in value.
    let syntax = super::expand::Syntax::Policy;
    let probe = super::expand::expand(url, &syntax, &|_| None)
        .or_else(|_| super::expand::expand(url, &syntax, &|_| Some("x".to_owned())))
        .unwrap_or_else(|_| url.to_owned());
    match probe.parse::<http::Uri>() {
        Ok(uri) if matches!(uri.scheme_str(), Some("http" | "https")) => {}
        _ => at.push_at(
            "url",
            format!(
                "\"{}\" is not an http(s) URL such as http://127.0.0.1:3001/mcp",
                crate::redact::Url(url)
            ),
        ),
    }
    for name in headers.keys() {
        if http::HeaderName::from_bytes(name.as_bytes()).is_err() {
            at.push_at("headers", format!("{name:?} is not a header name"));
        }
    }
}

/// A server id must be usable as a tool-name prefix on every LLM API.
pub(crate) fn check_name(name: &str) -> Result<(), String> {
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
/// objects, every problem reported at its entry (`<path>[i]`, `<path>[i].uri`, ...).
fn check_roots(raw: Vec<toml::Value>, mut at: At<'_>) -> Vec<Value> {
    let mut roots = Vec::new();
    for (i, entry) in raw.into_iter().enumerate() {
        let mut at = at.index(i);
        let (uri, in_table, name) = match entry {
            toml::Value::String(uri) => (Some(uri), false, None),
            toml::Value::Table(mut table) => {
                let uri = match table.remove("uri") {
                    Some(toml::Value::String(uri)) => Some(uri),
                    Some(other) => {
                        let kind = other.type_str();
                        at.push_at("uri", format!("must be a string, not {kind}"));
                        None
                    }
                    None => {
                        at.push_at(
                            "uri",
                            "missing; a root needs a URI such as file:///srv/data",
                        );
                        None
                    }
                };
                let name = match table.remove("name") {
                    Some(toml::Value::String(name)) => Some(name),
                    Some(other) => {
                        let kind = other.type_str();
                        at.push_at("name", format!("must be a string, not {kind}"));
                        None
                    }
                    None => None,
                };
                for key in table.keys() {
                    at.push_at(key, "unknown key; a root table has only `uri` and `name`");
                }
                (uri, true, name)
            }
            other => {
                let kind = other.type_str();
                at.push(format!(
                    "must be a URI string or a {{ uri = \"...\", name = \"...\" }} table, not {kind}"
                ));
                continue;
            }
        };
        let Some(uri) = uri else { continue };
        if let Err(message) = check_file_uri(&uri) {
            if in_table {
                at.push_at("uri", message);
            } else {
                at.push(message);
            }
            continue;
        }
        let mut root = serde_json::Map::new();
        root.insert("uri".into(), Value::String(uri));
        if let Some(name) = name {
            root.insert("name".into(), Value::String(name));
        }
        roots.push(Value::Object(root));
    }
    roots
}

/// MCP roots are `file://` URIs (RFC 8089): an optional host, then an absolute path. Spaces,
/// controls and the characters a URI path cannot hold must be percent-encoded; a query or a
/// fragment means nothing for a root. Non-ASCII is accepted as written (an IRI).
pub(super) fn check_file_uri(uri: &str) -> Result<(), String> {
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
