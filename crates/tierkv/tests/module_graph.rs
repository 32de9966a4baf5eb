//! The engine's modules form a house whose arrows point down the data flow (public API ->
//! db -> compaction, version, hot, cache -> sst, wal -> env; docs/ARCHITECTURE.md): no
//! top-level module of `src/` may reach, through `crate::` paths, a module that reaches it
//! back. The test reads the sources (not the compiled crate), so a new circle fails here with
//! the modules named, before a reader has to find it.
//!
//! Test code (`tests.rs` files and a trailing `#[cfg(test)] mod tests`) is left out: tests
//! may use whatever they check against.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn src_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The library code of a file: comment lines and a trailing test module removed.
fn code_of(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let mut code = String::new();
    for (i, line) in lines.iter().enumerate() {
        let t = line.trim_start();
        if t.starts_with("#[cfg(test)]")
            && lines
                .get(i + 1)
                .is_some_and(|n| n.trim_start().starts_with("mod "))
        {
            break;
        }
        if t.starts_with("//") {
            continue;
        }
        code.push_str(line);
        code.push('\n');
    }
    code
}

fn ident_at(s: &str) -> &str {
    let end = s
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(s.len());
    &s[..end]
}

/// The first path segment of every `crate::` path in `code`, including each item of a
/// `crate::{a, b::c}` group.
fn crate_paths(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(i) = rest.find("crate::") {
        let after = &rest[i + "crate::".len()..];
        if let Some(group) = after.strip_prefix('{') {
            let mut depth = 1;
            let mut item_start = true;
            for (j, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' => {
                        depth -= 1;
                        if depth == 0 {
                            break;
                        }
                    }
                    ',' if depth == 1 => {
                        item_start = true;
                        continue;
                    }
                    c if c.is_whitespace() => continue,
                    _ => {}
                }
                if item_start && depth == 1 {
                    let id = ident_at(&group[j..]);
                    if !id.is_empty() {
                        out.push(id.to_string());
                    }
                    item_start = false;
                }
            }
        } else {
            let id = ident_at(after);
            if !id.is_empty() {
                out.push(id.to_string());
            }
        }
        rest = after;
    }
    out
}

/// Names the crate root re-exports (`pub use module::...`), mapped to their module.
fn root_reexports(modules: &BTreeSet<String>) -> BTreeMap<String, String> {
    let lib = code_of(&src_dir().join("lib.rs"));
    let mut map = BTreeMap::new();
    for stmt in lib.split(';') {
        let Some(body) = stmt.trim().strip_prefix("pub use ") else {
            continue;
        };
        let module = ident_at(body).to_string();
        if !modules.contains(&module) {
            continue;
        }
        let tail = match (body.find('{'), body.rfind('}')) {
            (Some(a), Some(b)) => &body[a + 1..b],
            _ => body.rsplit("::").next().unwrap_or(""),
        };
        for name in tail.split(',') {
            let name = name.trim().rsplit("::").next().unwrap_or("").trim();
            let name = name.rsplit(" as ").next().unwrap_or(name).trim();
            if !name.is_empty() {
                map.insert(name.to_string(), module.clone());
            }
        }
    }
    map
}

/// Edges between top-level modules: `from -> {to}`.
fn module_graph() -> BTreeMap<String, BTreeSet<String>> {
    let src = src_dir();
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let module_of = |path: &Path| -> Option<String> {
        let rel = path.strip_prefix(&src).ok()?;
        let first = rel.components().next()?.as_os_str().to_str()?;
        let name = first.strip_suffix(".rs").unwrap_or(first);
        (name != "lib").then(|| name.to_string())
    };
    let modules: BTreeSet<String> = files.iter().filter_map(|p| module_of(p)).collect();
    let reexports = root_reexports(&modules);
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for path in &files {
        let Some(from) = module_of(path) else {
            continue;
        };
        if path.file_name().is_some_and(|n| n == "tests.rs") {
            continue;
        }
        let edges = graph.entry(from.clone()).or_default();
        for seg in crate_paths(&code_of(path)) {
            let to = if modules.contains(&seg) {
                Some(seg)
            } else {
                reexports.get(&seg).cloned()
            };
            if let Some(to) = to.filter(|t| *t != from) {
                edges.insert(to);
            }
        }
    }
    graph
}

/// A cycle of the graph, if it has one, as the modules along it.
fn find_cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<String, u8>,
        stack: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        state.insert(node.to_string(), 1);
        stack.push(node.to_string());
        for next in graph.get(node).into_iter().flatten() {
            match state.get(next.as_str()).copied().unwrap_or(0) {
                1 => {
                    let start = stack.iter().position(|n| n == next).unwrap();
                    let mut cycle = stack[start..].to_vec();
                    cycle.push(next.clone());
                    return Some(cycle);
                }
                0 => {
                    if let Some(c) = visit(next, graph, state, stack) {
                        return Some(c);
                    }
                }
                _ => {}
            }
        }
        stack.pop();
        state.insert(node.to_string(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for node in graph.keys() {
        if state.get(node.as_str()).copied().unwrap_or(0) == 0 {
            if let Some(c) = visit(node, graph, &mut state, &mut Vec::new()) {
                return Some(c);
            }
        }
    }
    None
}

#[test]
fn parser_reads_single_and_grouped_paths() {
    let code = "use crate::key::SeqNo;\nuse crate::{Error, sst::{Table, block::Block}};\nlet x = crate::env::Tier::Fast;";
    assert_eq!(crate_paths(code), ["key", "Error", "sst", "env"]);
    let mut g = BTreeMap::new();
    g.insert("a".to_string(), BTreeSet::from(["b".to_string()]));
    g.insert("b".to_string(), BTreeSet::from(["a".to_string()]));
    assert_eq!(find_cycle(&g).unwrap(), ["a", "b", "a"]);
}

/// The house has no circle between top-level engine modules (docs/ARCHITECTURE.md).
#[test]
fn top_level_modules_import_without_cycles() {
    let graph = module_graph();
    assert!(graph.contains_key("db") && graph["db"].contains("version"));
    if let Some(cycle) = find_cycle(&graph) {
        let listing: Vec<String> = graph
            .iter()
            .map(|(from, to)| format!("  {from} -> {to:?}"))
            .collect();
        panic!(
            "modules import each other in a circle: {}\nthe graph:\n{}",
            cycle.join(" -> "),
            listing.join("\n")
        );
    }
}
