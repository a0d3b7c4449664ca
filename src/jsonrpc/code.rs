//! Every JSON-RPC error code the gateway sends or reads, one constant each.
//!
//! JSON-RPC 2.0 reserves `-32768..=-32000`: the five standard codes (`-32700`, `-32600..=-32603`)
//! and a range for implementation-defined server errors (`-32000..=-32099`), which MCP and its
//! drafts use. The gateway also answers a cancelled request with LSP's `-32800`, outside that
//! range. A code says which family an error belongs to; its stable name is the `data.type`
//! kind (`crate::error::kind`).
//!
//! This module imports nothing, so that every part of the crate (the JSON-RPC envelope, the
//! MCP eras, the error mapping) can use it without importing the others.

/// Invalid JSON was received (JSON-RPC 2.0).
pub const PARSE_ERROR: i64 = -32700;
/// The JSON sent is not a valid request object (JSON-RPC 2.0).
pub const INVALID_REQUEST: i64 = -32600;
/// The method does not exist or is not available (JSON-RPC 2.0).
pub const METHOD_NOT_FOUND: i64 = -32601;
/// Invalid method parameters (JSON-RPC 2.0).
pub const INVALID_PARAMS: i64 = -32602;
/// Internal error (JSON-RPC 2.0).
pub const INTERNAL_ERROR: i64 = -32603;

/// A server error in the implementation-defined range: an upstream failed, the gateway is
/// shutting down, a client's answer to an upstream's question failed, or a call was refused.
pub const SERVER_ERROR: i64 = -32000;
/// A request refused because it is too large.
pub const TOO_LARGE: i64 = -32001;
/// A resource the client may not see or that does not exist (`RESOURCE_NOT_AVAILABLE` of the
/// draft `tools/describe` SEP).
pub const RESOURCE_NOT_AVAILABLE: i64 = -32002;
/// HTTP headers do not match the body, or a required one is missing (2026-07-28).
pub const HEADER_MISMATCH: i64 = -32020;
/// The request needs a client capability it did not declare (2026-07-28).
pub const MISSING_CAPABILITY: i64 = -32021;
/// The requested protocol version is not supported (2026-07-28).
pub const UNSUPPORTED_VERSION: i64 = -32022;
/// A call refused by a gateway limit (`RateLimited` of the draft rate-limiting SEP), with
/// `error.data.retryAfterMs`.
pub const RATE_LIMITED: i64 = -32023;

/// The answer to a request the client cancelled (as LSP's `RequestCancelled`; MCP defines none
/// because it expects no answer at all).
pub const REQUEST_CANCELLED: i64 = -32800;
