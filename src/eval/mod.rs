//! Evaluation: benchmark loaders, the BM25-over-raw-text baseline, metrics,
//! and the `strata eval` runners.

pub mod bm25;
pub mod cross_lingual;
pub mod graph;
pub mod inject;
pub mod locomo;
pub mod logistic;
pub mod longmemeval;
pub mod metrics;
pub mod multilingual;
pub mod replay;
pub mod report;
pub mod risk;
pub mod runner;
pub mod systems;
