//! The `_meta` keys of the 2026-07-28 era (`io.modelcontextprotocol/…`), which both
//! [`super::modern`] (reading a modern request) and [`super::bridge`] (translating between eras)
//! name: a leaf, so that neither imports the other for a key.

/// `_meta` key of the request's protocol version.
pub const META_PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
/// [`META_PROTOCOL_VERSION`] as encoders that escape `/` write it.
pub(crate) const META_PROTOCOL_VERSION_ESCAPED: &str = r"io.modelcontextprotocol\/protocolVersion";
/// `_meta` key of the client's capabilities.
pub const META_CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
/// `_meta` key of the client's info.
pub const META_CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";
/// `_meta` key of the server's info in a `server/discover` result.
pub const META_SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";
/// `_meta` key by which a modern request opts in to log notifications, at a minimum level.
pub const META_LOG_LEVEL: &str = "io.modelcontextprotocol/logLevel";
