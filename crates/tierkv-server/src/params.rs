//! The configuration as Redis names it: one table of parameters (name, how to show the
//! value, how to set it, whether it can change while serving) behind CONFIG GET, CONFIG
//! SET, CONFIG REWRITE and the config file `tierkv serve --config FILE` reads (Redis's
//! `redis.conf` syntax: one `name value` per line, `#` comments, quoted values).
//!
//! Owns the names and the parsing of values; the settings themselves and their validation
//! are `config::ServerConfig`'s. A change applies to the whole server at once (CONFIG SET
//! swaps in a new `ServerConfig`); the request limits (`proto-max-bulk-len`,
//! `client-query-buffer-limit`, `tierkv-max-key`, `tierkv-max-args`) apply to connections
//! opened after the change, whose parser takes them when it starts.

use crate::config::ServerConfig;
use std::path::Path;
use std::sync::OnceLock;
use std::time::Duration;

/// Why a parameter could not be set (Redis's text follows "CONFIG SET failed ... - ").
pub type SetError = String;

type Getter = fn(&ServerConfig) -> String;
type Setter = fn(&mut ServerConfig, &str) -> Result<(), SetError>;

/// One parameter.
pub struct Param {
    /// Redis's name (tierkv's own start with `tierkv-`).
    pub name: &'static str,
    get: Getter,
    /// None: shown only (fixed by the build or by the store's command line).
    set: Option<Setter>,
    /// Can change while serving (otherwise only in the config file, at startup).
    pub runtime: bool,
    /// The `tierkv serve` flag that sets it too (the command line wins over the file).
    pub flag: Option<&'static str>,
}

macro_rules! param {
    ($name:literal, $get:expr) => {
        Param {
            name: $name,
            get: $get,
            set: None,
            runtime: false,
            flag: None,
        }
    };
    ($name:literal, $get:expr, $set:expr, $runtime:expr, $flag:expr) => {
        Param {
            name: $name,
            get: $get,
            set: Some($set),
            runtime: $runtime,
            flag: $flag,
        }
    };
}

fn yes_no(b: bool) -> String {
    if b { "yes" } else { "no" }.into()
}

fn parse_yes_no(v: &str) -> Result<bool, SetError> {
    match v.to_ascii_lowercase().as_str() {
        "yes" => Ok(true),
        "no" => Ok(false),
        _ => Err("argument must be 'yes' or 'no'".into()),
    }
}

fn parse_int<T: std::str::FromStr>(v: &str) -> Result<T, SetError> {
    v.trim()
        .parse()
        .map_err(|_| "argument couldn't be parsed into an integer".into())
}

/// A memory size as Redis writes them: a number with an optional unit (`k` = 1000, `kb` =
/// 1024, `m`, `mb`, `g`, `gb`; case-insensitive).
pub fn parse_memory(v: &str) -> Result<usize, SetError> {
    let v = v.trim().to_ascii_lowercase();
    let digits = v.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let mul: u64 = match &v[digits.len()..] {
        "" | "b" => 1,
        "k" => 1000,
        "kb" => 1024,
        "m" => 1000 * 1000,
        "mb" => 1024 * 1024,
        "g" => 1000 * 1000 * 1000,
        "gb" => 1024 * 1024 * 1024,
        _ => return Err("argument must be a memory value".into()),
    };
    let n: u64 = digits
        .parse()
        .map_err(|_| SetError::from("argument must be a memory value"))?;
    n.checked_mul(mul)
        .and_then(|b| usize::try_from(b).ok())
        .ok_or_else(|| "argument must be a memory value".into())
}

/// `replicaof`'s value: `host port`, or empty / `no one` for none.
pub fn parse_replicaof(v: &str) -> Result<Option<(String, u16)>, SetError> {
    let words: Vec<&str> = v.split_whitespace().collect();
    match words.as_slice() {
        [] => Ok(None),
        [no, one] if no.eq_ignore_ascii_case("no") && one.eq_ignore_ascii_case("one") => Ok(None),
        [host, port] => {
            let port: u16 = port
                .parse()
                .ok()
                .filter(|&p| p > 0)
                .ok_or_else(|| SetError::from("Invalid master port"))?;
            Ok(Some((host.to_string(), port)))
        }
        _ => Err("argument must be 'host port' or 'no one'".into()),
    }
}

/// Redis's log levels, and what tierkv's log filter shows for each.
const LOG_LEVELS: [(&str, &str); 5] = [
    ("debug", "debug"),
    ("verbose", "info"),
    ("notice", "info"),
    ("warning", "warn"),
    ("nothing", "off"),
];

/// What applies a log level to the process's logger: set once by the program that owns
/// the logger (`tierkv serve`), given the filter directive (`debug`, `info`, `warn`,
/// `off`). Without it `loglevel` can still be read and set, and changes nothing.
pub type LogLevelHook = Box<dyn Fn(&str) -> Result<(), String> + Send + Sync>;

static LOG_LEVEL_HOOK: OnceLock<LogLevelHook> = OnceLock::new();

/// Installs the [`LogLevelHook`] (the first call wins).
pub fn set_log_level_hook(hook: LogLevelHook) {
    let _ = LOG_LEVEL_HOOK.set(hook);
}

/// Applies `level` (a Redis name, already checked) through the hook, if any.
pub fn apply_log_level(level: &str) -> Result<(), String> {
    let directive = LOG_LEVELS
        .iter()
        .find(|(name, _)| *name == level)
        .map_or("warn", |(_, d)| *d);
    match LOG_LEVEL_HOOK.get() {
        Some(hook) => hook(directive),
        None => Ok(()),
    }
}

/// A device model as `tierkv serve --slow-device` takes it: a preset's name, or
/// `custom:IOPS:MIBPS:LATENCY_US` (0: unlimited).
pub fn device_text(p: tierkv::DeviceProfile) -> String {
    use tierkv::DeviceProfile as D;
    for (name, preset) in [
        ("none", D::none()),
        ("gp3", D::gp3()),
        ("gp3-max", D::gp3_max()),
        ("hdd", D::hdd()),
    ] {
        if p == preset {
            return name.into();
        }
    }
    format!(
        "custom:{}:{}:{}",
        p.iops.unwrap_or(0),
        p.bandwidth.map_or(0, |b| b >> 20),
        p.latency_us
    )
}

fn dir_of(p: &Option<std::path::PathBuf>) -> String {
    p.as_ref()
        .map(|d| d.display().to_string())
        .unwrap_or_default()
}

/// Every parameter, in CONFIG GET's order.
pub static PARAMS: &[Param] = &[
    param!(
        "bind",
        |c| c.bind.to_string(),
        |c, v| {
            let mut addrs = v.split_whitespace();
            let first = addrs.next().ok_or("argument must be an address")?;
            if addrs.next().is_some() {
                return Err("tierkv listens on one address".into());
            }
            c.bind = first
                .trim_start_matches('-')
                .parse()
                .map_err(|_| format!("{first:?} is not an IP address"))?;
            Ok(())
        },
        false,
        Some("bind")
    ),
    param!(
        "port",
        |c| c.port.to_string(),
        |c, v| {
            c.port = parse_int(v)?;
            Ok(())
        },
        false,
        Some("port")
    ),
    param!(
        "requirepass",
        |c| c.requirepass.clone().unwrap_or_default(),
        |c, v| {
            c.requirepass = (!v.is_empty()).then(|| v.to_string());
            Ok(())
        },
        true,
        Some("requirepass")
    ),
    param!(
        "timeout",
        |c| c.idle_timeout.map_or(0, |t| t.as_secs()).to_string(),
        |c, v| {
            let secs: u64 = parse_int(v)?;
            c.idle_timeout = (secs > 0).then(|| Duration::from_secs(secs));
            Ok(())
        },
        true,
        Some("timeout")
    ),
    param!(
        "maxclients",
        |c| c.max_clients.to_string(),
        |c, v| {
            c.max_clients = parse_int(v)?;
            Ok(())
        },
        true,
        Some("max_clients")
    ),
    param!(
        "appendfsync",
        |c| if c.sync { "always" } else { "no" }.into(),
        |c, v| {
            c.sync = match v.to_ascii_lowercase().as_str() {
                "always" => true,
                // Without --sync the WAL is written at once and synced by the engine's
                // own schedule; nothing like `everysec` in between is offered.
                "no" | "everysec" => false,
                _ => return Err("argument must be 'always', 'everysec' or 'no'".into()),
            };
            Ok(())
        },
        true,
        Some("sync")
    ),
    param!(
        "tierkv-sync",
        |c| yes_no(c.sync),
        |c, v| {
            c.sync = parse_yes_no(v)?;
            Ok(())
        },
        true,
        Some("sync")
    ),
    // Every write goes through the engine's write-ahead log.
    param!("appendonly", |_| "yes".into()),
    param!("databases", |_| "1".into()),
    param!("save", |_| String::new()),
    param!("maxmemory", |_| "0".into()),
    param!("maxmemory-policy", |_| "noeviction".into()),
    param!("tcp-keepalive", |_| "0".into()),
    param!(
        "proto-max-bulk-len",
        |c| c.limits.max_bulk.to_string(),
        |c, v| {
            c.limits.max_bulk = parse_memory(v)?;
            Ok(())
        },
        true,
        Some("max_bulk")
    ),
    param!(
        "client-query-buffer-limit",
        |c| c.limits.max_query.to_string(),
        |c, v| {
            c.limits.max_query = parse_memory(v)?;
            Ok(())
        },
        true,
        Some("max_query_buffer")
    ),
    param!(
        "client-output-buffer-limit",
        |c| format!("normal {} {} 0", c.output_limit, c.output_limit),
        |c, v| {
            // Classes in groups of four: class hard soft seconds; tierkv has only normal
            // clients, whose hard limit is the one it keeps (0 there: the largest).
            let words: Vec<&str> = v.split_whitespace().collect();
            if words.is_empty() || !words.len().is_multiple_of(4) {
                return Err("wrong number of arguments".into());
            }
            for group in words.chunks(4) {
                match group[0].to_ascii_lowercase().as_str() {
                    "normal" => {
                        let hard = parse_memory(group[1])?;
                        parse_memory(group[2])?;
                        parse_int::<u64>(group[3])?;
                        c.output_limit = if hard == 0 {
                            crate::config::MAX_SIZE_LIMIT
                        } else {
                            hard
                        };
                    }
                    "replica" | "slave" | "pubsub" => {}
                    other => return Err(format!("invalid client class {other:?}")),
                }
            }
            Ok(())
        },
        true,
        Some("client_output_limit")
    ),
    param!(
        "tierkv-max-key",
        |c| c.limits.max_key.to_string(),
        |c, v| {
            c.limits.max_key = parse_memory(v)?;
            Ok(())
        },
        true,
        Some("max_key")
    ),
    param!(
        "tierkv-max-args",
        |c| c.limits.max_args.to_string(),
        |c, v| {
            c.limits.max_args = parse_int(v)?;
            Ok(())
        },
        true,
        Some("max_args")
    ),
    param!(
        "tierkv-reply-chunk",
        |c| c.reply_chunk.to_string(),
        |c, v| {
            c.reply_chunk = parse_memory(v)?;
            Ok(())
        },
        true,
        Some("reply_chunk")
    ),
    param!(
        "slowlog-log-slower-than",
        |c| c.slowlog_slower_than_us.to_string(),
        |c, v| {
            c.slowlog_slower_than_us = parse_int(v)?;
            Ok(())
        },
        true,
        None
    ),
    param!(
        "slowlog-max-len",
        |c| c.slowlog_max_len.to_string(),
        |c, v| {
            c.slowlog_max_len = parse_int(v)?;
            Ok(())
        },
        true,
        None
    ),
    param!(
        "latency-monitor-threshold",
        |c| c.latency_threshold_ms.to_string(),
        |c, v| {
            c.latency_threshold_ms = parse_int(v)?;
            Ok(())
        },
        true,
        None
    ),
    param!(
        "loglevel",
        |c| c.log_level.clone(),
        |c, v| {
            let v = v.to_ascii_lowercase();
            if !LOG_LEVELS.iter().any(|(name, _)| *name == v) {
                return Err(
                    "argument(s) must be one of the following: debug, verbose, notice, \
                     warning, nothing"
                        .into(),
                );
            }
            c.log_level = v;
            Ok(())
        },
        true,
        None
    ),
    param!(
        "tierkv-checkpoint-dir",
        |c| dir_of(&c.checkpoint_dir),
        |c, v| {
            c.checkpoint_dir = (!v.is_empty()).then(|| v.into());
            Ok(())
        },
        true,
        None
    ),
    param!(
        "tierkv-checkpoint-slow-dir",
        |c| dir_of(&c.checkpoint_slow_dir),
        |c, v| {
            c.checkpoint_slow_dir = (!v.is_empty()).then(|| v.into());
            Ok(())
        },
        true,
        None
    ),
    param!(
        "tierkv-checkpoint-keep",
        |c| c.checkpoint_keep.to_string(),
        |c, v| {
            c.checkpoint_keep = parse_int(v)?;
            Ok(())
        },
        true,
        None
    ),
    param!(
        "tierkv-cache-size",
        |c| c.cache_size.map(|b| b.to_string()).unwrap_or_default(),
        |c, v| {
            c.cache_size = Some(parse_memory(v)?);
            Ok(())
        },
        true,
        Some("cache_size")
    ),
    param!(
        "tierkv-slow-device",
        |c| c.slow_device.map(device_text).unwrap_or_default(),
        |c, v| {
            c.slow_device = Some(v.parse().map_err(|e: tierkv::Error| e.to_string())?);
            Ok(())
        },
        true,
        Some("slow_device")
    ),
    param!(
        "replicaof",
        |c| c
            .replicaof
            .as_ref()
            .map(|(h, p)| format!("{h} {p}"))
            .unwrap_or_default(),
        |c, v| {
            c.replicaof = parse_replicaof(v)?;
            Ok(())
        },
        false,
        Some("replicaof")
    ),
    param!(
        "masterauth",
        |c| c.masterauth.clone().unwrap_or_default(),
        |c, v| {
            c.masterauth = (!v.is_empty()).then(|| v.to_string());
            Ok(())
        },
        true,
        Some("masterauth")
    ),
    param!(
        "repl-backlog-size",
        |c| c.repl_backlog_size.to_string(),
        |c, v| {
            c.repl_backlog_size = parse_memory(v)?;
            Ok(())
        },
        false,
        Some("repl_backlog_size")
    ),
    param!(
        "repl-timeout",
        |c| c.repl_timeout.as_secs().to_string(),
        |c, v| {
            let secs: u64 = parse_int(v)?;
            if secs == 0 {
                return Err("argument must be between 1 and 2147483647 inclusive".into());
            }
            c.repl_timeout = Duration::from_secs(secs);
            Ok(())
        },
        true,
        None
    ),
    param!(
        "replica-priority",
        |c| c.replica_priority.to_string(),
        |c, v| {
            c.replica_priority = parse_int(v)?;
            Ok(())
        },
        true,
        None
    ),
    param!(
        "tierkv-repl-hotness",
        |c| yes_no(c.repl_mirror_hotness),
        |c, v| {
            c.repl_mirror_hotness = parse_yes_no(v)?;
            Ok(())
        },
        true,
        None
    ),
    param!("replica-read-only", |_| "yes".into()),
    param!("dir", |c| dir_of(&c.db_dir)),
    param!("tierkv-slow-dir", |c| dir_of(&c.slow_dir)),
    // The thresholds OBJECT ENCODING reports against (Redis 7.0's defaults).
    param!("hash-max-listpack-entries", |_| "128".into()),
    param!("hash-max-listpack-value", |_| "64".into()),
    param!("set-max-intset-entries", |_| "512".into()),
    param!("zset-max-listpack-entries", |_| "128".into()),
    param!("zset-max-listpack-value", |_| "64".into()),
    param!("list-max-listpack-size", |_| "-2".into()),
];

/// The parameter named `name` (case-insensitive).
pub fn find(name: &str) -> Option<&'static Param> {
    // Redis's older names of the replication settings.
    let name = match name.to_ascii_lowercase().as_str() {
        "slaveof" => "replicaof",
        "slave-priority" => "replica-priority",
        "slave-read-only" => "replica-read-only",
        _ => name,
    };
    PARAMS.iter().find(|p| p.name.eq_ignore_ascii_case(name))
}

impl Param {
    /// The value as CONFIG GET shows it.
    pub fn get(&self, c: &ServerConfig) -> String {
        (self.get)(c)
    }

    /// Sets the value in `c` (not validated as a whole: the caller validates `c`).
    pub fn set(&self, c: &mut ServerConfig, value: &str) -> Result<(), SetError> {
        match self.set {
            Some(set) => set(c, value),
            None => Err("can't set immutable config".into()),
        }
    }
}

/// Splits a config file line into words the way Redis does: whitespace-separated, with
/// double-quoted (backslash escapes) and single-quoted words. None for a malformed line.
fn split_line(line: &str) -> Option<Vec<String>> {
    let mut words = Vec::new();
    let mut chars = line.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        let Some(&first) = chars.peek() else {
            return Some(words);
        };
        let mut w = String::new();
        if first == '"' || first == '\'' {
            chars.next();
            loop {
                match chars.next()? {
                    c if c == first => break,
                    '\\' if first == '"' => match chars.next()? {
                        'n' => w.push('\n'),
                        'r' => w.push('\r'),
                        't' => w.push('\t'),
                        c => w.push(c),
                    },
                    c => w.push(c),
                }
            }
            if chars.peek().is_some_and(|c| !c.is_whitespace()) {
                return None;
            }
        } else {
            while let Some(&c) = chars.peek() {
                if c.is_whitespace() {
                    break;
                }
                w.push(c);
                chars.next();
            }
        }
        words.push(w);
    }
}

/// Quotes a value for a config file line when it needs it.
fn quote(v: &str) -> String {
    if !v.is_empty()
        && !v
            .chars()
            .any(|c| c.is_whitespace() || c == '"' || c == '\'')
    {
        return v.to_string();
    }
    let mut out = String::from("\"");
    for c in v.chars() {
        match c {
            '"' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The `(name, value)` settings of a config file's text, in order. An unknown name, a
/// shown-only one or a malformed line is an error naming the line.
pub fn parse_file(text: &str) -> Result<Vec<(&'static Param, String)>, String> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let at = i + 1;
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let words = split_line(trimmed).ok_or(format!("line {at}: unbalanced quotes"))?;
        let Some((name, values)) = words.split_first() else {
            continue;
        };
        let p = find(name).ok_or(format!("line {at}: unknown setting {name:?}"))?;
        if p.set.is_none() {
            return Err(format!(
                "line {at}: {name:?} is not set in a config file (it is fixed, or set by a \
                 `tierkv serve` flag)"
            ));
        }
        out.push((p, values.join(" ")));
    }
    Ok(out)
}

/// Applies a config file's settings to `config`, except those whose flag `on_command_line`
/// says was given (the command line wins); validates the result.
pub fn apply_file(
    config: &mut ServerConfig,
    text: &str,
    on_command_line: &dyn Fn(&str) -> bool,
) -> Result<(), String> {
    for (p, value) in parse_file(text)? {
        if p.flag.is_some_and(on_command_line) {
            continue;
        }
        p.set(config, &value)
            .map_err(|e| format!("{} {value:?}: {e}", p.name))?;
    }
    config.validate().map_err(|e| e.to_string())
}

/// CONFIG REWRITE: `path`'s text with every settable parameter's line showing the value in
/// `config` (the first line of a name is rewritten in place, later ones dropped), the
/// parameters it lacks whose value differs from the default appended, and every other
/// line (comments, blank lines) kept. Written to a temporary file, synced and renamed over
/// the old one.
pub fn rewrite_file(path: &Path, config: &ServerConfig) -> std::io::Result<()> {
    let old = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(e),
    };
    let mut written: Vec<&str> = Vec::new();
    let mut out = String::new();
    for line in old.lines() {
        let name = split_line(line.trim())
            .and_then(|w| w.first().cloned())
            .filter(|_| !line.trim().starts_with('#'));
        match name.as_deref().and_then(find) {
            Some(p) if p.set.is_some() => {
                if !written.contains(&p.name) {
                    written.push(p.name);
                    out.push_str(&format!("{} {}\n", p.name, quote(&p.get(config))));
                }
            }
            _ => {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    let defaults = ServerConfig::default();
    let mut appended = false;
    for p in PARAMS.iter().filter(|p| p.set.is_some()) {
        // appendfsync and tierkv-sync name one setting: the file keeps the one it has.
        let same_setting = p.name == "tierkv-sync" && written.contains(&"appendfsync")
            || p.name == "appendfsync" && written.contains(&"tierkv-sync");
        if written.contains(&p.name) || same_setting || p.get(config) == p.get(&defaults) {
            continue;
        }
        if !appended {
            out.push_str("# Generated by CONFIG REWRITE\n");
            appended = true;
        }
        written.push(p.name);
        out.push_str(&format!("{} {}\n", p.name, quote(&p.get(config))));
    }
    let tmp = path.with_extension("rewrite.tmp");
    {
        use std::io::Write;
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(out.as_bytes())?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, path)?;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::File::open(dir)?.sync_all()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_values_read_as_redis() {
        assert_eq!(parse_memory("100").unwrap(), 100);
        assert_eq!(parse_memory("1k").unwrap(), 1000);
        assert_eq!(parse_memory("1KB").unwrap(), 1024);
        assert_eq!(parse_memory("2gb").unwrap(), 2 << 30);
        assert!(parse_memory("1tb").is_err() && parse_memory("x").is_err());
        assert!(parse_memory("99999999999999999999gb").is_err());
    }

    #[test]
    fn lines_split_as_redis_conf() {
        assert_eq!(
            split_line(r#"requirepass "a b\"c" x"#).unwrap(),
            vec!["requirepass", "a b\"c", "x"]
        );
        assert_eq!(split_line("save ''").unwrap(), vec!["save", ""]);
        assert!(split_line("x \"open").is_none());
        assert_eq!(
            split_line(&format!("k {}", quote("a \"b\"\n"))).unwrap()[1],
            "a \"b\"\n"
        );
    }

    #[test]
    fn a_file_applies_except_what_the_command_line_set() {
        let mut c = ServerConfig::default();
        let text = "# comment\ntimeout 70\nmaxclients 50\nrequirepass \"s e\"\n";
        apply_file(&mut c, text, &|flag| flag == "max_clients").unwrap();
        assert_eq!(c.idle_timeout, Some(Duration::from_secs(70)));
        assert_eq!(c.max_clients, ServerConfig::default().max_clients);
        assert_eq!(c.requirepass.as_deref(), Some("s e"));
        for (bad, why) in [
            ("nonsense 1", "unknown setting"),
            ("databases 4", "not set in a config file"),
            ("timeout soon", "couldn't be parsed"),
            ("maxclients 0", "--max-clients"),
        ] {
            let e = apply_file(&mut ServerConfig::default(), bad, &|_| false).unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }

    #[test]
    fn rewrite_keeps_comments_and_updates_in_place() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tierkv.conf");
        std::fs::write(&path, "# mine\ntimeout 10\nunknown-to-us 1\ntimeout 20\n").unwrap();
        let c = ServerConfig {
            idle_timeout: Some(Duration::from_secs(70)),
            max_clients: 50,
            ..ServerConfig::default()
        };
        rewrite_file(&path, &c).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(
            text,
            "# mine\ntimeout 70\nunknown-to-us 1\n# Generated by CONFIG REWRITE\nmaxclients 50\n"
        );
    }
}
