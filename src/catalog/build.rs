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
use std::sync::Arc;

use serde_json::{Map, Value};

use super::{CatalogTool, Given, Held, Quarantined};
use crate::catalog::Item;
use crate::mcp::params::{Marked, marked_tools};
use crate::naming::{disambiguated, exposed_name};

/// What one upstream contributes: its lists as it gave them (tools repaired, see
/// [`super::repair_tool`]). Serialized as an object of the four lists ([`super::Given`]'s
/// text).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
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
    /// Per tool, in its order: the index in [`Catalog::tools`] of the tool it became (`None`:
    /// it became none, having no name or not being an object).
    catalog_tools: Vec<Option<usize>>,
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
    per_upstream: Vec<Arc<Contribution>>,
    /// Per upstream, the exposed name of each of its tools and prompts.
    exposed: Vec<Exposed>,
    tools: Vec<CatalogTool>,
    tool_routes: Routes,
    prompt_routes: Routes,
    resource_routes: HashMap<String, usize>,
    param_marks: HashMap<String, Vec<Marked>>,
    collisions: Vec<Collision>,
    /// The lists as the upstreams gave them (what [`Catalog::upstreams`] returns), as text.
    /// Shared: the next catalog, built when one upstream's lists change, holds the same lists of
    /// the others.
    raw: Vec<Arc<Given>>,
    /// With a guard ([`Catalog::build_guarded`]): per upstream what the guard held back.
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
    pub fn build<C: Into<Arc<Contribution>>>(
        per_upstream: Vec<C>,
        names: &[String],
        separator: &str,
        version: u64,
    ) -> Self {
        let per_upstream: Vec<Arc<Contribution>> =
            per_upstream.into_iter().map(Into::into).collect();
        let raw = (per_upstream.iter())
            .map(|c| Arc::new(Given::new(c)))
            .collect();
        let mut catalog = Self::build_from(per_upstream, names, separator, version, Keep::Lists);
        catalog.raw = raw;
        catalog
    }

    /// [`Catalog::build`], keeping the tools of `per_upstream` (`Keep::Lists`) or moving them
    /// into the catalog's tools (`Keep::ToolsOnly`: the caller keeps the lists as given).
    fn build_from(
        per_upstream: Vec<Arc<Contribution>>,
        names: &[String],
        separator: &str,
        version: u64,
        keep: Keep<'_>,
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
                .map(|(tools, prompts)| Exposed {
                    tools,
                    prompts,
                    catalog_tools: Vec::new(),
                })
                .collect(),
            collisions: tool_names.collisions,
            per_upstream,
            ..Self::default()
        };
        catalog.collisions.extend(prompt_names.collisions);
        for collision in &catalog.collisions {
            tracing::warn!(%collision, "Namespaced names collide; told apart");
        }
        catalog.derive(keep);
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
    pub fn build_guarded<C: Into<Arc<Given>>>(
        per_upstream: Vec<C>,
        names: &[String],
        separator: &str,
        version: u64,
        previous: &Self,
        guard: impl Fn(usize, &Contribution, &Held) -> (Contribution, Held),
    ) -> Self {
        let per_upstream: Vec<Arc<Given>> = per_upstream.into_iter().map(Into::into).collect();
        let at = Door {
            names,
            separator,
            version,
            previous,
        };
        at.build(per_upstream, guard, |_| None)
    }

    /// The next catalog after this one when only upstreams' lists changed (same upstreams,
    /// same separator, and the same `guard` as built this one: the same rules), with
    /// `per_upstream[i]` upstream `i`'s lists as given now: [`Catalog::build_guarded`], except
    /// that an upstream whose lists are the ones this catalog holds for it (same text) is not
    /// guarded again, and what the guard made of them is taken from this catalog (the guard,
    /// given its own state back for the same lists, returns the same: trusted definitions stay
    /// trusted, held ones stay held, what it reported was logged already). Names, collisions
    /// across upstreams, routes, quarantine routes and the version are worked out over every
    /// upstream: the catalog is the one [`Catalog::build_guarded`] builds, for one run of the
    /// guard per changed upstream instead of one per upstream.
    ///
    /// # Panics
    /// When `per_upstream` and this catalog's upstreams differ in length.
    #[must_use]
    pub fn rebuild_guarded<C: Into<Arc<Given>>>(
        &self,
        per_upstream: Vec<C>,
        version: u64,
        guard: impl Fn(usize, &Contribution, &Held) -> (Contribution, Held),
    ) -> Self {
        let per_upstream: Vec<Arc<Given>> = per_upstream.into_iter().map(Into::into).collect();
        let (names, separator) = (self.names.as_slice(), self.separator.as_str());
        let unchanged = |i: usize| self.admitted(&names[i], per_upstream.get(i)?);
        let at = Door {
            names,
            separator,
            version,
            previous: self,
        };
        at.build(per_upstream.clone(), guard, unchanged)
    }

    /// What the guard made of upstream `name`'s lists in this catalog, when they were
    /// `given` (the same text) and this catalog was built through a guard: its lists as they
    /// entered the catalog (its tools read back from the catalog's tools) and its guard
    /// state. `None` when the lists differ or cannot be told exactly.
    fn admitted(&self, name: &str, given: &Arc<Given>) -> Option<(Contribution, Held)> {
        let j = self.names.iter().position(|n| n == name)?;
        let (before, held) = (self.raw.get(j)?, self.held.get(j)?);
        if !(Arc::ptr_eq(before, given) || **before == **given) {
            return None;
        }
        let (c, exposed) = (self.per_upstream.get(j)?, self.exposed.get(j)?);
        let at = &exposed.catalog_tools;
        // A named tool that became no catalog tool is not in the lists any more: guard again.
        if at.len() != c.tools.len()
            || (exposed.tools.iter().zip(at)).any(|(name, at)| name.is_some() != at.is_some())
        {
            return None;
        }
        let tools = (c.tools.iter().zip(at))
            .map(|(tool, at)| match at {
                Some(k) => Value::Object((*self.tools[*k].definition).clone()),
                None => tool.clone(),
            })
            .collect();
        let lists = Contribution {
            tools,
            prompts: c.prompts.clone(),
            resources: c.resources.clone(),
            templates: c.templates.clone(),
        };
        Some((lists, held.clone()))
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
    /// With `Keep::ToolsOnly`, a tool that becomes a catalog tool leaves a `Null` in its
    /// upstream's list (read through [`Exposed::catalog_tools`] from then on).
    fn derive(&mut self, keep: Keep<'_>) {
        let previous = match keep {
            Keep::Lists => Shared::default(),
            Keep::ToolsOnly { previous } => (previous.tools.iter())
                .map(|t| ((t.server.as_str(), t.name.as_str()), &t.definition))
                .collect(),
        };
        for (i, (c, names)) in (self.per_upstream.iter_mut())
            .zip(&mut self.exposed)
            .enumerate()
        {
            let marks = marked_tools(&c.tools);
            // Moving needs the lists to itself: built just now by the guard, nothing else
            // holds them (`make_mut` would copy them otherwise).
            let list = match keep {
                Keep::Lists => c.tools.clone(),
                Keep::ToolsOnly { .. } => std::mem::take(&mut Arc::make_mut(c).tools),
            };
            let into = Derived {
                server: (i, &self.names[i]),
                routes: &mut self.tool_routes,
                marks: &mut self.param_marks,
                tools: &mut self.tools,
                previous: &previous,
            };
            let left = into.tools_of(list, &names.tools, &marks, &mut names.catalog_tools);
            if let Keep::ToolsOnly { .. } = keep {
                Arc::make_mut(c).tools = left;
            }
            let prompts = &names.prompts;
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
        let mut tagged: Vec<(usize, CatalogTool)> = std::mem::take(&mut self.tools)
            .into_iter()
            .enumerate()
            .collect();
        tagged.sort_by(|(_, a), (_, b)| {
            (position[a.server.as_str()], &a.name).cmp(&(position[b.server.as_str()], &b.name))
        });
        let mut sorted_at = vec![0; tagged.len()];
        for (now, (before, _)) in tagged.iter().enumerate() {
            sorted_at[*before] = now;
        }
        self.tools = tagged.into_iter().map(|(_, t)| t).collect();
        for at in self.exposed.iter_mut().flat_map(|e| &mut e.catalog_tools) {
            *at = at.map(|before| sorted_at[before]);
        }
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

    /// What each upstream contributed, in policy order, as it gave it (before any guard), as
    /// text ([`Given::lists`] reads it back). Shared with the catalogs built from them (a
    /// clone of the `Arc`s passed to [`Catalog::build_guarded`] copies no list).
    #[must_use]
    pub fn upstreams(&self) -> &[Arc<Given>] {
        &self.raw
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

    /// The definition of the prompt exposed as `exposed`, as its upstream listed it (under
    /// its own name).
    #[must_use]
    pub fn prompt_definition(&self, exposed: &str) -> Option<&Value> {
        let (at, own) = self.prompt(exposed)?;
        (self.per_upstream.get(at)?.prompts.iter())
            .find(|p| p.get("name").and_then(Value::as_str) == Some(own))
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
    pub(crate) fn param_marks(&self, exposed: &str) -> &[Marked] {
        self.param_marks.get(exposed).map_or(&[], Vec::as_slice)
    }

    /// The name collisions found, and how each was resolved.
    #[must_use]
    pub fn collisions(&self) -> &[Collision] {
        &self.collisions
    }

    /// Every tool as its upstream gave it under its exposed name, in upstream order: what
    /// hosts see with the budget off. A tool with a name is written as its catalog tool (its
    /// keys in [canonical](crate::canonical) order); one without, as it came.
    #[must_use]
    pub fn listed_tools(&self) -> Vec<Value> {
        self.listed(|c| &c.tools, |e| &e.tools, |e| &e.catalog_tools)
    }

    /// Every prompt as its upstream gave it under its exposed name, in upstream order.
    #[must_use]
    pub fn listed_prompts(&self) -> Vec<Value> {
        self.listed(|c| &c.prompts, |e| &e.prompts, |_| &[])
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
        in_catalog: impl Fn(&Exposed) -> &[Option<usize>],
    ) -> Vec<Value> {
        let mut out = Vec::new();
        for (c, names) in self.per_upstream.iter().zip(&self.exposed) {
            let at = in_catalog(names);
            for (j, (item, name)) in items(c).iter().zip(exposed(names)).enumerate() {
                let mut item = match at.get(j).copied().flatten() {
                    Some(k) => Value::Object((*self.tools[k].definition).clone()),
                    None => item.clone(),
                };
                if let (Some(name), Some(obj)) = (name, item.as_object_mut()) {
                    obj.insert("name".into(), Value::String(name.clone()));
                }
                out.push(item);
            }
        }
        out
    }
}

/// What a guarded catalog is built with, besides the lists and the guard.
struct Door<'a> {
    names: &'a [String],
    separator: &'a str,
    version: u64,
    /// The catalog the new one replaces.
    previous: &'a Catalog,
}

impl Door<'_> {
    /// The catalog of `per_upstream` (the lists as given), each through `guard` unless
    /// `unchanged(i)` has what the guard made of upstream `i`'s lists already.
    fn build(
        &self,
        per_upstream: Vec<Arc<Given>>,
        guard: impl Fn(usize, &Contribution, &Held) -> (Contribution, Held),
        unchanged: impl Fn(usize) -> Option<(Contribution, Held)>,
    ) -> Catalog {
        let empty = Held::default();
        let previous = self.previous;
        // Each list is read back from its text for the guard, one upstream at a time.
        let (admitted, held): (Vec<Arc<Contribution>>, Vec<Held>) = (per_upstream.iter())
            .enumerate()
            .map(|(i, raw)| {
                let (admitted, held) = unchanged(i).unwrap_or_else(|| {
                    let lists = raw.lists();
                    guard(i, &lists, previous.held.get(i).unwrap_or(&empty))
                });
                (Arc::new(admitted), held)
            })
            .unzip();
        // The admitted tools move into the catalog's tools: the lists as given are kept
        // (`raw`), and one more copy of every definition would be the biggest thing in memory.
        let keep = Keep::ToolsOnly { previous };
        let (names, separator) = (self.names, self.separator);
        let mut catalog = Catalog::build_from(admitted, names, separator, self.version, keep);
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
        catalog.raw = per_upstream;
        catalog.held = held;
        catalog
    }
}

/// Where [`Catalog::derive`] puts one upstream's tools.
struct Derived<'a> {
    /// The upstream's index and id.
    server: (usize, &'a str),
    routes: &'a mut Routes,
    marks: &'a mut HashMap<String, Vec<Marked>>,
    tools: &'a mut Vec<CatalogTool>,
    /// The definitions of the catalog this one replaces, by server and name.
    previous: &'a Shared<'a>,
}

/// A catalog's definitions by (server, own name), to share with the next catalog.
type Shared<'a> = HashMap<(&'a str, &'a str), &'a Arc<Map<String, Value>>>;

impl Derived<'_> {
    /// Routes, marks and catalog tools of `list` (the upstream's tools in its order, with
    /// their `exposed` names and parameter `marks`); `at` gets each one's index among the
    /// catalog tools. Returns the list with each tool that became a catalog tool left as
    /// `Null` (the others, without a name, as they came).
    fn tools_of(
        self,
        list: Vec<Value>,
        exposed: &[Option<String>],
        marks: &HashMap<String, Vec<Marked>>,
        at: &mut Vec<Option<usize>>,
    ) -> Vec<Value> {
        let (i, server) = self.server;
        *at = vec![None; list.len()];
        let mut left = Vec::with_capacity(list.len());
        for ((tool, exposed), at) in list.into_iter().zip(exposed).zip(at.iter_mut()) {
            let name = tool.get("name").and_then(Value::as_str).map(str::to_owned);
            let (Some(exposed), Some(name)) = (exposed, name) else {
                left.push(tool);
                continue;
            };
            if let Some(marks) = marks.get(&name) {
                self.marks.insert(exposed.clone(), marks.clone());
            }
            // A definition the catalog this one replaces has too (equal as maps: key order
            // aside, which the catalog's own form fixes) is shared with it, not copied: when
            // one upstream's lists change, the others' definitions stay where they are.
            let same = (self.previous.get(&(server, name.as_str())))
                .copied()
                .filter(|d| tool.as_object() == Some(&***d));
            let made = match same {
                Some(definition) => Ok(CatalogTool {
                    server: server.to_owned(),
                    name: name.clone(),
                    definition: Arc::clone(definition),
                    exposed: None,
                }),
                None => CatalogTool::new(server, tool),
            };
            self.routes.insert(exposed.clone(), (i, name));
            left.push(Value::Null);
            if let Ok(mut t) = made {
                t.exposed = Some(exposed.clone());
                *at = Some(self.tools.len());
                self.tools.push(t);
            }
        }
        left
    }
}

/// What [`Catalog::build_from`] keeps of the tools it is given.
#[derive(Debug, Clone, Copy)]
enum Keep<'a> {
    /// The lists too (no guard: they are what [`Catalog::upstreams`] returns).
    Lists,
    /// Only the catalog's tools (a guard's caller keeps the lists as given), sharing the
    /// definitions that `previous` has too.
    ToolsOnly { previous: &'a Catalog },
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
