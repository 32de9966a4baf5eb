//! The change feed (`Db::changes_since`): a replica built from a checkpoint and fed the
//! batches after its sequence holds exactly the primary's contents, batch for batch, while
//! the primary flushes and compacts (retired WALs kept by `wal_retention_bytes`, also
//! across a reopen); it resumes from any sequence (inside a batch: the rest of it); a
//! sequence whose batch is no longer kept is `ChangesGone`.

mod common;

use common::contents;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tierkv::{Db, Error, Options, WriteBatch};

fn retaining() -> Options {
    Options {
        wal_retention_bytes: 64 << 20,
        ..common::tiny_options()
    }
}

/// Random puts, deletes and multi-key batches.
fn write_some(db: &Db, rng: &mut StdRng, n: usize, tag: &str) {
    for i in 0..n {
        let k = common::key(rng.gen_range(0..200));
        match rng.gen_range(0..10) {
            0 => db.delete(&k).unwrap(),
            1 => {
                let mut b = WriteBatch::new();
                for j in 0..3 {
                    b.put(common::key(rng.gen_range(0..200)), format!("{tag}{i}-{j}"));
                }
                b.delete(common::key(rng.gen_range(0..200)));
                db.write(b).unwrap();
            }
            _ => db
                .put(&k, format!("{tag}{i}").repeat(rng.gen_range(1..20)))
                .unwrap(),
        }
    }
}

/// Applies every change after `from` to `replica`, a few at a time; returns the last
/// sequence applied.
fn catch_up(primary: &Db, replica: &Db, mut from: u64) -> u64 {
    loop {
        let changes = primary.changes_since(from, 4096).unwrap();
        if changes.is_empty() {
            return from;
        }
        for c in changes {
            assert_eq!(c.sequence, from + 1, "batches follow each other");
            from = c.last_sequence();
            replica.write(c.batch).unwrap();
        }
    }
}

#[test]
fn a_checkpoint_plus_the_feed_is_the_primary() {
    let dir = tempfile::tempdir().unwrap();
    let primary = Db::open(dir.path().join("p"), retaining()).unwrap();
    let mut rng = StdRng::seed_from_u64(5);
    write_some(&primary, &mut rng, 1500, "a");
    let cp = primary.checkpoint(dir.path().join("r"), None).unwrap();
    write_some(&primary, &mut rng, 1500, "b");
    let replica = Db::open(dir.path().join("r"), common::tiny_options()).unwrap();
    let mut applied = catch_up(&primary, &replica, cp.sequence);
    assert_eq!(contents(&replica), contents(&primary));
    // More writes, flushes and compactions; the replica resumes where it stopped.
    write_some(&primary, &mut rng, 2000, "c");
    primary.compact_range(None, None).unwrap();
    applied = catch_up(&primary, &replica, applied);
    assert_eq!(contents(&replica), contents(&primary));
    // The retired WALs survive a reopen of the primary (within the retention).
    primary.close().unwrap();
    let primary = Db::open(dir.path().join("p"), retaining()).unwrap();
    let fresh = Db::open(dir.path().join("fresh"), common::tiny_options()).unwrap();
    catch_up(&primary, &fresh, 0);
    assert_eq!(
        contents(&fresh),
        contents(&primary),
        "the whole history is kept"
    );
    write_some(&primary, &mut rng, 300, "d");
    catch_up(&primary, &replica, applied);
    assert_eq!(contents(&replica), contents(&primary));
}

#[test]
fn changes_no_longer_kept_are_refused_and_a_start_inside_a_batch_gets_its_rest() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path().join("p"), common::tiny_options()).unwrap();
    let mut rng = StdRng::seed_from_u64(6);
    write_some(&db, &mut rng, 2000, "a");
    db.flush().unwrap();
    db.flush().unwrap();
    let logs = std::fs::read_dir(dir.path().join("p"))
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .ends_with(".log")
        })
        .count();
    assert!(
        logs <= 2,
        "{logs} WALs kept without retention (empty ones included)"
    );
    // Without retention the flushed WALs are gone.
    match db.changes_since(0, 1 << 20) {
        Err(Error::ChangesGone { wanted: 1, .. }) => {}
        other => panic!("expected ChangesGone, got {other:?}"),
    }
    // A batch of 3 takes 3 sequence numbers; a start inside it is refused.
    let before = db.changes_since(u64::MAX - 1, 1).map(|c| c.len());
    assert!(before.is_ok_and(|n| n == 0), "nothing after the end");
    let db = Db::open(dir.path().join("q"), retaining()).unwrap();
    let mut b = WriteBatch::new();
    b.put("x", "1").put("y", "2").put("z", "3");
    db.write(b).unwrap();
    db.put("after", "4").unwrap();
    let all = db.changes_since(0, 1 << 20).unwrap();
    assert_eq!(all.len(), 2);
    assert_eq!((all[0].sequence, all[0].last_sequence()), (1, 3));
    assert_eq!(all[1].sequence, 4);
    // A start inside a batch (another store cut its batches elsewhere) gets the rest of
    // it, then what follows; from memory as from the WAL files.
    let check_rest = |db: &Db| {
        let rest = db.changes_since(1, 1 << 20).unwrap();
        assert_eq!((rest[0].sequence, rest[0].last_sequence()), (2, 3));
        let keys: Vec<&[u8]> = rest[0].batch.iter().map(|e| e.key).collect();
        assert_eq!(keys, vec![&b"y"[..], b"z"]);
        assert_eq!(rest[1].sequence, 4);
    };
    check_rest(&db);
    db.keep_recent_changes(1 << 20);
    db.put("more", "5").unwrap();
    let mut b = WriteBatch::new();
    b.put("p", "1").delete("q").put("r", "3");
    db.write(b).unwrap();
    let from_memory = db.change_bytes_in_memory(6, 1 << 20).unwrap().unwrap();
    assert_eq!(
        (from_memory[0].sequence, from_memory[0].last_sequence),
        (7, 8),
        "the rest of the batch 6..=8, from memory"
    );
    check_rest(&db);
    assert_eq!(db.changes_since(3, 1 << 20).unwrap().len(), 3);
    assert!(db.changes_since(8, 1 << 20).unwrap().is_empty());
}

/// Invariant (replication's): a store opened from a checkpoint taken under write load is
/// at exactly the checkpoint's sequence, and applying the feed's changes with
/// `apply_change` gives every write the primary's sequence number, so the two stores'
/// `latest_sequence` agree and their contents are equal. A change that does not follow
/// is refused, and a change survives its byte form.
#[test]
fn applied_changes_keep_the_primarys_sequence_numbers() {
    let dir = tempfile::tempdir().unwrap();
    let primary = std::sync::Arc::new(Db::open(dir.path().join("p"), retaining()).unwrap());
    let mut rng = StdRng::seed_from_u64(7);
    write_some(&primary, &mut rng, 500, "a");
    let writer = {
        let p = primary.clone();
        std::thread::spawn(move || {
            let mut rng = StdRng::seed_from_u64(8);
            write_some(&p, &mut rng, 3000, "w");
        })
    };
    let cp = primary.checkpoint(dir.path().join("r"), None).unwrap();
    writer.join().unwrap();
    let replica = Db::open(dir.path().join("r"), common::tiny_options()).unwrap();
    assert_eq!(
        replica.latest_sequence(),
        cp.sequence,
        "the copy is at its sequence"
    );
    let wopts = tierkv::WriteOptions::default();
    let mut from = cp.sequence;
    loop {
        let changes = primary.changes_since(from, 4096).unwrap();
        if changes.is_empty() {
            break;
        }
        for c in changes {
            let back = tierkv::Change::from_bytes(&c.to_bytes(), "test".as_ref()).unwrap();
            assert_eq!(
                (back.sequence, back.batch.len()),
                (c.sequence, c.batch.len())
            );
            from = back.last_sequence();
            replica.apply_change(back, &wopts).unwrap();
        }
    }
    assert_eq!(replica.latest_sequence(), primary.latest_sequence());
    assert_eq!(contents(&replica), contents(&primary));
    // A change that does not follow the replica's latest write is refused.
    primary.put("late", "1").unwrap();
    primary.put("later", "2").unwrap();
    let mut next = primary.changes_since(from, 1 << 20).unwrap();
    let second = next.pop().unwrap();
    let e = replica.apply_change(second, &wopts).unwrap_err();
    assert!(e.to_string().contains("does not follow"), "{e}");
    assert_eq!(replica.latest_sequence(), from, "nothing written");
}

/// Invariant: with `keep_recent_changes`, the feed is served from memory: the batches
/// after the point it was turned on stay available after their WALs are removed (no
/// retention), and the oldest go beyond the capacity.
#[test]
fn recent_changes_are_served_from_memory() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path().join("p"), common::tiny_options()).unwrap();
    let mut rng = StdRng::seed_from_u64(9);
    write_some(&db, &mut rng, 100, "a");
    let on_at = db.latest_sequence();
    db.keep_recent_changes(1 << 20);
    write_some(&db, &mut rng, 300, "b");
    db.flush().unwrap();
    db.flush().unwrap();
    assert!(
        matches!(db.changes_since(0, 1 << 20), Err(Error::ChangesGone { .. })),
        "before the memory's start, the removed WALs are missed"
    );
    let fresh = Db::open(dir.path().join("r"), common::tiny_options()).unwrap();
    let mut from = on_at;
    let mut n = 0;
    loop {
        let changes = db.changes_since(from, 512).unwrap();
        if changes.is_empty() {
            break;
        }
        for c in changes {
            assert_eq!(c.sequence, from + 1);
            from = c.last_sequence();
            n += 1;
        }
    }
    assert_eq!(from, db.latest_sequence());
    assert_eq!(n, 300);
    drop(fresh);
    // A small capacity keeps only the newest.
    db.keep_recent_changes(200);
    write_some(&db, &mut rng, 50, "c");
    db.flush().unwrap();
    assert!(matches!(
        db.changes_since(on_at, 1 << 20),
        Err(Error::ChangesGone { .. })
    ));
}
