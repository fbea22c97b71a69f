//! Loading a large log and counting its tokens.

use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use ctxlens::log::Store;
use ctxlens::tokens::{Encoding, TokenCache};

mod support;

fn big_log() -> std::path::PathBuf {
    support::scale(100_000, 1)
}

fn text_bytes(log: &ctxlens::model::Log) -> u64 {
    log.sessions
        .iter()
        .flat_map(|s| &s.events)
        .map(|e| e.content.len() as u64)
        .sum()
}

fn load(c: &mut Criterion) {
    let path = big_log();
    let log = Store::open(&path).unwrap().load().unwrap();
    let mut group = c.benchmark_group("load");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(20));
    group.throughput(Throughput::Bytes(text_bytes(&log)));
    group.bench_function("100k events", |b| {
        b.iter(|| Store::open(&path).unwrap().load().unwrap())
    });
    group.finish();
}

fn count(c: &mut Criterion) {
    let path = big_log();
    let log = Store::open(&path).unwrap().load().unwrap();
    // A tenth of the log keeps one iteration to a few seconds.
    let events = &log.sessions[0].events[..10_000];
    let bytes: u64 = events.iter().map(|e| e.content.len() as u64).sum();
    let mut group = c.benchmark_group("count o200k_base");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(30));
    group.throughput(Throughput::Bytes(bytes));
    group.bench_function("single thread, 10k events", |b| {
        b.iter(|| {
            events
                .iter()
                .map(|e| Encoding::O200kBase.count(&e.content.get()))
                .sum::<usize>()
        })
    });
    group.bench_function("token cache, all cores, 10k events", |b| {
        b.iter(|| TokenCache::new().count_events(Encoding::O200kBase, events))
    });
    group.finish();
}

criterion_group!(benches, load, count);
criterion_main!(benches);
