//! Copying an embedded deployment's system of record into another store
//! (`strata migrate`): the plan and report types and the [`CopyTarget`]
//! trait; the PostgreSQL implementation (batches, resumption, id offsets)
//! is documented on the backend, `store::postgres::copy`.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

use super::RecordStore;
use crate::error::Result;

/// One SQLite file of the source and the tier its typed rows belong to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CopySource {
    /// The file (`<data_dir>/strata.db`, `<data_dir>/shared/.../strata.db`).
    pub path: PathBuf,
    /// `private` (the main file: records and private typed memories),
    /// `team:<id>` or `public` (a shared store: typed memories only).
    pub tier: String,
}

/// One (file, table) step of a copy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CopyStep {
    /// The source file's tier (`private`, `team:<id>`, `public`).
    pub tier: String,
    /// Table name (the same in both stores).
    pub table: String,
    /// Rows in the source table when planned.
    pub rows: u64,
}

/// What a copy does: the files with the id offsets of their typed rows,
/// and the steps in order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CopyPlan {
    /// Source files, private first.
    pub sources: Vec<CopySource>,
    /// Per source: the amount added to `sid` and to `seq` (and `mem`).
    pub offsets: Vec<(i64, i64)>,
    /// Steps in copy order.
    pub steps: Vec<CopyStep>,
    /// Rows per batch (and per PostgreSQL transaction).
    pub batch: usize,
    /// True when this run resumes a copy begun earlier.
    pub resumed: bool,
}

/// Row counts of one (tier, table) in the source and the target.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TableCount {
    /// Tier of the source file.
    pub tier: String,
    /// Table.
    pub table: String,
    /// Rows in the source.
    pub source: u64,
    /// Rows of that tier in the target.
    pub target: u64,
}

/// A system of record that an embedded deployment's SQLite files can be
/// copied into, table by table in batches, resumably (its `meta` holds the
/// checkpoints, so a copy killed anywhere and run again goes on where it
/// stopped). Built by [`crate::store::factory::copy_target`].
#[async_trait]
pub trait CopyTarget: RecordStore {
    /// Plans a copy of `sources` (private first), `batch` rows at a time: counts
    /// the rows and fixes the id offsets of each file's typed rows. A copy begun
    /// earlier is resumed with the offsets it chose then.
    ///
    /// # Errors
    /// [`crate::Error::Config`] when the target holds records and no copy was
    /// begun there, or the source changed since the copy began; store errors.
    async fn plan(&self, sources: Vec<CopySource>, batch: usize) -> Result<CopyPlan>;
    /// Copies step `step` of `plan` from its last checkpoint; `progress` hears
    /// the rows of each committed batch. Returns the rows copied.
    async fn copy_step(&self, plan: &CopyPlan, step: usize, progress: &mut (dyn FnMut(u64) + Send)) -> Result<u64>;
    /// Moves identity sequences past the copied ids and marks the copy done.
    async fn finish(&self, plan: &CopyPlan) -> Result<()>;
    /// Row counts per (tier, table) in the source and the target.
    async fn verify(&self, plan: &CopyPlan) -> Result<Vec<TableCount>>;
}
