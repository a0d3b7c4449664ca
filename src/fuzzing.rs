//! Private entry points for the fuzz targets (`fuzz/`) and `tests/it/fuzz_props.rs`.
//!
//! Not a stable API: these wrap functions that are internal to the gateway so the fuzzers reach
//! exactly the code that reads client bytes, without making that code public.

use tokio::io::{AsyncRead, BufReader};

use crate::downstream::stdio::{Line, read_line};
use crate::jsonrpc::Id;
use crate::policy::{ConfigError, UpstreamSpec};

/// One line as the stdio downstream reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StdioLine {
    /// A line within the limit, as read (its newline included when it had one).
    Kept(Vec<u8>),
    /// A line over the limit, discarded as it was read.
    TooLarge {
        /// Its length without the newline.
        size: usize,
        /// Its top-level id, as the error answering it carries it.
        id: Option<Id>,
    },
}

/// Every line the stdio downstream reads from `input` through a buffer of `capacity` bytes, with
/// `limit` as `max_message_bytes`, until the input ends.
///
/// # Errors
/// The I/O error of `input`.
pub async fn stdio_lines<R: AsyncRead + Unpin>(
    input: R,
    capacity: usize,
    limit: usize,
) -> std::io::Result<Vec<StdioLine>> {
    let mut reader = BufReader::with_capacity(capacity.max(1), input);
    let mut lines = Vec::new();
    loop {
        let mut line = Vec::new();
        match read_line(&mut reader, &mut line, limit).await? {
            Line::End => return Ok(lines),
            Line::Kept => lines.push(StdioLine::Kept(line)),
            Line::TooLarge { size, id } => lines.push(StdioLine::TooLarge { size, id }),
        }
    }
}

/// The upstreams of a Claude Desktop / Claude Code `mcpServers` JSON text, as
/// [`crate::policy::Policy::add_mcp_json`] reads a file.
///
/// # Errors
/// [`ConfigError`] when the text is not such a file or names invalid servers.
pub fn mcp_json(text: &str) -> Result<Vec<UpstreamSpec>, ConfigError> {
    crate::import::mcp_json::parse(text, "mcp.json")
}
