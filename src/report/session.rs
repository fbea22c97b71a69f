//! One session's section of the report: its facts, chart, compactions,
//! findings, facts traced, cost and policy, and its calls, each call's
//! context kept as data the page draws when the call is opened.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde_json::{Value, json};

use super::chart::{self, Series};
use super::{escape, json_script};
use crate::analysis::activity::Activity;
use crate::analysis::cost::{self, Prices, SessionCost, dollars};
use crate::analysis::findings::{self, Finding, FindingKind, Scope};
use crate::analysis::replay::{CallReplay, Compaction, paired};
use crate::analysis::why::{Fact, Trace, trace_with};
use crate::analysis::{PolicyChoice, ProjectionCache, most_common};
use crate::display::thousands;
use crate::engine::{ItemRef, Projected, Status};
use crate::model::{Kind, SessionLog, Text};
use crate::policy::PolicyBuilder;
use crate::tokens::Encoding;

/// What a section is made from.
pub struct Ask<'a> {
    pub session: &'a SessionLog,
    /// The sessions whose calls summarized for its compactions: their
    /// billed usage is its compactions' cost, as `stats` counts it.
    pub summarizers: Vec<&'a SessionLog>,
    pub activity: &'a Activity,
    pub choice: &'a PolicyChoice,
    pub prices: &'a Prices,
    /// The facts to trace (`--fact`), each as `why --text` takes it.
    pub facts: &'a [String],
    /// The section's anchor in the page.
    pub anchor: String,
    /// The session whose compactions this one's calls summarized for: its
    /// cost is counted there (as `stats` counts it), not in the totals again.
    pub counted_in: Option<String>,
}

/// A session's row in the fleet table.
pub struct Row {
    pub anchor: String,
    pub id: String,
    pub host: String,
    pub calls: usize,
    pub compactions: usize,
    pub findings: BTreeMap<&'static str, usize>,
    pub usd: f64,
    /// What cache breaks cost, by the findings' count.
    pub cache_break_usd: f64,
    /// The finding that lost the most tokens, in words.
    pub worst: String,
    /// Where its cost is counted, when in another session's.
    pub counted_in: Option<String>,
}

/// A section, and its row.
pub struct Section {
    pub row: Row,
    pub html: String,
}

/// The most characters of text a session's data keeps in all: an event's
/// text is cut to its share (between the bounds below), its size shown.
const TEXT_BUDGET: usize = 1_000_000;
const TEXT_MIN: usize = 12;
const TEXT_MAX: usize = 2_000;

/// The most findings of a kind listed (those that wasted most).
const FINDINGS_SHOWN: usize = 50;

pub fn section(ask: &Ask) -> Section {
    let session = ask.session;
    let mut cache = ProjectionCache::default();
    let scope = Scope {
        session,
        choice: ask.choice,
        prices: ask.prices,
        fixes: true,
    };
    let mut replays: Vec<CallReplay> = Vec::new();
    let mut contexts = Contexts::default();
    let mut budget = (0u64, 0u64);
    let found = findings::walk(&scope, &mut cache, |replayed, projected| {
        replays.push(replayed.clone());
        contexts.push(projected);
        if let Some(p) = projected {
            budget = (p.budget.usable, p.budget.target);
        }
    });
    let compactions = paired(session, &replays);
    let cost = session_cost(ask, &replays, &mut cache);
    let traces: Vec<(&String, Result<Trace, String>)> = (ask.facts.iter())
        .map(|f| {
            let fact = Fact::Texts(vec![f.clone()]);
            (f, trace_with(session, &fact, ask.choice, &mut cache))
        })
        .collect();
    let position = |id: i64| replays.iter().position(|r| r.call == id);
    let series = Series {
        calls: replays.iter().map(|r| r.call).collect(),
        projected: replays.iter().map(|r| r.total_tokens).collect(),
        calibrated: replays.iter().map(|r| r.calibrated_tokens).collect(),
        reported: (replays.iter())
            .map(|r| r.reported_input_tokens.map(|t| t.max(0) as u64))
            .collect(),
        window: budget.0,
        threshold: budget.1,
        host_compactions: (compactions.iter())
            .filter_map(|c| c.host_call.and_then(position))
            .collect(),
        predicted: (compactions.iter())
            .filter(|c| c.host_call.is_none())
            .filter_map(|c| c.predicted_call.and_then(position))
            .collect(),
        findings: {
            let mut at: Vec<usize> = found.iter().filter_map(|f| position(f.call)).collect();
            at.dedup();
            at
        },
    };
    let row = Row {
        anchor: ask.anchor.clone(),
        id: session.id().to_string(),
        host: host(session),
        calls: session.calls.len(),
        compactions: compactions.iter().filter(|c| c.host_call.is_some()).count(),
        findings: findings::counts(&found),
        usd: cost.usd,
        cache_break_usd: (found.iter())
            .filter(|f| f.kind == FindingKind::CacheBreak)
            .filter_map(|f| f.cost_usd)
            .sum(),
        worst: (found.iter())
            .filter(|f| matches!(f.kind, FindingKind::ReRead | FindingKind::Restated))
            .max_by_key(|f| f.tokens.unwrap_or(0))
            .map_or(String::new(), |f| {
                format!("call {}: {}", f.call, first_line(&f.message))
            }),
        counted_in: ask.counted_in.clone(),
    };
    let mut html = String::new();
    let h = &mut html;
    let _ = write!(
        h,
        "<section class=\"session\" id=\"{}\"><h2>Session {}</h2>",
        ask.anchor,
        escape(session.id())
    );
    facts(h, ask, &row, &replays, &cost);
    let _ = write!(
        h,
        "<figure>{}<figcaption>{}</figcaption></figure>",
        chart::svg(&series, 960, 340),
        legend()
    );
    compactions_html(h, session, &compactions, &replays, &found);
    findings_html(h, &found);
    traces_html(h, &traces);
    cost_html(h, &cost);
    let _ = write!(
        h,
        "<h3>Policy</h3><pre class=\"policy\">{}</pre>",
        escape(&policy_toml(session, ask.choice))
    );
    calls_html(h, ask, &replays, &found);
    let encoding = encoding(session, ask.choice, &mut cache);
    let counts = cache.counts(session, encoding);
    let mut data = events(session, &counts.events);
    data["summaries"] = (session.summaries.iter())
        .map(|s| {
            json!([
                s.version,
                s.from_seq,
                s.to_seq,
                cut(&s.content, TEXT_MAX),
                s.content.chars().count()
            ])
        })
        .collect();
    data["calls"] = Value::Array(contexts.calls);
    let _ = write!(
        h,
        "<script type=\"application/json\" class=\"session-data\" data-for=\"{}\">{}</script></section>",
        ask.anchor,
        json_script(&data)
    );
    Section { row, html }
}

/// The host the session's import names, else ctxlens (a log it wrote).
fn host(session: &SessionLog) -> String {
    let meta = (session.session.meta.as_deref())
        .and_then(|m| serde_json::from_str::<Value>(m).ok())
        .unwrap_or_default();
    meta["source"].as_str().unwrap_or("ctxlens").to_string()
}

/// The model most of the calls name.
fn model(session: &SessionLog) -> String {
    let models = session
        .calls
        .iter()
        .map(|c| c.model.as_deref().unwrap_or("?"));
    most_common(models).unwrap_or("none").to_string()
}

fn session_cost(ask: &Ask, replays: &[CallReplay], cache: &mut ProjectionCache) -> SessionCost {
    let summarizers = &ask.summarizers;
    cost::priced(
        ask.session,
        replays,
        summarizers,
        ask.choice,
        ask.prices,
        cache,
    )
    .1
}

/// The encoding the session's first call is counted in under `choice`.
fn encoding(session: &SessionLog, choice: &PolicyChoice, cache: &mut ProjectionCache) -> Encoding {
    (session.calls.first())
        .and_then(|c| cache.shared_policy(choice, c).ok())
        .map_or(Encoding::default(), |p| p.budget.encoding)
}

fn facts(h: &mut String, ask: &Ask, row: &Row, replays: &[CallReplay], cost: &SessionCost) {
    let session = ask.session;
    let first = session.events.first().map(|e| e.ts.to_string());
    let last = session.events.last().map(|e| e.ts.to_string());
    let duration = match (first, last) {
        (Some(a), Some(b)) => format!("{a} to {b}"),
        _ => "no events".into(),
    };
    let sent: u64 = (replays.iter())
        .map(|r| r.calibrated_tokens.unwrap_or(r.total_tokens))
        .sum();
    let mut priced = match cost.billed_calls + cost.estimated_calls {
        0 => "unknown (no model priced)".to_string(),
        _ => format!(
            "{} ({} call{} billed as reported, {} estimated from the projection; prices of {})",
            dollars(cost.usd),
            cost.billed_calls,
            if cost.billed_calls == 1 { "" } else { "s" },
            cost.estimated_calls,
            cost.prices_as_of
        ),
    };
    if let Some(parent) = &ask.counted_in {
        priced.push_str(&format!(
            "; its calls summarized for session {parent}, whose compaction cost counts them"
        ));
    }
    // Where the transcript was, by its name alone: a shared page holds no
    // local paths.
    let mut state = ask.activity.explain();
    if let Some(path) = &ask.activity.imported_from {
        let name = std::path::Path::new(path)
            .file_name()
            .map(|n| n.to_string_lossy());
        state = state.replace(path.as_str(), &name.unwrap_or_default());
    }
    let title = session.session.title.as_deref().unwrap_or("");
    let rows = [
        ("title", title.to_string()),
        ("host", row.host.clone()),
        ("model", model(session)),
        ("calls", session.calls.len().to_string()),
        ("tokens sent", thousands(sent)),
        ("time", duration),
        ("cost", priced),
        ("state", state),
    ];
    h.push_str("<dl class=\"facts\">");
    for (name, value) in rows.iter().filter(|(_, v)| !v.is_empty()) {
        let _ = write!(h, "<dt>{name}</dt><dd>{}</dd>", escape(value));
    }
    h.push_str("</dl>");
}

fn legend() -> String {
    let mut out = String::from("<ul class=\"legend\">");
    for (class, words) in chart::LEGEND {
        let _ = write!(out, "<li><span class=\"key {class}\"></span>{words}</li>");
    }
    out.push_str("</ul>");
    out
}

/// The compactions, the host's and the policy's, each with the summary in
/// force after it, what it covered, and what later calls needed of what it
/// took away (the findings whose lost event it covered).
fn compactions_html(
    h: &mut String,
    session: &SessionLog,
    compactions: &[Compaction],
    replays: &[CallReplay],
    found: &[Finding],
) {
    let _ = write!(h, "<h3>Compactions ({})</h3>", compactions.len());
    if compactions.is_empty() {
        h.push_str("<p class=\"none\">None: neither the host nor the policy compacted.</p>");
        return;
    }
    h.push_str("<ol class=\"compactions\">");
    for c in compactions {
        let at = c.host_call.or(c.predicted_call).unwrap_or(0);
        let who = match (c.host_call, c.predicted_call) {
            (Some(_), Some(p)) if p == at => {
                "the host compacted; the policy predicts it here".into()
            }
            (Some(_), Some(p)) => format!("the host compacted; the policy predicts it at call {p}"),
            (Some(_), None) => "the host compacted; the policy does not predict it".into(),
            (None, _) => "the policy compacts here; the host did not".into(),
        };
        let _ = write!(
            h,
            "<li><p><b>call {at}</b> ({}): {}</p>",
            escape(c.kind),
            escape(&who)
        );
        let version = (replays.iter().find(|r| r.call == at)).and_then(|r| r.summary_version);
        let summary = version.and_then(|v| session.summaries.iter().find(|s| s.version == v));
        match summary {
            Some(s) => {
                let _ = write!(
                    h,
                    "<p>Summary v{} covers events {} to {}:</p><blockquote class=\"summary\">{}</blockquote>",
                    s.version,
                    s.from_seq,
                    s.to_seq,
                    escape(&cut(&s.content, 4_000))
                );
                let lost: Vec<&Finding> = (found.iter())
                    .filter(|f| matches!(f.kind, FindingKind::ReRead | FindingKind::Restated))
                    .filter(|f| f.call > at)
                    .filter(|f| {
                        f.seqs
                            .first()
                            .is_some_and(|&q| (s.from_seq..=s.to_seq).contains(&q))
                    })
                    .collect();
                if !lost.is_empty() {
                    h.push_str("<p>It took away what later calls needed again:</p><ul>");
                    for f in lost {
                        let _ = write!(h, "<li>call {}: {}</li>", f.call, escape(&f.message));
                    }
                    h.push_str("</ul>");
                }
            }
            None => h.push_str("<p>No summary text is recorded for it.</p>"),
        }
        h.push_str("</li>");
    }
    h.push_str("</ol>");
}

fn findings_html(h: &mut String, found: &[Finding]) {
    let _ = write!(h, "<h3>Findings ({})</h3>", found.len());
    if found.is_empty() {
        let _ = write!(h, "<p class=\"none\">{}</p>", escape(findings::NONE));
        return;
    }
    for kind in FindingKind::ALL {
        let of: Vec<&Finding> = found.iter().filter(|f| f.kind == kind).collect();
        if of.is_empty() {
            continue;
        }
        let _ = write!(
            h,
            "<details class=\"findings\" open><summary>{} ({}){}</summary><ul>",
            kind.name(),
            of.len(),
            escape(&findings::wasted(&of))
        );
        // The ones that wasted most, in call order; the rest counted.
        let mut shown = of.clone();
        shown.sort_by_key(|f| std::cmp::Reverse(f.tokens.unwrap_or(0)));
        let rest = shown.split_off(shown.len().min(FINDINGS_SHOWN));
        shown.sort_by_key(|f| (f.call, f.seqs.clone()));
        for f in shown {
            let fix = f.fix.as_ref().map_or(String::new(), |fix| {
                format!(
                    " <span class=\"fix\">{}</span>",
                    escape(&findings::fix_line(fix))
                )
            });
            let _ = write!(
                h,
                "<li>call {} (events {}): {}{fix}</li>",
                f.call,
                escape(&seqs(&f.seqs)),
                escape(&f.message)
            );
        }
        if !rest.is_empty() {
            let _ = write!(
                h,
                "<li class=\"none\">and {} more{} (`ctxlens findings` lists them all)</li>",
                rest.len(),
                escape(&findings::wasted(&rest))
            );
        }
        h.push_str("</ul></details>");
    }
}

fn traces_html(h: &mut String, traces: &[(&String, Result<Trace, String>)]) {
    if traces.is_empty() {
        return;
    }
    h.push_str("<h3>Facts traced</h3>");
    for (fact, trace) in traces {
        let _ = write!(h, "<div class=\"trace\"><p><b>{}</b>: ", escape(fact));
        match trace {
            Err(e) => {
                let _ = write!(h, "{}</p>", escape(e));
            }
            Ok(t) => {
                let _ = write!(h, "{}</p>", escape(&t.verdict));
                if !t.stretches.is_empty() {
                    h.push_str("<ul>");
                    for s in &t.stretches {
                        let back = s.regained.as_ref().map_or(String::new(), |r| {
                            format!("; back at call {}: {}", r.call, r.how)
                        });
                        let _ = write!(
                            h,
                            "<li>calls {} to {}: {} by {}{}</li>",
                            s.from_call,
                            s.to_call,
                            escape(&s.reason),
                            escape(&s.reducer),
                            escape(&back)
                        );
                    }
                    h.push_str("</ul>");
                }
                if let Some(fix) = t.fixes.first() {
                    let _ = write!(h, "<p>Kept by: <code>{}</code></p>", escape(&fix.command()));
                }
            }
        }
        h.push_str("</div>");
    }
}

fn cost_html(h: &mut String, c: &SessionCost) {
    let k = &c.compaction;
    h.push_str("<h3>Cost</h3><table class=\"cost\"><tbody>");
    let rows = [
        ("the session", dollars(c.usd)),
        (
            "kept out of the calls by compaction (at the cache-read rate)",
            dollars(k.kept_out_usd),
        ),
        (
            "the cache written again after compactions",
            dollars(k.rewrite_usd),
        ),
        ("the summarizer's calls", dollars(k.summarizer_usd)),
        (
            if k.net_saved_usd >= 0.0 {
                "compaction saved"
            } else {
                "compaction cost more than it saved"
            },
            dollars(k.net_saved_usd.abs()),
        ),
    ];
    for (name, value) in rows {
        let _ = write!(h, "<tr><th scope=\"row\">{name}</th><td>{value}</td></tr>");
    }
    h.push_str("</tbody></table>");
    if !c.unpriced_models.is_empty() {
        let _ = write!(
            h,
            "<p>Without a price (left out): {}.</p>",
            escape(&c.unpriced_models.join(", "))
        );
    }
}

/// The policy the calls were projected under, as a file `--policy` takes:
/// the file chosen, or the first call's recorded policy with the `--set`s.
fn policy_toml(session: &SessionLog, choice: &PolicyChoice) -> String {
    if let Some((_, text)) = &choice.file {
        let mut builder = PolicyBuilder::new();
        builder = builder.clone().file("policy", text).unwrap_or(builder);
        for set in &choice.sets {
            builder = builder.clone().set(set).unwrap_or(builder);
        }
        return builder.overrides_toml();
    }
    let first = session.calls.iter().min_by_key(|c| c.id);
    let recorded = first.and_then(|c| c.policy.as_deref());
    match crate::analysis::tune::policy_file(&choice.sets, recorded) {
        text if text.trim().is_empty() => "# the defaults: no key set\n".into(),
        text => text,
    }
}

/// The calls, each a row that opens on its context.
fn calls_html(h: &mut String, ask: &Ask, replays: &[CallReplay], found: &[Finding]) {
    let _ = write!(
        h,
        "<h3>Calls ({})</h3><div class=\"calls\" data-for=\"{}\">",
        replays.len(),
        ask.anchor
    );
    for (i, r) in replays.iter().enumerate() {
        let sent = r.calibrated_tokens.unwrap_or(r.total_tokens);
        let reported = r
            .reported_input_tokens
            .map_or(String::new(), |t| format!(", reported {}", thousands(t)));
        let marks = found.iter().filter(|f| f.call == r.call).count();
        let notes = [
            (r.compacted, "compacted".to_string()),
            (r.over_budget, "over budget".to_string()),
            (
                marks > 0,
                format!("{marks} finding{}", if marks == 1 { "" } else { "s" }),
            ),
            (!r.matches_record, "differs from its record".to_string()),
        ];
        let notes: Vec<&str> = (notes.iter())
            .filter(|(on, _)| *on)
            .map(|(_, n)| n.as_str())
            .collect();
        let _ = write!(
            h,
            "<details class=\"call\" data-index=\"{i}\" id=\"{}-c{}\"><summary>call {} · turn {} · {} tokens{}{}</summary><div class=\"context\"></div></details>",
            ask.anchor,
            r.call,
            r.call,
            r.turn,
            thousands(sent),
            escape(&reported),
            match notes.is_empty() {
                true => String::new(),
                false => format!(" · {}", escape(&notes.join(", "))),
            }
        );
    }
    h.push_str("</div>");
}

/// Each call's context, as what changed since the call before, so a long
/// session's page stays small: `d`, runs of events whose disposition
/// changed, `[first event index, count, disposition]` (`v` verbatim, `p`
/// pinned, `z` summarized, `x` dropped; sent at the event's own tokens or
/// not at all), or `[index, 1, disposition, tokens]` for a stubbed (`s`)
/// or truncated (`t`) one; and `x`, what it sent besides events:
/// `["s", summary index, tokens]`, `["p" or "g", from_seq, to_seq,
/// tokens]` (a placeholder, the engine's own text), `["i", text, tokens]`
/// (an injection), `["r", record index, tokens]`. A call that could not be
/// projected is null.
#[derive(Default)]
struct Contexts {
    /// Each event's disposition and tokens as last sent.
    last: Vec<(u8, u32)>,
    calls: Vec<Value>,
}

impl Contexts {
    fn push(&mut self, projected: Option<&Projected>) {
        let Some(p) = projected else {
            self.calls.push(Value::Null);
            return;
        };
        let mut runs: Vec<Value> = Vec::new();
        let mut open: Option<(usize, usize, u8)> = None;
        let close = |open: &mut Option<(usize, usize, u8)>, runs: &mut Vec<Value>| {
            if let Some((ix, n, code)) = open.take() {
                runs.push(json!([ix, n, (code as char).to_string()]));
            }
        };
        if self.last.len() < p.slots.len() {
            self.last.resize(p.slots.len(), (0, 0));
        }
        for (ix, slot) in p.slots.iter().enumerate() {
            let code = match slot.status {
                Status::Verbatim => b'v',
                Status::Pinned => b'p',
                Status::Stubbed => b's',
                Status::Truncated => b't',
                Status::Summarized => b'z',
                Status::Dropped => b'x',
            };
            let now = (code, slot.tokens);
            if self.last[ix] == now {
                continue;
            }
            self.last[ix] = now;
            if matches!(code, b's' | b't') {
                close(&mut open, &mut runs);
                runs.push(json!([ix, 1, (code as char).to_string(), slot.tokens]));
                continue;
            }
            match &mut open {
                Some((first, n, c)) if *first + *n == ix && *c == code => *n += 1,
                _ => {
                    close(&mut open, &mut runs);
                    open = Some((ix, 1, code));
                }
            }
        }
        close(&mut open, &mut runs);
        let besides: Vec<Value> = (p.order.iter().zip(p.order_tokens.iter()))
            .filter_map(|(item, &tokens)| {
                Some(match *item {
                    ItemRef::Event(..) => return None,
                    ItemRef::Summary(s) => json!(["s", s, tokens]),
                    ItemRef::Placeholder(span) => json!(["p", span.from_seq, span.to_seq, tokens]),
                    ItemRef::Generated(span) => json!(["g", span.from_seq, span.to_seq, tokens]),
                    ItemRef::Injection(i) => json!([
                        "i",
                        (p.injections.get(i)).map_or(String::new(), |j| cut(&j.content, TEXT_MAX)),
                        tokens
                    ]),
                    ItemRef::Recorded(i) => json!(["r", i, tokens]),
                })
            })
            .collect();
        self.calls.push(json!({"d": runs, "x": besides}));
    }
}

/// The events, a column each, so a long session's page stays small:
/// `seq0` and `gaps` (each seq's step from the one before, where not all
/// 1), `kinds` (a letter an event: `s`ystem, `u`ser, `a`ssistant,
/// `r`easoning, tool `c`all, tool resul`t`, co`m`paction, `x` unknown),
/// `tools` (names) and `tool` (each event's, 1-based, 0 for none),
/// `tokens` (as the log holds it), `texts` (cut to the session's share of
/// the page) and `chars` (a cut text's whole length, else 0).
fn events(session: &SessionLog, tokens: &[u32]) -> Value {
    let events = &session.events;
    let share = (TEXT_BUDGET / events.len().max(1)).clamp(TEXT_MIN, TEXT_MAX);
    let mut texts: Vec<(String, usize)> = vec![(String::new(), 0); events.len()];
    Text::each(events.iter().map(|e| &e.content), |at, text| {
        let whole = text.chars().count();
        texts[at] = (cut(&text, share), if whole > share { whole } else { 0 });
    });
    let mut tools: Vec<&str> = Vec::new();
    let tool: Vec<usize> = (events.iter())
        .map(|e| match e.tool_name.as_deref() {
            None => 0,
            Some(name) => match tools.iter().position(|t| *t == name) {
                Some(at) => at + 1,
                None => {
                    tools.push(name);
                    tools.len()
                }
            },
        })
        .collect();
    let kinds: String = (events.iter())
        .map(|e| match e.kind {
            Kind::System => 's',
            Kind::User => 'u',
            Kind::Assistant => 'a',
            Kind::Reasoning => 'r',
            Kind::ToolCall => 'c',
            Kind::ToolResult => 't',
            Kind::Compaction => 'm',
            Kind::Unknown => 'x',
        })
        .collect();
    let steps: Vec<i64> = (events.windows(2)).map(|w| w[1].seq - w[0].seq).collect();
    let (texts, chars): (Vec<String>, Vec<usize>) = texts.into_iter().unzip();
    json!({
        "seq0": events.first().map_or(0, |e| e.seq),
        "gaps": if steps.iter().all(|&s| s == 1) { Value::Null } else { json!(steps) },
        "kinds": kinds,
        "tools": tools,
        "tool": tool,
        "tokens": tokens,
        "texts": texts,
        "chars": chars,
    })
}

/// `text`'s first `max` characters, and an ellipsis where it is longer.
fn cut(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_string(),
    }
}

fn first_line(text: &str) -> String {
    cut(text.lines().next().unwrap_or(""), 100)
}

/// Seqs as ranges: 3, 5-9.
fn seqs(seqs: &[i64]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < seqs.len() {
        let mut j = i;
        while j + 1 < seqs.len() && seqs[j + 1] == seqs[j] + 1 {
            j += 1;
        }
        parts.push(match i == j {
            true => seqs[i].to_string(),
            false => format!("{}-{}", seqs[i], seqs[j]),
        });
        i = j + 1;
    }
    parts.join(", ")
}
