//! Crash test: a child process writes with `sync = true` and reports every acknowledged
//! write on stdout; the parent kills it with SIGKILL at random moments, reopens the store
//! and checks what survived.
//!
//! Checks invariant 2 (docs/DESIGN.md): every acknowledged synced write is present after the
//! kill, and writes appear in order: the surviving keys form a gap-free prefix of the
//! writer's sequence (at most the one in-flight write beyond the last acknowledgement).

mod common;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::Duration;
use tierkv::{Db, WriteOptions};

const CHILD_ENV: &str = "TIERKV_CRASH_CHILD_DIR";

fn crash_key(i: u64) -> Vec<u8> {
    format!("crash{i:08}").into_bytes()
}

fn crash_value(i: u64) -> Vec<u8> {
    let mut v = format!("value-{i}-").into_bytes();
    v.resize(100 + (i % 7) as usize * 150, b'x');
    v
}

/// Number of consecutive crash keys present from 0, after checking the value of each.
fn surviving_prefix(db: &Db) -> u64 {
    let mut n = 0;
    while let Some(v) = db.get(crash_key(n)).unwrap() {
        assert_eq!(v, crash_value(n), "key {n} has a wrong value");
        n += 1;
    }
    n
}

/// The child: appends keys from where the store ends, acknowledging each synced write.
#[test]
#[ignore = "run by crash_kill_and_recover as a child process"]
fn crash_child() {
    let Ok(dir) = std::env::var(CHILD_ENV) else {
        return;
    };
    let db = Db::open(&dir, common::tiny_options()).unwrap();
    let mut next = surviving_prefix(&db);
    let mut out = std::io::stdout().lock();
    loop {
        db.put_opt(
            crash_key(next),
            crash_value(next),
            &WriteOptions { sync: true },
        )
        .unwrap();
        writeln!(out, "ACK {next}").unwrap();
        out.flush().unwrap();
        next += 1;
    }
}

#[test]
fn crash_kill_and_recover() {
    let dir = tempfile::tempdir().unwrap();
    let exe = std::env::current_exe().unwrap();
    let mut rng = StdRng::seed_from_u64(7);
    let rounds = common::env_count("TIERKV_CRASH_ROUNDS", 20);
    let mut total_acked = 0;
    for round in 0..rounds {
        let mut child = Command::new(&exe)
            .args([
                "crash_child",
                "--exact",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_ENV, dir.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let reader = std::thread::spawn(move || {
            let mut last = None;
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Some(n) = line.strip_prefix("ACK ") {
                    last = Some(n.trim().parse::<u64>().unwrap());
                }
            }
            last
        });
        std::thread::sleep(Duration::from_millis(rng.gen_range(100..600)));
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        let last_acked = reader.join().unwrap();
        let db = Db::open(dir.path(), common::tiny_options()).unwrap();
        let prefix = surviving_prefix(&db);
        if let Some(last) = last_acked {
            assert!(
                prefix > last,
                "round {round}: acknowledged write {last} lost (prefix {prefix})"
            );
            assert!(
                prefix <= last + 2,
                "round {round}: {prefix} keys survived but only {last} acknowledged"
            );
            total_acked = last;
        }
        // Nothing beyond the prefix may exist: a gap would mean a middle write was lost.
        let stray = db.scan(Some(&crash_key(prefix)), None, 1).unwrap();
        assert!(
            stray.is_empty(),
            "round {round}: key after a gap survived: {:?}",
            stray[0].0
        );
        drop(db);
    }
    assert!(
        total_acked > 20,
        "the child made too little progress to test anything: {total_acked}"
    );
}
