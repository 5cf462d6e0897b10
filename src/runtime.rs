//! [`Runtime`]: the context the capabilities and the workers share — the
//! validated config, the stores and indexes of the episodic tier, the
//! graph, the embedder, the summariser and the graph extractor, the prompts, the recall tunables and
//! the bus — and how it is opened.
//!
//! Architecture Invariant: this module imports no capability (episodic
//! recall, typed memories, graph search, administration) and no worker;
//! they import it. [`Runtime::open`] also returns the stores that only the
//! typed-memory capability uses ([`TypedParts`]), which [`crate::Memory`]
//! hands to it.

use std::sync::{Arc, RwLock};

use crate::bus::Bus;
use crate::config::{Config, RecallConfig};
use crate::error::{Error, Result};
use crate::graph::extract::GraphExtractor;
use crate::graph::GraphStore;
use crate::llm::prompts::Prompts;
use crate::embed::{CachedEmbedder, Embedder};
use crate::model::typed::MemoryId;
use crate::recall::trivial::TrivialFilter;
use crate::store::factory::{self, IndexPlaces};
use crate::summary::Summarizer;
use crate::store::shared::SharedStores;
use crate::store::{KeywordIndex, RecordStore, TypedStore, VectorIndex};

/// Everything the workers and the capabilities share. Built once per
/// [`crate::Memory`]; read through `Arc<Runtime>`.
pub struct Runtime {
    /// Validated configuration (as opened; the recall tunables in force are
    /// [`Runtime::tunables`]).
    pub config: Config,
    /// System of record.
    pub records: Arc<dyn RecordStore>,
    /// BM25 index of episodes.
    pub keyword: Arc<dyn KeywordIndex>,
    /// Vector index of episodes.
    pub vectors: Arc<dyn VectorIndex>,
    /// Semantic tier (entity/relation graph).
    pub graph: Arc<dyn GraphStore>,
    /// Embedding model (behind the content-hash cache).
    pub embedder: Arc<dyn Embedder>,
    /// The episodic worker's session summariser.
    pub summarizer: Arc<dyn Summarizer>,
    /// The semantic and dedup workers' graph extractor.
    pub extractor: Arc<dyn GraphExtractor>,
    /// Prompt files (compiled-in or from `llm.prompts_dir`).
    pub prompts: Arc<Prompts>,
    /// Wake-ups for workers.
    pub bus: Bus,
    tunables: RwLock<Arc<Tunables>>,
}

/// The recall settings in force: `config.recall` at open, replaced as a
/// whole by [`Runtime::set_recall`] (readers take a snapshot, so one request
/// never sees half of an update).
#[derive(Debug)]
pub struct Tunables {
    /// The `[recall]` section in force.
    pub recall: RecallConfig,
    /// The trivial-message filter built from `recall.trivial_messages`.
    pub trivial: TrivialFilter,
}

impl Tunables {
    fn new(recall: RecallConfig) -> Self {
        let trivial = TrivialFilter::new(&recall.trivial_messages);
        Self { recall, trivial }
    }
}

/// Optional replacements for the default components (tests, eval, embedding
/// a shared model in several `Memory` instances). `None` = built from config.
#[derive(Default, Clone)]
pub struct Components {
    /// Embedding model (wrapped in the content-hash cache by `open`).
    pub embedder: Option<Arc<dyn Embedder>>,
    /// Session summariser; default as `[llm]` says ([`crate::summary::load`]).
    pub summarizer: Option<Arc<dyn Summarizer>>,
    /// Graph extractor; default as `[llm]` says ([`crate::graph::extract::load`]).
    pub extractor: Option<Arc<dyn GraphExtractor>>,
    /// Keep the SQLite database in memory and the keyword index in RAM
    /// (the vector index still lives under `data_dir`).
    pub ephemeral: bool,
    /// Do not start background workers (promotion then runs only via
    /// `Memory::run_pending`); used by crash-recovery tests.
    pub no_workers: bool,
}

/// What the typed-memory capability is built from: its stores and where
/// its knowledge indexes live.
pub struct TypedParts {
    /// Private typed memories (the system of record's).
    pub typed: Arc<dyn TypedStore>,
    /// Team and public tiers.
    pub shared: Arc<dyn SharedStores>,
    /// Where the knowledge indexes of every tier open.
    pub places: IndexPlaces,
    /// BM25 index of the private store's facts.
    pub knowledge_keyword: Arc<dyn KeywordIndex<MemoryId>>,
    /// Vector index of the private store's facts.
    pub knowledge_vectors: Arc<dyn VectorIndex<MemoryId>>,
}

/// `meta` key: the embedder the indexes were built with ("model (N dims)").
pub(crate) const META_EMBEDDER: &str = "embedding.model";
/// `meta` key: the keyword analyzer version the indexes were built with
/// ([`crate::store::analyzer::VERSION`]; absent in indexes built before it
/// was recorded, which used version 1).
pub(crate) const META_ANALYZER: &str = "keyword.analyzer";
/// `meta` key: "1" while a `strata reindex` runs.
pub(crate) const META_REINDEXING: &str = "reindex.in_progress";

impl Runtime {
    /// Opens the stores the config names (through [`crate::store::factory`]),
    /// loads the models not supplied in `components`, and, with
    /// `check_meta`, verifies that the indexes were built with this
    /// embedder (first, before any index opens).
    ///
    /// # Errors
    /// [`Error::Config`] for an invalid config, an index built with another
    /// embedder or an interrupted reindex (both say to run `strata
    /// reindex`); [`Error::Embedder`] for a missing model; store errors.
    pub async fn open(config: Config, components: Components, check_meta: bool) -> Result<(Arc<Self>, TypedParts)> {
        config.validate()?;
        let embedder = match components.embedder {
            Some(e) => e,
            None => crate::embed::load::embedder(&config).await?,
        };
        let embedder: Arc<dyn Embedder> = Arc::new(CachedEmbedder::new(embedder, config.embedding.cache_entries));
        // the [recall] keys that belong to the model (its cosines' scale) follow the embedder in use
        let mut config = config;
        config.recall.fit_to(embedder.model_id());
        let prompts = crate::llm::load::prompts(&config)?;
        let (summarizer, extractor) = match (components.summarizer, components.extractor) {
            (Some(s), Some(x)) => (s, x),
            (s, x) => {
                let chat = crate::llm::load::chat(&config, prompts.clone())?;
                (
                    s.unwrap_or_else(|| crate::summary::load(&config, chat.clone())),
                    x.unwrap_or_else(|| crate::graph::extract::load(&config, chat)),
                )
            }
        };
        let embedder_id = embedder_id(embedder.as_ref());
        let dir = config.data_dir.clone();
        let ephemeral = components.ephemeral;
        let stores = factory::open_stores(&config, ephemeral).await?;
        if check_meta {
            check_index_meta(stores.records.as_ref(), &embedder_id).await?;
        }
        let places = IndexPlaces::new(&config, embedder.dim()).await?;
        let (keyword, vectors, knowledge_keyword, knowledge_vectors) = {
            let places = places.clone();
            tokio::task::spawn_blocking(move || -> Result<_> {
                let knowledge = dir.join("knowledge");
                Ok((
                    places.keyword_index("episodes", &dir, ephemeral)?,
                    places.vector_index("episodes", &dir)?,
                    places.keyword_index("knowledge", &knowledge, ephemeral)?,
                    places.vector_index("knowledge", &knowledge)?,
                ))
            })
            .await??
        };
        let tunables = RwLock::new(Arc::new(Tunables::new(config.recall.clone())));
        let rt = Arc::new(Runtime {
            config,
            records: stores.records,
            keyword,
            vectors,
            graph: stores.graph,
            embedder,
            summarizer,
            extractor,
            prompts,
            bus: Bus::new(),
            tunables,
        });
        let parts = TypedParts {
            typed: stores.typed,
            shared: stores.shared,
            places,
            knowledge_keyword,
            knowledge_vectors,
        };
        Ok((rt, parts))
    }

    /// True when `text` is a trivial message (see [`crate::recall::trivial`]).
    pub fn is_trivial(&self, text: &str) -> bool {
        self.tunables().trivial.is_trivial(text)
    }

    /// A snapshot of the recall settings in force.
    pub fn tunables(&self) -> Arc<Tunables> {
        self.tunables
            .read()
            .map(|t| t.clone())
            .unwrap_or_else(|p| p.into_inner().clone())
    }

    /// Puts `recall` in force for the next request (a whole new snapshot),
    /// its unset model keys filled from the embedder's fit
    /// ([`RecallConfig::fit_to`]).
    pub fn set_recall(&self, mut recall: RecallConfig) {
        recall.fit_to(self.embedder.model_id());
        let t = Arc::new(Tunables::new(recall));
        match self.tunables.write() {
            Ok(mut g) => *g = t,
            Err(p) => *p.into_inner() = t,
        }
    }

    /// The configuration in force: the one opened with, with the recall
    /// tunables as last set.
    pub fn active_config(&self) -> Config {
        let mut c = self.config.clone();
        c.recall = self.tunables().recall.clone();
        c
    }
}

/// How the index bookkeeping names an embedder: "model (N dims)".
pub(crate) fn embedder_id(e: &dyn Embedder) -> String {
    format!("{} ({} dims)", e.model_id(), e.dim())
}

/// Checks that the indexes were built with `embedder_id` ("model (N
/// dims)") and that no reindex was interrupted; records the embedder on
/// first use. Called before the indexes open.
async fn check_index_meta(records: &dyn RecordStore, embedder_id: &str) -> Result<()> {
    if records.meta_get(META_REINDEXING).await?.as_deref() == Some("1") {
        return Err(Error::Config("an interrupted `strata reindex` left the indexes incomplete; run `strata reindex` again".into()));
    }
    let built_with = records.meta_get(META_EMBEDDER).await?;
    let analyzer = crate::store::analyzer::VERSION;
    match (&built_with, records.meta_get(META_ANALYZER).await?) {
        (_, Some(v)) if v != analyzer => return Err(analyzer_mismatch(&v)),
        // indexes written before the version was recorded used version 1
        (Some(_), None) if analyzer != "1" => return Err(analyzer_mismatch("1")),
        (_, Some(_)) => {}
        (_, None) => records.meta_set(META_ANALYZER, analyzer).await?,
    }
    match built_with {
        Some(built) if built != embedder_id => Err(Error::Config(format!(
            "the vector index was built with {built} but the configured embedder is {embedder_id}; \
             run `strata reindex` to rebuild every index from the system of record (or switch the embedding config back)"
        ))),
        Some(_) => Ok(()),
        None => records.meta_set(META_EMBEDDER, embedder_id).await,
    }
}

fn analyzer_mismatch(built: &str) -> Error {
    Error::Config(format!(
        "the keyword index was built with keyword analyzer version {built} but this build analyses text with version {}; \
         run `strata reindex` to rebuild every index from the system of record",
        crate::store::analyzer::VERSION
    ))
}
