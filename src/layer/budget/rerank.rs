//! `search_tools` with the semantic reranker (`[discover] embedding_model`, feature
//! `semantic`).
//!
//! The policy's model is not loaded when the layer is built: each plan with a discovery
//! index hands its tools' texts to the [`Reranker`], whose own thread loads the model (once)
//! and embeds the tools its disk cache lacks. Until the vectors of a plan's tools are all
//! there, its `search_tools` is answered lexically, in line, as without a model; after, the
//! query is embedded on tokio's blocking pool (about 10 ms of CPU, never on a worker thread
//! that serves other clients) and its cosines are fused into the lexical ranking. Without the
//! key, nothing here runs: no thread, no model, no text computed.

use std::sync::Arc;

use serde_json::Value;

use crate::discover::{Discovery, MetaTool};
use crate::policy::DiscoverPolicy;

#[cfg(feature = "semantic")]
pub(super) use crate::semantic::{CatalogTexts as Texts, Reranker};

/// Without the `semantic` feature the policy refuses `embedding_model`: nothing to hold.
#[cfg(not(feature = "semantic"))]
#[derive(Debug)]
pub(super) struct Reranker;

/// Without the `semantic` feature: no texts.
#[cfg(not(feature = "semantic"))]
#[derive(Debug)]
pub(super) struct Texts;

/// The reranker of `[discover] embedding_model`, nothing loaded yet.
#[cfg(feature = "semantic")]
pub(super) fn reranker_of(discover: &DiscoverPolicy) -> Option<Arc<Reranker>> {
    let model = discover.embedding_model.as_deref()?;
    let cache = (discover.embedding_cache_dir.clone()).or_else(crate::semantic::cache::default_dir);
    Some(Arc::new(Reranker::new(model, cache.as_deref())))
}

/// Without the `semantic` feature: none.
#[cfg(not(feature = "semantic"))]
pub(super) fn reranker_of(_discover: &DiscoverPolicy) -> Option<Arc<Reranker>> {
    None
}

/// The texts of `discovery`'s tools, their embedding started in the background by
/// `reranker`.
#[cfg(feature = "semantic")]
pub(super) fn prepare(
    reranker: Option<&Arc<Reranker>>,
    discovery: Option<&Discovery>,
) -> Option<Arc<Texts>> {
    let reranker = reranker?;
    let texts = Arc::new(Texts::of(discovery?.tools()));
    reranker.prepare(&texts);
    Some(texts)
}

/// Without the `semantic` feature: none.
#[cfg(not(feature = "semantic"))]
pub(super) fn prepare(
    _reranker: Option<&Arc<Reranker>>,
    _discovery: Option<&Discovery>,
) -> Option<Arc<Texts>> {
    None
}

/// Whether a `search_tools` call with `arguments` on a plan whose tools' texts are `dense` is
/// to be reranked: a model (`reranker`), a string query, and the vectors of the plan's tools
/// ready.
#[cfg(feature = "semantic")]
pub(super) fn applies(
    reranker: Option<&Arc<Reranker>>,
    dense: Option<&Arc<Texts>>,
    arguments: &Value,
) -> bool {
    let (Some(reranker), Some(texts)) = (reranker, dense) else {
        return false;
    };
    arguments.get("query").is_some_and(Value::is_string) && reranker.ready(texts).is_some()
}

/// Without the `semantic` feature: never.
#[cfg(not(feature = "semantic"))]
pub(super) fn applies(
    _reranker: Option<&Arc<Reranker>>,
    _dense: Option<&Arc<Texts>>,
    _arguments: &Value,
) -> bool {
    false
}

/// The `search_tools` answer of `discovery` for `arguments`, fused
/// with the query's cosines by `reranker` over the plan's `dense` texts (lexical when the
/// model fails on the query).
pub(super) async fn search(
    reranker: Option<Arc<Reranker>>,
    dense: Option<Arc<Texts>>,
    discovery: Option<&Discovery>,
    arguments: &Value,
) -> Value {
    let dense = dense_scores(reranker, dense, arguments).await;
    let answer = discovery.and_then(|d| d.call_with(MetaTool::Search, arguments, dense.as_deref()));
    match answer {
        Some(crate::discover::MetaCall::Result(result)) => result,
        // Cannot happen: `applies` saw a discovery index, and a search answers a result.
        _ => serde_json::json!({"content": [], "isError": true}),
    }
}

#[cfg(feature = "semantic")]
async fn dense_scores(
    reranker: Option<Arc<Reranker>>,
    dense: Option<Arc<Texts>>,
    arguments: &Value,
) -> Option<Vec<f32>> {
    let reranker = reranker?;
    let query = arguments.get("query")?.as_str()?.to_owned();
    tokio::task::spawn_blocking(move || reranker.scores(&query, dense.as_ref()?))
        .await
        .ok()
        .flatten()
}

#[cfg(not(feature = "semantic"))]
async fn dense_scores(
    _: Option<Arc<Reranker>>,
    _: Option<Arc<Texts>>,
    _: &Value,
) -> Option<Vec<f32>> {
    None
}
