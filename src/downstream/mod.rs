//! How hosts reach the gateway: stdio and streamable HTTP, both at once if asked.

pub mod http;
pub mod stdio;
