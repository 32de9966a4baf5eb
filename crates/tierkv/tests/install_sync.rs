//! No foreground write waits for a background job's manifest sync (docs/ARCHITECTURE.md,
//! "Owners and locks"): an install writes and syncs the manifest with the state lock
//! released, and a write that switches the memtable takes that lock. The test holds a flush's
//! manifest sync (a `FaultInjector` sync hook) until a write made meanwhile has been
//! acknowledged; were the manifest synced under the state lock, the write could not finish
//! and the hold would run out, failing the test.

mod common;

use parking_lot::{Condvar, Mutex};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;
use tierkv::env::FaultInjector;
use tierkv::Db;

/// How long the hook holds the sync at most: bounds a hang (the failure case), not a speed.
const HOLD: Duration = Duration::from_secs(20);

/// A gate the hook waits at until the test opens it (or `HOLD` runs out).
#[derive(Default)]
struct Gate {
    open: Mutex<bool>,
    opened: Condvar,
}

#[test]
fn a_write_completes_while_a_flush_syncs_the_manifest() {
    let dir = tempfile::tempdir().unwrap();
    let faults = FaultInjector::new();
    let opts = tierkv::Options {
        fault_injector: Some(faults.clone()),
        ..common::tiny_options()
    };
    let db = Arc::new(Db::open(dir.path(), opts).unwrap());
    for i in 0..100u64 {
        db.put(common::key(i), b"before").unwrap();
    }

    let armed = Arc::new(AtomicBool::new(true));
    let held_too_long = Arc::new(AtomicBool::new(false));
    let gate = Arc::new(Gate::default());
    let (entered_tx, entered) = mpsc::channel::<()>();
    let entered_tx = Mutex::new(entered_tx);
    {
        let (armed, held_too_long, gate) = (armed.clone(), held_too_long.clone(), gate.clone());
        faults.before_sync(
            "MANIFEST",
            Arc::new(move |_path| {
                if !armed.swap(false, Ordering::AcqRel) {
                    return;
                }
                let _ = entered_tx.lock().send(());
                let mut open = gate.open.lock();
                if !*open && gate.opened.wait_for(&mut open, HOLD).timed_out() {
                    held_too_long.store(true, Ordering::Release);
                }
            }),
        );
    }

    let flusher = {
        let db = db.clone();
        std::thread::spawn(move || db.flush())
    };
    entered
        .recv_timeout(Duration::from_secs(120))
        .expect("the flush reached its manifest sync");
    // The flush's install is inside its manifest sync now.
    db.put(b"during", b"the sync").unwrap();
    db.put_opt(
        b"during-synced",
        b"the sync",
        &tierkv::WriteOptions { sync: true },
    )
    .unwrap();
    // A write that fills the memtable switches it, under the state lock (a write with
    // room skips that lock altogether; `db::tests` checks that).
    db.put(b"during-switch", vec![b's'; 20 * 1024]).unwrap();
    let acknowledged_in_time = !held_too_long.load(Ordering::Acquire);
    *gate.open.lock() = true;
    gate.opened.notify_all();
    flusher.join().unwrap().unwrap();
    assert!(
        acknowledged_in_time,
        "the writes waited for the flush's manifest sync (the state lock was held across it)"
    );
    assert_eq!(
        db.get(b"during").unwrap().as_deref(),
        Some(&b"the sync"[..])
    );
    assert_eq!(
        db.get(common::key(7)).unwrap().as_deref(),
        Some(&b"before"[..])
    );
    assert!(db.stats().flushes >= 1);
}
