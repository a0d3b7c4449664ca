//! MCP protocol facts the gateway reads: method names, eras, `_meta` keys, HTTP header rules,
//! and the translation between eras.

pub mod bridge;
pub mod method;
pub mod modern;
pub mod params;
pub mod view;

/// The protocol era of a request, a client or an upstream.
///
/// A request's era is what its view says ([`view::RequestView::era`]); an upstream's is
/// `Option<Era>`, `None` until its first handshake tells
/// ([`Upstream::era`](crate::upstream::Upstream::era)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Era {
    /// 2025-11-25 and before (and 2024-11-05): `initialize`, sessions, server→client
    /// requests; a session's `initialize` said what the client is.
    #[default]
    Legacy,
    /// 2026-07-28: stateless, the `_meta` envelope on every request (or the transport said
    /// so), MRTR.
    Modern,
}
