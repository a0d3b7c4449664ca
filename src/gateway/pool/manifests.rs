//! The pool's side of manifests ([`crate::upstream::manifest`]): a lazy upstream listed from
//! its manifest when it starts, and the manifest kept each time its lists are fetched (every
//! upstream's under `pin`), so that what a lazily started server lists now, drift included,
//! is what the next start reads.

use std::path::PathBuf;

use serde_json::Value;

use crate::catalog::Contribution;
use crate::lock::lock;
use crate::mcp::method::Listed;
use crate::policy::Policy;
use crate::upstream::Upstream;
use crate::upstream::manifest::{self, Manifest, SavedBy};

/// The lists one fetch got, as the server gave them (`None`: not fetched, or it failed).
#[derive(Debug, Default)]
pub(super) struct Fetched {
    pub(super) tools: Option<Vec<Value>>,
    pub(super) prompts: Option<Vec<Value>>,
    pub(super) resources: Option<Vec<Value>>,
    pub(super) templates: Option<Vec<Value>>,
}

/// Where `policy` keeps manifests.
pub(super) fn dir(policy: &Policy) -> Option<PathBuf> {
    crate::policy::start::manifest_dir(policy.manifest_dir.as_ref())
}

/// `tools` as `upstream`'s server gave them, made what the catalog takes: its
/// `include_tools` / `exclude_tools` applied (patterns that match none are warned about and
/// kept for the startup summary), each repaired, the properties mirrored in headers noted.
pub(super) fn shape_tools(upstream: &Upstream, mut tools: Vec<Value>) -> Vec<Value> {
    // `include_tools` / `exclude_tools`: the others never reach the catalog, so they are
    // not listed, searched, or routed (a call is "not found").
    let filter = &upstream.spec().tools;
    let names: Vec<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
    let unmatched = filter.unmatched(&names);
    for warning in &unmatched {
        tracing::warn!(upstream = upstream.name(), "{warning}");
    }
    upstream.set_filter_warnings(unmatched);
    if !filter.is_all() {
        tools.retain(|t| t["name"].as_str().is_some_and(|n| filter.keeps(n)));
    }
    for tool in &mut tools {
        crate::catalog::repair_tool(upstream.name(), tool);
    }
    upstream.set_param_marks(crate::mcp::params::marked_tools(&tools));
    tools
}

/// What `upstream` lists from `manifest`, shaped as its fetched lists are.
pub(super) fn contribution(upstream: &Upstream, manifest: &Manifest) -> Contribution {
    Contribution {
        tools: shape_tools(upstream, manifest.tools.clone()),
        prompts: manifest.prompts.clone(),
        resources: manifest.resources.clone(),
        templates: manifest.templates.clone(),
    }
}

/// The manifest of lazy upstream `spec` under `policy`, when one is kept for its key.
pub(super) fn load(policy: &Policy, spec: &crate::policy::UpstreamSpec) -> Option<Manifest> {
    if !spec.start.is_lazy() {
        return None;
    }
    manifest::load(&dir(policy)?, spec)
}

/// Keeps `upstream`'s manifest up to date with what one fetch got (`only`: one kind;
/// `None`: every kind, a new manifest) in `kept` and on disk: for a lazy upstream, or every
/// upstream under `pin`'s policy. Returns whether it saved.
pub(super) fn keep(
    upstream: &Upstream,
    kept: &std::sync::Mutex<Option<Manifest>>,
    only: Option<Listed>,
    fetched: Fetched,
    policy: &Policy,
) -> bool {
    if !(upstream.spec().start.is_lazy() || policy.save_manifests) {
        return false;
    }
    let Some(dir) = dir(policy) else {
        return false;
    };
    let by = if policy.save_manifests {
        SavedBy::Pin
    } else {
        SavedBy::Gateway
    };
    let mut kept = lock(kept);
    if only.is_none() || kept.is_none() {
        *kept = Manifest::new(upstream.spec(), &upstream.info(), upstream.era(), by);
    }
    let Some(manifest) = kept.as_mut() else {
        return false;
    };
    let Fetched {
        tools,
        prompts,
        resources,
        templates,
    } = fetched;
    for (field, got) in [
        (&mut manifest.tools, tools),
        (&mut manifest.prompts, prompts),
        (&mut manifest.resources, resources),
        (&mut manifest.templates, templates),
    ] {
        if let Some(got) = got {
            *field = got;
        }
    }
    manifest::save(&dir, upstream.name(), manifest);
    true
}
