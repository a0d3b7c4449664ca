//! Catalog vectors on disk: one file per model (named by the start of its digest) holding
//! (sha256 of a tool text, vector) records, so a restart or a catalog change embeds only the
//! tools whose text changed.
//!
//! The directory is `[discover] embedding_cache_dir`, by default
//! [`default_dir`]: `$XDG_CACHE_HOME/mcp-budget/embeddings`, else
//! `$HOME/.cache/mcp-budget/embeddings`. A file that is unreadable, truncated or of another
//! width is ignored (everything is embedded again) and replaced at the next save; saving
//! writes a temporary file and renames it, so readers never see half a file.
//!
//! File format: `MCPBVEC1`, the width and the record count (u32 little-endian each), then per
//! record 32 bytes of sha256 and `width` f32 little-endian.

use std::collections::HashMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

const MAGIC: &[u8; 8] = b"MCPBVEC1";

/// The largest cache file read (1 GiB: 700,000 tools at 384 dimensions).
const MAX_CACHE_BYTES: u64 = 1 << 30;

/// How far a cached vector's length may be from 1 (the embedder normalises every vector; f32
/// rounding over 384 or 768 dimensions stays far below this).
const UNIT_NORM_TOLERANCE: f32 = 1e-3;

/// The sha256 of a tool text: its key in the cache.
pub type TextKey = [u8; 32];

/// The key of `text`.
#[must_use]
pub fn text_key(text: &str) -> TextKey {
    Sha256::digest(text.as_bytes()).into()
}

/// `$XDG_CACHE_HOME/mcp-budget/embeddings`, else `$HOME/.cache/mcp-budget/embeddings`, else
/// none (no disk cache).
#[must_use]
pub fn default_dir() -> Option<PathBuf> {
    crate::files::cache_dir("embeddings")
}

/// The vectors of one model, by text key; read from and saved to one file.
#[derive(Debug)]
pub struct VectorCache {
    file: Option<PathBuf>,
    dims: usize,
    entries: HashMap<TextKey, Vec<f32>>,
    /// Entries added since the file was read or saved.
    dirty: bool,
}

impl VectorCache {
    /// The cache of the model with `digest` and vector width `dims` in `dir` (`None`: in
    /// memory only). A missing or unusable file gives an empty cache.
    #[must_use]
    pub fn open(dir: Option<&Path>, digest: &str, dims: usize) -> Self {
        let file = dir.map(|d| d.join(format!("{}.vectors", &digest[..digest.len().min(16)])));
        let mut entries = file
            .as_deref()
            .and_then(|f| crate::files::read_bytes(f, MAX_CACHE_BYTES).ok())
            .and_then(|bytes| parse(&bytes, dims))
            .unwrap_or_default();
        // A vector that is not finite or not of length 1 (a bad write, another tool's file)
        // would change every ranking silently: dropped, so its tool is embedded again, and
        // the file rewritten at the next save.
        let read = entries.len();
        entries.retain(|_, v| usable(v));
        let dropped = read - entries.len();
        if dropped > 0 {
            tracing::warn!(
                file = %file.as_deref().map(Path::display).map(|d| d.to_string()).unwrap_or_default(),
                dropped,
                "Embedding cache vectors not finite or not of unit length; their tools are embedded again"
            );
        }
        Self {
            file,
            dims,
            entries,
            dirty: dropped > 0,
        }
    }

    /// The file it reads and saves, if any.
    #[must_use]
    pub fn file(&self) -> Option<&Path> {
        self.file.as_deref()
    }

    /// How many vectors it holds.
    #[must_use]
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether it holds no vector.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The vector of the text with `key`.
    #[must_use]
    pub fn get(&self, key: &TextKey) -> Option<&[f32]> {
        self.entries.get(key).map(Vec::as_slice)
    }

    /// Adds a vector (ignored unless it is `dims` wide, finite and of unit length).
    pub fn insert(&mut self, key: TextKey, vector: Vec<f32>) {
        if vector.len() == self.dims && usable(&vector) {
            self.entries.insert(key, vector);
            self.dirty = true;
        }
    }

    /// Writes the file when vectors were added (creating the directory).
    ///
    /// # Errors
    /// The directory or file cannot be written.
    pub fn save(&mut self) -> std::io::Result<()> {
        let Some(file) = self.file.as_deref().filter(|_| self.dirty) else {
            return Ok(());
        };
        if let Some(dir) = file.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let mut bytes = Vec::with_capacity(16 + self.entries.len() * (32 + 4 * self.dims));
        bytes.extend_from_slice(MAGIC);
        bytes.extend_from_slice(&u32_of(self.dims).to_le_bytes());
        bytes.extend_from_slice(&u32_of(self.entries.len()).to_le_bytes());
        for (key, vector) in &self.entries {
            bytes.extend_from_slice(key);
            for v in vector {
                bytes.extend_from_slice(&v.to_le_bytes());
            }
        }
        let temporary = file.with_extension(format!("tmp{}", std::process::id()));
        let mut out = std::fs::File::create(&temporary)?;
        out.write_all(&bytes)?;
        out.sync_all()?;
        std::fs::rename(&temporary, file)?;
        self.dirty = false;
        Ok(())
    }
}

/// Whether `vector` is what the embedder makes: finite, of length 1.
fn usable(vector: &[f32]) -> bool {
    let norm = vector.iter().map(|v| v * v).sum::<f32>().sqrt();
    vector.iter().all(|v| v.is_finite()) && (norm - 1.0).abs() <= UNIT_NORM_TOLERANCE
}

fn u32_of(n: usize) -> u32 {
    u32::try_from(n).expect("fewer than 2^32 vectors and dimensions")
}

/// The records of a cache file, or `None` when it is not one of width `dims`.
fn parse(bytes: &[u8], dims: usize) -> Option<HashMap<TextKey, Vec<f32>>> {
    let word = |at: usize| -> Option<usize> {
        let b: [u8; 4] = bytes.get(at..at + 4)?.try_into().ok()?;
        usize::try_from(u32::from_le_bytes(b)).ok()
    };
    if bytes.get(..8)? != MAGIC || word(8)? != dims {
        return None;
    }
    let count = word(12)?;
    let record = 32 + 4 * dims;
    let body = bytes.get(16..)?;
    if body.len() != count.checked_mul(record)? {
        return None;
    }
    let mut entries = HashMap::with_capacity(count);
    for chunk in body.chunks_exact(record) {
        let key: TextKey = chunk[..32].try_into().ok()?;
        let vector = chunk[32..]
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        entries.insert(key, vector);
    }
    Some(entries)
}

/// Lower-case hex.
#[cfg(feature = "semantic")]
pub(super) fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn saved_vectors_load_again_and_a_bad_file_is_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let mut cache = VectorCache::open(Some(dir.path()), "abcdef0123456789ff", 3);
        assert!(cache.is_empty());
        cache.insert(text_key("a"), vec![1.0, 0.0, 0.0]);
        cache.insert(text_key("b"), vec![0.0, 1.0]); // wrong width: ignored
        cache.save().unwrap();
        let file = dir.path().join("abcdef0123456789.vectors");
        assert_eq!(cache.file(), Some(file.as_path()));
        let again = VectorCache::open(Some(dir.path()), "abcdef0123456789ff", 3);
        assert_eq!(again.len(), 1);
        assert_eq!(again.get(&text_key("a")), Some(&[1.0, 0.0, 0.0][..]));
        // Another width, or a truncated file: nothing is trusted.
        assert!(VectorCache::open(Some(dir.path()), "abcdef0123456789", 4).is_empty());
        let bytes = std::fs::read(&file).unwrap();
        std::fs::write(&file, &bytes[..bytes.len() - 1]).unwrap();
        assert!(VectorCache::open(Some(dir.path()), "abcdef0123456789", 3).is_empty());
    }

    #[test]
    fn vectors_not_finite_or_not_of_unit_length_are_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let digest = "0123456789abcdef00";
        let mut cache = VectorCache::open(Some(dir.path()), digest, 2);
        cache.insert(text_key("nan"), vec![f32::NAN, 0.0]);
        cache.insert(text_key("long"), vec![3.0, 4.0]);
        assert!(cache.is_empty(), "insert refuses them");
        // A file written by something else: one good record, a NaN one, a zero one.
        let mut bytes = MAGIC.to_vec();
        bytes.extend_from_slice(&2u32.to_le_bytes());
        bytes.extend_from_slice(&3u32.to_le_bytes());
        for (text, vector) in [
            ("good", [0.6f32, 0.8]),
            ("nan", [f32::NAN; 2]),
            ("zero", [0.0; 2]),
        ] {
            bytes.extend_from_slice(&text_key(text));
            for v in vector {
                bytes.extend_from_slice(&v.to_le_bytes());
            }
        }
        let file = dir.path().join("0123456789abcdef.vectors");
        std::fs::write(&file, &bytes).unwrap();
        let mut read = VectorCache::open(Some(dir.path()), digest, 2);
        assert_eq!(read.len(), 1);
        assert_eq!(read.get(&text_key("good")), Some(&[0.6, 0.8][..]));
        assert_eq!(read.get(&text_key("nan")), None, "embedded again");
        read.save().unwrap();
        assert_eq!(
            VectorCache::open(Some(dir.path()), digest, 2).len(),
            1,
            "file rewritten"
        );
    }
}
