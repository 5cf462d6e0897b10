//! Risk and coverage of L0 inject: what the chatbot gets at each operating
//! point of the acceptor (`recall.acceptor.accept_min`), and the fit of the
//! acceptor itself with cross-validation by conversation.
//!
//! Every probe of `strata eval locomo|longmemeval|multilingual` keeps the
//! candidates the acceptor judged, each with its features, its acceptance
//! probability and whether its session is gold ([`ProbeRecord`]). At an
//! operating point `t`, the injected set of a probe is its candidates with
//! an acceptance of at least `t` (the pool is already cut to `max_entries`),
//! exactly what inject hands over at `accept_min = t`. Per operating point:
//! - **answerable** questions: hit (a gold session injected), wrong
//!   (something injected, nothing gold), empty;
//! - **unanswerable** questions (another conversation's questions asked in a
//!   scope, LongMemEval `_abs`, the multilingual set's): anything injected;
//! - **premise** questions (LoCoMo category 5, a question that swaps the
//!   speaker): the evidence session injected (the chatbot can correct the
//!   premise), another injected.
//!
//! `strata eval calibrate --inject FILES` fits the acceptor (logistic
//! regression, [`super::logistic`]) on the records, every source weighing
//! the same, and prints the same table for probabilities predicted by a fit
//! that never saw the probe's group (a LoCoMo conversation, a multilingual
//! user, a LongMemEval question): the held-out figures the operating point is
//! chosen on.

use serde::{Deserialize, Serialize};
use serde_json::json;
use std::collections::BTreeMap;

use super::inject::Judged;
use crate::config::{AcceptorConfig, AcceptorFeatures};
use crate::error::{Error, Result};

/// What kind of question a probe asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProbeKind {
    /// The memory holds the answer (gold sessions known).
    Answerable,
    /// The memory cannot answer (nothing should be injected).
    Unanswerable,
    /// LoCoMo category 5: the premise is wrong (another speaker), the
    /// evidence session is the best thing to inject.
    Premise,
}

/// One probe (a question asked as a fresh turn) with its judged candidates:
/// one line of an `--inject-records` file.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ProbeRecord {
    /// The benchmark (`locomo`, `longmemeval`, `multilingual`): sources weigh the same in a fit.
    pub source: String,
    /// The cross-validation unit: a LoCoMo conversation, a multilingual user,
    /// a LongMemEval question.
    pub group: String,
    /// What kind of question it is.
    pub kind: ProbeKind,
    /// A breakdown label (LoCoMo category, LongMemEval type, question language).
    #[serde(default)]
    pub label: String,
    /// The candidates the acceptor judged, in the fused order.
    pub candidates: Vec<Judged>,
}

/// One operating point's row of the risk–coverage table.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
pub struct Row {
    /// The operating point (`accept_min`).
    pub threshold: f64,
    /// Answerable questions.
    pub answerable: usize,
    /// Share of them with a gold session injected.
    pub hit: f64,
    /// Share with something injected and nothing gold.
    pub wrong: f64,
    /// Share with nothing injected.
    pub empty: f64,
    /// Unanswerable questions.
    pub unanswerable: usize,
    /// Share of them with anything injected.
    pub unanswerable_injected: f64,
    /// Premise (LoCoMo category 5) questions.
    pub premise: usize,
    /// Share of them with the evidence session injected.
    pub premise_evidence: f64,
    /// Share with only other sessions injected.
    pub premise_other: f64,
}

/// The operating points a table shows.
pub const THRESHOLDS: [f64; 12] = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9];

fn share(x: usize, n: usize) -> f64 {
    if n == 0 {
        f64::NAN
    } else {
        x as f64 / n as f64
    }
}

/// The risk–coverage row of `records` at `t`, the acceptance of each
/// candidate read by `p` (the probe's index and the candidate's).
pub fn row_at(records: &[ProbeRecord], t: f64, p: &impl Fn(usize, usize) -> f64) -> Row {
    let (mut n, mut hit, mut wrong, mut empty) = (0, 0, 0, 0);
    let (mut un, mut un_inj, mut pn, mut pe, mut po) = (0, 0, 0, 0, 0);
    for (i, r) in records.iter().enumerate() {
        let injected: Vec<&Judged> = r.candidates.iter().enumerate().filter(|(j, _)| p(i, *j) >= t).map(|(_, c)| c).collect();
        let gold = injected.iter().any(|c| c.gold);
        match r.kind {
            ProbeKind::Answerable => {
                n += 1;
                if injected.is_empty() {
                    empty += 1;
                } else if gold {
                    hit += 1;
                } else {
                    wrong += 1;
                }
            }
            ProbeKind::Unanswerable => {
                un += 1;
                un_inj += usize::from(!injected.is_empty());
            }
            ProbeKind::Premise => {
                pn += 1;
                if gold {
                    pe += 1;
                } else if !injected.is_empty() {
                    po += 1;
                }
            }
        }
    }
    Row {
        threshold: t,
        answerable: n,
        hit: share(hit, n),
        wrong: share(wrong, n),
        empty: share(empty, n),
        unanswerable: un,
        unanswerable_injected: share(un_inj, un),
        premise: pn,
        premise_evidence: share(pe, pn),
        premise_other: share(po, pn),
    }
}

/// The table at [`THRESHOLDS`] and at `shipped` (when not among them), by threshold.
pub fn table(records: &[ProbeRecord], shipped: Option<f64>, p: impl Fn(usize, usize) -> f64) -> Vec<Row> {
    let mut ts: Vec<f64> = THRESHOLDS.to_vec();
    if let Some(s) = shipped.filter(|s| !ts.iter().any(|t| (t - s).abs() < 1e-9)) {
        ts.push(s);
    }
    ts.sort_by(f64::total_cmp);
    ts.into_iter().map(|t| row_at(records, t, &p)).collect()
}

/// The table with the acceptance inject computed.
pub fn table_as_run(records: &[ProbeRecord], shipped: Option<f64>) -> Vec<Row> {
    table(records, shipped, |i, j| records[i].candidates[j].acceptance)
}

/// Prints `rows` under `title`, marking the `shipped` operating point.
pub fn print(title: &str, rows: &[Row], shipped: Option<f64>) {
    let f = |x: f64| if x.is_nan() { "–".to_string() } else { format!("{x:.3}") };
    println!("\n{title}");
    println!(
        "{:<12} {:>6} {:>6} {:>6} {:>6}   {:>14}   {:>16} {:>10}",
        "accept_min", "n", "hit", "wrong", "empty", "unanswerable", "premise: evid.", "other"
    );
    for r in rows {
        let mark = if shipped.is_some_and(|s| (s - r.threshold).abs() < 1e-9) { " *" } else { "" };
        println!(
            "{:<12} {:>6} {:>6} {:>6} {:>6}   {:>14}   {:>16} {:>10}",
            format!("{:.2}{mark}", r.threshold),
            r.answerable,
            f(r.hit),
            f(r.wrong),
            f(r.empty),
            format!("{} ({})", f(r.unanswerable_injected), r.unanswerable),
            format!("{} ({})", f(r.premise_evidence), r.premise),
            f(r.premise_other)
        );
    }
    if shipped.is_some() {
        println!("(* the configured recall.acceptor.accept_min)");
    }
}

/// The table as JSON rows.
pub fn json(rows: &[Row]) -> serde_json::Value {
    json!(rows)
}

/// The table as markdown (for `--report`).
pub fn markdown(rows: &[Row], shipped: Option<f64>) -> String {
    let f = |x: f64| if x.is_nan() { "–".to_string() } else { format!("{x:.3}") };
    let mut s = String::from("| accept_min | n | hit | wrong | empty | unanswerable: injected (n) | premise: evidence (n) | premise: other |\n|---|---|---|---|---|---|---|---|\n");
    for r in rows {
        let mark = if shipped.is_some_and(|x| (x - r.threshold).abs() < 1e-9) { " (shipped)" } else { "" };
        s.push_str(&format!(
            "| {:.2}{mark} | {} | {} | {} | {} | {} ({}) | {} ({}) | {} |\n",
            r.threshold,
            r.answerable,
            f(r.hit),
            f(r.wrong),
            f(r.empty),
            f(r.unanswerable_injected),
            r.unanswerable,
            f(r.premise_evidence),
            r.premise,
            f(r.premise_other)
        ));
    }
    s
}

/// Reads `--inject-records` files (JSON lines of [`ProbeRecord`]).
///
/// # Errors
/// [`Error::Data`] naming the file and line of an unreadable record.
pub fn read(paths: &[std::path::PathBuf]) -> Result<Vec<ProbeRecord>> {
    let mut out = Vec::new();
    for path in paths {
        let text = std::fs::read_to_string(path).map_err(|e| Error::Data(format!("cannot read {}: {e}", path.display())))?;
        for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
            out.push(
                serde_json::from_str(line).map_err(|e| Error::Data(format!("{}:{}: {e}", path.display(), i + 1)))?,
            );
        }
    }
    Ok(out)
}

/// Fits the acceptor on the candidates of `records` (label: gold), every
/// source weighing the same in total. Returns (weights, intercept).
pub fn fit(records: &[&ProbeRecord]) -> (AcceptorFeatures, f64) {
    let mut per_source: BTreeMap<&str, usize> = BTreeMap::new();
    for r in records {
        *per_source.entry(r.source.as_str()).or_default() += r.candidates.len();
    }
    let mut rows = Vec::new();
    let mut weights = Vec::new();
    for r in records {
        let w = 1.0 / per_source[r.source.as_str()].max(1) as f64;
        for c in &r.candidates {
            rows.push((c.features.values().to_vec(), c.gold));
            weights.push(w);
        }
    }
    let (w, b) = super::logistic::fit_logistic_weighted(&rows, &weights);
    let mut v = [0.0; 15];
    v.copy_from_slice(&w[..15]);
    (AcceptorFeatures::from_values(v), b)
}

/// The acceptance of a candidate with `f` under (`weights`, `intercept`).
pub fn predict(weights: &AcceptorFeatures, intercept: f64, f: &AcceptorFeatures) -> f64 {
    let a = AcceptorConfig { enabled: true, accept_min: 0.0, intercept, weights: *weights };
    crate::recall::evidence::acceptance(&a, f)
}

/// Held-out acceptances: each group's candidates scored by a fit on every
/// other group (leave one group out). Indexed like `records` and their candidates.
pub fn cross_validate(records: &[ProbeRecord]) -> Vec<Vec<f64>> {
    let groups: Vec<(&str, &str)> = {
        let mut g: Vec<(&str, &str)> = records.iter().map(|r| (r.source.as_str(), r.group.as_str())).collect();
        g.sort();
        g.dedup();
        g
    };
    let mut out: Vec<Vec<f64>> = records.iter().map(|r| vec![f64::NAN; r.candidates.len()]).collect();
    for g in groups {
        let train: Vec<&ProbeRecord> = records.iter().filter(|r| (r.source.as_str(), r.group.as_str()) != g).collect();
        let (w, b) = fit(&train);
        for (i, r) in records.iter().enumerate() {
            if (r.source.as_str(), r.group.as_str()) == g {
                for (j, c) in r.candidates.iter().enumerate() {
                    out[i][j] = predict(&w, b, &c.features);
                }
            }
        }
    }
    out
}

/// The operating point with the highest hit whose wrong rate is at most
/// `max_wrong` and whose unanswerable and premise-other rates are at most
/// `max_unanswerable` (NaN rates, with no such questions, pass), the
/// stricter one on a tie; `None`
/// when no row qualifies.
pub fn choose(rows: &[Row], max_wrong: f64, max_unanswerable: f64) -> Option<f64> {
    let ok = |x: f64, m: f64| x.is_nan() || x <= m;
    rows.iter()
        .filter(|r| ok(r.wrong, max_wrong) && ok(r.unanswerable_injected, max_unanswerable) && ok(r.premise_other, max_unanswerable))
        .max_by(|a, b| a.hit.total_cmp(&b.hit).then_with(|| a.threshold.total_cmp(&b.threshold)))
        .map(|r| r.threshold)
}

/// Writes `records` as JSON lines to `path`.
///
/// # Errors
/// I/O errors.
pub fn write(path: &std::path::Path, records: &[ProbeRecord]) -> Result<()> {
    use std::io::Write;
    let mut f = std::io::BufWriter::new(std::fs::File::create(path)?);
    for r in records {
        writeln!(f, "{}", serde_json::to_string(r)?)?;
    }
    f.flush()?;
    Ok(())
}

/// The operating point `mem` runs at (`None` when its acceptor is off).
pub fn accept_min(mem: &crate::Memory) -> Option<f64> {
    let recall = &mem.runtime().tunables().recall;
    recall.acceptor.enabled.then_some(recall.acceptor.accept_min)
}

/// What every eval does with its probe records: writes them to
/// `inject_records` when given, prints the risk–coverage table under
/// `title` with the run's operating point marked, and returns the rows and
/// that point (`None` when the acceptor is off).
///
/// # Errors
/// I/O errors writing the records.
pub fn report(
    accept_min: Option<f64>,
    records: &[ProbeRecord],
    inject_records: Option<&std::path::Path>,
    title: &str,
) -> Result<(Vec<Row>, Option<f64>)> {
    if let Some(path) = inject_records {
        write(path, records)?;
        eprintln!("wrote {} probe records to {}", records.len(), path.display());
    }
    let rows = table_as_run(records, accept_min);
    print(title, &rows, accept_min);
    Ok((rows, accept_min))
}

/// `strata eval calibrate --inject FILES`: the held-out risk–coverage table
/// of each source and of all ([`cross_validate`]), beside the table of the
/// acceptance the records were run with; the operating point [`choose`]
/// picks on the held-out table of all sources; the weights fitted on every
/// record, as the TOML of `[recall.acceptor]`.
///
/// # Errors
/// [`Error::InvalidInput`] when the files hold no candidate; read errors.
pub fn calibrate(config: &crate::config::Config, paths: &[std::path::PathBuf], max_wrong: f64, max_unanswerable: f64) -> Result<()> {
    let records = read(paths)?;
    let candidates: usize = records.iter().map(|r| r.candidates.len()).sum();
    if candidates == 0 {
        return Err(Error::InvalidInput("the --inject files hold no judged candidate (was recall.acceptor.enabled on?)".into()));
    }
    let held = cross_validate(&records);
    let mut sources: Vec<&str> = records.iter().map(|r| r.source.as_str()).collect();
    sources.sort();
    sources.dedup();
    let shipped = config.recall.acceptor.accept_min;
    for src in &sources {
        let idx: Vec<usize> = (0..records.len()).filter(|i| records[*i].source == *src).collect();
        let sub: Vec<ProbeRecord> = idx.iter().map(|i| records[*i].clone()).collect();
        let groups: std::collections::BTreeSet<&str> = sub.iter().map(|r| r.group.as_str()).collect();
        print(&format!("{src}: as run (the acceptor of the run, {} probes, groups {:?})", sub.len(), groups), &table_as_run(&sub, Some(shipped)), Some(shipped));
        print(
            &format!("{src}: held out (each group scored by a fit on the others)"),
            &table(&sub, None, |i, j| held[idx[i]][j]),
            None,
        );
    }
    let min_score = config.recall.min_score;
    print(
        &format!("all sources: the fused score alone as the acceptance (recall.min_score = {min_score} marked: inject without the acceptor)"),
        &table(&records, Some(min_score), |i, j| records[i].candidates[j].features.score),
        Some(min_score),
    );
    let all = table(&records, None, |i, j| held[i][j]);
    print("all sources: held out", &all, None);
    let refs: Vec<&ProbeRecord> = records.iter().collect();
    let (w, b) = fit(&refs);
    println!("\n# {} probes, {candidates} candidates; every source weighs the same", records.len());
    let chosen = match choose(&all, max_wrong, max_unanswerable) {
        Some(t) => {
            println!("# operating point: the held-out hit is highest at wrong <= {max_wrong} and unanswerable <= {max_unanswerable}");
            Some(t)
        }
        None => {
            let t = choose(&all, max_wrong, 1.0);
            match t {
                Some(_) => println!("# no operating point keeps unanswerable <= {max_unanswerable}: the highest held-out hit at wrong <= {max_wrong} alone"),
                None => println!("# no operating point keeps wrong <= {max_wrong}: accept_min left at {shipped}"),
            }
            t
        }
    };
    println!("[recall.acceptor]\nenabled = true\naccept_min = {:.2}\nintercept = {b:.4}", chosen.unwrap_or(shipped));
    let weights: Vec<String> = AcceptorFeatures::NAMES.iter().zip(w.values()).map(|(n, v)| format!("{n} = {v:.4}")).collect();
    println!("weights = {{ {} }}", weights.join(", "));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn judged(gold: bool, acceptance: f64, score: f64) -> Judged {
        Judged { gold, acceptance, features: AcceptorFeatures { score, coverage: score, ..Default::default() } }
    }

    fn rec(group: &str, kind: ProbeKind, c: Vec<Judged>) -> ProbeRecord {
        ProbeRecord { source: "t".into(), group: group.into(), kind, label: String::new(), candidates: c }
    }

    #[test]
    fn a_row_counts_hit_wrong_empty_unanswerable_and_premise_at_its_threshold() {
        let records = vec![
            rec("a", ProbeKind::Answerable, vec![judged(true, 0.9, 0.9), judged(false, 0.6, 0.6)]),
            rec("a", ProbeKind::Answerable, vec![judged(false, 0.7, 0.7), judged(true, 0.4, 0.4)]),
            rec("b", ProbeKind::Answerable, vec![judged(false, 0.2, 0.2)]),
            rec("b", ProbeKind::Unanswerable, vec![judged(false, 0.55, 0.55)]),
            rec("b", ProbeKind::Premise, vec![judged(false, 0.8, 0.8), judged(true, 0.3, 0.3)]),
        ];
        let r = row_at(&records, 0.5, &|i, j| records[i].candidates[j].acceptance);
        assert_eq!(r.answerable, 3);
        assert!((r.hit - 1.0 / 3.0).abs() < 1e-9 && (r.wrong - 1.0 / 3.0).abs() < 1e-9 && (r.empty - 1.0 / 3.0).abs() < 1e-9);
        assert_eq!((r.unanswerable, r.unanswerable_injected), (1, 1.0));
        assert_eq!((r.premise, r.premise_evidence, r.premise_other), (1, 0.0, 1.0));
        let r = row_at(&records, 0.35, &|i, j| records[i].candidates[j].acceptance);
        assert!((r.hit - 2.0 / 3.0).abs() < 1e-9, "the second question's gold now goes in beside the wrong one");
        let rows = table_as_run(&records, Some(0.55));
        assert!(rows.iter().any(|r| (r.threshold - 0.55).abs() < 1e-9) && rows.len() == THRESHOLDS.len() + 1);
        // from 0.4 up nothing is wrong (the second question's gold goes in beside its wrong one);
        // 0.4 hits most
        assert_eq!(choose(&rows, 0.0, 1.0), Some(0.4));
        // nothing injected for the unanswerable and premise questions: above 0.8, where 0.85
        // and 0.9 hit as often (the stricter wins)
        assert_eq!(choose(&rows, 0.0, 0.0), Some(0.9));
    }

    #[test]
    fn the_cross_validated_fit_separates_a_separable_set_it_never_saw() {
        // gold candidates have a high score and coverage in every group
        let mut records = Vec::new();
        for g in ["a", "b", "c", "d"] {
            for i in 0..30 {
                let x = (i as f64) / 30.0;
                records.push(rec(g, ProbeKind::Answerable, vec![judged(true, 0.0, 0.6 + 0.4 * x), judged(false, 0.0, 0.5 * x)]));
            }
        }
        let held = cross_validate(&records);
        for (r, ps) in records.iter().zip(&held) {
            for (c, p) in r.candidates.iter().zip(ps) {
                assert_eq!(c.gold, *p >= 0.5, "{c:?} {p}");
            }
        }
        let (w, _) = fit(&records.iter().collect::<Vec<_>>());
        assert!(w.score > 0.0 && w.coverage > 0.0);
    }
}
