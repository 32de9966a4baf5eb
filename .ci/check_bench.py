#!/usr/bin/env python3
"""Checks a `tierkv bench` results.json: every requested system is present with every stable
field, and the numbers are sane. Exits non-zero with one line per problem otherwise.

Usage: python3 .ci/check_bench.py OUT/results.json
"""
import json
import math
import sys

# Fields every system reports (results.json layout version 1).
NUMBER_FIELDS = ["throughput_ops", "p50_us", "p99_us", "p999_us"]
RATE_FIELDS = ["fd_hit_rate"]
BYTE_FIELDS = [
    "sd_read_bytes",
    "fd_read_bytes",
    "sd_write_bytes",
    "fd_write_bytes",
    "promoted_bytes",
    "retained_bytes",
]
TIMELINE_FIELDS = ["t_s", "ops_per_sec", "fd_hit_rate"]


def is_number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def check(doc):
    problems = []
    if not isinstance(doc, dict):
        return ["results.json is not a JSON object"]
    config = doc.get("config")
    systems = doc.get("systems")
    if not isinstance(config, dict):
        problems.append("missing 'config' object")
        config = {}
    if not isinstance(systems, list) or not systems:
        return problems + ["missing or empty 'systems' list"]
    requested = config.get("systems")
    if not isinstance(requested, list) or not requested:
        problems.append("config.systems (the requested systems) is missing or empty")
        requested = []
    by_name = {}
    for i, s in enumerate(systems):
        if not isinstance(s, dict) or not isinstance(s.get("name"), str):
            problems.append(f"systems[{i}] has no name")
            continue
        by_name[s["name"]] = s
    for name in requested:
        if name not in by_name:
            problems.append(f"{name}: requested but missing from results")
    for name, s in by_name.items():
        unavailable = set(s.get("unavailable") or [])

        def field(f):
            if f not in s:
                problems.append(f"{name}: missing field {f}")
                return None
            v = s[f]
            if v is None:
                if f not in unavailable:
                    problems.append(f"{name}: {f} is null but not listed as unavailable")
                return None
            if not is_number(v):
                problems.append(f"{name}: {f} = {v!r} is not a finite number")
                return None
            return v

        tp = field("throughput_ops")
        if tp is not None and tp <= 0:
            problems.append(f"{name}: throughput_ops = {tp} is not positive")
        for f in RATE_FIELDS:
            v = field(f)
            if v is not None and not 0 <= v <= 1:
                problems.append(f"{name}: {f} = {v} is outside [0, 1]")
        lat = [field(f) for f in ["p50_us", "p99_us", "p999_us"]]
        if all(v is not None for v in lat):
            if any(v < 0 for v in lat):
                problems.append(f"{name}: negative latency {lat}")
            if not lat[0] <= lat[1] <= lat[2]:
                problems.append(f"{name}: latencies not ordered: p50 {lat[0]} p99 {lat[1]} p999 {lat[2]}")
        for f in BYTE_FIELDS:
            v = field(f)
            if v is not None and v < 0:
                problems.append(f"{name}: {f} = {v} is negative")
        timeline = s.get("timeline")
        if not isinstance(timeline, list) or not timeline:
            problems.append(f"{name}: timeline is missing or empty")
        else:
            for j, p in enumerate(timeline):
                if not isinstance(p, dict) or any(k not in p for k in TIMELINE_FIELDS):
                    problems.append(f"{name}: timeline[{j}] lacks one of {TIMELINE_FIELDS}")
                    break
                if not is_number(p["ops_per_sec"]) or p["ops_per_sec"] < 0:
                    problems.append(f"{name}: timeline[{j}].ops_per_sec = {p['ops_per_sec']!r}")
                    break
                r = p["fd_hit_rate"]
                if r is not None and (not is_number(r) or not 0 <= r <= 1):
                    problems.append(f"{name}: timeline[{j}].fd_hit_rate = {r!r}")
                    break
    return problems


def main(argv):
    if len(argv) != 2:
        print("usage: check_bench.py RESULTS_JSON", file=sys.stderr)
        return 2
    path = argv[1]
    try:
        with open(path) as f:
            doc = json.load(f)
    except OSError as e:
        print(f"check_bench: cannot read {path}: {e}", file=sys.stderr)
        return 1
    except json.JSONDecodeError as e:
        print(f"check_bench: {path} is not valid JSON: {e}", file=sys.stderr)
        return 1
    problems = check(doc)
    if problems:
        print(f"check_bench: {path}: {len(problems)} problem(s):", file=sys.stderr)
        for p in problems:
            print(f"  - {p}", file=sys.stderr)
        return 1
    names = ", ".join(
        f"{s['name']} {s['throughput_ops']:.0f} ops/s" for s in doc["systems"]
    )
    print(f"check_bench: OK ({len(doc['systems'])} systems: {names})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
