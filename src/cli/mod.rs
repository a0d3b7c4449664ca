//! The offline commands (`inspect`, `render`, `search`) that work on saved `tools/list` results.
//! Built with the default `cli` feature.

pub mod inspect;
pub mod render;
pub mod search;
