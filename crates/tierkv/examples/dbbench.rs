//! Engine micro-benchmark in the spirit of LevelDB's db_bench: sequential and random fill,
//! random gets served from the block cache and from disk with direct I/O, and short scans,
//! on one directory (no tiers). The figures in docs/bench/engine-core.md come
//! from it:
//!
//! ```sh
//! cargo run --release -p tierkv --example dbbench -- [--records N] [--dir DIR] [--threads T]
//!     [--cache-mode adaptive|block|kv|kp|split:KV:KP:BLOCK] [--key-size 24|8]
//!     [--value-size 1000] [--block-size BYTES] [--block-records N (0: None)]
//!     [--batch B] [--read-parallelism P] [--read-io auto|uring|threads]
//! ```
//!
//! Records are 1 KiB by default (24-byte keys, 1000-byte values); `--key-size 8
//! --value-size 100` gives F2's records (8-byte keys spread over the key space by a hash,
//! as YCSB's inserts are). `readrandom-disk` also reports the bytes each get moved from
//! disk: as the store counts them (the blocks it asked for) and as the kernel does
//! (`/proc/self/io` `read_bytes`, which includes the sector alignment of direct reads). `readrandom-cached` runs with a block
//! cache larger than the data; `readrandom-disk` reopens with a 8 MiB cache so nearly every
//! get reads a 16 KiB block from disk (O_DIRECT: the page cache does not help).
//! `readhot-cached` reads 1% of the keys over and over (with the adaptive cache they are
//! answered by the KV cache; with `--cache-mode block` by the block cache). `multiget`
//! reads the same random keys as `readrandom-disk`, on the same small cache, in
//! `Db::multi_get` batches of `--batch` keys (default 32), so each client keeps a batch's
//! disk reads in flight, submitted together through io_uring from the client's thread or on
//! the store's reader pool (`--read-io`, default threads; `--read-parallelism`, default 16); its
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
    key_size: usize,
    value_size: usize,
    block_size: Option<usize>,
    block_records: Option<usize>,
    batch: usize,
    read_parallelism: usize,
    read_io: tierkv::ReadIo,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        records: 1_000_000,
        dir: std::env::temp_dir().join("tierkv-dbbench"),
        threads: 1,
        cache_mode: tierkv::CacheMode::Adaptive,
        key_size: 24,
        value_size: 1000,
        block_size: None,
        block_records: None,
        batch: 32,
        read_parallelism: Options::default().read_parallelism,
        read_io: tierkv::ReadIo::default(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--records" => args.records = value()?.parse().map_err(|e| format!("{e}"))?,
            "--dir" => args.dir = value()?.into(),
            "--threads" => args.threads = value()?.parse().map_err(|e| format!("{e}"))?,
            "--cache-mode" => args.cache_mode = value()?.parse().map_err(|e| format!("{e}"))?,
            "--key-size" => args.key_size = value()?.parse().map_err(|e| format!("{e}"))?,
            "--value-size" => args.value_size = value()?.parse().map_err(|e| format!("{e}"))?,
            "--block-size" => args.block_size = Some(value()?.parse().map_err(|e| format!("{e}"))?),
            "--block-records" => {
                args.block_records = Some(value()?.parse().map_err(|e| format!("{e}"))?)
            }
            "--batch" => args.batch = value()?.parse().map_err(|e| format!("{e}"))?,
            "--read-io" => args.read_io = value()?.parse().map_err(|e| format!("{e}"))?,
            "--read-parallelism" => {
                args.read_parallelism = value()?.parse().map_err(|e| format!("{e}"))?
            }
            _ => return Err(format!("unknown flag {flag}")),
        }
    }
    if args.key_size != 24 && args.key_size != 8 {
        return Err(format!("--key-size is 24 or 8, not {}", args.key_size));
    }
    Ok(args)
}

/// Key `i`: "user" and 20 digits (24 bytes), or 8 bytes of a bijective hash of `i`.
fn key_of(i: u64, size: usize) -> Vec<u8> {
    if size == 8 {
        let h = i.wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(17) ^ i;
        h.to_be_bytes().to_vec()
    } else {
        format!("user{i:020}").into_bytes()
    }
}

fn value_of(i: u64, size: usize) -> Vec<u8> {
    let mut v = vec![0u8; size];
    // Half-compressible, like db_bench's default compression ratio 0.5.
    let mut rng = StdRng::seed_from_u64(i);
    rng.fill(&mut v[..size / 2]);
    v
}

/// Bytes this process has caused to be read from block devices (`/proc/self/io`), 0 where
/// the file is unavailable.
fn proc_read_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/io")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| {
                    l.strip_prefix("read_bytes: ")
                        .map(|v| v.trim().parse().ok())
                })
                .flatten()
        })
        .unwrap_or(0)
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
    let (ks, vs) = (args.key_size, args.value_size);
    let record = (ks + vs) as u64;
    let key = |i: u64| key_of(i, ks);
    let value = |i: u64| value_of(i, vs);
    let _ = std::fs::remove_dir_all(&args.dir);
    let defaults = Options::default();
    let opts = Options {
        block_size: args.block_size.unwrap_or(defaults.block_size),
        // `--block-records 0`: None (blocks cut by size only).
        block_records: match args.block_records {
            Some(0) => None,
            Some(n) => Some(n),
            None => defaults.block_records,
        },
        cache_size: 2 << 30,
        cache: tierkv::CacheOptions {
            mode: args.cache_mode,
            ..Default::default()
        },
        read_parallelism: args.read_parallelism,
        read_io: args.read_io,
        ..Options::default()
    };
    println!(
        "{n} records of {ks} + {vs} B, {} thread(s), cache mode {}, block size {} records {:?}, dir {}",
        args.threads,
        args.cache_mode,
        opts.block_size,
        opts.block_records,
        args.dir.display()
    );
    {
        let db = Db::open(&args.dir, opts.clone())?;
        let start = Instant::now();
        for i in 0..n {
            db.put(key(i), value(i))?;
        }
        db.flush()?;
        report("fillseq", n, start, record);
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
    report("fillrandom", n, start, record);
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
    report("readrandom-cached", gets, start, record);
    let hit = db.stats().cache_total.hit_rate();
    let hot = (n / 100).max(1);
    let get_hot = |db: &Db, rng: &mut StdRng| {
        let i = rng.gen_range(0..hot);
        db.get(key(i)).expect("get").expect("present");
    };
    parallel(&db, args.threads, 3 * hot, get_hot);
    let start = Instant::now();
    parallel(&db, args.threads, gets, get_hot);
    report("readhot-cached", gets, start, record);
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
    let kernel_before = proc_read_bytes();
    let store_before = db.stats().io.fast.cause(tierkv::env::IoCause::UserGet);
    let start = Instant::now();
    parallel(&db, args.threads, gets, get);
    report("readrandom-disk", gets, start, record);
    let s = db.stats();
    let store_after = s.io.fast.cause(tierkv::env::IoCause::UserGet);
    let kernel = proc_read_bytes().saturating_sub(kernel_before);
    println!(
        "readrandom-disk per get: {:.3} reads, {:.0} B asked for, {:.0} B read by the kernel",
        (store_after.read_ops - store_before.read_ops) as f64 / gets as f64,
        (store_after.read_bytes - store_before.read_bytes) as f64 / gets as f64,
        kernel as f64 / gets as f64
    );
    let batch = args.batch.max(1);
    let reads_before = db
        .stats()
        .io
        .fast
        .cause(tierkv::env::IoCause::UserGet)
        .read_ops;
    let start = Instant::now();
    parallel(&db, args.threads, gets / batch as u64, |db, rng| {
        let keys: Vec<Vec<u8>> = (0..batch).map(|_| key(rng.gen_range(0..n))).collect();
        for answer in db.multi_get(&keys) {
            answer.expect("get").expect("present");
        }
    });
    let keys_read = gets / batch as u64 / args.threads as u64 * args.threads as u64 * batch as u64;
    report("multiget", keys_read, start, record);
    println!(
        "multiget: batches of {batch}, read_io {:?}, reader pool {}, {:.2} direct reads per key",
        args.read_io,
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
    report("seekrandom+next10", scans, start, 10 * record);
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
