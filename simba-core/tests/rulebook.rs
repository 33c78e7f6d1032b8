//! The rulebook cannot dangle: every rule id (`S3.2`, `S6`, …) cited in any
//! source, document, script or help text of the repository is defined by a
//! heading of `docs/RULES.md`, and every relative link there leads to a file.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("simba-core sits in the workspace root")
        .to_path_buf()
}

/// Rule ids in `text`: `S` then a number 1–99 (no leading zero), optionally `.` and digits, not
/// glued to other letters or digits on either side.
fn rule_ids(text: &str) -> Vec<String> {
    let b = text.as_bytes();
    let word = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let mut out = Vec::new();
    let mut i = 0;
    while i + 1 < b.len() {
        if b[i] == b'S' && (b'1'..=b'9').contains(&b[i + 1]) && (i == 0 || !word(b[i - 1])) {
            let mut j = i + 2;
            // Two-digit sections: S10, S11, …
            if j < b.len() && b[j].is_ascii_digit() {
                j += 1;
            }
            if j + 1 < b.len() && b[j] == b'.' && b[j + 1].is_ascii_digit() {
                j += 1;
                while j < b.len() && b[j].is_ascii_digit() {
                    j += 1;
                }
            }
            if j >= b.len() || !word(b[j]) {
                out.push(text[i..j].to_owned());
            }
            i = j;
        } else {
            i += 1;
        }
    }
    out
}

/// Ids defined by `## S1 …` / `### S1.1 …` headings.
fn defined_ids(rules: &str) -> BTreeSet<String> {
    rules
        .lines()
        .filter(|l| l.starts_with("## S") || l.starts_with("### S"))
        .filter_map(|l| l.trim_start_matches('#').split_whitespace().next())
        .map(str::to_owned)
        .collect()
}

fn scanned_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if path.is_dir() {
            if (name != "target" && !name.starts_with('.')) || name == ".ci" {
                scanned_files(&path, out);
            }
        } else if [".rs", ".md", ".toml", ".sh", ".txt"]
            .iter()
            .any(|ext| name.ends_with(ext))
            || dir.file_name().is_some_and(|d| d == ".ci")
        {
            out.push(path);
        }
    }
}

fn undefined_citations(defined: &BTreeSet<String>, files: &[PathBuf]) -> Vec<String> {
    let mut missing = Vec::new();
    for file in files {
        let Ok(text) = std::fs::read_to_string(file) else {
            continue;
        };
        for (n, line) in text.lines().enumerate() {
            for id in rule_ids(line) {
                if !defined.contains(&id) {
                    missing.push(format!("{}:{}: {id}", file.display(), n + 1));
                }
            }
        }
    }
    missing
}

#[test]
fn every_cited_rule_id_is_defined_in_docs_rules_md() {
    let root = repo_root();
    let rules = std::fs::read_to_string(root.join("docs/RULES.md")).expect("docs/RULES.md");
    let defined = defined_ids(&rules);
    for section in 1..=9 {
        assert!(
            defined.contains(&format!("S{section}")),
            "S{section} heading"
        );
    }
    let mut files = Vec::new();
    scanned_files(&root, &mut files);
    assert!(
        files.len() > 50,
        "the scan should see the whole repository, saw {}",
        files.len()
    );
    let missing = undefined_citations(&defined, &files);
    assert!(
        missing.is_empty(),
        "rule ids cited but not defined in docs/RULES.md:\n{}",
        missing.join("\n")
    );
}

#[test]
fn a_dangling_citation_is_caught() {
    let defined = defined_ids("## S1 Sessions\n### S1.1 One session\n");
    let dir = std::env::temp_dir().join(format!("simba-rulebook-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("x.rs");
    // Built from pieces so that this file itself cites no undefined id.
    let undefined = format!("S{}.9", 1);
    let text = format!("// S1.1 and S1 are fine; {undefined} is not, nor S4\n");
    std::fs::write(&file, text).unwrap();
    let missing = undefined_citations(&defined, &[file]);
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(missing.len(), 2, "{missing:?}");
    assert!(missing[0].ends_with(&undefined) && missing[1].ends_with("S4"));
}

#[test]
fn ids_are_recognised_only_as_whole_words() {
    assert_eq!(rule_ids("(S3.2, S6) S2.1."), ["S3.2", "S6", "S2.1"]);
    assert!(rule_ids("AWS3 S3x XS1.1 s3.2 S0").is_empty());
}

#[test]
fn every_relative_link_in_the_rulebook_exists() {
    let docs = repo_root().join("docs");
    let rules = std::fs::read_to_string(docs.join("RULES.md")).unwrap();
    let mut broken = Vec::new();
    for (i, _) in rules.match_indices("](") {
        let rest = &rules[i + 2..];
        let Some(end) = rest.find(')') else { continue };
        let target = rest[..end].split('#').next().unwrap_or("");
        if target.is_empty() || target.contains("://") {
            continue;
        }
        if !docs.join(target).exists() {
            broken.push(target.to_owned());
        }
    }
    assert!(
        broken.is_empty(),
        "broken links in docs/RULES.md: {broken:?}"
    );
}

/// Every Rust snippet of README.md and docs/*.md is compiled: the document is
/// included as doctests by `simba-tokio` (see its `src/lib.rs`; `simba-sim`
/// includes docs/SIMULATION.md), and no
/// snippet opts out with `ignore`.
#[test]
fn every_rust_snippet_in_the_documents_is_compiled() {
    let root = repo_root();
    // simba-tokio includes the documents; simba-sim its own page.
    let includer = std::fs::read_to_string(root.join("simba-tokio/src/lib.rs")).unwrap()
        + &std::fs::read_to_string(root.join("simba-sim/src/lib.rs")).unwrap();
    let mut docs = vec![root.join("README.md")];
    for entry in std::fs::read_dir(root.join("docs")).unwrap().flatten() {
        if entry.path().extension().is_some_and(|e| e == "md") {
            docs.push(entry.path());
        }
    }
    let mut problems = Vec::new();
    for doc in &docs {
        let text = std::fs::read_to_string(doc).unwrap();
        let rel = doc.strip_prefix(&root).unwrap().display().to_string();
        let mut open = false;
        let mut rust = false;
        for (n, line) in text.lines().enumerate() {
            let Some(info) = line.trim_start().strip_prefix("```") else {
                continue;
            };
            if open {
                open = false;
                continue;
            }
            open = true;
            let info = info.trim();
            // Rustdoc treats an unlabelled block as Rust.
            if info.is_empty() || info.starts_with("rust") {
                rust = true;
                if info.is_empty() || info.split(',').any(|a| a == "ignore") {
                    problems.push(format!(
                        "{rel}:{}: `{line}` (label it or make it compile)",
                        n + 1
                    ));
                }
            }
        }
        if rust && !includer.contains(&format!("include_str!(\"../../{rel}\")")) {
            problems.push(format!(
                "{rel}: has Rust snippets but neither simba-tokio nor simba-sim includes it"
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
