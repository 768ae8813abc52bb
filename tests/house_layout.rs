//! The house's layout (shared/style.md, "How this house is laid out"),
//! checked on the source: no import circle between files, the floors, and
//! the simulator kept apart. Pure std, no etcd.
//!
//! The graph is the one /work/wt/cycles.py draws: a file refers to a module
//! file through a `crate::` path (the longest prefix that is a file), a
//! `use crate::{..}` group, or `super::<module>`. Comments and everything
//! after a file's first `#[cfg(test)]` are left out; `lib.rs`, `main.rs`
//! and `src/bin` are the roots, not part of it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Module path (`charm::plan`) → its source file.
fn modules(src: &Path) -> BTreeMap<String, PathBuf> {
    let mut out = BTreeMap::new();
    let mut dirs = vec![src.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                dirs.push(p);
                continue;
            }
            if p.extension().and_then(|x| x.to_str()) != Some("rs") {
                continue;
            }
            let rel = p.strip_prefix(src).unwrap().with_extension("");
            let mut name = rel.to_string_lossy().replace('/', "::");
            if let Some(parent) = name.strip_suffix("::mod") {
                name = parent.to_string();
            }
            if name == "lib" || name == "main" || name.starts_with("bin::") {
                continue;
            }
            out.insert(name, p);
        }
    }
    out
}

/// The text that counts: no `//` comments, nothing from `#[cfg(test)]` on.
fn code(text: &str) -> String {
    let mut s = text
        .lines()
        .map(|l| l.find("//").map_or(l, |i| &l[..i]))
        .collect::<Vec<_>>()
        .join("\n");
    if let Some(cut) = s.find("#[cfg(test)]") {
        s.truncate(cut);
    }
    s
}

fn is_ident(c: char) -> bool {
    c.is_ascii_lowercase() || c == '_'
}

/// `a::b::c` as it follows `at` (lowercase segments only, as module names are).
fn path_after(s: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut rest = s;
    loop {
        let n = rest.find(|c: char| !is_ident(c)).unwrap_or(rest.len());
        if n == 0 {
            break;
        }
        parts.push(&rest[..n]);
        match rest[n..].strip_prefix("::") {
            Some(r) => rest = r,
            None => break,
        }
    }
    parts
}

/// Edges from `module` (file text `text`): target → the first reference seen.
fn refs(module: &str, text: &str, mods: &BTreeMap<String, PathBuf>) -> BTreeMap<String, String> {
    let mut out: BTreeMap<String, String> = BTreeMap::new();
    let mut add = |target: String, why: &str| {
        if target != module && !module.starts_with(&format!("{target}::")) {
            out.entry(target).or_insert_with(|| why.trim().to_string());
        }
    };
    let line_of = |at: usize| {
        let start = text[..at].rfind('\n').map_or(0, |i| i + 1);
        let end = text[at..].find('\n').map_or(text.len(), |i| at + i);
        text[start..end].to_string()
    };
    for (at, _) in text.match_indices("crate::") {
        let after = &text[at + "crate::".len()..];
        if let Some(group) = after.strip_prefix('{') {
            let group = &group[..group.find('}').unwrap_or(group.len())];
            for item in group.split(',') {
                let first = item.trim().split("::").next().unwrap_or("").trim();
                if mods.contains_key(first) {
                    add(first.to_string(), &line_of(at));
                }
            }
            continue;
        }
        let parts = path_after(after);
        for k in (1..=parts.len()).rev() {
            let candidate = parts[..k].join("::");
            if mods.contains_key(&candidate) {
                add(candidate, &line_of(at));
                break;
            }
        }
    }
    let parent = module.rsplit_once("::").map_or("", |(p, _)| p);
    for (at, _) in text.match_indices("super::") {
        let name = path_after(&text[at + "super::".len()..]);
        let Some(first) = name.first() else { continue };
        let target = if parent.is_empty() {
            first.to_string()
        } else {
            format!("{parent}::{first}")
        };
        if mods.contains_key(&target) {
            add(target, &line_of(at));
        }
    }
    out
}

type Graph = BTreeMap<String, BTreeMap<String, String>>;

fn graph() -> Graph {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mods = modules(&src);
    mods.iter()
        .map(|(m, p)| {
            let text = code(&std::fs::read_to_string(p).unwrap());
            (m.clone(), refs(m, &text, &mods))
        })
        .collect()
}

/// Strongly connected components with more than one file (Tarjan).
fn circles(g: &Graph) -> Vec<Vec<String>> {
    struct T<'a> {
        g: &'a Graph,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on: BTreeSet<&'a str>,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(t: &mut T<'a>, v: &'a str) {
        let i = t.index.len();
        t.index.insert(v, i);
        t.low.insert(v, i);
        t.stack.push(v);
        t.on.insert(v);
        let g = t.g;
        for w in g.get(v).into_iter().flat_map(|e| e.keys()) {
            let w = w.as_str();
            if !g.contains_key(w) {
                continue;
            }
            if !t.index.contains_key(w) {
                visit(t, w);
                let l = t.low[v].min(t.low[w]);
                t.low.insert(v, l);
            } else if t.on.contains(w) {
                let l = t.low[v].min(t.index[w]);
                t.low.insert(v, l);
            }
        }
        if t.low[v] == t.index[v] {
            let mut c = Vec::new();
            loop {
                let w = t.stack.pop().unwrap();
                t.on.remove(w);
                c.push(w.to_string());
                if w == v {
                    break;
                }
            }
            if c.len() > 1 {
                c.sort();
                t.out.push(c);
            }
        }
    }
    let mut t = T {
        g,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in g.keys() {
        if !t.index.contains_key(v.as_str()) {
            visit(&mut t, v);
        }
    }
    t.out
}

/// One concrete loop inside a component, each edge with the line behind it.
fn one_loop(g: &Graph, scc: &[String]) -> Vec<String> {
    let inside: BTreeSet<&str> = scc.iter().map(|s| s.as_str()).collect();
    let start = scc[0].as_str();
    // Breadth-first from start back to start, staying inside the component.
    let mut prev: BTreeMap<&str, &str> = BTreeMap::new();
    let mut queue = std::collections::VecDeque::from([start]);
    let mut end = None;
    while let Some(v) = queue.pop_front() {
        for w in g[v].keys().map(|w| w.as_str()) {
            if !inside.contains(w) {
                continue;
            }
            if w == start {
                end = Some(v);
                queue.clear();
                break;
            }
            if !prev.contains_key(w) {
                prev.insert(w, v);
                queue.push_back(w);
            }
        }
    }
    let mut path = vec![start];
    let mut v = end.unwrap();
    while v != start {
        path.push(v);
        v = prev[v];
    }
    path.push(start);
    path.reverse();
    path.windows(2)
        .map(|w| format!("    {} -> {}   ({})", w[0], w[1], g[w[0]][w[1]]))
        .collect()
}

#[test]
fn no_file_imports_itself_through_others() {
    let g = graph();
    let found = circles(&g);
    let mut msg = String::new();
    for c in &found {
        msg += &format!(
            "\nimport circle between {} files: {}\n",
            c.len(),
            c.join(", ")
        );
        msg += &one_loop(&g, c).join("\n");
        msg += "\n";
    }
    assert!(
        found.is_empty(),
        "{msg}\nbreak each circle by moving what both sides share into a lower file"
    );
}

/// Floors 1–2 of style.md, and the small shared files beside them.
const LOW_FLOORS: &[&str] = &[
    "paths",
    "context",
    "hooktools",
    "wal",
    "diff",
    "failpoint",
    "render",
    "layout",
    "etcd",
    "service",
    "tls",
    "durable",
    "stamp",
    "aside",
    "addr",
    "restart",
    "space",
];

/// What floors 1–2 never import: the charm's error and everything above.
const ABOVE: &[&str] = &["error", "charm", "migrate", "rolling", "agent", "sim"];

fn top(m: &str) -> &str {
    m.split("::").next().unwrap()
}

fn is_low(m: &str) -> bool {
    let t = top(m);
    LOW_FLOORS
        .iter()
        .any(|f| t == *f || (matches!(*f, "service" | "tls") && t.starts_with(f)))
}

#[test]
fn floors_import_only_from_below() {
    let g = graph();
    let mut bad = Vec::new();
    for (m, edges) in &g {
        for (to, why) in edges {
            let (from_top, to_top) = (top(m), top(to));
            let why_bad = if is_low(m) && ABOVE.contains(&to_top) {
                Some("floors 1-2 import nothing above them")
            } else if to_top == "sim" && from_top != "sim" {
                Some("only jujusim (src/sim, src/bin) uses the simulator")
            } else if from_top == "sim" && matches!(to_top, "etcd" | "charm") {
                Some("the simulator knows Juju, never etcd")
            } else {
                None
            };
            if let Some(rule) = why_bad {
                bad.push(format!("    {m} -> {to}: {rule}   ({why})"));
            }
        }
    }
    assert!(bad.is_empty(), "\nlayout broken:\n{}\n", bad.join("\n"));
}

#[test]
fn the_graph_sees_references() {
    // A guard that sees nothing passes everything: the graph must know
    // edges every version of the charm has.
    let g = graph();
    for (from, to) in [
        ("charm::plan", "charm::steps"),
        ("charm::apply", "charm::steps"),
        ("migrate::apply", "migrate::fsops"),
        ("layout", "paths"),
        ("storage", "error"),
    ] {
        assert!(
            g.get(from).is_some_and(|e| e.contains_key(to)),
            "{from} -> {to} not seen; edges of {from}: {:?}",
            g.get(from).map(|e| e.keys().collect::<Vec<_>>())
        );
    }
    assert!(g.len() > 100, "only {} files found", g.len());
}
