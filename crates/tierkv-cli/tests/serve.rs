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

/// Starts `tierkv serve --port 0 --db DIR ARGS` and returns the child and its address
/// (from the "listening on" line on stderr).
fn start(db: &std::path::Path, extra: &[&str]) -> (std::process::Child, String) {
    use std::io::BufRead;
    let mut child = Command::new(env!("CARGO_BIN_EXE_tierkv"))
        .arg("serve")
        .arg("--db")
        .arg(db)
        .args(["--port", "0"])
        .args(extra)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let mut lines = std::io::BufReader::new(stderr).lines();
    let addr = loop {
        let line = lines
            .next()
            .expect("the server printed its address")
            .unwrap();
        if let Some(a) = line.strip_prefix("tierkv serve: listening on ") {
            break a.trim().to_string();
        }
    };
    // Keep draining stderr so the server never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});
    (child, addr)
}

/// Sends one inline command and returns the reply's text.
fn ask(addr: &str, cmd: &str) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.write_all(format!("{cmd}\r\n").as_bytes()).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_millis(300)))
        .unwrap();
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    while let Ok(n) = s.read(&mut buf) {
        if n == 0 {
            break;
        }
        out.extend_from_slice(&buf[..n]);
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `--config FILE`: its settings apply, a flag given on the command line wins over the
/// file, CONFIG REWRITE writes the running settings back (comments kept), and a file with
/// a bad line is refused at startup, naming the line, before the store is created.
#[test]
fn a_config_file_applies_under_the_command_line_and_is_rewritten() {
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("tierkv.conf");
    std::fs::write(
        &conf,
        "# ops notes\ntimeout 70\nmaxclients 50\nslowlog-max-len 9\n",
    )
    .unwrap();
    let conf_arg = conf.to_str().unwrap();
    let (mut child, addr) = start(
        &dir.path().join("db"),
        &["--config", conf_arg, "--max-clients", "77"],
    );
    let got = ask(&addr, "CONFIG GET timeout maxclients slowlog-max-len");
    for want in [
        "timeout\r\n$2\r\n70",
        "maxclients\r\n$2\r\n77",
        "slowlog-max-len\r\n$1\r\n9",
    ] {
        assert!(got.contains(want), "{want:?} in {got:?}");
    }
    assert!(ask(&addr, "CONFIG SET timeout 33").contains("+OK"));
    assert!(ask(&addr, "CONFIG REWRITE").contains("+OK"));
    let text = std::fs::read_to_string(&conf).unwrap();
    assert!(
        text.starts_with("# ops notes\ntimeout 33\nmaxclients 77\nslowlog-max-len 9\n"),
        "{text}"
    );
    child.kill().unwrap();
    child.wait().unwrap();

    std::fs::write(&conf, "timeout 5\nmaxclients lots\n").unwrap();
    let (code, stderr, created) = serve(&["--config", conf_arg]);
    assert_ne!(code, 0);
    assert!(
        stderr.contains("maxclients") && stderr.contains("couldn't be parsed"),
        "{stderr}"
    );
    assert!(!created, "the store was created");
    std::fs::write(&conf, "timeout 5\nnot-a-setting 1\n").unwrap();
    let (_, stderr, _) = serve(&["--config", conf_arg]);
    assert!(stderr.contains("line 2: unknown setting"), "{stderr}");
}
