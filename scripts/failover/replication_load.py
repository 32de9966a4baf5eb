#!/usr/bin/env python3
"""Replication under load (issue 50): a write-heavy mix through the primary at full speed,
alternately without and with a replica attached.

The mix is two redis-benchmark processes run together against the primary, one SETting
and one GETting random keys of a key space (`-r`), pipelined (YCSB A's half reads, half
updates; uniform keys, redis-benchmark has no zipfian). Phases alternate: no replica,
replica, no replica, replica (the replica is started before its phase and caught up, and
shut down after it). Reported: the primary's requests per second in each phase, its CPU
time per request (INFO cpu: on this 2-core machine the replica competes with the primary
for the same cores, so the primary's own CPU cost of serving a replica is the figure that
carries to a replica on another machine), and the replica's lag while it is attached,
sampled every 100 ms: how long ago the primary was at the replica's current offset (0
when caught up), its median, p99 and maximum.

Usage: replication_load.py --tierkv BIN --out DIR [--keys N] [--requests N] [--phases LIST]

--phases: which phases have a replica, comma-separated yes/no (default no,yes,no,yes);
a balanced order such as no,yes,yes,no,no,yes keeps the compaction debt one phase leaves
to the next from favouring either side.
"""

import argparse
import os
import subprocess
import threading
import time

import redis


def start(a, name, port, replicaof=None):
    d = os.path.join(a.out, name)
    os.makedirs(os.path.join(d, "slow"), exist_ok=True)
    args = [a.tierkv, "serve", "--db", os.path.join(d, "fast"), "--slow-dir",
            os.path.join(d, "slow"), "--fd-budget", a.fd_budget, "--port", str(port),
            "--timeout", "0"]
    if replicaof:
        args += ["--replicaof", f"127.0.0.1 {replicaof}"]
    log = open(os.path.join(a.out, f"{name}.log"), "a")
    proc = subprocess.Popen(args, stdout=log, stderr=log)
    c = redis.Redis(port=port, socket_timeout=120)
    for _ in range(600):
        try:
            c.ping()
            break
        except redis.RedisError:
            time.sleep(0.1)
    return proc, c


def cpu(c):
    """The server's CPU seconds so far (user + system)."""
    i = c.info("cpu")
    return float(i["used_cpu_user"]) + float(i["used_cpu_sys"])


def offset(c, field):
    return int(c.info("replication")[field])


def mix(a, port):
    """The SET and GET benchmarks together; returns requests per second."""
    common = ["redis-benchmark", "-p", str(port), "-n", str(a.requests // 2), "-r",
              str(a.keys), "-P", "16", "-c", "4", "-d", "100", "-q"]
    t = time.monotonic()
    procs = [subprocess.Popen(common + ["-t", t_], stdout=subprocess.DEVNULL)
             for t_ in ("set", "get")]
    for p in procs:
        p.wait()
    return a.requests / (time.monotonic() - t)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tierkv", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--keys", type=int, default=1_000_000)
    ap.add_argument("--requests", type=int, default=2_000_000)
    ap.add_argument("--fd-budget", default="64MiB")
    ap.add_argument("--base-port", type=int, default=7700)
    ap.add_argument("--phases", default="no,yes,no,yes")
    a = ap.parse_args()
    words = [p.strip() for p in a.phases.split(",")]
    phases = [w == "yes" for w in words]
    if any(w not in ("yes", "no") for w in words) or all(phases) or not any(phases):
        ap.error("--phases needs yes and no phases, comma-separated")
    os.makedirs(a.out, exist_ok=True)
    pp = a.base_port
    pproc, pc = start(a, "primary", pp)
    rows = []
    lags = []
    try:
        # Fill the key space first (one pass of SETs).
        subprocess.run(["redis-benchmark", "-p", str(pp), "-n", str(a.keys), "-r",
                        str(a.keys), "-P", "16", "-c", "4", "-d", "100", "-q", "-t", "set"],
                       stdout=subprocess.DEVNULL, check=True)
        for phase, with_replica in enumerate(phases, 1):
            rproc = None
            if with_replica:
                rproc, rc = start(a, "replica", pp + 1, replicaof=pp)
                while True:
                    try:
                        if offset(rc, "slave_repl_offset") >= offset(pc, "master_repl_offset"):
                            break
                    except (redis.RedisError, KeyError):
                        pass
                    time.sleep(0.1)
                stop = threading.Event()
                history, samples = [], []

                def sample():
                    sc = redis.Redis(port=pp, socket_timeout=30)
                    rcs = redis.Redis(port=pp + 1, socket_timeout=30)
                    while not stop.is_set():
                        t = time.monotonic()
                        history.append((t, offset(sc, "master_repl_offset")))
                        o = offset(rcs, "slave_repl_offset")
                        behind = [ht for ht, ho in history if ho <= o]
                        samples.append(t - behind[-1] if behind and o < history[-1][1] else 0.0)
                        time.sleep(0.1)

                sampler = threading.Thread(target=sample, daemon=True)
                sampler.start()
            cpu0 = cpu(pc)
            rps = mix(a, pp)
            us = (cpu(pc) - cpu0) * 1e6 / a.requests
            if with_replica:
                stop.set()
                sampler.join()
                lags.extend(samples)
                rc.shutdown(nosave=True)
                rproc.wait(timeout=300)
            rows.append((phase, with_replica, rps, us))
        print(f"keys {a.keys} of 100 B, {a.requests} requests per phase (half SET, half GET, "
              f"pipelined 16, 4+4 connections), fast-disk budget {a.fd_budget}")
        print()
        print("| phase | replica | primary requests/s | primary CPU us/request |")
        print("|--:|:-:|--:|--:|")
        for phase, with_replica, rps, us in rows:
            print(f"| {phase} | {'yes' if with_replica else 'no'} | {rps:,.0f} | {us:.2f} |")
        def mean(xs):
            return sum(xs) / len(xs)
        ratio = mean([r for _, w, r, _ in rows if w]) / mean([r for _, w, r, _ in rows if not w])
        cpu_ratio = mean([u for _, w, _, u in rows if w]) / mean([u for _, w, _, u in rows if not w])
        lags.sort()
        def pct(p):
            return lags[min(len(lags) - 1, int(p * len(lags)))] if lags else 0.0
        print()
        print(f"throughput with a replica / without: {ratio:.2f}x; primary CPU per request "
              f"with / without: {cpu_ratio:.2f}x (throughput bound on separate machines "
              f"{1 / cpu_ratio:.2f}x); replica lag over "
              f"{len(lags)} samples: median {pct(0.5):.2f} s, p99 {pct(0.99):.2f} s, "
              f"max {lags[-1] if lags else 0:.2f} s")
    finally:
        try:
            pc.shutdown(nosave=True)
        except redis.RedisError:
            pass
        pproc.wait(timeout=300)


if __name__ == "__main__":
    main()
