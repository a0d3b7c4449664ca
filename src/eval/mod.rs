//! The pure core of `mcp-budget eval` (the command is `cli::eval`): reading the tool calls
//! a model made ([`calls`]), the exposures compared ([`exposure`]), the fixed lists of the
//! `flat-N` exposures ([`flat`]) and scoring episodes ([`score`]). Nothing here does I/O.

pub mod calls;
pub mod exposure;
pub mod flat;
pub mod score;
