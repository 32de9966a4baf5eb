//! Replay of Twitter cache traces (Yang et al., OSDI 2020): parsing the CSV rows
//! `timestamp,key,key size,value size,client id,operation,TTL` into operations on a table of
//! distinct keys. A write's TTL (seconds; 0: none) is kept: the runner writes such a record
//! to expire that long after the moment it replays the write, and a later read of it
//! misses once it has. Owns the trace format and its errors; the runner executes the
//! result.

use std::collections::HashMap;
use std::io::BufRead;
use std::path::{Path, PathBuf};

use crate::error::{BenchError, Result};

/// What a trace row asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TraceOpKind {
    /// `get`, `gets`.
    Get,
    /// `set`, `add`, `replace`, `cas`, `append`, `prepend`, `incr`, `decr`: a write.
    Set,
    /// `delete`.
    Delete,
}

/// One replayed operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TraceOp {
    /// Index into [`Trace::keys`].
    pub key: u32,
    /// The operation.
    pub kind: TraceOpKind,
    /// Value size written by a `Set` (at least 1 byte).
    pub value_size: u32,
    /// Time to live of a `Set`, in seconds (0: the record never expires).
    pub ttl_secs: u32,
}

/// A parsed trace: its distinct keys (loaded before the run) and its operations in order.
#[derive(Clone, Debug, Default)]
pub struct Trace {
    /// Distinct keys, in order of first appearance.
    pub keys: Vec<Box<[u8]>>,
    /// Value size each key is loaded with: the largest seen in the trace (at least 1).
    pub load_value_sizes: Vec<u32>,
    /// The operations.
    pub ops: Vec<TraceOp>,
}

/// Largest value a trace row may declare; larger ones are treated as malformed rows.
const MAX_VALUE: u32 = 64 << 20;

impl Trace {
    /// Reads at most `max_ops` operations (all when `None`) from a trace file.
    pub fn read(path: &Path, max_ops: Option<u64>) -> Result<Trace> {
        Self::read_with_load(None, path, max_ops)
    }

    /// Like [`Trace::read`], after taking the load phase's records from the rows of `load`
    /// (same format; only each row's key and value size count, the rows are not replayed).
    /// A generated trace uses it to load every record of its key space, including the
    /// ones its operations never touch.
    pub fn read_with_load(load: Option<&Path>, path: &Path, max_ops: Option<u64>) -> Result<Trace> {
        let open = |p: &Path| {
            std::fs::File::open(p)
                .map(std::io::BufReader::new)
                .map_err(|e| BenchError::io(p, e))
        };
        let mut b = Builder::default();
        if let Some(load) = load {
            b.add_rows(open(load)?, load, None, false)?;
        }
        b.add_rows(open(path)?, path, max_ops, true)?;
        b.finish(path)
    }

    /// Parses trace rows from a reader (`path` only names it in errors). Blank lines and
    /// lines starting with `#` are skipped; anything else malformed is an error naming the
    /// line.
    pub fn parse<R: BufRead>(reader: R, path: &Path, max_ops: Option<u64>) -> Result<Trace> {
        let mut b = Builder::default();
        b.add_rows(reader, path, max_ops, true)?;
        b.finish(path)
    }

    /// Total bytes (keys plus values) the load phase writes.
    pub fn load_bytes(&self) -> u64 {
        self.keys
            .iter()
            .zip(&self.load_value_sizes)
            .map(|(k, &v)| k.len() as u64 + v as u64)
            .sum()
    }
}

/// A trace being read: its keys so far, indexed.
#[derive(Default)]
struct Builder {
    t: Trace,
    index: HashMap<Box<[u8]>, u32>,
}

impl Builder {
    /// Adds the rows of `reader`: their keys (with the largest value size each is written
    /// with) and, when `replay`, their operations, at most `max_ops` of them in all.
    fn add_rows<R: BufRead>(
        &mut self,
        reader: R,
        path: &Path,
        max_ops: Option<u64>,
        replay: bool,
    ) -> Result<()> {
        let t = &mut self.t;
        let limit = max_ops.unwrap_or(u64::MAX);
        for (i, line) in reader.lines().enumerate() {
            if replay && t.ops.len() as u64 >= limit {
                break;
            }
            let lineno = i + 1;
            let line = line.map_err(|e| BenchError::io(path, e))?;
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let err = |msg: String| BenchError::Parse {
                path: PathBuf::from(path),
                line: lineno,
                msg,
            };
            let fields: Vec<&str> = line.split(',').collect();
            if fields.len() != 7 {
                return Err(err(format!(
                    "expected 7 comma-separated fields (timestamp,key,key size,value size,client id,operation,TTL), found {}",
                    fields.len()
                )));
            }
            let number = |idx: usize, what: &str| -> Result<u64> {
                fields[idx]
                    .trim()
                    .parse::<u64>()
                    .map_err(|_| err(format!("{what} {:?} is not a number", fields[idx])))
            };
            number(0, "timestamp")?;
            // Larger TTLs than u32 seconds (136 years) are as good as none expiring soon.
            let ttl_secs = number(6, "TTL")?.min(u32::MAX as u64) as u32;
            let key = fields[1].trim();
            if key.is_empty() {
                return Err(err("empty key".into()));
            }
            let key_size = number(2, "key size")?;
            if key_size > 0xFFFF {
                return Err(err(format!("key size {key_size} is too large")));
            }
            let value_size = number(3, "value size")?;
            if value_size > MAX_VALUE as u64 {
                return Err(err(format!("value size {value_size} is too large")));
            }
            let value_size = value_size as u32;
            let kind = match fields[5].trim().to_ascii_lowercase().as_str() {
                "get" | "gets" => TraceOpKind::Get,
                "set" | "add" | "replace" | "cas" | "append" | "prepend" | "incr" | "decr" => {
                    TraceOpKind::Set
                }
                "delete" => TraceOpKind::Delete,
                other => {
                    return Err(err(format!(
                        "unknown operation {other:?} (expected get, gets, set, add, replace, cas, append, prepend, incr, decr or delete)"
                    )))
                }
            };
            let next = t.keys.len() as u32;
            let id = *self.index.entry(key.as_bytes().into()).or_insert(next);
            if id == next {
                t.keys.push(key.as_bytes().into());
                t.load_value_sizes.push(1);
            }
            let slot = &mut t.load_value_sizes[id as usize];
            *slot = (*slot).max(value_size);
            if !replay {
                continue;
            }
            t.ops.push(TraceOp {
                key: id,
                kind,
                value_size: value_size.max(1),
                ttl_secs: if kind == TraceOpKind::Set {
                    ttl_secs
                } else {
                    0
                },
            });
        }
        Ok(())
    }

    fn finish(self, path: &Path) -> Result<Trace> {
        if self.t.ops.is_empty() {
            return Err(BenchError::Parse {
                path: PathBuf::from(path),
                line: 0,
                msg: "the trace has no operations".into(),
            });
        }
        Ok(self.t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Trace> {
        Trace::parse(text.as_bytes(), Path::new("t.csv"), None)
    }

    #[test]
    fn parses_rows() {
        let t = parse(
            "0,keyA,4,100,1,get,0\n\
             1,keyB,4,200,2,set,3600\n\
             # comment\n\
             \n\
             2,keyA,4,300,1,add,0\n\
             3,keyB,4,0,1,delete,0\n",
        )
        .unwrap();
        assert_eq!(t.keys.len(), 2);
        assert_eq!(&*t.keys[0], b"keyA");
        assert_eq!(t.load_value_sizes, vec![300, 200]);
        let kinds: Vec<_> = t.ops.iter().map(|o| o.kind).collect();
        assert_eq!(
            kinds,
            vec![
                TraceOpKind::Get,
                TraceOpKind::Set,
                TraceOpKind::Set,
                TraceOpKind::Delete
            ]
        );
        assert_eq!(t.ops[2].key, 0);
        // The TTL of writes is kept; reads and deletes carry none.
        let ttls: Vec<u32> = t.ops.iter().map(|o| o.ttl_secs).collect();
        assert_eq!(ttls, vec![0, 3600, 0, 0]);
        assert_eq!(t.ops[3].value_size, 1);
        assert_eq!(t.load_bytes(), 4 + 300 + 4 + 200);
    }

    /// The load file's keys are loaded first, with their sizes, and only the trace's rows
    /// are replayed; a key in both is one record.
    #[test]
    fn a_load_file_adds_records_without_operations() {
        let dir = tempfile::tempdir().unwrap();
        let load = dir.path().join("load.csv");
        let run = dir.path().join("run.csv");
        std::fs::write(
            &load,
            "0,k0,2,10,0,set,0\n0,k1,2,20,0,set,0\n0,k2,2,30,0,set,0\n",
        )
        .unwrap();
        std::fs::write(
            &run,
            "1,k1,2,50,0,set,0\n2,k9,2,5,0,get,0\n3,k1,2,0,0,get,0\n",
        )
        .unwrap();
        let t = Trace::read_with_load(Some(&load), &run, None).unwrap();
        let keys: Vec<&[u8]> = t.keys.iter().map(|k| &**k).collect();
        assert_eq!(keys, [&b"k0"[..], b"k1", b"k2", b"k9"]);
        assert_eq!(t.load_value_sizes, vec![10, 50, 30, 5]);
        let ops: Vec<(u32, TraceOpKind)> = t.ops.iter().map(|o| (o.key, o.kind)).collect();
        assert_eq!(
            ops,
            vec![
                (1, TraceOpKind::Set),
                (3, TraceOpKind::Get),
                (1, TraceOpKind::Get)
            ]
        );
        // A load file alone replays nothing: an error, as an empty trace is.
        let empty = dir.path().join("empty.csv");
        std::fs::write(&empty, "# nothing\n").unwrap();
        let e = Trace::read_with_load(Some(&load), &empty, None).unwrap_err();
        assert!(e.to_string().contains("no operations"), "{e}");
    }

    #[test]
    fn caps_operations() {
        let text = "0,a,1,1,1,get,0\n1,b,1,1,1,get,0\n2,c,1,1,1,get,0\n";
        let t = Trace::parse(text.as_bytes(), Path::new("t.csv"), Some(2)).unwrap();
        assert_eq!(t.ops.len(), 2);
    }

    #[test]
    fn malformed_lines_are_clear_errors() {
        let cases = [
            ("0,a,1,1,1,get\n", 1, "7 comma-separated"),
            ("0,a,1,1,1,get,0\nx,a,1,1,1,get,0\n", 2, "timestamp"),
            ("0,a,1,big,1,get,0\n", 1, "value size"),
            ("0,a,1,-3,1,get,0\n", 1, "value size"),
            ("0,,1,1,1,get,0\n", 1, "empty key"),
            ("0,a,1,1,1,frobnicate,0\n", 1, "unknown operation"),
            ("0,a,1,99999999999,1,set,0\n", 1, "too large"),
            ("0,a,1,1,1,get,0,extra\n", 1, "7 comma-separated"),
            ("0,a,1,1,1,set,-5\n", 1, "TTL"),
        ];
        for (text, line, what) in cases {
            match parse(text) {
                Err(e @ BenchError::Parse { .. }) => {
                    let msg = e.to_string();
                    assert!(msg.contains(what), "{text:?}: {msg}");
                    assert!(msg.contains(&format!("t.csv:{line}:")), "{text:?}: {msg}");
                }
                other => panic!("{text:?}: {other:?}"),
            }
        }
        assert!(parse("").unwrap_err().to_string().contains("no operations"));
        // Invalid UTF-8 is an I/O error, not a panic.
        let bytes: &[u8] = &[0xff, 0xfe, b'\n'];
        assert!(Trace::parse(bytes, Path::new("t.csv"), None).is_err());
    }

    #[test]
    fn missing_file_is_an_error() {
        let e = Trace::read(Path::new("/nonexistent/trace.csv"), None).unwrap_err();
        assert!(e.to_string().contains("/nonexistent/trace.csv"));
    }
}
