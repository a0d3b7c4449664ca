//! MCP protocol facts the gateway reads: method names, eras, `_meta` keys, HTTP header rules,
//! and the translation between eras.

pub mod bridge;
pub mod method;
pub mod modern;
pub mod params;
pub mod view;
