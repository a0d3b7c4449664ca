//! MCP protocol facts the gateway reads: eras, `_meta` keys, HTTP header rules, and the
//! translation between eras.

pub mod bridge;
pub mod modern;
pub mod params;
pub mod view;
