//! Tool output and narration for the samples, generated from a seed so every
//! run writes the same bytes.

use serde_json::json;

/// A tool call the agent makes and the result its tool gives.
pub(super) struct ToolUse {
    pub(super) name: &'static str,
    pub(super) arguments: String,
    pub(super) result: String,
}

/// A small linear congruential generator: deterministic and dependency-free.
pub(super) struct Lcg(pub(super) u64);

impl Lcg {
    pub(super) fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        self.0 >> 33
    }

    pub(super) fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.next() as usize % items.len()]
    }

    /// A number below `n`.
    pub(super) fn below(&mut self, n: usize) -> usize {
        self.next() as usize % n.max(1)
    }
}

pub(super) const IDENTS: [&str; 12] = [
    "invoice",
    "ledger",
    "amount",
    "customer",
    "tax_rate",
    "currency",
    "posting",
    "batch",
    "retry",
    "config",
    "total",
    "line_item",
];

/// The agent's private reasoning before a step.
pub(super) fn reasoning(plan: &str, seed: u64) -> String {
    format!("Plan: {plan}. {}", filler(seed, 4))
}

/// A few sentences of an agent's ordinary narration.
pub(super) fn filler(seed: u64, sentences: usize) -> String {
    const SENTENCES: [&str; 10] = [
        "I want to confirm the behaviour before changing anything, so I will look at the code that owns it first.",
        "The tests around this area are thin, which makes me careful about the edge cases with zero and negative amounts.",
        "Keeping the change small matters here because the release is today and the reviewers want a short diff.",
        "The ledger and invoice modules share the cents type, so a change in one has to keep the other compiling.",
        "I will run the affected tests right after the edit so any regression shows up while the context is fresh.",
        "Nothing here touches the database schema, so the migrations can stay as they are for this release.",
        "The error messages should name the value that was wrong, since operators read them at three in the morning.",
        "I checked the surrounding functions for the same pattern so that the fix is applied consistently.",
        "This matches what the changelog will need to say, so I am noting it for the release summary.",
        "If this turns out to be wider than expected I will stop and ask rather than refactor on release day.",
    ];
    let mut rng = Lcg(seed ^ 0xf111);
    (0..sentences)
        .map(|_| SENTENCES[rng.next() as usize % SENTENCES.len()])
        .collect::<Vec<_>>()
        .join(" ")
}

pub(super) fn tool_read(file: &str, seed: u64, lines: usize) -> ToolUse {
    let mut rng = Lcg(seed ^ 0x5eed);
    let body: Vec<String> = (0..lines)
        .map(|i| {
            let (a, b) = (rng.pick(&IDENTS), rng.pick(&IDENTS));
            match rng.next() % 5 {
                0 => format!(
                    "{:4}  pub fn {a}_{b}(&self, {b}: u64) -> Result<u64> {{",
                    i + 1
                ),
                1 => format!(
                    "{:4}      let {a} = self.{b}.checked_mul({})?;",
                    i + 1,
                    rng.next() % 1000
                ),
                2 => format!(
                    "{:4}      // {a} is rounded to whole cents before {b}",
                    i + 1
                ),
                3 => format!("{:4}      Ok({a} + {b})", i + 1),
                _ => format!("{:4}  }}", i + 1),
            }
        })
        .collect();
    ToolUse {
        name: "read_file",
        arguments: json!({"path": file}).to_string(),
        result: body.join("\n"),
    }
}

pub(super) fn tool_grep(pattern: &str, seed: u64) -> ToolUse {
    let mut rng = Lcg(seed ^ 0x67e9);
    let hits: Vec<String> = (0..30 + rng.next() % 30)
        .map(|_| {
            format!(
                "src/{}.rs:{}:    let {} = {}; // {pattern}",
                rng.pick(&IDENTS),
                rng.next() % 900 + 1,
                rng.pick(&IDENTS),
                rng.pick(&IDENTS)
            )
        })
        .collect();
    ToolUse {
        name: "grep",
        arguments: json!({"pattern": pattern, "path": "src/"}).to_string(),
        result: hits.join("\n"),
    }
}

pub(super) fn tool_tests(seed: u64, failing: bool) -> ToolUse {
    let mut rng = Lcg(seed ^ 0x7e57);
    let count = 40 + rng.next() % 12;
    let mut lines = vec![format!("running {count} tests")];
    let mut failed = 0;
    for i in 0..count {
        let fail = failing && i % 17 == 5;
        failed += u64::from(fail);
        lines.push(format!(
            "test {}::tests::{}_{} ... {}",
            rng.pick(&IDENTS),
            rng.pick(&IDENTS),
            i,
            if fail { "FAILED" } else { "ok" }
        ));
    }
    lines.push(format!(
        "\ntest result: {}. {} passed; {failed} failed; 0 ignored; finished in {}.{:02}s",
        if failed > 0 { "FAILED" } else { "ok" },
        count - failed,
        rng.next() % 9,
        rng.next() % 100
    ));
    ToolUse {
        name: "run_tests",
        arguments: json!({"command": "cargo test"}).to_string(),
        result: lines.join("\n"),
    }
}

pub(super) fn tool_edit(file: &str, seed: u64) -> ToolUse {
    let mut rng = Lcg(seed ^ 0xed17);
    ToolUse {
        name: "edit_file",
        arguments: json!({
            "path": file,
            "old": format!("let {} = {};", rng.pick(&IDENTS), rng.pick(&IDENTS)),
            "new": format!("let {} = {}?;", rng.pick(&IDENTS), rng.pick(&IDENTS)),
        })
        .to_string(),
        result: format!("Edited {file}: 1 replacement."),
    }
}
