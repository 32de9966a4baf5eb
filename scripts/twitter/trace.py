#!/usr/bin/env python3
"""A synthetic trace shaped like one Twitter cache cluster, for `tierkv bench --trace`.

    scripts/twitter/trace.py --cluster 17 --data-bytes 2GiB --out DIR [--ops N] [--seed S]

writes DIR/load.csv (one `set` row per record of the key space, for `--trace-load`) and
DIR/run.csv (the operations, for `--trace`), both in the Twitter cache-trace CSV format
(timestamp,key,key size,value size,client id,operation,TTL). Then:

    tierkv bench --trace DIR/run.csv --trace-load DIR/load.csv ...

The raw traces (terabytes) cannot be fetched here; the cluster's published statistics
(2020Mar-cluster-stats.md beside this file: Yang, Yue, Rashmi, OSDI 2020, CC BY 4.0) shape
the synthetic one:

- key and value size: the cluster's (every record has them; the statistics give one
  number each);
- the operation mix: get/gets are reads; set, add, replace, cas, append, prepend, incr and
  decr are writes of an existing key; delete is a delete;
- popularity: Zipf with the cluster's alpha over the cluster's working set (WSS, in records
  of that size), repeated as often as the data size needs, each copy equally popular. This
  is how the HotRAP paper scaled its Twitter traces to 110 GB: "if a trace has 40GB of
  data, we repeat each operation 3 times, e.g. INSERT user123 becomes INSERT 0user123,
  INSERT 1user123, INSERT 2user123" (section 4.3). A key's rank is spread over the key
  space by a hash, so hot keys are not neighbours;
- TTLs: none by default (kvexe, the HotRAP prototype's driver, has no expiry; pass
  --with-ttl for the cluster's most common TTL on every write).

What it leaves out: one-hit wonders, the popularity's drift over time, per-key value
sizes, and the real trace's burstiness. Say "synthetic, from cluster N's statistics" next to
any figure it produces.
"""

import argparse
import bisect
import os
import random
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
STATS = os.path.join(HERE, "2020Mar-cluster-stats.md")
WRITES = {"set", "add", "replace", "cas", "append", "prepend", "incr", "decr"}
READS = {"get", "gets"}
UNITS = {"s": 1, "h": 3600, "d": 86400}


def parse_size(s):
    m = re.fullmatch(r"([0-9.]+)\s*([KMGT]i?B?)?", s.strip(), re.I)
    if not m:
        raise argparse.ArgumentTypeError(f"bad size {s!r} (e.g. 2GiB)")
    mult = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
    unit = (m.group(2) or "")[:1].lower()
    return int(float(m.group(1)) * mult[unit])


def cluster_stats(n, path=STATS):
    """The cluster's row: key size, value size, the mix, Zipf alpha, WSS (MB), common TTL."""
    for line in open(path):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells and cells[0] == f"cluster{n}":
            if "N/A" in cells[3:5]:
                sys.exit(f"cluster {n} publishes no statistics")
            mix = {}
            for part in cells[12].split():
                op, share = part.split(":")
                mix[op] = float(share)
            ttl = 0
            first = cells[9].split(",")[0].strip()
            if first:
                m = re.fullmatch(r"([0-9.]+)([smhd])", first.split(":")[0])
                if m:
                    ttl = int(float(m.group(1)) * UNITS.get(m.group(2), 60 if m.group(2) == "m" else 1))
            wss = float(cells[10]) if cells[10] not in ("N/A", "") else 0.0
            alpha = float(cells[13]) if cells[13] not in ("NA", "N/A", "") else 0.0
            return dict(key_size=int(cells[3]), value_size=int(cells[4]), mix=mix,
                        alpha=alpha, wss_mb=wss, ttl=ttl)
    sys.exit(f"no cluster {n} in {path}")


def key_of(i, size):
    """Record i's key: printable, exactly `size` bytes, distinct for distinct i: the hex of
    a bijective 64-bit hash of i (so neighbouring ranks are far apart in key order) padded
    with 'k', or of i itself when `size` cannot hold 16 hex digits."""
    if size < 16:
        return f"{i:x}".rjust(size, "k")
    x = ((i ^ (i >> 30)) * 0xBF58476D1CE4E5B9) & (2**64 - 1)
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & (2**64 - 1)
    x ^= x >> 31
    return f"{x:016x}".rjust(size, "k")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cluster", type=int, required=True)
    ap.add_argument("--data-bytes", type=parse_size, required=True,
                    help="bytes of keys and values loaded (e.g. 2GiB)")
    ap.add_argument("--ops", type=int, help="operations [default: 2 per KiB loaded]")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--with-ttl", action="store_true",
                    help="every write carries the cluster's most common TTL")
    ap.add_argument("--stats", default=STATS)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    st = cluster_stats(a.cluster, a.stats)
    ks, vs = max(st["key_size"], 8), max(st["value_size"], 1)
    records = max(a.data_bytes // (ks + vs), 1)
    if ks < 16 and records > 16 ** ks:
        sys.exit(f"{records} records do not fit {ks}-byte hex keys")
    ops = a.ops or 2 * records * (ks + vs) // 1024
    # The working set in records, and how often it is repeated to fill the data size.
    wss = int(st["wss_mb"] * 1e6 // (ks + vs)) if st["wss_mb"] else records
    base = max(1, min(records, wss))
    copies = max(1, records // base)
    base = records // copies
    rng = random.Random(a.seed)
    alpha = st["alpha"]
    if alpha > 0:
        cdf, acc = [], 0.0
        for r in range(1, base + 1):
            acc += r ** -alpha
            cdf.append(acc)
        pick_base = lambda: bisect.bisect_left(cdf, rng.random() * acc)
    else:
        pick_base = lambda: rng.randrange(base)
    reads = sum(v for k, v in st["mix"].items() if k in READS)
    writes = sum(v for k, v in st["mix"].items() if k in WRITES)
    deletes = st["mix"].get("delete", 0.0)
    total = reads + writes + deletes
    ttl = st["ttl"] if a.with_ttl else 0
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "load.csv"), "w") as f:
        f.write(f"# cluster {a.cluster}: {records} records of {ks} + {vs} bytes "
                f"(working set {base} records x {copies} copies)\n")
        for i in range(records):
            f.write(f"0,{key_of(i, ks)},{ks},{vs},0,set,0\n")
    with open(os.path.join(a.out, "run.csv"), "w") as f:
        f.write(f"# cluster {a.cluster}: {ops} operations, reads {reads / total:.2f}, writes "
                f"{writes / total:.2f}, deletes {deletes / total:.2f}, Zipf alpha {alpha} over "
                f"{base} records x {copies} copies, seed {a.seed}\n")
        for t in range(ops):
            rank = pick_base()
            # Rank r of copy c is record r * copies + c, before the key hash spreads it.
            rec = rank * copies + rng.randrange(copies)
            x = rng.random() * total
            op = "get" if x < reads else ("set" if x < reads + writes else "delete")
            f.write(f"{t},{key_of(rec, ks)},{ks},{vs},0,{op},{ttl if op == 'set' else 0}\n")
    print(f"cluster {a.cluster}: {records} records ({records * (ks + vs) / 2**30:.2f} GiB), "
          f"{ops} operations, working set {base} x {copies} copies -> {a.out}")


if __name__ == "__main__":
    main()
