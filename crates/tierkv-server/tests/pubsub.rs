//! Publish/subscribe against Redis 7's replies: delivery to channel, pattern and shard
//! channel subscribers (each message to every subscriber, in publish order), the
//! confirmations' counts, subscribed mode's command restriction (RESP2) and PING, PUBSUB
//! CHANNELS / NUMSUB / NUMPAT / SHARDCHANNELS, and a subscriber that leaves (or RESETs)
//! forgotten by the registry.

mod common;

use common::q;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use common::default_server as server;

/// A raw connection: sends inline commands, reads what arrives within a moment.
struct Raw(TcpStream);

impl Raw {
    fn send(&mut self, cmd: &str) {
        self.0.write_all(format!("{cmd}\r\n").as_bytes()).unwrap();
    }

    fn read(&mut self) -> String {
        self.0
            .set_read_timeout(Some(Duration::from_millis(300)))
            .unwrap();
        let mut out = Vec::new();
        let mut buf = [0u8; 4096];
        while let Ok(n) = self.0.read(&mut buf) {
            if n == 0 {
                break;
            }
            out.extend_from_slice(&buf[..n]);
        }
        String::from_utf8_lossy(&out).into_owned()
    }
}

#[test]
fn messages_reach_every_matching_subscriber() {
    let (_d, s) = server();
    let mut c = s.client();
    let mut a = Raw(TcpStream::connect(s.addr).unwrap());
    a.send("SUBSCRIBE news sport");
    assert_eq!(
        a.read(),
        "*3\r\n$9\r\nsubscribe\r\n$4\r\nnews\r\n:1\r\n*3\r\n$9\r\nsubscribe\r\n$5\r\nsport\r\n:2\r\n"
    );
    let mut b = Raw(TcpStream::connect(s.addr).unwrap());
    b.send("PSUBSCRIBE n*");
    assert_eq!(b.read(), "*3\r\n$10\r\npsubscribe\r\n$2\r\nn*\r\n:1\r\n");
    let mut sh = Raw(TcpStream::connect(s.addr).unwrap());
    sh.send("SSUBSCRIBE news");
    assert_eq!(sh.read(), "*3\r\n$10\r\nssubscribe\r\n$4\r\nnews\r\n:1\r\n");

    assert_eq!(q::<i64>(&mut c, &["PUBLISH", "news", "one"]).unwrap(), 2);
    assert_eq!(q::<i64>(&mut c, &["PUBLISH", "news", "two"]).unwrap(), 2);
    assert_eq!(q::<i64>(&mut c, &["PUBLISH", "sport", "goal"]).unwrap(), 1);
    assert_eq!(
        q::<i64>(&mut c, &["PUBLISH", "nobody", "x"]).unwrap(),
        1,
        "the pattern"
    );
    assert_eq!(q::<i64>(&mut c, &["SPUBLISH", "news", "shard"]).unwrap(), 1);
    assert_eq!(
        a.read(),
        "*3\r\n$7\r\nmessage\r\n$4\r\nnews\r\n$3\r\none\r\n\
         *3\r\n$7\r\nmessage\r\n$4\r\nnews\r\n$3\r\ntwo\r\n\
         *3\r\n$7\r\nmessage\r\n$5\r\nsport\r\n$4\r\ngoal\r\n"
    );
    assert_eq!(
        b.read(),
        "*4\r\n$8\r\npmessage\r\n$2\r\nn*\r\n$4\r\nnews\r\n$3\r\none\r\n\
         *4\r\n$8\r\npmessage\r\n$2\r\nn*\r\n$4\r\nnews\r\n$3\r\ntwo\r\n\
         *4\r\n$8\r\npmessage\r\n$2\r\nn*\r\n$6\r\nnobody\r\n$1\r\nx\r\n"
    );
    assert_eq!(
        sh.read(),
        "*3\r\n$8\r\nsmessage\r\n$4\r\nnews\r\n$5\r\nshard\r\n"
    );

    // The registry's view.
    let mut chans: Vec<String> = q(&mut c, &["PUBSUB", "CHANNELS"]).unwrap();
    chans.sort();
    assert_eq!(chans, ["news", "sport"]);
    assert_eq!(
        q::<Vec<String>>(&mut c, &["PUBSUB", "CHANNELS", "s*"]).unwrap(),
        ["sport"]
    );
    assert_eq!(
        q::<(String, i64, String, i64)>(&mut c, &["PUBSUB", "NUMSUB", "news", "none"]).unwrap(),
        ("news".into(), 1, "none".into(), 0)
    );
    assert_eq!(q::<i64>(&mut c, &["PUBSUB", "NUMPAT"]).unwrap(), 1);
    assert_eq!(
        q::<Vec<String>>(&mut c, &["PUBSUB", "SHARDCHANNELS"]).unwrap(),
        ["news"]
    );

    // Subscribed mode: only (un)subscribing, PING, QUIT, RESET.
    a.send("GET k");
    assert!(a.read().starts_with("-ERR Can't execute 'get'"));
    a.send("PING");
    assert_eq!(a.read(), "*2\r\n$4\r\npong\r\n$0\r\n\r\n");
    a.send("UNSUBSCRIBE");
    let unsub = a.read();
    assert!(
        unsub.contains("$4\r\nnews\r\n:1\r\n") && unsub.contains("$5\r\nsport\r\n:0\r\n"),
        "{unsub}"
    );
    a.send("GET k");
    assert_eq!(a.read(), "$-1\r\n", "out of subscribed mode");
    assert_eq!(q::<i64>(&mut c, &["PUBLISH", "news", "three"]).unwrap(), 1);

    // A subscriber that leaves, or RESETs, is forgotten.
    drop(b);
    sh.send("RESET");
    assert_eq!(sh.read(), "+RESET\r\n");
    common::wait_for("the closed subscriber forgotten", || {
        q::<i64>(&mut c, &["PUBSUB", "NUMPAT"]).unwrap() == 0
    });
    assert_eq!(q::<i64>(&mut c, &["PUBLISH", "news", "four"]).unwrap(), 0);
    assert_eq!(q::<i64>(&mut c, &["PUBSUB", "NUMPAT"]).unwrap(), 0);
    assert_eq!(q::<i64>(&mut c, &["SPUBLISH", "news", "x"]).unwrap(), 0);
}

#[test]
fn resp3_subscribers_get_pushes_and_may_run_commands() {
    let (_d, s) = server();
    let mut c = s.client();
    let mut a = Raw(TcpStream::connect(s.addr).unwrap());
    a.send("HELLO 3");
    a.read();
    a.send("SUBSCRIBE ch");
    assert_eq!(a.read(), ">3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n");
    q::<i64>(&mut c, &["PUBLISH", "ch", "hi"]).unwrap();
    assert_eq!(a.read(), ">3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$2\r\nhi\r\n");
    a.send("GET k");
    assert_eq!(a.read(), "_\r\n", "RESP3 has no subscribed mode");
}

/// MONITOR: every client's commands, in order, as Redis prints them (arguments quoted and
/// escaped, the client's address), the fast paths included (GETs answered from memory,
/// runs of SETs), AUTH never shown; RESET ends it.
#[test]
fn monitor_reports_every_command() {
    let (_d, s) = server();
    let mut m = Raw(TcpStream::connect(s.addr).unwrap());
    m.send("MONITOR");
    assert_eq!(m.read(), "+OK\r\n");
    let mut c = s.client();
    q::<()>(&mut c, &["SET", "k", "a\"b\n\x01"]).unwrap();
    q::<String>(&mut c, &["GET", "k"]).unwrap();
    let mut raw = Raw(TcpStream::connect(s.addr).unwrap());
    raw.send("SET p1 1\r\nSET p2 2\r\nGET p1");
    raw.read();
    let _ = q::<String>(&mut c, &["AUTH", "secret"]);
    let got = m.read();
    let lines: Vec<&str> = got.split("\r\n").filter(|l| !l.is_empty()).collect();
    let cmds: Vec<&str> = lines
        .iter()
        .map(|l| l.split_once("] ").expect("a monitor line").1)
        // The client library announces itself when it connects.
        .filter(|c| !c.starts_with(r#""CLIENT" "SETINFO""#))
        .collect();
    assert_eq!(
        cmds,
        [
            r#""SET" "k" "a\"b\n\x01""#,
            r#""GET" "k""#,
            r#""SET" "p1" "1""#,
            r#""SET" "p2" "2""#,
            r#""GET" "p1""#,
        ],
        "{got}"
    );
    assert!(
        lines[0].starts_with('+') && lines[0].contains(" [0 127.0.0.1:"),
        "{got}"
    );
    m.send("RESET");
    assert_eq!(m.read(), "+RESET\r\n");
    q::<String>(&mut c, &["PING"]).unwrap();
    assert_eq!(m.read(), "", "RESET ended the monitoring");
}
