#!/usr/bin/env python3
"""The summary table of scripts/hyperdb/ycsb.sh: per YCSB workload, each system's
throughput and its ratio to rocksdb-tiered, the p50 / p99 / p99.9 of each operation type,
the background bytes written per tier per operation, and the read requests the slow tier's
own block device completed per operation (the same count for every engine; "-" when the
tiers share a device).

    scripts/hyperdb/summary.py OUT
"""
import json
import os
import sys

BASE = "rocksdb-tiered"


def main():
    out = sys.argv[1]
    rows, lat, ratios = [], [], {}
    for w in "abcdef":
        p = os.path.join(out, w, "results.json")
        if not os.path.exists(p):
            continue
        systems = {s["name"]: s for s in json.load(open(p))["systems"]}
        base = systems.get(BASE)
        for name, s in systems.items():
            thr = s["throughput_run_ops"]
            r = thr / base["throughput_run_ops"] if base else None
            if r is not None and name != BASE:
                ratios.setdefault(name, []).append(r)
            bg = s.get("background") or {}
            ops = max(s["ops"], 1)
            dev = s.get("sd_device_reads_per_op")
            rows.append(f"| {w.upper()} | {name} | {thr:,.0f} | "
                        + (f"{r:.2f}x" if r is not None else "-")
                        + f" | {(bg.get('fd_write_bytes') or 0) / ops:,.0f} | "
                        f"{(bg.get('sd_write_bytes') or 0) / ops:,.0f} | "
                        + (f"{dev:.3f}" if dev is not None else "-") + " |")
            for o in s.get("latency_by_op") or []:
                b = next((x for x in (base or {}).get("latency_by_op") or [] if x["op"] == o["op"]), None)
                rel = f"{o['p99_us'] / b['p99_us']:.2f}x" if b and b["p99_us"] else "-"
                lat.append(f"| {w.upper()} | {name} | {o['op']} | {o['p50_us']:,.0f} | "
                           f"{o['p99_us']:,.0f} | {o['p999_us']:,.0f} | {rel} |")
    print("| YCSB | system | ops/s (whole run) | vs rocksdb-tiered | FD bg write B/op "
          "| SD bg write B/op | SD device reads/op |")
    print("|---|---|--:|--:|--:|--:|--:|")
    print("\n".join(rows))
    for name, rs in ratios.items():
        print(f"\n{name}: mean {sum(rs) / len(rs):.2f}x {BASE} over {len(rs)} workloads "
              f"(lowest {min(rs):.2f}x).")
    print("\n| YCSB | system | operation | p50 us | p99 us | p99.9 us | p99 vs rocksdb-tiered |")
    print("|---|---|---|--:|--:|--:|--:|")
    print("\n".join(lat))


if __name__ == "__main__":
    main()
