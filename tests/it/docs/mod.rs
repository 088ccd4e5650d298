//! The docs held to the code and to themselves: docs/reference.md names every metric
//! family a scrape shows, with its type; every relative link of the docs finds its file
//! and its anchor (and every pointer of the code to a doc's section: `pointers.rs`);
//! every command's `--help` and the reference name the same flags; no guide is over 800
//! lines. (The reference's flags table is checked against the option table by a unit
//! test, `cli::options::tests`.)

mod pointers;

use crate::support::*;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The most lines a guide (README.md, docs/*.md) may have.
const MAX_GUIDE_LINES: usize = 800;

pub(super) fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// README.md, ARCHITECTURE.md, CHANGELOG.md and every docs/*.md.
fn documents() -> Vec<PathBuf> {
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    for top in ["README.md", "ARCHITECTURE.md", "CHANGELOG.md"] {
        docs.push(root().join(top));
    }
    docs
}

pub(super) fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The reference's metrics table: each family and its type.
fn documented_metrics() -> BTreeMap<String, String> {
    let reference = read(&root().join("docs/reference.md"));
    let table = reference
        .split_once("<!-- metrics: tests/it/docs/ checks that this table names every family -->\n")
        .expect("docs/reference.md has its metrics marker")
        .1
        .split("\n\n")
        .next()
        .unwrap();
    table
        .lines()
        .skip(2)
        .map(|row| {
            let cells: Vec<&str> = row.split(" | ").collect();
            let name = cells[0].trim_start_matches("| ").trim_matches('`');
            (name.to_owned(), cells[1].to_owned())
        })
        .collect()
}

/// Every family a scrape of a server on a file shows is in the reference with its type,
/// and (on SQLite, where the file's own families are shown) every family the reference
/// names is in the scrape.
#[test]
fn the_reference_names_every_metric_family_with_its_type() {
    let dir = TempDir::new();
    let s = if on_postgres() {
        TestServer::memory()
    } else {
        TestServer::start(&dir.0.join("p.db"))
    };
    let r = s.send("GET", "/metrics", &[], None);
    assert_eq!(r.status, 200);
    let scraped: BTreeMap<String, String> = r
        .text()
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .map(|l| {
            let (name, kind) = l.split_once(' ').unwrap();
            (name.to_owned(), kind.to_owned())
        })
        .collect();
    let documented = documented_metrics();
    for (name, kind) in &scraped {
        assert_eq!(
            documented.get(name),
            Some(kind),
            "docs/reference.md's metrics table must name {name}, a {kind}"
        );
    }
    if !on_postgres() {
        let missing: BTreeSet<_> = documented
            .keys()
            .filter(|n| !scraped.contains_key(*n))
            .collect();
        assert!(missing.is_empty(), "not on /metrics: {missing:?}");
    }
}

/// A heading's words as a reader sees them: without the `#`s, backticks and links' targets.
pub(super) fn heading_words(heading: &str) -> String {
    let mut text = String::new();
    let mut rest = heading;
    while let Some(open) = rest.find('[') {
        let Some(close) = rest[open..].find("](").map(|c| open + c) else {
            break;
        };
        let Some(end) = rest[close..].find(')').map(|e| close + e) else {
            break;
        };
        text.push_str(&rest[..open]);
        text.push_str(&rest[open + 1..close]);
        rest = &rest[end + 1..];
    }
    text.push_str(rest);
    text.replace('`', "")
}

/// The anchor GitHub gives a heading: lower case, letters, digits, `-` and `_` kept,
/// spaces made `-`, everything else (punctuation, backticks, arrows) dropped.
pub(super) fn slug(heading: &str) -> String {
    heading_words(heading)
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .flat_map(char::to_lowercase)
        .collect()
}

/// The document's text outside fenced code blocks.
pub(super) fn prose(text: &str) -> String {
    let mut out = String::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if !fenced {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// The anchors a document has: its headings' (the second of a name gets `-1`) and its
/// `<a id="…">` elements'.
pub(super) fn anchors(text: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for line in prose(text).lines() {
        if let Some(heading) = line.strip_prefix('#') {
            let heading = heading.trim_start_matches('#');
            if let Some(heading) = heading.strip_prefix(' ') {
                let base = slug(heading);
                let n = seen.entry(base.clone()).or_insert(0);
                found.insert(if *n == 0 {
                    base.clone()
                } else {
                    format!("{base}-{n}")
                });
                *n += 1;
            }
        }
        for piece in line.split("<a id=\"").skip(1) {
            found.insert(piece.split('"').next().unwrap().to_owned());
        }
    }
    found
}

/// The relative link targets of a document's prose: `[text](target)`, without the web's.
fn links(text: &str) -> Vec<String> {
    let prose = prose(text);
    let mut found = Vec::new();
    for piece in prose.split("](").skip(1) {
        let Some(end) = piece.find(')') else { continue };
        let target = &piece[..end];
        if !target.contains("://") && !target.starts_with("mailto:") && !target.contains(' ') {
            found.push(target.to_owned());
        }
    }
    found
}

/// Every relative link of the docs names a file that exists and, after `#`, an anchor
/// that file has: a section renamed or moved breaks the test, not the reader.
#[test]
fn every_relative_link_of_the_docs_finds_its_file_and_its_anchor() {
    let mut broken = Vec::new();
    for doc in documents() {
        let text = read(&doc);
        for link in links(&text) {
            let (file, anchor) = link.split_once('#').unwrap_or((&link, ""));
            let target = if file.is_empty() {
                doc.clone()
            } else {
                doc.parent().unwrap().join(file)
            };
            if !target.exists() {
                broken.push(format!("{}: {link}: no such file", doc.display()));
                continue;
            }
            if !anchor.is_empty()
                && target.extension().is_some_and(|e| e == "md")
                && !anchors(&read(&target)).contains(anchor)
            {
                broken.push(format!("{}: {link}: no such anchor", doc.display()));
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

/// The flags (`--name`) and variables (`PLANT_STORE_NAME`) a text names.
fn flags_and_variables(text: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for prefix in ["--", "PLANT_STORE_"] {
        for (at, _) in text.match_indices(prefix) {
            // Not the middle of a longer word, a rule (`---`) or `PLANT_STORE_*`.
            if text[..at].ends_with(|c: char| c.is_alphanumeric() || c == '-' || c == '_') {
                continue;
            }
            let rest = &text[at + prefix.len()..];
            let end = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '_'))
                .unwrap_or(rest.len());
            let name = rest[..end].trim_end_matches(['-', '_']);
            if name.starts_with(|c: char| c.is_ascii_alphabetic()) {
                found.insert(format!("{prefix}{name}"));
            }
        }
    }
    found
}

/// The flags a build without the `test-control` feature has not.
const TEST_CONTROL_FLAGS: [&str; 4] = [
    "--test-control",
    "--test-seed",
    "--journal-size",
    "--journal-bytes",
];

/// `--help` and every command's `--help` name only flags and variables the reference
/// has, and every flag of the reference's tables of options and commands is in the help
/// of a build that has it (a build without webhooks or test control leaves their flags
/// out of its help).
#[test]
fn the_help_and_the_reference_name_the_same_flags() {
    let mut commands: Vec<&[&str]> = vec![
        &[],
        &["serve"],
        &["token"],
        &["token", "add"],
        &["token", "list"],
        &["token", "revoke"],
        &["backup"],
        &["compact"],
        &["healthcheck"],
    ];
    let webhooks = !without(Feature::Webhooks);
    let control = !without(Feature::TestControl);
    if webhooks {
        commands.extend([
            &["webhook"][..],
            &["webhook", "add"],
            &["webhook", "list"],
            &["webhook", "remove"],
            &["webhook", "enable"],
        ]);
    }
    let mut helped = BTreeSet::new();
    for command in commands {
        let args: Vec<&str> = command.iter().copied().chain(["--help"]).collect();
        let (code, out, err) = run_cli(&args);
        assert_eq!(code, 0, "{args:?}: {err}");
        helped.extend(flags_and_variables(&out));
    }
    let reference = read(&root().join("docs/reference.md"));
    let named = flags_and_variables(&reference);
    let missing: Vec<_> = helped.difference(&named).collect();
    assert!(
        missing.is_empty(),
        "in --help, not in docs/reference.md: {missing:?}"
    );

    let section = |from: &str, to: &str| {
        let start = reference.find(from).unwrap_or_else(|| panic!("no {from}"));
        let end = start
            + reference[start..]
                .find(to)
                .unwrap_or_else(|| panic!("no {to}"));
        reference[start..end].to_owned()
    };
    let tables =
        section("<!-- options:", "<!-- /options -->") + &section("## Commands", "## Exit codes");
    let unhelped: Vec<_> = flags_and_variables(&tables)
        .into_iter()
        .filter(|f| f.starts_with("--"))
        .filter(|f| webhooks || !f.starts_with("--webhook-") || f == "--webhook-hold")
        .filter(|f| control || !TEST_CONTROL_FLAGS.contains(&f.as_str()))
        .filter(|f| !helped.contains(f))
        .collect();
    assert!(
        unhelped.is_empty(),
        "in docs/reference.md's tables, not in any --help: {unhelped:?}"
    );
    assert!(helped.contains("--addr") && helped.contains("PLANT_STORE_TOKEN"));
}

/// A guide teaches one job, and stays short enough to read: README.md and every
/// docs/*.md at most `MAX_GUIDE_LINES`.
#[test]
fn no_guide_is_over_800_lines() {
    for doc in documents() {
        if doc.ends_with("ARCHITECTURE.md") || doc.ends_with("CHANGELOG.md") {
            continue;
        }
        let lines = read(&doc).lines().count();
        assert!(
            lines <= MAX_GUIDE_LINES,
            "{} has {lines} lines, over {MAX_GUIDE_LINES}",
            doc.display()
        );
    }
}

#[test]
fn a_heading_s_anchor_is_github_s() {
    for (heading, anchor) in [
        (
            "Reset: `POST /_control/reset` → 204",
            "reset-post-_controlreset--204",
        ),
        ("The seed: `--seed FILE`", "the-seed---seed-file"),
        (
            "A WAL that is not the database's own",
            "a-wal-that-is-not-the-databases-own",
        ),
        (
            "Against the speed targets (2026-11-25, 19:17 UTC)",
            "against-the-speed-targets-2026-11-25-1917-utc",
        ),
        ("[Flags](x.md) and variables", "flags-and-variables"),
    ] {
        assert_eq!(slug(heading), anchor);
    }
}
