//! `ctxlens report`: one self-contained HTML page to share what happened to
//! an agent's context: a section per session (its facts, a chart of tokens
//! per call, its compactions, findings, facts traced, cost and policy, and
//! each call's context on demand), and for several sessions a fleet table
//! on top. Everything from the log is escaped; the page loads nothing from
//! anywhere (its style and script are in it), and draws a call's context
//! from data kept in the page only when the call is opened.

mod chart;
pub mod session;

use std::fmt::Write as _;

pub use session::{Ask, Row, Section, section};

use crate::analysis::cost::dollars;
use crate::analysis::findings::FindingKind;

const STYLE: &str = include_str!("../../assets/report.css");
const SCRIPT: &str = include_str!("../../assets/report.js");

/// The page: a title, the fleet table where there are several sessions,
/// then each section.
pub fn page(title: &str, sections: &[Section]) -> String {
    let mut h =
        String::with_capacity(sections.iter().map(|s| s.html.len()).sum::<usize>() + 16_384);
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <meta name=\"color-scheme\" content=\"light dark\">\
         <title>ctxlens report: {}</title><style>{STYLE}</style></head><body>\
         <header><h1>ctxlens report: {}</h1><p>{} session{} · made by ctxlens {}</p></header><main>",
        escape(title),
        escape(title),
        sections.len(),
        if sections.len() == 1 { "" } else { "s" },
        env!("CARGO_PKG_VERSION")
    );
    if sections.len() > 1 {
        fleet(&mut h, sections);
    }
    for s in sections {
        h.push_str(&s.html);
    }
    let _ = writeln!(h, "</main><script>{SCRIPT}</script></body></html>");
    h
}

/// The fleet table: totals on top, then a row per session, sortable by any
/// column (the script sorts by each cell's `data-sort`).
fn fleet(h: &mut String, sections: &[Section]) {
    let rows: Vec<&Row> = sections.iter().map(|s| &s.row).collect();
    // A summarizer's cost is in the session it served.
    let usd: f64 = (rows.iter())
        .filter(|r| r.counted_in.is_none())
        .map(|r| r.usd)
        .sum();
    let breaks: f64 = rows.iter().map(|r| r.cache_break_usd).sum();
    let calls: usize = rows.iter().map(|r| r.calls).sum();
    let compactions: usize = rows.iter().map(|r| r.compactions).sum();
    let found: usize = rows.iter().flat_map(|r| r.findings.values()).sum();
    let _ = write!(
        h,
        "<section class=\"fleet\"><h2>Sessions</h2><p class=\"totals\">{} sessions · {calls} calls · \
         {compactions} compactions · {found} findings · {} in all, {} lost to cache breaks</p>\
         <div class=\"scroll\"><table class=\"sortable\"><thead><tr><th>session</th><th>host</th><th>calls</th>\
         <th>compactions</th>",
        rows.len(),
        dollars(usd),
        dollars(breaks)
    );
    for kind in FindingKind::ALL {
        let _ = write!(h, "<th>{}</th>", kind.name());
    }
    h.push_str(
        "<th>dollars</th><th>cache breaks</th><th>worst forgetting</th></tr></thead><tbody>",
    );
    for r in rows {
        let _ = write!(
            h,
            "<tr><td data-sort=\"{}\"><a href=\"#{}\">{}</a></td><td>{}</td><td data-sort=\"{}\">{}</td><td data-sort=\"{}\">{}</td>",
            escape(&r.id),
            r.anchor,
            escape(&r.id),
            escape(&r.host),
            r.calls,
            r.calls,
            r.compactions,
            r.compactions
        );
        for kind in FindingKind::ALL {
            let n = r.findings.get(kind.name()).copied().unwrap_or(0);
            let _ = write!(h, "<td data-sort=\"{n}\">{n}</td>");
        }
        let _ = write!(
            h,
            "<td data-sort=\"{}\">{}</td><td data-sort=\"{}\">{}</td><td class=\"worst\">{}</td></tr>",
            r.usd,
            match &r.counted_in {
                None => dollars(r.usd),
                Some(parent) => format!("{} (in {})", dollars(r.usd), escape(parent)),
            },
            r.cache_break_usd,
            dollars(r.cache_break_usd),
            escape(&r.worst)
        );
    }
    h.push_str("</tbody></table></div></section>");
}

/// Text as HTML shows it, inert: `&`, `<`, `>` and quotes escaped.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// JSON to sit inside a `<script type="application/json">`: `<`, `>` and
/// `&` as JSON escapes, so no text of the log can close the element.
pub fn json_script(value: &serde_json::Value) -> String {
    let text = serde_json::to_string(value).unwrap_or_else(|_| "null".into());
    text.replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026")
}
