//! The console's two drawings, as data for its templates (the templates
//! write the SVG elements, so every label passes the template's HTML
//! escaping): the top-score histogram and an entity's neighbourhood.

use serde::Serialize;

use crate::graph::search::CoOccurrence;
use crate::graph::Subgraph;

/// Drawing width of both pictures, in SVG user units (the page scales it).
pub const WIDTH: f64 = 640.0;
/// Histogram height, in SVG user units.
pub const HIST_HEIGHT: f64 = 220.0;
/// Graph drawing height, in SVG user units.
pub const GRAPH_HEIGHT: f64 = 480.0;
/// Margin around the plot area, in SVG user units.
const MARGIN: f64 = 32.0;

/// One bar of the histogram: the scores in `(lo, hi]`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Bar {
    /// Lower bucket edge (exclusive; 0 for the first bucket).
    pub lo: f64,
    /// Upper bucket edge (inclusive, Prometheus `le`).
    pub hi: f64,
    /// Observations in the bucket.
    pub count: u64,
    /// Rectangle: x, y, width, height.
    pub x: f64,
    /// Top edge.
    pub y: f64,
    /// Width.
    pub w: f64,
    /// Height.
    pub h: f64,
}

/// The histogram of a Prometheus histogram's cumulative buckets on a [0, 1]
/// axis, with the `min_score` line at `line_x`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Histogram {
    /// Bars, lowest scores first.
    pub bars: Vec<Bar>,
    /// Observations in all.
    pub total: u64,
    /// Observations at or below `min_score`'s bucket (nothing injected for them).
    pub below: u64,
    /// x of the `min_score` line.
    pub line_x: f64,
    /// The threshold drawn.
    pub min_score: f64,
    /// Axis: left, right, baseline y, top y.
    pub left: f64,
    /// Right end of the axis.
    pub right: f64,
    /// Baseline.
    pub base: f64,
    /// Top of the plot area.
    pub top: f64,
}

/// Reads the cumulative buckets `name_bucket{le="…"} N` of one histogram
/// from Prometheus text, summed over label sets, as (upper edge, count)
/// sorted by edge; `+Inf` is left out.
pub fn buckets(prometheus_text: &str, name: &str) -> Vec<(f64, u64)> {
    let prefix = format!("{name}_bucket{{");
    let mut acc: std::collections::BTreeMap<u64, (f64, u64)> = std::collections::BTreeMap::new();
    for line in prometheus_text.lines().filter(|l| l.starts_with(&prefix)) {
        let Some((head, value)) = line.rsplit_once(' ') else { continue };
        let Some(le) = head.split("le=\"").nth(1).and_then(|r| r.split('"').next()) else { continue };
        let (Ok(edge), Ok(n)) = (le.parse::<f64>(), value.parse::<f64>()) else { continue };
        if !edge.is_finite() {
            continue;
        }
        let e = acc.entry(edge.to_bits()).or_insert((edge, 0));
        e.1 += n as u64;
    }
    let mut out: Vec<(f64, u64)> = acc.into_values().collect();
    out.sort_by(|a, b| a.0.total_cmp(&b.0));
    out
}

/// The histogram picture of cumulative `buckets` on [0, 1] with the line at `min_score`.
pub fn histogram(buckets: &[(f64, u64)], min_score: f64) -> Histogram {
    let (left, right, base, top) = (MARGIN, WIDTH - MARGIN / 2.0, HIST_HEIGHT - MARGIN, MARGIN / 2.0);
    let x_of = |v: f64| left + v.clamp(0.0, 1.0) * (right - left);
    let mut counts = Vec::new();
    let mut prev_edge = 0.0;
    let mut prev_cum = 0u64;
    for &(edge, cum) in buckets {
        counts.push((prev_edge, edge, cum.saturating_sub(prev_cum)));
        prev_edge = edge;
        prev_cum = cum;
    }
    let total = prev_cum;
    let max = counts.iter().map(|c| c.2).max().unwrap_or(0).max(1) as f64;
    let bars = counts
        .iter()
        .map(|&(lo, hi, count)| {
            let h = (base - top) * count as f64 / max;
            Bar { lo, hi, count, x: x_of(lo) + 1.0, y: base - h, w: (x_of(hi) - x_of(lo) - 2.0).max(1.0), h }
        })
        .collect::<Vec<_>>();
    // the turns whose best score fell in a bucket that ends at or below min_score injected nothing
    let below = counts.iter().filter(|c| c.1 <= min_score + 1e-9).map(|c| c.2).sum();
    Histogram { bars, total, below, line_x: x_of(min_score), min_score, left, right, base, top }
}

/// A node of the graph drawing.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Node {
    /// Entity id.
    pub id: String,
    /// Name shown.
    pub name: String,
    /// Entity type (the CSS class picks the colour).
    pub kind: String,
    /// Centre.
    pub x: f64,
    /// Centre.
    pub y: f64,
    /// A start entity of the walk (drawn larger).
    pub seed: bool,
}

/// An edge of the graph drawing: every relation between two entities.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Edge {
    /// The predicates, comma-separated (the label).
    pub predicate: String,
    /// Start.
    pub x1: f64,
    /// Start.
    pub y1: f64,
    /// End.
    pub x2: f64,
    /// End.
    pub y2: f64,
    /// Label position.
    pub lx: f64,
    /// Label position.
    pub ly: f64,
    /// Every relation of the pair has `invalid_at` set: drawn dashed.
    pub invalid: bool,
    /// The pair was only said together (a co-occurrence hint, no fact): drawn dotted.
    pub hint: bool,
}

/// Nodes and edges placed for drawing.
#[derive(Debug, Clone, PartialEq, Serialize, Default)]
pub struct GraphDrawing {
    /// Nodes.
    pub nodes: Vec<Node>,
    /// Edges.
    pub edges: Vec<Edge>,
}

/// Places a walk's subgraph: the seeds in the centre, the other entities on
/// rings around them by their hop distance from a seed (1 hop on the inner
/// ring, the furthest on the outer one; on each ring beyond the first, in the
/// angular order of the neighbour that reached them, so a branch stays
/// together). At most `max_nodes`; edges to entities left out are not drawn.
/// The co-occurrence hints of `related` are drawn dotted, labelled with their
/// weight, where no fact joins the pair.
pub fn graph(sub: &Subgraph, related: &[CoOccurrence], seeds: &[String], max_nodes: usize) -> GraphDrawing {
    use std::collections::HashMap;
    use std::f64::consts::{FRAC_PI_2, PI, TAU};
    let (cx, cy) = (WIDTH / 2.0, GRAPH_HEIGHT / 2.0);
    let radius = GRAPH_HEIGHT / 2.0 - MARGIN * 1.5;
    let shown: Vec<&crate::graph::Entity> = sub.entities.iter().take(max_nodes).collect();
    let is_seed = |e: &crate::graph::Entity| seeds.iter().any(|s| s == e.id.as_str());
    // hop distance from the seeds over the drawn relations (either direction), and who reached whom
    let mut hop: HashMap<&str, usize> = shown.iter().filter(|e| is_seed(e)).map(|e| (e.id.as_str(), 0)).collect();
    let mut parent: HashMap<&str, &str> = HashMap::new();
    let mut frontier: Vec<&str> = shown.iter().filter(|e| is_seed(e)).map(|e| e.id.as_str()).collect();
    let drawn: std::collections::HashSet<&str> = shown.iter().map(|e| e.id.as_str()).collect();
    // (source, target, label, invalid, hint): the facts, then the hints
    let lines: Vec<(&str, &str, String, bool, bool)> = sub
        .relations
        .iter()
        .map(|r| (r.source.as_str(), r.target.as_str(), r.predicate.clone(), r.invalid_at.is_some(), false))
        .chain(related.iter().map(|c| (c.source.as_str(), c.target.as_str(), format!("together \u{d7}{}", c.weight), false, true)))
        .collect();
    let mut depth = 0;
    while !frontier.is_empty() {
        depth += 1;
        let mut next = Vec::new();
        for (s, t, ..) in &lines {
            for (a, b) in [(*s, *t), (*t, *s)] {
                if frontier.contains(&a) && drawn.contains(b) && !hop.contains_key(b) {
                    hop.insert(b, depth);
                    parent.insert(b, a);
                    next.push(b);
                }
            }
        }
        frontier = next;
    }
    // an entity no drawn relation reaches goes on the outer ring
    let outer = hop.values().copied().max().unwrap_or(0).max(1);
    let ring_of = |e: &crate::graph::Entity| hop.get(e.id.as_str()).copied().unwrap_or(outer + 1);
    let rings = shown.iter().map(|e| ring_of(e)).max().unwrap_or(0);
    let mut nodes: Vec<Node> = Vec::new();
    let mut angle: HashMap<String, f64> = HashMap::new();
    let centre: Vec<&&crate::graph::Entity> = shown.iter().filter(|e| is_seed(e)).collect();
    for (i, e) in centre.iter().enumerate() {
        // several seeds sit on a small circle of their own
        let a = TAU * i as f64 / centre.len().max(1) as f64;
        let r = if centre.len() > 1 { radius / 4.0 } else { 0.0 };
        angle.insert(e.id.as_str().into(), a);
        nodes.push(Node { id: e.id.as_str().into(), name: e.name.clone(), kind: e.kind.clone(), x: cx + r * a.cos(), y: cy + r * a.sin(), seed: true });
    }
    for k in 1..=rings {
        let mut ring: Vec<&&crate::graph::Entity> = shown.iter().filter(|e| !is_seed(e) && ring_of(e) == k).collect();
        if k > 1 {
            let parent_angle = |e: &crate::graph::Entity| parent.get(e.id.as_str()).and_then(|p| angle.get(*p)).copied().unwrap_or(0.0);
            ring.sort_by(|a, b| parent_angle(a).total_cmp(&parent_angle(b)));
        }
        let r = radius * k as f64 / rings as f64;
        // half a step off the vertical, so that no edge to the ring runs through the centre's
        // label; two nodes alone on the ring sit above the centre, not opposite (their edge
        // would cross it)
        let offset = PI / ring.len().max(1) as f64 - FRAC_PI_2;
        for (i, e) in ring.iter().enumerate() {
            let a = if ring.len() == 2 && rings == 1 { [-150f64, -30.0][i].to_radians() } else { TAU * i as f64 / ring.len() as f64 + offset };
            angle.insert(e.id.as_str().into(), a);
            nodes.push(Node { id: e.id.as_str().into(), name: e.name.clone(), kind: e.kind.clone(), x: cx + r * a.cos(), y: cy + r * a.sin(), seed: false });
        }
    }
    let at = |id: &str| nodes.iter().find(|n| n.id == id).map(|n| (n.x, n.y));
    // the relations between one pair of entities share one line and one label
    let mut edges: Vec<(String, String, Edge)> = Vec::new();
    for (source, target, label, invalid, hint) in lines {
        let (Some((x1, y1)), Some((x2, y2))) = (at(source), at(target)) else { continue };
        let (a, b) = (source.to_string(), target.to_string());
        let key = if a <= b { (a, b) } else { (b, a) };
        match edges.iter_mut().find(|(s, t, _)| (s, t) == (&key.0, &key.1)) {
            // a hint adds nothing to a pair a fact already joins
            Some(_) if hint => {}
            Some((_, _, e)) => {
                if !e.predicate.split(", ").any(|p| p == label) {
                    e.predicate = format!("{}, {label}", e.predicate);
                }
                e.invalid &= invalid;
            }
            None => edges.push((key.0, key.1, Edge {
                predicate: label,
                x1, y1, x2, y2,
                lx: (x1 + x2) / 2.0,
                ly: (y1 + y2) / 2.0 - 4.0,
                invalid,
                hint,
            })),
        }
    }
    GraphDrawing { nodes, edges: edges.into_iter().map(|(_, _, e)| e).collect() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_summed_over_label_sets_and_made_into_bars() {
        let text = "# TYPE strata_inject_top_score histogram\n\
            strata_inject_top_score_bucket{le=\"0.25\"} 2\n\
            strata_inject_top_score_bucket{le=\"0.5\"} 5\n\
            strata_inject_top_score_bucket{le=\"1\"} 9\n\
            strata_inject_top_score_bucket{le=\"+Inf\"} 9\n\
            strata_inject_top_score_bucket{x=\"b\",le=\"0.25\"} 1\n\
            strata_inject_top_score_bucket{x=\"b\",le=\"0.5\"} 1\n\
            strata_inject_top_score_bucket{x=\"b\",le=\"1\"} 1\n\
            strata_inject_top_score_sum 4.2\n";
        let b = buckets(text, "strata_inject_top_score");
        assert_eq!(b, vec![(0.25, 3), (0.5, 6), (1.0, 10)]);
        let h = histogram(&b, 0.5);
        assert_eq!(h.bars.iter().map(|b| b.count).collect::<Vec<_>>(), vec![3, 3, 4]);
        assert_eq!((h.total, h.below), (10, 6), "the two buckets ending at or below 0.5");
        let tallest = h.bars.iter().map(|b| b.h).fold(0.0, f64::max);
        assert!((tallest - (h.base - h.top)).abs() < 1e-9, "the largest bucket fills the plot");
        assert!(h.line_x > h.bars[1].x && h.line_x < h.bars[2].x + h.bars[2].w);
        assert!(histogram(&[], 0.3).bars.is_empty());
    }

    #[test]
    fn entities_sit_on_rings_by_hop_distance() {
        use crate::graph::{Entity, EntityId, Relation, RelationId};
        let s = crate::model::Scope::new("u", "a").unwrap();
        let e = |n: &str| Entity {
            id: EntityId::for_key(&s, n),
            identity_key: n.into(),
            name: n.into(),
            kind: "person".into(),
            aliases: vec![],
            attributes: serde_json::json!({}),
            created_at: Default::default(),
            updated_at: Default::default(),
            episodes: vec![],
        };
        let r = |a: &str, p: &str, b: &str, invalid: bool| Relation {
            id: RelationId::for_typed(&s, a, p, b),
            source: EntityId::for_key(&s, a),
            target: EntityId::for_key(&s, b),
            predicate: p.into(),
            attributes: serde_json::json!({}),
            valid_from: None,
            invalid_at: invalid.then(chrono::Utc::now),
            episode_id: None,
            memory_id: None,
        };
        // rita - alice - lisbon (2 hops), rita - bob, and two relations of one pair
        let sub = Subgraph {
            entities: vec![e("rita"), e("alice"), e("bob"), e("lisbon")],
            relations: vec![r("alice", "sister_of", "rita", false), r("rita", "friend_of", "bob", false), r("alice", "lives_in", "lisbon", true), r("alice", "moved_to", "lisbon", false)],
        };
        let seed = EntityId::for_key(&s, "rita").as_str().to_string();
        // a hint to a node no fact reaches, and one beside a fact (not drawn twice)
        let hint = |a: &str, b: &str, weight| CoOccurrence {
            source: EntityId::for_key(&s, a),
            target: EntityId::for_key(&s, b),
            weight,
            episodes: vec![],
            last_seen: None,
        };
        let mut with_hint = sub.clone();
        with_hint.entities.push(e("porto"));
        let h = graph(&with_hint, &[hint("bob", "porto", 3), hint("rita", "bob", 2)], &[seed.clone()], 40);
        let dotted: Vec<&Edge> = h.edges.iter().filter(|e| e.hint).collect();
        assert_eq!(dotted.len(), 1, "{:?}", h.edges);
        assert_eq!(dotted[0].predicate, "together \u{d7}3");
        assert_eq!(h.edges.iter().find(|e| e.predicate == "friend_of").map(|e| e.hint), Some(false));
        let d = graph(&sub, &[], &[seed], 40);
        let dist = |n: &str| {
            let n = d.nodes.iter().find(|x| x.name == n).unwrap();
            ((n.x - WIDTH / 2.0).powi(2) + (n.y - GRAPH_HEIGHT / 2.0).powi(2)).sqrt()
        };
        assert!(dist("rita") < 1e-9, "the seed in the centre");
        assert!((dist("alice") - dist("bob")).abs() < 1e-9, "one hop: one ring");
        assert!(dist("lisbon") > dist("alice") + 10.0, "two hops: the outer ring");
        assert_eq!(d.edges.len(), 3, "one line per pair");
        let pair = d.edges.iter().find(|e| e.predicate.contains("moved_to")).unwrap();
        assert_eq!(pair.predicate, "lives_in, moved_to");
        assert!(!pair.invalid, "dashed only when every relation of the pair is invalid");
        // a node left out by max_nodes takes its edges with it
        assert_eq!(graph(&sub, &[], &[EntityId::for_key(&s, "rita").as_str().to_string()], 3).edges.len(), 2);
    }
}
