#!/usr/bin/env python3
"""Replication under load (issue 50): a write-heavy mix through the primary at full speed,
alternately without and with a replica attached.

The mix is two redis-benchmark processes run together against the primary, one SETting
and one GETting random keys of a key space (`-r`), pipelined (YCSB A's half reads, half
updates; uniform keys, redis-benchmark has no zipfian). Phases alternate: no replica,
replica, no replica, replica (the replica is started before its phase and caught up, and
shut down after it). Every phase starts from the same state: a replica's full copy is a
checkpoint, which flushes the primary's memtables, so a phase without one makes the same
checkpoint with SAVE. Reported: the primary's requests per second in each phase, its CPU
time per request (INFO cpu: on this 2-core machine the replica competes with the primary
for the same cores, so the primary's own CPU cost of serving a replica is the figure that
carries to a replica on another machine), and the replica's lag while it is attached,
sampled every 100 ms: how long ago the primary was at the replica's current offset (0
when caught up), its median, p99 and maximum.

Usage: replication_load.py --tierkv BIN --out DIR [--keys N] [--requests N] [--phases LIST]
                           [--pin] [--replica-root DIR] [--warmup N]

--phases: which phases have a replica, comma-separated yes/no (default no,yes,no,yes);
a balanced order such as no,yes,yes,no,no,yes keeps the compaction debt one phase leaves
to the next from favouring either side.

--pin: a replica on a machine of its own, emulated on this one by CPU affinity. The primary
and the benchmark clients run on CPU 0 in every phase, the replica (and this script) on
CPU 1, so a replica takes none of the primary's CPU and the throughput ratio is the
primary's own cost of serving it (plus what the two share: the disk, the memory bus).
--replica-root DIR puts the replica's store on another file system, e.g. one on a
RAM-backed loop device, so that it does not share the primary's disk either
(docs/bench/replication.md shows how).
"""

import argparse
import os
import subprocess
import threading
import time

import redis


PRIMARY_CPU, REPLICA_CPU = "0", "1"


def pinned(a, cpu, args):
    """`args` run on CPU `cpu` alone when --pin is given."""
    return ["taskset", "-c", cpu] + args if a.pin else args


def start(a, name, port, replicaof=None):
    d = os.path.join(a.replica_root if replicaof and a.replica_root else a.out, name)
    os.makedirs(os.path.join(d, "slow"), exist_ok=True)
    args = [a.tierkv, "serve", "--db", os.path.join(d, "fast"), "--slow-dir",
            os.path.join(d, "slow"), "--fd-budget", a.fd_budget, "--port", str(port),
            "--timeout", "0"]
    if replicaof:
        args += ["--replicaof", f"127.0.0.1 {replicaof}"]
    args = pinned(a, REPLICA_CPU if replicaof else PRIMARY_CPU, args)
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


def mix(a, port, requests=None):
    """The SET and GET benchmarks together; returns requests per second."""
    requests = requests or a.requests
    common = ["redis-benchmark", "-p", str(port), "-n", str(requests // 2), "-r",
              str(a.keys), "-P", "16", "-c", "4", "-d", "100", "-q"]
    t = time.monotonic()
    procs = [subprocess.Popen(pinned(a, PRIMARY_CPU, common + ["-t", t_]),
                              stdout=subprocess.DEVNULL)
             for t_ in ("set", "get")]
    for p in procs:
        p.wait()
    return requests / (time.monotonic() - t)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tierkv", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--keys", type=int, default=1_000_000)
    ap.add_argument("--requests", type=int, default=2_000_000)
    ap.add_argument("--fd-budget", default="64MiB")
    ap.add_argument("--base-port", type=int, default=7700)
    ap.add_argument("--phases", default="no,yes,no,yes")
    ap.add_argument("--pin", action="store_true",
                    help="primary and clients on CPU 0, the replica on CPU 1")
    ap.add_argument("--warmup", type=int, default=0,
                    help="requests of an uncounted phase without a replica before the first")
    ap.add_argument("--replica-root",
                    help="where the replica's store goes (default: under --out), e.g. a "
                         "file system on another disk")
    a = ap.parse_args()
    if a.pin:
        if (os.cpu_count() or 1) < 2:
            ap.error("--pin needs two CPUs")
        os.sched_setaffinity(0, {int(REPLICA_CPU)})
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
        # The first phase after the load runs on a store with no compaction debt yet, a
        # state it never returns to (1.3-2.1x the later phases' throughput); --warmup runs it
        # first, without a replica, and leaves it out.
        if a.warmup:
            mix(a, pp, a.warmup)
        full_syncs = int(pc.info("stats")["sync_full"])
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
            # Every phase starts from the same state: a replica's full copy is a
            # checkpoint, which flushes the primary's memtables (and gets then find less in
            # memory for a while); a phase without one (or with a partial resync) makes the
            # same checkpoint with SAVE.
            if int(pc.info("stats")["sync_full"]) == full_syncs:
                pc.execute_command("SAVE")
            full_syncs = int(pc.info("stats")["sync_full"])
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
              f"pipelined 16, 4+4 connections), fast-disk budget {a.fd_budget}"
              + (f", an uncounted phase of {a.warmup} requests first" if a.warmup else "")
              + (", primary and clients on CPU 0, replica on CPU 1" if a.pin else ""))
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
