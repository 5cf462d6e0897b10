//! Session dates as keyword terms.
//!
//! Questions name dates the conversation never spells out ("What movie did
//! Joanna watch on 1 May, 2022?" about a session held that day, whose turns
//! say "last night"). Every episode's keyword document therefore also holds
//! the days its session spanned, written "8 May 2023" (day, English month
//! name, year), so BM25 matches the month and year of such questions. Measured
//! on LoCoMo dev: ARCHITECTURE.md, "Session dates in the index".
//! The dates go only into the keyword index, never into summaries or
//! abstracts shown to the model.

use chrono::{DateTime, Duration, Utc};

/// Longest session span (days) whose every day is written; longer sessions
/// write only their first and last day.
pub const MAX_SPAN_DAYS: i64 = 7;

/// The days from `started_at` to `ended_at` (UTC, inclusive) as "8 May 2023",
/// one per line; just the two ends when the span exceeds [`MAX_SPAN_DAYS`],
/// just `started_at`'s day when `ended_at` is earlier.
pub fn session_date_terms(started_at: DateTime<Utc>, ended_at: DateTime<Utc>) -> String {
    let (first, last) = (started_at.date_naive(), ended_at.date_naive().max(started_at.date_naive()));
    let fmt = |d: chrono::NaiveDate| d.format("%-d %B %Y").to_string();
    let span = (last - first).num_days();
    if span > MAX_SPAN_DAYS {
        return format!("{}\n{}", fmt(first), fmt(last));
    }
    (0..=span).map(|i| fmt(first + Duration::days(i))).collect::<Vec<_>>().join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn days_of_the_session_are_written_out() {
        let t = |d: u32, h: u32| Utc.with_ymd_and_hms(2023, 5, d, h, 0, 0).unwrap();
        assert_eq!(session_date_terms(t(8, 13), t(8, 14)), "8 May 2023");
        assert_eq!(session_date_terms(t(8, 23), t(10, 1)), "8 May 2023\n9 May 2023\n10 May 2023");
        assert_eq!(session_date_terms(t(1, 0), t(30, 0)), "1 May 2023\n30 May 2023");
        assert_eq!(session_date_terms(t(8, 13), t(2, 0)), "8 May 2023", "a clock going backwards gives the start day");
    }
}
