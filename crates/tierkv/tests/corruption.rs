//! Corruption: bytes flipped in table, WAL and manifest files.
//!
//! Checks invariant 3 (docs/DESIGN.md): every outcome is either correct data, a clean
//! recovery the format allows (a torn WAL tail), or an error naming the damaged file; never
//! wrong data, never a panic.

mod common;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use tierkv::{Db, Options};

fn files_with(dir: &Path, pred: impl Fn(&str) -> bool) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| pred(p.file_name().unwrap().to_str().unwrap()))
        .collect();
    v.sort();
    v
}

fn flip(path: &Path, offset: u64) {
    let mut data = std::fs::read(path).unwrap();
    data[offset as usize] ^= 0x5a;
    std::fs::write(path, data).unwrap();
}

fn build(dir: &Path, n: u64, flush: bool) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let db = Db::open(dir, common::tiny_options()).unwrap();
    let mut model = BTreeMap::new();
    for i in 0..n {
        let v = format!("value-{i}-{}", "p".repeat((i % 50) as usize)).into_bytes();
        db.put(common::key(i), &v).unwrap();
        model.insert(common::key(i), v);
    }
    if flush {
        db.flush().unwrap();
        db.wait_for_background().unwrap();
    }
    db.close().unwrap();
    model
}

/// Every read returns either the right value or an error; returns whether any error was seen.
fn reads_are_right_or_fail(db: &Db, model: &BTreeMap<Vec<u8>, Vec<u8>>) -> bool {
    let mut saw_error = false;
    for (k, v) in model {
        match db.get(k) {
            Ok(Some(got)) => assert_eq!(&got, v, "wrong value for {k:?}"),
            Ok(None) => panic!("key {k:?} vanished without an error"),
            Err(e) => {
                assert!(e.is_corruption(), "unexpected error kind: {e}");
                saw_error = true;
            }
        }
    }
    match db.scan(None, None, usize::MAX) {
        Ok(all) => {
            for (k, v) in &all {
                assert_eq!(model.get(k), Some(v), "scan invented or altered {k:?}");
            }
            if all.len() != model.len() {
                panic!("scan lost records without an error");
            }
        }
        Err(e) => {
            assert!(e.is_corruption(), "{e}");
            saw_error = true;
        }
    }
    saw_error
}

#[test]
fn flipped_table_bytes_are_detected() {
    let base = tempfile::tempdir().unwrap();
    let pristine = base.path().join("pristine");
    let model = build(&pristine, 600, true);
    let tables = files_with(&pristine, |n| n.ends_with(".sst"));
    assert!(!tables.is_empty());
    let mut rng = StdRng::seed_from_u64(3);
    let mut detected = 0;
    let trials = 40;
    for trial in 0..trials {
        let dir = base.path().join(format!("t{trial}"));
        copy_dir(&pristine, &dir);
        let table = &tables[rng.gen_range(0..tables.len())];
        let target = dir.join(table.file_name().unwrap());
        let len = std::fs::metadata(&target).unwrap().len();
        flip(&target, rng.gen_range(0..len));
        let name = target.file_name().unwrap().to_str().unwrap().to_string();
        match Db::open(&dir, common::tiny_options()) {
            Err(e) => {
                assert!(
                    e.to_string().contains(&name),
                    "open error must name {name}: {e}"
                );
                detected += 1;
            }
            Ok(db) => {
                let saw = reads_are_right_or_fail(&db, &model);
                match db.verify_checksums() {
                    Err(e) => {
                        assert!(e.to_string().contains(&name), "check must name {name}: {e}");
                        detected += 1;
                    }
                    Ok(_) => assert!(!saw, "reads failed but the checksum verification passed"),
                }
            }
        }
    }
    // Every byte of a table is covered by a checksum or a structural check.
    assert_eq!(detected, trials, "some flipped bytes went unnoticed");
}

#[test]
fn flipped_wal_bytes_fail_loudly_or_drop_only_the_tail() {
    let base = tempfile::tempdir().unwrap();
    let pristine = base.path().join("pristine");
    // Large write buffer: everything stays in the WAL.
    let opts = Options::default();
    {
        let db = Db::open(&pristine, opts.clone()).unwrap();
        for i in 0..300u64 {
            db.put(common::key(i), format!("v{i}")).unwrap();
        }
        db.close().unwrap();
    }
    let wal = files_with(&pristine, |n| n.ends_with(".log"))
        .pop()
        .unwrap();
    let len = std::fs::metadata(&wal).unwrap().len();
    let mut rng = StdRng::seed_from_u64(5);
    for trial in 0..30 {
        let dir = base.path().join(format!("w{trial}"));
        copy_dir(&pristine, &dir);
        let target = dir.join(wal.file_name().unwrap());
        // Half the trials hit the last record, half anywhere.
        let offset = if trial % 2 == 0 {
            rng.gen_range(len.saturating_sub(20)..len)
        } else {
            rng.gen_range(0..len)
        };
        flip(&target, offset);
        match Db::open(&dir, opts.clone()) {
            Err(e) => {
                assert!(e.is_corruption(), "{e}");
                let name = target.file_name().unwrap().to_str().unwrap();
                assert!(e.to_string().contains(name), "error must name the WAL: {e}");
            }
            Ok(db) => {
                // Recovery kept a prefix of the writes, with the right values.
                let mut n = 0;
                while let Some(v) = db.get(common::key(n)).unwrap() {
                    assert_eq!(v, format!("v{n}").into_bytes());
                    n += 1;
                }
                assert!(
                    db.scan(Some(&common::key(n)), None, 1).unwrap().is_empty(),
                    "a middle write was lost"
                );
                assert!(
                    n >= 299,
                    "only the damaged last record may be dropped, kept {n}"
                );
            }
        }
    }
}

#[test]
fn flipped_manifest_bytes_fail_loudly_or_recover_exactly() {
    let base = tempfile::tempdir().unwrap();
    let pristine = base.path().join("pristine");
    let model = build(&pristine, 600, true);
    let manifest = files_with(&pristine, |n| n.starts_with("MANIFEST-"))
        .pop()
        .unwrap();
    let len = std::fs::metadata(&manifest).unwrap().len();
    for offset in (0..len).step_by((len as usize / 25).max(1)) {
        let dir = base.path().join(format!("m{offset}"));
        copy_dir(&pristine, &dir);
        flip(&dir.join(manifest.file_name().unwrap()), offset);
        match Db::open(&dir, common::tiny_options()) {
            Err(e) => assert!(e.is_corruption(), "{e}"),
            Ok(db) => {
                assert!(!reads_are_right_or_fail(&db, &model));
            }
        }
    }
}

#[test]
fn missing_current_or_garbage_current_is_a_clear_error() {
    let base = tempfile::tempdir().unwrap();
    let dir = base.path().join("db");
    build(&dir, 50, true);
    std::fs::write(dir.join("CURRENT"), b"garbage").unwrap();
    let e = Db::open(&dir, common::tiny_options())
        .err()
        .expect("must fail");
    assert!(e.to_string().contains("CURRENT"), "{e}");
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.file_name() != "LOCK" {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}
