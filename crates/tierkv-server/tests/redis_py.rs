//! A real program written with a common client library: `tests/py/cache_app.py` runs with
//! redis-py (a page cache with TTLs, a hash per user, counters, scans, RENAME/COPY and
//! FLUSHDB) against a server started by the test. Skips when `python3` or the `redis`
//! package is absent (`.ci/run` installs it), reporting `SKIPPED ...` past the test
//! runner's capture (`tierkv::testing::skip`; docs/TESTING.md, "Skips").

mod common;

use common::TestServer;
use std::process::Command;
use tierkv_server::ServerConfig;

#[test]
fn a_redis_py_program_runs_against_the_server() {
    let have = Command::new("python3")
        .args(["-c", "import redis"])
        .output()
        .map(|o| o.status.success());
    if have.as_ref().map_or(true, |ok| !ok) {
        tierkv::testing::skip(
            "a_redis_py_program_runs_against_the_server",
            &format!(
                "python3 with the redis package is not available ({}); install it with \
                 `python3 -m pip install redis`",
                match have {
                    Err(e) => format!("python3: {e}"),
                    Ok(_) => "`import redis` failed".into(),
                }
            ),
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(
        dir.path(),
        tierkv::Options::default(),
        ServerConfig::default(),
    );
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/py/cache_app.py");
    let out = Command::new("python3")
        .arg(script)
        .arg(s.addr.port().to_string())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "the redis-py program failed:\nstdout: {}\nstderr: {}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("redis-py program: ok"));
}
