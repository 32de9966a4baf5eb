//! Online operations against Redis 7's documented behaviour: CONFIG SET (atomic over its
//! pairs, validated like the startup flags, applied to the running server), CONFIG
//! RESETSTAT and REWRITE; CLIENT KILL, PAUSE/UNPAUSE, UNBLOCK and REPLY acting on other
//! connections; SLOWLOG and LATENCY; RESET; ROLE; HRANDFIELD; INFO's rates.

mod common;

use common::{err_text, q, TestServer};
use std::io::{Read, Write};
use std::time::{Duration, Instant};
use tierkv_server::ServerConfig;

use common::default_server as server;

fn config_get(c: &mut redis::Connection, name: &str) -> String {
    let m: std::collections::HashMap<String, String> = q(c, &["CONFIG", "GET", name]).unwrap();
    m.get(name)
        .cloned()
        .unwrap_or_else(|| panic!("CONFIG GET {name}: {m:?}"))
}

fn info_field(c: &mut redis::Connection, section: &str, name: &str) -> String {
    let info: String = q(c, &["INFO", section]).unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .unwrap_or_else(|| panic!("INFO {section} lacks {name}"))
        .trim()
        .to_string()
}

#[test]
fn config_set_applies_atomically_and_validates() {
    let (_d, s) = server();
    let mut c = s.client();
    assert_eq!(
        q::<String>(
            &mut c,
            &["CONFIG", "SET", "timeout", "70", "maxclients", "50"]
        )
        .unwrap(),
        "OK"
    );
    assert_eq!(config_get(&mut c, "timeout"), "70");
    assert_eq!(config_get(&mut c, "maxclients"), "50");
    // One bad pair and none applies.
    assert_eq!(
        err_text(q::<String>(
            &mut c,
            &["CONFIG", "SET", "timeout", "5", "maxclients", "0"]
        )),
        "ERR CONFIG SET failed (possibly related to argument 'timeout') - invalid --max-clients \
         0: accepted 1 ..= 1000000"
    );
    assert_eq!(config_get(&mut c, "timeout"), "70");
    assert_eq!(
        err_text(q::<String>(&mut c, &["CONFIG", "SET", "timeout", "soon"])),
        "ERR CONFIG SET failed (possibly related to argument 'timeout') - argument couldn't be \
         parsed into an integer"
    );
    assert_eq!(
        err_text(q::<String>(&mut c, &["CONFIG", "SET", "nosuch", "1"])),
        "ERR Unknown option or number of arguments for CONFIG SET - 'nosuch'"
    );
    assert_eq!(
        err_text(q::<String>(&mut c, &["CONFIG", "SET", "port", "1"])),
        "ERR CONFIG SET failed (possibly related to argument 'port') - can't set immutable config"
    );
    // A request limit above the store's is refused, as at startup.
    let e = err_text(q::<String>(
        &mut c,
        &[
            "CONFIG",
            "SET",
            "proto-max-bulk-len",
            "1gb",
            "client-output-buffer-limit",
            "normal 3gb 3gb 0",
        ],
    ));
    assert!(e.contains("max_value_size"), "{e}");
    assert_eq!(
        config_get(&mut c, "proto-max-bulk-len"),
        (256 << 20).to_string()
    );
    // Redis's memory units; the glob finds parameters by pattern.
    q::<String>(&mut c, &["CONFIG", "SET", "tierkv-reply-chunk", "2mb"]).unwrap();
    assert_eq!(
        config_get(&mut c, "tierkv-reply-chunk"),
        (2 << 20).to_string()
    );
    let m: std::collections::HashMap<String, String> =
        q(&mut c, &["CONFIG", "GET", "*max-*-entries*", "slowlog*"]).unwrap();
    assert!(m.contains_key("hash-max-listpack-entries") && m.contains_key("slowlog-max-len"));
    // The port reported is the one bound.
    assert_eq!(config_get(&mut c, "port"), s.addr.port().to_string());
    // The idle timeout applies to connections at once: 1 s, and an idle one is closed.
    q::<String>(&mut c, &["CONFIG", "SET", "timeout", "1"]).unwrap();
    let mut idle = std::net::TcpStream::connect(s.addr).unwrap();
    // Without the timeout the read would wait the full ten minutes and fail.
    idle.set_read_timeout(Some(Duration::from_secs(600)))
        .unwrap();
    let mut buf = [0u8; 16];
    assert!(
        matches!(idle.read(&mut buf), Ok(0)),
        "closed by the timeout"
    );
}

#[test]
fn config_set_requirepass_guards_new_connections() {
    let (_d, s) = server();
    let mut c = s.client();
    q::<String>(&mut c, &["CONFIG", "SET", "requirepass", "s3cret"]).unwrap();
    // This connection stays authenticated; a new one is not.
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "k"]).unwrap(), 0);
    let mut other = s.client();
    assert!(err_text(q::<i64>(&mut other, &["EXISTS", "k"])).starts_with("NOAUTH"));
    q::<String>(&mut other, &["AUTH", "s3cret"]).unwrap();
    assert_eq!(q::<i64>(&mut other, &["EXISTS", "k"]).unwrap(), 0);
    // RESET drops the authentication.
    assert_eq!(q::<String>(&mut other, &["RESET"]).unwrap(), "RESET");
    assert!(err_text(q::<i64>(&mut other, &["EXISTS", "k"])).starts_with("NOAUTH"));
    // An empty password turns authentication off again.
    q::<String>(&mut c, &["CONFIG", "SET", "requirepass", ""]).unwrap();
    let mut third = s.client();
    assert_eq!(q::<i64>(&mut third, &["EXISTS", "k"]).unwrap(), 0);
    assert_eq!(
        err_text(q::<String>(&mut third, &["AUTH", "x"])),
        "ERR AUTH <password> called without any password configured for the default user. Are \
         you sure your configuration is correct?"
    );
    assert!(err_text(q::<String>(&mut third, &["AUTH", "someone", "x"])).starts_with("WRONGPASS"));
}

#[test]
fn config_rewrite_writes_the_running_settings_to_the_config_file() {
    let dir = tempfile::tempdir().unwrap();
    let (_d, s) = server();
    let mut c = s.client();
    assert_eq!(
        err_text(q::<String>(&mut c, &["CONFIG", "REWRITE"])),
        "ERR The server is running without a config file"
    );
    drop(s);
    let file = dir.path().join("tierkv.conf");
    std::fs::write(&file, "# operator's notes\ntimeout 300\n").unwrap();
    let store = tempfile::tempdir().unwrap();
    let s = TestServer::start(
        store.path(),
        tierkv::Options::default(),
        ServerConfig {
            config_file: Some(file.clone()),
            ..ServerConfig::default()
        },
    );
    let mut c = s.client();
    q::<String>(
        &mut c,
        &["CONFIG", "SET", "timeout", "42", "slowlog-max-len", "7"],
    )
    .unwrap();
    assert_eq!(q::<String>(&mut c, &["CONFIG", "REWRITE"]).unwrap(), "OK");
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(
        text.starts_with("# operator's notes\ntimeout 42\n"),
        "{text}"
    );
    assert!(text.contains("\nslowlog-max-len 7\n"), "{text}");
    // What was written reads back as the running settings.
    let mut reread = ServerConfig::default();
    tierkv_server::params::apply_file(&mut reread, &text, &|_| false).unwrap();
    assert_eq!(reread.idle_timeout, Some(Duration::from_secs(42)));
    assert_eq!(reread.slowlog_max_len, 7);
}

#[test]
fn config_resetstat_zeroes_the_counters() {
    let (_d, s) = server();
    let mut c = s.client();
    for _ in 0..5 {
        q::<String>(&mut c, &["PING"]).unwrap();
    }
    let before: u64 = info_field(&mut c, "stats", "total_commands_processed")
        .parse()
        .unwrap();
    assert!(before >= 5);
    q::<String>(&mut c, &["CONFIG", "RESETSTAT"]).unwrap();
    let after: u64 = info_field(&mut c, "stats", "total_commands_processed")
        .parse()
        .unwrap();
    assert!(after < before, "{after} < {before}");
    // The rates and the memory peak are reported (sampled by the server).
    std::thread::sleep(Duration::from_millis(300));
    let _: u64 = info_field(&mut c, "stats", "instantaneous_ops_per_sec")
        .parse()
        .unwrap();
    let _: u64 = info_field(&mut c, "memory", "used_memory_peak")
        .parse()
        .unwrap();
}

/// Reads whatever a raw connection has to say within `wait`.
fn read_for(sock: &mut std::net::TcpStream, wait: Duration) -> Vec<u8> {
    sock.set_read_timeout(Some(wait)).unwrap();
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    while let Ok(n) = sock.read(&mut buf) {
        if n == 0 {
            break;
        }
        out.extend_from_slice(&buf[..n]);
    }
    out
}

#[test]
fn client_kill_closes_the_connections_it_names() {
    let (_d, s) = server();
    let mut c = s.client();
    let mut victim = s.client();
    let id: i64 = q(&mut victim, &["CLIENT", "ID"]).unwrap();
    assert_eq!(
        q::<i64>(&mut c, &["CLIENT", "KILL", "ID", &id.to_string()]).unwrap(),
        1
    );
    let list: String = q(&mut c, &["CLIENT", "LIST"]).unwrap();
    assert!(!list.contains(&format!("id={id} ")), "{list}");
    assert!(
        q::<String>(&mut victim, &["PING"]).is_err(),
        "the killed connection is closed"
    );
    // By address (the old form), by filters, and SKIPME.
    let mut raw = std::net::TcpStream::connect(s.addr).unwrap();
    let addr = raw.local_addr().unwrap().to_string();
    common::wait_for("the raw client registered", || {
        q::<String>(&mut c, &["CLIENT", "LIST"])
            .unwrap()
            .contains(&format!("addr={addr} "))
    });
    assert_eq!(
        q::<String>(&mut c, &["CLIENT", "KILL", &addr]).unwrap(),
        "OK"
    );
    assert!(read_for(&mut raw, Duration::from_secs(5)).is_empty());
    assert_eq!(
        err_text(q::<String>(&mut c, &["CLIENT", "KILL", &addr])),
        "ERR No such client"
    );
    let _others: Vec<_> = (0..3).map(|_| s.client()).collect();
    common::wait_for("four clients registered", || {
        q::<String>(&mut c, &["CLIENT", "LIST"])
            .unwrap()
            .lines()
            .count()
            == 4
    });
    assert_eq!(
        q::<i64>(&mut c, &["CLIENT", "KILL", "TYPE", "normal"]).unwrap(),
        3
    );
    assert_eq!(
        q::<String>(&mut c, &["PING"]).unwrap(),
        "PONG",
        "SKIPME yes is the default"
    );
    assert_eq!(
        q::<i64>(&mut c, &["CLIENT", "KILL", "TYPE", "pubsub"]).unwrap(),
        0
    );
    assert_eq!(
        err_text(q::<i64>(&mut c, &["CLIENT", "KILL", "USER", "nobody"])),
        "ERR No such user 'nobody'"
    );
    assert_eq!(
        q::<i64>(
            &mut c,
            &["CLIENT", "KILL", "ID", "1", "SKIPME", "no", "MAXAGE", "100000"]
        )
        .unwrap(),
        0
    );
}

#[test]
fn client_pause_holds_writes_or_everything_until_it_ends() {
    let (_d, s) = server();
    let mut c = s.client();
    q::<String>(&mut c, &["SET", "k", "v"]).unwrap();
    // WRITE holds writes, not reads, until CLIENT UNPAUSE.
    q::<String>(&mut c, &["CLIENT", "PAUSE", "100000", "WRITE"]).unwrap();
    let mut other = s.client();
    assert_eq!(
        q::<String>(&mut other, &["GET", "k"]).unwrap(),
        "v",
        "reads pass a WRITE pause"
    );
    let writer = std::thread::spawn(move || q::<String>(&mut other, &["SET", "k", "w"]).unwrap());
    std::thread::sleep(Duration::from_millis(200));
    assert!(!writer.is_finished(), "a write waits for the pause to end");
    q::<String>(&mut c, &["CLIENT", "UNPAUSE"]).unwrap();
    writer.join().unwrap();
    // A pause ends by itself at its timeout: a write sent during it answers after it.
    let t = Instant::now();
    q::<String>(&mut c, &["CLIENT", "PAUSE", "300", "WRITE"]).unwrap();
    let mut other = s.client();
    q::<String>(&mut other, &["SET", "k", "w"]).unwrap();
    assert!(t.elapsed() >= Duration::from_millis(300));
    // ALL holds reads too, until CLIENT UNPAUSE (CLIENT itself is never held).
    q::<String>(&mut c, &["CLIENT", "PAUSE", "100000"]).unwrap();
    let mut reader = s.client();
    let h = std::thread::spawn(move || q::<String>(&mut reader, &["GET", "k"]).unwrap());
    std::thread::sleep(Duration::from_millis(200));
    assert!(!h.is_finished());
    q::<String>(&mut c, &["CLIENT", "UNPAUSE"]).unwrap();
    assert_eq!(h.join().unwrap(), "w");
    assert_eq!(
        err_text(q::<String>(&mut c, &["CLIENT", "PAUSE", "soon"])),
        "ERR timeout is not an integer or out of range"
    );
}

#[test]
fn client_unblock_ends_a_blocking_command() {
    let (_d, s) = server();
    let mut c = s.client();
    for (how, want_error) in [("TIMEOUT", false), ("ERROR", true)] {
        let mut w = s.client();
        let id: i64 = q(&mut w, &["CLIENT", "ID"]).unwrap();
        let h = std::thread::spawn(move || q::<Option<Vec<String>>>(&mut w, &["BLPOP", "q", "0"]));
        common::wait_for("the client blocked", || {
            q::<String>(&mut c, &["CLIENT", "LIST"])
                .unwrap()
                .lines()
                .any(|l| l.starts_with(&format!("id={id} ")) && l.contains(" flags=b "))
        });
        assert_eq!(
            q::<i64>(&mut c, &["CLIENT", "UNBLOCK", &id.to_string(), how]).unwrap(),
            1
        );
        let r = h.join().unwrap();
        if want_error {
            assert_eq!(err_text(r), "UNBLOCKED client unblocked via CLIENT UNBLOCK");
        } else {
            assert_eq!(r.unwrap(), None);
        }
    }
    let me: i64 = q(&mut c, &["CLIENT", "ID"]).unwrap();
    assert_eq!(
        q::<i64>(&mut c, &["CLIENT", "UNBLOCK", &me.to_string()]).unwrap(),
        0,
        "a client not blocked"
    );
}

#[test]
fn client_reply_off_and_skip_silence_replies() {
    let (_d, s) = server();
    let mut raw = std::net::TcpStream::connect(s.addr).unwrap();
    raw.write_all(
        b"CLIENT REPLY SKIP\r\nSET a 1\r\nGET a\r\nCLIENT REPLY OFF\r\nSET b 2\r\nGET b\r\n\
          CLIENT REPLY ON\r\nGET b\r\n",
    )
    .unwrap();
    let got = read_for(&mut raw, Duration::from_millis(500));
    assert_eq!(
        String::from_utf8_lossy(&got),
        "$1\r\n1\r\n+OK\r\n$1\r\n2\r\n",
        "SKIP silences one command, OFF all until ON (whose OK is sent)"
    );
}

#[test]
fn slowlog_and_latency_report_slow_commands() {
    let (_d, s) = server();
    let mut c = s.client();
    q::<String>(&mut c, &["CONFIG", "SET", "slowlog-log-slower-than", "0"]).unwrap();
    q::<String>(&mut c, &["SLOWLOG", "RESET"]).unwrap();
    // Commands the event loop answers (a GET memory answers, a SET the memtable takes)
    // are logged as the blocking path's are.
    q::<Option<String>>(&mut c, &["GET", "some-key"]).unwrap();
    q::<String>(&mut c, &["SET", "some-key", "v"]).unwrap();
    q::<Option<String>>(&mut c, &["GET", "some-key"]).unwrap();
    let log: Vec<(i64, i64, i64, Vec<String>, String, String)> =
        q(&mut c, &["SLOWLOG", "GET", "-1"]).unwrap();
    let logged: Vec<&Vec<String>> = log.iter().map(|e| &e.3).collect();
    assert_eq!(
        logged
            .iter()
            .filter(|a| a[..] == ["GET", "some-key"])
            .count(),
        2,
        "{logged:?}"
    );
    assert!(
        logged.iter().any(|a| a[..] == ["SET", "some-key", "v"]),
        "{logged:?}"
    );
    assert!(log.windows(2).all(|w| w[0].0 > w[1].0), "newest first");
    assert_eq!(
        q::<Vec<redis::Value>>(&mut c, &["SLOWLOG", "GET", "1"])
            .unwrap()
            .len(),
        1
    );
    assert!(q::<i64>(&mut c, &["SLOWLOG", "LEN"]).unwrap() >= 2);
    q::<String>(&mut c, &["CONFIG", "SET", "slowlog-log-slower-than", "-1"]).unwrap();
    q::<String>(&mut c, &["SLOWLOG", "RESET"]).unwrap();
    q::<String>(&mut c, &["PING"]).unwrap();
    assert_eq!(
        q::<i64>(&mut c, &["SLOWLOG", "LEN"]).unwrap(),
        0,
        "-1 logs nothing"
    );
    // The latency monitor is off by default (threshold 0).
    assert!(q::<Vec<redis::Value>>(&mut c, &["LATENCY", "LATEST"])
        .unwrap()
        .is_empty());
    assert!(
        q::<Vec<redis::Value>>(&mut c, &["LATENCY", "HISTORY", "command"])
            .unwrap()
            .is_empty()
    );
    assert_eq!(q::<i64>(&mut c, &["LATENCY", "RESET"]).unwrap(), 0);
}

#[test]
fn reset_role_and_hrandfield() {
    let (_d, s) = server();
    let mut c = s.client();
    q::<String>(&mut c, &["MULTI"]).unwrap();
    q::<String>(&mut c, &["SET", "x", "1"]).unwrap();
    assert_eq!(q::<String>(&mut c, &["RESET"]).unwrap(), "RESET");
    assert_eq!(
        err_text(q::<String>(&mut c, &["EXEC"])),
        "ERR EXEC without MULTI",
        "RESET discarded the transaction"
    );
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "x"]).unwrap(), 0);
    let role: (String, i64, Vec<String>) = q(&mut c, &["ROLE"]).unwrap();
    // A primary without replicas, at its replication offset (its latest sequence).
    let offset: i64 = info_field(&mut c, "replication", "master_repl_offset")
        .parse()
        .unwrap();
    assert_eq!(role, ("master".into(), offset, vec![]));
    assert_eq!(info_field(&mut c, "replication", "role"), "master");
    assert_eq!(
        q::<Option<String>>(&mut c, &["HRANDFIELD", "h"]).unwrap(),
        None
    );
    q::<i64>(&mut c, &["HSET", "h", "a", "1", "b", "2", "c", "3"]).unwrap();
    let one: String = q(&mut c, &["HRANDFIELD", "h"]).unwrap();
    assert!(["a", "b", "c"].contains(&one.as_str()));
    let mut all: Vec<String> = q(&mut c, &["HRANDFIELD", "h", "10"]).unwrap();
    all.sort();
    assert_eq!(
        all,
        ["a", "b", "c"],
        "a positive count gives distinct fields"
    );
    assert_eq!(
        q::<Vec<String>>(&mut c, &["HRANDFIELD", "h", "-7"])
            .unwrap()
            .len(),
        7
    );
    let pairs: Vec<String> = q(&mut c, &["HRANDFIELD", "h", "2", "WITHVALUES"]).unwrap();
    assert_eq!(pairs.len(), 4);
    for p in pairs.chunks(2) {
        assert_eq!(p[1], (p[0].as_bytes()[0] - b'a' + 1).to_string());
    }
    assert_eq!(
        q::<String>(&mut c, &["SUBSTR", "nokey", "0", "-1"]).unwrap(),
        "",
        "SUBSTR is GETRANGE"
    );
}

/// The store's own settings change while serving: the cache is resized (INFO reports the
/// new capacity) and the slow tier's device model swapped; a one-tier store refuses a
/// slow device, and nothing of a refused CONFIG SET applies.
#[test]
fn config_set_resizes_the_cache_and_swaps_the_slow_device() {
    let dir = tempfile::tempdir().unwrap();
    let slow = dir.path().join("slow");
    let s = TestServer::start(
        &dir.path().join("db"),
        common::two_tier_options(&slow),
        ServerConfig::default(),
    );
    let mut c = s.client();
    assert_eq!(config_get(&mut c, "tierkv-slow-device"), "none");
    q::<String>(
        &mut c,
        &[
            "CONFIG",
            "SET",
            "tierkv-cache-size",
            "3mb",
            "tierkv-slow-device",
            "gp3-max",
        ],
    )
    .unwrap();
    assert_eq!(
        config_get(&mut c, "tierkv-cache-size"),
        (3 << 20).to_string()
    );
    assert_eq!(
        info_field(&mut c, "caches", "cache_capacity"),
        (3 << 20).to_string()
    );
    assert_eq!(config_get(&mut c, "tierkv-slow-device"), "gp3-max");
    q::<String>(
        &mut c,
        &["CONFIG", "SET", "tierkv-slow-device", "custom:100:5:0"],
    )
    .unwrap();
    assert_eq!(config_get(&mut c, "tierkv-slow-device"), "custom:100:5:0");
    let e = err_text(q::<String>(
        &mut c,
        &["CONFIG", "SET", "tierkv-slow-device", "floppy"],
    ));
    assert!(e.contains("unknown device profile"), "{e}");
    drop(s);

    let (_d, s) = server();
    let mut c = s.client();
    let before = config_get(&mut c, "tierkv-cache-size");
    let e = err_text(q::<String>(
        &mut c,
        &[
            "CONFIG",
            "SET",
            "tierkv-cache-size",
            "2mb",
            "tierkv-slow-device",
            "hdd",
        ],
    ));
    assert!(e.contains("no slow tier"), "{e}");
    assert_eq!(
        config_get(&mut c, "tierkv-cache-size"),
        before,
        "none of it applied"
    );
}
