//! Recovery after a real filesystem filled up, on a small tmpfs: invariant 2
//! (every acknowledged synced write survives) and a reopen that needs only a little free
//! space, not the WAL's size. Mounting needs root, which CI has: where `mount` is refused
//! the test fails, naming why, unless `TIERKV_ALLOW_SKIP=1` lets it report a skip
//! (`tierkv::testing::require`; docs/TESTING.md, "Skips"). `faults.rs` checks the same
//! with the fault injector's emulated free space on every machine.

use std::path::{Path, PathBuf};
use std::process::Command;
use tierkv::{Db, Options, WriteOptions};

/// A tmpfs mounted for the test's lifetime.
struct Mount(PathBuf);

impl Mount {
    fn tmpfs(at: &Path, bytes: u64) -> Result<Mount, String> {
        std::fs::create_dir_all(at).map_err(|e| e.to_string())?;
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={bytes}")])
            .arg("tmpfs")
            .arg(at)
            .output()
            .map_err(|e| format!("cannot run mount: {e}"))?;
        if out.status.success() {
            Ok(Mount(at.to_path_buf()))
        } else {
            Err(String::from_utf8_lossy(&out.stderr).trim().to_string())
        }
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

fn key(i: u64) -> Vec<u8> {
    format!("k{i:08}").into_bytes()
}

fn value(i: u64) -> Vec<u8> {
    let mut v = format!("value-{i}-").into_bytes();
    v.resize(200, b'v');
    v
}

#[test]
fn reopen_after_a_real_full_filesystem_needs_only_a_little_space() {
    let tmp = tempfile::tempdir().unwrap();
    let mnt = tmp.path().join("mnt");
    let _mount = match Mount::tmpfs(&mnt, 2 << 20) {
        Ok(m) => m,
        Err(why) => {
            tierkv::testing::require(
                "reopen_after_a_real_full_filesystem_needs_only_a_little_space",
                Err(format!(
                    "cannot mount a 2 MiB tmpfs ({why}); faults.rs covers this with \
                     emulated free space"
                )),
            );
            return;
        }
    };
    // Space to free later: much less than the WAL will hold.
    let ballast = mnt.join("ballast");
    std::fs::write(&ballast, vec![0u8; 96 * 1024]).unwrap();
    let dir = mnt.join("db");
    // One memtable holds everything the filesystem can: nothing is flushed before it fills.
    let opts = Options {
        write_buffer_size: 8 << 20,
        use_direct_io: false,
        ..Options::default()
    };
    let db = Db::open(&dir, opts.clone()).unwrap();
    let mut acked = 0u64;
    let err = loop {
        match db.put_opt(key(acked), value(acked), &WriteOptions { sync: true }) {
            Ok(()) => acked += 1,
            Err(e) => break e,
        }
        assert!(acked < 1_000_000, "the filesystem never filled");
    };
    assert!(err.is_no_space(), "{err}");
    drop(db);
    let wal: u64 = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".log"))
        .map(|e| e.metadata().unwrap().len())
        .sum();
    assert!(wal > 1 << 20, "the WAL holds the writes: {wal} bytes");

    std::fs::remove_file(&ballast).unwrap();
    let db = Db::open(&dir, opts.clone()).unwrap();
    for i in 0..acked {
        assert_eq!(db.get(key(i)).unwrap(), Some(value(i)), "key {i}");
    }
    for i in acked..acked + 20 {
        db.put_opt(key(i), value(i), &WriteOptions { sync: true })
            .unwrap();
    }
    db.close().unwrap();
    let db = Db::open(&dir, opts).unwrap();
    for i in 0..acked + 20 {
        assert_eq!(db.get(key(i)).unwrap(), Some(value(i)), "key {i}");
    }
    drop(db);
}
