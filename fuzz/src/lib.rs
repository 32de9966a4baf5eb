//! tierkv's fuzz targets share their checks through this crate: `engine` (tables, logs,
//! manifests, RALT files) and `resp` (the server's request parser). The targets in
//! `fuzz_targets/` only hand libFuzzer's bytes to them.

#![forbid(unsafe_code)]

pub mod engine;
pub mod resp;

use std::path::PathBuf;

/// An empty directory for one run of a check: one per process (libFuzzer runs inputs one
/// at a time), emptied before each run, on tmpfs when there is one (file I/O dominates
/// the engine targets).
pub fn scratch() -> PathBuf {
    let base = if std::path::Path::new("/dev/shm").is_dir() {
        PathBuf::from("/dev/shm")
    } else {
        std::env::temp_dir()
    };
    let dir = base.join(format!("tierkv-fuzz-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create scratch directory");
    dir
}
