//! `simba completions SHELL` and `simba man`, generated from the clap
//! definition, name every subcommand.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::*;

const SUBCOMMANDS: [&str; 9] = [
    "demo",
    "run",
    "cron",
    "lock",
    "elect",
    "status",
    "watch",
    "migrate",
    "completions",
];

fn stdout_of(args: &[&str]) -> String {
    let out = simba()
        // Completions and the man page read no configuration.
        .env("SIMBA_CONFIG", "/nonexistent/simba.toml")
        .args(args)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn completions_for_every_shell_mention_every_subcommand() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let script = stdout_of(&["completions", shell]);
        assert!(!script.is_empty(), "{shell}");
        for sub in SUBCOMMANDS {
            assert!(script.contains(sub), "{shell} completion lacks {sub}");
        }
        assert!(script.contains("conflict-exit-code"), "{shell}");
    }
}

#[test]
fn an_unknown_shell_is_a_usage_error() {
    let out = simba().args(["completions", "cmd.exe"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn the_man_page_is_roff_and_lists_every_subcommand() {
    let page = stdout_of(&["man"]);
    assert!(page.starts_with(".ie") || page.contains(".TH"), "{page}");
    assert!(page.contains("simba"));
    for sub in SUBCOMMANDS {
        assert!(page.contains(sub), "man page lacks {sub}");
    }
}
