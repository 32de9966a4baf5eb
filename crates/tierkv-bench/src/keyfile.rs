//! Key files in the format of F2's YCSB driver (`f2_ycsb`) and of `scripts/f2/gen_ycsb_keys.py`:
//! raw little-endian 64-bit keys, 8 bytes each, no header. A load file lists the records in
//! the order they are inserted; a run file lists the keys the run phase addresses, in order.
//! Owns the format and its errors; the plan that replays them is [`crate::workload`].
//!
//! Keys are stored in tierkv as the same 8 bytes as in the file (the u64's little-endian
//! bytes), which is how the driver's `Key` struct lays the u64 out in memory on x86-64.

use std::fs::File;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};

use crate::error::{BenchError, Result};

/// Bytes per key in a key file.
pub const KEY_BYTES: usize = 8;

/// The two key files of one replay.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyFiles {
    /// Keys loaded before the run, in insertion order: read from the file when a load
    /// phase runs, not held (8 bytes per record would count in the run phase's resident
    /// size, and F2's driver frees its copy after loading).
    pub load: LoadFile,
    /// Keys of the run phase, in order (cycled when the run asks for more operations).
    pub run: Vec<u64>,
}

impl KeyFiles {
    /// Checks a load file and reads a run file.
    pub fn read(load: &Path, run: &Path) -> Result<KeyFiles> {
        Ok(KeyFiles {
            load: LoadFile::open(load)?,
            run: read_keys(run)?,
        })
    }
}

/// A load file, checked (present, non-empty, a whole number of keys) but not read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoadFile {
    path: PathBuf,
    count: u64,
}

/// Bytes the load phase reads from a load file at a time.
const LOAD_READ_BUFFER: usize = 1 << 20;

impl LoadFile {
    /// Checks the file's size: missing, unreadable, empty and ragged files are errors
    /// naming it, as for [`read_keys`].
    pub fn open(path: &Path) -> Result<LoadFile> {
        let len = std::fs::metadata(path)
            .map_err(|e| BenchError::io(path, e))?
            .len();
        check_size(len, path)?;
        Ok(LoadFile {
            path: path.to_path_buf(),
            count: len / KEY_BYTES as u64,
        })
    }

    /// Keys in the file.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// The file's keys in order, read as they are consumed. A file that became shorter
    /// than when it was opened ends in an error naming it.
    pub fn keys(&self) -> Result<LoadKeys> {
        let f = File::open(&self.path).map_err(|e| BenchError::io(&self.path, e))?;
        Ok(LoadKeys {
            reader: BufReader::with_capacity(LOAD_READ_BUFFER, f),
            path: self.path.clone(),
            left: self.count,
        })
    }
}

/// The keys of a [`LoadFile`], streamed.
pub struct LoadKeys {
    reader: BufReader<File>,
    path: PathBuf,
    left: u64,
}

impl Iterator for LoadKeys {
    type Item = Result<u64>;

    fn next(&mut self) -> Option<Result<u64>> {
        if self.left == 0 {
            return None;
        }
        let mut k = [0u8; KEY_BYTES];
        match self.reader.read_exact(&mut k) {
            Ok(()) => {
                self.left -= 1;
                Some(Ok(u64::from_le_bytes(k)))
            }
            Err(e) => {
                self.left = 0;
                Some(Err(BenchError::io(
                    &self.path,
                    std::io::Error::new(e.kind(), format!("load file changed while loading: {e}")),
                )))
            }
        }
    }
}

/// The 8 key bytes tierkv stores for key `k` (the driver's in-memory layout).
pub fn key_bytes(k: u64) -> [u8; KEY_BYTES] {
    k.to_le_bytes()
}

/// Reads one key file. A missing or unreadable file, an empty one and one whose size is not
/// a multiple of 8 are errors naming the file.
pub fn read_keys(path: &Path) -> Result<Vec<u64>> {
    let bytes = std::fs::read(path).map_err(|e| BenchError::io(path, e))?;
    parse_keys(&bytes, path)
}

/// Parses the contents of a key file (`path` only names it in errors).
pub fn parse_keys(bytes: &[u8], path: &Path) -> Result<Vec<u64>> {
    check_size(bytes.len() as u64, path)?;
    Ok(bytes
        .chunks_exact(KEY_BYTES)
        .map(|c| {
            let mut k = [0u8; KEY_BYTES];
            k.copy_from_slice(c);
            u64::from_le_bytes(k)
        })
        .collect())
}

/// A key file's size must be a positive multiple of 8.
fn check_size(len: u64, path: &Path) -> Result<()> {
    let bad = |msg: String| {
        BenchError::InvalidArgument(format!("key file {}: {msg}", PathBuf::from(path).display()))
    };
    if len == 0 {
        return Err(bad(
            "the file is empty (expected raw little-endian 64-bit keys, 8 bytes each)".into(),
        ));
    }
    if !len.is_multiple_of(KEY_BYTES as u64) {
        return Err(bad(format!(
            "{len} bytes is not a multiple of 8 (raw little-endian 64-bit keys, no header): truncated or not a key file"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn file_of(keys: &[u64]) -> Vec<u8> {
        keys.iter().flat_map(|k| k.to_le_bytes()).collect()
    }

    #[test]
    fn parses_little_endian_keys_in_order() {
        let keys = [1u64, 0x0102_0304_0506_0708, u64::MAX, 0];
        let bytes = file_of(&keys);
        // The first key's bytes are its low byte first, as gen_ycsb_keys.py's "<u8" writes.
        assert_eq!(&bytes[..8], &[1, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(parse_keys(&bytes, Path::new("k.dat")).unwrap(), keys);
        // tierkv's key is the file's 8 bytes.
        assert_eq!(&key_bytes(keys[1])[..], &bytes[8..16]);
    }

    #[test]
    fn truncated_file_is_an_error_naming_it() {
        let mut bytes = file_of(&[5, 6]);
        bytes.pop();
        let e = parse_keys(&bytes, Path::new("/x/run.dat"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("/x/run.dat"), "{e}");
        assert!(e.contains("15 bytes is not a multiple of 8"), "{e}");
    }

    #[test]
    fn empty_file_is_an_error_naming_it() {
        let e = parse_keys(&[], Path::new("load.dat"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("load.dat") && e.contains("empty"), "{e}");
    }

    #[test]
    fn reads_files_and_reports_missing_ones() {
        let dir = tempfile::tempdir().unwrap();
        let load = dir.path().join("load.dat");
        let run = dir.path().join("run.dat");
        std::fs::File::create(&load)
            .unwrap()
            .write_all(&file_of(&[10, 20, 30]))
            .unwrap();
        std::fs::File::create(&run)
            .unwrap()
            .write_all(&file_of(&[30, 10]))
            .unwrap();
        let kf = KeyFiles::read(&load, &run).unwrap();
        assert_eq!(kf.load.count(), 3);
        let loaded: Vec<u64> = kf.load.keys().unwrap().map(Result::unwrap).collect();
        assert_eq!(loaded, vec![10, 20, 30]);
        assert_eq!(kf.run, vec![30, 10]);
        // A load file cut short after it was checked: the stream ends in an error naming it.
        std::fs::File::create(&load)
            .unwrap()
            .write_all(&file_of(&[10]))
            .unwrap();
        let got: Vec<_> = kf.load.keys().unwrap().collect();
        assert_eq!(got.len(), 2);
        assert_eq!(*got[0].as_ref().unwrap(), 10);
        let e = got[1].as_ref().unwrap_err().to_string();
        assert!(e.contains("load.dat") && e.contains("changed"), "{e}");
        let missing = dir.path().join("nope.dat");
        let e = LoadFile::open(&missing).unwrap_err().to_string();
        assert!(e.contains("nope.dat"), "{e}");
        let e = KeyFiles::read(&load, &missing).unwrap_err().to_string();
        assert!(e.contains("nope.dat"), "{e}");
    }
}
