//! Manifests: what an upstream listed (its tools, prompts, resources and resource templates,
//! as the server gave them) and what its handshake said (protocol version, era,
//! capabilities, `serverInfo`, instructions), keyed by what starts it, so that a lazy upstream
//! is listed, planned and routed without running.
//!
//! # The key
//!
//! What starts the server: the command, its arguments (as the policy gives them), working
//! directory and `inherit_env`, the names of its environment variables with a SHA-256 of each
//! value (never the values), or the URL (shown redacted) with a SHA-256 of the whole URL and
//! its headers' names and value hashes; and the protocol era asked for. A manifest whose key
//! is not the current one (the policy changed how the server starts) is ignored, with a log
//! line: the server starts once to be listed again.
//!
//! # Files
//!
//! One JSON file per upstream, `<manifest_dir>/<name>.json` (names are `A-Z a-z 0-9 _ -`):
//! written by `pin` for every upstream, and by the gateway for a lazy upstream each time its
//! lists are fetched (so a drift is saved); a temporary file renamed into place, so a reader
//! never sees half a file. Upstreams in the gateway's process have none.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};

use super::ServerInfo;
use crate::mcp::Era;
use crate::policy::{Transport, UpstreamSpec};

/// The largest manifest read (16 MiB): thousands of tools.
const MAX_MANIFEST_BYTES: u64 = 16 << 20;

/// Who saved a manifest (`/status` and the startup summary say it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SavedBy {
    /// `mcp-budget pin`.
    Pin,
    /// The gateway, when a lazy upstream's lists were fetched.
    Gateway,
}

impl SavedBy {
    /// `pin` or `gateway`.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::Pin => "pin",
            Self::Gateway => "gateway",
        }
    }
}

/// One upstream's manifest.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// What starts the server ([`key`]).
    pub key: Value,
    /// Who saved it.
    pub saved_by: SavedBy,
    /// The negotiated protocol version.
    pub protocol_version: String,
    /// `2025` or `2026-07-28`.
    pub era: Option<String>,
    /// The server's capabilities.
    pub capabilities: Value,
    /// Its `serverInfo`.
    #[serde(default)]
    pub server_info: Value,
    /// Its `instructions`.
    #[serde(default)]
    pub instructions: Option<String>,
    /// `tools/list`, every page, before `include_tools` / `exclude_tools`.
    #[serde(default)]
    pub tools: Vec<Value>,
    /// `prompts/list`.
    #[serde(default)]
    pub prompts: Vec<Value>,
    /// `resources/list`.
    #[serde(default)]
    pub resources: Vec<Value>,
    /// `resources/templates/list`.
    #[serde(default)]
    pub templates: Vec<Value>,
}

/// The SHA-256 of `text`, in hex.
fn sha(text: &str) -> String {
    format!("{:x}", Sha256::digest(text.as_bytes()))
}

/// Names with the hash of each value.
fn hashed(values: &BTreeMap<String, String>) -> Value {
    values
        .iter()
        .map(|(k, v)| (k.clone(), json!(sha(v))))
        .collect()
}

/// What starts `spec`'s server (see the module docs); `None` for a server in the gateway's
/// process.
#[must_use]
pub fn key(spec: &UpstreamSpec) -> Option<Value> {
    let protocol = format!("{:?}", spec.protocol);
    match &spec.transport {
        Transport::Stdio {
            command,
            args,
            env,
            inherit_env,
            cwd,
        } => Some(json!({
            "command": command,
            "args": args,
            "env": hashed(env),
            "inherit_env": inherit_env,
            "cwd": cwd,
            "protocol": protocol,
        })),
        Transport::Http { url, headers } => Some(json!({
            "url": crate::redact::Url(url).to_string(),
            "url_sha256": sha(url),
            "headers": hashed(headers),
            "protocol": protocol,
        })),
        Transport::InProcess(_) => None,
    }
}

impl Manifest {
    /// The manifest of `spec`'s server, from what its handshake said and what it listed.
    #[must_use]
    pub fn new(
        spec: &UpstreamSpec,
        info: &ServerInfo,
        era: Option<Era>,
        saved_by: SavedBy,
    ) -> Option<Self> {
        Some(Self {
            key: key(spec)?,
            saved_by,
            protocol_version: info.protocol_version.clone(),
            era: era.map(|e| era_name(e).to_owned()),
            capabilities: info.capabilities.clone(),
            server_info: info.server_info.clone(),
            instructions: info.instructions.clone(),
            tools: Vec::new(),
            prompts: Vec::new(),
            resources: Vec::new(),
            templates: Vec::new(),
        })
    }

    /// What its handshake said.
    #[must_use]
    pub fn info(&self) -> ServerInfo {
        ServerInfo {
            protocol_version: self.protocol_version.clone(),
            capabilities: self.capabilities.clone(),
            server_info: self.server_info.clone(),
            instructions: self.instructions.clone(),
        }
    }

    /// The era it spoke.
    #[must_use]
    pub fn era(&self) -> Option<Era> {
        match self.era.as_deref() {
            Some("2025") => Some(Era::Legacy),
            Some("2026-07-28") => Some(Era::Modern),
            _ => None,
        }
    }
}

/// `2025` or `2026-07-28`.
fn era_name(era: Era) -> &'static str {
    match era {
        Era::Legacy => "2025",
        Era::Modern => "2026-07-28",
    }
}

/// The file of upstream `name`'s manifest in `dir`.
#[must_use]
pub fn path(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!("{name}.json"))
}

/// `spec`'s manifest in `dir`, when there is one and its key is `spec`'s; a manifest of
/// another key, or one that cannot be read, is ignored with a log line.
#[must_use]
pub fn load(dir: &Path, spec: &UpstreamSpec) -> Option<Manifest> {
    let key = key(spec)?;
    let file = path(dir, &spec.name);
    let bytes = match crate::files::read_bytes(&file, MAX_MANIFEST_BYTES) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Err(e) => {
            tracing::warn!(upstream = %spec.name, file = %file.display(), "Manifest not read: {e}");
            return None;
        }
    };
    let manifest: Manifest = match serde_json::from_slice(&bytes) {
        Ok(m) => m,
        Err(e) => {
            tracing::warn!(upstream = %spec.name, file = %file.display(), "Manifest ignored, not a manifest: {e}");
            return None;
        }
    };
    if manifest.key != key {
        tracing::warn!(
            upstream = %spec.name,
            file = %file.display(),
            "Manifest ignored: it was saved for another command, environment or URL than the policy's; the server starts once to be listed"
        );
        return None;
    }
    Some(manifest)
}

/// Saves `manifest` as upstream `name`'s in `dir` (created if missing); a failure is logged.
pub fn save(dir: &Path, name: &str, manifest: &Manifest) {
    let file = path(dir, name);
    let write = || -> std::io::Result<()> {
        std::fs::create_dir_all(dir)?;
        let text = serde_json::to_vec_pretty(manifest).map_err(std::io::Error::other)?;
        let tmp = dir.join(format!(".{name}.json.{}", std::process::id()));
        std::fs::write(&tmp, text)?;
        std::fs::rename(&tmp, &file)
    };
    match write() {
        Ok(()) => tracing::debug!(upstream = name, file = %file.display(), "Manifest saved"),
        Err(e) => {
            tracing::warn!(upstream = name, file = %file.display(), "Manifest not saved: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_holds_env_names_and_hashes_never_values() {
        let mut spec = UpstreamSpec::stdio("a", "node", &["server.js"]);
        if let Transport::Stdio { env, .. } = &mut spec.transport {
            env.insert("TOKEN".into(), "s3cret".into());
        }
        let key = key(&spec).unwrap();
        assert!(!key.to_string().contains("s3cret"), "{key}");
        assert_eq!(key["env"]["TOKEN"], sha("s3cret"));
        assert_eq!(key["args"], json!(["server.js"]));
        let http = key_of_url("https://u:pw@h/mcp?token=abc");
        assert!(
            !http.to_string().contains("abc") && !http.to_string().contains("pw"),
            "{http}"
        );
        assert_ne!(http, key_of_url("https://u:pw@h/mcp?token=abd"));
    }

    fn key_of_url(url: &str) -> Value {
        key(&UpstreamSpec::http("h", url)).unwrap()
    }

    #[test]
    fn a_manifest_of_another_key_is_ignored_and_the_same_key_is_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let spec = UpstreamSpec::stdio("a", "node", &["one.js"]);
        let info = ServerInfo {
            protocol_version: "2025-11-25".into(),
            capabilities: json!({"tools": {}}),
            ..ServerInfo::default()
        };
        let mut m = Manifest::new(&spec, &info, Some(Era::Legacy), SavedBy::Pin).unwrap();
        m.tools = vec![json!({"name": "t", "inputSchema": {"type": "object"}})];
        save(dir.path(), "a", &m);
        assert_eq!(load(dir.path(), &spec).unwrap().era(), Some(Era::Legacy));
        assert_eq!(load(dir.path(), &spec), Some(m));
        let moved = UpstreamSpec::stdio("a", "node", &["two.js"]);
        assert_eq!(load(dir.path(), &moved), None);
        assert_eq!(
            load(dir.path(), &UpstreamSpec::stdio("b", "node", &["one.js"])),
            None
        );
        std::fs::write(path(dir.path(), "a"), "{not json").unwrap();
        assert_eq!(load(dir.path(), &spec), None);
    }
}
