//! The `tierkv` command's surface as a person reads it (issue 22, "The shell"): `--help`
//! shows real defaults (never `u64::MAX` as a number), one flag name per setting across
//! commands (`--slow-device`, with `--sd-profile` still accepted), RocksDB-only systems are
//! marked, and `stats` prints human units while `--json` keeps raw numbers.

use std::path::Path;
mod common;

use common::{code, text, tierkv};

const SUBCOMMANDS: [&str; 8] = [
    "bench", "put", "get", "del", "scan", "stats", "check", "serve",
];

#[test]
fn no_help_text_shows_a_u64_max_default() {
    for sub in SUBCOMMANDS {
        let o = tierkv(&[sub, "--help"]);
        assert_eq!(code(&o), 0, "{sub} --help");
        let help = text(&o.stdout);
        assert!(
            !help.contains("18446744073709551615") && !help.contains("4294967295"),
            "{sub} --help shows a machine limit as its default:\n{help}"
        );
    }
}

#[test]
fn bench_help_shows_the_defaults_of_workload_distribution_systems_threads_and_device() {
    let help = text(&tierkv(&["bench", "--help"]).stdout);
    for want in [
        "[default: ro]",
        "[default: hotspot-5%",
        "[default: tierkv,tierkv-nopromo,tierkv-fd]",
        "[default: the scale's: 8 for smoke, 16 for small and paper]",
        "[default: gp3]",
        "--slow-device <PROFILE>",
    ] {
        assert!(help.contains(want), "bench --help lacks {want:?}:\n{help}");
    }
    // The old name is a hidden alias: accepted, not advertised as a flag of its own.
    assert!(!help.contains("--sd-profile <"), "{help}");
    // Systems that need the RocksDB build are marked as such.
    assert!(
        help.contains("RocksDB (only in a build with `--features tierkv-bench/rocksdb-peer`)"),
        "{help}"
    );
}

#[test]
fn serve_help_names_the_slow_device_flag_and_its_default() {
    let help = text(&tierkv(&["serve", "--help"]).stdout);
    assert!(help.contains("--slow-device <PROFILE>"), "{help}");
    assert!(help.contains("[default: none]"), "{help}");
}

/// A bad value reaches the device-model parser (so the flag itself was accepted) and is
/// refused with the one flag name, whichever spelling was used.
#[test]
fn slow_device_and_its_old_name_are_accepted_by_bench_and_serve() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("bench-out");
    let out = out.to_str().unwrap();
    for flag in ["--slow-device", "--sd-profile"] {
        let o = tierkv(&["bench", flag, "ssd", "--out", out, "--no-progress"]);
        let err = text(&o.stderr);
        assert_eq!(code(&o), 2, "bench {flag}: {err}");
        assert!(
            err.contains("--slow-device") && err.contains("unknown device profile"),
            "bench {flag}: {err}"
        );
    }
    assert!(!Path::new(out).exists(), "a refused bench wrote its output");

    let db = tmp.path().join("db");
    let slow = tmp.path().join("slow");
    for flag in ["--slow-device", "--sd-profile"] {
        let o = tierkv(&[
            "serve",
            "--db",
            db.to_str().unwrap(),
            "--slow-dir",
            slow.to_str().unwrap(),
            "--fd-budget",
            "4MiB",
            "--port",
            "0",
            flag,
            "ssd",
        ]);
        let err = text(&o.stderr);
        assert_eq!(code(&o), 2, "serve {flag}: {err}");
        assert!(
            err.contains("--slow-device") && err.contains("unknown device profile"),
            "serve {flag}: {err}"
        );
        assert!(
            !db.exists(),
            "serve {flag} created the store before refusing"
        );
    }
}

/// A store with `n` keys flushed into a table and `extra` more in the WAL only.
fn make_store(dir: &Path, n: u32, extra: u32) {
    let db = tierkv::Db::open(dir, tierkv::Options::default()).unwrap();
    for i in 0..n {
        db.put(format!("key{i:04}"), "v".repeat(100)).unwrap();
    }
    db.flush().unwrap();
    for i in n..n + extra {
        db.put(format!("key{i:04}"), "v".repeat(100)).unwrap();
    }
    db.close().unwrap();
}

#[test]
fn scan_without_a_limit_prints_everything_and_with_one_stops() {
    let tmp = tempfile::tempdir().unwrap();
    make_store(tmp.path(), 30, 5);
    let db = tmp.path().to_str().unwrap();
    let all = tierkv(&["scan", "--db", db]);
    assert_eq!(code(&all), 0, "{}", text(&all.stderr));
    assert_eq!(text(&all.stdout).lines().count(), 35);
    let two = tierkv(&["scan", "--db", db, "--limit", "2"]);
    assert_eq!(text(&two.stdout).lines().count(), 2);
}

#[test]
fn stats_prints_human_sizes_a_key_estimate_and_what_is_cumulative() {
    let tmp = tempfile::tempdir().unwrap();
    make_store(tmp.path(), 300, 20);
    let o = tierkv(&["stats", "--db", tmp.path().to_str().unwrap()]);
    assert_eq!(code(&o), 0, "{}", text(&o.stderr));
    let out = text(&o.stdout);
    // 300 records of ~110 bytes: tens of KiB in the table, shown in KiB, not as bytes.
    assert!(out.contains(" KiB"), "{out}");
    assert!(out.contains("keys: about 320 "), "{out}");
    assert!(
        out.contains("store (persisted: the same across restarts)"),
        "{out}"
    );
    assert!(
        out.contains("this process (counted since the store was opened"),
        "{out}"
    );
    assert!(
        out.contains("table opens (table cache misses): fast "),
        "{out}"
    );
    let store_part = out.split("this process").next().unwrap();
    assert!(
        store_part.contains("L0"),
        "levels belong to the store: {out}"
    );
    assert!(
        !store_part.contains("puts"),
        "counters belong to the process: {out}"
    );
}

#[test]
fn stats_json_keeps_raw_numbers() {
    let tmp = tempfile::tempdir().unwrap();
    make_store(tmp.path(), 300, 20);
    let o = tierkv(&["stats", "--db", tmp.path().to_str().unwrap(), "--json"]);
    assert_eq!(code(&o), 0, "{}", text(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("stats --json is JSON");
    let fast = v["fast_tier_bytes"]
        .as_u64()
        .expect("fast_tier_bytes is a number");
    assert!(fast > 300 * 100, "{fast}");
    assert_eq!(v["estimated_keys"].as_u64(), Some(320), "{v}");
    assert!(v["levels"][0]["bytes"].is_u64(), "{v}");
}
