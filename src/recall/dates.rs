//! Session dates as keyword terms.
//!
//! Questions name dates the conversation never spells out ("What movie did
//! Joanna watch on 1 May, 2022?" about a session held that day, whose turns
//! say "last night"). Every episode's keyword document therefore also holds
//! the days its session spanned, written "8 May 2023" (day, English month
//! name, year), so BM25 matches the month and year of such questions. Measured
//! on LoCoMo dev: docs/measurements.md, 2026-11-30 ("Session dates").
//! The dates go only into the keyword index, never into summaries or
//! abstracts shown to the model.
//!
//! Besides the words, every day is also written as three exact tokens,
//! `day20230508`, `month202305` and `year2023` (see [`date_tokens`]), so a
//! question that names a day *relative to when it is asked* ("last
//! Saturday", "two weeks ago", "last month") can be resolved against the
//! query's reference time ([`resolve_relative`]) and matched to the one day,
//! month or year, not to every "8th" or every "May".

use chrono::{DateTime, Datelike, Duration, Months, NaiveDate, Utc, Weekday};

/// Longest session span (days) whose every day is written; longer sessions
/// write only their first and last day.
pub const MAX_SPAN_DAYS: i64 = 7;

/// The days from `started_at` to `ended_at` (UTC, inclusive) as "8 May 2023",
/// one per line; just the two ends when the span exceeds [`MAX_SPAN_DAYS`],
/// just `started_at`'s day when `ended_at` is earlier.
pub fn session_date_terms(started_at: DateTime<Utc>, ended_at: DateTime<Utc>) -> String {
    let (first, last) = (
        started_at.date_naive(),
        ended_at.date_naive().max(started_at.date_naive()),
    );
    let fmt = |d: chrono::NaiveDate| d.format("%-d %B %Y").to_string();
    let span = (last - first).num_days();
    if span > MAX_SPAN_DAYS {
        return format!("{}\n{}", fmt(first), fmt(last));
    }
    (0..=span)
        .map(|i| fmt(first + Duration::days(i)))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The exact tokens of the same days as [`session_date_terms`]: for each day
/// `dayYYYYMMDD`, and once each `monthYYYYMM` and `yearYYYY`, space-separated.
/// They are single alphanumeric words, kept whole by the analyser.
pub fn date_tokens(started_at: DateTime<Utc>, ended_at: DateTime<Utc>) -> String {
    let (first, last) = (
        started_at.date_naive(),
        ended_at.date_naive().max(started_at.date_naive()),
    );
    let span = (last - first).num_days();
    let days: Vec<NaiveDate> = if span > MAX_SPAN_DAYS {
        vec![first, last]
    } else {
        (0..=span).map(|i| first + Duration::days(i)).collect()
    };
    let mut out: Vec<String> = Vec::new();
    for d in days {
        for t in [day_token(d), month_token(d), year_token(d.year())] {
            if !out.contains(&t) {
                out.push(t);
            }
        }
    }
    out.join(" ")
}

fn day_token(d: NaiveDate) -> String {
    d.format("day%Y%m%d").to_string()
}

fn month_token(d: NaiveDate) -> String {
    d.format("month%Y%m").to_string()
}

fn year_token(y: i32) -> String {
    format!("year{y}")
}

/// The relative dates of an English `text` said at `at`, resolved as
/// [`resolve_relative`] does and written for a reader: "7 May 2023", a range
/// "4–6 May 2023" ("28 June – 4 July 2023", "30 December 2022 – 1 January
/// 2023", "April – May 2023"), a month "April 2023", a year "2022"; `None`
/// when the text names none. An evidence snippet carries it, so "I went
/// there yesterday" in a session of 8 May 2023 reaches the model as the 7th.
pub fn resolved_for_reader(text: &str, at: DateTime<Utc>) -> Option<String> {
    let tokens = resolve_relative(text, at);
    let parse = |prefix: &str, fmt: &str| -> Vec<NaiveDate> {
        tokens
            .split_whitespace()
            .filter_map(|t| t.strip_prefix(prefix))
            .filter_map(|d| NaiveDate::parse_from_str(&format!("{d}{fmt}"), "%Y%m%d").ok())
            .collect()
    };
    // a range says its shared month and year once: "19–25 June 2023", "28 June – 4 July 2023"
    let range = |v: &[NaiveDate], f: &str| -> Option<String> {
        let (first, last) = (v.iter().min()?, v.iter().max()?);
        let (a, b) = (first.format(f).to_string(), last.format(f).to_string());
        if a == b {
            return Some(a);
        }
        let day = f.starts_with("%-d");
        Some(if first.year() != last.year() {
            format!("{a} – {b}")
        } else if day && first.month() == last.month() {
            format!("{}–{b}", first.day())
        } else {
            format!("{} – {b}", first.format(if day { "%-d %B" } else { "%B" }))
        })
    };
    let days = parse("day", "");
    if !days.is_empty() {
        return range(&days, "%-d %B %Y");
    }
    let months = parse("month", "01");
    if !months.is_empty() {
        return range(&months, "%B %Y");
    }
    let years: Vec<NaiveDate> = tokens
        .split_whitespace()
        .filter_map(|t| t.strip_prefix("year")?.parse::<i32>().ok())
        .filter_map(|y| NaiveDate::from_ymd_opt(y, 1, 1))
        .collect();
    range(&years, "%Y")
}

/// Most date tokens one query resolves to.
pub const MAX_RESOLVED: usize = 16;

/// Resolves the relative dates of an English query against `now` (the
/// moment the question is asked, UTC) into the exact tokens of
/// [`date_tokens`], space-separated ("" when the query names none).
///
/// Understood (case-insensitive; numbers as digits or "a"/"one".."twelve",
/// "a couple of" = 2, "a few" = 3):
/// - `today`, `tonight`, `this morning|afternoon|evening`: today;
///   `yesterday`; `the day before yesterday`;
/// - `N days ago` (±1 day from 3 days on), `N weeks ago` (±1 day);
/// - `the past|last N days|weeks|months|years`, `the past week|month|year`:
///   every day from then to today (every month when that is more than
///   [`MAX_RESOLVED`] days, every year past [`MAX_RESOLVED`] months);
/// - `last|past|on <weekday>`: the latest such day before today;
/// - `last weekend`: the latest Saturday and Sunday before today;
///   `last week`: the seven days of the previous Monday–Sunday week;
///   `this week`: Monday to today;
/// - `N months ago`, `last month`, `this month`: that calendar month;
/// - `N years ago`, `last year`, `this year`: that year;
/// - ahead of `now`: `tomorrow`, `the day after tomorrow`; `next <weekday>`:
///   the first such day after today (not the one of next week: readers
///   differ, and a wrong week costs more than a near one); `next weekend`:
///   the first Saturday and Sunday after today; `next week`: the next
///   Monday–Sunday week; `next month`, `next year`: that calendar month or
///   year. "In two weeks" is not read: it is as often a duration ("I built
///   it in two weeks") as a date.
///
/// Absolute dates ("on 1 May, 2022", "in April") need no resolution: their
/// words already match the date words of [`session_date_terms`]. Other
/// languages are not resolved. At most [`MAX_RESOLVED`] tokens.
pub fn resolve_relative(query: &str, now: DateTime<Utc>) -> String {
    let words: Vec<String> = query
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(|w| w.to_lowercase())
        .collect();
    let today = now.date_naive();
    let mut out = Resolved::default();
    let w = |i: usize| words.get(i).map(String::as_str).unwrap_or("");
    for i in 0..words.len() {
        match w(i) {
            "today" | "tonight" => out.push(day_token(today)),
            "morning" | "afternoon" | "evening" if i > 0 && w(i - 1) == "this" => {
                out.push(day_token(today))
            }
            "yesterday" => {
                let before =
                    i >= 3 && w(i - 1) == "before" && w(i - 2) == "day" && w(i - 3) == "the";
                out.push(day_token(
                    today - Duration::days(if before { 2 } else { 1 }),
                ));
            }
            "ago" if i > 0 => {
                let unit = w(i - 1).trim_end_matches('s');
                let n = count_before(&words, i - 1);
                let Some(n) = n else { continue };
                match unit {
                    "day" => {
                        let d = today - Duration::days(n as i64);
                        let slack = if n >= 3 { 1 } else { 0 };
                        out.span(d - Duration::days(slack), d + Duration::days(slack));
                    }
                    "week" => {
                        let d = today - Duration::days(7 * n as i64);
                        out.span(d - Duration::days(1), d + Duration::days(1));
                    }
                    "month" => {
                        if let Some(d) = today.checked_sub_months(Months::new(n)) {
                            out.push(month_token(d));
                        }
                    }
                    "year" => out.push(year_token(today.year() - n as i32)),
                    _ => {}
                }
            }
            "last" | "past" | "on" => {
                let next = w(i + 1);
                if let Some(wd) = weekday(next) {
                    out.push(day_token(last_before(today, wd)));
                    continue;
                }
                if w(i) == "on" {
                    continue;
                }
                // "the past two weeks", "the last 3 days", "the past few months": up to today
                if let Some((n, unit)) = count_after(&words, i + 1) {
                    let from = match w(unit).trim_end_matches('s') {
                        "day" => today - Duration::days(n as i64),
                        "week" => today - Duration::days(7 * n as i64),
                        "month" => today.checked_sub_months(Months::new(n)).unwrap_or(today),
                        "year" => today
                            .checked_sub_months(Months::new(12 * n))
                            .unwrap_or(today),
                        _ => continue,
                    };
                    out.span(from, today);
                    continue;
                }
                // "the past week|month|year": the last 7 / 30 / 365 days (while "last week" is the calendar week before)
                if w(i) == "past" {
                    let back = match next {
                        "week" => 7,
                        "month" => 30,
                        "year" => 365,
                        _ => 0,
                    };
                    if back > 0 {
                        out.span(today - Duration::days(back), today);
                        continue;
                    }
                }
                match next {
                    "weekend" => {
                        let sunday = last_before(today, Weekday::Sun);
                        out.span(sunday - Duration::days(1), sunday);
                    }
                    "week" => {
                        let monday = today
                            - Duration::days(today.weekday().num_days_from_monday() as i64 + 7);
                        out.span(monday, monday + Duration::days(6));
                    }
                    "month" => {
                        if let Some(d) = today.checked_sub_months(Months::new(1)) {
                            out.push(month_token(d));
                        }
                    }
                    "year" => out.push(year_token(today.year() - 1)),
                    _ => {}
                }
            }
            "tomorrow" => {
                let after = i >= 2 && w(i - 1) == "after" && w(i - 2) == "day";
                out.push(day_token(today + Duration::days(if after { 2 } else { 1 })));
            }
            "next" => match (w(i + 1), weekday(w(i + 1))) {
                (_, Some(wd)) => out.push(day_token(first_after(today, wd))),
                ("weekend", _) => {
                    let saturday = first_after(today, Weekday::Sat);
                    out.span(saturday, saturday + Duration::days(1));
                }
                ("week", _) => {
                    let monday = today + Duration::days(7 - today.weekday().num_days_from_monday() as i64);
                    out.span(monday, monday + Duration::days(6));
                }
                ("month", _) => {
                    if let Some(d) = today.checked_add_months(Months::new(1)) {
                        out.push(month_token(d));
                    }
                }
                ("year", _) => out.push(year_token(today.year() + 1)),
                _ => {}
            },
            "this" => match w(i + 1) {
                "week" => {
                    let monday =
                        today - Duration::days(today.weekday().num_days_from_monday() as i64);
                    out.span(monday, today);
                }
                "month" => out.push(month_token(today)),
                "year" => out.push(year_token(today.year())),
                _ => {}
            },
            _ => {}
        }
    }
    out.0.join(" ")
}

/// The tokens a query resolves to: distinct, in order, at most [`MAX_RESOLVED`].
#[derive(Default)]
struct Resolved(Vec<String>);

impl Resolved {
    fn push(&mut self, t: String) {
        if !self.0.contains(&t) && self.0.len() < MAX_RESOLVED {
            self.0.push(t);
        }
    }

    /// Day tokens from `from` to `to` (inclusive) when they fit in
    /// [`MAX_RESOLVED`], else the month tokens of every month the span touches
    /// (and the year tokens past 16 months).
    fn span(&mut self, from: NaiveDate, to: NaiveDate) {
        let n = (to - from).num_days();
        if n < MAX_RESOLVED as i64 {
            (0..=n).for_each(|i| self.push(day_token(from + Duration::days(i))));
            return;
        }
        let months = (to.year() - from.year()) * 12 + to.month() as i32 - from.month() as i32;
        if months < MAX_RESOLVED as i32 {
            let first = from.with_day(1).unwrap_or(from);
            (0..=months as u32)
                .filter_map(|m| first.checked_add_months(Months::new(m)))
                .for_each(|d| self.push(month_token(d)));
            return;
        }
        (from.year()..=to.year()).for_each(|y| self.push(year_token(y)));
    }
}

/// The latest `wd` strictly before `today` (a week back when today is a `wd`).
fn last_before(today: NaiveDate, wd: Weekday) -> NaiveDate {
    let back =
        (today.weekday().num_days_from_monday() as i64 - wd.num_days_from_monday() as i64 - 1)
            .rem_euclid(7)
            + 1;
    today - Duration::days(back)
}

/// The first `wd` strictly after `today` (a week on when today is a `wd`).
fn first_after(today: NaiveDate, wd: Weekday) -> NaiveDate {
    let on = (wd.num_days_from_monday() as i64 - today.weekday().num_days_from_monday() as i64 - 1).rem_euclid(7) + 1;
    today + Duration::days(on)
}

/// The count written after `words[at]` and the index of the unit word
/// following it: "two weeks", "3 days", "few months", "couple of weeks".
fn count_after(words: &[String], at: usize) -> Option<(u32, usize)> {
    let w = |i: usize| words.get(i).map(String::as_str).unwrap_or("");
    let unit_at = match w(at) {
        "few" => at + 1,
        "couple" if w(at + 1) == "of" => at + 2,
        _ => at + 1,
    };
    if !matches!(
        w(unit_at).trim_end_matches('s'),
        "day" | "week" | "month" | "year"
    ) {
        return None;
    }
    Some((count_before(words, unit_at)?, unit_at))
}

/// The count written before `words[unit]`: "3", "two", "a", "a couple of", "a few".
fn count_before(words: &[String], unit: usize) -> Option<u32> {
    let w = |i: usize| words.get(i).map(String::as_str).unwrap_or("");
    if unit == 0 {
        return None;
    }
    let prev = w(unit - 1);
    if prev == "of" && unit >= 2 && w(unit - 2) == "couple" {
        return Some(2);
    }
    if prev == "few" {
        return Some(3);
    }
    let n = match prev {
        "a" | "an" | "one" => 1,
        "two" => 2,
        "three" => 3,
        "four" => 4,
        "five" => 5,
        "six" => 6,
        "seven" => 7,
        "eight" => 8,
        "nine" => 9,
        "ten" => 10,
        "eleven" => 11,
        "twelve" => 12,
        d => d.parse::<u32>().ok()?,
    };
    (1..=1000).contains(&n).then_some(n)
}

/// The weekday an English weekday's full name names (`src/text/lexicon/en.toml`).
fn weekday(w: &str) -> Option<Weekday> {
    let i = crate::text::lexicon::english().weekdays.iter().position(|d| d == w)?;
    Weekday::try_from(i as u8).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn days_of_the_session_are_written_out() {
        let t = |d: u32, h: u32| Utc.with_ymd_and_hms(2023, 5, d, h, 0, 0).unwrap();
        assert_eq!(session_date_terms(t(8, 13), t(8, 14)), "8 May 2023");
        assert_eq!(
            session_date_terms(t(8, 23), t(10, 1)),
            "8 May 2023\n9 May 2023\n10 May 2023"
        );
        assert_eq!(
            session_date_terms(t(1, 0), t(30, 0)),
            "1 May 2023\n30 May 2023"
        );
        assert_eq!(
            session_date_terms(t(8, 13), t(2, 0)),
            "8 May 2023",
            "a clock going backwards gives the start day"
        );
    }

    #[test]
    fn exact_tokens_of_the_days() {
        let t = |d: u32, h: u32| Utc.with_ymd_and_hms(2023, 5, d, h, 0, 0).unwrap();
        assert_eq!(
            date_tokens(t(8, 13), t(8, 14)),
            "day20230508 month202305 year2023"
        );
        assert_eq!(
            date_tokens(
                t(31, 23),
                Utc.with_ymd_and_hms(2023, 6, 1, 1, 0, 0).unwrap()
            ),
            "day20230531 month202305 year2023 day20230601 month202306"
        );
        // the analyser keeps them whole
        assert_eq!(
            crate::store::analyzer::analyze("day20230508 month202305 year2023"),
            vec!["day20230508", "month202305", "year2023"]
        );
    }

    #[test]
    fn relative_dates_resolve_against_the_question_time() {
        // Tuesday 7 February 2023
        let now = Utc.with_ymd_and_hms(2023, 2, 7, 9, 9, 0).unwrap();
        let r = |q: &str| resolve_relative(q, now);
        assert_eq!(
            r("Which book did I finish a week ago?"),
            "day20230130 day20230131 day20230201"
        );
        assert_eq!(r("what did I eat yesterday"), "day20230206");
        assert_eq!(r("and the day before yesterday?"), "day20230205");
        assert_eq!(
            r("Who did I meet last Tuesday?"),
            "day20230131",
            "today is a Tuesday: the one before"
        );
        assert_eq!(r("I got a gift last Saturday"), "day20230204");
        assert_eq!(r("what did I do on Monday"), "day20230206");
        assert_eq!(r("2 days ago"), "day20230205");
        assert_eq!(r("THREE DAYS AGO"), "day20230203 day20230204 day20230205");
        assert_eq!(
            r("a couple of weeks ago"),
            "day20230123 day20230124 day20230125"
        );
        assert_eq!(r("two months ago, with Rachel"), "month202212");
        assert_eq!(r("last month"), "month202301");
        assert_eq!(r("last year and this year"), "year2022 year2023");
        assert_eq!(r("last weekend"), "day20230204 day20230205");
        assert_eq!(
            r("last week"),
            "day20230130 day20230131 day20230201 day20230202 day20230203 day20230204 day20230205"
        );
        assert_eq!(r("this week"), "day20230206 day20230207");
        assert_eq!(r("this morning"), "day20230207");
        // nothing relative, or nothing resolvable
        assert_eq!(r("What movie did Joanna watch on 1 May, 2022?"), "");
        assert_eq!(r("a few ago, many days ago, the last time"), "");
        // spans up to today
        assert_eq!(
            r("How many times did I bake in the past two weeks?")
                .split(' ')
                .count(),
            15
        );
        assert!(
            r("in the past two weeks").starts_with("day20230124 ")
                && r("in the past two weeks").ends_with(" day20230207")
        );
        assert_eq!(
            r("the last 3 days"),
            "day20230204 day20230205 day20230206 day20230207"
        );
        assert_eq!(r("in the past month"), "month202301 month202302");
        assert_eq!(
            r("in the past few months"),
            "month202211 month202212 month202301 month202302"
        );
        assert_eq!(r("over the past couple of weeks").split(' ').count(), 15);
        assert_eq!(r("the past week"), "day20230131 day20230201 day20230202 day20230203 day20230204 day20230205 day20230206 day20230207");
        assert_eq!(r("the past 3 years"), "year2020 year2021 year2022 year2023");
        assert_eq!(r("지난주 토요일 👩‍👩‍👧 e\u{301}"), "");
        assert_eq!(r(""), "");
        // bounded however long the query
        assert!(r(&"last week ".repeat(1000)).split(' ').count() <= MAX_RESOLVED);
        assert!(
            r(&"9999 days ago 5 weeks ago 1 day ago ".repeat(50))
                .split(' ')
                .count()
                <= MAX_RESOLVED
        );
    }

    #[test]
    fn relative_dates_are_written_for_a_reader() {
        let at = Utc.with_ymd_and_hms(2023, 5, 8, 13, 56, 0).unwrap();
        assert_eq!(resolved_for_reader("I went to a support group yesterday.", at).as_deref(), Some("7 May 2023"));
        assert_eq!(resolved_for_reader("We moved last month", at).as_deref(), Some("April 2023"));
        assert_eq!(resolved_for_reader("I painted that last year", at).as_deref(), Some("2022"));
        assert_eq!(resolved_for_reader("I ran a race three days ago", at).as_deref(), Some("4–6 May 2023"));
        assert_eq!(resolved_for_reader("I love painting", at), None);
    }

    #[test]
    fn dates_ahead_are_resolved_too() {
        // Monday 8 May 2023
        let at = Utc.with_ymd_and_hms(2023, 5, 8, 13, 56, 0).unwrap();
        let r = |t: &str| resolved_for_reader(t, at);
        assert_eq!(r("I'm starting next month.").as_deref(), Some("June 2023"));
        assert_eq!(r("We're off to Canada next year").as_deref(), Some("2024"));
        assert_eq!(r("see you tomorrow").as_deref(), Some("9 May 2023"));
        assert_eq!(r("the day after tomorrow").as_deref(), Some("10 May 2023"));
        assert_eq!(r("the gig is next Friday").as_deref(), Some("12 May 2023"));
        assert_eq!(r("next Monday").as_deref(), Some("15 May 2023"), "today is a Monday: a week on");
        assert_eq!(r("next weekend").as_deref(), Some("13–14 May 2023"));
        assert_eq!(r("next week").as_deref(), Some("15–21 May 2023"));
        // ranges across a month, a year; months
        let june = Utc.with_ymd_and_hms(2023, 7, 5, 9, 0, 0).unwrap();
        assert_eq!(resolved_for_reader("last week", june).as_deref(), Some("26 June – 2 July 2023"));
        let jan = Utc.with_ymd_and_hms(2023, 1, 3, 9, 0, 0).unwrap();
        assert_eq!(resolved_for_reader("last week", jan).as_deref(), Some("26 December 2022 – 1 January 2023"));
        assert_eq!(resolved_for_reader("over the past two months", june).as_deref(), Some("May – July 2023"));
        // December rolls into the next year
        let dec = Utc.with_ymd_and_hms(2023, 12, 20, 9, 0, 0).unwrap();
        assert_eq!(resolved_for_reader("next month", dec).as_deref(), Some("January 2024"));
        // a duration is not a date; "next" alone names nothing
        assert_eq!(r("I built it in two weeks"), None);
        assert_eq!(r("what's next for you?"), None);
    }
}
