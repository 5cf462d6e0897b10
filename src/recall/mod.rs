//! Recall: everything between a user's turn and the "## Memory Context"
//! section — the trivial-message filter, the recent-context query, score
//! calibration and fusion, and abstracts.

pub mod abstracts;
pub mod dates;
pub mod fusion;
pub mod query;
pub mod trivial;
