//! The README's commands run a package's binary with `cargo run -p
//! PACKAGE` (`simba-cli -- demo`, `simba-bench -- --quick`, `simulation`):
//! a package of the workspace with more than one binary must name the one
//! `cargo run` picks (`default-run`), or cargo refuses to choose.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

fn manifest(path: &str) -> toml::Table {
    std::fs::read_to_string(path).unwrap().parse().unwrap()
}

#[test]
fn cargo_run_of_each_package_knows_its_binary() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
    let workspace = manifest(&format!("{root}/Cargo.toml"));
    let members = workspace["workspace"]["members"].as_array().unwrap();
    assert!(members.len() > 1);
    for member in members {
        let member = member.as_str().unwrap();
        let m = manifest(&format!("{root}/{member}/Cargo.toml"));
        // The binaries cargo sees: those the manifest lists, `src/main.rs`
        // (named after the package) and each file of `src/bin/`.
        let mut bins: Vec<String> = m
            .get("bin")
            .and_then(|b| b.as_array())
            .map(|b| {
                b.iter()
                    .filter_map(|t| Some(t.get("name")?.as_str()?.to_owned()))
                    .collect()
            })
            .unwrap_or_default();
        let name = m["package"]["name"].as_str().unwrap().to_owned();
        if std::path::Path::new(&format!("{root}/{member}/src/main.rs")).exists() {
            bins.push(name);
        }
        if let Ok(dir) = std::fs::read_dir(format!("{root}/{member}/src/bin")) {
            for f in dir.flatten() {
                if let Some(stem) = f.file_name().to_str().and_then(|n| n.strip_suffix(".rs")) {
                    bins.push(stem.to_owned());
                }
            }
        }
        bins.sort();
        bins.dedup();
        let default_run = m["package"].get("default-run").and_then(|d| d.as_str());
        assert!(
            bins.len() <= 1 || default_run.is_some_and(|d| bins.iter().any(|b| b == d)),
            "{member}: binaries {bins:?} and default-run {default_run:?}: \
             `cargo run -p` would not know which to run"
        );
    }
    let readme = std::fs::read_to_string(format!("{root}/README.md")).unwrap();
    assert!(readme.contains("cargo run -p simba-cli -- demo"));
}
