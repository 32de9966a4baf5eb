//! The read unit of a point read with the default table options.
//!
//! Invariant checked: a get that misses every cache moves one data block from disk, and with
//! the defaults (`Options::block_size` 4 KiB, `block_records` 8) that block holds a few 1 KiB
//! records, not sixteen: under 6 KiB read per disk read, sector alignment and the block
//! trailer included. With 16 KiB blocks (the default before) each such get read about 16.6
//! KiB, and beside the HotRAP prototype on a disk where 16 KiB random reads reach 42K IOPS
//! and 4 KiB ones 75K, RO hotspot-5% ran at 0.69-0.73x the throughput of 4 KiB blocks
//! (docs/bench/hotrap-peer.md).

mod common;

use common::key;
use tierkv::env::IoCause;
use tierkv::{Db, Options};

#[test]
fn a_point_read_of_a_1kib_record_moves_about_4kib() {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options {
        // Small enough that nearly every get below misses it.
        cache_size: 64 * 1024,
        ..Options::default()
    };
    let db = Db::open(dir.path(), opts.clone()).unwrap();
    let n = 4_000u64;
    let value = vec![b'v'; 1000];
    for i in 0..n {
        db.put(key(i), &value).unwrap();
    }
    db.flush().unwrap();
    db.close().unwrap();

    let db = Db::open(dir.path(), opts).unwrap();
    let before = db.stats().io.fast.cause(IoCause::UserGet);
    // Every 7th key once: no key twice, so no cache can answer from an earlier get.
    for i in (0..n).step_by(7) {
        assert_eq!(db.get(key(i)).unwrap().as_deref(), Some(value.as_slice()));
    }
    let after = db.stats().io.fast.cause(IoCause::UserGet);
    let reads = after.read_ops - before.read_ops;
    let bytes = after.read_bytes - before.read_bytes;
    assert!(reads >= 400, "{reads} disk reads for 572 gets");
    let per_read = bytes / reads;
    assert!(
        per_read < 6 * 1024,
        "{per_read} B per disk read of a 1 KiB record ({reads} reads)"
    );
}
