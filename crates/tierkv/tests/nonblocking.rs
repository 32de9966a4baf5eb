//! The calls for callers that must not wait (an event loop such as `tierkv serve`'s):
//! `Db::get_entry_in_memory` and `Db::write_now`. Invariants checked:
//! - an in-memory read answers exactly what `get_entry_opt` answers when it answers (from
//!   the memtables, the point caches, or tables whose blocks are cached), and otherwise
//!   fails with `Error::WouldBlock` leaving the store's counters, AC-Key's lookup counts and
//!   the block cache's as if it had never been made, having read no disk;
//! - inside `env::MemoryOnly`, a read that needs the disk fails with `WouldBlock`;
//! - `write_now` either applies its whole batch (visible at once, in the WAL, recovered
//!   after a reopen) or fails with `WouldBlock` having written nothing, and never when the
//!   plain write would not have had to wait;
//! - mixed with waiting writes and reads from several threads, the store ends equal to a
//!   model of every acknowledged write.

mod common;

use common::{key, tiny_options};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::sync::Arc;
use tierkv::{Db, Error, ReadOptions, WriteBatch};

fn in_memory(db: &Db, k: &[u8]) -> Result<Option<Vec<u8>>, Error> {
    db.get_entry_in_memory(k, &ReadOptions::new())
        .map(|e| e.map(|e| e.value))
}

/// Memtable keys (present and deleted) are answered, and a key no table can hold; a
/// flushed key is not until its block is cached (or the point cache holds its value); a
/// refused read counts no get, no point-cache or block-cache lookup, and reads no disk.
#[test]
fn in_memory_reads_answer_what_memory_holds_and_leave_no_trace_otherwise() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), tiny_options()).unwrap();
    let value = vec![b'v'; 100];
    db.put(key(1), &value).unwrap();
    db.put(key(2), &value).unwrap();
    db.delete(key(2)).unwrap();
    assert_eq!(in_memory(&db, &key(1)).unwrap(), Some(value.clone()));
    assert_eq!(
        in_memory(&db, &key(2)).unwrap(),
        None,
        "deleted in the memtable"
    );
    assert_eq!(in_memory(&db, &key(3)).unwrap(), None, "no table at all");

    db.flush().unwrap();
    let before = db.stats();
    let reads = tierkv::env::thread_read_count();
    for _ in 0..10 {
        assert!(matches!(in_memory(&db, &key(1)), Err(Error::WouldBlock(_))));
    }
    let after = db.stats();
    assert_eq!(after.gets, before.gets, "a refused read counts no get");
    assert_eq!(
        (after.cache.kv.lookups, after.cache.kp.lookups),
        (before.cache.kv.lookups, before.cache.kp.lookups),
        "a refused read makes no point-cache lookup"
    );
    assert_eq!(
        after.cache.block.lookups, before.cache.block.lookups,
        "a refused read makes no block-cache lookup"
    );
    assert_eq!(
        tierkv::env::thread_read_count(),
        reads,
        "a refused read read the disk"
    );
    // Inside `MemoryOnly` the waiting read itself refuses the disk.
    {
        let _memory_only = tierkv::env::MemoryOnly::enter();
        assert!(matches!(db.get(key(1)), Err(Error::WouldBlock(_))));
    }
    // A waiting read caches the key's block (and points the KP cache at it); then memory
    // answers, from that block, without a disk read, counting the get.
    assert_eq!(db.get(key(1)).unwrap(), Some(value.clone()));
    let (gets, reads) = (db.stats().gets, tierkv::env::thread_read_count());
    assert_eq!(in_memory(&db, &key(1)).unwrap(), Some(value.clone()));
    assert_eq!(
        in_memory(&db, &key(2)).unwrap(),
        None,
        "deleted, in the same block"
    );
    assert_eq!(
        tierkv::env::thread_read_count(),
        reads,
        "answered from memory"
    );
    assert_eq!(db.stats().gets, gets + 2);
    assert_eq!(db.get(key(1)).unwrap(), Some(value));
}

/// Tables and blocks leaving memory while an in-memory read runs (another thread's reads
/// evict them: 20 open tables, a 64 KiB cache) make it refuse, never read the disk: a
/// block evicted between the read's check and its lookup ends in `WouldBlock`
/// (`MemoryOnly`). Every answer given equals the model.
#[test]
fn in_memory_reads_never_read_the_disk_while_others_evict() {
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(Db::open(dir.path(), tiny_options()).unwrap());
    const KEYS: u64 = 3_000;
    for i in 0..KEYS {
        db.put(key(i), format!("value{i:090}")).unwrap();
    }
    db.flush().unwrap();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let evictor = {
        let (db, stop) = (db.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut rng = StdRng::seed_from_u64(7);
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                db.get(key(rng.gen_range(0..KEYS))).unwrap();
            }
        })
    };
    let mut rng = StdRng::seed_from_u64(8);
    let (mut answered, mut refused) = (0, 0);
    for _ in 0..100_000 {
        let i = rng.gen_range(0..KEYS);
        let reads = tierkv::env::thread_read_count();
        match in_memory(&db, &key(i)) {
            Ok(v) => {
                assert_eq!(v, Some(format!("value{i:090}").into_bytes()));
                answered += 1;
            }
            Err(Error::WouldBlock(_)) => {
                refused += 1;
                // The waiting read, as the server's blocking path makes it, caches the
                // block for the next in-memory read of a key near it.
                if refused % 4 == 0 {
                    db.get(key(i)).unwrap();
                }
                continue;
            }
            Err(e) => panic!("in-memory read: {e}"),
        }
        assert_eq!(
            tierkv::env::thread_read_count(),
            reads,
            "an in-memory read read the disk"
        );
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    evictor.join().unwrap();
    assert!(
        answered > 1_000 && refused > 1_000,
        "{answered} answered, {refused} refused"
    );
}

/// `write_now` applies at once when the memtable has room, and refuses (writing nothing)
/// when the memtable is full, where a waiting write would switch it; what it wrote is
/// recovered from the WAL after a reopen.
#[test]
fn write_now_applies_or_writes_nothing_and_is_recovered() {
    let dir = tempfile::tempdir().unwrap();
    let opts = tiny_options();
    let buffer = opts.write_buffer_size;
    let mut model = BTreeMap::new();
    {
        let db = Db::open(dir.path(), opts.clone()).unwrap();
        let mut refused = 0;
        for i in 0..2_000u64 {
            let mut b = WriteBatch::new();
            b.put(key(i), format!("now{i}"));
            b.put(key(i + 10_000), format!("pair{i}"));
            match db.write_now(b.clone()) {
                Ok(()) => {}
                Err(Error::WouldBlock(_)) => {
                    refused += 1;
                    assert_eq!(db.get(key(i)).unwrap(), None, "a refused write wrote");
                    db.write(b).unwrap();
                }
                Err(e) => panic!("write_now: {e}"),
            }
            model.insert(key(i), format!("now{i}").into_bytes());
            model.insert(key(i + 10_000), format!("pair{i}").into_bytes());
            assert_eq!(
                db.get(key(i)).unwrap(),
                Some(format!("now{i}").into_bytes())
            );
        }
        // About 100 KB into 16 KiB memtables: every switch is one refusal, no more.
        let switches = db.stats().flushes;
        assert!(refused > 0, "the memtable never filled");
        assert!(
            refused <= 2 * (switches + 2),
            "{refused} refusals for {switches} flushes ({buffer}-byte memtables)"
        );
    }
    let db = Db::open(dir.path(), opts).unwrap();
    let got: BTreeMap<Vec<u8>, Vec<u8>> = db
        .scan(None, None, usize::MAX)
        .unwrap()
        .into_iter()
        .collect();
    assert_eq!(got, model, "after a reopen");
}

/// Threads mixing `write_now` (falling back to `write` on `WouldBlock`), waiting writes,
/// in-memory reads (falling back to `get`) and deletes over shared keys, each thread
/// owning its keys: the store ends equal to the model of acknowledged writes, and every
/// in-memory answer matched the thread's model at the time.
#[test]
fn nonblocking_calls_mixed_with_waiting_ones_match_the_model() {
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(Db::open(dir.path(), tiny_options()).unwrap());
    let threads: Vec<_> = (0..4u64)
        .map(|t| {
            let db = db.clone();
            std::thread::spawn(move || {
                let mut rng = StdRng::seed_from_u64(t);
                let mut model: BTreeMap<Vec<u8>, Option<Vec<u8>>> = BTreeMap::new();
                let (mut now_ok, mut mem_ok) = (0u64, 0u64);
                for op in 0..6_000u64 {
                    let k = key(t * 1_000 + rng.gen_range(0..300));
                    match rng.gen_range(0..10) {
                        0..=3 => {
                            let v = format!("t{t}-{op}").into_bytes();
                            let mut b = WriteBatch::new();
                            b.put(&k, &v);
                            match db.write_now(b) {
                                Ok(()) => now_ok += 1,
                                Err(Error::WouldBlock(_)) => db.put(&k, &v).unwrap(),
                                Err(e) => panic!("{e}"),
                            }
                            model.insert(k, Some(v));
                        }
                        4 => {
                            db.delete(&k).unwrap();
                            model.insert(k, None);
                        }
                        5 => {
                            let v = format!("w{t}-{op}").into_bytes();
                            db.put(&k, &v).unwrap();
                            model.insert(k, Some(v));
                        }
                        _ => {
                            let want = model.get(&k).cloned().flatten();
                            let got = match in_memory(&db, &k) {
                                Ok(v) => {
                                    mem_ok += 1;
                                    v
                                }
                                Err(Error::WouldBlock(_)) => db.get(&k).unwrap(),
                                Err(e) => panic!("{e}"),
                            };
                            assert_eq!(got, want, "thread {t}, op {op}");
                        }
                    }
                }
                assert!(now_ok > 0 && mem_ok > 0, "thread {t}: {now_ok} {mem_ok}");
                model
            })
        })
        .collect();
    let mut model = BTreeMap::new();
    for t in threads {
        model.extend(t.join().unwrap());
    }
    for (k, v) in model {
        assert_eq!(db.get(&k).unwrap(), v);
    }
}
