//! `mode = "host_search"`: the `initialize` (and `server/discover`) result's `instructions`
//! rewritten for a host that searches tools itself ([`crate::discover::host_search_instructions`]).

use serde_json::{Map, Value};

use crate::catalog::{Catalog, CatalogTool};
use crate::discover::{ServerNote, host_search_instructions, upstream_sections};
use crate::jsonrpc::{Message, to_raw};

/// Replaces the instructions of a handshake result with what a searching host needs: every
/// server with tools, what it is for (its own instructions, found under its `## <server>`
/// heading in the gateway's) and how its tools are named. For a client, `visible` holds the
/// tools it may see: only those are named, and only their servers. Errors and other shapes
/// pass as they are.
pub(super) fn rewrite(message: &mut Message, catalog: &Catalog, visible: Option<&[CatalogTool]>) {
    let Ok(mut result) = message.result_as::<Map<String, Value>>() else {
        return;
    };
    let own = result.get("instructions").and_then(Value::as_str);
    let servers: Vec<&str> = catalog.names().iter().map(String::as_str).collect();
    let (sections, general) = own.map_or((Vec::new(), None), |t| upstream_sections(t, &servers));
    let separator = catalog.separator();
    let mut notes: Vec<ServerNote<'_>> = servers
        .iter()
        .map(|&server| ServerNote {
            server,
            tools: Vec::new(),
            instructions: None,
        })
        .collect();
    for (s, text) in sections {
        notes[s].instructions = Some(text);
    }
    let exposed: Vec<_> = visible
        .unwrap_or(catalog.tools())
        .iter()
        .map(|t| (t.server.as_str(), t.exposed_name(separator)))
        .collect();
    for (server, name) in &exposed {
        if let Some(note) = notes.iter_mut().find(|n| n.server == *server) {
            note.tools.push(name);
        }
    }
    // A client hears only of the servers whose tools it may see.
    notes.retain(|n| !n.tools.is_empty() || (visible.is_none() && n.instructions.is_some()));
    let text = host_search_instructions(&notes, separator, general);
    result.insert("instructions".into(), Value::String(text));
    message.result = Some(to_raw(&Value::Object(result)));
}
