//! Fuzz targets of mcp-budget: the bytes that reach the gateway from clients and from its
//! configuration files. Each binary in `src/bin/` feeds AFL++ input to one check of [`checks`];
//! `scripts/fuzz.sh` builds and runs them, `docs/fuzzing.md` explains how.

pub mod checks;
