//! The one way the gateway reads a file a policy or a flag names (the policy, `--mcp-json`,
//! the lockfile, the usage file, keys, certificates, saved lists, the vector cache): regular
//! files only (a device such as `/dev/zero`, a FIFO or a directory is refused before it is
//! read), at most a size cap, and text checked as UTF-8 with the offset of the first bad byte.
//! A UTF-8 byte order mark (Windows editors write one) is dropped from text.

use std::io::{self, Read as _};
use std::path::Path;

/// The largest configuration file read (64 MiB): far above any real policy, host config,
/// lockfile or usage file (a 10,000-server `mcp.json` is about 2 MiB).
pub(crate) const MAX_CONFIG_BYTES: u64 = 64 << 20;

/// The gateway's cache folder `leaf`: `$XDG_CACHE_HOME/mcp-budget/<leaf>`, else
/// `$HOME/.cache/mcp-budget/<leaf>`, else none.
#[must_use]
pub(crate) fn cache_dir(leaf: &str) -> Option<std::path::PathBuf> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(std::path::PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|v| !v.is_empty())
                .map(|home| std::path::PathBuf::from(home).join(".cache"))
        })?;
    Some(base.join("mcp-budget").join(leaf))
}

/// The bytes of the regular file at `path`, at most `limit` of them.
///
/// # Errors
/// The OS error; `InvalidInput` for a file that is not a regular file; `InvalidData` for one
/// larger than `limit`.
pub(crate) fn read_bytes(path: &Path, limit: u64) -> io::Result<Vec<u8>> {
    // Checked before opening: opening a FIFO for reading blocks until a writer comes.
    regular(&std::fs::metadata(path)?)?;
    let file = std::fs::File::open(path)?;
    let meta = file.metadata()?;
    regular(&meta)?;
    if meta.len() > limit {
        return Err(too_large(limit));
    }
    let mut bytes = Vec::new();
    // The file may grow after the check: read one byte past the cap at most.
    file.take(limit.saturating_add(1)).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(too_large(limit));
    }
    Ok(bytes)
}

/// The text of the regular file at `path` (at most [`MAX_CONFIG_BYTES`]), without a leading
/// byte order mark.
///
/// # Errors
/// As [`read_bytes`]; `InvalidData` naming the byte offset, line and column of the first
/// byte that is not UTF-8.
pub(crate) fn read_text(path: &Path) -> io::Result<String> {
    text(read_bytes(path, MAX_CONFIG_BYTES)?)
}

/// `bytes` as text without a leading byte order mark, or where the first invalid byte is.
fn text(bytes: Vec<u8>) -> io::Result<String> {
    let mut text = String::from_utf8(bytes).map_err(|e| {
        let at = e.utf8_error().valid_up_to();
        let before = &e.as_bytes()[..at];
        let line = before.iter().filter(|b| **b == b'\n').count() + 1;
        let start = before
            .iter()
            .rposition(|b| *b == b'\n')
            .map_or(0, |n| n + 1);
        let column = String::from_utf8_lossy(&before[start..]).chars().count() + 1;
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("not UTF-8: invalid byte at offset {at} (line {line}, column {column})"),
        )
    })?;
    if text.starts_with('\u{feff}') {
        text.drain(..'\u{feff}'.len_utf8());
    }
    Ok(text)
}

fn regular(meta: &std::fs::Metadata) -> io::Result<()> {
    if meta.is_file() {
        return Ok(());
    }
    let what = if meta.is_dir() {
        "a directory"
    } else {
        "a device, FIFO or socket"
    };
    Err(io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("not a regular file ({what})"),
    ))
}

fn too_large(limit: u64) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("larger than {limit} bytes"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_and_directories_are_refused_and_sizes_capped() {
        let dir = tempfile::tempdir().unwrap();
        let e = read_text(Path::new("/dev/zero")).unwrap_err();
        assert_eq!(
            e.to_string(),
            "not a regular file (a device, FIFO or socket)"
        );
        let e = read_text(dir.path()).unwrap_err();
        assert_eq!(e.to_string(), "not a regular file (a directory)");
        let big = dir.path().join("big");
        std::fs::write(&big, vec![b'a'; 11]).unwrap();
        assert_eq!(read_bytes(&big, 11).unwrap().len(), 11);
        assert_eq!(
            read_bytes(&big, 10).unwrap_err().to_string(),
            "larger than 10 bytes"
        );
    }

    #[test]
    fn text_names_the_first_bad_byte_and_drops_a_bom() {
        let e = text(b"version = 1\n# \xc3\xa9 \xff\n".to_vec()).unwrap_err();
        assert_eq!(
            e.to_string(),
            "not UTF-8: invalid byte at offset 17 (line 2, column 5)"
        );
        assert_eq!(text(b"\xef\xbb\xbf{}".to_vec()).unwrap(), "{}");
        assert_eq!(text(b"a\xef\xbb\xbf".to_vec()).unwrap(), "a\u{feff}");
    }
}
