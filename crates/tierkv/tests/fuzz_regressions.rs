//! The fuzz targets' checks (fuzz/src/engine.rs) over the committed seed corpora
//! (`fuzz/seeds/<target>/`) and every input a fuzz run found crashing
//! (`fuzz/regressions/<target>/`, each fixed since): a crash found once stays fixed, and
//! the checks themselves stay compiled and exercised by `cargo test` without libFuzzer.
//! Invariant 3 of docs/DESIGN.md (detect, never invent).

#[path = "../../../fuzz/src/engine.rs"]
#[allow(dead_code)]
mod engine;

use std::path::{Path, PathBuf};

/// The files of `fuzz/seeds/<target>` and `fuzz/regressions/<target>`, sorted.
fn inputs(target: &str) -> Vec<PathBuf> {
    let fuzz = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz");
    let mut files: Vec<PathBuf> = ["seeds", "regressions"]
        .iter()
        .filter_map(|d| std::fs::read_dir(fuzz.join(d).join(target)).ok())
        .flatten()
        .map(|e| e.expect("corpus entry").path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
}

fn run(target: &str, min_inputs: usize, check: impl Fn(&[u8], &Path)) {
    let files = inputs(target);
    assert!(
        files.len() >= min_inputs,
        "{target}: expected at least {min_inputs} committed inputs, found {}",
        files.len()
    );
    for f in files {
        let data = std::fs::read(&f).expect("read corpus file");
        let dir = tempfile::tempdir().expect("scratch dir");
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| check(&data, dir.path())));
        if let Err(e) = r {
            eprintln!("{target}: input {} failed", f.display());
            std::panic::resume_unwind(e);
        }
    }
}

#[test]
fn sst_table() {
    run("sst_table", 2, engine::sst_table);
}

#[test]
fn sst_damage() {
    run("sst_damage", 2, engine::sst_damage);
}

#[test]
fn wal_log() {
    run("wal_log", 2, |d, _| engine::wal_log(d));
}

#[test]
fn wal_replay() {
    run("wal_replay", 2, engine::wal_replay);
}

#[test]
fn manifest() {
    run("manifest", 2, engine::manifest);
}

#[test]
fn ralt() {
    run("ralt", 2, engine::ralt);
}

/// A data block whose LZ4 header claims 4 GiB uncompressed (checksum recomputed, as a
/// forged file would have it): a read is a corruption error, not a 4 GiB allocation.
#[test]
fn lz4_size_bomb_is_corruption() {
    use tierkv::env::{Env, IoCause, Tier};
    let fuzz = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz");
    let data = std::fs::read(fuzz.join("regressions/sst_table/lz4-size-bomb")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("000001.sst"), data).unwrap();
    let env = Env::single(dir.path(), false).unwrap();
    let file = env.open_random(Tier::Fast, "000001.sst").unwrap();
    let t = std::sync::Arc::new(tierkv::sst::Table::open(file, 1, None, IoCause::Check).unwrap());
    let err = t.verify(IoCause::Check).unwrap_err().to_string();
    assert!(err.contains("claims 4294967280 bytes"), "{err}");
}

mod common;

use tierkv::{Db, WriteBatch, WriteOptions};

fn copy_seed(from: &Path, out: &Path, target: &str, name: &str, prefix: &[u8]) {
    let dir = out.join(target);
    std::fs::create_dir_all(&dir).expect("seed dir");
    let mut data = prefix.to_vec();
    data.extend(std::fs::read(from).expect("read seed source"));
    std::fs::write(dir.join(name), data).expect("write seed");
}

/// The `n` smallest files of `dir` whose name ends with `ext`.
fn smallest(dir: &Path, ext: &str, n: usize) -> Vec<PathBuf> {
    let mut files: Vec<(u64, PathBuf)> = std::fs::read_dir(dir)
        .expect("list")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.to_string_lossy().ends_with(ext))
        .map(|p| (p.metadata().expect("stat").len(), p))
        .collect();
    files.sort();
    files.into_iter().take(n).map(|(_, p)| p).collect()
}

/// Writes seed corpora taken from a real two-tier store with promotion into
/// `$TIERKV_FUZZ_SEEDS/<target>/` (`fuzz/make-seeds.sh` runs it). Not part of the suite.
#[test]
#[ignore = "writes fuzz seed corpora; run by fuzz/make-seeds.sh"]
fn write_fuzz_seeds() {
    let Ok(out) = std::env::var("TIERKV_FUZZ_SEEDS") else {
        return;
    };
    let out = PathBuf::from(out);
    let fast = tempfile::tempdir().unwrap();
    let slow = tempfile::tempdir().unwrap();
    let opts = || common::two_tier_options(slow.path(), 256 * 1024, true);
    let db = Db::open(fast.path(), opts()).unwrap();
    let value = |i: u64, len: usize| {
        let mut v = format!("value-{i}-").into_bytes();
        v.resize(len, b'a' + (i % 26) as u8);
        v
    };
    // A small L0 table with puts, deletes and several versions of some keys.
    for i in 0..40u64 {
        db.put(common::key(i % 30), value(i, 20 + (i as usize % 5) * 30))
            .unwrap();
        if i % 7 == 0 {
            db.delete(common::key(i / 2)).unwrap();
        }
    }
    db.flush().unwrap();
    for p in smallest(fast.path(), ".sst", 1) {
        copy_seed(&p, &out, "sst_table", "l0.sst", b"");
    }
    // Enough data to reach the slow tier, then skewed reads of it: promotion and RALT.
    for i in 0..3000u64 {
        db.put(common::key(i), value(i, 200)).unwrap();
    }
    db.compact_range(None, None).unwrap();
    for round in 0..20u64 {
        for i in 0..100u64 {
            db.get(common::key((i * 7 + round) % 100)).unwrap();
        }
        db.get(common::key(100 + round * 37)).unwrap();
    }
    db.wait_for_background().unwrap();
    db.flush().unwrap();
    db.wait_for_background().unwrap();
    // WALs: a few synced small records, then one record split into fragments.
    let sync = WriteOptions { sync: true };
    let live_wal = |dir: &Path| smallest(dir, ".log", usize::MAX).into_iter().max().unwrap();
    for i in 0..5u64 {
        db.put_opt(common::key(5000 + i), value(i, 40), &sync)
            .unwrap();
    }
    let mut b = WriteBatch::new();
    b.put(b"batch-a", b"1")
        .delete(b"batch-b")
        .put(b"batch-c", b"");
    db.write_opt(b, &sync).unwrap();
    let wal = live_wal(fast.path());
    for t in ["wal_log", "wal_replay"] {
        copy_seed(&wal, &out, t, "small.log", b"");
    }
    db.put_opt(b"big", value(1, 40 * 1024), &sync).unwrap();
    let wal = live_wal(fast.path());
    for t in ["wal_log", "wal_replay"] {
        copy_seed(&wal, &out, t, "fragmented.log", b"");
    }
    let stats = db.stats();
    assert!(
        stats.promotion.cache_inserts > 0,
        "no slow-tier reads cached"
    );
    db.close().unwrap();
    for p in smallest(fast.path(), ".sst", 1) {
        copy_seed(&p, &out, "sst_table", "fast.sst", b"");
    }
    for p in smallest(slow.path(), ".sst", 1) {
        copy_seed(&p, &out, "sst_table", "slow.sst", b"");
    }
    let manifest = smallest(fast.path(), "", usize::MAX)
        .into_iter()
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("MANIFEST-")
        })
        .unwrap();
    copy_seed(&manifest, &out, "manifest", "store.manifest", b"");
    let fresh = tempfile::tempdir().unwrap();
    Db::open(fresh.path(), common::tiny_options())
        .unwrap()
        .close()
        .unwrap();
    let manifest = smallest(fresh.path(), "", usize::MAX)
        .into_iter()
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("MANIFEST-")
        })
        .unwrap();
    copy_seed(&manifest, &out, "manifest", "fresh.manifest", b"");
    let ralt = fast.path().join("ralt");
    copy_seed(&ralt.join("MANIFEST"), &out, "ralt", "manifest", b"M");
    for (i, p) in smallest(&ralt, ".rlt", 2).iter().enumerate() {
        // The first byte picks the level the run file is listed at.
        copy_seed(p, &out, "ralt", &format!("run-{i}.rlt"), &[i as u8]);
    }
    // Structured inputs of `sst_damage`: option byte, damage position, burst pattern,
    // then entries (key length, key, shape, seed). See `decode_damage_case`.
    let mut entries = Vec::new();
    for i in 0..40u8 {
        let key = format!("key{:03}", i / 2);
        entries.push(key.len() as u8);
        entries.extend_from_slice(key.as_bytes());
        // Low bit: a deletion (every ninth entry).
        entries.push((i.wrapping_mul(37) & 0xfe) | (i % 9 == 0) as u8);
        entries.push(i);
    }
    for (name, head) in [
        ("plain", [0x00u8, 0, 0, 0, 0, 0, 0]),
        (
            "lz4-bloom-burst",
            [0x5d, 0x10, 0x02, 0x03, 0xff, 0x01, 0x80],
        ),
        ("restart1-truncate", [0xa0, 0x40, 0x01, 0, 0, 0, 0]),
        ("big-blocks-burst", [0xfe, 0x33, 0x00, 0x01, 0x20, 0, 0]),
    ] {
        let dir = out.join("sst_damage");
        std::fs::create_dir_all(&dir).unwrap();
        let mut data = head.to_vec();
        data.extend_from_slice(&entries);
        std::fs::write(dir.join(name), data).unwrap();
    }
}
