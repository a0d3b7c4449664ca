//! Who a session or a connection counts against: the authenticated client, or the address
//! of anonymous traffic, found behind `[downstream] trusted_proxies` from the one header they
//! set (`forwarded_header`: `X-Forwarded-For` or `Forwarded`). Pure: no I/O, no state.

use std::collections::HashMap;
use std::fmt;
use std::net::IpAddr;

use axum::http::HeaderMap;
use ipnet::IpNet;

use crate::identity::{Principal, Via};
use crate::policy::ForwardedHeader;

/// What the per-client caps (`max_sessions_per_client`, `max_connections_per_client`) count.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) enum Owner {
    /// An authenticated `[[client]]`, per token subject when the token names one of its own.
    Client {
        /// The client's name.
        name: String,
        /// The token's subject, when it differs from the client.
        subject: Option<String>,
    },
    /// Anonymous traffic (a gateway without clients, or a connection before it
    /// authenticated): its address.
    Addr(IpAddr),
}

impl Owner {
    /// The owner of what `principal` opens from `addr`: the client when one authenticated,
    /// else the address (`None` when the address is unknown: nothing to count against).
    pub(super) fn of(principal: &Principal, addr: Option<IpAddr>) -> Option<Self> {
        if principal.via() == Via::Anonymous {
            return addr.map(Self::Addr);
        }
        Some(Self::Client {
            name: principal.name().to_owned(),
            subject: principal.subject().map(str::to_owned),
        })
    }

    /// Whose sessions or connections, for a refusal: `from 10.0.0.7`, `of client "bob"`.
    pub(super) fn whose(&self) -> String {
        match self {
            Self::Addr(_) => format!("from {self}"),
            Self::Client { .. } => format!("of {self}"),
        }
    }
}

/// How many sessions (or connections) each owner has open: what the per-client caps compare.
#[derive(Debug, Default)]
pub(super) struct Tally(HashMap<Owner, usize>);

impl Tally {
    /// How many `owner` has open.
    pub(super) fn get(&self, owner: &Owner) -> usize {
        self.0.get(owner).copied().unwrap_or(0)
    }

    /// One more for `owner`.
    pub(super) fn add(&mut self, owner: Owner) {
        *self.0.entry(owner).or_insert(0) += 1;
    }

    /// One fewer for `owner` (forgotten at none, so the table holds only owners with some).
    pub(super) fn remove(&mut self, owner: &Owner) {
        if let Some(n) = self.0.get_mut(owner) {
            *n -= 1;
            if *n == 0 {
                self.0.remove(owner);
            }
        }
    }
}

impl fmt::Display for Owner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Client {
                name,
                subject: None,
            } => write!(f, "client {name:?}"),
            Self::Client {
                name,
                subject: Some(sub),
            } => write!(f, "client {name:?} (subject {sub:?})"),
            Self::Addr(ip) => write!(f, "{ip}"),
        }
    }
}

/// Whether `ip` is one of `trusted` proxies.
pub(super) fn is_trusted(ip: IpAddr, trusted: &[IpNet]) -> bool {
    let ip = ip.to_canonical();
    trusted.iter().any(|net| net.contains(&ip))
}

/// The client's address of a request that came from `peer`: `peer` itself, unless it is a
/// trusted proxy; then the right-most address of `header` (every line of it, in order: one
/// list) that is not a trusted proxy itself (the left-most when all are). Only `header` is
/// read: a proxy passes a client's own copy of the other one through, naming whatever the
/// client likes. What lies left of the client's address is the client's own writing and is
/// never read; a hop right of it that names no address (`for=unknown`, an obfuscated name,
/// no `for=`, not an address) stops the walk at `peer`: a proxy's own address is the safe
/// fallback, never a guess.
pub(super) fn client_addr(
    peer: IpAddr,
    headers: &HeaderMap,
    trusted: &[IpNet],
    header: ForwardedHeader,
) -> IpAddr {
    let peer = peer.to_canonical();
    if trusted.is_empty() || !is_trusted(peer, trusted) {
        return peer;
    }
    let mut left_most_proxy = None;
    // Right to left, lines and the hops in each.
    for value in headers.get_all(header.name()).iter().rev() {
        let Ok(text) = value.to_str() else {
            return peer;
        };
        for hop in text.rsplit(',') {
            let ip = match header {
                ForwardedHeader::XForwardedFor => parse_node(hop.trim()),
                ForwardedHeader::Forwarded => forwarded_for(hop).and_then(parse_node),
            };
            let Some(ip) = ip.map(|ip| ip.to_canonical()) else {
                return peer;
            };
            if !is_trusted(ip, trusted) {
                return ip;
            }
            left_most_proxy = Some(ip);
        }
    }
    left_most_proxy.unwrap_or(peer)
}

/// The `for=` node of one `Forwarded` element (`for=192.0.2.1;proto=https`), if it has one.
fn forwarded_for(element: &str) -> Option<&str> {
    element.split(';').find_map(|pair| {
        let (key, value) = pair.split_once('=')?;
        key.trim().eq_ignore_ascii_case("for").then(|| value.trim())
    })
}

/// An RFC 7239 node (`192.0.2.1`, `"192.0.2.1:443"`, `"[2001:db8::1]:80"`, `2001:db8::1` as
/// X-Forwarded-For writes it) as an address.
fn parse_node(node: &str) -> Option<IpAddr> {
    let node = node.trim_matches('"');
    if let Ok(ip) = node.parse() {
        return Some(ip);
    }
    if let Some(rest) = node.strip_prefix('[') {
        return rest.split_once(']')?.0.parse().ok();
    }
    // `v4:port`.
    let (host, port) = node.rsplit_once(':')?;
    port.parse::<u16>().ok()?;
    host.parse::<std::net::Ipv4Addr>().ok().map(IpAddr::V4)
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn nets(list: &[&str]) -> Vec<IpNet> {
        list.iter().map(|s| s.parse().unwrap()).collect()
    }

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    const XFF: ForwardedHeader = ForwardedHeader::XForwardedFor;
    const FWD: ForwardedHeader = ForwardedHeader::Forwarded;

    #[test]
    fn without_trusted_proxies_the_headers_are_ignored() {
        let h = headers(&[
            ("x-forwarded-for", "203.0.113.9"),
            ("forwarded", "for=1.2.3.4"),
        ]);
        for header in [XFF, FWD] {
            assert_eq!(client_addr(ip("10.0.0.7"), &h, &[], header), ip("10.0.0.7"));
            // A peer that is not trusted cannot name another client either.
            let trusted = nets(&["10.0.0.0/24"]);
            assert_eq!(
                client_addr(ip("10.0.1.7"), &h, &trusted, header),
                ip("10.0.1.7")
            );
        }
    }

    #[test]
    fn the_right_most_untrusted_forwarded_address_is_the_client() {
        let trusted = nets(&["10.0.0.0/24"]);
        // The client may prepend anything; only what trusted proxies appended counts.
        let h = headers(&[("x-forwarded-for", "1.2.3.4, 203.0.113.9, 10.0.0.8")]);
        assert_eq!(
            client_addr(ip("10.0.0.7"), &h, &trusted, XFF),
            ip("203.0.113.9")
        );
        // Two lines are one list: the client's own, then the one HAProxy adds.
        let h = headers(&[
            ("x-forwarded-for", "1.2.3.4"),
            ("x-forwarded-for", "203.0.113.9"),
        ]);
        assert_eq!(
            client_addr(ip("10.0.0.7"), &h, &trusted, XFF),
            ip("203.0.113.9")
        );
        // All trusted: the left-most.
        let h = headers(&[("x-forwarded-for", "10.0.0.9, 10.0.0.8")]);
        assert_eq!(
            client_addr(ip("10.0.0.7"), &h, &trusted, XFF),
            ip("10.0.0.9")
        );
        // The same in `Forwarded`.
        let h = headers(&[
            ("forwarded", "for=1.2.3.4"),
            ("forwarded", "for=203.0.113.9;proto=https, for=10.0.0.8"),
        ]);
        assert_eq!(
            client_addr(ip("10.0.0.7"), &h, &trusted, FWD),
            ip("203.0.113.9")
        );
    }

    #[test]
    fn only_the_header_the_proxy_sets_is_read() {
        let trusted = nets(&["127.0.0.1/32"]);
        // What HAProxy `option forwardfor` passes on: the client's own `Forwarded` (naming a
        // victim) and `X-Forwarded-For` (a spoof), then the address HAProxy saw.
        let h = headers(&[
            ("forwarded", "for=198.51.100.7"),
            ("x-forwarded-for", "198.51.100.8"),
            ("x-forwarded-for", "203.0.113.9"),
        ]);
        assert_eq!(
            client_addr(ip("127.0.0.1"), &h, &trusted, XFF),
            ip("203.0.113.9")
        );
        // A proxy that sets `Forwarded`: a client's `X-Forwarded-For` names nobody, even alone.
        let h = headers(&[
            ("x-forwarded-for", "198.51.100.8"),
            ("forwarded", "for=198.51.100.7, for=203.0.113.9"),
        ]);
        assert_eq!(
            client_addr(ip("127.0.0.1"), &h, &trusted, FWD),
            ip("203.0.113.9")
        );
        let h = headers(&[("x-forwarded-for", "198.51.100.8")]);
        assert_eq!(
            client_addr(ip("127.0.0.1"), &h, &trusted, FWD),
            ip("127.0.0.1")
        );
        let h = headers(&[("forwarded", "for=198.51.100.7")]);
        assert_eq!(
            client_addr(ip("127.0.0.1"), &h, &trusted, XFF),
            ip("127.0.0.1")
        );
    }

    #[test]
    fn nodes_parse_with_quotes_ports_and_v6() {
        let trusted = nets(&["127.0.0.1/32"]);
        let h = headers(&[("forwarded", r#"proto=http;For="[2001:db8::1]:4711""#)]);
        assert_eq!(
            client_addr(ip("127.0.0.1"), &h, &trusted, FWD),
            ip("2001:db8::1")
        );
        let h = headers(&[("forwarded", r#"for="10.1.2.3:80""#)]);
        assert_eq!(
            client_addr(ip("127.0.0.1"), &h, &trusted, FWD),
            ip("10.1.2.3")
        );
        let h = headers(&[("x-forwarded-for", "2001:db8::2, ::ffff:203.0.113.9")]);
        assert_eq!(
            client_addr(ip("127.0.0.1"), &h, &trusted, XFF),
            ip("203.0.113.9")
        );
        // An IPv4-mapped IPv6 peer is its IPv4 address.
        assert_eq!(
            client_addr(ip("::ffff:127.0.0.1"), &HeaderMap::new(), &trusted, XFF),
            ip("127.0.0.1")
        );
    }

    #[test]
    fn a_hop_that_names_no_address_right_of_the_client_leaves_the_proxy() {
        let trusted = nets(&["127.0.0.1/32"]);
        for (h, header) in [
            (
                headers(&[("x-forwarded-for", "203.0.113.9, not-an-ip")]),
                XFF,
            ),
            (headers(&[("x-forwarded-for", "")]), XFF),
            (headers(&[("forwarded", "for=unknown")]), FWD),
            (headers(&[("forwarded", "for=_hidden")]), FWD),
            (
                headers(&[("forwarded", "for=203.0.113.9, proto=https")]),
                FWD,
            ),
            (HeaderMap::new(), XFF),
            (HeaderMap::new(), FWD),
        ] {
            assert_eq!(
                client_addr(ip("127.0.0.1"), &h, &trusted, header),
                ip("127.0.0.1"),
                "{h:?}"
            );
        }
        // What the client wrote left of its address is never read.
        let h = headers(&[
            ("x-forwarded-for", "not-an-ip, for=1.2.3.4"),
            ("x-forwarded-for", "203.0.113.9"),
        ]);
        assert_eq!(
            client_addr(ip("127.0.0.1"), &h, &trusted, XFF),
            ip("203.0.113.9")
        );
        let mut h = HeaderMap::new();
        h.append(
            "x-forwarded-for",
            HeaderValue::from_bytes(b"\xff\xfe").unwrap(),
        );
        h.append("x-forwarded-for", HeaderValue::from_static("203.0.113.9"));
        assert_eq!(
            client_addr(ip("127.0.0.1"), &h, &trusted, XFF),
            ip("203.0.113.9")
        );
    }

    #[test]
    fn anonymous_traffic_counts_per_address_and_clients_per_name() {
        let anon = Principal::anonymous();
        assert_eq!(
            Owner::of(&anon, Some(ip("10.0.0.1"))),
            Some(Owner::Addr(ip("10.0.0.1")))
        );
        assert_eq!(Owner::of(&anon, None), None);
        assert_eq!(Owner::Addr(ip("10.0.0.1")).to_string(), "10.0.0.1");
        let bob = Owner::Client {
            name: "bob".into(),
            subject: None,
        };
        assert_eq!(bob.to_string(), "client \"bob\"");
        assert_eq!(bob.whose(), "of client \"bob\"");
        assert_eq!(Owner::Addr(ip("10.0.0.1")).whose(), "from 10.0.0.1");
        let mut tally = Tally::default();
        tally.add(bob.clone());
        tally.add(bob.clone());
        tally.remove(&bob);
        assert_eq!(tally.get(&bob), 1);
        tally.remove(&bob);
        assert!(tally.0.is_empty(), "an owner with none is forgotten");
    }
}
