//! The workspace's crates are houses whose arrows point one way: no top-level module of a
//! crate's `src/` may reach, through `crate::` paths, a module that reaches it back, and no
//! file of a folder module may reach a sibling file that reaches it back (`super::` or the
//! folder's full path; the folder's `mod.rs` is its front door and is not counted). For the
//! engine that is the data flow (public API -> db -> compaction, version, hot, cache -> sst,
//! wal -> env; docs/ARCHITECTURE.md); for the bench, plain names -> runs -> reports.
//!
//! The engine's modules also stand on floors (`ENGINE_FLOORS`, bottom first): a module may
//! import only modules on lower floors, and nothing imports through the crate root's
//! re-exports (`crate::Error` is `crate::error::Error` seen from the top floor, which every
//! module is below).
//!
//! Reads the sources (not the compiled crates), drops comments, string literals, `tests.rs`
//! files and `#[cfg(test)] mod` blocks (a test may build its fixtures from any module),
//! collects every `crate::<module>` path (including `use crate::{a, b}` groups and names the
//! crate root re-exports) per top-level module, and fails with the circle it finds, so a new
//! circle is named here before a reader has to find it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

type Graph = BTreeMap<String, BTreeSet<String>>;

/// The source with comments and the contents of string and char literals blanked out, so
/// that neither a doc link like [`crate::scale`] nor a brace inside a string counts.
fn strip_comments_and_literals(src: &str) -> String {
    let b = src.as_bytes();
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c == b'/' && b.get(i + 1) == Some(&b'/') {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if c == b'/' && b.get(i + 1) == Some(&b'*') {
            let mut depth = 0;
            while i < b.len() {
                if b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
                    depth += 1;
                    i += 2;
                } else if b[i] == b'*' && b.get(i + 1) == Some(&b'/') {
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
        } else if c == b'r'
            && matches!(b.get(i + 1), Some(b'"') | Some(b'#'))
            && !ident_before(b, i)
        {
            // Raw string r"..." or r#"..."#.
            let mut j = i + 1;
            let mut hashes = 0;
            while b.get(j) == Some(&b'#') {
                hashes += 1;
                j += 1;
            }
            if b.get(j) != Some(&b'"') {
                out.push(c as char);
                i += 1;
                continue;
            }
            j += 1;
            loop {
                if j >= b.len() {
                    break;
                }
                if b[j] == b'"' && (0..hashes).all(|h| b.get(j + 1 + h) == Some(&b'#')) {
                    j += 1 + hashes;
                    break;
                }
                j += 1;
            }
            out.push_str("\"\"");
            i = j;
        } else if c == b'"' {
            i += 1;
            while i < b.len() && b[i] != b'"' {
                if b[i] == b'\\' {
                    i += 1;
                }
                i += 1;
            }
            i += 1;
            out.push_str("\"\"");
        } else if c == b'\'' {
            // A char literal ('x', '\n', '\u{..}') or a lifetime ('a), which stays.
            if b.get(i + 1) == Some(&b'\\') {
                let mut j = i + 2;
                while j < b.len() && b[j] != b'\'' {
                    j += 1;
                }
                i = j + 1;
                out.push_str("' '");
            } else if let Some(len) = src[i + 1..].chars().next().map(char::len_utf8) {
                if b.get(i + 1 + len) == Some(&b'\'') {
                    i += len + 2;
                    out.push_str("' '");
                } else {
                    out.push('\'');
                    i += 1;
                }
            } else {
                i += 1;
            }
        } else {
            let len = src[i..].chars().next().map_or(1, char::len_utf8);
            out.push_str(&src[i..i + len]);
            i += len;
        }
    }
    out
}

fn ident_before(b: &[u8], i: usize) -> bool {
    i > 0 && (b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_')
}

/// Removes every `#[cfg(test)]` module (`mod name { ... }`) from stripped source.
fn drop_test_modules(code: &str) -> String {
    let mut out = code.to_string();
    while let Some(at) = out.find("#[cfg(test)]") {
        let rest = &out[at + "#[cfg(test)]".len()..];
        let trimmed = rest.trim_start();
        let is_mod = ["mod ", "pub mod ", "pub(crate) mod "]
            .iter()
            .any(|p| trimmed.starts_with(p));
        let end = match (is_mod, trimmed.find(['{', ';'])) {
            (true, Some(k)) if trimmed.as_bytes()[k] == b'{' => {
                let open = out.len() - trimmed.len() + k;
                let mut depth = 0usize;
                let mut end = out.len();
                for (j, ch) in out[open..].char_indices() {
                    match ch {
                        '{' => depth += 1,
                        '}' => {
                            depth -= 1;
                            if depth == 0 {
                                end = open + j + 1;
                                break;
                            }
                        }
                        _ => {}
                    }
                }
                end
            }
            // Not a module: drop only the attribute, keep scanning after it.
            _ => at + "#[cfg(test)]".len(),
        };
        let keep = if is_mod { "" } else { " " };
        out.replace_range(at..end, keep);
    }
    out
}

fn ident_at(s: &str) -> &str {
    let end = s
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(s.len());
    &s[..end]
}

/// The first path segment of every `crate::` path in `code`, `crate::{a::X, b}` giving
/// `a` and `b`.
fn crate_paths(code: &str) -> Vec<String> {
    paths_after(code, "crate::")
}

/// The segment after `prefix` (a path ending in `::`) wherever the path starts with it,
/// `prefix{a::X, b}` giving `a` and `b`. A match inside a longer path (`x::super::`) does
/// not count.
fn paths_after(code: &str, prefix: &str) -> Vec<String> {
    let mut found = Vec::new();
    for (at, _) in code.match_indices(prefix) {
        if at > 0 && {
            let p = code.as_bytes()[at - 1];
            p.is_ascii_alphanumeric() || p == b'_' || p == b'$' || p == b':'
        } {
            continue;
        }
        let rest = code[at + prefix.len()..].trim_start();
        if let Some(group) = rest.strip_prefix('{') {
            // Top-level items of the group, nested groups skipped by depth.
            let mut depth = 0usize;
            let mut start = true;
            for (j, ch) in group.char_indices() {
                match ch {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => start = true,
                    c if start && !c.is_whitespace() => {
                        start = false;
                        let id = ident_at(&group[j..]);
                        if !id.is_empty() {
                            found.push(id.to_string());
                        }
                    }
                    _ => {}
                }
            }
        } else {
            let id = ident_at(rest);
            if !id.is_empty() {
                found.push(id.to_string());
            }
        }
    }
    found
}

/// Names a module file imports or re-exports from its child modules (`pub use
/// module::{A, B};`, also `use` and `pub(crate) use`), mapped to that module: children see
/// them as `super::A`, the crate as `crate::A`.
fn root_reexports(lib: &str) -> BTreeMap<String, String> {
    let mut map = BTreeMap::new();
    for stmt in lib.split(';') {
        let stmt = stmt.trim();
        let Some(path) = ["pub use ", "pub(crate) use ", "pub(super) use ", "use "]
            .iter()
            .find_map(|p| stmt.strip_prefix(p))
        else {
            continue;
        };
        let path = path.trim().trim_start_matches("crate::");
        let Some((module, items)) = path.split_once("::") else {
            continue;
        };
        let items = items.trim().trim_start_matches('{').trim_end_matches('}');
        for item in items.split(',') {
            let item = item.trim();
            let name = item.rsplit(" as ").next().unwrap_or(item).trim();
            if !name.is_empty() {
                map.insert(name.to_string(), module.trim().to_string());
            }
        }
    }
    map
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The name `module_graph` gives an import through the crate root's re-exports.
const ROOT: &str = "(crate root)";

/// Module -> modules it references, for the crate whose sources are in `src`; a name the
/// crate root re-exports counts as an import of its module.
fn module_graph(src: &Path) -> Graph {
    module_graph_with(src, false)
}

/// `module_graph`, with `root_as_node` naming imports through the root's re-exports
/// [`ROOT`] instead of the module they come from.
fn module_graph_with(src: &Path, root_as_node: bool) -> Graph {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let module_of = |p: &Path| -> Option<String> {
        let rel = p.strip_prefix(src).ok()?;
        let first = rel.components().next()?.as_os_str().to_str()?.to_string();
        match first.as_str() {
            "lib.rs" | "main.rs" => None,
            f => Some(f.trim_end_matches(".rs").to_string()),
        }
    };
    let modules: BTreeSet<String> = files.iter().filter_map(|p| module_of(p)).collect();
    let lib = std::fs::read_to_string(src.join("lib.rs")).expect("src/lib.rs");
    let reexports = root_reexports(&strip_comments_and_literals(&lib));
    let mut graph: Graph = modules
        .iter()
        .map(|m| (m.clone(), BTreeSet::new()))
        .collect();
    for f in &files {
        let Some(from) = module_of(f) else { continue };
        if f.file_name().is_some_and(|n| n == "tests.rs") {
            continue;
        }
        let text = std::fs::read_to_string(f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        let code = drop_test_modules(&strip_comments_and_literals(&text));
        let mut targets = crate_paths(&code);
        // In a top-level module file `super::` is the crate root.
        if f.parent() == Some(src) {
            for (at, _) in code.match_indices("super::") {
                targets.push(ident_at(&code[at + "super::".len()..]).to_string());
            }
        }
        for t in targets {
            let to = if modules.contains(&t) {
                t
            } else if let Some(m) = reexports.get(&t) {
                if root_as_node {
                    ROOT.to_string()
                } else {
                    m.clone()
                }
            } else {
                continue;
            };
            if to != from {
                graph.entry(from.clone()).or_default().insert(to);
            }
        }
    }
    graph
}

/// The engine's floors, bottom first (docs/ARCHITECTURE.md, "Engine modules"): each module
/// imports only modules on floors below its own. Leaves (errors, encodings, options) at the
/// bottom, then files and formats, then the in-memory and on-disk structures, then the
/// policies and jobs over them, then the database that drives them.
const ENGINE_FLOORS: &[&[&str]] = &[
    &["error", "coding", "mem_filter", "merge"],
    &["key", "env", "memory"],
    &["expiry"],
    &["options"],
    &["wal", "batch", "iter", "tiers"],
    &["sst"],
    &["memtable", "cache", "record_cache"],
    &["hot"],
    &["version"],
    &["compaction"],
    &["db"],
    &["fuzz_hooks", "testing"],
];

/// Every import that does not point to a lower floor (`floors` bottom first), as
/// `from -> to`; a module on no floor is reported too, so a new module must be placed.
fn floor_violations(graph: &Graph, floors: &[&[&str]]) -> Vec<String> {
    let floor_of = |m: &str| floors.iter().position(|f| f.contains(&m));
    let mut bad = Vec::new();
    for (from, targets) in graph {
        let Some(here) = floor_of(from) else {
            bad.push(format!("{from} is on no floor"));
            continue;
        };
        for to in targets {
            match floor_of(to) {
                Some(there) if there < here => {}
                Some(_) => bad.push(format!("{from} -> {to} (not a lower floor)")),
                None => bad.push(format!("{from} -> {to} (above every floor)")),
            }
        }
    }
    bad
}

/// The files (and sub-folders) of one folder module -> the siblings they reference, through
/// `super::x` in a file of the folder or `crate::<folder path>::x` anywhere below it
/// (including names the folder's `mod.rs` imports from a sibling). `mod.rs` itself is the
/// folder's front door, not a sibling: it may use its children and they may use it.
fn sibling_graph(src: &Path, dir: &Path) -> Graph {
    let modpath: Vec<String> = dir
        .strip_prefix(src)
        .expect("a folder below src")
        .components()
        .filter_map(|c| c.as_os_str().to_str().map(str::to_string))
        .collect();
    let full_prefix = format!("crate::{}::", modpath.join("::"));
    let mut nodes: BTreeMap<String, Vec<PathBuf>> = BTreeMap::new();
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let p = entry.expect("directory entry").path();
        let name = p
            .file_stem()
            .and_then(|n| n.to_str())
            .unwrap_or("")
            .to_string();
        if p.is_dir() {
            let mut files = Vec::new();
            rust_files(&p, &mut files);
            nodes.insert(name, files);
        } else if p.extension().is_some_and(|x| x == "rs") && name != "mod" && name != "tests" {
            nodes.insert(name, vec![p]);
        }
    }
    let front = std::fs::read_to_string(dir.join("mod.rs")).unwrap_or_default();
    let imported = root_reexports(&strip_comments_and_literals(&front));
    let mut graph: Graph = nodes.keys().map(|n| (n.clone(), BTreeSet::new())).collect();
    for (from, files) in &nodes {
        for f in files {
            if f.file_name().is_some_and(|n| n == "tests.rs") {
                continue;
            }
            let text =
                std::fs::read_to_string(f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
            let code = drop_test_modules(&strip_comments_and_literals(&text));
            let mut targets = paths_after(&code, &full_prefix);
            if f.parent() == Some(dir) {
                targets.extend(paths_after(&code, "super::"));
            }
            for t in targets {
                let to = if nodes.contains_key(&t) {
                    t
                } else if let Some(m) = imported.get(&t).filter(|m| nodes.contains_key(*m)) {
                    m.clone()
                } else {
                    continue;
                };
                if &to != from {
                    graph.entry(from.clone()).or_default().insert(to);
                }
            }
        }
    }
    graph
}

/// Every folder below `src` (recursively): the sibling graph of each has no circle.
fn check_sibling_files(name: &str, src: &Path) {
    let mut dirs = vec![src.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let p = entry.expect("directory entry").path();
            if p.is_dir() {
                let graph = sibling_graph(src, &p);
                if let Some(cycle) = find_cycle(&graph) {
                    panic!(
                        "files of {name}'s {} import each other in a circle: {}\nfull graph:\n{}",
                        p.strip_prefix(src).unwrap_or(&p).display(),
                        cycle.join(" -> "),
                        render(&graph)
                    );
                }
                dirs.push(p);
            }
        }
    }
}

/// A circle of the graph as `a -> b -> ... -> a`, if there is one.
fn find_cycle(graph: &Graph) -> Option<Vec<String>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        New,
        OnPath,
        Done,
    }
    fn visit(
        g: &Graph,
        n: &str,
        marks: &mut BTreeMap<String, Mark>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        marks.insert(n.to_string(), Mark::OnPath);
        path.push(n.to_string());
        for next in g.get(n).into_iter().flatten() {
            match marks.get(next.as_str()).copied().unwrap_or(Mark::New) {
                Mark::OnPath => {
                    let start = path.iter().position(|p| p == next).unwrap_or(0);
                    let mut cycle = path[start..].to_vec();
                    cycle.push(next.clone());
                    return Some(cycle);
                }
                Mark::New => {
                    if let Some(c) = visit(g, next, marks, path) {
                        return Some(c);
                    }
                }
                Mark::Done => {}
            }
        }
        path.pop();
        marks.insert(n.to_string(), Mark::Done);
        None
    }
    let mut marks = BTreeMap::new();
    for n in graph.keys() {
        if marks.get(n.as_str()).copied().unwrap_or(Mark::New) == Mark::New {
            if let Some(c) = visit(graph, n, &mut marks, &mut Vec::new()) {
                return Some(c);
            }
        }
    }
    None
}

fn render(graph: &Graph) -> String {
    graph
        .iter()
        .map(|(m, to)| {
            let to: Vec<&str> = to.iter().map(String::as_str).collect();
            format!("  {m} -> {}\n", to.join(", "))
        })
        .collect()
}

/// The graph of the crate `crates/<name>`, after checking the scan saw `module`'s imports
/// (an empty graph would pass), or the circle it holds.
fn check_crate(name: &str, module: &str, min_imports: usize) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(name)
        .join("src");
    let graph = module_graph(&src);
    assert!(
        graph.get(module).is_some_and(|to| to.len() >= min_imports),
        "{name}: the imports of `{module}` were not found:\n{}",
        render(&graph)
    );
    if let Some(cycle) = find_cycle(&graph) {
        panic!(
            "modules of {name} import each other in a circle: {}\nfull graph:\n{}",
            cycle.join(" -> "),
            render(&graph)
        );
    }
    check_sibling_files(name, &src);
}

/// The engine's house has no circle between its top-level modules (docs/ARCHITECTURE.md).
#[test]
fn engine_modules_form_no_circle() {
    check_crate("tierkv", "db", 8);
}

/// Every engine import points down a floor; none goes through the crate root.
#[test]
fn engine_imports_point_down_the_floors() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let graph = module_graph_with(&src, true);
    assert!(
        graph.get("db").is_some_and(|to| to.len() >= 8),
        "the imports of `db` were not found:\n{}",
        render(&graph)
    );
    let bad = floor_violations(&graph, ENGINE_FLOORS);
    assert!(
        bad.is_empty(),
        "imports that do not point down a floor:\n  {}\nfull graph:\n{}",
        bad.join("\n  "),
        render(&graph)
    );
}

/// The floor check itself: an import of a lower floor passes; one of the same floor, of a
/// higher floor, through the crate root, or from a module on no floor is reported.
#[test]
fn the_floor_check_finds_planted_upward_imports() {
    let floors: &[&[&str]] = &[&["a", "b"], &["c"]];
    let graph = |edges: &[(&str, &str)]| -> Graph {
        let mut g = Graph::new();
        for (from, to) in edges {
            g.entry(from.to_string())
                .or_default()
                .insert(to.to_string());
        }
        g
    };
    assert!(floor_violations(&graph(&[("c", "a"), ("c", "b")]), floors).is_empty());
    assert_eq!(floor_violations(&graph(&[("a", "c")]), floors).len(), 1);
    assert_eq!(floor_violations(&graph(&[("a", "b")]), floors).len(), 1);
    assert_eq!(floor_violations(&graph(&[("c", ROOT)]), floors).len(), 1);
    assert_eq!(floor_violations(&graph(&[("d", "a")]), floors).len(), 1);

    // Through the scanner: `crate::Thing`, re-exported by the root, is an import of ROOT.
    let dir = tempfile::tempdir().expect("tempdir");
    let src = dir.path();
    std::fs::write(src.join("lib.rs"), "mod a; mod c; pub use a::Thing;").expect("write");
    std::fs::write(src.join("a.rs"), "pub struct Thing;").expect("write");
    std::fs::write(src.join("c.rs"), "fn f() -> crate::Thing { todo!() }").expect("write");
    let g = module_graph_with(src, true);
    assert_eq!(g["c"].iter().collect::<Vec<_>>(), [ROOT]);
    assert_eq!(floor_violations(&g, floors).len(), 1);
}

/// Nor has the bench's.
#[test]
fn bench_modules_form_no_circle() {
    check_crate("tierkv-bench", "runner", 5);
}

/// Nor has the server's (commands -> state, info -> resp, never back).
#[test]
fn server_modules_form_no_circle() {
    check_crate("tierkv-server", "commands", 3);
}

/// The scanner itself: it finds `use` lists, grouped imports, root re-exports and
/// `super::` in a top-level file, ignores comments, strings and test modules, and reports a
/// circle it is given.
#[test]
fn the_scan_finds_a_planted_circle() {
    let dir = tempfile::tempdir().expect("tempdir");
    let src = dir.path();
    std::fs::write(
        src.join("lib.rs"),
        "mod a; mod b; mod c; mod d; pub use d::{Thing, Other as O};",
    )
    .expect("write");
    std::fs::write(
        src.join("a.rs"),
        "//! Links to [`crate::d`] do not count.\nuse crate::{b::X, c};\n\
         fn f() { let s = \"crate::d\"; let c = '{'; }\n\
         #[cfg(test)]\nmod tests { use crate::d::Y; fn g() { let _ = \"}\"; } }\n",
    )
    .expect("write");
    std::fs::write(src.join("b.rs"), "use super::c::Z;\n").expect("write");
    std::fs::write(src.join("c.rs"), "fn f() -> crate::Thing { todo!() }\n").expect("write");
    std::fs::write(src.join("d.rs"), "").expect("write");
    let graph = module_graph(src);
    let edges = |m: &str| graph[m].iter().cloned().collect::<Vec<_>>();
    assert_eq!(edges("a"), ["b", "c"]);
    assert_eq!(edges("b"), ["c"]);
    assert_eq!(edges("c"), ["d"]);
    assert!(find_cycle(&graph).is_none(), "{}", render(&graph));

    std::fs::write(src.join("d.rs"), "use crate::a::W;\n").expect("write");
    let graph = module_graph(src);
    let cycle = find_cycle(&graph).expect("the planted circle");
    assert_eq!(cycle.first(), cycle.last());
    assert!(cycle.len() >= 4, "{cycle:?}");
    assert!(cycle.contains(&"d".to_string()), "{cycle:?}");
}

/// The sibling scan: two files of one folder that import each other through `super::`
/// (directly or through a name the folder's mod.rs imports) are a circle; a child using its
/// mod.rs and mod.rs using the child are not.
#[test]
fn the_scan_finds_a_planted_circle_between_sibling_files() {
    let dir = tempfile::tempdir().expect("tempdir");
    let src = dir.path();
    let cache = src.join("cache");
    std::fs::create_dir(&cache).expect("mkdir");
    std::fs::write(src.join("lib.rs"), "mod cache;").expect("write");
    std::fs::write(
        cache.join("mod.rs"),
        "mod a; mod b; pub use b::Shard; pub struct Shared; fn f() { a::g(); }",
    )
    .expect("write");
    std::fs::write(cache.join("a.rs"), "use super::{Shared, Shard};\n").expect("write");
    std::fs::write(cache.join("b.rs"), "use super::Shared;\n").expect("write");
    let graph = sibling_graph(src, &cache);
    assert_eq!(graph["a"].iter().collect::<Vec<_>>(), ["b"]);
    assert!(graph["b"].is_empty(), "{}", render(&graph));
    assert!(find_cycle(&graph).is_none());

    std::fs::write(cache.join("b.rs"), "fn h() { crate::cache::a::g(); }\n").expect("write");
    let graph = sibling_graph(src, &cache);
    let cycle = find_cycle(&graph).expect("the planted circle");
    assert_eq!(cycle.first(), cycle.last());
}
