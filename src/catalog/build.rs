//! [`Catalog::build`]: one pure function from the upstreams' lists to the names hosts see.
//!
//! Collision rule: tools (and prompts) of different servers can join to one namespaced name
//! (server `a` + tool `b__c` and server `a__b` + tool `c` both give `a__b__c`). The claimants
//! are ordered by (server id, their own name); the first keeps the name, each other one gets
//! [`disambiguated`] (the name, cut to fit, then `_` and a hash of `server/tool#n`, with the
//! smallest `n` from 2 that no other name of the catalog holds). The outcome depends only on
//! the set of tools, never on the order upstreams or their tools arrived in, and every name
//! stays valid for LLM APIs ([`crate::naming`]).

use std::collections::{BTreeMap, HashMap, HashSet};

use serde_json::Value;

use super::{CatalogTool, Held, Quarantined};
use crate::catalog::Item;
use crate::mcp::params::{Marked, marked_tools};
use crate::naming::{disambiguated, exposed_name};

/// What one upstream contributes: its lists as it gave them (tools repaired, see
/// [`super::repair_tool`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Contribution {
    /// Tool objects.
    pub tools: Vec<Value>,
    /// Prompt objects.
    pub prompts: Vec<Value>,
    /// Resource objects.
    pub resources: Vec<Value>,
    /// Resource template objects.
    pub templates: Vec<Value>,
}

/// Names of several servers' tools (or prompts) that joined to one exposed name, and how the
/// catalog told them apart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Collision {
    /// `tool` or `prompt`.
    pub kind: &'static str,
    /// The name they all joined to.
    pub exposed: String,
    /// (server id, the server's own name), in rule order: the first kept `exposed`.
    pub claimants: Vec<(String, String)>,
    /// The name each claimant is exposed under, in the same order.
    pub resolved: Vec<String>,
}

impl std::fmt::Display for Collision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} name {} claimed by ", self.kind, self.exposed)?;
        for (n, ((server, name), resolved)) in self.claimants.iter().zip(&self.resolved).enumerate()
        {
            if n > 0 {
                f.write_str(", ")?;
            }
            if *resolved == self.exposed {
                write!(f, "{server}/{name} (keeps it)")?;
            } else {
                write!(f, "{server}/{name} (as {resolved})")?;
            }
        }
        Ok(())
    }
}

/// One upstream's exposed names: per tool and per prompt, in its order (`None`: no name).
#[derive(Debug, Clone, Default)]
struct Exposed {
    tools: Vec<Option<String>>,
    prompts: Vec<Option<String>>,
}

/// Exposed name → (upstream index, the upstream's own name). Hashed with foldhash (seeded per
/// process): every routed call looks a name up here, and `SipHash` cost more than the rest of
/// the look-up; the keys are the upstreams' names, not the clients'.
type Routes = HashMap<String, (usize, String), foldhash::fast::RandomState>;

/// A snapshot of every upstream's lists and the names hosts see. Immutable: a change builds a
/// new one (see the [module docs](super)).
#[derive(Debug, Clone, Default)]
pub struct Catalog {
    version: u64,
    separator: String,
    names: Vec<String>,
    per_upstream: Vec<Contribution>,
    /// Per upstream, the exposed name of each of its tools and prompts.
    exposed: Vec<Exposed>,
    tools: Vec<CatalogTool>,
    tool_routes: Routes,
    prompt_routes: Routes,
    resource_routes: HashMap<String, usize>,
    param_marks: HashMap<String, Vec<Marked>>,
    collisions: Vec<Collision>,
    /// With a guard ([`Catalog::build_guarded`]): the lists as the upstreams gave them (what
    /// [`Catalog::upstreams`] returns), and per upstream what the guard held back.
    raw: Option<Vec<Contribution>>,
    held: Vec<Held>,
    /// Exposed name of a quarantined tool → (upstream, index in its `held.quarantined`).
    quarantine_routes: HashMap<String, (usize, usize)>,
    /// The same for quarantined prompts.
    prompt_quarantine_routes: HashMap<String, (usize, usize)>,
}

impl Catalog {
    /// Builds the catalog of upstreams `names` (in policy order) from what each contributed
    /// (`per_upstream[i]` is upstream `names[i]`'s), joining names with `separator`. `version`
    /// tells derived views (plans, search indexes) when to rebuild: give each new catalog a
    /// new one.
    ///
    /// ```
    /// use mcp_budget::catalog::{Catalog, Contribution};
    /// use serde_json::json;
    ///
    /// let tools = |names: &[&str]| Contribution {
    ///     tools: names.iter().map(|n| json!({"name": n, "inputSchema": {"type": "object"}})).collect(),
    ///     ..Contribution::default()
    /// };
    /// let names = ["a".to_owned(), "a__b".to_owned()];
    /// let catalog = Catalog::build(vec![tools(&["b__c"]), tools(&["c"])], &names, "__", 1);
    /// assert_eq!(catalog.tool("a__b__c"), Some((0, "b__c")));
    /// let other = &catalog.collisions()[0].resolved[1];
    /// assert_eq!(catalog.tool(other), Some((1, "c")));
    /// ```
    ///
    /// # Panics
    /// When `per_upstream` and `names` differ in length.
    #[must_use]
    pub fn build(
        per_upstream: Vec<Contribution>,
        names: &[String],
        separator: &str,
        version: u64,
    ) -> Self {
        assert_eq!(
            per_upstream.len(),
            names.len(),
            "one contribution per upstream"
        );
        let tool_names = resolve(names, separator, "tool", |i| &per_upstream[i].tools);
        let prompt_names = resolve(names, separator, "prompt", |i| &per_upstream[i].prompts);
        let mut catalog = Self {
            version,
            separator: separator.to_owned(),
            names: names.to_vec(),
            exposed: tool_names
                .per_upstream
                .into_iter()
                .zip(prompt_names.per_upstream)
                .map(|(tools, prompts)| Exposed { tools, prompts })
                .collect(),
            collisions: tool_names.collisions,
            per_upstream,
            ..Self::default()
        };
        catalog.collisions.extend(prompt_names.collisions);
        for collision in &catalog.collisions {
            tracing::warn!(%collision, "Namespaced names collide; told apart");
        }
        catalog.derive();
        catalog
    }

    /// [`Catalog::build`] with a guard at the door: `guard(i, raw, held)` turns upstream `i`'s
    /// lists as it gave them, and what it returned for that upstream in `previous`, into the
    /// lists that enter the catalog and its new state ([`crate::pin::admit`] in the gateway).
    /// [`Catalog::upstreams`] still returns the lists as given (refreshes compare with
    /// them); everything else sees the guarded ones.
    ///
    /// # Panics
    /// When `per_upstream` and `names` differ in length.
    #[must_use]
    pub fn build_guarded(
        per_upstream: Vec<Contribution>,
        names: &[String],
        separator: &str,
        version: u64,
        previous: &Self,
        guard: impl Fn(usize, &Contribution, &Held) -> (Contribution, Held),
    ) -> Self {
        let empty = Held::default();
        let (admitted, held): (Vec<Contribution>, Vec<Held>) = per_upstream
            .iter()
            .enumerate()
            .map(|(i, raw)| guard(i, raw, previous.held.get(i).unwrap_or(&empty)))
            .unzip();
        let mut catalog = Self::build(admitted, names, separator, version);
        for (i, h) in held.iter().enumerate() {
            // Templates are not called by name: a held one is only left out of its list. A
            // held name that a served tool (prompt) now has, after a collision, stays the
            // served one's: the guard refuses only what routing would not serve.
            for (n, q) in h.quarantined.iter().enumerate() {
                let name = exposed_name(&q.server, &q.name, separator);
                let served = match q.kind {
                    Item::Tool => catalog.tool(&name).is_some(),
                    Item::Prompt => catalog.prompt(&name).is_some(),
                    Item::Template => continue,
                };
                if served {
                    continue;
                }
                let routes = match q.kind {
                    Item::Tool => &mut catalog.quarantine_routes,
                    _ => &mut catalog.prompt_quarantine_routes,
                };
                routes.insert(name, (i, n));
            }
        }
        catalog.raw = Some(per_upstream);
        catalog.held = held;
        catalog
    }

    /// The catalog of `tools` alone (servers in order of first appearance): for embedders and
    /// tests that have tools but no upstreams.
    ///
    /// ```
    /// use mcp_budget::catalog::{Catalog, CatalogTool};
    /// use serde_json::json;
    ///
    /// let tool = CatalogTool::new("time", json!({"name": "now", "inputSchema": {"type": "object"}}))?;
    /// let catalog = Catalog::from_tools(vec![tool], "__");
    /// assert_eq!(catalog.tool("time__now"), Some((0, "now")));
    /// # Ok::<(), mcp_budget::catalog::CatalogError>(())
    /// ```
    #[must_use]
    pub fn from_tools(tools: Vec<CatalogTool>, separator: &str) -> Self {
        let mut names: Vec<String> = Vec::new();
        let mut per_upstream: Vec<Contribution> = Vec::new();
        for tool in tools {
            let i = names
                .iter()
                .position(|n| *n == tool.server)
                .unwrap_or_else(|| {
                    names.push(tool.server.clone());
                    per_upstream.push(Contribution::default());
                    names.len() - 1
                });
            per_upstream[i]
                .tools
                .push(Value::Object(std::sync::Arc::unwrap_or_clone(
                    tool.definition,
                )));
        }
        Self::build(per_upstream, &names, separator, 1)
    }

    /// Fills the routes, marks and canonical tools from the contributions and exposed names.
    fn derive(&mut self) {
        for (i, (c, names)) in self.per_upstream.iter().zip(&self.exposed).enumerate() {
            let (tools, prompts) = (&names.tools, &names.prompts);
            let marks = marked_tools(&c.tools);
            for (tool, exposed) in c.tools.iter().zip(tools) {
                let (Some(exposed), Some(name)) =
                    (exposed, tool.get("name").and_then(Value::as_str))
                else {
                    continue;
                };
                if let Some(marks) = marks.get(name) {
                    self.param_marks.insert(exposed.clone(), marks.clone());
                }
                self.tool_routes
                    .insert(exposed.clone(), (i, name.to_owned()));
                if let Ok(mut t) = CatalogTool::new(&self.names[i], tool.clone()) {
                    t.exposed = Some(exposed.clone());
                    self.tools.push(t);
                }
            }
            for (prompt, exposed) in c.prompts.iter().zip(prompts) {
                if let (Some(exposed), Some(name)) =
                    (exposed, prompt.get("name").and_then(Value::as_str))
                {
                    self.prompt_routes
                        .insert(exposed.clone(), (i, name.to_owned()));
                }
            }
            for r in &c.resources {
                if let Some(uri) = r.get("uri").and_then(Value::as_str) {
                    self.resource_routes.entry(uri.to_owned()).or_insert(i);
                }
            }
        }
        // Canonical order, whatever order the upstreams answered in: servers in policy order,
        // then tools by name (stable, so an upstream's duplicates keep theirs). Same catalog,
        // same bytes.
        let position: HashMap<&str, usize> = self
            .names
            .iter()
            .enumerate()
            .rev()
            .map(|(i, n)| (n.as_str(), i))
            .collect();
        self.tools.sort_by(|a, b| {
            (position[a.server.as_str()], &a.name).cmp(&(position[b.server.as_str()], &b.name))
        });
    }

    /// Changes whenever any upstream's lists change.
    #[must_use]
    pub fn version(&self) -> u64 {
        self.version
    }

    /// The upstreams' ids, in policy order.
    #[must_use]
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// The separator of namespaced names.
    #[must_use]
    pub fn separator(&self) -> &str {
        &self.separator
    }

    /// What each upstream contributed, in policy order, as it gave it (before any guard).
    #[must_use]
    pub fn upstreams(&self) -> &[Contribution] {
        self.raw.as_deref().unwrap_or(&self.per_upstream)
    }

    /// Per upstream, what the guard held back and reported (empty without a guard).
    #[must_use]
    pub fn held(&self) -> &[Held] {
        &self.held
    }

    /// Whether any tool or prompt is quarantined (most catalogs: none, and calls need no
    /// look-up).
    #[must_use]
    pub fn any_quarantined(&self) -> bool {
        !(self.quarantine_routes.is_empty() && self.prompt_quarantine_routes.is_empty())
    }

    /// The quarantined tool that would be exposed as `exposed`, if any.
    #[must_use]
    pub fn quarantined(&self, exposed: &str) -> Option<&Quarantined> {
        self.quarantined_as(Item::Tool, exposed)
    }

    /// The quarantined tool or prompt (`kind`) that would be exposed as `exposed`, if any
    /// (templates are not called by name: never one).
    #[must_use]
    pub fn quarantined_as(&self, kind: Item, exposed: &str) -> Option<&Quarantined> {
        let routes = match kind {
            Item::Tool => &self.quarantine_routes,
            Item::Prompt => &self.prompt_quarantine_routes,
            Item::Template => return None,
        };
        let &(i, n) = routes.get(exposed)?;
        self.held.get(i)?.quarantined.get(n)
    }

    /// Every tool with its exposed name, in canonical order: servers in policy order, then
    /// tools by their own name.
    #[must_use]
    pub fn tools(&self) -> &[CatalogTool] {
        &self.tools
    }

    /// The upstream and its own name of the tool exposed as `exposed`.
    #[must_use]
    pub fn tool(&self, exposed: &str) -> Option<(usize, &str)> {
        self.tool_routes.get(exposed).map(|(i, n)| (*i, n.as_str()))
    }

    /// The upstream and its own name of the prompt exposed as `exposed`.
    #[must_use]
    pub fn prompt(&self, exposed: &str) -> Option<(usize, &str)> {
        self.prompt_routes
            .get(exposed)
            .map(|(i, n)| (*i, n.as_str()))
    }

    /// The upstream serving resource `uri`: the first that listed it, else the upstream of the
    /// resource template with the longest literal prefix of `uri`.
    #[must_use]
    pub fn resource(&self, uri: &str) -> Option<usize> {
        if let Some(&i) = self.resource_routes.get(uri) {
            return Some(i);
        }
        let mut best: Option<(usize, usize)> = None;
        for (i, c) in self.per_upstream.iter().enumerate() {
            for t in &c.templates {
                let Some(template) = t.get("uriTemplate").and_then(Value::as_str) else {
                    continue;
                };
                let prefix = template.split('{').next().unwrap_or(template);
                if uri.starts_with(prefix) && best.is_none_or(|(len, _)| prefix.len() > len) {
                    best = Some((prefix.len(), i));
                }
            }
        }
        best.map(|(_, i)| i)
    }

    /// The properties of tool `exposed` that a 2026-07-28 HTTP `tools/call` mirrors in
    /// `Mcp-Param-*` headers (empty for most tools).
    #[must_use]
    pub fn param_marks(&self, exposed: &str) -> &[Marked] {
        self.param_marks.get(exposed).map_or(&[], Vec::as_slice)
    }

    /// The name collisions found, and how each was resolved.
    #[must_use]
    pub fn collisions(&self) -> &[Collision] {
        &self.collisions
    }

    /// Every tool as its upstream gave it under its exposed name, in upstream order: what
    /// hosts see with the budget off.
    #[must_use]
    pub fn listed_tools(&self) -> Vec<Value> {
        self.listed(|c| &c.tools, |e| &e.tools)
    }

    /// Every prompt as its upstream gave it under its exposed name, in upstream order.
    #[must_use]
    pub fn listed_prompts(&self) -> Vec<Value> {
        self.listed(|c| &c.prompts, |e| &e.prompts)
    }

    /// Every resource of every upstream, in upstream order (URIs are global: no renaming).
    #[must_use]
    pub fn listed_resources(&self) -> Vec<Value> {
        self.per_upstream
            .iter()
            .flat_map(|u| u.resources.clone())
            .collect()
    }

    /// Every resource template of every upstream, in upstream order.
    #[must_use]
    pub fn listed_templates(&self) -> Vec<Value> {
        self.per_upstream
            .iter()
            .flat_map(|u| u.templates.clone())
            .collect()
    }

    fn listed(
        &self,
        items: impl Fn(&Contribution) -> &Vec<Value>,
        exposed: impl Fn(&Exposed) -> &Vec<Option<String>>,
    ) -> Vec<Value> {
        let mut out = Vec::new();
        for (c, names) in self.per_upstream.iter().zip(&self.exposed) {
            for (item, name) in items(c).iter().zip(exposed(names)) {
                let mut item = item.clone();
                if let (Some(name), Some(obj)) = (name, item.as_object_mut()) {
                    obj.insert("name".into(), Value::String(name.clone()));
                }
                out.push(item);
            }
        }
        out
    }
}

/// The exposed names of one kind of item, and the collisions among them.
struct Resolved {
    /// Per upstream, per item: its exposed name (`None`: the item has no string `name`).
    per_upstream: Vec<Vec<Option<String>>>,
    collisions: Vec<Collision>,
}

/// Names every item of every upstream, resolving collisions by the module's rule.
fn resolve<'a>(
    names: &[String],
    separator: &str,
    kind: &'static str,
    items: impl Fn(usize) -> &'a Vec<Value>,
) -> Resolved {
    // Plain name → its distinct claimants (server, own name), ordered by the rule.
    let mut claims: BTreeMap<String, Vec<(&str, &str)>> = BTreeMap::new();
    for (i, server) in names.iter().enumerate() {
        for name in items(i).iter().filter_map(|t| t.get("name")?.as_str()) {
            let plain = exposed_name(server, name, separator);
            let claimants = claims.entry(plain).or_default();
            if !claimants.contains(&(server.as_str(), name)) {
                claimants.push((server.as_str(), name));
            }
        }
    }
    let mut taken: HashSet<String> = claims.keys().cloned().collect();
    let mut renamed: HashMap<(&str, &str), String> = HashMap::new();
    let mut collisions = Vec::new();
    for (plain, claimants) in &mut claims {
        if claimants.len() < 2 {
            continue;
        }
        claimants.sort_unstable();
        let mut resolved = vec![plain.clone()];
        for &(server, name) in &claimants[1..] {
            let other = (2..)
                .map(|n| disambiguated(server, name, separator, n))
                .find(|candidate| !taken.contains(candidate))
                .expect("some attempt finds a free name");
            taken.insert(other.clone());
            renamed.insert((server, name), other.clone());
            resolved.push(other);
        }
        collisions.push(Collision {
            kind,
            exposed: plain.clone(),
            claimants: claimants
                .iter()
                .map(|(s, n)| ((*s).to_owned(), (*n).to_owned()))
                .collect(),
            resolved,
        });
    }
    let per_upstream = names
        .iter()
        .enumerate()
        .map(|(i, server)| {
            items(i)
                .iter()
                .map(|t| {
                    let name = t.get("name")?.as_str()?;
                    Some(
                        renamed
                            .get(&(server.as_str(), name))
                            .cloned()
                            .unwrap_or_else(|| exposed_name(server, name, separator)),
                    )
                })
                .collect()
        })
        .collect();
    Resolved {
        per_upstream,
        collisions,
    }
}

#[cfg(test)]
mod tests;
