//! The documents list the backends, their cargo features and URL schemes as
//! the code does (`BackendKind::ALL`, `BackendKind::feature`,
//! `BackendKind::schemes`): the README's opening and its backend table,
//! `simba-cli/README.md`, the crate docs, `connect`'s and `from_env`'s docs,
//! and the feature lists of every crate that forwards a backend feature.
//! A backend added to the code and not to a document fails here.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use simba_backends::BackendKind;
use std::path::PathBuf;

fn read(path: &str) -> String {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    std::fs::read_to_string(root.join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The text between the first line starting with `from` and the next line
/// starting with `to` (or the end).
fn section<'a>(text: &'a str, from: &str, to: &str) -> &'a str {
    let start = text
        .find(from)
        .unwrap_or_else(|| panic!("no {from:?} in the document"));
    let rest = &text[start + from.len()..];
    &rest[..rest.find(to).unwrap_or(rest.len())]
}

/// The table row of `kind` in a backend table: the line starting `| Title |`.
fn row<'a>(table: &'a str, kind: BackendKind, doc: &str) -> &'a str {
    let head = format!("| {} |", kind.title());
    table
        .lines()
        .find(|l| l.starts_with(&head))
        .unwrap_or_else(|| panic!("{doc}: no row for {} in its backend table", kind.title()))
}

fn scheme_text(scheme: &str) -> String {
    if scheme == "sqlite" {
        "`sqlite:".to_owned()
    } else {
        format!("`{scheme}://")
    }
}

/// Every backend's title, feature(s) and schemes are in its row.
fn check_table(table: &str, doc: &str) {
    for kind in BackendKind::ALL {
        let row = row(table, kind, doc);
        let features = std::iter::once(kind.feature()).chain(kind.tls_feature());
        for feature in features {
            assert!(
                row.contains(&format!("`{feature}`")),
                "{doc}: the {} row lacks the feature `{feature}`: {row}",
                kind.title()
            );
        }
        for scheme in kind.schemes() {
            assert!(
                row.contains(&scheme_text(scheme)),
                "{doc}: the {} row lacks the scheme {scheme}: {row}",
                kind.title()
            );
        }
    }
    let rows = table.lines().filter(|l| l.starts_with("| ")).count();
    assert_eq!(
        rows,
        BackendKind::ALL.len(),
        "{doc}: the backend table has a row the code does not know (or lacks one)"
    );
}

#[test]
fn the_readme_names_every_backend_with_its_feature_and_schemes() {
    let readme = read("README.md");
    let opening = section(&readme, "# Simba\n", "\n\n");
    for kind in BackendKind::ALL {
        assert!(
            opening.contains(kind.title()),
            "README's opening does not name {}: {opening}",
            kind.title()
        );
    }
    check_table(
        section(&readme, "| backend | feature | URL schemes |", "\n\n"),
        "README.md",
    );
    let crates = section(&readme, "## Crates", "### ");
    let backends_row = crates
        .lines()
        .find(|l| l.starts_with("| `simba-backends` |"))
        .expect("README's crate table has a simba-backends row");
    for kind in BackendKind::ALL {
        assert!(backends_row.contains(kind.title()), "{backends_row}");
    }
}

#[test]
fn the_cli_readme_lists_every_backend_url_and_feature() {
    let cli = read("simba-cli/README.md");
    check_table(
        section(&cli, "| backend | URL | feature |", "\n\n"),
        "simba-cli/README.md",
    );
}

#[test]
fn every_crate_forwards_every_backend_feature() {
    let has = |toml: &str, feature: &str| {
        toml.lines()
            .any(|l| l.trim_start().starts_with(&format!("{feature} = [")))
    };
    for manifest in [
        "simba-backends/Cargo.toml",
        "simba-client/Cargo.toml",
        "simba-tokio/Cargo.toml",
        "simba-async-std/Cargo.toml",
        "simba-cli/Cargo.toml",
    ] {
        let toml = read(manifest);
        for kind in BackendKind::ALL {
            assert!(
                has(&toml, kind.feature()),
                "{manifest} lacks `{}`",
                kind.feature()
            );
            // The client forwards the backend features only; TLS depends on
            // the runtime, which the adapters and the CLI choose.
            if manifest != "simba-client/Cargo.toml" {
                if let Some(tls) = kind.tls_feature() {
                    assert!(has(&toml, tls), "{manifest} lacks `{tls}`");
                }
            }
        }
    }
}

#[test]
fn crate_docs_list_every_feature_and_scheme() {
    // The backends crate's docs and `connect`'s.
    let lib = read("simba-backends/src/lib.rs");
    let crate_doc: String = lib
        .lines()
        .take_while(|l| l.starts_with("//!"))
        .collect::<Vec<_>>()
        .join("\n");
    let connect_doc = section(
        &lib,
        "/// Connects to the backend that `url` names",
        "pub async fn connect",
    );
    for kind in BackendKind::ALL {
        assert!(
            crate_doc.contains(kind.title()),
            "simba-backends docs: {}",
            kind.title()
        );
        assert!(
            crate_doc.contains(&format!("`{}`", kind.feature())),
            "simba-backends docs lack the feature `{}`",
            kind.feature()
        );
        for scheme in kind.schemes() {
            assert!(
                connect_doc.contains(&scheme_text(scheme)),
                "`connect`'s docs lack {scheme}"
            );
        }
    }
    // Each adapter's `from_env` docs name every feature.
    for adapter in ["simba-tokio/src/lib.rs", "simba-async-std/src/lib.rs"] {
        let src = read(adapter);
        let doc = section(
            &src,
            "/// A client configured like the `simba` command",
            "pub async fn from_env",
        );
        for kind in BackendKind::ALL {
            assert!(
                doc.contains(&format!("`{}`", kind.feature())),
                "{adapter}: from_env's docs lack the feature `{}`",
                kind.feature()
            );
        }
    }
}
