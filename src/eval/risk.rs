//! Risk and coverage of L0 inject: what the chatbot gets at each operating
//! point of the acceptor (`accept_min` of `[recall.acceptor]` and of
//! `[recall.acceptor.foreign]`), and the fit of the acceptor itself with
//! cross-validation by conversation or user.
//!
//! Every probe of `strata eval locomo|longmemeval|multilingual` keeps the
//! candidates inject judged, each with its features, its acceptance
//! probability and whether its session is gold ([`ProbeRecord`]). Inject
//! decides once per message, on the best candidate: at an operating point
//! `t`, a probe whose best candidate has an acceptance of at least `t`
//! injects it and every other candidate scoring at least
//! `companion_min_score` (the pool is already cut to `max_entries`), a probe
//! below `t` injects nothing: exactly what inject hands over at
//! `accept_min = t`. A probe is judged by the English model or the foreign
//! one ([`Route`]), so each has its own table. Per operating point:
//! - **answerable** questions: hit (a gold session injected), wrong
//!   (something injected, nothing gold), empty;
//! - **unanswerable** questions (another conversation's questions asked in a
//!   scope, LongMemEval `_abs`, the multilingual set's): anything injected;
//! - **premise** questions (LoCoMo category 5, a question that swaps the
//!   speaker): the evidence session injected (the chatbot can correct the
//!   premise), another injected.
//!
//! `strata eval calibrate --inject FILES` fits each model (logistic
//! regression, [`super::logistic`]) on its route's probes (label: a gold
//! session among what would go in; an unanswerable question is never
//! right), every probe weighing the same, and prints the same table for
//! probabilities predicted by a fit that never saw the probe's group (a
//! LoCoMo conversation, a multilingual user, a LongMemEval question): the
//! held-out figures the operating points are chosen on.

use serde::{Deserialize, Serialize};
use serde_json::json;

use super::inject::Judged;
use crate::config::{AcceptorConfig, AcceptorFeatures, AcceptorModel};
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

/// Which of the acceptor's two models judges a probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Route {
    /// `[recall.acceptor]`: a surely English message whose best candidate is English.
    English,
    /// `[recall.acceptor.foreign]`: another language, or a cross-lingual best candidate.
    Foreign,
}

impl Route {
    /// Both routes, in table order.
    pub const ALL: [Route; 2] = [Route::English, Route::Foreign];

    /// The route of a probe, read from its best candidate's features (the
    /// `foreign` and `cross` flags inject routed by); English without one.
    pub fn of(r: &ProbeRecord) -> Route {
        match r.candidates.first() {
            Some(c) if c.features.foreign > 0.0 || c.features.cross > 0.0 => Route::Foreign,
            _ => Route::English,
        }
    }

    /// As in config and tables.
    pub fn name(self) -> &'static str {
        match self {
            Route::English => "english",
            Route::Foreign => "foreign",
        }
    }
}

/// The operating points a run used: each route's `accept_min` and the companion floor.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Operating {
    /// `recall.acceptor.accept_min`.
    pub english: f64,
    /// `recall.acceptor.foreign.accept_min`.
    pub foreign: f64,
    /// `recall.acceptor.companion_min_score`.
    pub companion_min_score: f64,
}

impl Operating {
    /// The operating points of `a`.
    pub fn of(a: &AcceptorConfig) -> Self {
        Self { english: a.accept_min, foreign: a.foreign.accept_min, companion_min_score: a.companion_min_score }
    }

    /// The `accept_min` of `route`.
    pub fn at(&self, route: Route) -> f64 {
        match route {
            Route::English => self.english,
            Route::Foreign => self.foreign,
        }
    }
}

/// What a probe injects when its best candidate is accepted or not: the
/// best one and the others scoring at least `floor`; nothing when not.
pub fn injected(r: &ProbeRecord, accepted: bool, floor: f64) -> Vec<&Judged> {
    if !accepted {
        return Vec::new();
    }
    r.candidates.iter().enumerate().filter(|(j, c)| *j == 0 || c.features.score >= floor).map(|(_, c)| c).collect()
}

/// The risk–coverage row of `records` where `accept(i)` says whether probe
/// `i`'s best candidate is accepted (`threshold` is only the row's label).
pub fn row_with(records: &[ProbeRecord], threshold: f64, floor: f64, accept: &impl Fn(usize) -> bool) -> Row {
    let (mut n, mut hit, mut wrong, mut empty) = (0, 0, 0, 0);
    let (mut un, mut un_inj, mut pn, mut pe, mut po) = (0, 0, 0, 0, 0);
    for (i, r) in records.iter().enumerate() {
        let injected = injected(r, accept(i), floor);
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
        threshold,
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

/// The row at operating point `t`, probe `i`'s acceptance read by `p(i)`
/// (NaN for a probe with no candidate: nothing injected).
pub fn row_at(records: &[ProbeRecord], t: f64, floor: f64, p: &impl Fn(usize) -> f64) -> Row {
    row_with(records, t, floor, &|i| !records[i].candidates.is_empty() && p(i) >= t)
}

/// The table at [`THRESHOLDS`] and at `shipped` (when not among them), by threshold.
pub fn table(records: &[ProbeRecord], shipped: Option<f64>, floor: f64, p: impl Fn(usize) -> f64) -> Vec<Row> {
    let mut ts: Vec<f64> = THRESHOLDS.to_vec();
    if let Some(s) = shipped.filter(|s| !ts.iter().any(|t| (t - s).abs() < 1e-9)) {
        ts.push(s);
    }
    ts.sort_by(f64::total_cmp);
    ts.into_iter().map(|t| row_at(records, t, floor, &p)).collect()
}

/// A probe's acceptance as inject computed it (its best candidate's).
fn as_computed(r: &ProbeRecord) -> f64 {
    r.candidates.first().map_or(f64::NAN, |c| c.acceptance)
}

/// The tables of one run: what inject did (each route at its own
/// `accept_min`) and each route's table with the acceptance as computed.
#[derive(Debug, Clone, Serialize)]
pub struct Tables {
    /// The run's operating points.
    pub operating: Operating,
    /// What inject handed over, every probe at its route's `accept_min`.
    pub as_run: Row,
    /// Per route with probes: (route, probes, rows by threshold).
    pub routes: Vec<(Route, usize, Vec<Row>)>,
}

/// [`Tables`] of `records` run at `op`.
pub fn tables(records: &[ProbeRecord], op: Operating) -> Tables {
    let as_run = row_with(records, f64::NAN, op.companion_min_score, &|i| {
        let r = &records[i];
        !r.candidates.is_empty() && as_computed(r) >= op.at(Route::of(r))
    });
    let routes = Route::ALL
        .iter()
        .filter_map(|&route| {
            let sub: Vec<ProbeRecord> = records.iter().filter(|r| Route::of(r) == route).cloned().collect();
            (!sub.is_empty()).then(|| {
                let rows = table(&sub, Some(op.at(route)), op.companion_min_score, |i| as_computed(&sub[i]));
                (route, sub.len(), rows)
            })
        })
        .collect();
    Tables { operating: op, as_run, routes }
}

fn fmt(x: f64) -> String {
    if x.is_nan() {
        "–".to_string()
    } else {
        format!("{x:.3}")
    }
}

/// Prints `rows` under `title`, marking the `shipped` operating point.
pub fn print(title: &str, rows: &[Row], shipped: Option<f64>) {
    println!("\n{title}");
    println!(
        "{:<12} {:>6} {:>6} {:>6} {:>6}   {:>14}   {:>16} {:>10}",
        "accept_min", "n", "hit", "wrong", "empty", "unanswerable", "premise: evid.", "other"
    );
    for r in rows {
        print_row(r, shipped);
    }
    if shipped.is_some() {
        println!("(* the configured accept_min)");
    }
}

fn print_row(r: &Row, shipped: Option<f64>) {
    let mark = if shipped.is_some_and(|s| (s - r.threshold).abs() < 1e-9) { " *" } else { "" };
    let label = if r.threshold.is_nan() { "as run".to_string() } else { format!("{:.2}{mark}", r.threshold) };
    println!(
        "{:<12} {:>6} {:>6} {:>6} {:>6}   {:>14}   {:>16} {:>10}",
        label,
        r.answerable,
        fmt(r.hit),
        fmt(r.wrong),
        fmt(r.empty),
        format!("{} ({})", fmt(r.unanswerable_injected), r.unanswerable),
        format!("{} ({})", fmt(r.premise_evidence), r.premise),
        fmt(r.premise_other)
    );
}

/// Prints [`Tables`] under `title`.
pub fn print_tables(title: &str, t: &Tables) {
    println!("\n{title}");
    println!(
        "as run (english accept_min {}, foreign {}, companions from score {}):",
        t.operating.english, t.operating.foreign, t.operating.companion_min_score
    );
    print_row(&t.as_run, None);
    for (route, n, rows) in &t.routes {
        print(&format!("{} model ({n} probes), by its accept_min:", route.name()), rows, Some(t.operating.at(*route)));
    }
}

/// The tables as JSON: `{operating, as_run, routes: {english: {probes, rows}, ...}}`.
pub fn json(t: &Tables) -> serde_json::Value {
    let routes: serde_json::Map<String, serde_json::Value> =
        t.routes.iter().map(|(r, n, rows)| (r.name().to_string(), json!({"probes": n, "rows": rows}))).collect();
    json!({"operating": t.operating, "as_run": t.as_run, "routes": routes})
}

/// One table as markdown, marking `shipped`.
pub fn markdown_rows(rows: &[Row], shipped: Option<f64>) -> String {
    let mut s = String::from("| accept_min | n | hit | wrong | empty | unanswerable: injected (n) | premise: evidence (n) | premise: other |\n|---|---|---|---|---|---|---|---|\n");
    for r in rows {
        let mark = if shipped.is_some_and(|x| (x - r.threshold).abs() < 1e-9) { " (shipped)" } else { "" };
        let label = if r.threshold.is_nan() { "as run".to_string() } else { format!("{:.2}{mark}", r.threshold) };
        s.push_str(&format!(
            "| {label} | {} | {} | {} | {} | {} ({}) | {} ({}) | {} |\n",
            r.answerable,
            fmt(r.hit),
            fmt(r.wrong),
            fmt(r.empty),
            fmt(r.unanswerable_injected),
            r.unanswerable,
            fmt(r.premise_evidence),
            r.premise,
            fmt(r.premise_other)
        ));
    }
    s
}

/// [`Tables`] as markdown (for `--report`); a line saying so when the
/// acceptor was off (no tables).
pub fn markdown(t: Option<&Tables>) -> String {
    let Some(t) = t else {
        return "The acceptor is off: inject cuts at `recall.min_score`.\n".to_string();
    };
    let mut s = format!(
        "As run (english accept_min {}, foreign {}, companions from score {}):\n\n{}",
        t.operating.english,
        t.operating.foreign,
        t.operating.companion_min_score,
        markdown_rows(&[t.as_run], None)
    );
    for (route, n, rows) in &t.routes {
        s.push_str(&format!("\n{} model ({n} probes):\n\n{}", route.name(), markdown_rows(rows, Some(t.operating.at(*route)))));
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

/// The features a fit weighs (the others get 0): for the best candidate,
/// `rank` and `gap` are always 0, `own` repeats `score` on a fresh turn,
/// `score` itself is 0.7 × `keyword` + 0.3 × `vector` (or `cross_lingual`,
/// the larger) so weighing it too only makes the fit ill-conditioned, and
/// `cross`, `foreign` and their products are all but constant within a route.
pub const FITTED: [&str; 8] = [
    "keyword",
    "vector",
    "cross_lingual",
    "margin",
    "coverage",
    "names_missing",
    "type_missing",
    "window_coverage",
];

fn fitted_values(f: &AcceptorFeatures) -> Vec<f64> {
    let v = f.values();
    FITTED.iter().map(|n| v[AcceptorFeatures::NAMES.iter().position(|x| x == n).expect("a feature name")]).collect()
}

/// The label a fit learns for a probe: a gold session among what goes in
/// when its best candidate is accepted (never for an unanswerable question).
pub fn label(r: &ProbeRecord, floor: f64) -> bool {
    r.kind != ProbeKind::Unanswerable && injected(r, true, floor).iter().any(|c| c.gold)
}

/// Fits one model on the best candidates of `records` (probes without a
/// candidate are left out), every probe weighing the same: a source counts
/// by its questions (weighing sources the same let the 59 English probes of
/// the multilingual set pull as hard as LoCoMo's 1,896, and the held-out
/// LoCoMo hit fell from 0.69 to 0.52 at the same wrong rate). Returns
/// (weights, intercept).
///
/// A feature that is not 0 for at least [`MIN_SUPPORT`] of the probes is
/// left out of the fit (weight 0): one probe would set its weight alone
/// (the foreign route's `type_missing`, set on 1 probe of 213, got +9.8
/// from it and would have accepted every foreign message it fires on).
pub fn fit(records: &[&ProbeRecord], floor: f64) -> (AcceptorFeatures, f64) {
    let full: Vec<(Vec<f64>, bool)> = records
        .iter()
        .filter_map(|r| r.candidates.first().map(|c| (fitted_values(&c.features), label(r, floor))))
        .collect();
    let used: Vec<usize> = (0..FITTED.len())
        .filter(|&j| full.iter().filter(|(x, _)| x[j] != 0.0).count() >= MIN_SUPPORT)
        .collect();
    let rows: Vec<(Vec<f64>, bool)> = full
        .iter()
        .map(|(x, y)| (used.iter().map(|&j| x[j]).collect(), *y))
        .collect();
    let (w, b) = super::logistic::fit_logistic(&rows);
    let mut v = [0.0; AcceptorFeatures::NAMES.len()];
    for (&j, x) in used.iter().zip(w) {
        v[AcceptorFeatures::NAMES
            .iter()
            .position(|y| *y == FITTED[j])
            .expect("a feature name")] = x;
    }
    (AcceptorFeatures::from_values(v), b)
}

/// The fewest probes a feature must be non-zero on to be fitted ([`fit`]);
/// set a priori (a weight from fewer than ten examples is one example's
/// accident), not tuned.
pub const MIN_SUPPORT: usize = 10;

/// The acceptance of a best candidate with `f` under (`weights`, `intercept`).
pub fn predict(weights: &AcceptorFeatures, intercept: f64, f: &AcceptorFeatures) -> f64 {
    let m = AcceptorModel { accept_min: 0.0, intercept, weights: *weights };
    crate::recall::evidence::acceptance(&m, f)
}

/// Held-out acceptances: each probe scored by a fit on the other groups
/// (leave one group out) of its own route. Indexed like `records` (NaN for
/// a probe without candidates).
pub fn cross_validate(records: &[ProbeRecord], floor: f64) -> Vec<f64> {
    fn key(r: &ProbeRecord) -> (&str, &str) {
        (r.source.as_str(), r.group.as_str())
    }
    let mut out = vec![f64::NAN; records.len()];
    for route in Route::ALL {
        let mut groups: Vec<(&str, &str)> =
            records.iter().filter(|r| Route::of(r) == route).map(|r| (r.source.as_str(), r.group.as_str())).collect();
        groups.sort();
        groups.dedup();
        for g in groups {
            let train: Vec<&ProbeRecord> = records.iter().filter(|r| Route::of(r) == route && key(r) != g).collect();
            if train.is_empty() {
                continue;
            }
            let (w, b) = fit(&train, floor);
            for (i, r) in records.iter().enumerate() {
                if Route::of(r) == route && key(r) == g {
                    if let Some(c) = r.candidates.first() {
                        out[i] = predict(&w, b, &c.features);
                    }
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

/// The operating points `mem` runs at (`None` when its acceptor is off).
pub fn operating(mem: &crate::Memory) -> Option<Operating> {
    let recall = &mem.runtime().tunables().recall;
    recall.acceptor.enabled.then(|| Operating::of(&recall.acceptor))
}

/// What every eval does with its probe records: writes them to
/// `inject_records` when given, prints the risk–coverage tables under
/// `title` with the run's operating points marked, and returns them
/// (`None` when the acceptor is off).
///
/// # Errors
/// I/O errors writing the records.
pub fn report(
    operating: Option<Operating>,
    records: &[ProbeRecord],
    inject_records: Option<&std::path::Path>,
    title: &str,
) -> Result<Option<Tables>> {
    if let Some(path) = inject_records {
        write(path, records)?;
        eprintln!("wrote {} probe records to {}", records.len(), path.display());
    }
    let Some(op) = operating else {
        println!("\n{title}\n(the acceptor is off: inject cuts at recall.min_score)");
        return Ok(None);
    };
    let t = tables(records, op);
    print_tables(title, &t);
    Ok(Some(t))
}

/// `strata eval calibrate --inject FILES`: per route ([`Route`]), the
/// table as run, the fused score alone as the acceptance, and the held-out
/// table ([`cross_validate`]) of each source and of all; the operating
/// point [`choose`] picks on the held-out table of all sources; the model
/// fitted on all of the route's probes, as the TOML of `[recall.acceptor]`.
///
/// # Errors
/// [`Error::InvalidInput`] when the files hold no candidate; read errors.
pub fn calibrate(config: &crate::config::Config, paths: &[std::path::PathBuf], max_wrong: f64, max_unanswerable: f64) -> Result<()> {
    let records = read(paths)?;
    if records.iter().all(|r| r.candidates.is_empty()) {
        return Err(Error::InvalidInput("the --inject files hold no judged candidate (was recall.acceptor.enabled on?)".into()));
    }
    let a = &config.recall.acceptor;
    let op = Operating::of(a);
    let floor = op.companion_min_score;
    let held = cross_validate(&records, floor);
    let mut toml = format!("[recall.acceptor]\nenabled = true\ncompanion_min_score = {floor}\n");
    let mut foreign_toml = String::from("[recall.acceptor.foreign]\n");
    for route in Route::ALL {
        let idx: Vec<usize> = (0..records.len()).filter(|i| Route::of(&records[*i]) == route).collect();
        let shipped = op.at(route);
        let out = if route == Route::English { &mut toml } else { &mut foreign_toml };
        if idx.is_empty() {
            let m = a.model(route == Route::Foreign);
            out.push_str(&format!("# no {} probe: left as configured\naccept_min = {}\nintercept = {}\n", route.name(), m.accept_min, m.intercept));
            out.push_str(&weights_toml(&m.weights));
            continue;
        }
        let sub: Vec<ProbeRecord> = idx.iter().map(|i| records[*i].clone()).collect();
        let name = route.name();
        let mut sources: Vec<&str> = sub.iter().map(|r| r.source.as_str()).collect();
        sources.sort();
        sources.dedup();
        for src in &sources {
            let part: Vec<usize> = (0..sub.len()).filter(|i| sub[*i].source == *src).collect();
            let rs: Vec<ProbeRecord> = part.iter().map(|i| sub[*i].clone()).collect();
            let groups: std::collections::BTreeSet<&str> = rs.iter().map(|r| r.group.as_str()).collect();
            print(&format!("{name} model, {src}: as run ({} probes, groups {groups:?})", rs.len()), &table(&rs, Some(shipped), floor, |i| as_computed(&rs[i])), Some(shipped));
            print(&format!("{name} model, {src}: the fused score alone as the acceptance"), &table(&rs, None, floor, |i| rs[i].candidates.first().map_or(f64::NAN, |c| c.features.score)), None);
            print(&format!("{name} model, {src}: held out (each group scored by a fit on the others)"), &table(&rs, None, floor, |i| held[idx[part[i]]]), None);
        }
        let all = table(&sub, None, floor, |i| held[idx[i]]);
        print(&format!("{name} model, all sources: held out"), &all, None);
        let (w, b) = fit(&sub.iter().collect::<Vec<_>>(), floor);
        println!("\n# {name}: {} probes, each weighing the same", sub.len());
        let chosen = match choose(&all, max_wrong, max_unanswerable) {
            Some(t) => {
                println!("# {name} operating point: the held-out hit is highest at wrong <= {max_wrong} and unanswerable <= {max_unanswerable}");
                t
            }
            None => match choose(&all, max_wrong, 1.0) {
                Some(t) => {
                    println!("# {name}: no operating point keeps unanswerable <= {max_unanswerable}: the highest held-out hit at wrong <= {max_wrong} alone");
                    t
                }
                None => {
                    println!("# {name}: no operating point keeps wrong <= {max_wrong}: accept_min left at {shipped}");
                    shipped
                }
            },
        };
        out.push_str(&format!("accept_min = {chosen:.2}\nintercept = {b:.4}\n"));
        out.push_str(&weights_toml(&w));
    }
    println!("\n{toml}\n{foreign_toml}");
    Ok(())
}

fn weights_toml(w: &AcceptorFeatures) -> String {
    let weights: Vec<String> = AcceptorFeatures::NAMES.iter().zip(w.values()).map(|(n, v)| format!("{n} = {v:.4}")).collect();
    format!("weights = {{ {} }}\n", weights.join(", "))
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
    fn a_row_decides_on_the_best_candidate_and_lets_companions_in_by_score() {
        let records = vec![
            // accepted; its companion scores 0.6: both go in
            rec("a", ProbeKind::Answerable, vec![judged(true, 0.9, 0.9), judged(false, 0.6, 0.6)]),
            // accepted best is wrong, the gold second scores 0.4: in above a 0.3 floor only
            rec("a", ProbeKind::Answerable, vec![judged(false, 0.7, 0.7), judged(true, 0.4, 0.4)]),
            rec("b", ProbeKind::Answerable, vec![judged(false, 0.2, 0.2)]),
            rec("b", ProbeKind::Unanswerable, vec![judged(false, 0.55, 0.55)]),
            // a premise question whose evidence ranks second, at 0.3
            rec("b", ProbeKind::Premise, vec![judged(false, 0.8, 0.8), judged(true, 0.3, 0.3)]),
            rec("b", ProbeKind::Answerable, vec![]),
        ];
        let p = |i: usize| records[i].candidates.first().map_or(f64::NAN, |c| c.acceptance);
        let r = row_at(&records, 0.5, 0.5, &p);
        assert_eq!(r.answerable, 4);
        assert_eq!((r.hit, r.wrong, r.empty), (0.25, 0.25, 0.5));
        assert_eq!((r.unanswerable, r.unanswerable_injected), (1, 1.0));
        assert_eq!((r.premise, r.premise_evidence, r.premise_other), (1, 0.0, 1.0));
        let r = row_at(&records, 0.5, 0.3, &p);
        assert_eq!((r.hit, r.wrong), (0.5, 0.0), "the second question's gold goes in beside the wrong best one");
        assert_eq!((r.premise_evidence, r.premise_other), (1.0, 0.0));
        let r = row_at(&records, 0.1, 0.3, &p);
        assert_eq!((r.hit, r.wrong, r.empty), (0.5, 0.25, 0.25), "the third question's wrong best one goes in");
        let rows = table(&records, Some(0.55), 0.3, p);
        assert!(rows.iter().any(|r| (r.threshold - 0.55).abs() < 1e-9) && rows.len() == THRESHOLDS.len() + 1);
        // from 0.3 up nothing is wrong, and 0.3 to 0.7 hit as often: the stricter wins the tie
        assert_eq!(choose(&rows, 0.0, 1.0), Some(0.7));
        // with a wrong answer allowed, 0.1 and 0.2 hit no more
        assert_eq!(choose(&rows, 0.25, 1.0), Some(0.7));
        assert_eq!(choose(&rows, 0.0, 0.0).map(|t| t > 0.55), Some(true));
        assert_eq!(choose(&rows, 0.0, 0.0), Some(0.7), "nothing injected for the unanswerable question above 0.55");
    }

    #[test]
    fn tables_split_the_routes_and_run_each_at_its_own_operating_point() {
        let mut foreign = rec("f", ProbeKind::Answerable, vec![judged(true, 0.6, 0.6)]);
        foreign.candidates[0].features.foreign = 1.0;
        let mut cross = rec("f", ProbeKind::Unanswerable, vec![judged(false, 0.6, 0.6)]);
        cross.candidates[0].features.cross = 1.0;
        let english = rec("e", ProbeKind::Answerable, vec![judged(true, 0.6, 0.6)]);
        assert_eq!((Route::of(&foreign), Route::of(&cross), Route::of(&english)), (Route::Foreign, Route::Foreign, Route::English));
        let records = vec![foreign, cross, english];
        let t = tables(&records, Operating { english: 0.5, foreign: 0.7, companion_min_score: 0.3 });
        // the foreign probes stay out at 0.7, the English one goes in at 0.5
        assert_eq!((t.as_run.hit, t.as_run.empty, t.as_run.unanswerable_injected), (0.5, 0.5, 0.0));
        assert_eq!(t.routes.iter().map(|(r, n, _)| (*r, *n)).collect::<Vec<_>>(), vec![(Route::English, 1), (Route::Foreign, 2)]);
        let v = json(&t);
        assert_eq!(v["routes"]["foreign"]["probes"], 2);
        assert!(markdown(Some(&t)).contains("foreign model (2 probes)"));
        assert!(markdown(None).contains("acceptor is off"));
    }

    #[test]
    fn the_cross_validated_fit_separates_a_separable_set_it_never_saw() {
        // answerable probes have a high score and coverage, unanswerable ones low, in every group
        let mut records = Vec::new();
        for g in ["a", "b", "c", "d"] {
            for i in 0..30 {
                let x = (i as f64) / 30.0;
                records.push(rec(g, ProbeKind::Answerable, vec![judged(true, 0.0, 0.6 + 0.4 * x), judged(false, 0.0, 0.1)]));
                records.push(rec(g, ProbeKind::Unanswerable, vec![judged(false, 0.0, 0.5 * x)]));
            }
        }
        let held = cross_validate(&records, 0.3);
        for (r, p) in records.iter().zip(&held) {
            assert_eq!(r.kind == ProbeKind::Answerable, *p >= 0.5, "{r:?} {p}");
        }
        let (w, _) = fit(&records.iter().collect::<Vec<_>>(), 0.3);
        assert!(w.coverage > 0.0);
        assert_eq!((w.score, w.rank, w.own, w.foreign), (0.0, 0.0, 0.0, 0.0), "only the FITTED features get a weight");
    }

    #[test]
    fn a_feature_seen_on_fewer_than_ten_probes_gets_no_weight() {
        // type_missing fires on the 9 right answers only: it would separate them alone
        let mut records = Vec::new();
        for i in 0..60 {
            let x = (i % 10) as f64 / 10.0;
            let mut c = judged(i % 2 == 0, 0.0, x);
            if i < 18 && i % 2 == 0 {
                c.features.type_missing = 1.0;
            }
            records.push(rec("a", ProbeKind::Answerable, vec![c]));
        }
        let (w, _) = fit(&records.iter().collect::<Vec<_>>(), 0.3);
        assert_eq!(w.type_missing, 0.0, "set on 9 probes: left out");
        for r in records.iter_mut().skip(18).step_by(2).take(1) {
            r.candidates[0].features.type_missing = 1.0;
        }
        let (w, _) = fit(&records.iter().collect::<Vec<_>>(), 0.3);
        assert!(w.type_missing > 0.0, "on 10 probes it is fitted: {w:?}");
    }
}
