//! The `resp` fuzz target's check (fuzz/src/resp.rs) over its committed seed corpus
//! (`fuzz/seeds/resp/`) and every input a fuzz run found crashing (`fuzz/regressions/resp/`,
//! each fixed since), so `cargo test` keeps them fixed without libFuzzer.

#[path = "../../../fuzz/src/resp.rs"]
mod resp;

use std::path::{Path, PathBuf};

#[test]
fn resp_seeds_and_regressions() {
    let fuzz = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz");
    let mut files: Vec<PathBuf> = ["seeds", "regressions"]
        .iter()
        .filter_map(|d| std::fs::read_dir(fuzz.join(d).join("resp")).ok())
        .flatten()
        .map(|e| e.expect("corpus entry").path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    assert!(files.len() >= 2, "committed RESP seeds: {}", files.len());
    for f in files {
        let data = std::fs::read(&f).expect("read corpus file");
        let r = std::panic::catch_unwind(|| resp::resp(&data));
        if let Err(e) = r {
            eprintln!("resp: input {} failed", f.display());
            std::panic::resume_unwind(e);
        }
    }
}
