//! The BPE encodings tokens are counted with (embedded in `tiktoken-rs`; no download).

use std::fmt;
use std::str::FromStr;

use tiktoken_rs::CoreBPE;

use super::Tokenizer;

/// A BPE encoding.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Encoding {
    /// GPT-4o, GPT-4.1, GPT-5, o-series.
    O200kBase,
    /// GPT-4, GPT-3.5; the base of the Claude estimate.
    Cl100kBase,
}

impl Encoding {
    /// The name used in policies (`o200k_base`, `cl100k_base`).
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::O200kBase => "o200k_base",
            Self::Cl100kBase => "cl100k_base",
        }
    }
}

impl fmt::Display for Encoding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An encoding name that is not `o200k_base` or `cl100k_base`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown tokenizer {0:?}; expected o200k_base or cl100k_base")]
pub struct UnknownEncoding(pub String);

impl FromStr for Encoding {
    type Err = UnknownEncoding;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "o200k_base" | "o200k" => Ok(Self::O200kBase),
            "cl100k_base" | "cl100k" => Ok(Self::Cl100kBase),
            other => Err(UnknownEncoding(other.to_owned())),
        }
    }
}

/// A [`Tokenizer`] over one of the embedded BPEs (loaded once per process).
#[derive(Clone, Copy)]
pub struct Bpe {
    encoding: Encoding,
    bpe: &'static CoreBPE,
}

impl fmt::Debug for Bpe {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Bpe")
            .field("encoding", &self.encoding)
            .finish()
    }
}

impl Bpe {
    /// The tokenizer of `encoding`. The first call per encoding parses the embedded table
    /// (tens of milliseconds).
    #[must_use]
    pub fn new(encoding: Encoding) -> Self {
        let bpe = match encoding {
            Encoding::O200kBase => tiktoken_rs::o200k_base_singleton(),
            Encoding::Cl100kBase => tiktoken_rs::cl100k_base_singleton(),
        };
        Self { encoding, bpe }
    }

    /// Its encoding.
    #[must_use]
    pub fn encoding(&self) -> Encoding {
        self.encoding
    }
}

impl Tokenizer for Bpe {
    fn count(&self, text: &str) -> usize {
        // Tool text never carries special tokens; count them as ordinary text.
        self.bpe.encode_ordinary(text).len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_known_strings() {
        assert_eq!(Bpe::new(Encoding::O200kBase).count("hello world"), 2);
        assert_eq!(Bpe::new(Encoding::Cl100kBase).count("hello world"), 2);
        assert_eq!(Bpe::new(Encoding::O200kBase).count(""), 0);
    }
}
