//! The INFO report: Redis's `# Section` / `field:value` text, with the usual Redis sections
//! (server, clients, stats, memory, persistence, keyspace) and tierkv's own (engine, tiers,
//! fdhitrate, promotion, ralt, caches) built from `Db::stats()`.

use crate::state::Shared;
use serde_json::Value;
use std::fmt::Write as _;
use std::sync::atomic::Ordering::Relaxed;

/// The Redis version whose behaviour the server follows (reported as `redis_version`, which
/// clients read to decide which commands they may use).
pub const REDIS_COMPAT_VERSION: &str = "7.0.0";

/// Every section, in report order. `default`/`all`/`everything` select all of them.
pub const SECTIONS: &[&str] = &[
    "server",
    "clients",
    "stats",
    "memory",
    "persistence",
    "engine",
    "tiers",
    "fdhitrate",
    "promotion",
    "ralt",
    "caches",
    "keyspace",
];

fn title(name: &str) -> String {
    match name {
        "fdhitrate" => "FDHitRate".into(),
        "ralt" => "RALT".into(),
        _ => {
            let mut c = name.chars();
            c.next()
                .map(|f| f.to_ascii_uppercase().to_string() + c.as_str())
                .unwrap_or_default()
        }
    }
}

/// Writes a JSON object as `prefix_field:value` lines (nested objects join their names
/// with `_`); keeps INFO in step with whatever the engine adds to its statistics.
fn flatten(out: &mut String, prefix: &str, v: &Value) {
    match v {
        Value::Object(m) => {
            for (k, v) in m {
                let name = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}_{k}")
                };
                flatten(out, &name, v);
            }
        }
        Value::Array(_) => {}
        Value::Null => {
            let _ = writeln!(out, "{prefix}:");
        }
        Value::Bool(b) => {
            let _ = writeln!(out, "{prefix}:{}", *b as u8);
        }
        Value::Number(n) => {
            let _ = writeln!(out, "{prefix}:{n}");
        }
        Value::String(s) => {
            let _ = writeln!(out, "{prefix}:{}", s.replace(['\r', '\n'], " "));
        }
    }
}

fn human(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "K", "M", "G", "T"];
    let mut v = bytes as f64;
    let mut u = 0;
    while v >= 1024.0 && u < UNITS.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    format!("{v:.2}{}", UNITS[u])
}

/// Resident set size of this process, from /proc (0 where unavailable).
fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}

/// Renders the sections named in `args` (lower case; empty = default = all).
pub(crate) fn render(shared: &Shared, args: &[String]) -> tierkv::Result<String> {
    let all = args.is_empty()
        || args
            .iter()
            .any(|a| matches!(a.as_str(), "all" | "everything" | "default"));
    let wanted: Vec<&str> = SECTIONS
        .iter()
        .copied()
        .filter(|s| all || args.iter().any(|a| a == s))
        .collect();
    let stats = shared.db.stats();
    let json = serde_json::to_value(&stats).unwrap_or(Value::Null);
    let st = &shared.stats;
    let cfg = &shared.config;
    let mut out = String::new();
    for (i, section) in wanted.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        let _ = writeln!(out, "# {}", title(section));
        let o = &mut out;
        match *section {
            "server" => {
                let up = shared.started.elapsed().as_secs();
                let _ = writeln!(o, "redis_version:{REDIS_COMPAT_VERSION}");
                let _ = writeln!(o, "tierkv_version:{}", env!("CARGO_PKG_VERSION"));
                let _ = writeln!(o, "redis_mode:standalone");
                let _ = writeln!(o, "os:{} {}", std::env::consts::OS, std::env::consts::ARCH);
                let _ = writeln!(o, "arch_bits:{}", usize::BITS);
                let _ = writeln!(o, "process_id:{}", std::process::id());
                let _ = writeln!(o, "tcp_port:{}", shared.port);
                let _ = writeln!(o, "bind:{}", cfg.bind);
                let _ = writeln!(o, "server_time_usec:{}", now_usec());
                let _ = writeln!(o, "uptime_in_seconds:{up}");
                let _ = writeln!(o, "uptime_in_days:{}", up / 86_400);
                let _ = writeln!(o, "started_unix_time:{}", shared.started_unix);
                if let Some(d) = &cfg.db_dir {
                    let _ = writeln!(o, "db_dir:{}", d.display());
                }
                if let Some(d) = &cfg.slow_dir {
                    let _ = writeln!(o, "slow_dir:{}", d.display());
                }
            }
            "clients" => {
                let _ = writeln!(o, "connected_clients:{}", shared.clients.lock().len());
                let _ = writeln!(o, "maxclients:{}", cfg.max_clients);
                let _ = writeln!(o, "blocked_clients:0");
                let _ = writeln!(
                    o,
                    "query_buffers_bytes:{}",
                    st.query_buffer_bytes.load(Relaxed)
                );
            }
            "stats" => {
                let _ = writeln!(
                    o,
                    "total_connections_received:{}",
                    st.connections_received.load(Relaxed)
                );
                let _ = writeln!(o, "total_commands_processed:{}", st.commands.load(Relaxed));
                let _ = writeln!(
                    o,
                    "total_net_input_bytes:{}",
                    st.net_input_bytes.load(Relaxed)
                );
                let _ = writeln!(
                    o,
                    "total_net_output_bytes:{}",
                    st.net_output_bytes.load(Relaxed)
                );
                let _ = writeln!(
                    o,
                    "rejected_connections:{}",
                    st.connections_rejected.load(Relaxed)
                );
                let _ = writeln!(
                    o,
                    "total_error_replies_protocol:{}",
                    st.protocol_errors.load(Relaxed)
                );
                let _ = writeln!(o, "keyspace_hits:{}", st.keyspace_hits.load(Relaxed));
                let _ = writeln!(o, "keyspace_misses:{}", st.keyspace_misses.load(Relaxed));
                let _ = writeln!(o, "scan_cursors:{}", shared.cursors.lock().len());
                let _ = writeln!(
                    o,
                    "tierkv_expired_hash_fields_swept:{}",
                    st.hash_fields_swept.load(Relaxed)
                );
            }
            "memory" => {
                let query = st.query_buffer_bytes.load(Relaxed) as u64;
                let used = stats.memtable_bytes as u64
                    + stats.table_memory as u64
                    + stats.cache_total.usage as u64
                    + stats.promotion.cache_bytes as u64
                    + stats
                        .promotion
                        .ralt
                        .as_ref()
                        .and_then(|_| json.pointer("/promotion/ralt/memory_bytes"))
                        .and_then(Value::as_u64)
                        .unwrap_or(0)
                    + query;
                let rss = rss_bytes();
                let _ = writeln!(o, "used_memory:{used}");
                let _ = writeln!(o, "used_memory_human:{}", human(used));
                let _ = writeln!(o, "used_memory_rss:{rss}");
                let _ = writeln!(o, "used_memory_rss_human:{}", human(rss));
                let _ = writeln!(o, "memtable_bytes:{}", stats.memtable_bytes);
                let _ = writeln!(o, "immutable_memtables:{}", stats.immutable_memtables);
                let _ = writeln!(o, "table_index_filter_bytes:{}", stats.table_memory);
                let _ = writeln!(o, "cache_bytes:{}", stats.cache_total.usage);
                let _ = writeln!(o, "promotion_cache_bytes:{}", stats.promotion.cache_bytes);
                let _ = writeln!(o, "query_buffers_bytes:{query}");
                let _ = writeln!(o, "maxmemory:0");
                let _ = writeln!(o, "maxmemory_policy:noeviction");
            }
            "persistence" => {
                let _ = writeln!(o, "loading:0");
                let _ = writeln!(o, "wal_fsync:{}", if cfg.sync { "always" } else { "no" });
                let _ = writeln!(o, "aof_enabled:0");
                let _ = writeln!(o, "rdb_changes_since_last_save:0");
                let _ = writeln!(o, "last_sequence:{}", stats.last_sequence);
            }
            "engine" => {
                for f in [
                    "puts",
                    "deletes",
                    "write_batches",
                    "write_groups",
                    "user_bytes_written",
                    "gets",
                    "flushes",
                    "flush_bytes_written",
                    "flush_entries_dropped",
                    "compactions",
                    "trivial_moves",
                    "compaction_bytes_read",
                    "compaction_bytes_written",
                    "compaction_entries_dropped",
                    "write_stalls",
                    "write_stall_micros",
                    "write_slowdowns",
                    "rmws",
                    "rmw_retries",
                ] {
                    if let Some(v) = json.get(f) {
                        flatten(o, f, v);
                    }
                }
            }
            "tiers" => {
                let _ = writeln!(o, "fast_tier_bytes:{}", stats.fast_tier_bytes);
                let _ = writeln!(o, "slow_tier_bytes:{}", stats.slow_tier_bytes);
                match stats.fd_budget {
                    Some(b) => {
                        let _ = writeln!(o, "fd_budget:{b}");
                        let _ = writeln!(
                            o,
                            "fd_used_percent:{:.2}",
                            100.0 * stats.fast_tier_bytes as f64 / b.max(1) as f64
                        );
                    }
                    None => {
                        let _ = writeln!(o, "fd_budget:none");
                    }
                }
                for l in &stats.levels {
                    let _ = writeln!(
                        o,
                        "level{}:tier={},files={},bytes={},sized_bytes={},target={},compaction_read={},compaction_write={}",
                        l.level,
                        l.tier.name(),
                        l.files,
                        l.bytes,
                        l.sized_bytes,
                        l.target_bytes,
                        l.compaction_read_bytes,
                        l.compaction_write_bytes
                    );
                }
                for (name, tier) in [("fast", &stats.io.fast), ("slow", &stats.io.slow)] {
                    let (mut rb, mut ro, mut wb, mut wo) = (0u64, 0u64, 0u64, 0u64);
                    for c in &tier.causes {
                        rb += c.read_bytes;
                        ro += c.read_ops;
                        wb += c.write_bytes;
                        wo += c.write_ops;
                        if c.read_ops + c.write_ops > 0 {
                            let _ = writeln!(
                                o,
                                "io_{name}_{}:read_bytes={},read_ops={},write_bytes={},write_ops={}",
                                c.cause.name(),
                                c.read_bytes,
                                c.read_ops,
                                c.write_bytes,
                                c.write_ops
                            );
                        }
                    }
                    let _ = writeln!(o, "io_{name}_read_bytes:{rb}");
                    let _ = writeln!(o, "io_{name}_read_ops:{ro}");
                    let _ = writeln!(o, "io_{name}_write_bytes:{wb}");
                    let _ = writeln!(o, "io_{name}_write_ops:{wo}");
                }
            }
            "fdhitrate" => {
                let _ = writeln!(o, "fd_hit_rate:{:.4}", stats.fd_hit_rate);
                let _ = writeln!(o, "gets:{}", stats.gets);
                if let Some(g) = json.get("get_sources") {
                    flatten(o, "get", g);
                }
            }
            "promotion" => {
                if let Some(Value::Object(m)) = json.get("promotion") {
                    for (k, v) in m {
                        if k != "ralt" {
                            flatten(o, &format!("promotion_{k}"), v);
                        }
                    }
                }
            }
            "ralt" => match json.pointer("/promotion/ralt") {
                Some(v @ Value::Object(_)) => {
                    let _ = writeln!(o, "ralt_enabled:1");
                    flatten(o, "ralt", v);
                }
                _ => {
                    let _ = writeln!(o, "ralt_enabled:0");
                }
            },
            "caches" => {
                let b = &stats.cache_total;
                // The whole cache (KV, KP and blocks); hits and misses are the blocks'.
                let _ = writeln!(o, "cache_capacity:{}", b.capacity);
                let _ = writeln!(o, "cache_usage:{}", b.usage);
                let _ = writeln!(o, "block_cache_hits:{}", b.hits);
                let _ = writeln!(o, "block_cache_misses:{}", b.misses);
                let _ = writeln!(o, "block_cache_hit_rate:{:.4}", b.hit_rate());
                let _ = writeln!(o, "promotion_cache_bytes:{}", stats.promotion.cache_bytes);
                // Table-cache misses: opening a table reads its footer, filter, properties
                // and index from disk.
                let t = &stats.table_opens;
                let _ = writeln!(o, "table_opens_fast:{}", t.fast_opens);
                let _ = writeln!(o, "table_open_bytes_fast:{}", t.fast_bytes);
                let _ = writeln!(o, "table_opens_slow:{}", t.slow_opens);
                let _ = writeln!(o, "table_open_bytes_slow:{}", t.slow_bytes);
            }
            "keyspace" => {
                // tierkv keeps no key count: DBSIZE and this section count keys with a full
                // scan that is reused for a while, so the figure is approximate.
                let (n, age) = shared.key_count(crate::state::INFO_KEYS_MAX_AGE)?;
                let _ = writeln!(o, "keys_approximate:1");
                let _ = writeln!(o, "keys_counted_seconds_ago:{}", age.as_secs());
                if n.keys > 0 {
                    let _ = writeln!(o, "db0:keys={},expires={},avg_ttl=0", n.keys, n.expiring);
                }
            }
            _ => {}
        }
    }
    Ok(out.replace('\n', "\r\n"))
}

fn now_usec() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_micros())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ServerConfig;
    use crate::state::{ClientInfo, ConnState, ServerStats};
    use parking_lot::Mutex;
    use std::collections::VecDeque;
    use std::path::Path;
    use std::sync::Arc;
    use std::time::Instant;

    /// Compares `got` with the golden file `tests/golden/<name>` (written by the code the
    /// report replaced, so a refactoring that changes one byte fails here);
    /// `TIERKV_BLESS=1` rewrites the file instead, for a deliberate change of the output.
    fn assert_golden(name: &str, got: &str) {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/golden")
            .join(name);
        if std::env::var_os("TIERKV_BLESS").is_some() {
            std::fs::write(&path, got).unwrap();
            return;
        }
        let want =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        if got != want {
            let line = got
                .lines()
                .zip(want.lines())
                .position(|(g, w)| g != w)
                .unwrap_or_else(|| got.lines().count().min(want.lines().count()));
            panic!(
                "{name} differs from line {}:\n got: {:?}\nwant: {:?}\n\nwhole output:\n{got}",
                line + 1,
                got.lines().nth(line),
                want.lines().nth(line)
            );
        }
    }

    /// Fields whose values differ from run to run or machine to machine (time, process,
    /// platform, version, resident memory), shown as `*`; every other byte is compared.
    const VOLATILE: &[&str] = &[
        "tierkv_version",
        "os",
        "arch_bits",
        "process_id",
        "server_time_usec",
        "uptime_in_seconds",
        "started_unix_time",
        "used_memory_rss",
        "used_memory_rss_human",
        "keys_counted_seconds_ago",
    ];

    /// INFO's text with CRLF line ends checked and turned into `\n`, and the
    /// [`VOLATILE`] values masked.
    fn normalized(info: &str) -> String {
        assert!(
            !info.replace("\r\n", "").contains('\n'),
            "a line of INFO does not end with CRLF"
        );
        let mut out = String::new();
        for line in info.replace("\r\n", "\n").split_inclusive('\n') {
            match line.split_once(':') {
                Some((name, _)) if VOLATILE.contains(&name) => {
                    out.push_str(name);
                    out.push_str(":*\n");
                }
                _ => out.push_str(line),
            }
        }
        out
    }

    /// A server's shared state over a fresh store at `dir` (two tiers with promotion, or
    /// one), after a few commands and a flush, with every server counter set.
    fn loaded_shared(dir: &Path, two_tiers: bool) -> Shared {
        let opts = tierkv::Options {
            fd_budget: two_tiers.then_some(64 << 20),
            slow: two_tiers.then(|| tierkv::SlowTier {
                dir: dir.join("slow"),
                budget: None,
                device: tierkv::DeviceProfile::none(),
            }),
            ..Default::default()
        };
        let db = tierkv::Db::open(dir.join("fast"), opts).unwrap();
        let versions = crate::keyspace::open(&db).unwrap();
        let config = ServerConfig {
            db_dir: Some("/data/fast".into()),
            slow_dir: two_tiers.then(|| "/data/slow".into()),
            sync: two_tiers,
            ..Default::default()
        };
        let (tx, _) = tokio::sync::watch::channel(false);
        let shared = Shared::new(Arc::new(db), config, 6390, Arc::new(tx), versions);
        let addr = std::net::SocketAddr::from(([127, 0, 0, 1], 50_000));
        let info = Arc::new(ClientInfo {
            id: 1,
            addr,
            laddr: addr,
            created: Instant::now(),
            name: Mutex::new(None),
            last_cmd: Mutex::new("NULL"),
            last_active: Mutex::new(Instant::now()),
            proto: Mutex::new(crate::resp::Proto::Resp2),
        });
        shared.clients.lock().insert(1, info.clone());
        let mut conn = ConnState {
            info,
            authed: true,
            proto: crate::resp::Proto::Resp2,
            resume: None,
            auth_failures: 0,
        };
        let run = |conn: &mut ConnState, cmds: &[&[&str]]| {
            let mut pending: VecDeque<crate::resp::Args> = cmds
                .iter()
                .map(|c| {
                    c.iter()
                        .map(|a| bytes::Bytes::from(a.to_string()))
                        .collect()
                })
                .collect();
            let mut out = crate::resp::ReplyWriter::new(conn.proto);
            crate::commands::run_pipeline(&shared, conn, &mut out, &mut pending, 1 << 20);
        };
        run(
            &mut conn,
            &[
                &["SET", "a", "1"],
                &["SET", "b", "2", "EX", "100000"],
                &["HSET", "h", "f", "v"],
                &["GET", "a"],
            ],
        );
        shared.db.flush().unwrap();
        run(
            &mut conn,
            &[
                &["GET", "a"],
                &["GET", "nosuch"],
                &["SCAN", "0", "COUNT", "1"],
            ],
        );
        let st = &shared.stats;
        for (i, c) in [
            &st.connections_received,
            &st.connections_rejected,
            &st.commands,
            &st.protocol_errors,
            &st.keyspace_hits,
            &st.keyspace_misses,
            &st.net_input_bytes,
            &st.net_output_bytes,
            &st.hash_fields_swept,
        ]
        .into_iter()
        .enumerate()
        {
            ServerStats::bump(c, 10 + i as u64);
        }
        st.query_buffer_bytes.store(4096, Relaxed);
        shared
    }

    #[test]
    fn the_info_report_is_unchanged() {
        let dir = tempfile::tempdir().unwrap();
        let shared = loaded_shared(dir.path(), true);
        let info = render(&shared, &[]).unwrap();
        assert_golden("info_two_tiers.txt", &normalized(&info));
        // A selection is reported in section order, unknown names ignored.
        let dir = tempfile::tempdir().unwrap();
        let shared = loaded_shared(dir.path(), false);
        let args = ["ralt", "tiers", "nosuch", "memory"].map(String::from);
        let info = render(&shared, &args).unwrap();
        assert_golden("info_one_tier.txt", &normalized(&info));
    }
}
