//! Micro-benchmarks of RALT: the cost of recording an access (ns per access, with the
//! background maintenance running on another thread as in the engine) and of a hotness
//! check, plus a one-off report of memory per tracked key.
//!
//! Run: `cargo bench -p tierkv --bench ralt`

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use tierkv::env::Env;
use tierkv::hot::ralt::{Ralt, RaltOptions};

const KEYS: u64 = 1 << 20;
const VALUE_LEN: u32 = 1000;

/// `user` + 4 zeros + 16 hex digits: built without formatting or a lookup table, so the
/// benchmark does not time a cache miss of its own.
fn key(i: u64) -> [u8; 24] {
    let mut k = [b'0'; 24];
    k[..4].copy_from_slice(b"user");
    for (d, b) in k[8..].iter_mut().enumerate() {
        let nib = (i >> (60 - 4 * d)) & 0xf;
        *b = b"0123456789abcdef"[nib as usize];
    }
    k
}

/// A tracker with the default options and a 256 MiB FD budget, and a thread doing its
/// maintenance the way the engine's background thread does.
struct Fixture {
    ralt: Arc<Ralt>,
    stop: Arc<AtomicBool>,
    bg: Option<std::thread::JoinHandle<()>>,
    _dir: tempfile::TempDir,
}

impl Fixture {
    fn new() -> Fixture {
        Fixture::with_background(true)
    }

    fn new_without_background() -> Fixture {
        Fixture::with_background(false)
    }

    fn with_background(background: bool) -> Fixture {
        let dir = tempfile::tempdir().expect("tempdir");
        let env = Env::single(dir.path(), false).expect("env");
        let opts = RaltOptions {
            fd_budget: 256 << 20,
            ..Default::default()
        };
        let ralt = Arc::new(Ralt::open(env, opts).expect("open"));
        let stop = Arc::new(AtomicBool::new(false));
        let bg = background.then(|| {
            let (ralt, stop) = (ralt.clone(), stop.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    if ralt.needs_maintenance() {
                        ralt.maintenance().expect("maintenance");
                    } else {
                        std::thread::sleep(std::time::Duration::from_micros(200));
                    }
                }
            })
        });
        Fixture {
            ralt,
            stop,
            bg,
            _dir: dir,
        }
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.bg.take() {
            let _ = t.join();
        }
    }
}

/// xorshift: cheap enough not to show in the measurement.
fn next(x: &mut u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    *x
}

fn bench(c: &mut Criterion) {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    // The foreground cost as the engine pays it (record, then the cheap check whether the
    // background must be woken). Maintenance runs between timed stretches, so every
    // access really goes into the buffer instead of taking the cheaper "dropped" path a
    // tight loop would otherwise hit once it outruns the background's fsyncs.
    {
        let f = Fixture::new_without_background();
        c.bench_function("ralt/record_access (1M keys, uniform)", |b| {
            b.iter_custom(|iters| {
                let mut total = std::time::Duration::ZERO;
                let mut done = 0;
                while done < iters {
                    while f.ralt.needs_maintenance() {
                        f.ralt.maintenance().expect("maintenance");
                    }
                    let t = std::time::Instant::now();
                    while done < iters {
                        let k = &key(next(&mut x) % KEYS);
                        f.ralt
                            .record_access(black_box(k), VALUE_LEN)
                            .expect("record");
                        done += 1;
                        if f.ralt.needs_maintenance() {
                            break;
                        }
                    }
                    total += t.elapsed();
                }
                total
            })
        });
        let s = f.ralt.stats();
        eprintln!(
            "record_access: {} accesses, {} dropped, {} files, {} evictions",
            s.accesses, s.dropped_accesses, s.files, s.evictions
        );
    }
    // Many threads hammering with a real background thread: the cost under contention
    // (and how much a background that cannot keep up drops).
    {
        let f = Fixture::new();
        c.bench_function("ralt/record_access x2 threads + background", |b| {
            b.iter_custom(|iters| {
                let t = std::time::Instant::now();
                let hs: Vec<_> = (0..2u64)
                    .map(|i| {
                        let r = f.ralt.clone();
                        std::thread::spawn(move || {
                            let mut x = 0x2545_f491_4f6c_dd1du64 + i;
                            for _ in 0..iters / 2 {
                                let k = &key(next(&mut x) % KEYS);
                                r.record_access(k, VALUE_LEN).expect("record");
                                black_box(r.needs_maintenance());
                            }
                        })
                    })
                    .collect();
                for h in hs {
                    h.join().expect("thread");
                }
                t.elapsed()
            })
        });
        c.bench_function("ralt/is_hot (1M keys, uniform)", |b| {
            b.iter(|| {
                let k = &key(next(&mut x) % KEYS);
                black_box(f.ralt.is_hot(black_box(k)));
            })
        });
        let s = f.ralt.stats();
        eprintln!(
            "with background: {} accesses, {} dropped ({:.1}%)",
            s.accesses,
            s.dropped_accesses,
            100.0 * s.dropped_accesses as f64 / s.accesses.max(1) as f64
        );
    }
}

/// Tracks 100k distinct keys (24 B keys, 1000 B values, within both initial limits),
/// flushes, compacts, and reports memory (filters + indexes + buffers) per tracked key.
fn memory_report(_c: &mut Criterion) {
    let f = Fixture::new_without_background();
    for i in 0..100_000u64 {
        f.ralt
            .record_access(&key(i * 5), VALUE_LEN)
            .expect("record");
        while f.ralt.needs_maintenance() {
            f.ralt.maintenance().expect("maintenance");
        }
    }
    f.ralt.flush().expect("flush");
    while f.ralt.needs_maintenance() {
        f.ralt.maintenance().expect("maintenance");
    }
    let s = f.ralt.stats();
    eprintln!(
        "memory per tracked key: {:.2} B ({} B filters, {} B index, {} B buffers, {} keys \
         tracked, {} hot bytes, {} B on disk = {:.1} B per key)",
        s.memory_bytes as f64 / s.tracked_keys.max(1) as f64,
        s.filter_bytes,
        s.index_bytes,
        s.buffer_bytes,
        s.tracked_keys,
        s.hot_set_size,
        s.file_bytes,
        s.file_bytes as f64 / s.tracked_keys.max(1) as f64
    );
}

criterion_group!(benches, bench, memory_report);
criterion_main!(benches);
