//! Engine micro-benchmark in the spirit of LevelDB's db_bench: sequential and random fill,
//! random gets served from the block cache and from disk with direct I/O, and short scans,
//! on one directory (no tiers). The figures in docs/BENCHMARKS.md ("Engine core") come
//! from it:
//!
//! ```sh
//! cargo run --release -p tierkv --example dbbench -- [--records N] [--dir DIR] [--threads T]
//!     [--cache-mode adaptive|block|kv|kp|split:KV:KP:BLOCK] [--batch B] [--read-parallelism P]
//! ```
//!
//! Records are 1 KiB (24-byte keys, 1000-byte values). `readrandom-cached` runs with a block
//! cache larger than the data; `readrandom-disk` reopens with a 8 MiB cache so nearly every
//! get reads a 16 KiB block from disk (O_DIRECT: the page cache does not help).
//! `readhot-cached` reads 1% of the keys over and over (with the adaptive cache they are
//! answered by the KV cache; with `--cache-mode block` by the block cache). `multiget`
//! reads the same random keys as `readrandom-disk`, on the same small cache, in
//! `Db::multi_get` batches of `--batch` keys (default 32), so each client keeps a batch's
//! disk reads in flight on the store's reader pool (`--read-parallelism`, default 16); its
//! ops/s count keys, comparable with `readrandom-disk`'s gets.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::path::PathBuf;
use std::time::Instant;
use tierkv::{Db, Options};

struct Args {
    records: u64,
    dir: PathBuf,
    threads: usize,
    cache_mode: tierkv::CacheMode,
    batch: usize,
    read_parallelism: usize,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        records: 1_000_000,
        dir: std::env::temp_dir().join("tierkv-dbbench"),
        threads: 1,
        cache_mode: tierkv::CacheMode::Adaptive,
        batch: 32,
        read_parallelism: Options::default().read_parallelism,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--records" => args.records = value()?.parse().map_err(|e| format!("{e}"))?,
            "--dir" => args.dir = value()?.into(),
            "--threads" => args.threads = value()?.parse().map_err(|e| format!("{e}"))?,
            "--cache-mode" => args.cache_mode = value()?.parse().map_err(|e| format!("{e}"))?,
            "--batch" => args.batch = value()?.parse().map_err(|e| format!("{e}"))?,
            "--read-parallelism" => {
                args.read_parallelism = value()?.parse().map_err(|e| format!("{e}"))?
            }
            _ => return Err(format!("unknown flag {flag}")),
        }
    }
    Ok(args)
}

fn key(i: u64) -> [u8; 24] {
    let mut k = [0u8; 24];
    k[..4].copy_from_slice(b"user");
    let digits = format!("{i:020}");
    k[4..].copy_from_slice(digits.as_bytes());
    k
}

fn value(i: u64) -> Vec<u8> {
    let mut v = vec![0u8; 1000];
    // Half-compressible, like db_bench's default compression ratio 0.5.
    let mut rng = StdRng::seed_from_u64(i);
    rng.fill(&mut v[..500]);
    v
}

fn report(name: &str, ops: u64, start: Instant, bytes_per_op: u64) {
    let secs = start.elapsed().as_secs_f64();
    let mbps = (ops * bytes_per_op) as f64 / secs / (1 << 20) as f64;
    println!(
        "{name:<20} {:>10.0} ops/s {:>9.2} us/op {:>8.1} MiB/s",
        ops as f64 / secs,
        secs * 1e6 / ops as f64,
        mbps
    );
}

/// Runs `ops` operations split over the threads; `f(db, rng)` does one.
fn parallel(db: &Db, threads: usize, ops: u64, f: impl Fn(&Db, &mut StdRng) + Sync) {
    std::thread::scope(|s| {
        for t in 0..threads {
            let f = &f;
            s.spawn(move || {
                let mut rng = StdRng::seed_from_u64(1000 + t as u64);
                for _ in 0..ops / threads as u64 {
                    f(db, &mut rng);
                }
            });
        }
    });
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = parse_args()?;
    let n = args.records;
    let _ = std::fs::remove_dir_all(&args.dir);
    let opts = Options {
        cache_size: 2 << 30,
        cache: tierkv::CacheOptions {
            mode: args.cache_mode,
            ..Default::default()
        },
        read_parallelism: args.read_parallelism,
        ..Options::default()
    };
    println!(
        "{n} records of 1 KiB, {} thread(s), cache mode {}, dir {}",
        args.threads,
        args.cache_mode,
        args.dir.display()
    );
    {
        let db = Db::open(&args.dir, opts.clone())?;
        let start = Instant::now();
        for i in 0..n {
            db.put(key(i), value(i))?;
        }
        db.flush()?;
        report("fillseq", n, start, 1024);
        db.close()?;
    }
    let _ = std::fs::remove_dir_all(&args.dir);
    let db = Db::open(&args.dir, opts.clone())?;
    let start = Instant::now();
    // A scattered order that writes every key once: a stride coprime with n near n / phi.
    let stride = ((n as f64 * 0.618) as u64..)
        .find(|s| gcd(*s, n) == 1)
        .unwrap_or(1);
    for i in 0..n {
        let k = (i * stride) % n;
        db.put(key(k), value(k))?;
    }
    db.flush()?;
    report("fillrandom", n, start, 1024);
    let start = Instant::now();
    db.wait_for_background()?;
    println!(
        "{:<20} {:>10.1} s (compaction backlog after fillrandom)",
        "settle",
        start.elapsed().as_secs_f64()
    );

    let gets = (n / 2).max(1);
    let get = |db: &Db, rng: &mut StdRng| {
        let i = rng.gen_range(0..n);
        db.get(key(i)).expect("get").expect("present");
    };
    // Warm the cache, then measure.
    parallel(&db, args.threads, n, get);
    let start = Instant::now();
    parallel(&db, args.threads, gets, get);
    report("readrandom-cached", gets, start, 1024);
    let hit = db.stats().cache_total.hit_rate();
    let hot = (n / 100).max(1);
    let get_hot = |db: &Db, rng: &mut StdRng| {
        let i = rng.gen_range(0..hot);
        db.get(key(i)).expect("get").expect("present");
    };
    parallel(&db, args.threads, 3 * hot, get_hot);
    let start = Instant::now();
    parallel(&db, args.threads, gets, get_hot);
    report("readhot-cached", gets, start, 1024);
    let g = db.stats().get_sources;
    println!(
        "readhot-cached sources: KV {} KP {} block cache {} disk {}",
        g.kv_cache,
        g.kp_cache,
        g.block_cache,
        g.fast + g.slow
    );
    drop(db);

    let small_cache = Options {
        cache_size: 8 << 20,
        ..opts
    };
    let db = Db::open(&args.dir, small_cache)?;
    let start = Instant::now();
    parallel(&db, args.threads, gets, get);
    report("readrandom-disk", gets, start, 1024);
    let s = db.stats();
    let batch = args.batch.max(1);
    let reads_before = db
        .stats()
        .io
        .fast
        .cause(tierkv::env::IoCause::UserGet)
        .read_ops;
    let start = Instant::now();
    parallel(&db, args.threads, gets / batch as u64, |db, rng| {
        let keys: Vec<[u8; 24]> = (0..batch).map(|_| key(rng.gen_range(0..n))).collect();
        for answer in db.multi_get(&keys) {
            answer.expect("get").expect("present");
        }
    });
    let keys_read = gets / batch as u64 / args.threads as u64 * args.threads as u64 * batch as u64;
    report("multiget", keys_read, start, 1024);
    println!(
        "multiget: batches of {batch}, reader pool {}, {:.2} direct reads per key",
        args.read_parallelism,
        (db.stats()
            .io
            .fast
            .cause(tierkv::env::IoCause::UserGet)
            .read_ops
            - reads_before) as f64
            / keys_read.max(1) as f64
    );
    let scans = (n / 20).max(1);
    let start = Instant::now();
    parallel(&db, args.threads, scans, |db, rng| {
        let i = rng.gen_range(0..n);
        let mut it = db.iter().expect("iter");
        it.seek(key(i)).expect("seek");
        for _ in 0..10 {
            if !it.valid() {
                break;
            }
            std::hint::black_box(it.value());
            it.next().expect("next");
        }
    });
    report("seekrandom+next10", scans, start, 10 * 1024);
    println!(
        "cached-phase block cache hit rate {:.3}; disk phase: {} direct reads, {:.3} hit rate, {} levels {:?}",
        hit,
        s.io.fast.cause(tierkv::env::IoCause::UserGet).read_ops,
        s.cache_total.hit_rate(),
        s.levels.iter().filter(|l| l.files > 0).count(),
        s.levels.iter().map(|l| l.files).collect::<Vec<_>>()
    );
    Ok(())
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}
