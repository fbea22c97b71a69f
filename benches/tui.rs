//! Drawing the inspector on a large log: the first frame, and a step then a frame.

use std::sync::Arc;

use criterion::{Criterion, criterion_group, criterion_main};
use ctxlens::log::Store;
use ctxlens::tui::app::{App, Control};
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

fn edit(c: &mut Criterion) {
    let path = support::scale(10_000, 1);
    let log = Arc::new(Store::open(&path).unwrap().load().unwrap());
    let mut app = App::new("log.db", log);
    let last = app.calls.len() - 1;
    app.select_call(last);
    let mut group = c.benchmark_group("policy edit, 10k events");
    group.bench_function("re-project the selected call and every call's strip", |b| {
        let mut turns = 2;
        b.iter(|| {
            turns = 5 - turns;
            app.set_overrides(vec![format!("tool_results.keep_turns={turns}")])
                .unwrap();
        })
    });
    group.finish();
}

criterion_group!(benches, frames, edit);
criterion_main!(benches);
