//! Recall: everything between a user's turn and the "## Memory Context"
//! section — the trivial-message filter, the recent-context query, score
//! calibration and fusion, language detection for cross-lingual pairs,
//! abstracts and evidence snippets.

pub mod abstracts;
pub mod dates;
pub mod evidence;
pub mod fusion;
pub mod language;
pub mod query;
pub mod snippet;
pub mod trivial;
