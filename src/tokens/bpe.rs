//! The BPE encodings tokens are counted with (embedded in `tiktoken-rs`; no download).

use std::cell::RefCell;
use std::fmt;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

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

/// A [`Tokenizer`] over one of the embedded BPEs, loaded when text is counted and let go
/// once nothing was counted for 30 s to twice that (the tables of a loaded BPE take 20 MB
/// for cl100k and 40 MB for o200k, more than the rest of a gateway; counting happens when a
/// catalog changes, and its segment cache keeps the counts).
#[derive(Clone, Copy)]
pub struct Bpe {
    encoding: Encoding,
}

impl fmt::Debug for Bpe {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Bpe")
            .field("encoding", &self.encoding)
            .finish()
    }
}

impl Bpe {
    /// The tokenizer of `encoding`. The first count after a load parses the embedded table
    /// (tens of milliseconds).
    #[must_use]
    pub fn new(encoding: Encoding) -> Self {
        Self { encoding }
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
        loaded(self.encoding).encode_ordinary(text).len()
    }
}

/// How long a loaded BPE is kept with nothing counted.
pub(crate) const IDLE: Duration = Duration::from_secs(30);

/// The loaded BPEs, by [`Encoding`] index.
static LOADED: Mutex<[Option<Arc<CoreBPE>>; 2]> = Mutex::new([None, None]);

/// Whether each BPE counted (or loaded) since the sweeper's last look, set without the lock.
static USED: [AtomicBool; 2] = [AtomicBool::new(false), AtomicBool::new(false)];

thread_local! {
    /// This thread's handles on the loaded BPEs: a count finds its BPE without the lock (a
    /// catalog is counted segment by segment, thousands of counts), and holds it only while
    /// counting, so the sweeper can still let it go.
    static HANDLES: RefCell<[Weak<CoreBPE>; 2]> = const { RefCell::new([Weak::new(), Weak::new()]) };
}

/// The BPE of `encoding`, loaded if it is not; marked as used.
fn loaded(encoding: Encoding) -> Arc<CoreBPE> {
    let slot = encoding as usize;
    USED[slot].store(true, Ordering::Relaxed);
    if let Some(bpe) = HANDLES.with(|h| h.borrow()[slot].upgrade()) {
        return bpe;
    }
    let bpe = load(encoding);
    HANDLES.with(|h| h.borrow_mut()[slot] = Arc::downgrade(&bpe));
    bpe
}

/// The BPE of `encoding` from [`LOADED`], parsed from the embedded table if it is not there.
fn load(encoding: Encoding) -> Arc<CoreBPE> {
    let slot = encoding as usize;
    let mut all = crate::lock::lock(&LOADED);
    USED[slot].store(true, Ordering::Relaxed);
    if let Some(bpe) = &all[slot] {
        return bpe.clone();
    }
    let bpe = Arc::new(
        match encoding {
            Encoding::O200kBase => tiktoken_rs::o200k_base(),
            Encoding::Cl100kBase => tiktoken_rs::cl100k_base(),
        }
        // The tables are embedded in the binary: they parse.
        .unwrap_or_else(|err| panic!("the embedded {encoding:?} BPE: {err}")),
    );
    let first = all.iter().all(Option::is_none);
    all[slot] = Some(bpe.clone());
    drop(all);
    if first {
        let _ = std::thread::Builder::new()
            .name("mcp-budget-bpe".into())
            .spawn(sweep);
    }
    bpe
}

/// Lets go of each BPE that counted nothing for [`IDLE`] to twice that (it looks every
/// [`IDLE`]); ends when none is loaded (the next load starts it again).
fn sweep() {
    loop {
        std::thread::sleep(IDLE);
        let mut all = crate::lock::lock(&LOADED);
        for (slot, used) in all.iter_mut().zip(&USED) {
            if !used.swap(false, Ordering::Relaxed) {
                *slot = None;
            }
        }
        if all.iter().all(Option::is_none) {
            return;
        }
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
