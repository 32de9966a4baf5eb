//! The INFO report: Redis's `# Section` / `field:value` text, with the usual Redis sections
//! (server, clients, stats, memory, persistence, keyspace) and tierkv's own (engine, tiers,
//! fdhitrate, promotion, ralt, caches) built from `Db::stats()`.

use crate::state::Shared;
use serde_json::Value;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use tierkv::DbStats;

/// The Redis version whose behaviour the server follows (reported as `redis_version`, which
/// clients read to decide which commands they may use).
pub const REDIS_COMPAT_VERSION: &str = "7.0.0";

fn title(name: &str) -> String {
    match name {
        "fdhitrate" => "FDHitRate".into(),
        "cpu" => "CPU".into(),
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

/// What the sections are written from: the server's state and one snapshot of the engine's
/// statistics, typed and as JSON (for the figures INFO copies by name, so that it keeps in
/// step with whatever the engine adds).
struct Source<'a> {
    shared: &'a Shared,
    stats: DbStats,
    json: Value,
    /// Seconds since the server started, taken once so that its two forms agree.
    uptime: u64,
}

/// What writes one section's lines.
type WriteSection = fn(&mut String, &Source<'_>) -> tierkv::Result<()>;

/// A section's lines.
enum Lines {
    /// `name:value` lines, one per field.
    Fields(&'static [Field]),
    /// Lines a function writes: copied from the engine's statistics by name, or one per
    /// level or cause.
    Written(WriteSection),
}

use Lines::{Fields, Written};

/// Every section, in report order, with its lines. `default`/`all`/`everything` select
/// all of them.
const SECTIONS: [(&str, Lines); 15] = [
    ("server", Fields(SERVER)),
    ("clients", Fields(CLIENTS)),
    ("stats", Fields(STATS)),
    ("replication", Written(replication)),
    ("cpu", Written(cpu)),
    ("memory", Written(memory)),
    ("persistence", Fields(PERSISTENCE)),
    ("engine", Written(engine)),
    ("tiers", Written(tiers)),
    ("fdhitrate", Written(fd_hit_rate)),
    ("promotion", Written(promotion)),
    ("ralt", Written(ralt)),
    ("caches", Fields(CACHES)),
    ("cluster", Fields(CLUSTER)),
    ("keyspace", Written(keyspace)),
];

/// Redis's replication fields (Sentinel reads them: `role`, the `slaveN` lines, the
/// offsets, `master_link_status`, `slave_priority`).
fn replication(out: &mut String, src: &Source<'_>) -> tierkv::Result<()> {
    let shared = src.shared;
    let latest = shared.db().latest_sequence();
    out.push_str(&shared.replication.info(latest, &shared.config.load()));
    Ok(())
}

/// No cluster mode: sharding is twemproxy's (docs/DEPLOYMENT.md).
const CLUSTER: &[Field] = &[("cluster_enabled", |_| some(0))];

/// A `name:value` line: the name, and what gives the value (`None` leaves the line out).
type Field = (&'static str, fn(&Source<'_>) -> Option<String>);

/// Writes the `name:value` lines of `fields` from `src` (generic over the value's
/// function, which borrows from `src`, so that sections can have sources of their own).
fn write_fields<T, F: Fn(&T) -> Option<String>>(out: &mut String, src: &T, fields: &[(&str, F)]) {
    for (name, value) in fields {
        if let Some(v) = value(src) {
            let _ = writeln!(out, "{name}:{v}");
        }
    }
}

/// A value that is always shown.
fn some(v: impl ToString) -> Option<String> {
    Some(v.to_string())
}

/// Renders the sections named in `args` (lower case; empty = default = all).
pub(crate) fn render(shared: &Shared, args: &[String]) -> tierkv::Result<String> {
    let all = args.is_empty()
        || args
            .iter()
            .any(|a| matches!(a.as_str(), "all" | "everything" | "default"));
    let stats = shared.db().stats();
    let json = serde_json::to_value(&stats).unwrap_or(Value::Null);
    let src = Source {
        shared,
        stats,
        json,
        uptime: shared.started.elapsed().as_secs(),
    };
    let mut out = String::new();
    let wanted = SECTIONS
        .iter()
        .filter(|(name, _)| all || args.iter().any(|a| a == name));
    for (i, (name, lines)) in wanted.enumerate() {
        if i > 0 {
            out.push('\n');
        }
        let _ = writeln!(out, "# {}", title(name));
        match lines {
            Fields(fields) => write_fields(&mut out, &src, fields),
            Written(write) => write(&mut out, &src)?,
        }
    }
    Ok(out.replace('\n', "\r\n"))
}

const SERVER: &[Field] = &[
    ("redis_version", |_| some(REDIS_COMPAT_VERSION)),
    ("tierkv_version", |_| some(env!("CARGO_PKG_VERSION"))),
    ("redis_mode", |_| some("standalone")),
    ("os", |_| {
        some(format!(
            "{} {}",
            std::env::consts::OS,
            std::env::consts::ARCH
        ))
    }),
    ("arch_bits", |_| some(usize::BITS)),
    ("process_id", |_| some(std::process::id())),
    ("run_id", |src| some(&src.shared.replication.run_id)),
    ("tcp_port", |src| some(src.shared.port)),
    ("bind", |src| some(src.shared.config.load().bind)),
    ("server_time_usec", |_| some(now_usec())),
    ("uptime_in_seconds", |src| some(src.uptime)),
    ("uptime_in_days", |src| some(src.uptime / 86_400)),
    ("started_unix_time", |src| some(src.shared.started_unix)),
    ("db_dir", |src| {
        (src.shared.config.load().db_dir.as_ref()).map(|d| d.display().to_string())
    }),
    ("slow_dir", |src| {
        (src.shared.config.load().slow_dir.as_ref()).map(|d| d.display().to_string())
    }),
];

const CLIENTS: &[Field] = &[
    ("connected_clients", |src| {
        some(src.shared.clients.lock().len())
    }),
    ("maxclients", |src| {
        some(src.shared.config.load().max_clients)
    }),
    ("blocked_clients", |src| {
        some(src.shared.blocked_keys.clients.load(Relaxed))
    }),
    ("query_buffers_bytes", |src| {
        some(src.shared.stats.query_buffer_bytes.load(Relaxed))
    }),
];

const STATS: &[Field] = &[
    ("total_connections_received", |src| {
        count(&src.shared.stats.connections_received)
    }),
    ("total_commands_processed", |src| {
        count(&src.shared.stats.commands)
    }),
    ("total_net_input_bytes", |src| {
        count(&src.shared.stats.net_input_bytes)
    }),
    ("total_net_output_bytes", |src| {
        count(&src.shared.stats.net_output_bytes)
    }),
    ("rejected_connections", |src| {
        count(&src.shared.stats.connections_rejected)
    }),
    ("sync_full", |src| count(&src.shared.replication.syncs.full)),
    ("sync_partial_ok", |src| {
        count(&src.shared.replication.syncs.partial_ok)
    }),
    ("sync_partial_err", |src| {
        count(&src.shared.replication.syncs.partial_err)
    }),
    ("total_error_replies_protocol", |src| {
        count(&src.shared.stats.protocol_errors)
    }),
    ("keyspace_hits", |src| {
        count(&src.shared.stats.keyspace_hits)
    }),
    ("keyspace_misses", |src| {
        count(&src.shared.stats.keyspace_misses)
    }),
    ("instantaneous_ops_per_sec", |src| {
        some(src.shared.stats.rates().0.round() as u64)
    }),
    ("instantaneous_input_kbps", |src| {
        Some(format!("{:.2}", src.shared.stats.rates().1 / 1024.0))
    }),
    ("instantaneous_output_kbps", |src| {
        Some(format!("{:.2}", src.shared.stats.rates().2 / 1024.0))
    }),
    // tierkv never evicts a key to make room.
    ("evicted_keys", |_| some(0)),
    ("scan_cursors", |src| some(src.shared.cursors.lock().len())),
    ("tierkv_expired_hash_fields_swept", |src| {
        count(&src.shared.stats.hash_fields_swept)
    }),
];

/// A server counter's value.
fn count(c: &AtomicU64) -> Option<String> {
    some(c.load(Relaxed))
}

/// The memory section's figures, each read once: `used_memory` and its parts agree.
struct Memory<'a> {
    stats: &'a DbStats,
    /// Bytes held in connection read buffers.
    query: u64,
    /// Memtables, index and filter blocks, caches, the hotness tracker and read buffers.
    used: u64,
    /// The most `used` has been seen at.
    peak: u64,
    rss: u64,
}

impl<'a> Memory<'a> {
    fn of(src: &'a Source<'_>) -> Self {
        let stats = &src.stats;
        let query = src.shared.stats.query_buffer_bytes.load(Relaxed) as u64;
        let used = stats.memtable_bytes as u64
            + stats.table_memory as u64
            + stats.cache_total.usage as u64
            + stats.promotion.cache_bytes as u64
            + stats
                .promotion
                .ralt
                .as_ref()
                .and_then(|_| src.json.pointer("/promotion/ralt/memory_bytes"))
                .and_then(Value::as_u64)
                .unwrap_or(0)
            + query;
        let peak = src
            .shared
            .stats
            .peak_memory
            .fetch_max(used, Relaxed)
            .max(used);
        Memory {
            stats,
            query,
            used,
            peak,
            rss: rss_bytes(),
        }
    }
}

/// Folds the memory in use now into INFO's `used_memory_peak`.
pub(crate) fn note_peak_memory(shared: &Shared) {
    let stats = shared.db().stats();
    let json = serde_json::to_value(&stats).unwrap_or(Value::Null);
    let src = Source {
        shared,
        stats,
        json,
        uptime: 0,
    };
    Memory::of(&src);
}

fn memory(o: &mut String, src: &Source<'_>) -> tierkv::Result<()> {
    write_fields(o, &Memory::of(src), MEMORY);
    Ok(())
}

/// A line of the memory section (see [`Field`]).
type MemoryField = (&'static str, fn(&Memory<'_>) -> Option<String>);

const MEMORY: &[MemoryField] = &[
    ("used_memory", |m| some(m.used)),
    ("used_memory_human", |m| some(human(m.used))),
    ("used_memory_peak", |m| some(m.peak)),
    ("used_memory_peak_human", |m| some(human(m.peak))),
    ("used_memory_rss", |m| some(m.rss)),
    ("used_memory_rss_human", |m| some(human(m.rss))),
    ("memtable_bytes", |m| some(m.stats.memtable_bytes)),
    ("immutable_memtables", |m| some(m.stats.immutable_memtables)),
    ("table_index_filter_bytes", |m| some(m.stats.table_memory)),
    ("cache_bytes", |m| some(m.stats.cache_total.usage)),
    ("promotion_cache_bytes", |m| {
        some(m.stats.promotion.cache_bytes)
    }),
    ("query_buffers_bytes", |m| some(m.query)),
    ("maxmemory", |_| some(0)),
    ("maxmemory_policy", |_| some("noeviction")),
];

const PERSISTENCE: &[Field] = &[
    ("loading", |_| some(0)),
    ("wal_fsync", |src| {
        some(if src.shared.config.load().sync {
            "always"
        } else {
            "no"
        })
    }),
    ("aof_enabled", |_| some(0)),
    ("rdb_changes_since_last_save", |_| some(0)),
    ("rdb_bgsave_in_progress", |src| {
        some(src.shared.saves.in_progress() as u8)
    }),
    ("rdb_last_save_time", |src| {
        some(src.shared.saves.last_ok.load(Relaxed))
    }),
    ("rdb_last_bgsave_status", |src| {
        some(if src.shared.saves.last_failed.load(Relaxed) {
            "err"
        } else {
            "ok"
        })
    }),
    ("tierkv_checkpoints", |src| {
        some(src.shared.saves.done.load(Relaxed))
    }),
    ("tierkv_last_checkpoint", |src| {
        Some(
            src.shared
                .saves
                .last_dir
                .lock()
                .as_ref()
                .map(|d| d.display().to_string())
                .unwrap_or_default(),
        )
    }),
    ("last_sequence", |src| some(src.stats.last_sequence)),
];

/// The engine's counters INFO copies, by their names in `DbStats`.
const ENGINE: [&str; 19] = [
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
];

fn engine(o: &mut String, src: &Source<'_>) -> tierkv::Result<()> {
    for f in ENGINE {
        if let Some(v) = src.json.get(f) {
            flatten(o, f, v);
        }
    }
    Ok(())
}

const TIERS: &[Field] = &[
    ("fast_tier_bytes", |src| some(src.stats.fast_tier_bytes)),
    ("slow_tier_bytes", |src| some(src.stats.slow_tier_bytes)),
    ("fd_budget", |src| {
        some(src.stats.fd_budget.map_or("none".into(), |b| b.to_string()))
    }),
    ("fd_used_percent", |src| {
        let (used, b) = (src.stats.fast_tier_bytes, src.stats.fd_budget?);
        some(format!("{:.2}", 100.0 * used as f64 / b.max(1) as f64))
    }),
];

/// The tiers' sizes, each level's shape, and I/O by tier and cause.
fn tiers(o: &mut String, src: &Source<'_>) -> tierkv::Result<()> {
    let stats = &src.stats;
    write_fields(o, src, TIERS);
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
        for c in tier.causes.iter().filter(|c| c.read_ops + c.write_ops > 0) {
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
        let total = tier.total();
        let _ = writeln!(o, "io_{name}_read_bytes:{}", total.read_bytes);
        let _ = writeln!(o, "io_{name}_read_ops:{}", total.read_ops);
        let _ = writeln!(o, "io_{name}_write_bytes:{}", total.write_bytes);
        let _ = writeln!(o, "io_{name}_write_ops:{}", total.write_ops);
    }
    Ok(())
}

fn fd_hit_rate(o: &mut String, src: &Source<'_>) -> tierkv::Result<()> {
    let _ = writeln!(o, "fd_hit_rate:{:.4}", src.stats.fd_hit_rate);
    let _ = writeln!(o, "gets:{}", src.stats.gets);
    if let Some(g) = src.json.get("get_sources") {
        flatten(o, "get", g);
    }
    Ok(())
}

/// HotRAP's counters, without the tracker's (the RALT section has them).
fn promotion(o: &mut String, src: &Source<'_>) -> tierkv::Result<()> {
    if let Some(Value::Object(m)) = src.json.get("promotion") {
        for (k, v) in m.iter().filter(|(k, _)| *k != "ralt") {
            flatten(o, &format!("promotion_{k}"), v);
        }
    }
    Ok(())
}

fn ralt(o: &mut String, src: &Source<'_>) -> tierkv::Result<()> {
    match src.json.pointer("/promotion/ralt") {
        Some(v @ Value::Object(_)) => {
            let _ = writeln!(o, "ralt_enabled:1");
            flatten(o, "ralt", v);
        }
        _ => {
            let _ = writeln!(o, "ralt_enabled:0");
        }
    }
    Ok(())
}

/// The whole cache (KV, KP and blocks; hits and misses are the blocks'), and the table
/// cache's misses: opening a table reads its footer, filter, properties and index from disk.
const CACHES: &[Field] = &[
    ("cache_capacity", |src| some(src.stats.cache_total.capacity)),
    ("cache_usage", |src| some(src.stats.cache_total.usage)),
    ("block_cache_hits", |src| some(src.stats.cache_total.hits)),
    ("block_cache_misses", |src| {
        some(src.stats.cache_total.misses)
    }),
    ("block_cache_hit_rate", |src| {
        some(format!("{:.4}", src.stats.cache_total.hit_rate()))
    }),
    ("promotion_cache_bytes", |src| {
        some(src.stats.promotion.cache_bytes)
    }),
    ("table_opens_fast", |src| {
        some(src.stats.table_opens.fast_opens)
    }),
    ("table_open_bytes_fast", |src| {
        some(src.stats.table_opens.fast_bytes)
    }),
    ("table_opens_slow", |src| {
        some(src.stats.table_opens.slow_opens)
    }),
    ("table_open_bytes_slow", |src| {
        some(src.stats.table_opens.slow_bytes)
    }),
];

/// Redis's CPU section: seconds of CPU the server process (every thread: the event loop,
/// the blocking pool, the engine's background work) and its waited-for children used, in
/// user and system mode, from `/proc/self/stat` (Linux counts them in `USER_HZ`, 100 a
/// second on the architectures it runs user space on, so they move in steps of 10 ms).
/// Left out where that file cannot be read.
fn cpu(o: &mut String, _src: &Source<'_>) -> tierkv::Result<()> {
    let Some(t) = std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|stat| cpu_ticks(&stat))
    else {
        return Ok(());
    };
    let secs = |ticks: u64| format!("{}.{:02}", ticks / 100, ticks % 100);
    for (name, ticks) in [
        ("used_cpu_sys", t[1]),
        ("used_cpu_user", t[0]),
        ("used_cpu_sys_children", t[3]),
        ("used_cpu_user_children", t[2]),
    ] {
        let _ = writeln!(o, "{name}:{}", secs(ticks));
    }
    Ok(())
}

/// utime, stime, cutime and cstime (fields 14-17) of a `/proc/PID/stat` line; the command
/// name (field 2) is in parentheses and may hold spaces, so fields are counted from the
/// last `)`.
fn cpu_ticks(stat: &str) -> Option<[u64; 4]> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let field = |n: usize| {
        fields
            .get(n - 3)?
            .parse::<i64>()
            .ok()
            .map(|v| v.max(0) as u64)
    };
    Some([field(14)?, field(15)?, field(16)?, field(17)?])
}

/// tierkv keeps no key count: DBSIZE and this section count keys with a full scan that is
/// reused for a while, so the figure is approximate.
fn keyspace(o: &mut String, src: &Source<'_>) -> tierkv::Result<()> {
    let (n, age) = src.shared.key_count(crate::state::CountReuse::MaxAge(
        crate::state::INFO_KEYS_MAX_AGE,
    ))?;
    let _ = writeln!(o, "keys_approximate:1");
    let _ = writeln!(o, "keys_counted_seconds_ago:{}", age.as_secs());
    if n.keys > 0 {
        let _ = writeln!(o, "db0:keys={},expires={},avg_ttl=0", n.keys, n.expiring);
    }
    Ok(())
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
    use crate::client::ClientInfo;
    use crate::config::ServerConfig;
    use crate::state::{ConnState, ServerStats};
    use std::collections::VecDeque;
    use std::path::Path;

    /// `tierkv::testing::assert_golden` over this crate's `tests/golden`.
    fn assert_golden(name: &str, got: &str) {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden");
        tierkv::testing::assert_golden(&dir, name, got);
    }

    /// The CPU fields are read after the command name, which may hold spaces and
    /// parentheses; a short or garbled line gives none.
    #[test]
    fn cpu_ticks_are_counted_from_the_last_parenthesis() {
        let stat = "4242 (tierkv (serve) x) S 1 4242 4242 0 -1 4194560 100 0 0 0 \
                    1234 567 89 10 20 0 9 0 100 2000000 500";
        assert_eq!(cpu_ticks(stat), Some([1234, 567, 89, 10]));
        assert_eq!(cpu_ticks("4242 (x) S 1 2"), None);
        assert_eq!(cpu_ticks("no parenthesis"), None);
    }

    /// Fields whose values differ from run to run or machine to machine (time, process,
    /// platform, version, resident memory), shown as `*`; every other byte is compared.
    const VOLATILE: &[&str] = &[
        "tierkv_version",
        "os",
        "arch_bits",
        "process_id",
        "run_id",
        "master_replid",
        "server_time_usec",
        "uptime_in_seconds",
        "started_unix_time",
        "used_memory_rss",
        "used_memory_rss_human",
        "used_memory_peak",
        "used_memory_peak_human",
        "instantaneous_ops_per_sec",
        "instantaneous_input_kbps",
        "instantaneous_output_kbps",
        "keys_counted_seconds_ago",
        "rdb_last_save_time",
        "used_cpu_sys",
        "used_cpu_user",
        "used_cpu_sys_children",
        "used_cpu_user_children",
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
        let config = ServerConfig {
            db_dir: Some("/data/fast".into()),
            slow_dir: two_tiers.then(|| "/data/slow".into()),
            sync: two_tiers,
            ..Default::default()
        };
        let shared = Shared::for_test(db, config);
        let info = ClientInfo::for_test(1);
        shared.clients.lock().insert(1, info.clone());
        let mut conn = ConnState::new(info, true);
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
        shared.db().flush().unwrap();
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
