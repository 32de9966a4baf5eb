#!/usr/bin/env python3
"""Failover under Redis Sentinel: a tierkv primary, two tierkv replicas, three
redis-sentinel processes, on loopback (docs/DEPLOYMENT.md, "Failover under Sentinel").

A client writes through redis-py's Sentinel client, each SET followed by WAIT 1 (a write
counts as acknowledged when WAIT answers 1 or more). Each round kills the primary with
kill -9, measures the time until Sentinel names a new primary and until the client's
next acknowledged write, then restarts the killed server (as it was: a primary, which
Sentinel turns into a replica of the new one). At the end every key's value on the
final primary must be its last acknowledged value, or the value of a write made after
it (a write applied but not acknowledged may survive); the replicas must hold the same.

Prints one markdown table (a row per round) and exits 1 if an acknowledged write was
lost or a failover took longer than down-after-milliseconds + --slack seconds.

Usage: failover.py --tierkv BIN --out DIR [--rounds N] [--down-after MS] [--base-port P]
"""

import argparse
import os
import signal
import subprocess
import sys
import threading
import time

import redis
from redis.sentinel import Sentinel

MASTER = "mymaster"


def wait_until(what, cond, timeout=120.0, step=0.05):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            if cond():
                return
        except (redis.RedisError, OSError):
            pass
        time.sleep(step)
    raise SystemExit(f"failover: {what}: not reached in {timeout:.0f} s")


def info(port, section="replication"):
    return redis.Redis(port=port, socket_timeout=2).info(section)


class Node:
    """One tierkv server: its directories, config file and process."""

    def __init__(self, tierkv, out, port):
        self.tierkv, self.port = tierkv, port
        self.dir = os.path.join(out, f"node-{port}")
        os.makedirs(os.path.join(self.dir, "slow"), exist_ok=True)
        self.conf = os.path.join(self.dir, "tierkv.conf")
        self.proc = None

    def start(self, replicaof=None):
        args = [self.tierkv, "serve", "--db", os.path.join(self.dir, "fast"),
                "--slow-dir", os.path.join(self.dir, "slow"), "--fd-budget", "64MiB",
                "--port", str(self.port), "--config", self.conf, "--timeout", "0"]
        if replicaof:
            args += ["--replicaof", f"127.0.0.1 {replicaof}"]
        log = open(os.path.join(self.dir, "server.log"), "a")
        self.proc = subprocess.Popen(args, stdout=log, stderr=log)
        wait_until(f"server {self.port} answering",
                   lambda: redis.Redis(port=self.port, socket_timeout=1).ping())

    def kill(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.kill()


def start_sentinel(out, port, primary_port, down_after, failover_timeout):
    d = os.path.join(out, f"sentinel-{port}")
    os.makedirs(d, exist_ok=True)
    conf = os.path.join(d, "sentinel.conf")
    with open(conf, "w") as f:
        f.write(f"port {port}\nbind 127.0.0.1\ndir {d}\n"
                f"sentinel monitor {MASTER} 127.0.0.1 {primary_port} 2\n"
                f"sentinel down-after-milliseconds {MASTER} {down_after}\n"
                f"sentinel failover-timeout {MASTER} {failover_timeout}\n"
                f"sentinel parallel-syncs {MASTER} 2\n")
    log = open(os.path.join(d, "sentinel.log"), "a")
    return subprocess.Popen(["redis-sentinel", conf], stdout=log, stderr=log)


class Writer(threading.Thread):
    """Writes unique values to 500 keys through Sentinel, each followed by WAIT 1."""

    def __init__(self, sentinel):
        super().__init__(daemon=True)
        self.sentinel = sentinel
        self.stop = threading.Event()
        self.acked = {}        # key -> last acknowledged value
        self.after = {}        # key -> values written after it (acknowledged or not)
        self.last_ack = 0.0    # monotonic time of the last acknowledged write
        self.acks = 0
        self.errors = 0

    def run(self):
        n = 0
        master = self.sentinel.master_for(MASTER, socket_timeout=1.0)
        while not self.stop.is_set():
            n += 1
            key, value = f"k{n % 500}", str(n)
            self.after.setdefault(key, []).append(value)
            try:
                master.set(key, value)
                if master.execute_command("WAIT", 1, 1000) >= 1:
                    self.acked[key] = value
                    self.after[key] = []
                    self.last_ack = time.monotonic()
                    self.acks += 1
            except (redis.RedisError, OSError):
                self.errors += 1
                time.sleep(0.05)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tierkv", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--down-after", type=int, default=1000)
    ap.add_argument("--slack", type=float, default=10.0,
                    help="seconds a failover may take beyond down-after-milliseconds")
    ap.add_argument("--base-port", type=int, default=7400)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    failover_timeout = 3000
    ports = [a.base_port + i for i in range(3)]
    nodes = {p: Node(a.tierkv, a.out, p) for p in ports}
    sentinels = []
    writer = None
    rows, failed = [], []
    try:
        nodes[ports[0]].start()
        for p in ports[1:]:
            nodes[p].start(replicaof=ports[0])
        for p in ports[1:]:
            wait_until(f"replica {p} linked",
                       lambda p=p: info(p)["master_link_status"] == "up")
        sentinel_ports = [a.base_port + 20000 + i for i in range(3)]
        sentinels = [start_sentinel(a.out, sp, ports[0], a.down_after, failover_timeout)
                     for sp in sentinel_ports]
        for sp in sentinel_ports:
            s = redis.Redis(port=sp, socket_timeout=1)
            wait_until(f"sentinel {sp} sees both replicas and the other sentinels",
                       lambda s=s: len(s.sentinel_slaves(MASTER)) == 2
                       and len(s.sentinel_sentinels(MASTER)) == 2)
        sentinel = Sentinel([("127.0.0.1", sp) for sp in sentinel_ports],
                            socket_timeout=1.0)
        writer = Writer(sentinel)
        writer.start()
        wait_until("first acknowledged write", lambda: writer.acks > 0)
        last_failover = 0.0
        for r in range(1, a.rounds + 1):
            # Sentinel will not fail the same master over again within twice the
            # failover timeout of its last attempt.
            time.sleep(max(2.0, 2 * failover_timeout / 1000 + 1 - (time.monotonic() - last_failover)))
            host, old = sentinel.discover_master(MASTER)
            acks_before = writer.acks
            nodes[old].kill()
            killed = time.monotonic()
            wait_until(f"round {r}: a new primary",
                       lambda: sentinel.discover_master(MASTER)[1] != old, timeout=60)
            promoted = time.monotonic() - killed
            wait_until(f"round {r}: an acknowledged write on the new primary",
                       lambda: writer.last_ack > killed, timeout=60)
            resumed = writer.last_ack - killed
            last_failover = time.monotonic()
            # The killed server comes back as it was (a primary); Sentinel makes it a
            # replica of the primary it names then (Sentinel may have failed over again
            # meanwhile), which gives it a copy.
            nodes[old].start()
            wait_until(f"round {r}: server {old} back as a replica",
                       lambda: info(old)["role"] == "slave"
                       and info(old)["master_port"] == sentinel.discover_master(MASTER)[1]
                       and info(old)["master_link_status"] == "up", timeout=120)
            new = sentinel.discover_master(MASTER)[1]
            limit = a.down_after / 1000 + a.slack
            ok = promoted <= limit
            if not ok:
                failed.append(f"round {r}: failover took {promoted:.1f} s (limit {limit:.1f} s)")
            rows.append((r, old, new, promoted, resumed, writer.acks - acks_before, ok))
        writer.stop.set()
        writer.join()
        _, final = sentinel.discover_master(MASTER)
        # Sentinel reconfigures the replica it did not promote after the failover, and a
        # reconfigured replica may need a full copy: both must be linked to the final
        # primary before WAIT can count them.
        for p in ports:
            if p != final:
                wait_until(f"server {p} an up replica of the final primary {final}",
                           lambda p=p: info(p)["role"] == "slave"
                           and info(p)["master_port"] == final
                           and info(p)["master_link_status"] == "up", timeout=120)
        # The socket outlives WAIT's own 10 s timeout, so WAIT's answer is always read.
        m = redis.Redis(port=final, socket_timeout=30)
        total = m.execute_command("WAIT", 2, 10000)
        lost = []
        for key, value in writer.acked.items():
            got = m.get(key)
            got = got.decode() if got is not None else None
            if got != value and got not in writer.after.get(key, []):
                lost.append((key, value, got))
        replicas_differ = 0
        for p in ports:
            if p == final:
                continue
            rc = redis.Redis(port=p, socket_timeout=5)
            for key in writer.acked:
                if rc.get(key) != m.get(key):
                    replicas_differ += 1
        print(f"| round | killed | promoted | failover s | first acked write after kill s | acked writes in round | within limit |")
        print(f"|--:|--:|--:|--:|--:|--:|:-:|")
        for r, old, new, promoted, resumed, acks, ok in rows:
            print(f"| {r} | {old} | {new} | {promoted:.2f} | {resumed:.2f} | {acks} | {'yes' if ok else 'NO'} |")
        print()
        print(f"acknowledged writes: {writer.acks}; keys checked: {len(writer.acked)}; "
              f"acknowledged values lost: {len(lost)}; replica keys differing from the "
              f"primary: {replicas_differ} (replicas acknowledging at the end: {total}); "
              f"client errors while failing over: {writer.errors}")
        if lost:
            failed.append(f"{len(lost)} acknowledged writes lost, e.g. {lost[:5]}")
        if total < 2:
            failed.append(f"WAIT 2 10000 on the final primary answered {total}: a linked "
                          "replica did not acknowledge within 10 s")
        if replicas_differ:
            failed.append(f"{replicas_differ} keys differ on a replica")
    finally:
        if writer:
            writer.stop.set()
        for s in sentinels:
            s.terminate()
        for n in nodes.values():
            n.stop()
    if failed:
        print("FAILED: " + "; ".join(failed))
        sys.exit(1)


if __name__ == "__main__":
    main()
