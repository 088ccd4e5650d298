//! The docs' pointers held to the docs: every `docs/NAME.md, "Section"` and
//! `docs/NAME.md#anchor` that the code, the scripts, the tests and the docs write finds
//! its page and its section.

use super::{anchors, heading_words, prose, root, slug};
use std::path::{Path, PathBuf};

/// The files of the repository a pointer to a doc may sit in: the top's and, under the
/// folders that hold code, scripts, configuration and docs, every text file (not what a
/// build or a package manager left there).
fn sources() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if path.is_dir() {
                if !["target", "node_modules", "__pycache__", "dist"].contains(&name.as_str()) {
                    walk(&path, out);
                }
            } else {
                out.push(path);
            }
        }
    }
    let mut files = Vec::new();
    for dir in [
        "src", "tests", "benches", "contrib", "scripts", "examples", "packages", ".ci", ".cargo",
        "docs",
    ] {
        walk(&root().join(dir), &mut files);
    }
    for top in [
        "Cargo.toml",
        "plants.sql",
        "README.md",
        "ARCHITECTURE.md",
        "CHANGELOG.md",
    ] {
        files.push(root().join(top));
    }
    files.sort();
    files
}

/// The pointers to a doc's section a text holds, as code comments, help texts and
/// messages write them: `docs/NAME.md, "Section"` (or `NAME.md, "Section"` in a doc, a
/// link's `](NAME.md), "Section"`, a string's `\"Section\"`; or `NAME.md#anchor`, as
/// `#anchor`), each as the page's path from the repository's top and the section's
/// words (a pointer that runs on over a comment's next line is joined, without the
/// comment's marks).
fn pointers(text: &str) -> Vec<(String, String)> {
    let mut found = Vec::new();
    for (at, _) in text.match_indices(".md") {
        let name_start = text[..at]
            .rfind(|c: char| !(c.is_ascii_alphanumeric() || "_-./".contains(c)))
            .map_or(0, |i| i + 1);
        let name = text[name_start..at]
            .trim_start_matches("../")
            .trim_start_matches("docs/");
        if name.is_empty() || name.contains('/') {
            continue;
        }
        let page = if ["README", "ARCHITECTURE", "CHANGELOG"].contains(&name) {
            format!("{name}.md")
        } else {
            format!("docs/{name}.md")
        };
        let rest = &text[at + 3..];
        // `docs/NAME.md#anchor`, as `#anchor`.
        if let Some(anchor) = rest.strip_prefix('#') {
            let end = anchor
                .find(|c: char| !(c.is_alphanumeric() || c == '-' || c == '_'))
                .unwrap_or(anchor.len());
            found.push((page, format!("#{}", &anchor[..end])));
            continue;
        }
        let rest = rest.strip_prefix(')').unwrap_or(rest);
        // `, "`, or a comma at a line's end and the section on the next, after its
        // comment's marks.
        let Some(rest) = rest.strip_prefix(',') else {
            continue;
        };
        let gap = rest
            .find(|c: char| !(c.is_whitespace() || "/!#*-".contains(c)))
            .unwrap_or(rest.len());
        if !rest.starts_with(char::is_whitespace) {
            continue;
        }
        let rest = &rest[gap..];
        let Some(rest) = rest.strip_prefix("\\\"").or_else(|| rest.strip_prefix('"')) else {
            continue;
        };
        let Some(end) = rest.find(['"', '\\']) else {
            continue;
        };
        let section: Vec<&str> = rest[..end]
            .lines()
            .map(|l| {
                l.trim()
                    .trim_start_matches(['/', '!', '#', '-', '*'])
                    .trim()
            })
            .collect();
        found.push((page, section.join(" ")));
    }
    found
}

/// Every pointer of the code, the scripts, the tests and the docs to a doc's section
/// (`docs/NAME.md, "Section"`) finds its page and a heading of it that is the section or
/// begins with it (`"Faults"` finds `Faults: /_control/faults`), or an anchor the
/// section's words make (`<a id="connections"></a>**Connections**`): a section renamed or
/// moved breaks this test, not the reader who follows a comment or an error message.
#[test]
fn every_pointer_to_a_doc_s_section_finds_it() {
    let mut broken = Vec::new();
    let mut checked = 0;
    for file in sources() {
        // This file's pointers are examples.
        if file.ends_with("tests/it/docs/pointers.rs") {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(&file) else {
            continue;
        };
        for (page, section) in pointers(&text) {
            checked += 1;
            let where_ = file.strip_prefix(root()).unwrap().display().to_string();
            let Ok(doc) = std::fs::read_to_string(root().join(&page)) else {
                broken.push(format!("{where_}: {page}, \"{section}\": no such page"));
                continue;
            };
            let found = if let Some(anchor) = section.strip_prefix('#') {
                anchors(&doc).contains(anchor)
            } else {
                anchors(&doc).contains(&slug(&section))
                    || prose(&doc).lines().any(|line| {
                        let Some(heading) = line.strip_prefix('#') else {
                            return false;
                        };
                        let words = heading_words(heading.trim_start_matches('#').trim());
                        words.strip_prefix(section.as_str()).is_some_and(|after| {
                            after.is_empty() || !after.starts_with(|c: char| c.is_alphanumeric())
                        })
                    })
            };
            if !found {
                broken.push(format!("{where_}: {page}, \"{section}\": no such section"));
            }
        }
    }
    assert!(
        checked > 20,
        "only {checked} pointers found: the search is broken"
    );
    assert!(
        broken.is_empty(),
        "pointers to no section:\n{}",
        broken.join("\n")
    );
}

#[test]
fn a_pointer_is_read_as_written() {
    let code = "// (docs/testing.md, \"What each control\n// costs\"); x (docs/api.md, \\\"Events\\\") \
                [api.md, \"Errors\"](api.md#errors) [README](../README.md), \"Packages\" \
                \"README.md\", \"x\" (docs/device.md,\n# \"Sizes\") docs/api.md, the \"x\"";
    assert_eq!(
        pointers(code),
        [
            ("docs/testing.md", "What each control costs"),
            ("docs/api.md", "Events"),
            ("docs/api.md", "Errors"),
            ("docs/api.md", "#errors"),
            ("README.md", "Packages"),
            ("docs/device.md", "Sizes"),
        ]
        .map(|(p, s)| (p.to_owned(), s.to_owned()))
    );
}
