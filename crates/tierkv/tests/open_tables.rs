//! The table cache's count bound (`Options::max_open_files`).
//!
//! Invariant checked: with the automatic bound (0, the default) a store keeps every table
//! open, so a table's footer, index and filter are read once, not once per use. With
//! LevelDB's count of 1000, a store of 2 GiB in 1.5 MiB tables reopened its slow tables for
//! most reads: 0.84 extra slow-disk reads per slow get (docs/bench/hotrap-peer.md).

mod common;

use common::{key, tiny_options};
use tierkv::{Db, Options};

fn opens(db: &Db) -> u64 {
    let o = db.stats().table_opens;
    o.fast_opens + o.slow_opens
}

/// Fills a store with more than 1000 tables and reads every key twice; returns the table
/// count and the openings of the second pass.
fn second_pass_opens(max_open_files: usize) -> (usize, u64) {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options {
        target_file_size: 4 * 1024,
        max_open_files,
        ..tiny_options()
    };
    let db = Db::open(dir.path(), opts).unwrap();
    let n = 14_000u64;
    for i in 0..n {
        db.put(
            key(i),
            format!("value-{i:08}-{}", "x".repeat(400)).as_bytes(),
        )
        .unwrap();
    }
    db.flush().unwrap();
    db.compact_range(None, None).unwrap();
    let tables: usize = db.stats().levels.iter().map(|l| l.files).sum();
    let read_all = || {
        for i in 0..n {
            assert!(db.get(key(i)).unwrap().is_some(), "key {i} lost");
        }
    };
    read_all();
    let before = opens(&db);
    read_all();
    (tables, opens(&db) - before)
}

#[test]
fn every_table_stays_open_under_the_automatic_bound() {
    let (tables, reopened) = second_pass_opens(Options::default().max_open_files);
    assert!(
        tables > 1000,
        "only {tables} tables: the test needs more than 1000"
    );
    assert_eq!(reopened, 0, "{reopened} tables reopened among {tables}");
}

/// The check above can fail: a count below the table count reopens tables.
#[test]
fn a_count_below_the_table_count_reopens_tables() {
    let (tables, reopened) = second_pass_opens(1000);
    assert!(tables > 1000, "only {tables} tables");
    assert!(
        reopened > 0,
        "no table reopened among {tables} with room for 1000"
    );
}
