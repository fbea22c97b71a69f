//! The policy file's documentation: `assets/policy.toml` cut into its
//! tables, each with the comments above it, so one preset's keys can be
//! printed as a policy file of their own (`ctxlens policy --preset NAME`).

use super::{DEFAULTS_TOML, Preset};

/// One table of the defaults file: its name and its text, the comment
/// block above its header included.
struct Section<'a> {
    table: &'a str,
    text: String,
}

/// The defaults file's opening comments, and its tables in order.
fn sections() -> (String, Vec<Section<'static>>) {
    let lines: Vec<&str> = DEFAULTS_TOML.lines().collect();
    fn header(line: &str) -> Option<&str> {
        let line = line.trim();
        (line.starts_with('[') && line.ends_with(']'))
            .then(|| line.trim_matches(|c| c == '[' || c == ']'))
    }
    // Each table starts at the comment block right above its header.
    let mut starts: Vec<(usize, &str)> = Vec::new();
    for (at, line) in lines.iter().enumerate() {
        if let Some(table) = header(line) {
            let mut start = at;
            while start > 0 && lines[start - 1].trim_start().starts_with('#') {
                start -= 1;
            }
            starts.push((start, table));
        }
    }
    let end = |i: usize| starts.get(i + 1).map_or(lines.len(), |s| s.0);
    let opening = starts.first().map_or(lines.len(), |s| s.0);
    let preamble: Vec<&str> = lines[..opening]
        .iter()
        .copied()
        .filter(|l| !l.trim_start().starts_with("preset ="))
        .collect();
    let sections = starts
        .iter()
        .enumerate()
        .map(|(i, &(start, table))| Section {
            table,
            text: lines[start..end(i)].join("\n").trim_end().to_string(),
        })
        .collect();
    (preamble.join("\n").trim_end().to_string(), sections)
}

/// A policy file of `preset`: its name, then every table it reads with
/// each key's default and documentation, which `--policy` takes unchanged.
pub fn preset_file(preset: Preset) -> String {
    let (preamble, sections) = sections();
    let mut out = format!("{preamble}\n\npreset = \"{}\"\n", preset.name());
    for section in sections {
        let text = if preset.reads(&format!("{}.x", section.table)) {
            section.text
        } else {
            match own_keys(preset, &section) {
                Some(text) => text,
                None => continue,
            }
        };
        out.push('\n');
        out.push_str(&text);
        out.push('\n');
    }
    out
}

/// The keys of a table `preset` reads one by one (a marker-honouring
/// preset's `trigger.on_request`), each with its comment, under the header.
fn own_keys(preset: Preset, section: &Section) -> Option<String> {
    let lines: Vec<&str> = section.text.lines().collect();
    let mut out = vec![format!("[{}]", section.table)];
    for (at, line) in lines.iter().enumerate() {
        let Some((key, _)) = line.split_once(" = ") else {
            continue;
        };
        if line.starts_with('#') || !preset.reads(&format!("{}.{key}", section.table)) {
            continue;
        }
        let mut start = at;
        while start > 0 && lines[start - 1].starts_with("# ") && !lines[start - 1].contains(" = ") {
            start -= 1;
        }
        out.extend(lines[start..=at].iter().map(|l| l.to_string()));
    }
    (out.len() > 1).then(|| out.join("\n"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::PolicyBuilder;

    #[test]
    fn each_preset_file_reads_back_as_the_preset_with_its_defaults() {
        for name in Preset::NAMES {
            let preset: Preset = serde_json::from_value(serde_json::json!(name)).unwrap();
            let text = preset_file(preset);
            let read = PolicyBuilder::new()
                .file("preset.toml", &text)
                .unwrap()
                .build()
                .unwrap();
            let set = PolicyBuilder::new()
                .set(&format!("preset=\"{name}\""))
                .unwrap()
                .build()
                .unwrap();
            assert_eq!(read, set, "{name}");
            assert!(text.contains(&format!("preset = \"{name}\"")), "{name}");
            assert!(text.contains("[budget]"), "{name}");
        }
        // A preset's own table is there, another's is not; of the trigger
        // table, opencode reads whether to honour markers only.
        let text = preset_file(Preset::Opencode);
        assert!(text.contains("[opencode]") && !text.contains("[block]"));
        assert!(text.contains("prune_protect = "));
        assert!(text.contains("[trigger]\n# on_request") && text.contains("on_request = true"));
        assert!(!text.contains("over_target"));
    }
}
