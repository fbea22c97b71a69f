//! Policy files: defaults, layering, and errors that name the key and its source.

use ctxlens::policy::{DEFAULTS_TOML, Mode, Policy, PolicyBuilder, Preset, Source};
use ctxlens::tokens::Encoding;

#[test]
fn the_defaults_are_the_contracts_numbers() {
    let p = Policy::default();
    assert_eq!(p.preset, Preset::Pipeline);
    let b = &p.budget;
    assert_eq!(
        (
            b.context_window,
            b.output_reserve,
            b.input_limit,
            b.injection_reserve
        ),
        (200_000, 32_000, 0, 0)
    );
    assert_eq!(b.safety_margin, 0.05);
    assert_eq!(b.encoding, Encoding::O200kBase);
    let t = &p.tool_results;
    assert_eq!((t.mode, t.keep_turns, t.keep_last), (Mode::Age, 3, 5));
    assert_eq!(t.stub, "[result expired]");
    assert!(t.tools.is_empty());
    assert_eq!((p.window.max_turns, p.window.max_tokens), (0, 0));
    assert!(p.summary.use_recorded);
}

#[test]
fn every_key_of_the_shipped_file_is_documented_in_it() {
    let table: toml::Table = DEFAULTS_TOML.parse().unwrap();
    let comments: String = DEFAULTS_TOML
        .lines()
        .filter(|l| l.trim_start().starts_with('#'))
        .collect::<Vec<_>>()
        .join("\n");
    let mut keys = vec![];
    for (name, value) in &table {
        match value {
            toml::Value::Table(inner) => keys.extend(inner.keys().cloned()),
            _ => keys.push(name.clone()),
        }
    }
    for key in keys {
        assert!(
            comments.contains(&key),
            "{key} has no comment in assets/policy.toml"
        );
    }
}

#[test]
fn layers_apply_in_order_file_then_sets() {
    let file = "[tool_results]\nkeep_turns = 7\n[tool_results.tools.read_file]\nmode = \"count\"\nkeep_last = 2\n";
    let p = PolicyBuilder::new()
        .file("mine.toml", file)
        .and_then(|b| b.set("tool_results.keep_turns=1"))
        .and_then(|b| b.set("budget.safety_margin=0"))
        .and_then(|b| b.build())
        .unwrap();
    assert_eq!(p.tool_results.keep_turns, 1);
    assert_eq!(p.budget.safety_margin, 0.0);
    let read = p.tool_results.rule_for(Some("read_file"));
    assert_eq!(
        (read.mode, read.keep_last, read.keep_turns),
        (Mode::Count, 2, 1)
    );
    let other = p.tool_results.rule_for(Some("grep"));
    assert_eq!(other.mode, Mode::Age);
}

#[test]
fn a_recorded_policy_fills_missing_keys_with_defaults_and_round_trips() {
    let p = PolicyBuilder::new()
        .recorded(
            7,
            r#"{"tool_results":{"keep_turns":1},"budget":{"context_window":50000}}"#,
        )
        .and_then(|b| b.build())
        .unwrap();
    assert_eq!(p.tool_results.keep_turns, 1);
    assert_eq!(p.budget.context_window, 50_000);
    assert_eq!(p.budget.output_reserve, 32_000);
    let again = PolicyBuilder::new()
        .recorded(7, &p.to_json())
        .and_then(|b| b.build())
        .unwrap();
    assert_eq!(again, p);
}

fn error(
    build: impl FnOnce() -> Result<Policy, ctxlens::policy::PolicyError>,
) -> (String, Source, String) {
    let e = build().unwrap_err();
    let text = e.to_string();
    (e.key, e.origin, text)
}

#[test]
fn bad_keys_and_values_are_errors_naming_the_key_and_where_it_came_from() {
    let (key, origin, text) = error(|| {
        PolicyBuilder::new()
            .set("tool_results.keep_turn=2")?
            .build()
    });
    assert_eq!(key, "tool_results.keep_turn");
    assert_eq!(origin, Source::Set("tool_results.keep_turn=2".into()));
    assert!(
        text.contains("unknown key") && text.contains("--set tool_results.keep_turn=2"),
        "{text}"
    );

    let (key, _, text) = error(|| {
        PolicyBuilder::new()
            .file("p.toml", "[budget]\ncontext_window = \"big\"\n")?
            .build()
    });
    assert_eq!(key, "budget.context_window");
    assert!(
        text.contains("policy file p.toml") && text.contains("expected a whole number"),
        "{text}"
    );

    let (key, _, text) = error(|| {
        PolicyBuilder::new()
            .set("tool_results.mode=forever")?
            .build()
    });
    assert_eq!(key, "tool_results.mode");
    assert!(
        text.contains("'forever' is not one of age, count"),
        "{text}"
    );

    let (key, _, text) = error(|| PolicyBuilder::new().set("window.max_turns=-1")?.build());
    assert_eq!(key, "window.max_turns");
    assert!(text.contains("negative"), "{text}");

    let (key, origin, text) = error(|| {
        PolicyBuilder::new()
            .set("budget.safety_margin=1.5")?
            .build()
    });
    assert_eq!(
        (key.as_str(), origin),
        (
            "budget.safety_margin",
            Source::Set("budget.safety_margin=1.5".into())
        )
    );
    assert!(text.contains("not in [0, 1)"), "{text}");

    let (key, origin, _) = error(|| {
        PolicyBuilder::new()
            .recorded(3, r#"{"budget":{"output_reserve":300000}}"#)?
            .build()
    });
    assert_eq!(
        (key.as_str(), origin),
        ("budget.output_reserve", Source::Recorded(3))
    );

    let (key, _, _) = error(|| {
        PolicyBuilder::new()
            .set("tool_results.tools.grep.never_evict=maybe")?
            .build()
    });
    assert_eq!(key, "tool_results.tools.grep.never_evict");

    let (_, origin, text) = error(|| PolicyBuilder::new().recorded(9, "{not json")?.build());
    assert_eq!(origin, Source::Recorded(9));
    assert!(text.contains("malformed JSON"), "{text}");
}

#[test]
fn an_out_of_range_value_in_a_recorded_policy_names_its_key() {
    let (key, origin, text) = error(|| {
        PolicyBuilder::new()
            .recorded(4, r#"{"tool_results":{"keep_turns":18446744073709551615}}"#)?
            .build()
    });
    assert_eq!(
        (key.as_str(), origin),
        ("tool_results.keep_turns", Source::Recorded(4))
    );
    assert!(text.contains("out of range"), "{text}");
    let (key, _, _) = error(|| {
        PolicyBuilder::new()
            .recorded(4, r#"{"opencode":{"protected_tools":["a",null]}}"#)?
            .build()
    });
    assert_eq!(key, "opencode.protected_tools");
}

#[test]
fn a_clash_with_the_defaults_blames_the_users_key_and_file() {
    let (key, origin, text) = error(|| {
        PolicyBuilder::new()
            .file("mine.toml", "[budget]\ncontext_window = 1000\n")?
            .build()
    });
    assert_eq!(
        (key.as_str(), origin),
        ("budget.context_window", Source::File("mine.toml".into()))
    );
    assert!(
        text.contains("policy file mine.toml") && text.contains("1000"),
        "{text}"
    );
    assert!(!text.contains("assets/policy.toml"), "{text}");
    // The key set last is the one blamed, whichever of the pair it is.
    let (key, _, _) = error(|| {
        PolicyBuilder::new()
            .set("adaptive.max_keep=1")?
            .set("adaptive.min_keep=5")?
            .build()
    });
    assert_eq!(key, "adaptive.min_keep");
    let (key, origin, _) = error(|| {
        PolicyBuilder::new()
            .file("mine.toml", "[recent-turns]\nturn_max = 0\n")?
            .build()
    });
    assert_eq!(
        (key.as_str(), origin),
        ("recent-turns.turn_max", Source::File("mine.toml".into()))
    );
}

#[test]
fn deep_keys_and_files_are_refused_with_the_limit() {
    use ctxlens::policy::MAX_DEPTH;
    // A hundred thousand levels: refused before anything recurses into them.
    let key = vec!["a"; 100_000].join(".");
    let (_, _, text) = error(|| PolicyBuilder::new().set(&format!("{key}=1"))?.build());
    assert!(
        text.contains("100000 dotted parts") && text.contains(&format!("at most {MAX_DEPTH}")),
        "{text}"
    );
    assert!(text.len() < 300, "one short line: {text}");
    let (_, _, text) = error(|| {
        PolicyBuilder::new()
            .set(&format!(
                "opencode.protected_tools={}{}",
                "[".repeat(100_000),
                "]".repeat(100_000)
            ))?
            .build()
    });
    assert!(text.len() < 300, "one short line: {text}");

    let file = format!("{} = 1\n", key);
    let (_, origin, text) = error(|| PolicyBuilder::new().file("deep.toml", &file)?.build());
    assert_eq!(origin, Source::File("deep.toml".into()));
    assert!(text.contains(&format!("at most {MAX_DEPTH}")), "{text}");
    let file = format!("x = {}1{}\n", "{a=".repeat(100_000), "}".repeat(100_000));
    let (_, _, text) = error(|| PolicyBuilder::new().file("deep.toml", &file)?.build());
    assert!(text.contains("deep.toml"), "{text}");
    // Within TOML's own limit but deeper than a policy nests.
    let (key, _, text) = error(|| {
        PolicyBuilder::new()
            .file("deep.toml", "[tool_results.tools.a.b.c.d.e.f.g]\nx = 1\n")?
            .build()
    });
    assert!(key.starts_with("tool_results.tools.a.b"), "{key}");
    assert!(text.contains("nested more than"), "{text}");
    let json = format!(
        "{}1{}",
        r#"{"tool_results":"#.repeat(100_000),
        "}".repeat(100_000)
    );
    let (_, origin, text) = error(|| PolicyBuilder::new().recorded(2, &json)?.build());
    assert_eq!(origin, Source::Recorded(2));
    assert!(text.contains("malformed JSON"), "{text}");
    let json = format!("{}1{}", r#"{"tool_results":"#.repeat(12), "}".repeat(12));
    let (_, _, text) = error(|| PolicyBuilder::new().recorded(2, &json)?.build());
    assert!(text.contains("nested more than"), "{text}");
}

#[test]
fn an_unknown_key_suggests_the_nearest_and_where_it_is() {
    let text = "[budget]\ncontext_window = 1000000\n\n[tool_results]\n  keep_trns = 2\n";
    let e = ctxlens::policy::PolicyBuilder::new()
        .file("mine.toml", text)
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("mine.toml:5:3"), "{e}");
    assert!(e.contains("did you mean 'keep_turns'?"), "{e}");
    let e = ctxlens::policy::PolicyBuilder::new()
        .file("bad.toml", "[tool_results\nkeep_turns = 2\n")
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("line 1, column 14"), "{e}");
    // Nothing near: no guess.
    let e = ctxlens::policy::PolicyBuilder::new()
        .set("tool_results.zzzzzzzz=1")
        .err()
        .unwrap()
        .to_string();
    assert!(e.ends_with("unknown key"), "{e}");
}
