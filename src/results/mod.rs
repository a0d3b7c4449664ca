//! Result economy: what a tool result costs the model, made smaller without losing anything.
//!
//! - [`compact`]: lossless renderings of a result's text (`[budget.tools."server/tool"]
//!   result_format`): JSON minified, JSON as TOON ([`toon`]), CSV as a TOON table, YAML data
//!   ([`yaml`]) as TOON — used only when the counted tokens drop, never for text that is not
//!   well-formed, never for an `isError` result.
//! - [`spill`]: a result over its `max_result_tokens` keeps a head and a structural summary;
//!   the whole of it goes to the session's [`store`], and the `read_result` meta-tool pages
//!   through it (by offset, JSON pointer or substring).
//!
//! All of it is pure but the store (a bounded map in memory).

pub mod compact;
pub mod spill;
pub mod store;
pub mod toon;
pub mod yaml;

pub use compact::{Compaction, ResultFormat, compact_result, compact_text};
pub use spill::{
    READ_RESULT, Read, ReadError, Spill, Stored, read_definition, read_page, spill_result,
};
pub use store::{ResultStore, StoreLimits};

#[cfg(test)]
mod corpus_tests;
