//! The gateway's side of the reranker: the model loaded and the catalog embedded on a thread
//! of its own, the dense scores of a query once the catalog's vectors are ready.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Instant;

use super::cache::{TextKey, VectorCache, text_key};
use super::{Embedder, SemanticError, cosines, tool_text};
use crate::catalog::CatalogTool;
use crate::lock::lock;

/// Texts embedded per step of a catalog job: the cache lock is taken between steps only.
const STEP: usize = 32;

/// The texts of one list of tools (one `search_tools` index) and, once every one has a
/// vector, their vectors in one row-major matrix.
#[derive(Debug)]
pub struct CatalogTexts {
    texts: Vec<String>,
    keys: Vec<TextKey>,
    matrix: OnceLock<Vec<f32>>,
}

impl CatalogTexts {
    /// The [`tool_text`] of each tool and its key, in order.
    #[must_use]
    pub fn of(tools: &[CatalogTool]) -> Self {
        let texts: Vec<String> = tools.iter().map(tool_text).collect();
        let keys = texts.iter().map(|t| text_key(t)).collect();
        Self {
            texts,
            keys,
            matrix: OnceLock::new(),
        }
    }

    /// Number of tools.
    #[must_use]
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Whether there are no tools.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }
}

/// A model directory, loaded on first use, and the vectors of the catalogs it was asked to
/// prepare (feature `semantic`). Shared by every plan of one policy generation.
#[derive(Debug)]
pub struct Reranker {
    dir: PathBuf,
    cache_dir: Option<PathBuf>,
    embedder: OnceLock<Result<Arc<Embedder>, String>>,
    cache: Mutex<Option<VectorCache>>,
    /// Catalogs waiting for their vectors, and whether a job thread is working on them.
    queue: Mutex<(Vec<Weak<CatalogTexts>>, bool)>,
}

impl Reranker {
    /// A reranker of the model in `dir`, caching vectors in `cache_dir` (none: in memory only).
    /// Nothing is loaded yet.
    #[must_use]
    pub fn new(dir: &Path, cache_dir: Option<&Path>) -> Self {
        Self {
            dir: dir.to_path_buf(),
            cache_dir: cache_dir.map(Path::to_path_buf),
            embedder: OnceLock::new(),
            cache: Mutex::new(None),
            queue: Mutex::new((Vec::new(), false)),
        }
    }

    /// The model, loaded on the first call (its error is kept: a broken model is not read
    /// again until the policy is).
    ///
    /// # Errors
    /// The model does not load (the message of its [`SemanticError`]).
    pub fn embedder(&self) -> Result<Arc<Embedder>, String> {
        self.embedder
            .get_or_init(|| {
                let started = Instant::now();
                let loaded = Embedder::load(&self.dir).map_err(|e| error_chain(&e));
                match &loaded {
                    Ok(e) => tracing::info!(
                        model = %self.dir.display(),
                        digest = &e.digest()[..16],
                        secs = started.elapsed().as_secs_f64(),
                        "Embedding model loaded"
                    ),
                    Err(e) => tracing::error!(
                        model = %self.dir.display(),
                        error = %e,
                        "Embedding model failed to load: search_tools stays lexical"
                    ),
                }
                loaded.map(Arc::new)
            })
            .clone()
    }

    /// Embeds, on a thread of its own, the tools of `catalog` the cache does not hold yet;
    /// returns at once. [`Self::ready`] says when they are done.
    pub fn prepare(self: &Arc<Self>, catalog: &Arc<CatalogTexts>) {
        if catalog.is_empty() || self.ready(catalog).is_some() {
            return;
        }
        let mut queue = lock(&self.queue);
        queue.0.push(Arc::downgrade(catalog));
        if queue.1 {
            return;
        }
        queue.1 = true;
        drop(queue);
        let this = self.clone();
        let spawned = std::thread::Builder::new()
            .name("mcp-budget-embed".into())
            .spawn(move || this.work());
        if let Err(error) = spawned {
            tracing::error!(%error, "Cannot start the embedding thread: search_tools stays lexical");
            lock(&self.queue).1 = false;
        }
    }

    /// The job thread: the queued catalogs that still exist, one after the other.
    fn work(&self) {
        loop {
            let next = {
                let mut queue = lock(&self.queue);
                let Some(next) = queue.0.pop() else {
                    queue.1 = false;
                    return;
                };
                next
            };
            let Some(catalog) = next.upgrade() else {
                continue;
            };
            if let Err(error) = self.embed_now(&catalog) {
                tracing::error!(model = %self.dir.display(), %error, "Embedding the catalog failed: search_tools stays lexical");
            }
        }
    }

    /// Embeds the tools of `catalog` the cache does not hold, on this thread, and saves the
    /// cache; returns how many were embedded (0: all came from the cache).
    ///
    /// # Errors
    /// The model does not load or fails on a text.
    pub fn embed_now(&self, catalog: &CatalogTexts) -> Result<usize, String> {
        let embedder = self.embedder()?;
        let missing: Vec<usize> = {
            let mut cache = lock(&self.cache);
            let cache = cache.get_or_insert_with(|| self.open_cache(&embedder));
            (0..catalog.len())
                .filter(|&i| cache.get(&catalog.keys[i]).is_none())
                .collect()
        };
        let started = Instant::now();
        for step in missing.chunks(STEP) {
            let texts: Vec<&str> = step.iter().map(|&i| catalog.texts[i].as_str()).collect();
            let vectors = embedder.embed(&texts).map_err(|e| error_chain(&e))?;
            let mut cache = lock(&self.cache);
            let cache = cache.get_or_insert_with(|| self.open_cache(&embedder));
            for (&i, vector) in step.iter().zip(vectors) {
                cache.insert(catalog.keys[i], vector);
            }
        }
        if !missing.is_empty() {
            tracing::info!(
                tools = catalog.len(),
                embedded = missing.len(),
                secs = started.elapsed().as_secs_f64(),
                "Catalog embedded"
            );
            let mut cache = lock(&self.cache);
            if let Some(Err(error)) = cache.as_mut().map(VectorCache::save) {
                tracing::warn!(%error, "Cannot save the embedding cache: tools are embedded again at the next start");
            }
        }
        Ok(missing.len())
    }

    fn open_cache(&self, embedder: &Embedder) -> VectorCache {
        VectorCache::open(
            self.cache_dir.as_deref(),
            embedder.digest(),
            embedder.dims(),
        )
    }

    /// The vectors of `catalog` (row-major, one row per tool) once every tool has one.
    #[must_use]
    pub fn ready<'a>(&self, catalog: &'a CatalogTexts) -> Option<&'a [f32]> {
        if let Some(matrix) = catalog.matrix.get() {
            return Some(matrix);
        }
        let guard = lock(&self.cache);
        let cache = guard.as_ref()?;
        // Every vector there before one is copied: until the catalog is embedded, each
        // `search_tools` call asks, and must not copy a matrix it then drops.
        let vectors: Vec<&[f32]> =
            (catalog.keys.iter().map(|key| cache.get(key))).collect::<Option<_>>()?;
        let matrix = vectors.concat();
        drop(guard);
        Some(catalog.matrix.get_or_init(|| matrix))
    }

    /// The cosine of `query` with each tool of `catalog`, or `None` while its vectors are not
    /// ready or when the model fails. Blocking (about 10 ms for a short query on one core):
    /// call it off the async runtime's workers.
    #[must_use]
    pub fn scores(&self, query: &str, catalog: &CatalogTexts) -> Option<Vec<f32>> {
        let matrix = self.ready(catalog)?;
        let embedder = self.embedder().ok()?;
        let query = embedder.embed(&[query]).ok()?.pop()?;
        Some(cosines(&query, matrix))
    }
}

/// An error and its sources, `: `-joined.
fn error_chain(error: &SemanticError) -> String {
    let mut text = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}
