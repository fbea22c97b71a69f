//! The configuration file: where it is, what it holds, and errors that name
//! the line, column and key.

use assert_cmd::Command;
use ctxlens::config;

#[test]
fn errors_name_the_line_column_and_key() {
    let err = config::parse("[theme]\ncolor = \"auto\"\n\n[policy]\nfiel = \"x\"\n").unwrap_err();
    assert!(err.starts_with("5:1:") && err.contains("fiel"), "{err}");
    let err = config::parse("[theme]\ncolor = \"sometimes\"\n").unwrap_err();
    assert!(
        err.starts_with("2:9:") && err.contains("sometimes"),
        "{err}"
    );
    let err = config::parse("[theme\n").unwrap_err();
    assert!(err.starts_with("1:"), "{err}");
    let err = config::parse("[keymap]\nnext_cal = \"n\"\n").unwrap_err();
    assert!(
        err.starts_with("2:1:") && err.contains("keymap.next_cal") && err.contains("next_call"),
        "{err}"
    );
    let err = config::parse("[keymap]\nnext_call = [\"Hyper\"]\n").unwrap_err();
    assert!(
        err.contains("keymap.next_call") && err.contains("Hyper"),
        "{err}"
    );
    let err = config::parse("[prices.m]\ninput = 1.0\n").unwrap_err();
    assert!(err.starts_with("1:") || err.starts_with("2:"), "{err}");
}

#[test]
fn the_printed_file_reads_and_names_every_action() {
    let text = config::example();
    let config = config::parse(&text).unwrap();
    assert!(config.keymap.is_empty() && config.prices.is_empty());
    for (action, keys, _) in ctxlens::keys::actions() {
        assert!(text.contains(&format!("# {action} = ")), "{action}");
        // What the file shows for an action, uncommented, reads as its keys.
        let line = format!("[keymap]\n{action} = {keys:?}\n");
        let parsed = config::parse(&line).unwrap();
        assert_eq!(
            parsed.keymap[&action].names(),
            keys.iter().map(String::as_str).collect::<Vec<_>>()
        );
    }
    let actions: std::collections::HashSet<_> =
        ctxlens::keys::actions().into_iter().map(|a| a.0).collect();
    assert_eq!(
        actions.len(),
        ctxlens::keys::KEYMAP.len(),
        "action names are unique"
    );
}

fn ctxlens(config: &std::path::Path) -> Command {
    let mut command = Command::cargo_bin("ctxlens").unwrap();
    command.env("CTXLENS_CONFIG", config);
    command
}

#[test]
fn a_broken_configuration_stops_commands_with_its_place_and_config_says_so() {
    let dir = tempfile::TempDir::new().unwrap();
    let file = dir.path().join("config.toml");
    let sample = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/sample-sessions/forgot-deploy-key.db"
    );

    let out = ctxlens(&file).arg("config").output().unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("not there"));

    std::fs::write(&file, "[theme]\ncolour = \"never\"\n").unwrap();
    let out = ctxlens(&file).args(["check", sample]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    let place = format!("{}:2:1:", file.display());
    assert!(err.contains(&place) && err.contains("colour"), "{err}");
    assert!(err.lines().count() <= 2, "{err}");
    // `config --print` still helps mend it.
    let out = ctxlens(&file).args(["config", "--print"]).output().unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("[keymap]"));

    std::fs::write(&file, config::example()).unwrap();
    let out = ctxlens(&file).arg("config").output().unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("reads"));
}

#[test]
fn the_default_policy_file_is_used_without_policy() {
    let dir = tempfile::TempDir::new().unwrap();
    let policy = dir.path().join("policy.toml");
    std::fs::write(&policy, "preset = \"recent-turns\"\n").unwrap();
    let file = dir.path().join("config.toml");
    std::fs::write(
        &file,
        format!("[policy]\nfile = {:?}\n", policy.display().to_string()),
    )
    .unwrap();
    let sample = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/sample-sessions/forgot-deploy-key.db"
    );
    let run = |config: &std::path::Path| {
        let out = ctxlens(config)
            .args(["project", "--call", "44", "--json", sample])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let configured = run(&file);
    let plain = run(&dir.path().join("none.toml"));
    assert_ne!(configured, plain);
    let explicit = Command::cargo_bin("ctxlens")
        .unwrap()
        .env("CTXLENS_CONFIG", dir.path().join("none.toml"))
        .args(["project", "--call", "44", "--json", "--policy"])
        .arg(&policy)
        .arg(sample)
        .output()
        .unwrap();
    assert_eq!(configured, String::from_utf8_lossy(&explicit.stdout));
}

#[test]
fn a_price_that_is_no_price_is_an_error_naming_its_key() {
    for (value, shown) in [("-5.0", "-5"), ("nan", "NaN"), ("inf", "inf")] {
        let text = format!(
            "[prices.\"gpt-4o\"]\ninput = 1.0\ncached_input = 0.5\ncache_write = {value}\noutput = 2.0\n"
        );
        let err = config::parse(&text).unwrap_err();
        assert!(
            err.starts_with("4:1:")
                && err.contains("prices.\"gpt-4o\".cache_write")
                && err.contains(shown),
            "{err}"
        );
    }
    // The 1-hour write, optional, alike.
    let text = "[prices.\"claude-x\"]\ninput = 1.0\ncached_input = 0.1\ncache_write = 1.25\ncache_write_1h = nan\noutput = 2.0\n";
    let err = config::parse(text).unwrap_err();
    assert!(
        err.contains("prices.\"claude-x\".cache_write_1h") && err.contains("NaN"),
        "{err}"
    );
    let fine =
        "[prices.\"gpt-4o\"]\ninput = 1.0\ncached_input = 0.0\ncache_write = 1.25\noutput = 2.0\n";
    assert!(config::parse(fine).is_ok());
    // A policy's [cost] alike.
    let out = Command::cargo_bin("ctxlens")
        .unwrap()
        .args([
            "project",
            concat!(env!("CARGO_MANIFEST_DIR"), "/sample-sessions/tool-heavy.db"),
        ])
        .args(["--call", "1", "--set", "cost.output=-1"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("cost.output") && stderr.contains("not a price"),
        "{stderr}"
    );
    let out = Command::cargo_bin("ctxlens")
        .unwrap()
        .args([
            "stats",
            concat!(env!("CARGO_MANIFEST_DIR"), "/sample-sessions/tool-heavy.db"),
        ])
        .args(["--set", "cost.cache_write_1h=-2"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("cost.cache_write_1h") && stderr.contains("not a price"),
        "{stderr}"
    );
}
