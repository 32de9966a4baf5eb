#!/usr/bin/env python3
"""Warm failover (issue 50): does a replica, or a store restored from a checkpoint, start
with the primary's hot set on its fast disk?

A two-tier primary holds N records of 1,000-byte values on a fast-disk budget of about
1/11 of the data; clients read them in the hotspot-5% pattern (5% of the keys get 95% of
the reads) until its fast-disk hit rate settles. Then each candidate is made a primary
and serves the same pattern for 10% of that many reads, alone on the machine:

- `replica (copy)`: a replica that joined after the reads, so it was given a copy
  (checkpoint: both tiers, the tracker's state and the keys the primary's promotion cache
  held, which it reads; the run waits until its reads settle);
- `replica (stream + hot keys)`: a replica that followed the primary from its start and
  read again the keys the primary's clients read (tierkv-repl-hotness yes);
- `replica (writes only)`: the same, without the hot keys (tierkv-repl-hotness no): an
  ordinary replica, which receives the data and no hotness (Redis's, Kvrocks's);
- `restored checkpoint`: a server opened on a SAVE of the primary (once it has read the
  keys the checkpoint lists).

Then the old primary itself restarts (issue 46's restart target): reopened after its
clean close, its first 10% against its last 10% before; then after another 10% of reads
it is killed with kill -9 and reopened, its first 10% against the 10% before the kill.
Each restarted server listens once it has read back its list of the keys it served from
memory (`tierkv serve --warm-wait`, 30 s at most); the first 10% starts at its first
answer, and the table gives the time from its start until the list was read.

The fast-disk hit rate is the share of the reads that found their record anywhere but
the slow disk (INFO fdhitrate: 1 - get_slow / found gets), over the primary's last 10%
of reads and each candidate's first 10%. Prints two markdown tables.

Usage: warm_failover.py --tierkv BIN --out DIR [--records N] [--reads M]
"""

import argparse
import os
import random
import subprocess
import sys
import threading
import time

import redis


def counters(port):
    i = redis.Redis(port=port, socket_timeout=30).info("fdhitrate")
    return i["gets"] - i["get_not_found"], i["get_slow"]


class Server:
    def __init__(self, a, name, port, replicaof=None, hotness=True, db=None):
        self.port = port
        self.dir = os.path.join(a.out, name)
        fast = db or os.path.join(self.dir, "fast")
        slow = os.path.join(self.dir, "slow")
        os.makedirs(slow, exist_ok=True)
        args = [a.tierkv, "serve", "--db", fast, "--port", str(port), "--timeout", "0",
                "--cache-size", a.cache]
        if db is None:
            args += ["--slow-dir", slow, "--fd-budget", a.fd_budget]
        if replicaof:
            args += ["--replicaof", f"127.0.0.1 {replicaof}"]
        log = open(os.path.join(a.out, f"{name}.log"), "a")
        self.proc = subprocess.Popen(args, stdout=log, stderr=log)
        self.c = redis.Redis(port=port, socket_timeout=120)
        for _ in range(600):
            try:
                self.c.ping()
                break
            except redis.RedisError:
                time.sleep(0.1)
        if not hotness:
            self.c.config_set("tierkv-repl-hotness", "no")

    def linked(self):
        return self.c.info("replication").get("master_link_status") == "up"

    def stop(self):
        if self.proc.poll() is None:
            try:
                self.c.shutdown(nosave=True)
            except redis.RedisError:
                pass
            self.proc.wait(timeout=300)


def settle(server):
    """Waits until the server's own reads (of the keys a copy lists) stop, 2 s unchanged."""
    settled, seen = 0, -1
    while settled < 20:
        gets = server.c.info("engine")["gets"]
        settled = settled + 1 if gets == seen else 0
        seen = gets
        time.sleep(0.1)


def key(i):
    return f"user{i:010d}"


def reads(port, n, hot, records, seed, batch=200):
    """n hotspot-5% reads (95% on the hot keys), pipelined; returns ops/s."""
    rng = random.Random(seed)
    c = redis.Redis(port=port, socket_timeout=120)
    done = 0
    t = time.monotonic()
    while done < n:
        p = c.pipeline(transaction=False)
        for _ in range(min(batch, n - done)):
            i = rng.choice(hot) if rng.random() < 0.95 else rng.randrange(records)
            p.get(key(i))
        p.execute()
        done += batch
    return n / (time.monotonic() - t)


class WarmingClock(threading.Thread):
    """Times a server's reading back of its list of keys served from memory (INFO
    promotion_warming) from its start, polling beside the measured reads."""

    def __init__(self, server, start):
        super().__init__(daemon=True)
        self.c = redis.Redis(port=server.port, socket_timeout=30)
        self.start_t, self.seconds, self.keys = start, None, 0
        self.start()

    def run(self):
        while True:
            i = self.c.info("promotion")
            if not i.get("promotion_warming", 0):
                self.seconds = time.monotonic() - self.start_t
                self.keys = i.get("promotion_warm_keys_read", 0)
                return
            time.sleep(0.01)


def hit_rate(port, fn):
    f0, s0 = counters(port)
    r = fn()
    f1, s1 = counters(port)
    found = f1 - f0
    return (1 - (s1 - s0) / found) if found else 0.0, r


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tierkv", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--reads", type=int, default=600_000)
    ap.add_argument("--fd-budget", default="18MiB")
    ap.add_argument("--cache", default="8MiB")
    ap.add_argument("--base-port", type=int, default=7600)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    bp = a.base_port
    servers = []
    try:
        p = Server(a, "primary", bp)
        servers.append(p)
        r_feed = Server(a, "replica-stream-hot", bp + 1, replicaof=bp)
        r_plain = Server(a, "replica-writes-only", bp + 2, replicaof=bp, hotness=False)
        servers += [r_feed, r_plain]
        value = b"v" * 1000
        t = time.monotonic()
        for start in range(0, a.records, 1000):
            pipe = p.c.pipeline(transaction=False)
            for i in range(start, min(start + 1000, a.records)):
                pipe.set(key(i), value)
            pipe.execute()
        load_s = time.monotonic() - t
        rng = random.Random(7)
        hot = rng.sample(range(a.records), a.records // 20)
        # The primary learns its hot set; its last 10% of reads is the reference.
        last = a.reads // 10
        reads(p.port, a.reads - last, hot, a.records, 1)
        p_rate, p_ops = hit_rate(p.port, lambda: reads(p.port, last, hot, a.records, 2))
        p.c.execute_command("WAIT", 2, 0)
        saved = p.c.execute_command("SAVE")
        ckpt_root = os.path.join(a.out, "primary", "fast.checkpoints")
        ckpt = os.path.join(ckpt_root, sorted(os.listdir(ckpt_root))[-1])
        r_copy = Server(a, "replica-copy", bp + 3, replicaof=bp)
        servers.append(r_copy)
        for _ in range(3000):
            if r_copy.linked():
                break
            time.sleep(0.1)
        p.c.execute_command("WAIT", 3, 0)
        # The copied replica reads the keys the primary's cache held (listed in the copy):
        # wait until its reads settle, as a failover some seconds after it joined would.
        settle(r_copy)
        p.stop()
        rows = [("old primary, last 10%", p_rate, p_ops)]
        candidates = [("replica (copy)", r_copy), ("replica (stream + hot keys)", r_feed),
                      ("replica (writes only)", r_plain)]
        for name, s in candidates:
            s.c.execute_command("REPLICAOF", "NO", "ONE")
            rate, ops = hit_rate(s.port, lambda s=s: reads(s.port, last, hot, a.records, 3))
            rows.append((name + ", first 10%", rate, ops))
            s.stop()
        restored = Server(a, "restored", bp + 4, db=ckpt)
        servers.append(restored)
        settle(restored)
        rate, ops = hit_rate(restored.port, lambda: reads(restored.port, last, hot, a.records, 3))
        rows.append(("restored checkpoint, first 10%", rate, ops))
        restored.stop()
        # Issue 46's restart: the old primary reopened after its clean close (SHUTDOWN
        # above); then, after another tenth of reads, killed with kill -9 and reopened.
        # The first 10% starts as soon as the server answers (once it read back the keys
        # it listed, or after --warm-wait); the reading back is timed from the start.
        def reopen(port, seed):
            """Restarts the old primary's store on `port`; its first 10% and warming clock."""
            t = time.monotonic()
            s = Server(a, "primary", port)
            servers.append(s)
            clock = WarmingClock(s, t)
            rate, _ = hit_rate(s.port, lambda: reads(s.port, last, hot, a.records, seed))
            clock.join()
            return s, rate, clock

        again, rate, clock = reopen(bp + 5, 4)
        restarts = [("clean close (SHUTDOWN)", p_rate, rate, clock)]
        before, _ = hit_rate(again.port, lambda: reads(again.port, last, hot, a.records, 5))
        again.proc.kill()
        again.proc.wait()
        _, rate, clock = reopen(bp + 6, 6)
        restarts.append(("kill -9", before, rate, clock))
        print(f"records: {a.records} of 1,000 B, fast-disk budget {a.fd_budget}, cache {a.cache}; "
              f"reads: {a.reads} hotspot-5% on the primary, {last} on each candidate; "
              f"load {load_s:.0f} s; SAVE: {saved}")
        print()
        print("| server | fast-disk hit rate | points from the old primary | reads/s (python client) |")
        print("|---|--:|--:|--:|")
        for name, rate, ops in rows:
            print(f"| {name} | {rate * 100:.1f}% | {(rate - p_rate) * 100:+.1f} | {ops:,.0f} |")
        print()
        print("| the primary reopened after | last 10% before | first 10% after | points "
              "| keys read back, s from start |")
        print("|---|--:|--:|--:|--:|")
        for name, before, after, c in restarts:
            print(f"| {name} | {before * 100:.1f}% | {after * 100:.1f}% "
                  f"| {(after - before) * 100:+.1f} | {c.keys:,}, {c.seconds:.1f} |")
    finally:
        for s in servers:
            try:
                s.stop()
            except Exception:
                s.proc.kill()


if __name__ == "__main__":
    main()
