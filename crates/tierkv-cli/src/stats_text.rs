//! The text report of `tierkv stats`: what the store holds and what this process counted,
//! as tables of lines over `tierkv::DbStats` (`--json` prints the statistics themselves).

use std::io::Write;
use tierkv::DbStats;

/// Bytes in binary units with one decimal (`512 B`, `1.5 KiB`, `3.2 GiB`): the text report
/// is read by people; `--json` keeps the raw byte counts.
fn human(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut v = bytes as f64 / 1024.0;
    let mut unit = 0;
    // Move up while the one-decimal figure would print as 1024.0 or more.
    while v >= 1023.95 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    format!("{v:.1} {}", UNITS[unit])
}

/// [`human`] for in-memory sizes.
fn human_usize(bytes: usize) -> String {
    human(u64::try_from(bytes).unwrap_or(u64::MAX))
}

/// One entry of the report.
enum Line {
    /// `  label: value`; `None` leaves the line out (a figure with nothing to show).
    Field(&'static str, fn(&DbStats) -> Option<String>),
    /// Lines the entry lays out itself: a table, or a line per level, tier or component.
    Lines(fn(&DbStats) -> Vec<String>),
}

use Line::{Field, Lines};

/// What the store holds: persisted, so the same after a restart.
const STORE: &[Line] = &[
    Field("keys", |s| {
        Some(format!(
            "about {} (entries in tables and memtables less tombstones; versions not yet compacted count once each)",
            s.estimated_keys
        ))
    }),
    Field("last sequence number", |s| {
        Some(s.last_sequence.to_string())
    }),
    Field("tiers", |s| {
        Some(format!(
            "fast {}{}, slow {}",
            human(s.fast_tier_bytes),
            s.fd_budget
                .map(|b| format!(" (budget {})", human(b)))
                .unwrap_or_default(),
            human(s.slow_tier_bytes)
        ))
    }),
    Field("slow tier", |s| {
        (s.slow_tier_dirty_tables > 0).then(|| {
            format!(
                "{} tables with dirty blocks, {} of them, space amplification {:.2}x",
                s.slow_tier_dirty_tables,
                human(s.slow_tier_dirty_bytes),
                s.slow_tier_space_amp
            )
        })
    }),
    Lines(levels),
];

/// The levels' shape. "sized" is what the target is compared with: the size less
/// semi-sorted tables' garbage and key lists.
fn levels(s: &DbStats) -> Vec<String> {
    let head = format!(
        "  {:<6} {:<5} {:>6} {:>11} {:>11} {:>11}",
        "level", "tier", "files", "size", "sized", "target"
    );
    let rows = s.levels.iter().map(|l| {
        format!(
            "  L{:<5} {:<5} {:>6} {:>11} {:>11} {:>11}",
            l.level,
            l.tier.name(),
            l.files,
            human(l.bytes),
            human(l.sized_bytes),
            if l.level == 0 {
                "-".to_string() // L0 is triggered by its file count
            } else {
                human(l.target_bytes)
            }
        )
    });
    std::iter::once(head).chain(rows).collect()
}

/// What this process counted since it opened the store.
const PROCESS: &[Line] = &[
    Field("writes", |s| {
        Some(format!(
            "{} puts, {} deletes, {} of keys and values, {} batches in {} WAL groups",
            s.puts,
            s.deletes,
            human(s.user_bytes_written),
            s.write_batches,
            s.write_groups
        ))
    }),
    Field("gets", |s| {
        let g = &s.get_sources;
        Some(format!(
            "{} (memtable {}, block cache {}, fast disk {}, slow disk {}, not found {}); FD hit rate {:.1}%",
            s.gets, g.memtable, g.block_cache, g.fast, g.slow, g.not_found, s.fd_hit_rate * 100.0
        ))
    }),
    Field("fast-disk record cache", |s| {
        s.record_cache.map(|r| {
            format!(
                "{} in {} records (room {}), {} gets served; {} of {} offered admitted, {} evicted, {} kept; {} written; {} of memory; {} errors",
                human(r.bytes),
                r.entries,
                human(r.room),
                r.hits,
                r.admitted,
                r.offered,
                r.evicted,
                r.kept,
                human(r.written_bytes),
                human(r.memory_bytes),
                r.errors
            )
        })
    }),
    Field("flushes", |s| {
        Some(format!(
            "{} ({} written, {} shadowed versions dropped); compactions: {} ({} trivial moves), read {}, wrote {}",
            s.flushes,
            human(s.flush_bytes_written),
            s.flush_entries_dropped,
            s.compactions,
            s.trivial_moves,
            human(s.compaction_bytes_read),
            human(s.compaction_bytes_written)
        ))
    }),
    Field("compaction blocks", |s| {
        Some(format!(
            "{} reused as stored ({}), {} re-encoded ({})",
            s.compaction_blocks_reused,
            human(s.compaction_bytes_reused),
            s.compaction_blocks_rewritten,
            human(s.compaction_bytes_rewritten)
        ))
    }),
    Field("preemptive pushdown", |s| {
        (s.compaction_pushdown_bytes > 0).then(|| {
            format!(
                "{} written below the output level",
                human(s.compaction_pushdown_bytes)
            )
        })
    }),
    Lines(|s| {
        let compacted = s
            .levels
            .iter()
            .filter(|l| l.compaction_read_bytes + l.compaction_write_bytes > 0);
        compacted
            .map(|l| {
                format!(
                    "    compactions out of L{}: read {}, wrote {}",
                    l.level,
                    human(l.compaction_read_bytes),
                    human(l.compaction_write_bytes)
                )
            })
            .collect()
    }),
    Lines(background_io),
    Field("write stalls", |s| {
        Some(format!(
            "{} ({:.1} ms), slowdowns: {}",
            s.write_stalls,
            s.write_stall_micros as f64 / 1000.0,
            s.write_slowdowns
        ))
    }),
    Lines(io_by_cause),
    Field("table opens (table cache misses)", |s| {
        let t = &s.table_opens;
        Some(format!(
            "fast {} ({} read), slow {} ({} read)",
            t.fast_opens,
            human(t.fast_bytes),
            t.slow_opens,
            human(t.slow_bytes)
        ))
    }),
    Lines(cache),
    Lines(memory),
];

/// Background reads and writes on each tier, per byte users wrote.
fn background_io(s: &DbStats) -> Vec<String> {
    let per_user = |x: Option<f64>| x.map_or("-".to_string(), |x| format!("{x:.2}"));
    [tierkv::Tier::Fast, tierkv::Tier::Slow]
        .into_iter()
        .map(|tier| {
            let io = s.background_io(tier);
            format!(
                "  background I/O on {} (flush, compaction, promotion, tracker): read {} ({} per user byte), wrote {} (write amplification {})",
                tier.name(),
                human(io.read_bytes),
                per_user(s.read_amplification(tier)),
                human(io.write_bytes),
                per_user(s.write_amplification(tier))
            )
        })
        .collect()
}

/// I/O by tier and cause, one line per cause that did any.
fn io_by_cause(s: &DbStats) -> Vec<String> {
    let mut lines =
        vec!["  I/O by tier and cause (read size / ops, write size / ops):".to_string()];
    for (name, tier) in [("fast", &s.io.fast), ("slow", &s.io.slow)] {
        for c in tier.causes.iter().filter(|c| c.read_ops + c.write_ops > 0) {
            lines.push(format!(
                "    {name:<5} {:<11} {:>11} / {:<9} {:>11} / {}",
                c.cause.name(),
                human(c.read_bytes),
                c.read_ops,
                human(c.write_bytes),
                c.write_ops
            ));
        }
    }
    lines
}

/// The cache as a whole, then each of its components.
fn cache(s: &DbStats) -> Vec<String> {
    let (c, g) = (&s.cache, &s.get_sources);
    let whole = format!(
        "  cache ({}): {} of {}, ghosts {} ({}); gets from KV {}, from KP {}",
        c.mode,
        human_usize(c.usage),
        human_usize(c.capacity),
        if c.ghosts_on { "on" } else { "off" },
        human_usize(c.ghost_bytes),
        g.kv_cache,
        g.kp_cache
    );
    let parts = [("KV", &c.kv), ("KP", &c.kp), ("block", &c.block)].map(|(name, x)| {
        format!(
            "    {name}: {} in {} entries (target {}), hit rate {:.1}%, ghost hits {}",
            human_usize(x.bytes),
            x.entries,
            human_usize(x.target),
            x.hit_rate * 100.0,
            x.ghost_hits
        )
    });
    std::iter::once(whole).chain(parts).collect()
}

/// Memory as a whole against the budget, then each component against its limit.
fn memory(s: &DbStats) -> Vec<String> {
    let m = &s.memory;
    let whole = format!(
        "  memory: {}{}",
        human_usize(m.total_bytes),
        m.budget
            .map(|b| format!(" of a budget of {}", human_usize(b)))
            .unwrap_or_else(|| " (no memory budget: each component has its own limit)".into())
    );
    let parts = [
        ("memtables", &m.memtables),
        ("cache", &m.cache),
        ("index and filter blocks", &m.tables),
        ("promotion cache", &m.promotion_cache),
        ("hotness tracker", &m.tracker),
    ]
    .map(|(name, c)| {
        format!(
            "    {name}: {} (limit {})",
            human_usize(c.bytes),
            c.limit.map_or("none".to_string(), human_usize)
        )
    });
    std::iter::once(whole).chain(parts).collect()
}

/// Writes `lines` of the report.
fn write_lines(out: &mut impl Write, s: &DbStats, lines: &[Line]) -> std::io::Result<()> {
    for line in lines {
        match line {
            Field(label, value) => {
                if let Some(v) = value(s) {
                    writeln!(out, "  {label}: {v}")?;
                }
            }
            Lines(laid_out) => {
                for l in laid_out(s) {
                    writeln!(out, "{l}")?;
                }
            }
        }
    }
    Ok(())
}

/// The text report of `tierkv stats`, in two parts: what the store holds (persisted, so
/// the same after a restart) and what this process counted since it opened the store (for
/// `tierkv stats` itself, only what opening did, such as replaying the WAL; a long-running
/// process reports the same figures through `INFO` in `tierkv serve`).
pub fn print_stats(out: &mut impl Write, s: &DbStats) -> std::io::Result<()> {
    writeln!(out, "store (persisted: the same across restarts)")?;
    write_lines(out, s, STORE)?;
    writeln!(out)?;
    writeln!(
        out,
        "this process (counted since the store was opened; reset by every restart)"
    )?;
    write_lines(out, s, PROCESS)
}

#[cfg(test)]
mod tests {
    use super::{human, print_stats};
    use std::path::Path;

    /// `tierkv::testing::assert_golden` over this crate's `tests/golden`.
    fn assert_golden(name: &str, got: &str) {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden");
        tierkv::testing::assert_golden(&dir, name, got);
    }

    /// A two-tier store's statistics with every figure the text report shows set to a
    /// distinct value, and the optional lines present. Starts from a real store's, so a
    /// figure the engine adds later needs no change here.
    fn full_stats(dir: &Path) -> tierkv::DbStats {
        let db = tierkv::Db::open(
            dir.join("fast"),
            tierkv::Options {
                fd_budget: Some(64 << 20),
                slow: Some(tierkv::SlowTier {
                    dir: dir.join("slow"),
                    budget: None,
                    device: tierkv::DeviceProfile::none(),
                }),
                ..Default::default()
            },
        )
        .unwrap();
        let mut s = db.stats();
        db.close().unwrap();
        (s.estimated_keys, s.last_sequence) = (123_456, 200_001);
        (s.fast_tier_bytes, s.fd_budget, s.slow_tier_bytes) = (40 << 20, Some(64 << 20), 3 << 30);
        (s.slow_tier_dirty_tables, s.slow_tier_dirty_bytes) = (3, 5 << 20);
        s.slow_tier_space_amp = 1.25;
        // Four levels, two on each tier, whatever the engine's default shape.
        s.levels.truncate(4);
        for (i, l) in s.levels.iter_mut().enumerate() {
            l.tier = if i < 2 {
                tierkv::Tier::Fast
            } else {
                tierkv::Tier::Slow
            };
            let i = i as u64;
            l.files = 2 * i as usize + 1;
            (l.bytes, l.sized_bytes) = ((i + 1) << 20, (i + 1) << 19);
            l.target_bytes = (i + 2) << 22;
            // Levels without compactions have no line of their own.
            let n = if i % 2 == 1 { i << 18 } else { 0 };
            (l.compaction_read_bytes, l.compaction_write_bytes) = (n, n / 2);
        }
        (s.puts, s.deletes, s.user_bytes_written) = (1000, 20, 3 << 20);
        (s.write_batches, s.write_groups, s.gets) = (900, 450, 5000);
        let g = &mut s.get_sources;
        (g.memtable, g.block_cache, g.fast, g.slow, g.not_found) = (100, 200, 3000, 1500, 200);
        (g.kv_cache, g.kp_cache) = (40, 60);
        s.fd_hit_rate = 0.6667;
        (s.flushes, s.flush_bytes_written, s.flush_entries_dropped) = (12, 24 << 20, 7);
        (s.compactions, s.trivial_moves) = (30, 4);
        (s.compaction_bytes_read, s.compaction_bytes_written) = (100 << 20, 90 << 20);
        (s.compaction_blocks_reused, s.compaction_bytes_reused) = (800, 3 << 20);
        (s.compaction_blocks_rewritten, s.compaction_bytes_rewritten) = (1200, 5 << 20);
        s.compaction_pushdown_bytes = 9 << 20;
        (s.write_stalls, s.write_stall_micros, s.write_slowdowns) = (3, 4567, 8);
        for (tier, k) in [(&mut s.io.fast, 1), (&mut s.io.slow, 3)] {
            for c in &mut tier.causes {
                // Causes without I/O have no line; a cause the engine adds later has none.
                let i = match c.cause.name() {
                    "flush" => k,
                    "compaction" => k + 1,
                    "wal" if k == 1 => 5,
                    _ => 0,
                };
                (c.read_bytes, c.read_ops) = (i << 20, i * 10);
                (c.write_bytes, c.write_ops) = (i << 21, i * 7);
            }
        }
        let t = &mut s.table_opens;
        (t.fast_opens, t.fast_bytes, t.slow_opens, t.slow_bytes) = (5, 6 << 10, 7, 8 << 10);
        let c = &mut s.cache;
        c.mode = "adaptive".into();
        (c.usage, c.capacity, c.ghosts_on, c.ghost_bytes) = (7 << 20, 8 << 20, true, 4096);
        for (i, x) in [&mut c.kv, &mut c.kp, &mut c.block].into_iter().enumerate() {
            (x.bytes, x.entries, x.target) = ((i + 1) << 20, 100 * (i + 1), (i + 2) << 20);
            (x.hit_rate, x.ghost_hits) = (0.125 * (i + 1) as f64, 11 * i as u64);
        }
        let m = &mut s.memory;
        (m.total_bytes, m.budget) = (30 << 20, Some(32 << 20));
        for (i, c) in [
            &mut m.memtables,
            &mut m.cache,
            &mut m.tables,
            &mut m.promotion_cache,
            &mut m.tracker,
        ]
        .into_iter()
        .enumerate()
        {
            (c.bytes, c.limit) = ((i + 1) << 20, (i != 3).then_some((i + 2) << 20));
        }
        s
    }

    #[test]
    fn the_stats_report_is_unchanged() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = full_stats(dir.path());
        let mut out = Vec::new();
        print_stats(&mut out, &s).unwrap();
        assert_golden("stats_full.txt", &String::from_utf8(out).unwrap());
        // The other side of each optional figure.
        (
            s.fd_budget,
            s.slow_tier_dirty_tables,
            s.compaction_pushdown_bytes,
        ) = (None, 0, 0);
        s.user_bytes_written = 0;
        (s.cache.ghosts_on, s.memory.budget) = (false, None);
        for l in &mut s.levels {
            (l.compaction_read_bytes, l.compaction_write_bytes) = (0, 0);
        }
        let mut out = Vec::new();
        print_stats(&mut out, &s).unwrap();
        assert_golden("stats_sparse.txt", &String::from_utf8(out).unwrap());
    }

    #[test]
    fn sizes_print_in_binary_units_with_one_decimal() {
        assert_eq!(human(0), "0 B");
        assert_eq!(human(1023), "1023 B");
        assert_eq!(human(1024), "1.0 KiB");
        assert_eq!(human(1536), "1.5 KiB");
        assert_eq!(human(5 << 20), "5.0 MiB");
        // Just below 1 MiB rounds up to the next unit rather than "1024.0 KiB".
        assert_eq!(human((1 << 20) - 1), "1.0 MiB");
        assert_eq!(human(3 << 30), "3.0 GiB");
        assert_eq!(human(u64::MAX), "16384.0 PiB");
    }
}
