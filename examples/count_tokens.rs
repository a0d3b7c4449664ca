//! Prints the o200k token count of each file given, as its exact bytes (trailing newline
//! dropped): the measure `scripts/compare-compressor.py` applies to the `tools/list` results
//! of both gateways, so both sides are counted by the same tokenizer in the same way.
//!
//! `cargo run --release --example count_tokens -- FILE...` prints `COUNT<TAB>FILE` per file.
#![allow(clippy::print_stdout, missing_docs)]

use mcp_budget::tokens::{Bpe, Encoding, Tokenizer};

fn main() -> std::io::Result<()> {
    let bpe = Bpe::new(Encoding::O200kBase);
    for path in std::env::args().skip(1) {
        let text = std::fs::read_to_string(&path)?;
        println!("{}\t{path}", bpe.count(text.trim_end_matches('\n')));
    }
    Ok(())
}
