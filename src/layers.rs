//! The layers' rule, checked on the source: imports point down (cli → server → config →
//! http → webhooks → api → store → ops) and no module imports, through others, itself.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

const LAYERS: [&str; 8] = [
    "cli", "server", "config", "http", "webhooks", "api", "store", "ops",
];

/// Every module's file (as `http::conn`), and the modules it names as `crate::…`.
fn imports() -> BTreeMap<String, BTreeSet<String>> {
    fn walk(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    walk(&src, &mut files);
    let module = |f: &Path| {
        let rel = f.strip_prefix(&src).unwrap().with_extension("");
        let rel = rel.to_string_lossy().replace('/', "::");
        rel.strip_suffix("::mod").unwrap_or(&rel).to_owned()
    };
    let modules: BTreeSet<String> = files.iter().map(|f| module(f)).collect();
    let mut out = BTreeMap::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        let mut named = BTreeSet::new();
        for (at, _) in text.match_indices("crate::") {
            let path: String = text[at + 7..]
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
                .collect();
            // The longest module that the path names.
            let parts: Vec<&str> = path.split("::").collect();
            if let Some(m) = (1..=parts.len())
                .rev()
                .map(|n| parts[..n].join("::"))
                .find(|m| modules.contains(m))
            {
                named.insert(m);
            }
        }
        let me = module(file);
        // `super::` (outside tests) names the parent; `child::` a module declared here.
        let code = text
            .split("#[cfg(test)]\nmod tests")
            .next()
            .unwrap_or(&text);
        let parent = match me.rsplit_once("::") {
            Some((p, _)) => p.to_owned(),
            None => "main".to_owned(),
        };
        if code.contains("super::") && !me.ends_with("tests") {
            named.insert(parent);
        }
        for line in code.lines() {
            let decl = line.trim_start().trim_start_matches("pub ");
            if let Some(child) = decl.strip_prefix("mod ").and_then(|c| c.strip_suffix(';')) {
                let child_path = format!("{me}::{child}");
                let child_path = child_path.trim_start_matches("main::").to_owned();
                if code.contains(&format!("{child}::")) && modules.contains(&child_path) {
                    named.insert(child_path);
                }
            }
        }
        named.remove(&me);
        out.entry(me).or_insert_with(BTreeSet::new).extend(named);
    }
    out
}

fn layer(module: &str) -> usize {
    let top = module.split("::").next().unwrap();
    LAYERS.iter().position(|l| *l == top).unwrap_or(0)
}

#[test]
fn imports_point_down_the_layers() {
    let mut up = Vec::new();
    for (module, named) in imports() {
        if module == "main" || module.ends_with("tests") {
            continue;
        }
        up.extend(
            named
                .into_iter()
                .filter(|n| layer(n) < layer(&module))
                .map(|n| format!("{module} → {n}")),
        );
    }
    assert!(up.is_empty(), "imports a layer up: {up:?}");
}

#[test]
fn no_module_imports_itself_through_others() {
    let graph = imports();
    let mut circles = Vec::new();
    for start in graph.keys().filter(|m| !m.ends_with("tests")) {
        let mut seen = BTreeSet::new();
        let mut todo: Vec<&String> = graph[start].iter().collect();
        while let Some(m) = todo.pop() {
            if m == start {
                circles.push(start.clone());
                break;
            }
            if seen.insert(m.clone()) {
                todo.extend(graph.get(m).into_iter().flatten());
            }
        }
    }
    assert!(
        circles.is_empty(),
        "modules that import themselves through others: {circles:?}"
    );
}
