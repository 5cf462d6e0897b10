//! The import rules of `src/`, checked on the source text (ARCHITECTURE.md,
//! "Code map"). The module graph is built from every `crate::…` and
//! `super::…` path (in `use` trees too) outside test code, one node per file
//! (`src/store/sqlite/mod.rs` is `store::sqlite`). Edges between a module and
//! its own ancestors or descendants are left out: a folder and its files are
//! one unit (a `mod.rs` re-exports its children, a child uses its parent's
//! types). Paths through the crate root (`crate::Memory`) are followed to
//! the module the root re-exports them from.
//!
//! Rules:
//! 1. no import cycle, between files and between top-level folders (a
//!    folder is all its files: `graph::combine -> typed` and
//!    `typed::store -> graph::model` are a cycle of `graph` and `typed`);
//! 2. `model/` imports nothing internal but `error` and `text`;
//! 3. only `server/` names axum, hyper, tower, tower_http or utoipa_axum;
//! 4. only `store::factory` names a backend (`store::{sqlite, postgres,
//!    tantivy_index, qdrant_edge, qdrant, cypher}`), besides the backends;
//! 5. workers never import `memory`, and nothing below the facade does
//!    (only `server`, `cli` and `eval` sit above it);
//! 6. `runtime` imports no capability (`episodic`, `typed`, `admin`,
//!    `graph::search`) and no worker;
//! 7. every top-level module sits in one layer of [`LAYERS`] and imports
//!    only modules of its own layer or below. ARCHITECTURE.md shows the
//!    table as [`layers_table`] prints it (tested).
//!
//! Each failure prints the offending edge (and, for a cycle, the cycle).
//! `cargo test --test it architecture:: -- --nocapture` prints the module graph.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// One module's source, after comments, strings and test code are removed.
struct Module {
    /// Segments below the crate root (`["store", "sqlite"]`); empty for `lib.rs`.
    path: Vec<String>,
    /// The code that counts.
    code: String,
    /// Test-only submodules (`#[cfg(test)] mod x;`), whose files are left out.
    test_children: Vec<String>,
}

/// Removes comments, string and char literals (their text could hold
/// anything), keeping the rest; lifetimes stay.
fn strip_comments_and_strings(src: &str) -> String {
    let b: Vec<char> = src.chars().collect();
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let next = b.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < b.len() && b[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < b.len() {
                if b[i] == '/' && b.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if b[i] == '*' && b.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            out.push(' ');
        } else if c == 'r' && (next == Some('"') || next == Some('#')) && !prev_is_ident(&b, i) {
            // raw string r"..." or r#"..."#
            let mut j = i + 1;
            let mut hashes = 0;
            while b.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if b.get(j) != Some(&'"') {
                out.push(c);
                i += 1;
                continue;
            }
            j += 1;
            'raw: while j < b.len() {
                if b[j] == '"' && (0..hashes).all(|h| b.get(j + 1 + h) == Some(&'#')) {
                    j += 1 + hashes;
                    break 'raw;
                }
                j += 1;
            }
            out.push_str("\"\"");
            i = j;
        } else if c == '"' {
            i += 1;
            while i < b.len() && b[i] != '"' {
                if b[i] == '\\' {
                    i += 1;
                }
                i += 1;
            }
            i += 1;
            out.push_str("\"\"");
        } else if c == '\'' {
            // a char literal ('a', '\n', '\u{200B}') or a lifetime ('a)
            if next == Some('\\') {
                let mut j = i + 3;
                while j < b.len() && b[j] != '\'' {
                    j += 1;
                }
                i = j + 1;
                out.push_str("' '");
            } else if b.get(i + 2) == Some(&'\'') {
                i += 3;
                out.push_str("' '");
            } else {
                out.push(c);
                i += 1;
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

fn prev_is_ident(b: &[char], i: usize) -> bool {
    i > 0 && (b[i - 1].is_alphanumeric() || b[i - 1] == '_')
}

/// Removes every item under `#[cfg(test)]`; returns the code and the names
/// of test-only file submodules (`#[cfg(test)] mod x;`).
fn strip_test_items(code: &str) -> (String, Vec<String>) {
    let marker = "#[cfg(test)]";
    let mut out = String::new();
    let mut children = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find(marker) {
        out.push_str(&rest[..at]);
        let item = &rest[at + marker.len()..];
        // the item ends at a `;` before any `{`, or at the `}` matching its first `{`
        let b = item.as_bytes();
        let mut end = item.len();
        let mut depth = 0usize;
        for (k, &c) in b.iter().enumerate() {
            match c {
                b'{' => depth += 1,
                b'}' => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        end = k + 1;
                        break;
                    }
                }
                b';' if depth == 0 => {
                    end = k + 1;
                    break;
                }
                _ => {}
            }
        }
        let text = &item[..end];
        let words: Vec<&str> = text
            .split(|c: char| !(c.is_alphanumeric() || c == '_'))
            .filter(|w| !w.is_empty())
            .collect();
        if text.trim_end().ends_with(';') {
            if let Some(p) = words.iter().position(|w| *w == "mod") {
                if let Some(name) = words.get(p + 1) {
                    children.push(name.to_string());
                }
            }
        }
        rest = &item[end..];
    }
    out.push_str(rest);
    (out, children)
}

/// Every module of a source tree: `files` maps a path relative to `src/`
/// (`store/sqlite/mod.rs`) to its text. `main.rs` is another crate and is
/// left out, as are test-only files.
fn modules(files: &BTreeMap<String, String>) -> Vec<Module> {
    let mut all: Vec<Module> = Vec::new();
    for (rel, text) in files {
        if rel == "main.rs" {
            continue;
        }
        let mut segs: Vec<String> = rel.trim_end_matches(".rs").split('/').map(str::to_string).collect();
        if matches!(segs.last().map(String::as_str), Some("mod") | Some("lib")) {
            segs.pop();
        }
        let (code, test_children) = strip_test_items(&strip_comments_and_strings(text));
        all.push(Module { path: segs, code, test_children });
    }
    let test_only: BTreeSet<Vec<String>> = all
        .iter()
        .flat_map(|m| {
            m.test_children.iter().map(|c| {
                let mut p = m.path.clone();
                p.push(c.clone());
                p
            })
        })
        .collect();
    all.retain(|m| !test_only.iter().any(|t| m.path.starts_with(t)));
    all
}

/// Splits a `use` tree (`crate::{a::b, c::{d, e}}`, spaces removed) into
/// its leaf paths (`crate::a::b`, `crate::c::d`, `crate::c::e`).
fn use_leaves(tree: &str) -> Vec<String> {
    fn walk(prefix: &str, t: &str, out: &mut Vec<String>) {
        let t = t.trim();
        if let Some(open) = t.find('{') {
            let head = &t[..open];
            let body = &t[open + 1..t.rfind('}').unwrap_or(t.len())];
            let mut depth = 0;
            let mut start = 0;
            for (i, c) in body.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        walk(&format!("{prefix}{head}"), &body[start..i], out);
                        start = i + 1;
                    }
                    _ => {}
                }
            }
            walk(&format!("{prefix}{head}"), &body[start..], out);
        } else if !t.is_empty() {
            let t = t.split(" as ").next().unwrap_or(t);
            out.push(format!("{prefix}{t}"));
        }
    }
    let mut out = Vec::new();
    walk("", tree, &mut out);
    out
}

/// The internal paths a module names, as segments from the crate root
/// (`known`: every module, for `use` paths relative to the module itself,
/// such as `pub use memory::Memory` in `lib.rs`).
fn paths(m: &Module, known: &BTreeSet<Vec<String>>) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let resolve = |raw: &str| -> Option<Vec<String>> {
        let segs: Vec<&str> = raw.split("::").map(str::trim).filter(|s| !s.is_empty()).collect();
        let mut base: Vec<String>;
        let mut i = 0;
        match segs.first().copied() {
            Some("crate") => {
                base = Vec::new();
                i = 1;
            }
            Some("super") | Some("self") => {
                base = m.path.clone();
                while let Some(s) = segs.get(i) {
                    match *s {
                        "super" => {
                            base.pop();
                        }
                        "self" => {}
                        _ => break,
                    }
                    i += 1;
                }
            }
            Some(first) => {
                let mut child = m.path.clone();
                child.push(first.to_string());
                if !known.contains(&child) {
                    return None;
                }
                base = m.path.clone();
            }
            None => return None,
        }
        base.extend(segs[i..].iter().map(|s| s.to_string()));
        Some(base)
    };
    // `use` statements (grouped trees included)
    let code = &m.code;
    let mut at = 0;
    while let Some(p) = find_word(&code[at..], "use") {
        let start = at + p + 3;
        let Some(end) = code[start..].find(';') else { break };
        let tree: String = code[start..start + end].split_whitespace().collect::<Vec<_>>().join(" ");
        let tree = tree.replace(" :: ", "::").replace(":: ", "::").replace(" ::", "::");
        for leaf in use_leaves(&tree.replace(", ", ",").replace("{ ", "{").replace(" }", "}")) {
            if let Some(p) = resolve(&leaf) {
                out.push(p);
            }
        }
        at = start + end;
    }
    // `crate::a::b` and `super::a::b` anywhere (types in signatures, calls)
    for anchor in ["crate", "super"] {
        let mut at = 0;
        while let Some(p) = find_word(&code[at..], anchor) {
            let start = at + p;
            let tail: String = code[start..]
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
                .collect();
            // `super::super::x` is read once, from its first segment
            let inner = code[..start].trim_end().ends_with("::");
            if tail.starts_with(&format!("{anchor}::")) && !inner {
                if let Some(p) = resolve(&tail) {
                    out.push(p);
                }
            }
            at = start + anchor.len();
        }
    }
    out
}

/// The byte offset of `word` in `s` standing as a whole identifier.
fn find_word(s: &str, word: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(p) = s[from..].find(word) {
        let at = from + p;
        let before = s[..at].chars().next_back();
        let after = s[at + word.len()..].chars().next();
        let ident = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
        if !ident(before) && !ident(after) {
            return Some(at);
        }
        from = at + word.len();
    }
    None
}

/// Module graph: module → the modules it imports (display names, `crate` for the root).
type Graph = BTreeMap<String, BTreeSet<String>>;

fn name(path: &[String]) -> String {
    if path.is_empty() {
        "crate".into()
    } else {
        path.join("::")
    }
}

/// Builds the graph of `mods` (see the module docs for what counts).
fn graph(mods: &[Module]) -> Graph {
    let known: BTreeSet<Vec<String>> = mods.iter().map(|m| m.path.clone()).collect();
    // names the crate root re-exports, e.g. Memory → memory
    let root = mods.iter().find(|m| m.path.is_empty());
    let mut reexports: BTreeMap<String, Vec<String>> = BTreeMap::new();
    if let Some(r) = root {
        for p in paths(r, &known) {
            if let Some(last) = p.last() {
                reexports.insert(last.clone(), p.clone());
            }
        }
    }
    let owner = |p: &[String]| -> Vec<String> {
        (0..=p.len()).rev().map(|n| p[..n].to_vec()).find(|q| known.contains(q)).unwrap_or_default()
    };
    let mut g = Graph::new();
    for m in mods {
        let from = name(&m.path);
        let edges = g.entry(from.clone()).or_default();
        for p in paths(m, &known) {
            let mut to = owner(&p);
            if to.is_empty() {
                // through the root: follow a re-export (crate::Memory), else the root itself
                match p.first().and_then(|f| reexports.get(f)) {
                    Some(target) if !m.path.is_empty() => to = owner(target),
                    _ => continue,
                }
            }
            let related = to.starts_with(&m.path) || m.path.starts_with(&to);
            if !related {
                edges.insert(name(&to));
            }
        }
    }
    g
}

/// A cycle of the graph, as its modules in order, if there is one.
fn find_cycle(g: &Graph) -> Option<Vec<String>> {
    fn visit(n: &str, g: &Graph, state: &mut BTreeMap<String, u8>, stack: &mut Vec<String>) -> Option<Vec<String>> {
        state.insert(n.to_string(), 1);
        stack.push(n.to_string());
        for m in g.get(n).into_iter().flatten() {
            match state.get(m.as_str()).copied().unwrap_or(0) {
                0 => {
                    if let Some(c) = visit(m, g, state, stack) {
                        return Some(c);
                    }
                }
                1 => {
                    let at = stack.iter().position(|s| s == m).unwrap_or(0);
                    let mut c = stack[at..].to_vec();
                    c.push(m.clone());
                    return Some(c);
                }
                _ => {}
            }
        }
        stack.pop();
        state.insert(n.to_string(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for n in g.keys() {
        if state.get(n.as_str()).copied().unwrap_or(0) == 0 {
            if let Some(c) = visit(n, g, &mut state, &mut Vec::new()) {
                return Some(c);
            }
        }
    }
    None
}

/// The top-level unit a module belongs to (`store::sqlite` → `store`).
fn top(module: &str) -> &str {
    module.split("::").next().unwrap_or(module)
}

/// The graph between top-level units: an edge when any module of one
/// imports any module of the other (the crate root is left out: it only
/// declares and re-exports).
fn folder_graph(g: &Graph) -> Graph {
    let mut out = Graph::new();
    for (from, tos) in g {
        if from == "crate" {
            continue;
        }
        let edges = out.entry(top(from).to_string()).or_default();
        for to in tos {
            if top(to) != top(from) && to != "crate" {
                edges.insert(top(to).to_string());
            }
        }
    }
    out
}

/// The layers of `src/`, from the bottom: a top-level module imports only
/// modules of its own layer or a lower one (and never in a cycle, rule 1).
pub const LAYERS: &[(&str, &[&str])] = &[
    ("foundation", &["error", "model", "text"]),
    ("configuration", &["config"]),
    ("model clients", &["llm", "embed"]),
    ("graph and stores", &["graph", "store"]),
    ("recall, summaries, keys, bus", &["recall", "summary", "keys", "bus"]),
    ("runtime", &["runtime", "webhook"]),
    ("capabilities and workers", &["episodic", "typed", "admin", "worker"]),
    ("facade", &["memory"]),
    ("surfaces", &["server", "cli", "eval"]),
];

/// The layer of a top-level module, if [`LAYERS`] names it.
fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|(_, ms)| ms.contains(&top(module)))
}

/// [`LAYERS`] as the Markdown table ARCHITECTURE.md shows (top layer first).
fn layers_table() -> String {
    let mut out = String::from("| layer | modules |\n|---|---|\n");
    for (name, ms) in LAYERS.iter().rev() {
        let ms: Vec<String> = ms.iter().map(|m| format!("`{m}`")).collect();
        out.push_str(&format!("| {name} | {} |\n", ms.join(", ")));
    }
    out
}

fn under(module: &str, root: &str) -> bool {
    module == root || module.starts_with(&format!("{root}::"))
}

const BACKENDS: &[&str] = &[
    "store::sqlite",
    "store::postgres",
    "store::tantivy_index",
    "store::qdrant_edge",
    "store::qdrant",
    "store::cypher",
];
const HTTP_CRATES: &[&str] = &["axum", "hyper", "tower", "tower_http", "utoipa_axum"];
const CAPABILITIES: &[&str] = &["episodic", "typed", "admin", "graph::search"];

/// Every rule broken by `mods`, each naming the offending edge.
fn violations(mods: &[Module]) -> Vec<String> {
    let g = graph(mods);
    let mut out = Vec::new();
    if let Some(c) = find_cycle(&g) {
        out.push(format!("import cycle: {}", c.join(" -> ")));
    }
    let folders = folder_graph(&g);
    if let Some(c) = find_cycle(&folders) {
        out.push(format!("import cycle between folders: {}", c.join(" -> ")));
    }
    for (from, tos) in &folders {
        let Some(lf) = layer_of(from) else {
            out.push(format!("{from} is in no layer of LAYERS"));
            continue;
        };
        for to in tos {
            match layer_of(to) {
                Some(lt) if lt > lf => out.push(format!(
                    "imports go down the layers: {from} ({}) -> {to} ({})",
                    LAYERS[lf].0, LAYERS[lt].0
                )),
                _ => {}
            }
        }
    }
    for (from, tos) in &g {
        for to in tos {
            let edge = format!("{from} -> {to}");
            if under(from, "model") && !(to == "error" || to == "text" || under(to, "model")) {
                out.push(format!("model/ imports only error and text: {edge}"));
            }
            let backend_edge = BACKENDS.iter().any(|b| under(to, b));
            let backend_from = BACKENDS.iter().any(|b| under(from, b));
            if backend_edge && !backend_from && from != "store::factory" {
                out.push(format!("only store::factory names a backend: {edge}"));
            }
            if to == "memory" && !["server", "cli", "eval", "crate"].iter().any(|r| under(from, r)) {
                out.push(format!("nothing below the facade imports Memory (workers never do): {edge}"));
            }
            if from == "runtime" && (under(to, "worker") || CAPABILITIES.iter().any(|c| under(to, c))) {
                out.push(format!("runtime imports no capability and no worker: {edge}"));
            }
        }
    }
    for m in mods {
        let from = name(&m.path);
        if under(&from, "server") {
            continue;
        }
        for krate in HTTP_CRATES {
            let mut at = 0;
            while let Some(p) = find_word(&m.code[at..], krate) {
                let after = &m.code[at + p + krate.len()..];
                let before = m.code[..at + p].trim_end();
                let is_path = after.trim_start().starts_with("::") && !before.ends_with("::");
                if is_path {
                    out.push(format!("only server/ knows HTTP: {from} names {krate}::"));
                    break;
                }
                at += p + krate.len();
            }
        }
    }
    out
}

fn read_tree(dir: &Path, base: &Path, out: &mut BTreeMap<String, String>) {
    for e in std::fs::read_dir(dir).expect("src/ is readable") {
        let p = e.expect("a directory entry").path();
        if p.is_dir() {
            read_tree(&p, base, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            let rel = p.strip_prefix(base).expect("under src/").to_string_lossy().replace('\\', "/");
            out.insert(rel, std::fs::read_to_string(&p).expect("a UTF-8 source file"));
        }
    }
}

#[test]
fn src_follows_the_import_rules() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = BTreeMap::new();
    read_tree(&src, &src, &mut files);
    let mods = modules(&files);
    assert!(mods.len() > 50, "found only {} modules under {}", mods.len(), src.display());
    println!("module graph (module: what it imports):");
    for (m, tos) in graph(&mods) {
        println!("{m}: {}", tos.into_iter().collect::<Vec<_>>().join(", "));
    }
    let v = violations(&mods);
    assert!(v.is_empty(), "{} import rule(s) broken:\n{}", v.len(), v.join("\n"));
}

fn tree(files: &[(&str, &str)]) -> Vec<Module> {
    modules(&files.iter().map(|(p, t)| (p.to_string(), t.to_string())).collect())
}

#[test]
fn the_checker_sees_cycles_through_groups_super_and_the_root() {
    let mods = tree(&[
        ("lib.rs", "pub mod a; pub mod b; pub mod memory; pub use memory::Memory;"),
        ("a.rs", "use crate::{b::{inner::X, Y as Z}, error};"),
        ("b/mod.rs", "pub mod inner;"),
        ("b/inner.rs", "fn f() -> super::super::a::T { todo!() }"),
        ("memory.rs", ""),
        ("error.rs", ""),
    ]);
    let v = violations(&mods);
    assert!(v.iter().any(|e| e.contains("import cycle") && e.contains("a") && e.contains("b::inner")), "{v:?}");
    // through the crate root
    let mods = tree(&[
        ("lib.rs", "pub mod worker; pub mod memory; pub use memory::Memory;"),
        ("worker/mod.rs", "pub mod episodic;"),
        ("worker/episodic.rs", "fn f(m: &crate::Memory) {}"),
        ("memory.rs", "use crate::worker::episodic;"),
    ]);
    let v = violations(&mods);
    assert!(v.iter().any(|e| e.contains("worker::episodic -> memory")), "{v:?}");
    assert!(v.iter().any(|e| e.starts_with("import cycle")), "{v:?}");
}

#[test]
fn the_checker_names_each_broken_rule_and_ignores_tests_comments_and_strings() {
    let mods = tree(&[
        ("lib.rs", "pub mod model; pub mod store; pub mod typed; pub mod runtime; pub mod server; pub mod error;"),
        ("model/mod.rs", "use crate::store::Thing;"),
        ("store/mod.rs", "pub mod sqlite; pub mod factory;"),
        ("store/sqlite.rs", "pub struct SqliteStore;"),
        ("store/factory.rs", "use super::sqlite::SqliteStore;"),
        ("typed.rs", "fn f() { let _ = crate::store::sqlite::SqliteStore; }"),
        ("runtime.rs", "use crate::typed::X; fn g() { axum::serve(); }"),
        ("server.rs", "use axum::Router; use crate::store::factory;"),
        ("error.rs", "// crate::store::sqlite in a comment\nconst S: &str = \"crate::store::sqlite\";\n#[cfg(test)]\nmod tests { use crate::store::sqlite::SqliteStore; }"),
    ]);
    let v = violations(&mods);
    let has = |s: &str| v.iter().any(|e| e.contains(s));
    assert!(has("model/ imports only error and text: model -> store"), "{v:?}");
    assert!(has("only store::factory names a backend: typed -> store::sqlite"), "{v:?}");
    assert!(has("runtime imports no capability and no worker: runtime -> typed"), "{v:?}");
    assert!(has("only server/ knows HTTP: runtime names axum::"), "{v:?}");
    assert!(!has("error ->"), "comments, strings and test code do not count: {v:?}");
    assert!(!has("server names"), "server/ may use axum: {v:?}");
    // the same two edges also go up the layers
    assert!(has("imports go down the layers: model (foundation) -> store (graph and stores)"), "{v:?}");
    assert!(has("imports go down the layers: runtime (runtime) -> typed (capabilities and workers)"), "{v:?}");
    assert_eq!(v.len(), 6, "{v:?}");
}

#[test]
fn the_checker_sees_a_cycle_between_folders_whose_edges_land_on_different_files() {
    // graph::combine -> typed and typed::store -> graph::model: no file is in a
    // cycle, but the folders graph and typed are
    let mods = tree(&[
        ("lib.rs", "pub mod graph; pub mod typed;"),
        ("graph/mod.rs", "pub mod combine; pub mod model;"),
        ("graph/combine.rs", "use crate::typed::Remembered;"),
        ("graph/model.rs", "pub struct Entity;"),
        ("typed/mod.rs", "pub mod store; pub struct Remembered;"),
        ("typed/store.rs", "use crate::graph::model::Entity;"),
    ]);
    let v = violations(&mods);
    assert!(!v.iter().any(|e| e.starts_with("import cycle:")), "no cycle between files: {v:?}");
    assert!(v.iter().any(|e| e.starts_with("import cycle between folders:")), "{v:?}");
    // an unplanned top-level module is named
    let mods = tree(&[("lib.rs", "pub mod newcomer; pub mod error;"), ("newcomer.rs", "use crate::error::Error;"), ("error.rs", "")]);
    assert!(violations(&mods).iter().any(|e| e == "newcomer is in no layer of LAYERS"));
}

#[test]
fn architecture_md_shows_the_layers() {
    let doc = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("ARCHITECTURE.md")).unwrap();
    assert!(doc.contains(&layers_table()), "ARCHITECTURE.md must show the layers as:\n{}", layers_table());
}

/// Comments say what and why; the history of a change lives in git and
/// docs/measurements.md, so no issue number is written in `src/`.
#[test]
fn no_issue_numbers_in_src() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = BTreeMap::new();
    read_tree(&src, &src, &mut files);
    let mut found = Vec::new();
    for (path, text) in &files {
        for (i, line) in text.lines().enumerate() {
            let lower = line.to_lowercase();
            let mut rest = lower.as_str();
            while let Some(p) = rest.find("issue") {
                let after = rest[p + 5..].trim_start_matches([' ', '#']);
                if after.starts_with(|c: char| c.is_ascii_digit()) {
                    found.push(format!("src/{path}:{}: {}", i + 1, line.trim()));
                    break;
                }
                rest = &rest[p + 5..];
            }
        }
    }
    assert!(found.is_empty(), "issue numbers in src/:\n{}", found.join("\n"));
}

/// The modules `lib.rs` documents as the library's API; every other
/// top-level module is `#[doc(hidden)]` (for the binary, the tests and the
/// benches) or private.
pub const API: &[&str] = &["config", "embed", "graph", "memory", "model", "store", "summary"];

#[test]
fn only_the_api_modules_are_public_and_documented() {
    let lib = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/lib.rs")).unwrap();
    let lines: Vec<&str> = lib.lines().map(str::trim).collect();
    let mut documented = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        if let Some(m) = l.strip_prefix("pub mod ").and_then(|m| m.strip_suffix(';')) {
            if i == 0 || lines[i - 1] != "#[doc(hidden)]" {
                documented.push(m.to_string());
            }
        }
    }
    documented.sort();
    assert_eq!(documented, API, "src/lib.rs: a module made public without #[doc(hidden)] is API; add it to API here and to ARCHITECTURE.md");
}
