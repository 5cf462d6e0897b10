//! `strata eval graph`: replays LoCoMo conversations through promotion and
//! the semantic tier (offline or the configured LLM), then scores the graph
//! of each conversation's scope against gold labels written by hand
//! (`src/eval/graph_gold/*.json`, one file per conversation; the guidelines
//! are in `docs/evaluation.md`, "Graph evaluation").
//!
//! Matching (documented constants, no learning):
//! - an entity matches a gold entity when the identity key of its name or of
//!   one of its aliases equals that of the gold name or one of its aliases;
//! - entities of a value type ([`VALUE_TYPES`]: roles, activities, topics)
//!   stand for the gold file's literal objects and are left out of entity
//!   precision and recall;
//! - junk: a predicted entity that matches no gold entity and shares no
//!   word with any gold name or alias (a partial such as "Jon" for "Jon
//!   Smith" is a miss, not junk);
//! - a relation matches a gold relation when both ends match (a literal gold
//!   object: equal identity keys, or one containing the other as words) and
//!   the predicates are equal after [`canonical_predicate`] (its synonym
//!   table, inverses such as `child_of` read as `parent_of` reversed, and
//!   symmetric predicates in either direction).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use clap::Args;
use serde::{Deserialize, Serialize};

use crate::config::Config;
use crate::error::{Error, Result};
/// The key names are compared by: [`crate::graph::identity_key`] without a
/// leading "the " or a trailing possessive ("The Fireworks" = "Fireworks",
/// "McGee's" = "McGee").
fn identity_key(name: &str) -> String {
    let k = crate::graph::identity_key(name).replace('’', "'");
    let k = k.strip_prefix("the ").unwrap_or(&k);
    k.strip_suffix("'s").unwrap_or(k).to_string()
}
use crate::memory::{Components, Memory};
use crate::model::Scope;

use super::locomo::load_locomo;

/// Entity types that stand for values (the gold file's literal objects), not named things.
pub const VALUE_TYPES: &[&str] = &["role", "activity", "topic", "value"];

/// Arguments of `strata eval graph`.
#[derive(Debug, Clone, Args)]
pub struct GraphArgs {
    /// Path to a LoCoMo JSON file (e.g. ../shared/data/locomo/locomo-dev.json).
    #[arg(long, required_unless_present_any = ["multilingual", "longmemeval"])]
    pub data: Option<PathBuf>,
    /// Path to a LongMemEval file, best the oracle one
    /// (`../shared/data/longmemeval/longmemeval_oracle-dev.json`: each
    /// question's evidence sessions alone): each question with gold labels
    /// (`graph_gold/longmemeval/<question_id>.json`) has its haystack
    /// replayed as one unnamed user's sessions with an assistant, in a scope
    /// whose user id is the question id.
    #[arg(long)]
    pub longmemeval: Option<PathBuf>,
    /// Path to a multilingual dev set (`tests/fixtures/multilingual/dev.json`):
    /// its users with gold labels are replayed as unnamed users talking to an
    /// assistant, each in their own scope.
    #[arg(long)]
    pub multilingual: Option<PathBuf>,
    /// Gold label files, or folders of them (`src/eval/graph_gold`); each
    /// names its conversation. Comma-separated.
    #[arg(long, value_delimiter = ',', required = true)]
    pub gold: Vec<PathBuf>,
    /// Comma-separated sample ids or multilingual users to run (default:
    /// every conversation and user with gold labels).
    #[arg(long, value_delimiter = ',')]
    pub conversations: Vec<String>,
    /// Write the scores and every matched, missed and junk item as JSON to this file.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Instead of replaying: fit the entity typer ([`crate::graph::typer`])
    /// on the gold entities of [`TYPER_FIT`] with the configured embedder,
    /// print its accuracy by penalty (leave one conversation out) and on the
    /// other gold conversations, and write its weights to this file
    /// (`src/graph/entity_types.json` ships them).
    #[arg(long)]
    pub fit_types: Option<PathBuf>,
}

/// One conversation's hand-written labels.
#[derive(Debug, Clone, Deserialize)]
pub struct Gold {
    /// LoCoMo sample id.
    pub conversation: String,
    /// Named entities.
    pub entities: Vec<GoldEntity>,
    /// Facts among them.
    pub relations: Vec<GoldRelation>,
}

/// A labelled entity.
#[derive(Debug, Clone, Deserialize)]
pub struct GoldEntity {
    /// Fullest name.
    pub name: String,
    /// person, pet, organization, place, project, product, event or work.
    #[serde(rename = "type")]
    pub kind: String,
    /// Other forms the conversation uses.
    #[serde(default)]
    pub aliases: Vec<String>,
    /// The turn that names it (a LoCoMo dia_id, `session id:turn number`
    /// for a multilingual user).
    #[serde(default)]
    pub evidence: Option<String>,
}

/// A labelled relation.
#[derive(Debug, Clone, Deserialize)]
pub struct GoldRelation {
    /// A gold entity's name or alias.
    pub subject: String,
    /// snake_case predicate.
    pub predicate: String,
    /// A gold entity's name or alias, or a value when `literal`.
    pub object: String,
    /// The object is a value (a role, an activity), not an entity.
    #[serde(default)]
    pub literal: bool,
}

/// What the extractor produced for one scope, as names.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Predicted {
    /// (name, aliases, type) of live entities.
    pub entities: Vec<(String, Vec<String>, String)>,
    /// (subject name, predicate, object name), distinct.
    pub relations: Vec<(String, String, String)>,
}

/// Scores of one conversation (or their sums).
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct GraphScores {
    /// Predicted named entities (value types left out).
    pub predicted_entities: usize,
    /// Of which matching a gold entity.
    pub matched_entities: usize,
    /// Gold entities.
    pub gold_entities: usize,
    /// Gold entities found.
    pub found_entities: usize,
    /// Found gold entities whose predicted type equals the gold type (after [`canonical_type`]).
    pub typed_correctly: usize,
    /// Predicted entities that are junk (see the module docs).
    pub junk: usize,
    /// Predicted relations (every predicate, `mentioned_with` included).
    pub predicted_relations: usize,
    /// Predicted relations other than `mentioned_with`/`mentions`.
    pub predicted_typed_relations: usize,
    /// Predicted relations matching a gold relation.
    pub matched_relations: usize,
    /// Gold relations.
    pub gold_relations: usize,
    /// Gold relations found.
    pub found_relations: usize,
    /// Predicted entities that matched nothing (names), for reading.
    pub unmatched: Vec<String>,
    /// Gold entities not found (names).
    pub missed: Vec<String>,
    /// Typed relations predicted that match no gold relation (`[subject,
    /// predicate, object]`), for reading.
    pub wrong_relations: Vec<[String; 3]>,
    /// Relation counts per predicate ([`canonical_predicate`]; co-occurrence
    /// edges included, under their own names).
    pub by_predicate: BTreeMap<String, PredicateScores>,
}

/// Relation counts of one predicate: precision = matched / predicted, recall
/// = found / gold.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct PredicateScores {
    /// Predicted relations with this predicate.
    pub predicted: usize,
    /// Of which matching a gold relation.
    pub matched: usize,
    /// Gold relations with this predicate.
    pub gold: usize,
    /// Of which found.
    pub found: usize,
}

/// The harmonic mean of precision and recall (0 when both are 0).
fn f1(p: f64, r: f64) -> f64 {
    if p + r == 0.0 {
        0.0
    } else {
        2.0 * p * r / (p + r)
    }
}

fn ratio(a: usize, b: usize) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

impl GraphScores {
    /// Entity precision.
    pub fn entity_precision(&self) -> f64 {
        ratio(self.matched_entities, self.predicted_entities)
    }
    /// Entity recall.
    pub fn entity_recall(&self) -> f64 {
        ratio(self.found_entities, self.gold_entities)
    }
    /// Entity F1.
    pub fn entity_f1(&self) -> f64 {
        f1(self.entity_precision(), self.entity_recall())
    }
    /// Share of found entities with the right type.
    pub fn typed_accuracy(&self) -> f64 {
        ratio(self.typed_correctly, self.found_entities)
    }
    /// Share of predicted entities that are junk.
    pub fn junk_rate(&self) -> f64 {
        ratio(self.junk, self.predicted_entities)
    }
    /// Relation precision over every predicted relation.
    pub fn relation_precision(&self) -> f64 {
        ratio(self.matched_relations, self.predicted_relations)
    }
    /// Relation precision over typed relations (co-occurrence edges left out).
    pub fn typed_relation_precision(&self) -> f64 {
        ratio(self.matched_relations, self.predicted_typed_relations)
    }
    /// Relation recall.
    pub fn relation_recall(&self) -> f64 {
        ratio(self.found_relations, self.gold_relations)
    }
    /// Relation F1 (typed precision).
    pub fn relation_f1(&self) -> f64 {
        f1(self.typed_relation_precision(), self.relation_recall())
    }
    /// The ratios as JSON (entity P/R/F1, typed accuracy, junk rate, relation P, typed P, R, F1).
    pub fn summary(&self) -> serde_json::Value {
        serde_json::json!({
            "entity_precision": self.entity_precision(), "entity_recall": self.entity_recall(), "entity_f1": self.entity_f1(),
            "typed_accuracy": self.typed_accuracy(), "junk_rate": self.junk_rate(),
            "relation_precision": self.relation_precision(), "typed_relation_precision": self.typed_relation_precision(),
            "relation_recall": self.relation_recall(), "relation_f1": self.relation_f1(),
        })
    }
    /// Adds another conversation's counts.
    pub fn add(&mut self, o: &GraphScores) {
        self.predicted_entities += o.predicted_entities;
        self.matched_entities += o.matched_entities;
        self.gold_entities += o.gold_entities;
        self.found_entities += o.found_entities;
        self.typed_correctly += o.typed_correctly;
        self.junk += o.junk;
        self.predicted_relations += o.predicted_relations;
        self.predicted_typed_relations += o.predicted_typed_relations;
        self.matched_relations += o.matched_relations;
        self.gold_relations += o.gold_relations;
        self.found_relations += o.found_relations;
        for (p, c) in &o.by_predicate {
            let t = self.by_predicate.entry(p.clone()).or_default();
            t.predicted += c.predicted;
            t.matched += c.matched;
            t.gold += c.gold;
            t.found += c.found;
        }
    }
}

/// The type a predicted or gold type name counts as.
pub fn canonical_type(t: &str) -> &str {
    match t {
        "animal" | "pet" | "dog" | "cat" => "pet",
        "org" | "organisation" | "organization" | "company" | "school" | "team" | "band" => "organization",
        "location" | "city" | "country" | "place" | "venue" => "place",
        "book" | "film" | "movie" | "song" | "album" | "game" | "work" => "work",
        "person" | "people" => "person",
        other => other,
    }
}

/// A predicate's canonical form and whether the ends are swapped to reach
/// it (`child_of(a, b)` is `parent_of(b, a)`). The synonym table.
pub fn canonical_predicate(p: &str) -> (&str, bool) {
    match p {
        "lives_in" | "lived_in" | "living_in" | "resident_of" | "based_in" => ("lives_in", false),
        "moved_to" | "relocated_to" | "moving_to" => ("moved_to", false),
        "from" | "born_in" | "grew_up_in" | "comes_from" | "moved_from" => ("from", false),
        "works_at" | "worked_at" | "works_for" | "worked_for" | "employed_by" | "job_at" => ("works_at", false),
        "works_as" | "worked_as" | "occupation" | "profession" | "job_title" => ("works_as", false),
        "studies_at" | "studied_at" | "student_at" | "graduated_from" => ("studies_at", false),
        "member_of" | "joined" => ("member_of", false),
        "sibling_of" | "sister_of" | "brother_of" | "has_sibling" => ("sibling_of", false),
        "parent_of" | "mother_of" | "father_of" => ("parent_of", false),
        "child_of" | "son_of" | "daughter_of" => ("parent_of", true),
        "partner_of" | "married_to" | "spouse_of" | "wife_of" | "husband_of" | "girlfriend_of"
        | "boyfriend_of" | "fiance_of" | "dating" => ("partner_of", false),
        "friend_of" | "best_friend_of" | "friends_with" => ("friend_of", false),
        "colleague_of" | "coworker_of" | "works_with" | "manager_of" => ("colleague_of", false),
        "owns_pet" | "has_pet" | "adopted" => ("owns_pet", false),
        "pet_of" => ("owns_pet", true),
        "visited" | "traveled_to" | "travelled_to" | "went_to" | "trip_to" => ("visited", false),
        "likes" | "loves" | "enjoys" | "fan_of" | "interested_in" | "favorite" => ("likes", false),
        "plays" | "played" => ("plays", false),
        "created" | "wrote" | "painted" | "made" | "composed" | "authored" => ("created", false),
        "attended" | "participated_in" | "went_to_event" => ("attended", false),
        other => (other, false),
    }
}

/// Predicates that hold both ways.
const SYMMETRIC: &[&str] = &["sibling_of", "partner_of", "friend_of", "colleague_of", "mentioned_with"];
/// Co-occurrence edges: no fact, left out of typed relation precision.
const COOCCURRENCE: &[&str] = &crate::model::graph::CO_OCCURRENCE_PREDICATES;

fn words(s: &str) -> BTreeSet<String> {
    identity_key(s)
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_string)
        .collect()
}

/// Scores `pred` against `gold`.
pub fn score(gold: &Gold, pred: &Predicted) -> GraphScores {
    // gold entity index by every key
    let mut key_to_gold: HashMap<String, usize> = HashMap::new();
    let mut gold_words: BTreeSet<String> = BTreeSet::new();
    for (i, g) in gold.entities.iter().enumerate() {
        for n in std::iter::once(&g.name).chain(&g.aliases) {
            key_to_gold.entry(identity_key(n)).or_insert(i);
            gold_words.extend(words(n));
        }
    }
    let mut s = GraphScores { gold_entities: gold.entities.len(), gold_relations: gold.relations.len(), ..Default::default() };
    // predicted name key → gold index
    let mut pred_to_gold: HashMap<String, usize> = HashMap::new();
    let mut found: BTreeMap<usize, String> = BTreeMap::new();
    for (name, aliases, kind) in &pred.entities {
        if VALUE_TYPES.contains(&kind.as_str()) {
            continue;
        }
        s.predicted_entities += 1;
        let hit = std::iter::once(name).chain(aliases).find_map(|n| key_to_gold.get(&identity_key(n)).copied());
        match hit {
            Some(g) => {
                s.matched_entities += 1;
                for n in std::iter::once(name).chain(aliases) {
                    pred_to_gold.insert(identity_key(n), g);
                }
                found.entry(g).or_insert_with(|| kind.clone());
            }
            None => {
                if words(name).is_disjoint(&gold_words) {
                    s.junk += 1;
                }
                s.unmatched.push(name.clone());
            }
        }
    }
    s.found_entities = found.len();
    s.typed_correctly = found
        .iter()
        .filter(|(g, kind)| canonical_type(kind) == canonical_type(&gold.entities[**g].kind))
        .count();
    s.missed = gold
        .entities
        .iter()
        .enumerate()
        .filter(|(i, _)| !found.contains_key(i))
        .map(|(_, g)| g.name.clone())
        .collect();
    // relations
    let gold_end = |n: &str| key_to_gold.get(&identity_key(n)).copied();
    let literal_match = |gold_obj: &str, pred_obj: &str| {
        let (a, b) = (identity_key(gold_obj), identity_key(pred_obj));
        if a == b {
            return true;
        }
        let (wa, wb) = (words(gold_obj), words(pred_obj));
        !wa.is_empty() && !wb.is_empty() && (wa.is_subset(&wb) || wb.is_subset(&wa))
    };
    let mut found_rel: BTreeSet<usize> = BTreeSet::new();
    for (ps, pp, po) in &pred.relations {
        s.predicted_relations += 1;
        if !COOCCURRENCE.contains(&pp.as_str()) {
            s.predicted_typed_relations += 1;
        }
        let (pc, pswap) = canonical_predicate(pp);
        let (ps, po) = if pswap { (po, ps) } else { (ps, po) };
        s.by_predicate.entry(pc.to_string()).or_default().predicted += 1;
        let mut matched = false;
        for (i, g) in gold.relations.iter().enumerate() {
            let (gc, gswap) = canonical_predicate(&g.predicate);
            if gc != pc {
                continue;
            }
            let (gs, go) = if gswap { (&g.object, &g.subject) } else { (&g.subject, &g.object) };
            let end_ok = |gold_name: &str, literal: bool, pred_name: &str| {
                if literal {
                    literal_match(gold_name, pred_name)
                } else {
                    match (gold_end(gold_name), pred_to_gold.get(&identity_key(pred_name))) {
                        (Some(a), Some(b)) => a == *b,
                        _ => false,
                    }
                }
            };
            // a swapped gold relation has its literal end as the subject
            let (gs_lit, go_lit) = if gswap { (g.literal, false) } else { (false, g.literal) };
            let forward = end_ok(gs, gs_lit, ps) && end_ok(go, go_lit, po);
            let backward = SYMMETRIC.contains(&gc) && end_ok(gs, gs_lit, po) && end_ok(go, go_lit, ps);
            if forward || backward {
                matched = true;
                found_rel.insert(i);
            }
        }
        if matched {
            s.matched_relations += 1;
            s.by_predicate.entry(pc.to_string()).or_default().matched += 1;
        } else if !COOCCURRENCE.contains(&pp.as_str()) {
            s.wrong_relations.push([ps.clone(), pp.clone(), po.clone()]);
        }
    }
    s.found_relations = found_rel.len();
    for (i, g) in gold.relations.iter().enumerate() {
        let e = s.by_predicate.entry(canonical_predicate(&g.predicate).0.to_string()).or_default();
        e.gold += 1;
        if found_rel.contains(&i) {
            e.found += 1;
        }
    }
    s
}

/// Reads gold files from files or folders (`*.json`, subfolders included),
/// keyed by conversation (a LoCoMo sample id or a multilingual user).
///
/// # Errors
/// [`Error::Data`] for an unreadable or malformed file, or two files of one conversation.
pub fn load_gold(paths: &[PathBuf]) -> Result<BTreeMap<String, Gold>> {
    let mut files = Vec::new();
    let mut todo: Vec<PathBuf> = paths.iter().rev().cloned().collect();
    while let Some(p) = todo.pop() {
        if p.is_dir() {
            // files of a folder, then its subfolders (`graph_gold/multilingual`), sorted
            let mut in_dir: Vec<PathBuf> = std::fs::read_dir(&p)?.filter_map(|e| e.ok().map(|e| e.path())).collect();
            in_dir.sort();
            files.extend(in_dir.iter().filter(|f| f.is_file() && f.extension().is_some_and(|x| x == "json")).cloned());
            todo.extend(in_dir.into_iter().filter(|f| f.is_dir()).rev());
        } else {
            files.push(p);
        }
    }
    let mut out = BTreeMap::new();
    for f in files {
        let g = read_gold(&f)?;
        if out.insert(g.conversation.clone(), g).is_some() {
            return Err(Error::Data(format!("{}: a second gold file for its conversation", f.display())));
        }
    }
    if out.is_empty() {
        return Err(Error::Data("no gold file found (give files or folders of *.json with --gold)".into()));
    }
    Ok(out)
}

fn read_gold(f: &Path) -> Result<Gold> {
    let text = std::fs::read_to_string(f).map_err(|e| Error::Data(format!("{}: {e}", f.display())))?;
    let g: Gold = serde_json::from_str(&text).map_err(|e| Error::Data(format!("{}: {e}", f.display())))?;
    let keys: BTreeSet<String> = g
        .entities
        .iter()
        .flat_map(|e| std::iter::once(&e.name).chain(&e.aliases))
        .map(|n| identity_key(n))
        .collect();
    for r in &g.relations {
        for (end, literal) in [(&r.subject, false), (&r.object, r.literal)] {
            if !literal && !keys.contains(&identity_key(end)) {
                return Err(Error::Data(format!(
                    "{}: relation {} {} {}: {end:?} is no labelled entity (mark a value with \"literal\": true)",
                    f.display(),
                    r.subject,
                    r.predicate,
                    r.object
                )));
            }
        }
    }
    Ok(g)
}

/// The live graph of `scope` as names: merged-away entities folded into
/// their survivors, every relation (invalidated ones too: they were true once).
///
/// # Errors
/// Graph store errors.
pub async fn predicted(mem: &Memory, scope: &Scope) -> Result<Predicted> {
    let g = &mem.runtime().graph;
    let live = g.entities_of_type(scope, None, usize::MAX / 2).await?;
    let dump = g.export_graph(scope).await?;
    let merged: HashMap<&str, &str> = dump
        .entities
        .iter()
        .filter_map(|e| e.merged_into.as_deref().map(|m| (e.id.as_str(), m)))
        .collect();
    let names: HashMap<&str, &str> = live.iter().map(|e| (e.id.as_str(), e.name.as_str())).collect();
    let resolve = |id: &str| -> Option<String> {
        let mut id = id;
        for _ in 0..16 {
            if let Some(n) = names.get(id) {
                return Some(n.to_string());
            }
            id = merged.get(id)?;
        }
        None
    };
    let mut relations = BTreeSet::new();
    for r in &dump.relations {
        if let (Some(s), Some(o)) = (resolve(&r.source_id), resolve(&r.target_id)) {
            relations.insert((s, r.predicate.clone(), o));
        }
    }
    Ok(Predicted {
        entities: live.iter().map(|e| (e.name.clone(), e.aliases.clone(), e.kind.clone())).collect(),
        relations: relations.into_iter().collect(),
    })
}

/// Runs `strata eval graph`: prints one row per conversation and the total.
///
/// # Errors
/// Data, store and model errors.
pub async fn run_graph(config: Config, args: GraphArgs) -> Result<()> {
    if let Some(out) = &args.fit_types {
        return fit_types(&config, &args, out).await;
    }
    let gold = load_gold(&args.gold)?;
    let wanted = |id: &str| gold.contains_key(id) && (args.conversations.is_empty() || args.conversations.iter().any(|c| c == id));
    let (mut convs, mut users) = sources(&args)?;
    convs.retain(|c| wanted(&c.sample_id));
    users.retain(|u| wanted(&u.user));
    let mut questions = match &args.longmemeval {
        Some(p) => super::longmemeval::load(p)?,
        None => Vec::new(),
    };
    questions.retain(|q| wanted(&q.question_id));
    if convs.is_empty() && users.is_empty() && questions.is_empty() {
        return Err(Error::Data("no conversation of --data, user of --multilingual or question of --longmemeval has gold labels (or matches --conversations)".into()));
    }
    let (mut cfg, _dir) = super::systems::eval_config(&config)?;
    cfg.graph.enabled = true;
    let offline = cfg.llm.provider == crate::config::LlmProvider::Offline;
    let extractor = if offline { "offline".to_string() } else { format!("llm {}", cfg.llm.model) };
    // the LLM calls per prompt are read from this process's own metrics at the end
    let metrics = llm_metrics(&cfg);
    let started = std::time::Instant::now();
    let mem = Memory::open_with(cfg, Components { ephemeral: true, ..Default::default() }).await?;
    let (mut tuned, mut held) = (GraphScores::default(), GraphScores::default());
    let mut rows = Vec::new();
    println!("graph eval ({extractor}): entity P/R/F1, typed accuracy, junk rate; relation P (typed)/R/F1");
    for conv in &convs {
        let t0 = std::time::Instant::now();
        super::replay::replay(&mem, conv, false).await?;
        let scope = Scope::new(conv.sample_id.clone(), "locomo")?;
        rows.push(score_row(&mem, &scope, &conv.sample_id, &gold, t0).await?);
    }
    for u in &users {
        let t0 = std::time::Instant::now();
        super::multilingual::replay(&mem, u).await?;
        let scope = Scope::new(u.user.clone(), super::multilingual::AGENT)?;
        rows.push(score_row(&mem, &scope, &u.user, &gold, t0).await?);
    }
    for q in &questions {
        let t0 = std::time::Instant::now();
        let (scope, _) = super::longmemeval::replay(&mem, q).await?;
        rows.push(score_row(&mem, &scope, &q.question_id, &gold, t0).await?);
    }
    for (id, s, _) in &rows {
        if TUNED_ON.contains(&id.as_str()) { tuned.add(s) } else { held.add(s) }
    }
    let mut total = tuned.clone();
    total.add(&held);
    let in_sample = rows.iter().filter(|r| TUNED_ON.contains(&r.0.as_str())).count();
    if in_sample > 0 && in_sample < rows.len() {
        print_scores("tuned on", &tuned, &format!("{in_sample} conversations the extractor was written on (in-sample)"));
        print_scores("held out", &held, &format!("{} never tuned on (the headline figure)", rows.len() - in_sample));
    }
    print_scores("total", &total, &format!("(all-relation P {:.2})", total.relation_precision()));
    print_predicates(&total);
    let llm = match &metrics {
        Some(handle) => {
            let sessions: usize = convs.iter().map(|c| c.sessions.len()).sum::<usize>()
                + users.iter().map(|u| u.sessions.len()).sum::<usize>()
                + questions.iter().map(|q| q.haystack_sessions.len()).sum::<usize>();
            llm_report(handle, &mem, sessions, started.elapsed().as_secs_f64()).await?
        }
        None => serde_json::Value::Null,
    };
    if let Some(out) = &args.out {
        let per: Vec<serde_json::Value> = rows
            .iter()
            .map(|(id, s, p)| serde_json::json!({"conversation": id, "tuned_on": TUNED_ON.contains(&id.as_str()), "scores": s, "predicted": p}))
            .collect();
        let doc = serde_json::json!({"extractor": extractor, "total": total, "summary": total.summary(),
            "tuned_on": tuned.summary(), "held_out": held.summary(), "llm": llm, "conversations": per});
        std::fs::write(out, serde_json::to_string_pretty(&doc)?)?;
    }
    mem.shutdown().await?;
    Ok(())
}

/// The conversations the offline extractor's patterns and word lists were
/// written and tuned on (the four LoCoMo ones, before the others were labelled) and the
/// entity typer's weights were fitted on ([`TYPER_FIT`]): their scores are
/// in-sample; every other gold conversation or user is held out.
pub const TUNED_ON: &[&str] = &["conv-26", "conv-41", "conv-47", "conv-50", "minji", "dmitri"];

/// The gold conversations the entity typer is fitted on: the four the
/// extractor was tuned on (already in-sample) and two multilingual users
/// (Hangul, Cyrillic); the other six (three LoCoMo, Japanese, Chinese,
/// Arabic) stay held out.
pub const TYPER_FIT: &[&str] = &["conv-26", "conv-41", "conv-47", "conv-50", "minji", "dmitri"];

/// Penalties `--fit-types` chooses from (leave one conversation out).
pub const TYPER_LAMBDAS: &[f64] = &[0.003, 0.01, 0.03, 0.1];

/// `strata eval graph --fit-types OUT`: see [`GraphArgs::fit_types`].
///
/// # Errors
/// Data errors (an evidence turn not found), embedder errors.
pub async fn fit_types(config: &Config, args: &GraphArgs, out: &Path) -> Result<()> {
    let gold = load_gold(&args.gold)?;
    let (convs, users) = sources(args)?;
    // (conversation, name, turn text, type) of every gold entity with evidence
    let mut rows: Vec<(String, String, String, String)> = Vec::new();
    let mut skipped = 0usize;
    for (id, g) in &gold {
        let turn = |ev: &str| -> Option<String> {
            if let Some(c) = convs.iter().find(|c| &c.sample_id == id) {
                return c.sessions.iter().flat_map(|s| &s.turns).find(|t| t.dia_id == ev).map(|t| t.text.clone());
            }
            let u = users.iter().find(|u| &u.user == id)?;
            let (sid, n) = ev.rsplit_once(':')?;
            let n: usize = n.parse().ok()?;
            u.sessions.iter().find(|s| s.id == sid)?.turns.get(n.checked_sub(1)?).map(|t| t.text.clone())
        };
        for e in &g.entities {
            let kind = canonical_type(&e.kind);
            if !crate::graph::typer::NAMED_TYPES.contains(&kind) {
                continue;
            }
            let Some(text) = e.evidence.as_deref().and_then(turn) else {
                skipped += 1;
                continue;
            };
            let text: String = text.chars().take(crate::graph::typer::CONTEXT_CHARS).collect();
            rows.push((id.clone(), e.name.clone(), text, kind.to_string()));
        }
    }
    if skipped > 0 {
        eprintln!("warning: {skipped} gold entities left out: their evidence names no turn of --data / --multilingual");
    }
    if let Some(c) = TYPER_FIT.iter().find(|c| !rows.iter().any(|r| r.0 == **c)) {
        return Err(Error::Data(format!(
            "the typer is fitted on {TYPER_FIT:?}, and {c} has no gold entity whose evidence turn is in --data / --multilingual (give both, and gold files with evidence ids)"
        )));
    }
    let embedder = crate::embed::load::embedder(config).await?;
    let pairs: Vec<(String, String)> = rows.iter().map(|r| (r.1.clone(), r.2.clone())).collect();
    let x = crate::graph::typer::features(embedder.as_ref(), &pairs).await?;
    let classes: Vec<String> = crate::graph::typer::NAMED_TYPES
        .iter()
        .filter(|t| rows.iter().any(|r| TYPER_FIT.contains(&r.0.as_str()) && r.3 == **t))
        .map(|t| t.to_string())
        .collect();
    let sample = |i: usize| -> Option<(Vec<f32>, usize)> { Some((x[i].clone(), classes.iter().position(|c| *c == rows[i].3)?)) };
    let fit_idx: Vec<usize> = (0..rows.len()).filter(|i| TYPER_FIT.contains(&rows[*i].0.as_str())).collect();
    let held_idx: Vec<usize> = (0..rows.len()).filter(|i| !TYPER_FIT.contains(&rows[*i].0.as_str())).collect();
    let accuracy = |t: &crate::graph::typer::EntityTyper, idx: &[usize]| -> (usize, usize) {
        (idx.iter().filter(|i| t.classify(&x[**i]) == rows[**i].3).count(), idx.len())
    };
    println!("entity typer on {} ({} gold entities with evidence; classes {classes:?})", embedder.model_id(), fit_idx.len());
    let mut best = (f64::NEG_INFINITY, TYPER_LAMBDAS[0]);
    for &lambda in TYPER_LAMBDAS {
        let (mut right, mut all) = (0, 0);
        for g in TYPER_FIT {
            let train: Vec<(Vec<f32>, usize)> = fit_idx.iter().filter(|i| rows[**i].0 != *g).filter_map(|i| sample(*i)).collect();
            let t = crate::graph::typer::EntityTyper::fit(embedder.model_id(), &classes, &train, lambda, vec![])?;
            let test: Vec<usize> = fit_idx.iter().copied().filter(|i| rows[*i].0 == *g).collect();
            let (r, a) = accuracy(&t, &test);
            right += r;
            all += a;
        }
        let acc = ratio(right, all);
        println!("  lambda {lambda:<6} leave one conversation out: {acc:.3} ({right}/{all})");
        if acc > best.0 {
            best = (acc, lambda);
        }
    }
    let train: Vec<(Vec<f32>, usize)> = fit_idx.iter().filter_map(|i| sample(*i)).collect();
    let fitted_on: Vec<String> = TYPER_FIT.iter().map(|s| s.to_string()).collect();
    let typer = crate::graph::typer::EntityTyper::fit(embedder.model_id(), &classes, &train, best.1, fitted_on)?;
    let (r, a) = accuracy(&typer, &held_idx);
    let mut majority: BTreeMap<&str, usize> = BTreeMap::new();
    fit_idx.iter().for_each(|i| *majority.entry(rows[*i].3.as_str()).or_default() += 1);
    let top = majority.iter().max_by_key(|(_, n)| **n).map(|(t, _)| *t).unwrap_or("place");
    let base = held_idx.iter().filter(|i| rows[**i].3 == top).count();
    println!("  chosen lambda {}; held out ({} conversations): {:.3} ({r}/{a}); always \"{top}\": {:.3}", best.1, {
        let s: BTreeSet<&str> = held_idx.iter().map(|i| rows[*i].0.as_str()).collect();
        s.len()
    }, ratio(r, a), ratio(base, a));
    for g in held_idx.iter().map(|i| rows[*i].0.as_str()).collect::<BTreeSet<_>>() {
        let idx: Vec<usize> = held_idx.iter().copied().filter(|i| rows[*i].0 == g).collect();
        let (r, a) = accuracy(&typer, &idx);
        println!("    {g:<8} {:.3} ({r}/{a})", ratio(r, a));
    }
    std::fs::write(out, serde_json::to_string(&typer)?).map_err(|e| Error::Data(format!("{}: {e}", out.display())))?;
    println!("weights written to {}", out.display());
    Ok(())
}

/// The LoCoMo conversations of `--data` and the users of `--multilingual`
/// (each empty when not given).
///
/// # Errors
/// Unreadable or malformed data files.
fn sources(args: &GraphArgs) -> Result<(Vec<super::locomo::LocomoConversation>, Vec<super::multilingual::User>)> {
    let convs = match &args.data {
        Some(d) => load_locomo(d).map_err(|e| Error::Data(e.to_string()))?,
        None => Vec::new(),
    };
    let users = match &args.multilingual {
        Some(d) => super::multilingual::load(d)?.users,
        None => Vec::new(),
    };
    Ok((convs, users))
}

/// Scores the graph of `scope` against `gold[id]` and prints its row.
async fn score_row(
    mem: &Memory,
    scope: &Scope,
    id: &str,
    gold: &BTreeMap<String, Gold>,
    t0: std::time::Instant,
) -> Result<(String, GraphScores, Predicted)> {
    let pred = predicted(mem, scope).await?;
    let s = score(&gold[id], &pred);
    let tag = if TUNED_ON.contains(&id) { "tuned" } else { "held out" };
    print_scores(id, &s, &format!("{:.0} s, {tag}", t0.elapsed().as_secs_f64()));
    Ok((id.to_string(), s, pred))
}

/// Prints one row of scores: `label`, entity P/R/F1, typed accuracy, junk
/// rate, relation counts, typed P/R/F1, then `tail` (seconds, a note).
pub fn print_scores(label: &str, s: &GraphScores, tail: &str) {
    println!(
        "{:<8} entities {:>3}/{:<3} P {:.2} R {:.2} F1 {:.2} typed {:.2} junk {:.2} | relations {:>3} ({:>3} typed) P {:.2} R {:.2} F1 {:.2} | {tail}",
        label,
        s.predicted_entities,
        s.gold_entities,
        s.entity_precision(),
        s.entity_recall(),
        s.entity_f1(),
        s.typed_accuracy(),
        s.junk_rate(),
        s.predicted_relations,
        s.predicted_typed_relations,
        s.typed_relation_precision(),
        s.relation_recall(),
        s.relation_f1(),
    );
}

/// Prints relation precision and recall per predicate, most predicted and
/// labelled first ("–" where a count is 0); predicates never predicted with
/// fewer than 3 gold relations are summed on one line (gold files name many
/// one-off predicates).
pub fn print_predicates(s: &GraphScores) {
    let mut rows: Vec<(&String, &PredicateScores)> = s.by_predicate.iter().collect();
    rows.sort_by(|a, b| (b.1.predicted + b.1.gold).cmp(&(a.1.predicted + a.1.gold)).then(a.0.cmp(b.0)));
    println!("relations by predicate: predicted (P) | gold (R)");
    let rate = |a: usize, b: usize| if b == 0 { "–".to_string() } else { format!("{:.2}", a as f64 / b as f64) };
    let (rare, shown): (Vec<_>, Vec<_>) = rows.into_iter().partition(|(_, c)| c.predicted == 0 && c.gold < 3);
    for (p, c) in shown {
        println!("  {p:<16} {:>4} (P {:>4}) | {:>4} (R {:>4})", c.predicted, rate(c.matched, c.predicted), c.gold, rate(c.found, c.gold));
    }
    if !rare.is_empty() {
        let gold: usize = rare.iter().map(|(_, c)| c.gold).sum();
        println!("  (+{} predicates never predicted, each with 1–2 gold relations: {gold} in all)", rare.len());
    }
}

/// With an LLM configured, a Prometheus recorder for this process, so that
/// [`llm_report`] can read the calls per prompt at the end (`None` offline,
/// or when a recorder is already installed).
pub fn llm_metrics(cfg: &Config) -> Option<metrics_exporter_prometheus::PrometheusHandle> {
    (cfg.llm.provider != crate::config::LlmProvider::Offline)
        .then(|| metrics_exporter_prometheus::PrometheusBuilder::new().install_recorder().ok())
        .flatten()
}

/// Prints the LLM calls per prompt of this run over `sessions` sessions
/// (first-try validity, repairs, tokens and seconds per session, parked
/// jobs) and returns them as JSON.
///
/// # Errors
/// Store errors reading the parked jobs.
pub async fn llm_report(
    handle: &metrics_exporter_prometheus::PrometheusHandle,
    mem: &Memory,
    sessions: usize,
    seconds: f64,
) -> Result<serde_json::Value> {
    let parked = mem.parked_jobs(10_000).await?.len();
    let usage = llm_usage_by_task(&handle.render());
    println!("LLM calls per prompt over {sessions} sessions ({:.0} s per session, {parked} jobs parked):", seconds / sessions.max(1) as f64);
    // 1st-try: the share of answered calls that needed no retry
    println!("{:<28} {:>6} {:>7} {:>9} {:>9} {:>10} {:>10}", "task", "calls", "failed", "1st-try", "repaired", "in/sess", "out/sess");
    for (task, u) in &usage {
        println!(
            "{:<28} {:>6} {:>7} {:>8.0}% {:>9} {:>10.0} {:>10.0}",
            task,
            u.calls,
            u.failed,
            100.0 * u.first_try_valid as f64 / u.answered().max(1) as f64,
            u.repaired,
            u.tokens_in as f64 / sessions.max(1) as f64,
            u.tokens_out as f64 / sessions.max(1) as f64
        );
    }
    Ok(serde_json::json!({"sessions": sessions, "parked": parked, "seconds": seconds, "tasks": usage}))
}

/// One prompt's LLM calls in a run, from the `strata_llm_*` counters.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct TaskUsage {
    /// Requests sent, retries included.
    pub calls: u64,
    /// Of which failed (retried, or the job's attempt failed).
    pub failed: u64,
    /// Calls whose first attempt gave a schema-valid answer.
    pub first_try_valid: u64,
    /// Answers accepted after near-JSON repair or fitting to the schema.
    pub repaired: u64,
    /// Prompt tokens, summed.
    pub tokens_in: u64,
    /// Completion tokens, summed.
    pub tokens_out: u64,
}

impl TaskUsage {
    /// Calls answered in the end (one successful attempt each).
    pub fn answered(&self) -> u64 {
        self.calls.saturating_sub(self.failed)
    }
}

/// Per-task usage from Prometheus text (`strata_llm_calls_total{task="..."} N` and kin).
pub fn llm_usage_by_task(rendered: &str) -> BTreeMap<String, TaskUsage> {
    let mut out: BTreeMap<String, TaskUsage> = BTreeMap::new();
    for line in rendered.lines().filter(|l| l.starts_with("strata_llm_")) {
        let Some((head, value)) = line.rsplit_once(' ') else { continue };
        let Ok(n) = value.parse::<f64>() else { continue };
        let Some((name, labels)) = head.split_once('{') else { continue };
        let label = |k: &str| labels.split(',').find_map(|kv| kv.strip_prefix(&format!("{k}=\"")).map(|v| v.trim_end_matches(['"', '}']).to_string()));
        let Some(task) = label("task") else { continue };
        let u = out.entry(task).or_default();
        let n = n as u64;
        match (name, label("direction").as_deref()) {
            ("strata_llm_calls_total", _) => u.calls += n,
            ("strata_llm_failures_total", _) => u.failed += n,
            ("strata_llm_first_try_valid_total", _) => u.first_try_valid += n,
            ("strata_llm_repaired_total", _) => u.repaired += n,
            ("strata_llm_tokens_total", Some("in")) => u.tokens_in += n,
            ("strata_llm_tokens_total", Some("out")) => u.tokens_out += n,
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gold() -> Gold {
        serde_json::from_value(serde_json::json!({
            "conversation": "c",
            "entities": [
                {"name": "Melanie", "type": "person", "aliases": ["Mel"]},
                {"name": "Caroline", "type": "person"},
                {"name": "Oliver", "type": "pet"},
                {"name": "Sweden", "type": "place"}
            ],
            "relations": [
                {"subject": "Melanie", "predicate": "owns_pet", "object": "Oliver"},
                {"subject": "Caroline", "predicate": "from", "object": "Sweden"},
                {"subject": "Melanie", "predicate": "friend_of", "object": "Caroline"},
                {"subject": "Caroline", "predicate": "works_as", "object": "counselor", "literal": true},
                {"subject": "Caroline", "predicate": "child_of", "object": "Melanie"}
            ]
        }))
        .unwrap()
    }

    fn e(n: &str, t: &str) -> (String, Vec<String>, String) {
        (n.into(), vec![], t.into())
    }
    fn r(s: &str, p: &str, o: &str) -> (String, String, String) {
        (s.into(), p.into(), o.into())
    }

    #[test]
    fn matching_counts_aliases_types_junk_synonyms_inverses_and_literals() {
        let pred = Predicted {
            entities: vec![
                e("Mel", "person"),
                e("caroline", "entity"),
                e("Oliver", "animal"),
                e("Sounds", "entity"),
                e("Sweden Trip", "entity"),
                e("counselor", "role"),
            ],
            relations: vec![
                r("Mel", "has_pet", "Oliver"),
                r("Caroline", "friend_of", "Mel"),
                r("Caroline", "works_as", "counselor"),
                r("Mel", "parent_of", "Caroline"),
                r("Caroline", "mentioned_with", "Sounds"),
                r("Caroline", "lives_in", "Sweden Trip"),
            ],
        };
        let s = score(&gold(), &pred);
        // counselor is a value type: out of entity counts
        assert_eq!((s.predicted_entities, s.matched_entities, s.found_entities), (5, 3, 3));
        assert_eq!(s.missed, vec!["Sweden".to_string()]);
        assert_eq!(s.typed_correctly, 2, "Mel a person, Oliver an animal = pet; caroline untyped");
        assert_eq!(s.junk, 1, "Sounds; 'Sweden Trip' shares a word with Sweden: a miss, not junk");
        assert_eq!(s.predicted_relations, 6);
        assert_eq!(s.predicted_typed_relations, 5);
        // has_pet = owns_pet; friend_of both ways; the literal; parent_of = child_of reversed
        assert_eq!(s.matched_relations, 4);
        assert_eq!(s.found_relations, 4);
        assert!((s.entity_precision() - 0.6).abs() < 1e-9);
        assert!((s.relation_recall() - 0.8).abs() < 1e-9);
        // per predicate, under the canonical name: child_of counts as parent_of
        let by = |p: &str| s.by_predicate.get(p).cloned().unwrap_or_default();
        let c = |predicted, matched, gold, found| PredicateScores { predicted, matched, gold, found };
        assert_eq!(by("parent_of"), c(1, 1, 1, 1));
        assert_eq!(by("lives_in"), c(1, 0, 0, 0));
        assert_eq!(by("from"), c(0, 0, 1, 0));
        assert_eq!(by("mentioned_with"), c(1, 0, 0, 0));
        let mut twice = s.clone();
        twice.add(&s);
        assert_eq!(twice.by_predicate["parent_of"], c(2, 2, 2, 2));
    }

    #[test]
    fn the_gold_files_in_the_repo_load_and_name_only_labelled_entities() {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src/eval/graph_gold");
        let gold = load_gold(&[dir.clone()]).unwrap();
        // LongMemEval haystacks among them (a user with an AI assistant)
        let lme = gold.keys().filter(|k| dir.join("longmemeval").join(format!("{k}.json")).exists()).count();
        assert!(lme >= 4, "{lme} LongMemEval gold files");
        // at least 12, half of them never tuned on, three non-Latin scripts among them
        assert!(gold.len() >= 12, "at least twelve conversations: {:?}", gold.keys());
        assert!(gold.keys().filter(|k| !TUNED_ON.contains(&k.as_str())).count() >= gold.len() / 2);
        assert!(TYPER_FIT.iter().all(|c| TUNED_ON.contains(c) && gold.contains_key(*c)), "the typer's set is in-sample");
        let scripts: BTreeSet<_> = gold
            .values()
            .flat_map(|g| g.entities.iter().flat_map(|e| e.name.chars()))
            .filter(|c| !c.is_ascii())
            .filter_map(|c| whatlang::detect_script(&c.to_string()))
            .map(|s| s.name().to_string())
            .collect();
        assert!(scripts.len() >= 3, "{scripts:?}");
        for g in gold.values() {
            assert!(g.entities.len() >= 3 && g.relations.len() >= 5, "{}", g.conversation);
        }
    }

    #[test]
    fn a_relation_naming_an_unlabelled_entity_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("x.json");
        std::fs::write(&f, r#"{"conversation":"x","entities":[{"name":"A","type":"person"}],"relations":[{"subject":"A","predicate":"likes","object":"B"}]}"#).unwrap();
        let e = load_gold(&[f]).unwrap_err().to_string();
        assert!(e.contains("\"B\" is no labelled entity"), "{e}");
    }
}
