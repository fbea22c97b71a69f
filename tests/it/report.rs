//! `ctxlens report`: the page parsed as a browser parses it, its numbers
//! against the other commands', hostile text kept inert, a fleet page, a
//! long session's size, and the page in headless Chromium (skipped, saying
//! so, where Chromium is not installed; `.ci/run` installs it).

use std::path::{Path, PathBuf};
use std::process::Command;

use scraper::{Html, Selector};
use serde_json::Value;

use crate::common::json_run;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// `ctxlens ARGS...` with the cache in `dir`; its stdout, after checking
/// it exited 0 or 1.
fn ctxlens(dir: &Path, args: &[&std::ffi::OsStr]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_ctxlens"))
        .env("XDG_CACHE_HOME", dir.join("cache"))
        .args(args)
        .output()
        .unwrap();
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "ctxlens {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The report of `paths` (with `extra` arguments), parsed; its text too.
fn report(dir: &Path, paths: &[&Path], extra: &[&str]) -> (Html, String) {
    let out = dir.join("report.html");
    let mut args: Vec<&std::ffi::OsStr> = vec!["report".as_ref()];
    args.extend(paths.iter().map(|p| p.as_os_str()));
    args.extend(extra.iter().map(std::ffi::OsStr::new));
    args.extend(["-o".as_ref(), out.as_os_str()]);
    ctxlens(dir, &args);
    let text = std::fs::read_to_string(&out).unwrap();
    (Html::parse_document(&text), text)
}

fn select<'a>(html: &'a Html, css: &str) -> Vec<scraper::ElementRef<'a>> {
    html.select(&Selector::parse(css).unwrap()).collect()
}

/// A Claude Code session with two compactions: the page parses without an
/// error, marks each compaction the host made on its chart, holds each
/// summary, the findings, the fact traced, the cost `stats` gives, and a
/// row per call that opens on its context.
#[test]
fn a_session_page_shows_its_compactions_findings_and_cost() {
    let dir = tempfile::TempDir::new().unwrap();
    let src = fixture("claude-code/v2.1-auto-compact.jsonl");
    let (html, _) = report(dir.path(), &[&src], &["--fact", "tokenizer"]);
    assert!(html.errors.is_empty(), "{:?}", html.errors);
    let replay = json_run("replay", &src, &[]);
    let host: Vec<&Value> = (replay["compactions"].as_array().unwrap().iter())
        .filter(|c| !c["host_call"].is_null())
        .collect();
    assert_eq!(host.len(), 2, "{replay}");
    assert_eq!(select(&html, "svg.chart").len(), 1);
    assert_eq!(
        select(&html, "svg.chart polygon.mark-compaction").len(),
        host.len()
    );
    let listed = select(&html, "ol.compactions > li");
    assert_eq!(listed.len(), host.len());
    for c in host {
        let call = format!("call {}", c["host_call"]);
        assert!(
            listed
                .iter()
                .any(|li| li.text().collect::<String>().contains(&call))
        );
    }
    let summaries: Vec<String> = (select(&html, "blockquote.summary").iter())
        .map(|b| b.text().collect())
        .collect();
    assert!(
        summaries
            .iter()
            .any(|s| s.contains("The tokenizer loop was fixed")),
        "{summaries:?}"
    );
    let found = json_run("findings", &src, &[]);
    let kinds = select(&html, "details.findings > summary");
    assert_eq!(
        kinds.len(),
        (found["findings"].as_array().unwrap().iter())
            .map(|f| f["kind"].as_str().unwrap())
            .collect::<std::collections::BTreeSet<_>>()
            .len()
    );
    let stats = json_run("stats", &src, &[]);
    let usd = stats["total_usd"].as_f64().unwrap();
    let facts: String = select(&html, "dl.facts")
        .iter()
        .flat_map(|d| d.text())
        .collect();
    assert!(
        facts.contains(&ctxlens::analysis::cost::dollars(usd)),
        "{facts} against {usd}"
    );
    let trace: String = select(&html, "div.trace")
        .iter()
        .flat_map(|d| d.text())
        .collect();
    assert!(trace.starts_with("tokenizer: "), "{trace}");
    let calls = replay["calls"].as_array().unwrap().len();
    assert_eq!(select(&html, "details.call > div.context").len(), calls);
    // The data each call's context is drawn from: one entry a call.
    let data = select(&html, "script.session-data");
    let data: Value = serde_json::from_str(&data[0].text().collect::<String>()).unwrap();
    assert_eq!(data["calls"].as_array().unwrap().len(), calls);
    assert_eq!(
        data["kinds"].as_str().unwrap().len(),
        data["texts"].as_array().unwrap().len()
    );
}

/// Text from the log that looks like markup stays text: no element, no
/// script, no link comes of it.
#[test]
fn hostile_text_stays_inert() {
    let dir = tempfile::TempDir::new().unwrap();
    let hostile = r#"</script><script>alert(1)</script><img src=x onerror=alert(2)> <a href='javascript:alert(3)'>x</a> <!-- -->"#;
    let line = serde_json::to_string(hostile).unwrap();
    let text = std::fs::read_to_string(fixture("claude-code/findings.jsonl")).unwrap();
    let text = text
        .replace(
            "\"Never commit secrets",
            &format!("\"{}Never commit secrets", &line[1..line.len() - 1]),
        )
        .replace(
            "\"running 12 tests",
            &format!("\"{}running 12 tests", &line[1..line.len() - 1]),
        );
    assert_ne!(
        text,
        std::fs::read_to_string(fixture("claude-code/findings.jsonl")).unwrap()
    );
    let src = dir.path().join("hostile.jsonl");
    std::fs::write(&src, text).unwrap();
    let (html, raw) = report(dir.path(), &[&src], &["--fact", "<script>"]);
    assert!(html.errors.is_empty(), "{:?}", html.errors);
    assert_eq!(
        select(&html, "script").len(),
        2,
        "the session's data and the page's script"
    );
    assert!(select(&html, "img").is_empty());
    assert!(select(&html, "[onerror]").is_empty());
    for a in select(&html, "a") {
        assert!(!a.value().attr("href").unwrap_or("").contains("javascript"));
    }
    assert!(!raw.contains("<img") && !raw.contains("<script>alert"));
    // The text is there, whole, as text: the fact traced, and the data.
    let fact: String = select(&html, "div.trace b")
        .iter()
        .flat_map(|b| b.text())
        .collect();
    assert_eq!(fact, "<script>");
    let data = select(&html, "script.session-data");
    let data: Value = serde_json::from_str(&data[0].text().collect::<String>()).unwrap();
    let texts = data["texts"].as_array().unwrap();
    assert!(
        texts
            .iter()
            .any(|t| t.as_str().unwrap().contains("</script><script>alert(1)"))
    );
}

/// A folder gives a fleet page: totals, a row per session linking to its
/// section, sortable.
#[test]
fn a_folder_gives_a_fleet_page() {
    let dir = tempfile::TempDir::new().unwrap();
    let folder = fixture("claude-code");
    let (html, _) = report(dir.path(), &[&folder], &[]);
    assert!(html.errors.is_empty(), "{:?}", html.errors);
    let sections = select(&html, "section.session");
    let rows = select(&html, "section.fleet table.sortable tbody tr");
    assert!(sections.len() > 5, "{}", sections.len());
    assert_eq!(rows.len(), sections.len());
    for row in rows {
        let link = row.select(&Selector::parse("a").unwrap()).next().unwrap();
        let target = link.value().attr("href").unwrap().trim_start_matches('#');
        assert!(
            sections.iter().any(|s| s.value().id() == Some(target)),
            "{target}"
        );
    }
    let totals: String = select(&html, "p.totals")
        .iter()
        .flat_map(|p| p.text())
        .collect();
    assert!(
        totals.starts_with(&format!("{} sessions", sections.len())),
        "{totals}"
    );
}

/// A session of about 2,000 calls (100,000 events) makes a page under 5 MB.
#[test]
fn a_session_of_two_thousand_calls_stays_under_five_megabytes() {
    let dir = tempfile::TempDir::new().unwrap();
    let samples = dir.path().join("samples");
    let events = "100000";
    ctxlens(
        dir.path(),
        &[
            "sample".as_ref(),
            samples.as_os_str(),
            "--events".as_ref(),
            events.as_ref(),
            "--sessions".as_ref(),
            "1".as_ref(),
        ],
    );
    let log = samples.join(format!("scale-{events}.db"));
    let (html, raw) = report(dir.path(), &[&log], &[]);
    let calls = select(&html, "details.call").len();
    assert!(calls >= 1_900, "{calls} calls");
    assert!(raw.len() < 5_000_000, "{} bytes", raw.len());
}

/// In headless Chromium: no console message, the chart with a mark per
/// compaction, a call opened (by its link) drawn with its context; and a
/// screenshot at 1280x800 in target/test-artifacts/.
#[test]
fn the_page_renders_in_chromium() {
    let Some(chromium) = ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .find(|c| {
            Command::new(c)
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success())
        })
    else {
        eprintln!("skipped: no Chromium installed (.ci/run installs Debian's chromium)");
        return;
    };
    let dir = tempfile::TempDir::new().unwrap();
    let src = fixture("claude-code/v2.1-auto-compact.jsonl");
    report(dir.path(), &[&src], &[]);
    let page = format!("file://{}", dir.path().join("report.html").display());
    let run = |args: &[&str], url: &str| {
        Command::new(chromium)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--enable-logging=stderr",
                "--v=0",
            ])
            .args(["--virtual-time-budget=5000", "--window-size=1280,800"])
            .args(args)
            .arg(url)
            .output()
            .unwrap()
    };
    let opened = run(&["--dump-dom"], &format!("{page}#s-1-c3"));
    let stderr = String::from_utf8_lossy(&opened.stderr);
    let console: Vec<&str> = stderr.lines().filter(|l| l.contains(":CONSOLE")).collect();
    assert!(console.is_empty(), "{console:?}");
    let dom = Html::parse_document(&String::from_utf8_lossy(&opened.stdout));
    assert_eq!(select(&dom, "svg.chart polygon.mark-compaction").len(), 2);
    let open = select(&dom, "details#s-1-c3[open] div.context table tbody tr");
    assert!(!open.is_empty(), "call 3's context was not drawn");
    let first: String = open[0].text().collect();
    assert!(first.contains("summary v1"), "{first}");
    let artifacts = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/test-artifacts");
    std::fs::create_dir_all(&artifacts).unwrap();
    let shot = artifacts.join("report-1280x800.png");
    let _ = std::fs::remove_file(&shot);
    run(&[&format!("--screenshot={}", shot.display())], &page);
    assert!(
        std::fs::metadata(&shot).is_ok_and(|m| m.len() > 10_000),
        "no screenshot"
    );
}

/// The fleet's total is `stats`': a summarizer session's calls are counted
/// in the session it served, not again.
#[test]
fn the_fleet_total_counts_a_summarizer_once() {
    let dir = tempfile::TempDir::new().unwrap();
    let src = fixture("claude-code/cost/0c05e5e0-0000-4000-8000-000000000001.jsonl");
    let (html, _) = report(dir.path(), &[&src], &[]);
    assert!(
        select(&html, "section.session").len() >= 2,
        "the session and its summarizer"
    );
    let stats = json_run("stats", &src, &[]);
    let usd = ctxlens::analysis::cost::dollars(stats["total_usd"].as_f64().unwrap());
    let totals: String = select(&html, "p.totals")
        .iter()
        .flat_map(|p| p.text())
        .collect();
    assert!(
        totals.contains(&format!("{usd} in all")),
        "{totals} against {usd}"
    );
}
