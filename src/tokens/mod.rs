//! Token counting of what the host pays for tools, per host rendering.
//!
//! Hosts do not send tools to models as MCP JSON: `OpenAI` models see a TypeScript namespace,
//! Anthropic models see the Messages API `tools` JSON plus a fixed tool-use system prompt. A
//! [`Counter`] renders each tool the way its [`Rendering`] does and counts the text with a
//! [`Tokenizer`] (o200k or cl100k BPE, times a calibration factor where the model's tokenizer is
//! not public). It takes plain values: how to count ([`Counting`], which a model profile
//! converts into) and the words a host sees besides the definitions ([`Wording`]). Counts are
//! cached by content hash, so an unchanged catalog costs no tokenization.
//!
//! ```
//! use mcp_budget::catalog::CatalogTool;
//! use mcp_budget::profile::{resolve, ProfileOverrides};
//! use mcp_budget::tokens::{Counter, Wording};
//! use serde_json::json;
//!
//! let profile = resolve("gpt-4o", &ProfileOverrides::default())?;
//! let counter = Counter::new(&profile);
//! let tool = CatalogTool::new("time", json!({"name": "now", "description": "Current time",
//!     "inputSchema": {"type": "object"}}))?;
//! let measured = counter.measure(&[tool], &Wording::new("__", Vec::new()));
//! assert_eq!(measured.tools[0].direct[0], 13); // "// Current time\ntype time__now = () => any;\n\n"
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod bpe;
mod count;
pub(crate) mod openai;
mod render;

/// How far a tool description is compressed: what [`Measured::total_at`] counts at.
pub use crate::compress::Level;
pub use bpe::{Bpe, Encoding, UnknownEncoding};
pub use count::{Counter, Counting, Measured, ToolCounts, Wording};

/// The heading that introduces catalog lines in the search meta-tool's description.
pub const LISTING_HEADER_TEXT: &str = count::LISTING_HEADER;
pub use render::{ALWAYS_LOAD, Rendering, UnknownRendering, render_tool};

/// Counts tokens of a text.
pub trait Tokenizer: Send + Sync + std::fmt::Debug {
    /// Number of tokens of `text`.
    fn count(&self, text: &str) -> usize;
}
