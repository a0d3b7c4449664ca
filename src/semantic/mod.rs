//! The optional semantic reranker of `search_tools`: a sentence-embedding model (BERT, e.g.
//! all-MiniLM-L6-v2) whose cosine between the query and each tool's text is fused with the
//! lexical scores of [`crate::search`] ([`crate::search::SearchIndex::search_fused`]).
//!
//! - [`Embedder`] (feature `semantic`): loads a sentence-transformers directory
//!   (`config.json`, `tokenizer.json`, `model.safetensors`) and embeds texts the way
//!   sentence-transformers does for this family of models: tokenize (truncated at
//!   [`MAX_TOKENS`], whatever the shipped `tokenizer.json` says), BERT forward, masked mean
//!   pooling over the last hidden state, L2 normalisation; the cosine is then a dot product.
//! - [`tool_text`]: what is embedded for a tool (name words, description, parameter names).
//! - [`cache`]: catalog vectors on disk, keyed by the model's hash and each tool text's hash,
//!   so only changed tools are embedded again.
//! - [`Reranker`] (feature `semantic`): the gateway's side: the model loaded and the catalog
//!   embedded off the serving path, the dense scores of a query once they are ready.
//!
//! Nothing is downloaded: the model is a directory the operator names (`[discover]
//! embedding_model`). Without the `semantic` feature only the file checks, the tool text and
//! the cache format are compiled, so `check` can still name a missing model file.
//!
//! ```no_run
//! # #[cfg(feature = "semantic")]
//! # fn main() -> Result<(), mcp_budget::semantic::SemanticError> {
//! use mcp_budget::semantic::Embedder;
//!
//! let embedder = Embedder::load(std::path::Path::new("models/all-MiniLM-L6-v2"))?;
//! let vectors = embedder.embed(&["weather forecast", "what's the temperature tomorrow"])?;
//! let cosine: f32 = vectors[0].iter().zip(&vectors[1]).map(|(a, b)| a * b).sum();
//! assert!(cosine > 0.3);
//! # Ok(())
//! # }
//! # #[cfg(not(feature = "semantic"))]
//! # fn main() {}
//! ```

pub mod cache;
#[cfg(feature = "semantic")]
mod embedder;
#[cfg(feature = "semantic")]
mod reranker;
mod text;

use std::path::{Path, PathBuf};

#[cfg(feature = "semantic")]
pub use embedder::Embedder;
#[cfg(feature = "semantic")]
pub use reranker::{CatalogTexts, Reranker};
pub use text::tool_text;

/// The files a model directory must hold, in the order they are read.
pub const MODEL_FILES: [&str; 3] = ["config.json", "tokenizer.json", "model.safetensors"];

/// Longest input in tokens; longer texts are cut (sentence-transformers' `max_seq_length` for
/// all-MiniLM-L6-v2; its `tokenizer.json` says 128, which is not what the model was used with).
pub const MAX_TOKENS: usize = 256;

/// Texts run through the model at once: larger batches pad more and hold more activations
/// (measured: batch 4 embedded a 702-tool catalog faster and in less than half the memory of
/// batch 16).
pub const BATCH: usize = 4;

/// Why a model could not be loaded or run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SemanticError {
    /// A file of the model directory is not there.
    #[error("model file {} is missing (a sentence-transformers directory holds {})", path.display(), MODEL_FILES.join(", "))]
    Missing {
        /// The missing file.
        path: PathBuf,
    },
    /// A file could not be read.
    #[error("cannot read {}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// `config.json` is not a BERT configuration.
    #[error("{} is not a BERT model configuration", path.display())]
    Config {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: serde_json::Error,
    },
    /// `tokenizer.json` could not be loaded or used.
    #[error("tokenizer {}: {message}", path.display())]
    Tokenizer {
        /// The file.
        path: PathBuf,
        /// The tokenizer's message.
        message: String,
    },
    /// The weights do not fit the configuration, or the model failed on an input.
    #[error("model {}: {message}", path.display())]
    Model {
        /// The weights file.
        path: PathBuf,
        /// The model library's message.
        message: String,
    },
}

/// The model files missing from `dir` (all of them when it is not a directory).
#[must_use]
pub fn missing_files(dir: &Path) -> Vec<PathBuf> {
    MODEL_FILES
        .iter()
        .map(|file| dir.join(file))
        .filter(|path| !path.is_file())
        .collect()
}

/// The cosine of `query` with each row of `vectors` (all L2-normalised, `query.len()` wide):
/// the dense scores [`crate::search::SearchIndex::search_fused`] takes.
#[must_use]
pub fn cosines(query: &[f32], vectors: &[f32]) -> Vec<f32> {
    if query.is_empty() {
        return Vec::new();
    }
    vectors
        .chunks_exact(query.len())
        .map(|row| row.iter().zip(query).map(|(a, b)| a * b).sum())
        .collect()
}

#[cfg(all(test, feature = "semantic"))]
mod tests;
