//! `tierkv serve` refuses a configuration that cannot serve: an empty password,
//! a zero or out-of-range limit, thread count or timeout, a limit above the store's. Each
//! exits 2 before opening (or creating) the store, with a message naming the flag and
//! the accepted range.

use std::process::Command;

fn serve(extra: &[&str]) -> (i32, String, bool) {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let out = Command::new(env!("CARGO_BIN_EXE_tierkv"))
        .arg("serve")
        .arg("--db")
        .arg(&db)
        .args(["--port", "0"])
        .args(extra)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        db.exists(),
    )
}

fn refused(extra: &[&str], flag: &str) {
    let (code, stderr, created) = serve(extra);
    assert_eq!(code, 2, "{extra:?}: {stderr}");
    assert!(
        stderr.contains(flag) && (stderr.contains("accepted") || stderr.contains("empty")),
        "{extra:?}: {stderr}"
    );
    assert!(!created, "{extra:?}: the store was created");
}

#[test]
fn every_zero_or_out_of_range_option_is_refused_at_startup() {
    for (args, flag) in [
        (&["--max-bulk", "0"][..], "--max-bulk"),
        (&["--max-bulk", "300MiB"], "--max-bulk"),
        (&["--max-key", "0"], "--max-key"),
        (&["--max-key", "1MiB"], "--max-key"),
        (&["--max-args", "0"], "--max-args"),
        (&["--max-query-buffer", "0"], "--max-query-buffer"),
        (&["--max-query-buffer", "1MiB"], "--max-query-buffer"),
        (&["--max-clients", "0"], "--max-clients"),
        (&["--threads", "0"], "--threads"),
        (&["--io-threads", "0"], "--io-threads"),
        (&["--reply-chunk", "0"], "--reply-chunk"),
        (&["--client-output-limit", "0"], "--client-output-limit"),
        (&["--client-output-limit", "1MiB"], "--client-output-limit"),
        (&["--max-auth-failures", "0"], "--max-auth-failures"),
        (&["--shutdown-grace", "1000000"], "--shutdown-grace"),
        (&["--memory-budget", "0"], "--memory-budget"),
        (
            &["--slow-dir", "/nonexistent-slow", "--fd-budget", "0"],
            "--fd-budget",
        ),
    ] {
        refused(args, flag);
    }
}

#[test]
fn empty_passwords_are_refused_at_startup() {
    refused(&["--requirepass", ""], "--requirepass");
    refused(&["--requirepass", "  "], "--requirepass");
    let dir = tempfile::tempdir().unwrap();
    for (name, text) in [("empty", ""), ("blank", " \n"), ("newline", "\nsecret\n")] {
        let file = dir.path().join(name);
        std::fs::write(&file, text).unwrap();
        refused(
            &["--requirepass-file", file.to_str().unwrap()],
            "--requirepass-file",
        );
    }
}
