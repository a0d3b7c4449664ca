//! MCP protocol facts the gateway reads: eras, `_meta` keys, HTTP header rules.

pub mod modern;
