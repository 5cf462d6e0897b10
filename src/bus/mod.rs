//! In-process event bus: flume channels carry wake-up notices from writers
//! to workers; the durable truth is the outbox table in the system of record.
//!
//! A state change and its outbox row are written in one SQLite transaction;
//! then [`Bus::publish`] wakes the subscribers of that event kind. A worker
//! that wakes reads pending events from the outbox, so a lost notice (or a
//! crash) loses nothing: on start-up every worker is woken once and replays
//! whatever is still pending.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::store::EventKind;

/// Fan-out of wake-up notices per event kind. A clone is a handle on the
/// same subscribers (what a capability keeps to wake a worker).
#[derive(Debug, Default, Clone)]
pub struct Bus {
    subscribers: Arc<Mutex<HashMap<&'static str, Vec<flume::Sender<()>>>>>,
}

impl Bus {
    /// A new bus with no subscribers.
    pub fn new() -> Self {
        Self::default()
    }

    /// Subscribes to `kind`; the receiver gets one notice per publish (bounded
    /// at 1 pending notice: several publishes before the worker wakes collapse
    /// into one wake-up, which is enough because the worker drains the outbox).
    pub fn subscribe(&self, kind: EventKind) -> flume::Receiver<()> {
        let (tx, rx) = flume::bounded(1);
        self.subscribers
            .lock()
            .expect("bus mutex")
            .entry(kind.as_str())
            .or_default()
            .push(tx);
        rx
    }

    /// Wakes every subscriber of `kind`. Never blocks.
    pub fn publish(&self, kind: EventKind) {
        if let Some(subs) = self
            .subscribers
            .lock()
            .expect("bus mutex")
            .get(kind.as_str())
        {
            for s in subs {
                let _ = s.try_send(());
            }
        }
    }

    /// Drops every sender so subscribers see the channel close.
    pub fn close(&self) {
        self.subscribers.lock().expect("bus mutex").clear();
    }
}
