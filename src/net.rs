//! The gateway's own HTTP/1.1 client: hyper connections driven by the caller, a small idle
//! pool, and rustls under the `tls` feature.
//!
//! HTTP upstreams (`upstream::http`) send MCP through it; [`get_document`] fetches what the
//! gateway reads besides MCP (a JWKS), and a [`Poster`] sends the OTLP trace exporter's
//! `https://` batches. It imports only the policy's HTTP options (and `crate::lock`), so that
//! telemetry can use it without importing `upstream`.

pub(crate) mod client;
mod document;
#[cfg(feature = "tls")]
mod tls;

pub use document::{Poster, get_document};
