//! Writes a bench plan's operations as traces for the HotRAP prototype's `kvexe` driver, so
//! the prototype replays exactly the records and operations `tierkv bench` runs (the
//! dynamic workload, a Twitter trace: inputs its own generator does not have). Owns the
//! trace text; generating the operations stays in [`crate::workload`].
//!
//! The format is kvexe's `plain-length-only` (`--format plain-length-only --load FILE --run
//! FILE`): one operation per line, fields separated by one space,
//!
//! ```text
//! INSERT <key> <value length>
//! UPDATE <key> <value length>
//! READ <key>
//! DELETE <key>
//! ```
//!
//! kvexe fills each written value with its own bytes of the given length. It reads keys as
//! whitespace-separated words, so a key must be printable ASCII without spaces (the
//! generated `user...` keys and the Twitter traces' anonymized keys are). Scans and
//! read-modify-writes have no line in this format and are refused, as are TTLs'
//! meaning (a write's TTL is dropped: kvexe has no expiry).

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use crate::error::{BenchError, Result};
use crate::workload::{OpKind, OpPlan};

/// The load trace's file name inside the output directory.
pub const LOAD_FILE: &str = "load.trace";
/// The run trace's file name inside the output directory.
pub const RUN_FILE: &str = "run.trace";

/// Writes `dir/load.trace` (one `INSERT` per loaded record, in load order) and
/// `dir/run.trace` (the run phase's operations in plan order). Returns the two paths.
pub fn write(plan: &OpPlan, dir: &Path) -> Result<(PathBuf, PathBuf)> {
    std::fs::create_dir_all(dir).map_err(|e| BenchError::io(dir, e))?;
    let load_path = dir.join(LOAD_FILE);
    let run_path = dir.join(RUN_FILE);
    let mut load = create(&load_path)?;
    for (i, key) in plan.load_keys()?.enumerate() {
        let key = key?;
        line(
            &mut load,
            &load_path,
            "INSERT",
            &key,
            Some(plan.load_value_size(i as u64)),
        )?;
    }
    finish(load, &load_path)?;

    let mut run = create(&run_path)?;
    let mut ops = Vec::new();
    let mut key = Vec::new();
    for c in 0..plan.chunks() {
        plan.chunk_ops(c, &mut ops);
        for op in &ops {
            plan.key(op.id, &mut key);
            let (word, len) = match op.kind {
                OpKind::Read => ("READ", None),
                OpKind::Update => ("UPDATE", Some(op.len)),
                OpKind::Insert => ("INSERT", Some(op.len)),
                OpKind::Delete => ("DELETE", None),
                OpKind::Scan | OpKind::ReadModifyWrite => {
                    return Err(BenchError::InvalidArgument(format!(
                        "kvexe's traces have no {} operation: choose a mix of reads, \
                         updates, inserts and deletes",
                        op.kind.name()
                    )))
                }
            };
            line(&mut run, &run_path, word, &key, len)?;
        }
    }
    finish(run, &run_path)?;
    Ok((load_path, run_path))
}

fn create(path: &Path) -> Result<BufWriter<std::fs::File>> {
    let f = std::fs::File::create(path).map_err(|e| BenchError::io(path, e))?;
    Ok(BufWriter::with_capacity(1 << 20, f))
}

fn line(
    out: &mut BufWriter<std::fs::File>,
    path: &Path,
    word: &str,
    key: &[u8],
    len: Option<u32>,
) -> Result<()> {
    if key.is_empty() || !key.iter().all(|b| b.is_ascii_graphic()) {
        return Err(BenchError::InvalidArgument(format!(
            "key {:?} cannot go into a kvexe trace: its keys are words of printable ASCII \
             (use the default 24-byte keys)",
            String::from_utf8_lossy(key)
        )));
    }
    let written = (|| {
        out.write_all(word.as_bytes())?;
        out.write_all(b" ")?;
        out.write_all(key)?;
        if let Some(len) = len {
            write!(out, " {len}")?;
        }
        out.write_all(b"\n")
    })();
    written.map_err(|e| BenchError::io(path, e))
}

fn finish(out: BufWriter<std::fs::File>, path: &Path) -> Result<()> {
    out.into_inner()
        .map_err(|e| BenchError::io(path, e.into_error()))?
        .sync_all()
        .map_err(|e| BenchError::io(path, e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::distribution::DistSpec;
    use crate::mix::Workload;

    fn lines(path: &Path) -> Vec<String> {
        std::fs::read_to_string(path)
            .unwrap()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    /// The traces hold the plan's records and operations, one line each, in plan order.
    #[test]
    fn the_traces_replay_the_plan() {
        let dir = tempfile::tempdir().unwrap();
        let w = "wh".parse::<Workload>().unwrap();
        let plan = OpPlan::synthetic(w, &DistSpec::dynamic(), 300, 2000, 100, 7).unwrap();
        let (load, run) = write(&plan, dir.path()).unwrap();
        let load = lines(&load);
        assert_eq!(load.len(), 300);
        let mut key = Vec::new();
        plan.key(5, &mut key);
        assert_eq!(
            load[5],
            format!("INSERT {} 100", String::from_utf8_lossy(&key))
        );
        let run = lines(&run);
        assert_eq!(run.len(), 2000);
        let mut ops = Vec::new();
        let mut i = 0;
        for c in 0..plan.chunks() {
            plan.chunk_ops(c, &mut ops);
            for op in &ops {
                plan.key(op.id, &mut key);
                let k = String::from_utf8_lossy(&key);
                let want = match op.kind {
                    OpKind::Read => format!("READ {k}"),
                    OpKind::Insert => format!("INSERT {k} 100"),
                    other => panic!("wh has no {other:?}"),
                };
                assert_eq!(run[i], want, "line {i}");
                i += 1;
            }
        }
        assert!(run.iter().any(|l| l.starts_with("INSERT")));
        assert!(run.iter().any(|l| l.starts_with("READ")));
    }

    /// A plan kvexe cannot replay is refused with the reason, not written half.
    #[test]
    fn scans_and_binary_keys_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let e = "e".parse::<Workload>().unwrap();
        let plan = OpPlan::synthetic(e, &DistSpec::Uniform, 100, 500, 10, 1).unwrap();
        let err = write(&plan, dir.path()).unwrap_err().to_string();
        assert!(err.contains("scan"), "{err}");
        let ro = "ro".parse::<Workload>().unwrap();
        let plan = OpPlan::synthetic(ro, &DistSpec::Uniform, 100, 500, 10, 1)
            .unwrap()
            .with_key_size(8);
        let err = write(&plan, dir.path()).unwrap_err().to_string();
        assert!(err.contains("printable"), "{err}");
    }
}
