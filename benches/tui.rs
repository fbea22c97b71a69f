//! Drawing the inspector on a large log: the first frame, and a step then a frame.

use std::sync::Arc;

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use ctxlens::analysis::{PolicyChoice, ProjectionCache};
use ctxlens::log::Store;
use ctxlens::tui::app::{App, Control, MetricsJob};
use ctxlens::tui::render::{self, Theme};
use ratatui::Terminal;
use ratatui::backend::TestBackend;

mod support;

fn frames(c: &mut Criterion) {
    let path = support::scale(100_000, 1);
    let log = Arc::new(Store::open(&path).unwrap().load().unwrap());
    let theme = Theme { color: true };
    let mut terminal = Terminal::new(TestBackend::new(160, 48)).unwrap();
    let mut group = c.benchmark_group("inspector, 100k events, 160x48");
    group.bench_function("first frame (history, before projecting)", |b| {
        b.iter(|| {
            let mut app = App::unprojected("log.db", Arc::clone(&log));
            terminal.draw(|f| render::draw(f, &mut app, theme)).unwrap();
        })
    });
    let mut app = App::new("log.db", Arc::clone(&log));
    let last = app.calls.len() - 1;
    app.select_call(last);
    group.bench_function("scroll one row and draw", |b| {
        let mut down = true;
        b.iter(|| {
            app.step(if down { Control::Down } else { Control::Up });
            down = !down;
            terminal.draw(|f| render::draw(f, &mut app, theme)).unwrap();
        })
    });
    group.bench_function("next call and draw (counts warm)", |b| {
        let mut forward = false;
        b.iter(|| {
            forward = !forward;
            app.step(if forward {
                Control::PrevCall
            } else {
                Control::NextCall
            });
            terminal.draw(|f| render::draw(f, &mut app, theme)).unwrap();
        })
    });
    group.finish();
}

/// A policy edit on 100k events in one session (1,960 calls), o200k counts
/// made: the selected (last) call projected again by an inspector that has
/// not walked the session under the new policy before, and, apart, the
/// replay of every call the metrics strip draws, as the inspector's worker
/// runs it.
fn edit(c: &mut Criterion) {
    // Counts come from the token cache (under target/), so that each fresh
    // inspector below is made in a fraction of a second.
    ctxlens::tokens::use_persistent_cache();
    let path = support::scale(100_000, 1);
    let log = Arc::new(Store::open(&path).unwrap().load().unwrap());
    let fresh = || {
        let mut app = App::new("log.db", Arc::clone(&log));
        // The strip's replays go to a worker that is never asked to answer here.
        let (worker, jobs) = std::sync::mpsc::channel::<MetricsJob>();
        app.use_worker(worker);
        let last = app.calls.len() - 1;
        app.select_call(last);
        (app, jobs)
    };
    let mut group = c.benchmark_group("policy edit, 100k events");
    group.sample_size(20);
    // Each edit after those made before it (under codex and executive, a
    // second policy finds what the first walk read of the log).
    let overrides = |sets: &[&str]| sets.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    for (what, before, edit) in [
        (
            "keep_turns 3 -> 5",
            &[][..],
            &["tool_results.keep_turns=5"][..],
        ),
        ("keep_turns 3 -> 200", &[], &["tool_results.keep_turns=200"]),
        (
            "window.max_tokens 0 -> 200000",
            &[],
            &["window.max_tokens=200000"],
        ),
        (
            "summary.use_recorded -> false",
            &[],
            &["summary.use_recorded=false"],
        ),
        ("preset -> codex", &[], &["preset=\"codex\""]),
        (
            "a second codex policy",
            &["preset=\"codex\""],
            &["preset=\"codex\"", "codex.user_message_max_tokens=5000"],
        ),
        ("preset -> executive", &[], &["preset=\"executive\""]),
        (
            "a second executive policy",
            &["preset=\"executive\""],
            &["preset=\"executive\"", "executive.keep_recent=30"],
        ),
    ] {
        let name = format!("re-project the selected call ({what})");
        group.bench_function(name, |b| {
            b.iter_batched(
                || {
                    let (mut app, jobs) = fresh();
                    if !before.is_empty() {
                        app.set_overrides(overrides(before)).unwrap();
                    }
                    (app, jobs)
                },
                |(mut app, _jobs)| {
                    app.set_overrides(overrides(edit)).unwrap();
                    app
                },
                BatchSize::PerIteration,
            )
        });
    }
    // The app's cache once its counts are made, as the app forks it for each job.
    let mut cache = ProjectionCache::default();
    let session = log.sessions[0].id().to_string();
    ctxlens::analysis::replay::strip(&log, &session, &PolicyChoice::default(), &mut cache);
    let prices = Arc::new(ctxlens::analysis::cost::Prices::shipped());
    let mut turns = 2;
    group.bench_function("replay every call for the strip", |b| {
        b.iter(|| {
            // A value not tried before, each time.
            turns += 1;
            let job = MetricsJob {
                generation: 0,
                log: Arc::clone(&log),
                session: session.clone(),
                choice: PolicyChoice {
                    sets: vec![format!("tool_results.keep_turns={turns}")],
                    ..PolicyChoice::default()
                },
                cache: cache.fork(),
                prices: Arc::clone(&prices),
            };
            job.run()
        })
    });
    group.finish();
}

criterion_group!(benches, frames, edit);
criterion_main!(benches);
