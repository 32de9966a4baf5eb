//! RALT alone under a hotspot read stream: what it writes to the fast disk, by cause, over
//! the whole stream and over its final 10%, and how well its hot set matches the hotspot.
//!
//! The engine records an access for every get, hot or cold, and RALT's own maintenance
//! (flushes, compactions, evictions) is what it writes while a read-only workload runs.
//! Driving RALT directly reproduces that at a paper-scale key count in a minute instead of
//! a quarter of an hour, so a change to its maintenance can be sized before a full run.
//!
//! Run: `cargo run --release -p tierkv --example ralt_trace -- [KEY=VALUE...]`, with keys
//! `keys` (11534336: the paper preset's records), `accesses` (23068672), `hot` (0.05 of
//! the keys), `hot_ops` (0.95 of the accesses), `value` (1000 bytes), `fd_mib` (834: the
//! paper preset's fast levels, its 1 GiB budget less the WALs' reserve), `seed`, and
//! `rate`: accesses per second, with the maintenance keeping up or not as in the engine
//! (0, the default: each access waits while maintenance is due, so none is dropped; about
//! 30 s, but the work is ordered differently). docs/bench/ralt.md has results of both.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use tierkv::env::Env;
use tierkv::hot::ralt::{Ralt, RaltOptions, RaltStats};

/// splitmix64: scatters ids over the key space and drives the access stream.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// 24-byte keys as the benchmark writes them (`user` and hex digits of a scattered id).
fn key(id: u64) -> [u8; 24] {
    let mut k = [b'0'; 24];
    k[..4].copy_from_slice(b"user");
    let h = mix(id);
    for (d, b) in k[8..].iter_mut().enumerate() {
        *b = b"0123456789abcdef"[((h >> (60 - 4 * d)) & 0xf) as usize];
    }
    k
}

fn writes(s: &RaltStats) -> [u64; 4] {
    [
        s.flush_write_bytes,
        s.compaction_write_bytes,
        s.eviction_write_bytes,
        s.checkpoint_write_bytes,
    ]
}

/// CPU seconds the calling thread has used (`utime + stime` of `/proc/thread-self/stat`,
/// in 100 Hz ticks; 0 where it is missing).
fn thread_cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").unwrap_or_default();
    let rest = stat.rfind(')').map_or("", |i| &stat[i + 1..]);
    let ticks: u64 = rest
        .split_whitespace()
        .skip(11)
        .take(2)
        .filter_map(|f| f.parse::<u64>().ok())
        .sum();
    ticks as f64 / 100.0
}

fn mb(b: u64) -> f64 {
    b as f64 / 1e6
}

fn main() -> tierkv::Result<()> {
    let mut arg: HashMap<String, f64> = [
        ("keys", 11_534_336.0),
        ("accesses", 23_068_672.0),
        ("hot", 0.05),
        ("hot_ops", 0.95),
        ("value", 1000.0),
        ("fd_mib", 834.0),
        ("seed", 1.0),
        ("rate", 0.0),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    for a in std::env::args().skip(1) {
        let (k, v) = a.split_once('=').unwrap_or((&a, ""));
        match (arg.contains_key(k), v.parse::<f64>()) {
            (true, Ok(v)) => {
                arg.insert(k.to_string(), v);
            }
            _ => {
                eprintln!("unknown or malformed argument {a:?}; expected KEY=NUMBER");
                std::process::exit(2);
            }
        }
    }
    let keys = arg["keys"] as u64;
    let accesses = arg["accesses"] as u64;
    let hot_keys = ((keys as f64 * arg["hot"]) as u64).max(1);
    let hot_ops = arg["hot_ops"];
    let value = arg["value"] as u32;
    let rate = arg["rate"];
    let dir = tempfile::tempdir().map_err(|e| tierkv::Error::io("<tempdir>", e))?;
    let env = Env::single(dir.path(), false)?;
    let opts = RaltOptions {
        fd_budget: (arg["fd_mib"] * 1048576.0) as u64,
        ..Default::default()
    };
    let ralt = Arc::new(Ralt::open(env, opts)?);
    let stop = Arc::new(AtomicBool::new(false));
    let bg = {
        let (ralt, stop) = (ralt.clone(), stop.clone());
        std::thread::spawn(move || -> tierkv::Result<f64> {
            while !stop.load(Ordering::Relaxed) {
                if !(ralt.needs_maintenance() && ralt.maintenance()?) {
                    std::thread::sleep(std::time::Duration::from_micros(500));
                }
            }
            Ok(thread_cpu_seconds())
        })
    };
    let mut x = mix(arg["seed"] as u64);
    let started = std::time::Instant::now();
    let mark = accesses - accesses / 10;
    let mut at_mark = [0; 4];
    let report = accesses / 20;
    for i in 0..accesses {
        x = mix(x);
        let hot = (x >> 11) as f64 / (1u64 << 53) as f64 <= hot_ops;
        let r = mix(x ^ 0x5555);
        let id = if hot {
            r % hot_keys
        } else {
            hot_keys + r % (keys - hot_keys)
        };
        ralt.record_access(&key(id), value)?;
        // The engine's background keeps up at the engine's read rate; a tight loop would
        // outrun it and drop accesses instead (the wait is bounded: some pending work
        // waits for more flushes).
        if rate > 0.0 {
            let due = started + std::time::Duration::from_secs_f64(i as f64 / rate);
            if let Some(wait) = due.checked_duration_since(std::time::Instant::now()) {
                std::thread::sleep(wait);
            }
        } else {
            let waited = std::time::Instant::now();
            while ralt.work_waiting() && waited.elapsed() < std::time::Duration::from_millis(20) {
                std::thread::yield_now();
            }
        }
        if i + 1 == mark {
            at_mark = writes(&ralt.stats());
        }
        if (i + 1) % report == 0 {
            let s = ralt.stats();
            let w = writes(&s);
            println!(
                "{:>5.1}% flush {:>7.1} compaction {:>7.1} eviction {:>7.1} checkpoint {:>6.1} MB; \
                 hot set {:>6.1} / {:>6.1} MB, evictions {}, files {}, {:.0} s",
                100.0 * (i + 1) as f64 / accesses as f64,
                mb(w[0]),
                mb(w[1]),
                mb(w[2]),
                mb(w[3]),
                mb(s.hot_set_size),
                mb(s.hot_set_limit),
                s.evictions,
                s.files,
                started.elapsed().as_secs_f64()
            );
        }
    }
    stop.store(true, Ordering::Relaxed);
    let bg_cpu = bg.join().expect("maintenance thread")?;
    let run_s = started.elapsed().as_secs_f64();
    let s = ralt.stats();
    let w = writes(&s);
    println!(
        "maintenance thread CPU {bg_cpu:.1} s ({:.0} ns per access; {:.1} ns per byte written); \
         whole run {run_s:.1} s",
        bg_cpu * 1e9 / accesses as f64,
        bg_cpu * 1e9 / w.iter().sum::<u64>().max(1) as f64
    );
    let tail: Vec<f64> = (0..4).map(|c| mb(w[c] - at_mark[c])).collect();
    println!(
        "final 10%: flush {:.1} compaction {:.1} eviction {:.1} checkpoint {:.1} MB, \
         {:.0} bytes per access; dropped accesses {}",
        tail[0],
        tail[1],
        tail[2],
        tail[3],
        tail.iter().sum::<f64>() * 1e6 / (accesses / 10) as f64,
        s.dropped_accesses
    );
    // How well the hot set matches the hotspot: a sample of each side.
    let sample = 20_000u64;
    let hot_found = (0..sample)
        .filter(|&i| ralt.is_hot(&key(mix(i) % hot_keys)))
        .count();
    let cold_found = (0..sample)
        .filter(|&i| ralt.is_hot(&key(hot_keys + mix(i) % (keys - hot_keys))))
        .count();
    println!(
        "hotspot keys judged hot {:.2}%, other keys {:.3}%",
        100.0 * hot_found as f64 / sample as f64,
        100.0 * cold_found as f64 / sample as f64
    );
    Ok(())
}
