//! The catalog of the inner service, learned from its own lists and published on the watch
//! channel the layers read, as the gateway publishes its upstreams'.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use serde_json::value::RawValue;
use serde_json::{Map, Value};
use tokio::sync::watch;
use tower::util::BoxCloneSyncService;
use tower::{BoxError, ServiceExt};

use super::Request;
use crate::catalog::{Catalog, Contribution};
use crate::jsonrpc::Message;
use crate::mcp::method::Method;
use crate::policy::Policy;

/// The inner service's name in logs and errors (`mcp_budget.upstream.unavailable` names it).
/// The catalog knows it as one server whose tools keep their own names.
pub const INNER: &str = "inner";

/// The embedder's service, boxed: what the learner and the bottom of the stack call.
pub(super) type InnerService = BoxCloneSyncService<Request, Option<Value>, BoxError>;

/// Learns the inner service's lists when they are stale (at first, and after a
/// `list_changed`), one learning at a time.
pub(super) struct Learner {
    inner: InnerService,
    publish: Arc<watch::Sender<Arc<Catalog>>>,
    policy: Arc<Policy>,
    stale: AtomicBool,
    learning: tokio::sync::Mutex<()>,
    next_id: AtomicU64,
}

impl Learner {
    pub(super) fn new(
        inner: InnerService,
        publish: Arc<watch::Sender<Arc<Catalog>>>,
        policy: Arc<Policy>,
    ) -> Self {
        Self {
            inner,
            publish,
            policy,
            stale: AtomicBool::new(true),
            learning: tokio::sync::Mutex::new(()),
            next_id: AtomicU64::new(1),
        }
    }

    /// Marks the lists stale: the next [`Learner::ensure`] learns them again.
    pub(super) fn stale(&self) {
        self.stale.store(true, Ordering::Release);
    }

    /// Learns the lists if they are stale; concurrent callers wait for the one learning.
    pub(super) async fn ensure(&self) {
        if !self.stale.load(Ordering::Acquire) {
            return;
        }
        let _learning = self.learning.lock().await;
        // Cleared before fetching: a list_changed during the fetch has it fetched again.
        if !self.stale.swap(false, Ordering::AcqRel) {
            return;
        }
        let previous = self.publish.borrow().clone();
        let before = previous.upstreams().first().map(|given| given.lists());
        let fresh = self.contribution(before).await;
        let names = [String::new()];
        let policy = &self.policy;
        let catalog = crate::pin::guarded(
            vec![fresh],
            &names,
            &policy.separator,
            previous.version() + 1,
            &previous,
            |name| policy.sanitize.rules_for(name),
            &policy.pin.rules,
        );
        tracing::debug!(
            upstream = INNER,
            tools = catalog.tools().len(),
            "Learned the inner service's lists"
        );
        self.publish.send_replace(Arc::new(catalog));
    }

    /// Every list of the inner service; a list it could not give stays as it was.
    async fn contribution(&self, before: Option<Contribution>) -> Contribution {
        let mut fresh = before.unwrap_or_default();
        if let Some(mut tools) = self.fetch(&Method::ToolsList, "tools").await {
            for tool in &mut tools {
                crate::catalog::repair_tool(INNER, tool);
            }
            fresh.tools = tools;
        }
        if let Some(prompts) = self.fetch(&Method::PromptsList, "prompts").await {
            fresh.prompts = prompts;
        }
        if let Some(resources) = self.fetch(&Method::ResourcesList, "resources").await {
            fresh.resources = resources;
        }
        let templates = Method::ResourcesTemplatesList;
        if let Some(found) = self.fetch(&templates, "resourceTemplates").await {
            fresh.templates = found;
        }
        fresh
    }

    /// One whole list, every page.
    async fn fetch(&self, method: &Method, key: &str) -> Option<Vec<Value>> {
        crate::mcp::pages::fetch_pages(INNER, method, key, |params| {
            self.request(method.as_str(), params)
        })
        .await
    }

    /// Sends `method` with `params` to the inner service: its answer.
    async fn request(
        &self,
        method: &str,
        params: Option<Box<RawValue>>,
    ) -> Result<Message, String> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let mut message = Map::new();
        message.insert("jsonrpc".into(), "2.0".into());
        message.insert("id".into(), format!("mcp-budget-list-{id}").into());
        message.insert("method".into(), method.into());
        if let Some(params) = params {
            let params = serde_json::from_str(params.get()).map_err(|e| e.to_string())?;
            message.insert("params".into(), params);
        }
        let request = Request::new(Value::Object(message));
        let answer = self.inner.clone().oneshot(request).await;
        let answer = answer.map_err(|err| err.to_string())?;
        let answer = answer.ok_or_else(|| "no answer".to_owned())?;
        Message::from_value(&answer).map_err(|e| e.to_string())
    }
}
