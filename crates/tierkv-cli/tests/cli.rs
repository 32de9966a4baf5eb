//! The `tierkv` binary as a user runs it: clear errors without side effects,
//! exit codes as `--help` documents them (`check`: 1 only for corruption, 2 for every other
//! failure), and log lines without colour codes when stderr is not a terminal.

use std::path::Path;
mod common;

use common::{code, text, tierkv};

/// A store with `n` keys flushed into a table and `extra` more in the WAL only.
fn make_store(dir: &Path, n: u32, extra: u32) {
    let db = tierkv::Db::open(dir, tierkv::Options::default()).unwrap();
    for i in 0..n {
        db.put(format!("key{i:04}"), format!("value{i}")).unwrap();
    }
    db.flush().unwrap();
    for i in n..n + extra {
        db.put(format!("key{i:04}"), format!("value{i}")).unwrap();
    }
    db.close().unwrap();
}

fn files_with_ext(dir: &Path, ext: &str) -> Vec<std::path::PathBuf> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == ext))
        .collect()
}

#[test]
fn read_only_commands_on_a_missing_store_create_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let missing = tmp.path().join("nothing-here");
    let db = missing.to_str().unwrap();
    let empty = tmp.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    for path in [db, empty.to_str().unwrap()] {
        for args in [
            vec!["get", "--db", path, "k"],
            vec!["scan", "--db", path],
            vec!["stats", "--db", path],
            vec!["check", "--db", path],
        ] {
            let o = tierkv(&args);
            assert_eq!(code(&o), 2, "{args:?}: {}", text(&o.stderr));
            let err = text(&o.stderr);
            assert!(
                err.contains(&format!("no tierkv store at {path}")),
                "{args:?}: {err}"
            );
            assert!(!text(&o.stdout).contains("CORRUPT"), "{args:?}");
        }
    }
    assert!(
        !missing.exists(),
        "a read-only command created the store dir"
    );
    assert_eq!(
        std::fs::read_dir(&empty).unwrap().count(),
        0,
        "a read-only command left files in an empty directory"
    );
}

#[test]
fn a_regular_file_as_the_store_is_not_a_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("plain-file");
    std::fs::write(&file, b"not a store").unwrap();
    let path = file.to_str().unwrap();
    for args in [
        vec!["put", "--db", path, "k", "v"],
        vec!["get", "--db", path, "k"],
    ] {
        let o = tierkv(&args);
        assert_eq!(code(&o), 2, "{args:?}");
        let err = text(&o.stderr);
        assert!(
            err.contains(&format!("{path} is not a directory")),
            "{args:?}: {err}"
        );
        assert!(!err.contains("os error"), "{args:?}: {err}");
    }
    assert_eq!(std::fs::read(&file).unwrap(), b"not a store");
}

#[test]
fn check_reports_ok_then_corruption_with_exit_1() {
    let tmp = tempfile::tempdir().unwrap();
    make_store(tmp.path(), 200, 10);
    let path = tmp.path().to_str().unwrap();
    let o = tierkv(&["check", "--db", path]);
    assert_eq!(code(&o), 0, "{}", text(&o.stderr));
    assert!(
        text(&o.stdout).starts_with("OK: 1 tables"),
        "{}",
        text(&o.stdout)
    );
    // Damage the first data block of the table.
    let table = files_with_ext(tmp.path(), "sst").pop().expect("a table");
    let mut bytes = std::fs::read(&table).unwrap();
    bytes[20] ^= 0x55;
    std::fs::write(&table, bytes).unwrap();
    let o = tierkv(&["check", "--db", path]);
    assert_eq!(code(&o), 1, "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert!(out.starts_with("CORRUPT: "), "{out}");
    assert!(out.contains(".sst"), "names the file: {out}");
}

#[test]
fn check_of_a_store_in_use_is_an_error_not_corruption() {
    let tmp = tempfile::tempdir().unwrap();
    make_store(tmp.path(), 10, 0);
    let db = tierkv::Db::open(tmp.path(), tierkv::Options::default()).unwrap();
    let o = tierkv(&["check", "--db", tmp.path().to_str().unwrap()]);
    assert_eq!(code(&o), 2, "{}", text(&o.stdout));
    assert!(!text(&o.stdout).contains("CORRUPT"), "{}", text(&o.stdout));
    assert!(
        text(&o.stderr).contains("in use by another process"),
        "{}",
        text(&o.stderr)
    );
    drop(db);
}

#[test]
fn log_lines_to_a_pipe_carry_no_colour_codes() {
    let tmp = tempfile::tempdir().unwrap();
    make_store(tmp.path(), 0, 5);
    // A torn WAL tail: the open drops it with a warning.
    let wal = files_with_ext(tmp.path(), "log")
        .into_iter()
        .max_by_key(|p| std::fs::metadata(p).unwrap().len())
        .expect("a WAL");
    let mut bytes = std::fs::read(&wal).unwrap();
    bytes.extend_from_slice(&[0xab, 0xcd, 0xef]);
    std::fs::write(&wal, bytes).unwrap();
    let o = tierkv(&["get", "--db", tmp.path().to_str().unwrap(), "key0001"]);
    assert_eq!(code(&o), 0, "{}", text(&o.stderr));
    assert_eq!(text(&o.stdout), "value1\n");
    let err = text(&o.stderr);
    assert!(err.contains("torn tail"), "a warning was logged: {err}");
    assert!(!err.contains('\x1b'), "colour codes in a pipe: {err:?}");
}

/// `tierkv checkpoint`: a copy that `tierkv get` reads (the WAL's writes included: the
/// checkpoint flushes them), refused over an existing directory or for a store in use,
/// with nothing created.
#[test]
fn checkpoint_copies_a_store_that_opens_on_its_own() {
    let tmp = tempfile::tempdir().unwrap();
    let db_dir = tmp.path().join("db");
    make_store(&db_dir, 20, 5);
    let copy = tmp.path().join("copy");
    let (db, copy_s) = (db_dir.to_str().unwrap(), copy.to_str().unwrap());
    let o = tierkv(&["checkpoint", "--db", db, "--to", copy_s]);
    assert_eq!(code(&o), 0, "{}", text(&o.stderr));
    assert!(
        text(&o.stdout).starts_with("checkpoint "),
        "{}",
        text(&o.stdout)
    );
    for key in ["key0000", "key0024"] {
        let o = tierkv(&["get", "--db", copy_s, key]);
        assert_eq!(code(&o), 0, "{key}: {}", text(&o.stderr));
    }
    let o = tierkv(&["checkpoint", "--db", db, "--to", copy_s]);
    assert_ne!(code(&o), 0);
    assert!(text(&o.stderr).contains("exists"), "{}", text(&o.stderr));
    let held = tierkv::Db::open(&db_dir, tierkv::Options::default()).unwrap();
    let other = tmp.path().join("other");
    let o = tierkv(&["checkpoint", "--db", db, "--to", other.to_str().unwrap()]);
    assert_ne!(code(&o), 0);
    assert!(text(&o.stderr).contains("in use"), "{}", text(&o.stderr));
    assert!(!other.exists());
    drop(held);
}
