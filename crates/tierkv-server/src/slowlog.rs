//! The slow log (SLOWLOG) and the latency monitor (LATENCY): what the dispatcher records
//! about each command that took long, as Redis keeps them. Owns the records and their
//! bounds; the thresholds are configuration (`slowlog-log-slower-than`,
//! `slowlog-max-len`, `latency-monitor-threshold`), read at each record.

use crate::client::ClientInfo;
use crate::config::ServerConfig;
use bytes::Bytes;
use parking_lot::Mutex;
use std::collections::VecDeque;
use std::time::Duration;

/// Arguments an entry keeps (the last kept one says how many more there were).
const MAX_ARGS: usize = 32;
/// Bytes an argument keeps (the rest is summarised).
const MAX_ARG_BYTES: usize = 128;
/// Samples the latency monitor keeps per event (Redis's).
const LATENCY_SAMPLES: usize = 160;
/// The latency monitor's one event: a command's run.
pub(crate) const COMMAND_EVENT: &str = "command";

/// One slow log entry.
pub(crate) struct Entry {
    pub id: u64,
    pub unix_secs: u64,
    pub micros: u64,
    pub args: Vec<Bytes>,
    pub addr: String,
    pub name: String,
}

#[derive(Default)]
struct SlowLog {
    next_id: u64,
    /// Newest first.
    entries: VecDeque<Entry>,
}

/// The latency monitor's record of one event.
#[derive(Default)]
struct Event {
    /// (unix seconds, milliseconds), oldest first.
    samples: VecDeque<(u64, u64)>,
    max_ms: u64,
}

/// What LATENCY LATEST reports for an event.
pub(crate) struct Latest {
    pub unix_secs: u64,
    pub latest_ms: u64,
    pub max_ms: u64,
}

/// The slow log and the latency monitor.
#[derive(Default)]
pub(crate) struct Monitor {
    slow: Mutex<SlowLog>,
    command: Mutex<Option<Event>>,
}

fn unix_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The arguments as an entry keeps them.
fn kept_args(args: &[Bytes]) -> Vec<Bytes> {
    let mut out: Vec<Bytes> = Vec::with_capacity(args.len().min(MAX_ARGS));
    for (i, a) in args.iter().enumerate() {
        if i == MAX_ARGS - 1 && args.len() > MAX_ARGS {
            let more = args.len() - i;
            out.push(Bytes::from(format!("... ({more} more arguments)")));
            break;
        }
        if a.len() > MAX_ARG_BYTES {
            let mut v = a[..MAX_ARG_BYTES].to_vec();
            v.extend_from_slice(format!("... ({} more bytes)", a.len() - MAX_ARG_BYTES).as_bytes());
            out.push(Bytes::from(v));
        } else {
            out.push(a.clone());
        }
    }
    out
}

impl Monitor {
    /// Records a command that took `took`, in the slow log and the latency monitor when it
    /// passes their thresholds.
    pub fn record(
        &self,
        config: &ServerConfig,
        client: &ClientInfo,
        args: &[Bytes],
        took: Duration,
    ) {
        let micros = took.as_micros().min(u64::MAX as u128) as u64;
        let slower_than = config.slowlog_slower_than_us;
        if slower_than >= 0 && micros >= slower_than as u64 && config.slowlog_max_len > 0 {
            let mut log = self.slow.lock();
            let id = log.next_id;
            log.next_id += 1;
            log.entries.push_front(Entry {
                id,
                unix_secs: unix_secs(),
                micros,
                args: kept_args(args),
                addr: client.addr.to_string(),
                name: client.name.lock().clone().unwrap_or_default(),
            });
            log.entries.truncate(config.slowlog_max_len);
        }
        let ms = micros / 1000;
        let threshold = config.latency_threshold_ms;
        if threshold > 0 && ms >= threshold {
            let mut ev = self.command.lock();
            let ev = ev.get_or_insert_with(Event::default);
            let now = unix_secs();
            // One sample per second, the largest (as Redis).
            match ev.samples.back_mut() {
                Some((t, m)) if *t == now => *m = (*m).max(ms),
                _ => ev.samples.push_back((now, ms)),
            }
            if ev.samples.len() > LATENCY_SAMPLES {
                ev.samples.pop_front();
            }
            ev.max_ms = ev.max_ms.max(ms);
        }
    }

    /// The newest `count` slow log entries (all for None), newest first, through `f`.
    pub fn slow_entries<T>(&self, count: Option<usize>, f: impl FnOnce(&[&Entry]) -> T) -> T {
        let log = self.slow.lock();
        let n = count.unwrap_or(usize::MAX).min(log.entries.len());
        let entries: Vec<&Entry> = log.entries.iter().take(n).collect();
        f(&entries)
    }

    pub fn slow_len(&self) -> usize {
        self.slow.lock().entries.len()
    }

    pub fn slow_reset(&self) {
        self.slow.lock().entries.clear();
    }

    /// LATENCY LATEST's line for the command event, if it happened.
    pub fn latest(&self) -> Option<Latest> {
        let ev = self.command.lock();
        let ev = ev.as_ref()?;
        let &(unix_secs, latest_ms) = ev.samples.back()?;
        Some(Latest {
            unix_secs,
            latest_ms,
            max_ms: ev.max_ms,
        })
    }

    /// LATENCY HISTORY of the command event: (unix seconds, ms), oldest first.
    pub fn history(&self) -> Vec<(u64, u64)> {
        self.command
            .lock()
            .as_ref()
            .map(|e| e.samples.iter().copied().collect())
            .unwrap_or_default()
    }

    /// LATENCY RESET: forgets the command event; the number of events reset.
    pub fn reset_latency(&self) -> usize {
        self.command.lock().take().is_some() as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_keep_bounded_arguments_and_the_newest() {
        let m = Monitor::default();
        let config = ServerConfig {
            slowlog_slower_than_us: 1000,
            slowlog_max_len: 2,
            latency_threshold_ms: 5,
            ..ServerConfig::default()
        };
        let c = ClientInfo::for_test(1);
        let long = Bytes::from(vec![b'x'; 200]);
        let many: Vec<Bytes> = (0..40).map(|i| Bytes::from(i.to_string())).collect();
        m.record(
            &config,
            &c,
            &[Bytes::from("GET"), long],
            Duration::from_millis(2),
        );
        m.record(&config, &c, &many, Duration::from_millis(3));
        m.record(
            &config,
            &c,
            &[Bytes::from("FAST")],
            Duration::from_micros(999),
        );
        m.record(
            &config,
            &c,
            &[Bytes::from("SLOW")],
            Duration::from_millis(7),
        );
        m.slow_entries(None, |e| {
            assert_eq!(e.len(), 2, "slowlog-max-len bounds the log");
            assert_eq!(e[0].args[0], "SLOW");
            assert_eq!(
                (e[0].id, e[1].id),
                (2, 1),
                "newest first; FAST was not logged"
            );
            assert_eq!(e[1].args.len(), MAX_ARGS);
            assert_eq!(e[1].args[MAX_ARGS - 1], "... (9 more arguments)");
        });
        m.slow_reset();
        m.record(
            &config,
            &c,
            &[Bytes::from("GET"), Bytes::from(vec![b'y'; 200])],
            Duration::from_millis(2),
        );
        m.slow_entries(Some(1), |e| {
            assert!(e[0].args[1].ends_with(b"... (72 more bytes)"));
        });
        let l = m.latest().unwrap();
        assert_eq!(
            (l.latest_ms, l.max_ms),
            (7, 7),
            "only 7 ms passed the 5 ms threshold"
        );
        assert_eq!(m.history().len(), 1);
        assert_eq!(m.reset_latency(), 1);
        assert!(m.latest().is_none());
    }
}
