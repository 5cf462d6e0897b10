//! Background workers: each is a cancellable task that talks to the rest of
//! the system only through the bus and the stores.
//!
//! - [`episodic`]: `SessionCompleted` → summary, abstract, episode row, both indexes, `EpisodeCreated`.
//! - [`idle`]: ends sessions idle longer than `sessions.idle_timeout_secs`.
//! - [`pruner`]: removes expired episodes from every index on a cron schedule.

pub mod episodic;
pub mod idle;
pub mod pruner;

