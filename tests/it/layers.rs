//! The house is one-way: every module imports only modules on floors below
//! its own. The floors are read from the module docs of `src/lib.rs` (the
//! numbered list under "Floors"), so they are written once; every
//! `crate::` path in `src/` is checked against them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Each module's floor, from lib.rs's list: "N. `a`, `b`: what they are".
fn floors(lib: &str) -> BTreeMap<String, usize> {
    let list = lib
        .lines()
        .map(|l| l.trim_start_matches("//!").trim())
        .skip_while(|l| *l != "# Floors");
    let mut floors = BTreeMap::new();
    for line in list {
        let Some((number, rest)) = line.split_once(". ") else {
            continue;
        };
        let Ok(floor) = number.parse::<usize>() else {
            continue;
        };
        let names = rest.split(':').next().unwrap_or("");
        for name in names.split(',') {
            let name = name.trim().trim_matches('`').to_string();
            assert!(
                floors.insert(name.clone(), floor).is_none(),
                "{name} is on two floors"
            );
        }
    }
    floors
}

/// A file's code without its comments: a path in a comment is no import.
fn code(text: &str) -> String {
    text.lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

fn ident(s: &str) -> String {
    s.trim_start()
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect()
}

/// The paths after each `crate::` of `code`, a group `crate::{a, b::c}`
/// giving each of its items: `a`, `b::c`.
fn crate_paths(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (at, _) in code.match_indices("crate::") {
        let rest = &code[at + "crate::".len()..];
        let Some(group) = rest.strip_prefix('{') else {
            let end = rest
                .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                .unwrap_or(rest.len());
            out.push(rest[..end].to_string());
            continue;
        };
        // The group's items, split on its top-level commas.
        let (mut depth, mut item) = (0, String::new());
        for c in group.chars() {
            match c {
                '{' => depth += 1,
                '}' if depth == 0 => break,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    out.push(std::mem::take(&mut item).trim().to_string());
                    continue;
                }
                _ => {}
            }
            item.push(c);
        }
        out.push(item.trim().to_string());
    }
    out.retain(|p| !p.is_empty());
    out
}

/// Every `.rs` file under `dir`, with its path from `src/`.
fn files(dir: &Path, out: &mut Vec<(String, String)>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let rel = path
                .strip_prefix(src())
                .unwrap()
                .to_string_lossy()
                .into_owned();
            out.push((rel, std::fs::read_to_string(&path).unwrap()));
        }
    }
}

/// The top-level module a file of `src/` belongs to.
fn module_of(rel: &str) -> &str {
    rel.split('/').next().unwrap().trim_end_matches(".rs")
}

#[test]
fn no_module_imports_one_on_its_floor_or_above() {
    let lib = std::fs::read_to_string(src().join("lib.rs")).unwrap();
    let floors = floors(&lib);
    // Every module the library declares has its floor, and only those.
    let declared: Vec<String> = lib
        .lines()
        .map(|l| l.trim())
        .filter_map(|l| l.strip_prefix("pub ").unwrap_or(l).strip_prefix("mod "))
        .map(|l| l.trim_end_matches(';').to_string())
        .collect();
    let mut listed: Vec<&String> = floors.keys().collect();
    listed.sort();
    let mut sorted = declared.iter().collect::<Vec<_>>();
    sorted.sort();
    assert_eq!(
        listed, sorted,
        "lib.rs's floors list every module it declares, each once"
    );
    let mut all = Vec::new();
    files(&src(), &mut all);
    let mut wrong = Vec::new();
    for (rel, text) in &all {
        let module = module_of(rel);
        let Some(&own) = floors.get(module) else {
            continue; // lib.rs and main.rs: the top
        };
        // In a module's own file (src/NAME.rs, src/NAME/mod.rs) `super::`
        // is the crate.
        let top = !rel.contains('/') || rel.ends_with("/mod.rs") && rel.matches('/').count() == 1;
        let code = match top {
            true => code(text).replace("super::", "crate::"),
            false => code(text),
        };
        for path in crate_paths(&code) {
            let target = ident(&path);
            match floors.get(&target) {
                Some(&floor) if target != module && floor >= own => {
                    wrong.push(format!(
                        "src/{rel} (floor {own}) imports crate::{path} (floor {floor})"
                    ));
                }
                _ => {}
            }
        }
    }
    assert!(wrong.is_empty(), "arrows up:\n{}", wrong.join("\n"));
}

#[test]
fn the_engine_base_never_names_a_preset_nor_matches_on_one() {
    let presets = src().join("engine/presets");
    let names: Vec<String> = std::fs::read_dir(&presets)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_stem().is_some_and(|s| s != "mod"))
        .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
        .collect();
    assert!(
        names.iter().any(|n| n == "codex"),
        "presets found: {names:?}"
    );
    let mut all = Vec::new();
    files(&src().join("engine"), &mut all);
    let mut wrong = Vec::new();
    for (rel, text) in &all {
        if rel.starts_with("engine/presets/") {
            continue;
        }
        let code = code(text);
        // Nor matches on a preset's name: what differs is the preset's `Design`.
        if code.contains("Preset::") {
            wrong.push(format!("src/{rel} matches on a preset's name"));
        }
        for (at, _) in code.match_indices("presets::") {
            let rest = &code[at + "presets::".len()..];
            let items = match rest.strip_prefix('{') {
                Some(group) => group[..group.find('}').unwrap_or(group.len())]
                    .split(',')
                    .map(ident)
                    .collect(),
                None => vec![ident(rest)],
            };
            for item in items.iter().filter(|i| names.contains(i)) {
                wrong.push(format!("src/{rel} names the preset {item}"));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn the_reader_finds_every_kind_of_path() {
    let text = "use crate::model::{Event, Kind};\nuse crate::{log::Store, tokens};\nlet x = crate::engine::run(); // crate::tui\n";
    let paths = crate_paths(&code(text));
    assert_eq!(paths, ["model::", "log::Store", "tokens", "engine::run"]);
    let mut floors_text = String::from("//! # Floors\n//!\n");
    floors_text += "//! 1. `a`, `b`: low\n//! 2. `c`: high\n";
    let floors = floors(&floors_text);
    assert_eq!(floors.get("b"), Some(&1));
    assert_eq!(floors.get("c"), Some(&2));
}
