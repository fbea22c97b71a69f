//! The documents in docs/ that are generated agree with the binary.

use assert_cmd::Command;

#[test]
fn the_policy_reference_is_what_policy_preset_prints() {
    let page =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/policy.md")).unwrap();
    for name in ctxlens::policy::Preset::NAMES {
        let out = Command::cargo_bin("ctxlens")
            .unwrap()
            .args(["policy", "--preset", name])
            .output()
            .unwrap();
        let text = String::from_utf8(out.stdout).unwrap();
        let section = format!("## `{name}`\n\n```toml\n{}\n```", text.trim_end());
        assert!(
            page.contains(&section),
            "docs/policy.md is out of date for {name}: write it again from `ctxlens policy --preset {name}`"
        );
    }
}
