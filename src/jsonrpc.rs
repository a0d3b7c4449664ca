//! The lossless JSON-RPC 2.0 envelope.
//!
//! A [`Message`] is decoded once at the edge of the gateway. Its `params`, `result` and
//! `error.data` stay raw JSON ([`RawValue`](serde_json::value::RawValue)) so that what the
//! gateway does not rewrite goes back out byte for byte; layers that rewrite a payload parse
//! just that payload, into views that keep unknown fields (`serde_json` with `preserve_order`).
//!
//! ```
//! use mcp_budget::jsonrpc::{Message, Kind};
//!
//! let msg = Message::parse(br#"{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{"x":1}}"#)?;
//! assert_eq!(msg.kind(), Kind::Request);
//! assert_eq!(msg.method(), Some("tools/list"));
//! assert_eq!(msg.params.as_ref().map(|p| p.get()), Some(r#"{"x":1}"#));
//! # Ok::<(), mcp_budget::jsonrpc::DecodeError>(())
//! ```
//!
//! The envelope is [`Message`] (`message`), its [`Id`] (`id`), the [`ErrorObject`] of an
//! error response (`error`), decoding with its [`DecodeError`] (`decode`), the
//! newline-delimited framing of stdio peers ([`write_lines`]) and every JSON-RPC code
//! ([`code`]). This module and its children import nothing else of the crate.

pub mod code;
mod decode;
mod depth;
mod error;
mod id;
mod id_scan;
mod lines;
mod message;

pub use code::{INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND, PARSE_ERROR};
pub use decode::DecodeError;
pub use depth::nesting_depth;
pub use error::ErrorObject;
pub use id::{Id, RawNumber};
pub use id_scan::IdScanner;
pub(crate) use lines::push_line;
pub use lines::write_lines;
pub use message::{Kind, Message, Version, to_raw};

#[cfg(test)]
mod tests;
