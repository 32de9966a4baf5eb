//! Kill points: named places in the engine where a crash test can make the process abort,
//! so that kills land inside the critical windows a SIGKILL at a random moment rarely
//! hits (between a WAL append and the memtable insert, between writing a table and the
//! manifest edit naming it, between writing a new manifest and switching `CURRENT` to it).
//! `tests/stress.rs` arms them in its child processes; docs/TESTING.md lists them.
//!
//! Off unless the environment variable `TIERKV_KILL_POINTS` is set when the process first
//! reaches a point; then [`kill_point`] costs one relaxed atomic load and a branch, so the
//! calls stay in production code. The variable is a comma-separated list of
//! `NAME[:PROBABILITY]` (`*` names every point); a point without a probability fires with
//! `1 / TIERKV_KILL_ODDS` (default 1: always). A point that fires prints
//! `tierkv kill point NAME` to stderr and calls [`std::process::abort`], which, like a
//! SIGKILL, leaves unsynced data in the page cache and runs no destructor. With
//! `TIERKV_KILL_ACTION=panic` it panics instead: what a bug does to the thread it runs
//! on (`tests/background_panic.rs`).
//!
//! The points (where they sit):
//! - `write.wal_appended`: a write group is in the WAL (and synced if asked), not yet in
//!   the memtable nor visible (`db::write`, `commit_group`).
//! - `write.wal_switched`: a new WAL file exists, the old one not yet synced, the memtable
//!   not switched (`db::write`).
//! - `flush.table_written`: a flushed memtable's table is written and synced, the manifest
//!   does not name it yet; `flush.installed`: the edit is durable, the flushed WALs not yet
//!   removed (`db::flush`).
//! - `compact.outputs_written`: a compaction's outputs are written (semi-sorted tables'
//!   generations appended to linked copies), the edit not yet logged;
//!   `compact.installed`: the edit is durable, the inputs not yet removed (`db::compact`).
//! - `promote.file_written`: the checker's promotion file is written, not yet named by the
//!   manifest; `promote.installed`: it is (`db::promote`).
//! - `manifest.edit_appended`: an edit is appended to the manifest, not yet synced;
//!   `manifest.created`: a new manifest is written and synced, `CURRENT` still names the
//!   old one; `manifest.current_written`: `CURRENT.tmp` names the new one, not yet renamed;
//!   `manifest.switched`: `CURRENT` names the new manifest, the old one not yet removed
//!   (`version::set`).
//! - `checkpoint.started`: a checkpoint's temporary directories exist, empty;
//!   `checkpoint.tables_linked`: its tables have their second names, no manifest yet;
//!   `checkpoint.staged`: the copy is complete under its temporary names;
//!   `checkpoint.renamed`: a directory of the copy has its final name (the slow one first)
//!   (`db::checkpoint`).

use std::sync::atomic::{AtomicU8, Ordering::Relaxed};
use std::sync::OnceLock;

/// Every kill point of the engine, in the order of the module's list.
pub const POINTS: &[&str] = &[
    "write.wal_appended",
    "write.wal_switched",
    "flush.table_written",
    "flush.installed",
    "compact.outputs_written",
    "compact.installed",
    "promote.file_written",
    "promote.installed",
    "manifest.edit_appended",
    "manifest.created",
    "manifest.current_written",
    "manifest.switched",
    "checkpoint.started",
    "checkpoint.tables_linked",
    "checkpoint.staged",
    "checkpoint.renamed",
];

const UNKNOWN: u8 = 0;
const OFF: u8 = 1;
const ON: u8 = 2;

/// Whether any point is armed: read from the environment at the first point reached.
static STATE: AtomicU8 = AtomicU8::new(UNKNOWN);
/// The armed points and their probabilities.
static ARMED: OnceLock<Vec<(String, f64)>> = OnceLock::new();
/// A point that fires panics instead of aborting (`TIERKV_KILL_ACTION=panic`).
static PANIC: OnceLock<bool> = OnceLock::new();

/// Aborts the process here with the probability `TIERKV_KILL_POINTS` gives `name` (see the
/// module's documentation); does nothing when no point is armed.
#[inline]
pub fn kill_point(name: &'static str) {
    if STATE.load(Relaxed) == OFF {
        return;
    }
    armed_point(name);
}

#[cold]
#[inline(never)]
fn armed_point(name: &'static str) {
    let armed = ARMED.get_or_init(|| {
        let odds = std::env::var("TIERKV_KILL_ODDS")
            .ok()
            .and_then(|s| s.parse::<f64>().ok())
            .filter(|n| *n >= 1.0)
            .unwrap_or(1.0);
        parse(std::env::var("TIERKV_KILL_POINTS").ok().as_deref(), odds)
    });
    STATE.store(if armed.is_empty() { OFF } else { ON }, Relaxed);
    let Some(&(_, p)) = armed.iter().find(|(n, _)| n == name || n == "*") else {
        return;
    };
    if uniform() < p {
        if *PANIC.get_or_init(|| std::env::var("TIERKV_KILL_ACTION").as_deref() == Ok("panic")) {
            panic!("tierkv kill point {name}");
        }
        eprintln!("tierkv kill point {name}: aborting");
        std::process::abort();
    }
}

/// The armed points of a `TIERKV_KILL_POINTS` value; a point without a probability gets
/// `1 / odds`. Unparsable probabilities arm nothing (a typo must not kill every run).
fn parse(spec: Option<&str>, odds: f64) -> Vec<(String, f64)> {
    spec.unwrap_or("")
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .filter_map(|s| match s.split_once(':') {
            Some((n, p)) => p
                .trim()
                .parse::<f64>()
                .ok()
                .map(|p| (n.trim().to_string(), p)),
            None => Some((s.to_string(), 1.0 / odds)),
        })
        .collect()
}

/// A number in `[0, 1)` from a per-thread xorshift stream seeded by the process's random
/// hasher keys (kills need not replay: the run's seed decides which point is armed).
fn uniform() -> f64 {
    use std::cell::Cell;
    use std::hash::{BuildHasher, Hasher};
    thread_local! {
        static RNG: Cell<u64> = Cell::new(
            std::collections::hash_map::RandomState::new().build_hasher().finish() | 1
        );
    }
    RNG.with(|r| {
        let mut x = r.get();
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        r.set(x);
        (x.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11) as f64 / (1u64 << 53) as f64
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse_names_probabilities_and_odds() {
        assert!(parse(None, 1.0).is_empty());
        assert!(parse(Some(" , "), 1.0).is_empty());
        let p = parse(Some("flush.installed:0.25, *"), 4.0);
        assert_eq!(
            p,
            vec![
                ("flush.installed".to_string(), 0.25),
                ("*".to_string(), 0.25)
            ]
        );
        // A bad probability arms nothing rather than everything.
        assert!(parse(Some("write.wal_appended:x"), 1.0).is_empty());
    }

    /// Every listed point is placed in the engine's source exactly once, so a renamed or
    /// removed call cannot leave a crash test arming a point that never fires.
    #[test]
    fn every_point_is_placed_once() {
        let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut all = String::new();
        let mut dirs = vec![src];
        while let Some(d) = dirs.pop() {
            for e in std::fs::read_dir(d).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    dirs.push(p);
                } else if p.extension().is_some_and(|x| x == "rs") && !p.ends_with("kill.rs") {
                    all.push_str(&std::fs::read_to_string(&p).unwrap());
                }
            }
        }
        for name in POINTS {
            let call = format!("kill_point(\"{name}\")");
            assert_eq!(all.matches(&call).count(), 1, "{call}");
        }
    }

    #[test]
    fn uniform_draws_stay_in_range() {
        let xs: Vec<f64> = (0..1000).map(|_| uniform()).collect();
        assert!(xs.iter().all(|x| (0.0..1.0).contains(x)));
        let below = xs.iter().filter(|x| **x < 0.5).count();
        assert!((350..650).contains(&below), "{below}");
    }
}
