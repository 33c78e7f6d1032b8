//! The README's first command, `cargo run -p simba-cli -- demo`, must pick
//! the `simba` binary on its own: this package has more than one binary,
//! and without `default-run` cargo refuses to choose.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[test]
fn cargo_run_of_this_package_runs_simba() {
    let dir = env!("CARGO_MANIFEST_DIR");
    let manifest: toml::Table = std::fs::read_to_string(format!("{dir}/Cargo.toml"))
        .unwrap()
        .parse()
        .unwrap();
    let bins = manifest
        .get("bin")
        .and_then(|b| b.as_array())
        .map_or(0, Vec::len);
    let default_run = manifest
        .get("package")
        .and_then(|p| p.get("default-run"))
        .and_then(|d| d.as_str());
    assert!(
        bins <= 1 || default_run == Some("simba"),
        "{bins} binaries and default-run {default_run:?}: `cargo run -p simba-cli -- demo` would not know which to run"
    );
    let readme = std::fs::read_to_string(format!("{dir}/../README.md")).unwrap();
    assert!(
        readme.contains("cargo run -p simba-cli -- demo"),
        "the README names the main command"
    );
}
