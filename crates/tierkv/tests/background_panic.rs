//! A panic in a background job (a bug) becomes the store's background error: writers and
//! `wait_for_background` get an error naming it instead of waiting forever for work no
//! thread will do, reads still answer, and closing the store returns. The panic comes
//! from the `compact.outputs_written` kill point armed to panic
//! (`TIERKV_KILL_ACTION=panic`, `env::kill`); it is armed for this test binary alone,
//! which holds this one test.

mod common;

use std::time::Duration;
use tierkv::{Db, Error};

#[test]
fn a_panicking_compaction_becomes_the_stores_background_error() {
    // Read at the first kill point reached, which is after this (no store is open yet).
    std::env::set_var("TIERKV_KILL_POINTS", "compact.outputs_written");
    std::env::set_var("TIERKV_KILL_ACTION", "panic");
    let dir = tempfile::tempdir().unwrap();
    let db = std::sync::Arc::new(Db::open(dir.path(), common::tiny_options()).unwrap());
    // Writes and the wait run on a thread: before the fix they blocked forever, and a
    // hung test must fail, not hang the suite.
    let (tx, rx) = std::sync::mpsc::channel();
    let worker = db.clone();
    std::thread::spawn(move || {
        let mut written = Vec::new();
        // Enough memtables for L0 to pass its trigger, so that a compaction runs and
        // panics; the writes then fail once the error is set (or stall behind L0, then
        // fail).
        let mut refused = None;
        for i in 0..20_000u64 {
            let k = common::key(i);
            match worker.put(&k, vec![b'v'; 100]) {
                Ok(()) => written.push(k),
                Err(e) => {
                    refused = Some(e);
                    break;
                }
            }
        }
        let waited = worker.wait_for_background();
        let _ = tx.send((written, refused, waited));
    });
    let (written, refused, waited) = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("writes and wait_for_background still blocked after 60 s");
    let named = |e: &Error| match e {
        Error::Background(inner) => matches!(
            **inner,
            Error::BackgroundPanic(ref m) if m.contains("compact.outputs_written")
        ),
        _ => false,
    };
    let err = waited.expect_err("wait_for_background saw no error");
    assert!(named(&err), "{err}");
    let put = db.put(b"after", b"x").expect_err("a write after the panic");
    assert!(named(&put), "{put}");
    if let Some(e) = refused {
        assert!(named(&e), "{e}");
    }
    assert!(!written.is_empty());
    for k in written.iter().step_by(101) {
        assert_eq!(db.get(k).unwrap().as_deref(), Some(&[b'v'; 100][..]));
    }
    drop(db);
}
