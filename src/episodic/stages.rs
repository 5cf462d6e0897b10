//! Where an inject's time goes: each stage's duration recorded as
//! `strata_inject_stage_seconds{stage}` (docs/server.md, "Metrics";
//! benches/recall prints the table).

/// A stage of inject, as the `stage` label of `strata_inject_stage_seconds`
/// (docs/server.md, "Metrics").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stage {
    /// Reading the session's earlier user turns from the system of record.
    RecentTurns,
    /// BM25 over the episodes (message, and the earlier turns apart) and the
    /// typed knowledge, side by side with the vector half.
    Keyword,
    /// The query embedding (an embedding-cache hit costs next to nothing).
    Embedding,
    /// The vector searches (episodes and knowledge).
    Vector,
    /// Calibration, fusion, the cross-lingual rescoring and the cuts.
    Fusion,
    /// Reading the kept episodes from the system of record.
    Hydration,
    /// The acceptor: the best candidate's session read when its weights need
    /// it, and the decision.
    Acceptor,
    /// The evidence snippets: the sessions not yet read, and the sentences.
    Snippets,
    /// Typed facts read from their stores, and the Memory Context rendered.
    Render,
}

impl Stage {
    fn label(self) -> &'static str {
        match self {
            Stage::RecentTurns => "recent_turns",
            Stage::Keyword => "keyword",
            Stage::Embedding => "embedding",
            Stage::Vector => "vector",
            Stage::Fusion => "fusion",
            Stage::Hydration => "hydration",
            Stage::Acceptor => "acceptor",
            Stage::Snippets => "snippets",
            Stage::Render => "render",
        }
    }
}

/// Records `strata_inject_stage_seconds{stage}`.
pub(crate) fn record_stage(stage: Stage, took: std::time::Duration) {
    metrics::histogram!("strata_inject_stage_seconds", "stage" => stage.label()).record(took.as_secs_f64());
}

/// Times the stages of one inject that follow each other: each `lap` records
/// the time since the previous one under its stage.
pub(crate) struct StageClock(std::time::Instant);

impl StageClock {
    pub(crate) fn start() -> Self {
        Self(std::time::Instant::now())
    }
    pub(crate) fn lap(&mut self, stage: Stage) {
        let now = std::time::Instant::now();
        record_stage(stage, now - self.0);
        self.0 = now;
    }
}
