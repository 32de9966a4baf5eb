//! The process's resident memory, to check a system against its memory budget: the current
//! and peak resident set size from `/proc/self/status`, a reset of the peak through
//! `/proc/self/clear_refs` (Linux), and a trim of the allocator's free memory between
//! systems so one system's freed heap is not charged to the next. Also the process's file
//! I/O in bytes (`/proc/self/io`), for systems that cannot count their own, and its CPU
//! time (`/proc/self/stat`).

use serde::Serialize;

/// Resident set sizes in bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Rss {
    /// Resident now (`VmRSS`).
    pub current: u64,
    /// The highest since the process started or the last [`reset_peak`] (`VmHWM`).
    pub peak: u64,
    /// Of `current`: anonymous memory (`RssAnon`: heap, stacks), without the pages of the
    /// binary and libraries (`RssFile`), which the kernel can drop and reload.
    pub anon: u64,
}

/// Reads `VmRSS` and `VmHWM`; `None` where `/proc` is missing (not Linux).
pub fn read() -> Option<Rss> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    parse_status(&status)
}

/// The two figures from the text of `/proc/self/status` (values in kB).
pub fn parse_status(status: &str) -> Option<Rss> {
    let field = |name: &str| -> Option<u64> {
        let line = status.lines().find(|l| l.starts_with(name))?;
        let kb: u64 = line[name.len()..]
            .trim()
            .trim_end_matches("kB")
            .trim()
            .parse()
            .ok()?;
        Some(kb * 1024)
    };
    Some(Rss {
        current: field("VmRSS:")?,
        peak: field("VmHWM:")?,
        // Kernels before 4.5 do not split RSS; count it all as anonymous there.
        anon: field("RssAnon:").or_else(|| field("VmRSS:"))?,
    })
}

/// Bytes the process moved through read and write system calls (files, pipes, `/proc`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ProcessIo {
    /// `rchar`: bytes returned by read system calls.
    pub read_bytes: u64,
    /// `wchar`: bytes passed to write system calls.
    pub write_bytes: u64,
}

/// Reads `/proc/self/io`; `None` where it is missing (not Linux).
pub fn process_io() -> Option<ProcessIo> {
    parse_io(&std::fs::read_to_string("/proc/self/io").ok()?)
}

/// The two counters from the text of `/proc/self/io`.
pub fn parse_io(text: &str) -> Option<ProcessIo> {
    let field = |name: &str| -> Option<u64> {
        let line = text.lines().find(|l| l.starts_with(name))?;
        line[name.len()..].trim().parse().ok()
    };
    Some(ProcessIo {
        read_bytes: field("rchar:")?,
        write_bytes: field("wchar:")?,
    })
}

/// CPU seconds the whole process (every thread: clients and the store's background work)
/// has used, user and system; `None` where `/proc/self/stat` is missing (not Linux).
/// Resolution 10 ms.
pub fn cpu_seconds() -> Option<f64> {
    parse_cpu_seconds(&std::fs::read_to_string("/proc/self/stat").ok()?)
}

/// `utime + stime` from the text of `/proc/<pid>/stat`, in seconds. Both count clock
/// ticks of `USER_HZ`, which Linux fixes at 100 for every architecture it exports to
/// user space.
pub fn parse_cpu_seconds(stat: &str) -> Option<f64> {
    // The command name (field 2) is in parentheses and may hold spaces: count fields from
    // the last ')'. utime and stime are fields 14 and 15, the 12th and 13th after it.
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some((utime + stime) as f64 / 100.0)
}

/// Resets the peak to the current resident size (Linux 4.0+: writing 5 to
/// `/proc/self/clear_refs`). Returns whether it worked; without it the peak covers the
/// whole process lifetime.
pub fn reset_peak() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// Hands the allocator's free memory back to the kernel, so that the next system's peak
/// starts from what is really in use. The `tierkv` binary allocates with mimalloc, which
/// returns freed pages only after a delay unless collected; glibc (this crate's tests, other
/// embedders) keeps freed blocks in its arenas (one per thread, up to 8 per core) until a
/// trim. Both are asked: the one not in use has nothing to give back.
pub fn release_free_memory() {
    #[allow(unsafe_code, reason = "mimalloc's collect has no safe binding")]
    // SAFETY: mi_collect(force) frees mimalloc's own unused pages and segments of this
    // thread and the abandoned ones; it takes no pointers from us and may be called at any
    // time from any thread (it is a no-op for memory mimalloc never handed out).
    unsafe {
        libmimalloc_sys::mi_collect(true);
    }
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[allow(unsafe_code, reason = "glibc's malloc_trim has no safe binding")]
    // SAFETY: malloc_trim only walks glibc's own arenas under their locks and releases free
    // pages; it takes no pointers from us and is safe to call at any time from any thread.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_proc_status() {
        let text = "Name:\tbench\nVmPeak:\t  900 kB\nVmHWM:\t    2048 kB\nVmRSS:\t    1024 kB\n\
                    RssAnon:\t     512 kB\n";
        assert_eq!(
            parse_status(text),
            Some(Rss {
                current: 1 << 20,
                peak: 2 << 20,
                anon: 1 << 19,
            })
        );
        assert_eq!(parse_status("VmRSS: 12 kB\n"), None);
        assert_eq!(parse_status("VmRSS: x kB\nVmHWM: 1 kB\n"), None);
    }

    #[test]
    fn parses_proc_io() {
        let text = "rchar: 4096\nwchar: 123\nsyscr: 5\nread_bytes: 0\n";
        assert_eq!(
            parse_io(text),
            Some(ProcessIo {
                read_bytes: 4096,
                write_bytes: 123,
            })
        );
        assert_eq!(parse_io("rchar: 1\n"), None);
    }

    #[test]
    fn parses_proc_stat_cpu() {
        // A command name with spaces and a ')' must not shift the fields.
        let stat = "1234 (a b) c) S 1 1234 1234 0 -1 4194560 500 0 0 0 250 75 0 0 20 0 9 0";
        assert_eq!(parse_cpu_seconds(stat), Some(3.25));
        assert_eq!(parse_cpu_seconds("1234 (x) S 1 2"), None);
        assert_eq!(parse_cpu_seconds("no parenthesis"), None);
    }

    #[test]
    fn reads_this_process_on_linux() {
        if let Some(c) = cpu_seconds() {
            // Spinning is counted: spin until the process's CPU time grew by 20 ms (two
            // ticks), not for a span of wall time, which a loaded machine may not give this
            // thread the CPU for. The deadline only ends a count that never moves.
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
            while cpu_seconds().unwrap() < c + 0.02 {
                assert!(
                    std::time::Instant::now() < deadline,
                    "a minute of spinning never counted 20 ms of CPU"
                );
                for i in 0..10_000u64 {
                    std::hint::black_box(i);
                }
            }
        }
        if let Some(r) = read() {
            assert!(r.current > 0 && r.peak >= r.current / 2, "{r:?}");
            release_free_memory();
            if reset_peak() {
                let after = read().unwrap();
                // The peak restarts near the current size (threads may allocate meanwhile).
                assert!(after.peak <= r.peak.max(after.current) * 2, "{after:?}");
            }
        }
    }
}
