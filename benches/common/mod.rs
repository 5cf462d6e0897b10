//! Timing helpers shared by the benches: criterion reports means, these keep
//! every individually timed iteration for p50/p99.
#![allow(dead_code)]

use std::time::{Duration as StdDuration, Instant};

/// Prints p50/p99 of individually timed iterations (criterion reports means).
pub fn report(name: &str, samples: &mut [StdDuration]) {
    if samples.is_empty() {
        return; // filtered out on the command line
    }
    samples.sort();
    let pick =
        |p: f64| samples[((samples.len() as f64 * p).ceil() as usize).clamp(1, samples.len()) - 1];
    eprintln!(
        "{name}: n={} p50={:.3} ms p99={:.3} ms",
        samples.len(),
        pick(0.50).as_secs_f64() * 1e3,
        pick(0.99).as_secs_f64() * 1e3
    );
}

/// Runs `op` `iters` times on fresh inputs from `setup`, timing each call
/// alone (setup excluded) and keeping every sample for the percentiles.
pub fn timed<T>(
    iters: u64,
    samples: &mut Vec<StdDuration>,
    mut setup: impl FnMut() -> T,
    mut op: impl FnMut(T),
) -> StdDuration {
    let mut total = StdDuration::ZERO;
    for _ in 0..iters {
        let input = setup();
        let t = Instant::now();
        op(input);
        let d = t.elapsed();
        samples.push(d);
        total += d;
    }
    total
}
