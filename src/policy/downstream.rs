//! `[downstream]`: how hosts reach the gateway (stdio, streamable HTTP) and the limits on what
//! they send.

use std::net::{IpAddr, SocketAddr};

use ipnet::IpNet;
use std::num::NonZeroUsize;
use std::time::Duration;

use super::nonzero;
use super::problems::{At, Section};
use super::raw::RawDownstream;

/// Default largest message accepted from a client: 4 MiB.
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 4 * 1024 * 1024;
/// Default deepest nesting of objects and arrays in a client message.
pub const DEFAULT_MAX_JSON_DEPTH: usize = 128;
/// Default time an HTTP client gets to send a request's body.
pub const DEFAULT_BODY_TIMEOUT: Duration = Duration::from_secs(30);
/// Default cap on open HTTP connections.
pub const DEFAULT_MAX_CONNECTIONS: NonZeroUsize = nonzero(512);
/// Default cap on open HTTP connections from one client address.
pub const DEFAULT_MAX_CONNECTIONS_PER_CLIENT: NonZeroUsize = nonzero(128);
/// Default cap on live HTTP sessions.
pub const DEFAULT_MAX_SESSIONS: NonZeroUsize = nonzero(4096);
/// Default cap on live HTTP sessions opened from one client address.
pub const DEFAULT_MAX_SESSIONS_PER_CLIENT: NonZeroUsize = nonzero(256);
/// Default time an unused HTTP session lives.
pub const DEFAULT_SESSION_IDLE: Duration = Duration::from_secs(1800);
/// Default cap on messages queued for a client stream the client is not reading.
pub const DEFAULT_MAX_OUTBOUND_MESSAGES: NonZeroUsize = nonzero(1024);

/// `[downstream]`, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Downstream {
    /// Serve over stdio.
    pub stdio: bool,
    /// Serve streamable HTTP on this address.
    pub http: Option<SocketAddr>,
    /// Origins accepted besides localhost ones.
    pub allowed_origins: Vec<String>,
    /// Hosts accepted besides localhost ones.
    pub allowed_hosts: Vec<String>,
    /// Largest accepted message.
    pub max_message_bytes: usize,
    /// How long an HTTP client may take to send a request's body (`body_timeout_secs`).
    pub body_timeout: Duration,
    /// Open HTTP connections, all clients together.
    pub max_connections: NonZeroUsize,
    /// Open HTTP connections of one client: its `[[client]]` once a request on the connection
    /// authenticated, its address before (or without clients).
    pub max_connections_per_client: NonZeroUsize,
    /// Live 2025-era HTTP sessions, all clients together.
    pub max_sessions: NonZeroUsize,
    /// Live 2025-era HTTP sessions of one client: its `[[client]]` (and token subject), or the
    /// address that opened them for anonymous traffic.
    pub max_sessions_per_client: NonZeroUsize,
    /// How long an HTTP session may go unused before it expires (`session_idle_secs`).
    pub session_idle: Duration,
    /// Messages queued for one HTTP client stream the client is not reading.
    pub max_outbound_messages: NonZeroUsize,
    /// Deepest nesting of objects and arrays in a client message (the message is level 1).
    pub max_json_depth: usize,
    /// Whether an HTTP POST must accept both JSON and SSE (`strict_accept`).
    pub strict_accept: bool,
    /// The client stdio messages come from (`stdio_client`).
    pub stdio_client: Option<String>,
    /// Serve a non-loopback address without client authentication (`allow_anonymous`).
    pub allow_anonymous: bool,
    /// Proxies whose [`ForwardedHeader`] names the client (`trusted_proxies`).
    pub trusted_proxies: Vec<IpNet>,
    /// The header trusted proxies name the client in (`forwarded_header`).
    pub forwarded_header: ForwardedHeader,
}

/// The header a trusted proxy names the client in (`[downstream] forwarded_header`): the one
/// the proxy sets. The other is ignored entirely: a proxy passes a client's own copy through,
/// so it names whatever the client likes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum ForwardedHeader {
    /// `X-Forwarded-For: client, proxy1, …` (`HAProxy` `option forwardfor`, nginx
    /// `$proxy_add_x_forwarded_for`).
    #[default]
    XForwardedFor,
    /// `Forwarded: for=client, for=proxy1` (RFC 7239; `HAProxy` `option forwarded`, nginx with a
    /// `proxy_set_header Forwarded` line).
    Forwarded,
}

impl ForwardedHeader {
    /// The header's name, lower-case (as `forwarded_header` writes it).
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::XForwardedFor => "x-forwarded-for",
            Self::Forwarded => "forwarded",
        }
    }
}

impl Default for Downstream {
    fn default() -> Self {
        Self {
            stdio: false,
            http: None,
            allowed_origins: Vec::new(),
            allowed_hosts: Vec::new(),
            max_message_bytes: DEFAULT_MAX_MESSAGE_BYTES,
            body_timeout: DEFAULT_BODY_TIMEOUT,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            max_connections_per_client: DEFAULT_MAX_CONNECTIONS_PER_CLIENT,
            max_sessions: DEFAULT_MAX_SESSIONS,
            max_sessions_per_client: DEFAULT_MAX_SESSIONS_PER_CLIENT,
            session_idle: DEFAULT_SESSION_IDLE,
            max_json_depth: DEFAULT_MAX_JSON_DEPTH,
            max_outbound_messages: DEFAULT_MAX_OUTBOUND_MESSAGES,
            strict_accept: false,
            stdio_client: None,
            allow_anonymous: false,
            trusted_proxies: Vec::new(),
            forwarded_header: ForwardedHeader::XForwardedFor,
        }
    }
}

impl Section for RawDownstream {
    type Valid = Downstream;
    type Context<'c> = ();

    fn validate(self, (): (), mut at: At<'_>) -> Downstream {
        let d = Downstream::default();
        let http = at.parse("http", self.http.as_deref(), |a| {
            a.parse::<SocketAddr>()
                .map_err(|e| format!("not a socket address such as 127.0.0.1:8931: {e}"))
        });
        let max_message_bytes = at.parse("max_message_bytes", self.max_message_bytes, |n| {
            if n == 0 {
                Err("must be greater than 0")
            } else {
                Ok(n)
            }
        });
        let max_connections =
            at.positive("max_connections", self.max_connections, d.max_connections);
        let max_connections_per_client = at.positive(
            "max_connections_per_client",
            self.max_connections_per_client,
            d.max_connections_per_client,
        );
        let max_sessions = at.positive("max_sessions", self.max_sessions, d.max_sessions);
        let max_sessions_per_client = at.positive(
            "max_sessions_per_client",
            self.max_sessions_per_client,
            d.max_sessions_per_client,
        );
        let max_outbound_messages = at.positive(
            "max_outbound_messages",
            self.max_outbound_messages,
            d.max_outbound_messages,
        );
        let body_timeout = at.secs("body_timeout_secs", self.body_timeout_secs, d.body_timeout);
        let session_idle = at.secs("session_idle_secs", self.session_idle_secs, d.session_idle);
        let max_json_depth = at.parse("max_json_depth", self.max_json_depth, |n| {
            if n == 0 {
                Err("must be greater than 0 (a message is an object: level 1)")
            } else {
                Ok(n)
            }
        });
        for (i, origin) in self.allowed_origins.iter().enumerate() {
            if !(origin.starts_with("http://") || origin.starts_with("https://")) {
                (at.at("allowed_origins").index(i)).push(format!(
                    "{origin:?} is not an origin such as https://app.example.com"
                ));
            }
        }
        let (trusted_proxies, forwarded_header) = forwarding(
            &self.trusted_proxies,
            self.forwarded_header.as_deref(),
            &mut at,
        );
        Downstream {
            stdio: self.stdio,
            http,
            allowed_origins: self.allowed_origins,
            allowed_hosts: self.allowed_hosts,
            max_message_bytes: max_message_bytes.unwrap_or(d.max_message_bytes),
            body_timeout,
            max_connections,
            max_connections_per_client,
            max_sessions,
            max_sessions_per_client,
            session_idle,
            max_outbound_messages,
            max_json_depth: max_json_depth.unwrap_or(d.max_json_depth),
            strict_accept: self.strict_accept,
            stdio_client: self.stdio_client,
            allow_anonymous: self.allow_anonymous,
            trusted_proxies,
            forwarded_header,
        }
    }
}

/// Widest trusted IPv4 network `check` accepts without a warning: a /8 (`10.0.0.0/8`).
const WIDEST_V4_PREFIX: u8 = 8;
/// Widest trusted IPv6 network `check` accepts without a warning outside unique-local and
/// link-local space: a /32 (a whole provider allocation).
const WIDEST_V6_PREFIX: u8 = 32;

impl Downstream {
    /// `(path, message)` of what `check` warns about in the forwarding settings: a trusted
    /// range wider than an IPv4 /8 or an IPv6 /32 (unique-local `fc00::/7` and link-local
    /// `fe80::/10` excepted), `0.0.0.0/0` and `::/0` above all, whose every address may name
    /// any client; a `forwarded_header` that nothing reads.
    pub(super) fn forwarding_warnings(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        let header = self.forwarded_header.name();
        for (i, net) in self.trusted_proxies.iter().enumerate() {
            if !too_wide(net) {
                continue;
            }
            let what = if net.prefix_len() == 0 {
                "trusts every address".to_owned()
            } else {
                format!("trusts a /{} of the address space", net.prefix_len())
            };
            out.push((
                format!("downstream.trusted_proxies[{i}]"),
                format!(
                    "{net} {what}: any client connecting from it can name any address in \
                     `{header}`, choosing what the per-address caps count or locking another \
                     address out; list only the proxies' own addresses or subnets"
                ),
            ));
        }
        if self.trusted_proxies.is_empty() && self.forwarded_header != ForwardedHeader::default() {
            out.push((
                "downstream.forwarded_header".to_owned(),
                "has no effect without downstream.trusted_proxies: no proxy is trusted to name \
                 the client"
                    .to_owned(),
            ));
        }
        out
    }
}

/// Whether trusting `net` lets too many hosts name clients (see
/// [`Downstream::forwarding_warnings`]).
fn too_wide(net: &IpNet) -> bool {
    match net {
        IpNet::V4(v4) => v4.prefix_len() < WIDEST_V4_PREFIX,
        IpNet::V6(v6) => {
            let local = ["fc00::/7", "fe80::/10"]
                .iter()
                .filter_map(|s| s.parse::<ipnet::Ipv6Net>().ok())
                .any(|space| space.contains(v6));
            v6.prefix_len() < WIDEST_V6_PREFIX && !local
        }
    }
}

/// `trusted_proxies` and `forwarded_header`, checked.
fn forwarding(
    trusted: &[String],
    header: Option<&str>,
    at: &mut At<'_>,
) -> (Vec<IpNet>, ForwardedHeader) {
    let trusted = (trusted.iter().enumerate())
        .filter_map(|(i, text)| {
            let net = parse_net(text);
            if let Err(why) = &net {
                (at.at("trusted_proxies").index(i)).push(why.clone());
            }
            net.ok()
        })
        .collect();
    // A header name: any case.
    let header = header.map(str::to_ascii_lowercase);
    let header = at.one_of(
        "forwarded_header",
        header.as_deref(),
        ForwardedHeader::XForwardedFor,
        &[
            ("x-forwarded-for", ForwardedHeader::XForwardedFor),
            ("forwarded", ForwardedHeader::Forwarded),
        ],
    );
    (trusted, header)
}

/// A proxy's address (`10.0.0.7`, `::1`: that one host) or network (`10.0.0.0/8`).
fn parse_net(text: &str) -> Result<IpNet, String> {
    text.parse::<IpNet>()
        .or_else(|_| text.parse::<IpAddr>().map(IpNet::from))
        .map_err(|_| {
            format!("{text:?} is not an IP address or CIDR network such as 10.0.0.0/8 or ::1")
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::Policy;

    fn downstream(keys: &str) -> Result<Downstream, String> {
        let text = format!("version = 1\n[downstream]\n{keys}\n");
        Policy::from_toml_str(&text, "t.toml")
            .map(|p| p.downstream)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn forwarded_header_names_one_header_in_any_case() {
        let d = downstream("").unwrap();
        assert_eq!(d.forwarded_header, ForwardedHeader::XForwardedFor);
        for (value, header) in [
            ("X-Forwarded-For", ForwardedHeader::XForwardedFor),
            ("forwarded", ForwardedHeader::Forwarded),
            ("Forwarded", ForwardedHeader::Forwarded),
        ] {
            let d = downstream(&format!("forwarded_header = {value:?}")).unwrap();
            assert_eq!(d.forwarded_header, header, "{value}");
        }
        let err = downstream("forwarded_header = \"x-real-ip\"").unwrap_err();
        assert!(
            err.contains("downstream.forwarded_header")
                && err.contains(r#""x-real-ip" is not one of "x-forwarded-for", "forwarded""#),
            "{err}"
        );
    }
}
