#!/usr/bin/env python3
"""Background writes of a RocksDB peer run by output level, from its LOG.

`tierkv bench` reports a RocksDB peer's background writes from its tickers (flush + compaction
bytes, all levels together); the per-level split in `rocksdb.stats` is printed at 0.1 GB
precision. This reads the exact sizes from the EVENT_LOG lines of a LOG kept with
`tierkv bench ... --keep-data` (OUT/rocksdb-tiered/fast/LOG): flush outputs (L0) and
compaction outputs by output level, in MiB and per MiB of user writes when given.

The bench reopens the store for the run phase, so the LOG holds the run phase (and its
settling) only.

Usage: scripts/rocksdb-log-wa.py LOG [--user-mib N] [--slow-from LEVEL]
  --slow-from: first level on the slow disk (default 2: rocksdb-tiered keeps L0 and L1 on
  the fast path; see the bench's `engine_stats.placement` to confirm).
"""
import argparse
import json
import re
from collections import defaultdict


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("log")
    ap.add_argument("--user-mib", type=float)
    ap.add_argument("--slow-from", type=int, default=2)
    a = ap.parse_args()
    flush_jobs, by_level = set(), defaultdict(int)
    flush_bytes = 0
    for line in open(a.log, errors="replace"):
        m = re.search(r"EVENT_LOG_v1 (\{.*\})", line)
        if not m:
            continue
        try:
            e = json.loads(m.group(1))
        except json.JSONDecodeError:
            continue
        ev = e.get("event")
        if ev == "flush_started":
            flush_jobs.add(e.get("job"))
        elif ev == "table_file_creation" and e.get("job") in flush_jobs:
            flush_bytes += e.get("file_size", 0)
        elif ev == "compaction_finished":
            by_level[e["output_level"]] += e.get("total_output_size", 0)
    mib = 1 << 20
    rows = [("flush (L0)", flush_bytes)] + [
        (f"compaction -> L{lv}", b) for lv, b in sorted(by_level.items())
    ]
    slow = sum(b for lv, b in by_level.items() if lv >= a.slow_from)
    total = flush_bytes + sum(by_level.values())
    rows += [(f"slow tier (L{a.slow_from}+)", slow), ("total", total)]
    for name, b in rows:
        per = f"  ({b / mib / a.user_mib:.2f} per user byte)" if a.user_mib else ""
        print(f"{name:22} {b / mib:9.1f} MiB{per}")


if __name__ == "__main__":
    main()
