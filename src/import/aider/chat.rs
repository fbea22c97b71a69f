//! Aider's chat history (`.aider.chat.history.md`), as
//! `InputOutput.append_chat_history` writes it (Aider-AI/aider
//! `aider/io.py`): each run opens with `# aider chat started at <time>`;
//! the user's input is `#### ` lines (`user_input`); the assistant's
//! answer is plain text (`ai_output`); what Aider itself prints is a
//! block quote opened by `> ` (`tool_output`, `tool_error`, `confirm_ask`),
//! among it the announcements (`Main model: ...`, `Weak model: ...`) and,
//! after each answer, `Tokens: 2.3k sent, 150 received. Cost: ...`.

/// One run of Aider in the chat history.
#[derive(Clone, Debug, Default)]
pub struct Run {
    /// Its header's line and time (Aider's local time, as written).
    pub line: usize,
    pub started: String,
    pub main_model: Option<String>,
    pub weak_model: Option<String>,
    /// The main model's input limit, where `/tokens` printed it.
    pub max_input: Option<u64>,
    pub entries: Vec<Entry>,
}

/// What a run holds, in order.
#[derive(Clone, Debug, PartialEq)]
pub enum Entry {
    /// What the user typed (a command too), its lines joined.
    Input(String),
    /// The assistant's answer.
    Answer(String),
    /// A usage line Aider printed: sent (cache write included), cache
    /// write, cache hit, received; rounded as Aider shows them.
    Tokens {
        sent: i64,
        cache_write: i64,
        cache_hit: i64,
        received: i64,
    },
}

impl Entry {
    /// The usage a usage line gives: Aider's `sent` as the input (it holds
    /// what the provider read from its cache or not, as Aider counted),
    /// its cache hit and write, its `received` as the output; each rounded
    /// as Aider printed it.
    pub fn usage(&self) -> Option<crate::model::Usage> {
        let Entry::Tokens {
            sent,
            cache_write,
            cache_hit,
            received,
        } = *self
        else {
            return None;
        };
        Some(crate::model::Usage {
            input_tokens: Some(sent),
            cache_read_tokens: Some(cache_hit),
            cache_write_tokens: Some(cache_write),
            output_tokens: Some(received),
            ..crate::model::Usage::default()
        })
    }
}

/// Whether `text` holds a run of Aider's chat history.
pub fn looks_like(text: &str) -> bool {
    text.lines().take(200).any(|l| l.starts_with(HEADER))
}

const HEADER: &str = "# aider chat started at ";

/// The runs of the chat history `text`.
pub fn runs(text: &str) -> Vec<Run> {
    let mut runs: Vec<Run> = Vec::new();
    // The answer being read: its lines since the input before it.
    let mut answer: Vec<&str> = Vec::new();
    let mut input: Option<Vec<String>> = None;
    // Whether the lines now go on a block quote: Aider marks only the
    // first line of what it prints, and ends it with a blank line.
    let mut quoting = false;
    let flush = |runs: &mut Vec<Run>, answer: &mut Vec<&str>, input: &mut Option<Vec<String>>| {
        let Some(run) = runs.last_mut() else {
            answer.clear();
            return;
        };
        if let Some(lines) = input.take() {
            run.entries.push(Entry::Input(lines.join("\n")));
        }
        let text = answer.join("\n");
        if !text.trim().is_empty() {
            run.entries.push(Entry::Answer(text.trim().to_string()));
        }
        answer.clear();
    };
    for (i, raw) in text.lines().enumerate() {
        let line = raw.strip_suffix('\r').unwrap_or(raw);
        if let Some(at) = line.strip_prefix(HEADER) {
            quoting = false;
            flush(&mut runs, &mut answer, &mut input);
            runs.push(Run {
                line: i + 1,
                started: at.trim().to_string(),
                ..Run::default()
            });
            continue;
        }
        if let Some(typed) = line.strip_prefix("#### ") {
            // A run of `#### ` lines is one input (Aider writes each of its
            // lines so); an answer before it ends.
            quoting = false;
            if input.is_none() {
                flush(&mut runs, &mut answer, &mut input);
            }
            let typed = typed.strip_suffix("  ").unwrap_or(typed);
            input.get_or_insert_with(Vec::new).push(typed.to_string());
            continue;
        }
        if line == "####" {
            input.get_or_insert_with(Vec::new).push(String::new());
            continue;
        }
        if let Some(quoted) = line.strip_prefix("> ").or((line == ">").then_some("")) {
            flush(&mut runs, &mut answer, &mut input);
            quoting = true;
            let quoted = quoted.trim_end();
            if let Some(run) = runs.last_mut() {
                if let Some(tokens) = tokens(quoted) {
                    run.entries.push(tokens);
                } else if let Some(model) = announced(quoted, &["Main model:", "Models:", "Model:"])
                {
                    run.main_model = Some(model);
                    run.weak_model = weak_in(quoted).or(run.weak_model.take());
                } else if let Some(model) = announced(quoted, &["Weak model:"]) {
                    run.weak_model = Some(model);
                } else if let Some(limit) = window(quoted) {
                    run.max_input = Some(limit);
                }
            }
            continue;
        }
        if quoting {
            quoting = !line.trim().is_empty();
            continue;
        }
        if input.is_some() && line.trim().is_empty() {
            // The blank line after an input.
            flush(&mut runs, &mut answer, &mut input);
            continue;
        }
        if input.is_some() {
            flush(&mut runs, &mut answer, &mut input);
        }
        answer.push(line);
    }
    flush(&mut runs, &mut answer, &mut input);
    // Without a weak model of its own, the main model is the weak model.
    for run in &mut runs {
        if run.weak_model.is_none() {
            run.weak_model = run.main_model.clone();
        }
    }
    runs
}

/// The model an announcement line names (`Main model: X with diff edit
/// format, ...`), and the weak model it may add (`..., weak model Y`).
fn announced(line: &str, openings: &[&str]) -> Option<String> {
    let rest = openings.iter().find_map(|o| line.strip_prefix(o))?;
    let name = rest.trim().split([' ', ',']).next()?;
    (!name.is_empty()).then(|| name.to_string())
}

/// The limit `/tokens` prints (`cmd_tokens`): `128,000 tokens max context
/// window size`, after a column of cost.
fn window(line: &str) -> Option<u64> {
    let number = line.strip_suffix(" tokens max context window size")?;
    let number = number.split_whitespace().last()?.replace(',', "");
    number.parse().ok()
}

/// A usage line: `Tokens: 2.3k sent, 1.2k cache write, 3.4k cache hit,
/// 150 received.` (then, where priced, `Cost: ...`).
fn tokens(line: &str) -> Option<Entry> {
    let rest = line.strip_prefix("Tokens: ")?;
    let counts = rest.split_once(". ").map_or(rest, |(c, _)| c);
    let counts = counts.trim_end_matches('.');
    let (mut sent, mut cache_write, mut cache_hit, mut received) = (None, 0, 0, None);
    for part in counts.split(", ") {
        let (number, what) = part.split_once(' ')?;
        let n = count(number)?;
        match what {
            "sent" => sent = Some(n),
            "cache write" => cache_write = n,
            // `cached` in Aider before 0.58.
            "cache hit" | "cached" => cache_hit = n,
            "received" => received = Some(n),
            _ => {}
        }
    }
    Some(Entry::Tokens {
        sent: sent?,
        cache_write,
        cache_hit,
        received: received?,
    })
}

/// A count as `format_tokens` writes it (`950`, `2.3k`, `12k`, `1.2M`), or
/// as Aider wrote it before (`12,345`).
fn count(text: &str) -> Option<i64> {
    let text = text.replace(',', "");
    let text = text.as_str();
    let (digits, scale) = match text.chars().last()? {
        'k' => (&text[..text.len() - 1], 1_000.0),
        'M' => (&text[..text.len() - 1], 1_000_000.0),
        _ => (text, 1.0),
    };
    let n: f64 = digits.parse().ok()?;
    (n.is_finite() && n >= 0.0).then(|| (n * scale).round() as i64)
}

/// The weak model a `Main model` line names after it, where it does
/// (`Models: X with diff edit format, weak model Y`).
fn weak_in(line: &str) -> Option<String> {
    let (_, rest) = line.split_once("weak model ")?;
    rest.split([' ', ',']).next().map(str::to_string)
}
