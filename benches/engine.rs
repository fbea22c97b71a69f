//! Projecting one call, and replaying every call, of large logs.

use std::sync::OnceLock;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use ctxlens::analysis::replay::replay;
use ctxlens::analysis::{PolicyChoice, ProjectionCache, project_call};
use ctxlens::log::Store;
use ctxlens::model::Log;

mod support;

/// A loaded log with its token counts warm, built the first time a benchmark asks.
fn warm(events: usize) -> &'static (Log, std::sync::Mutex<ProjectionCache>) {
    static LOGS: [OnceLock<(Log, std::sync::Mutex<ProjectionCache>)>; 2] =
        [OnceLock::new(), OnceLock::new()];
    LOGS[usize::from(events > 10_000)].get_or_init(|| {
        let log = Store::open(support::scale(events, 1))
            .unwrap()
            .load()
            .unwrap();
        let mut cache = ProjectionCache::default();
        replay(&log, None, &PolicyChoice::default(), &mut cache);
        (log, std::sync::Mutex::new(cache))
    })
}

fn project(c: &mut Criterion) {
    let mut group = c.benchmark_group("project one call");
    for events in [10_000, 100_000] {
        group.bench_function(format!("{}k events, last call", events / 1000), |b| {
            let (log, cache) = warm(events);
            let session = &log.sessions[0];
            let call = session.calls.last().unwrap();
            let choice = PolicyChoice::default();
            let mut cache = cache.lock().unwrap();
            b.iter(|| {
                project_call(session, call, &choice, &mut cache)
                    .unwrap()
                    .1
                    .total_tokens
            })
        });
    }
    group.finish();
}

fn replay_all(c: &mut Criterion) {
    let mut group = c.benchmark_group("replay");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(30));
    group.bench_function("100k events, 1 session, every call, counts warm", |b| {
        let (log, cache) = warm(100_000);
        let choice = PolicyChoice::default();
        let mut cache = cache.lock().unwrap();
        b.iter(|| replay(log, None, &choice, &mut cache).calls.len())
    });
    group.finish();
}

fn replay_presets(c: &mut Criterion) {
    let mut group = c.benchmark_group("replay under each preset");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(20));
    for preset in ctxlens::policy::Preset::NAMES {
        group.bench_function(format!("100k events, 1 session, {preset}"), |b| {
            let (log, cache) = warm(100_000);
            let choice = PolicyChoice {
                file: None,
                sets: vec![format!("preset=\"{preset}\"")],
                record: false,
            };
            let mut cache = cache.lock().unwrap();
            b.iter(|| replay(log, None, &choice, &mut cache).calls.len())
        });
    }
    group.finish();
}

criterion_group!(benches, project, replay_all, replay_presets);
criterion_main!(benches);
