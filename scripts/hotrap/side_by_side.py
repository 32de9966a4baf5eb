#!/usr/bin/env python3
"""tierkv and the original HotRAP prototype (kvexe) side by side on kernel-throttled tiers.

Entry point: scripts/hotrap-side-by-side.sh (it only runs this file). Each run of each system
gets fresh fast and slow filesystems from scripts/tiers.sh (loop devices; the slow one limited
by cgroup I/O throttling to the chosen profile), the same preset sizes, the same mix and key
distribution, 16 client threads. Systems alternate within a cell and the order flips every
repetition. Everything measured from outside the process is the same for both systems:

  slow reads/op, slow writes/op   requests the slow loop device completed
                                  (/sys/block/loopN/stat) over the run phase, per operation
  FD / SD bg writes               bytes written to each device over the run phase, per operation
  FD used (peak, mean)            the fast file system's used space over the run phase, less
                                  what it held when the driver started (tables, WALs, RALT)
  peak RSS                        VmHWM of the driver process
  CPU us/op                       the process's utime + stime over the run phase, per operation

and from each system's own counters (their definitions differ; see docs/bench/hotrap-peer.md):

  ops/s (final 10%, whole run), FD hit rate (final 10%, whole run), bytes promoted and
  retained over the run phase, p99 latency over the run phase, load time.

Subcommands: `grid` (the whole comparison, writes OUT/side-by-side.md), `run` (one system in
one cell; called inside scripts/tiers.sh by `grid`), `table` (re-renders the markdown from
OUT/runs/*/result.json).
"""

import argparse
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
MIB = 1 << 20
GIB = 1 << 30

# Presets, by their fast disk: `authors`, the HotRAP paper's smallest setup (11 GB of 1 KiB
# records on a 1 GiB fast disk), the neighbourhood of `tierkv bench --scale paper`; `medium`,
# 2 GiB of data; `check`, a minute per system, to see the pipeline work (no figure to report).
# Every other size follows from the fast disk as in the authors' setup (see `sizes`).
PRESETS = {"authors": GIB, "medium": int(GIB / 5.5), "check": 16 * MIB}
CACHE_BYTES = 8 * MIB
THREADS = 16

# The slow disk: the paper's throttled AWS gp3, and its HDD's IOPS and bandwidth (the
# kernel's throttle caps rate, it adds no seek time).
SLOW_PROFILES = {"gp3-max": (10_000, 1000 * MIB), "hdd": (400, 260 * MIB)}

# The paper's mixes: (tierkv --workload, kvexe read/insert/update proportions).
MIXES = {"ro": (1, 0, 0), "rw": (0.75, 0.25, 0), "wh": (0.5, 0.5, 0), "uh": (0.5, 0, 0.5)}
DISTS = {"hotspot-5%": "hotspot", "zipfian": "zipfian", "uniform": "uniform",
         # The HotRAP paper's shifting hotspot (its Figure 15; `tierkv bench --distribution
         # dynamic`, seven equal phases): kvexe's generator has no such sequence, so the
         # prototype replays tierkv bench's own operations from a trace.
         "dynamic": None}
DYNAMIC_PHASES = 7
# `trace:clusterN`: a synthetic trace from Twitter cluster N's statistics
# (scripts/twitter/trace.py), replayed by both systems.
TRACE_MIX = "trace"


def is_trace_cell(cell):
    return cell.split(":")[0] == TRACE_MIX


def cluster_of(cell):
    m = re.fullmatch(r"trace:cluster(\d+)", cell)
    if not m:
        die(f"unknown trace cell {cell!r}: trace:clusterN")
    return int(m.group(1))


def is_dynamic_cell(cell):
    return not is_trace_cell(cell) and cell.split(":")[1] == "dynamic"


def replayed_by_prototype(cell):
    """Cells the prototype runs from tierkv bench's exported operations (kvexe traces)
    instead of its own generator."""
    return is_trace_cell(cell) or is_dynamic_cell(cell)


def die(msg):
    print(f"hotrap-side-by-side: {msg}", file=sys.stderr)
    sys.exit(2)


def slow_disk_bytes(sz, cells):
    """The slow disk for a grid: the data after the most inserting cell's run (a WH run
    inserts half its operations, as much again as the load at 2 operations per KiB), with
    room for space amplification and compaction outputs, plus 1 GiB. (Sized by the load
    alone, 1.6 times it, the prototype ran out of space under WH.)"""
    inserted = max(0 if is_trace_cell(c) else MIXES[c.split(":")[0]][1] for c in cells) \
        * sz["ops"] * sz["data"] // sz["records"]
    return int((sz["data"] + inserted) * 1.6) + GIB


def cluster_record_size(cluster):
    sys.path.insert(0, os.path.join(ROOT, "scripts", "twitter"))
    import trace as twitter_trace  # scripts/twitter/trace.py
    st = twitter_trace.cluster_stats(cluster)
    return max(st["key_size"], 8) + max(st["value_size"], 1)


def sizes(preset, record_size, cell=None):
    """Every size of one preset, the same for both systems (a trace cell's records are its
    cluster's size)."""
    fd = PRESETS[preset]
    if cell is not None and is_trace_cell(cell):
        record_size = cluster_record_size(cluster_of(cell))
    records = 11 * fd // record_size
    return dict(
        fd=fd,
        records=records,
        # 2 operations per KiB loaded, as the paper (2.2e8 operations on 110 GB).
        ops=2 * records * record_size // 1024,
        # The authors' sizes for a 1 GiB fast disk, scaled: L1, memtables and files 64 MiB,
        # hot-set limit 500 MB, RALT 33 MB. (L1 is what matters: the prototype places a
        # level on the fast disk only if it fits with the levels above it, so with L1 at
        # 1/16 of the fast disk L0-L2 are there, about 70% of it.)
        l1=fd // 16,
        memtable=fd // 16,
        hot_set=int(fd * 500_000_000 / GIB),
        ralt=int(fd * 33_000_000 / GIB),
        data=records * record_size,
        record_size=record_size,
    )


# ---------------------------------------------------------------- measuring from outside


def block_device_of(path):
    src = subprocess.run(["findmnt", "-no", "SOURCE", "--target", path],
                         capture_output=True, text=True, check=True).stdout.strip()
    return os.path.basename(src)


def device_stat(dev):
    f = open(f"/sys/block/{dev}/stat").read().split()
    # reads completed, sectors read, writes completed, sectors written
    return int(f[0]), int(f[2]) * 512, int(f[4]), int(f[6]) * 512


def proc_sample(pid):
    try:
        stat = open(f"/proc/{pid}/stat").read()
        fields = stat[stat.rindex(")") + 2:].split()
        cpu_ticks = int(fields[11]) + int(fields[12])
        hwm = 0
        for line in open(f"/proc/{pid}/status"):
            if line.startswith("VmHWM:"):
                hwm = int(line.split()[1]) * 1024
        return cpu_ticks, hwm
    except (OSError, ValueError):
        return None


def fs_used(path):
    st = os.statvfs(path)
    return (st.f_blocks - st.f_bfree) * st.f_frsize


class Sampler(threading.Thread):
    """Samples both devices, the fast disk's used space and the driver process once a
    second, with wall-clock stamps. The fast disk's file system holds only this run's
    files (tables, WALs, RALT: everything either system keeps there), so its used space
    less what it held when the driver started is the fast-disk space the system uses."""

    def __init__(self, pid, fast_dev, slow_dev, fast_path):
        super().__init__(daemon=True)
        self.pid, self.fast_dev, self.slow_dev = pid, fast_dev, slow_dev
        self.fast_path, self.fast_base = fast_path, fs_used(fast_path)
        self.samples = []  # (t_ns, fast stat, slow stat, cpu_ticks, hwm, fast used bytes)
        self.stop = threading.Event()

    def take(self):
        p = proc_sample(self.pid)
        if p is not None:
            self.samples.append((time.time_ns(), device_stat(self.fast_dev),
                                 device_stat(self.slow_dev), p[0], p[1],
                                 max(fs_used(self.fast_path) - self.fast_base, 0)))
        return p is not None

    def run(self):
        while not self.stop.is_set() and self.take():
            self.stop.wait(1.0)

    def window(self, start_ns, end_ns):
        """The samples from start to end (None if fewer than two)."""
        inside = [s for s in self.samples if start_ns <= s[0] <= end_ns]
        return inside if len(inside) >= 2 else None


def outside_figures(sampler, run_start_ns, run_end_ns, ops):
    inside = sampler.window(run_start_ns, run_end_ns)
    if inside is None:
        return {}
    a, b = inside[0], inside[-1]
    # Scale the window's counts to the whole run phase (the window misses up to a second at
    # each end).
    span = (b[0] - a[0]) / 1e9
    whole = (run_end_ns - run_start_ns) / 1e9
    scaled_ops = ops * span / whole if whole > 0 else ops
    fa, sa, fb, sb = a[1], a[2], b[1], b[2]
    tck = os.sysconf("SC_CLK_TCK")
    return dict(
        sd_reads_per_op=(sb[0] - sa[0]) / scaled_ops,
        sd_writes_per_op=(sb[2] - sa[2]) / scaled_ops,
        sd_read_bytes_per_op=(sb[1] - sa[1]) / scaled_ops,
        fd_reads_per_op=(fb[0] - fa[0]) / scaled_ops,
        fd_write_bytes_per_op=(fb[3] - fa[3]) / scaled_ops,
        sd_write_bytes_per_op=(sb[3] - sa[3]) / scaled_ops,
        cpu_us_per_op=(b[3] - a[3]) / tck * 1e6 / scaled_ops,
        peak_rss=max(s[4] for s in sampler.samples),
        fd_used_peak=max(s[5] for s in inside),
        fd_used_mean=sum(s[5] for s in inside) / len(inside),
    )


# ---------------------------------------------------------------- one run of tierkv


def workload_flags(a, sz):
    """tierkv bench's flags for the cell's records and operations (also what the kvexe
    traces are written from)."""
    if is_trace_cell(a.cell):
        tdir = twitter_trace_dir(a, sz)
        return ["--trace", os.path.join(tdir, "run.csv"),
                "--trace-load", os.path.join(tdir, "load.csv")]
    workload, dist = a.cell.split(":")
    return ["--workload", workload, "--distribution", dist,
            "--record-size", str(a.record_size), "--records", str(sz["records"]),
            "--ops", str(sz["ops"]), "--seed", str(a.seed)]


def twitter_trace_dir(a, sz):
    """The cell's synthetic Twitter trace (scripts/twitter/trace.py), written once per
    preset, cluster and seed under --traces-dir."""
    cluster = cluster_of(a.cell)
    d = os.path.join(a.traces_dir, f"{a.preset}_cluster{cluster}_{a.seed}")
    if not os.path.exists(os.path.join(d, "done")):
        subprocess.run([sys.executable, os.path.join(ROOT, "scripts/twitter/trace.py"),
                        "--cluster", str(cluster), "--data-bytes", str(sz["data"]),
                        "--ops", str(sz["ops"]), "--seed", str(a.seed), "--out", d], check=True)
        open(os.path.join(d, "done"), "w").close()
    return d


def run_tierkv(a, sz, fast, slow, out):
    cmd = [a.tierkv, "bench", "--systems", "tierkv", *workload_flags(a, sz),
           "--threads", str(THREADS),
           "--fd-budget", str(sz["fd"]), "--cache-size", str(CACHE_BYTES),
           "--slow-device", "none", "--fast-dir", fast, "--slow-dir", slow,
           "--no-progress", "--out", os.path.join(out, "bench")]
    if not a.tierkv_own_sizes:
        # The prototype's memtables, table files and L1 (tierkv's own default is a
        # memtable of 1/128 of the fast disk and an L1 of 1/32).
        cmd += ["--write-buffer-size", str(sz["memtable"]), "--level-base", str(sz["l1"])]
    # A --tierkv-arg naming a flag set above replaces it (e.g. --fd-budget=300MiB: tierkv
    # with the fast-disk space the prototype takes), since a flag may be given once.
    given = {x.split("=", 1)[0] for x in a.tierkv_arg}
    kept = []
    for i, x in enumerate(cmd):
        value_of_given = i > 0 and cmd[i - 1] in given and not x.startswith("--")
        if x in given or value_of_given:
            continue
        kept.append(x)
    cmd = kept + a.tierkv_arg
    log = open(os.path.join(out, "driver.log"), "w")
    log.write(" ".join(cmd) + "\n")
    log.flush()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    sampler = Sampler(proc.pid, block_device_of(fast), block_device_of(slow), fast)
    sampler.start()
    run_start = run_end = None
    for line in proc.stdout:
        log.write(f"{time.time_ns()} {line}")
        if run_start is None and re.search(r": loaded \d+ records in", line):
            run_start = time.time_ns()
        if run_end is None and "run phase done in" in line:
            run_end = time.time_ns()
    rc = proc.wait()
    sampler.stop.set()
    if rc != 0 or run_start is None or run_end is None:
        die(f"tierkv failed (exit {rc}): {out}/driver.log")
    r = json.load(open(os.path.join(out, "bench", "results.json")))["systems"][0]
    res = dict(
        ops_s_final=r["throughput_ops"], ops_s_whole=r["throughput_run_ops"],
        fd_hit_final=r["fd_hit_rate"], fd_hit_whole=r["fd_hit_rate_run"],
        promoted_bytes=r["promoted_bytes"], retained_bytes=r["retained_bytes"],
        p99_us=r["p99_us"], load_s=r["load_seconds"], ops=r["ops"],
        hot_set_limit=r.get("ralt_hot_set_limit"),
    )
    phases = r.get("phases") or []
    if len(phases) > 1:
        res["phases"] = [dict(mid=p.get("fd_hit_mid"), end=p.get("fd_hit_end")) for p in phases]
    res.update(outside_figures(sampler, run_start, run_end, r["ops"]))
    return res


# ---------------------------------------------------------------- one run of the prototype


def kvexe_workload_file(path, a, sz):
    workload, dist = a.cell.split(":")
    read, insert, update = MIXES[workload]
    with open(path, "w") as f:
        f.write(f"recordcount={sz['records']}\noperationcount={sz['ops']}\n"
                f"readproportion={read}\ninsertproportion={insert}\n"
                f"updateproportion={update}\nscanproportion=0\n"
                f"requestdistribution={DISTS[dist]}\n"
                "hotspotdatafraction=0.05\nhotspotopnfraction=0.95\n"
                f"valuelength={a.record_size - 24}\n")


def table_of(path):
    """kvexe's per-second files: a header line, then 'timestamp_ns v1 v2 ...'."""
    rows = []
    for line in open(path):
        f = line.split()
        if f and f[0].isdigit():
            rows.append([int(x) for x in f])
    return rows


def at(rows, t_ns):
    """The last row at or before t (rows are cumulative counters)."""
    best = rows[0]
    for r in rows:
        if r[0] <= t_ns:
            best = r
    return best


def kvexe_p99(db, run_start_ns):
    lat = []
    for path in glob.glob(os.path.join(db, "latency-*")):
        for line in open(path):
            f = line.split()
            if len(f) == 3 and int(f[0]) >= run_start_ns:
                lat.append(int(f[2]))
    if not lat:
        return None
    lat.sort()
    return lat[min(len(lat) - 1, int(len(lat) * 0.99))] / 1000


def run_hotrap(a, sz, fast, slow, out):
    root = a.hotrap_root
    kvexe = os.path.join(root, "src/kvexe/build/rocksdb-kvexe")
    db, fd, sd, ralt = (os.path.join(fast, "db"), os.path.join(fast, "fd"),
                        os.path.join(slow, "sd"), os.path.join(fast, "ralt"))
    for d in (db, fd, sd, ralt):
        os.makedirs(d, exist_ok=True)
    traces = None
    if replayed_by_prototype(a.cell):
        traces = os.path.join(a.traces_dir, f"kvexe-{os.getpid()}")
        shutil.rmtree(traces, ignore_errors=True)
        subprocess.run([a.tierkv, "bench", *workload_flags(a, sz),
                        "--write-kvexe-trace", traces], check=True, stdout=subprocess.DEVNULL)
        inputs = ["--format=plain-length-only", f"--load={traces}/load.trace",
                  f"--run={traces}/run.trace",
                  # One channel for all workers: kvexe otherwise sends every operation of
                  # a key to one worker, so a trace's hottest key would run on one thread.
                  "--enable_fast_process"]
    else:
        wl = os.path.join(out, "workload")
        kvexe_workload_file(wl, a, sz)
        inputs = ["--enable_fast_generator", f"--workload_file={wl}"]
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = f"{root}/src/HotRAP/build:{root}/src/RALT/build"
    tcmalloc = "/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4"
    if os.path.exists(tcmalloc):
        env["LD_PRELOAD"] = tcmalloc  # as the authors run it
    # The authors' flags (`rocksdb-kvexe --help` explains each): their two tiers with the
    # fast disk's budget, RALT's hot-set and size limits, auto-tuning on; the latency of
    # every operation (--switches=0x1) for the p99.
    cmd = [kvexe, *inputs, f"--num_threads={THREADS}", f"--db_path={db}",
           f"--db_paths={{{{{fd},{sz['fd']}}},{{{sd},1000000000000}}}}",
           f"--max_hot_set_size={sz['hot_set']}", f"--max_ralt_size={sz['ralt']}",
           f"--ralt_path={ralt}", "--enable_auto_tuning", f"--cache_size={CACHE_BYTES}",
           f"--max_bytes_for_level_base={sz['l1']}", f"--write_buffer_size={sz['memtable']}",
           f"--target_file_size_base={sz['memtable']}", "--switches=0x1"]
    cmd += a.hotrap_arg
    log = open(os.path.join(out, "driver.log"), "w")
    log.write(" ".join(cmd) + "\n")
    log.flush()
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
    sampler = Sampler(proc.pid, block_device_of(fast), block_device_of(slow), fast)
    sampler.start()
    rc = proc.wait()
    sampler.stop.set()
    if traces:
        shutil.rmtree(traces, ignore_errors=True)
    # kvexe samples its CPU with a `pidstat -p PID` it starts in the background, writing
    # into the fast disk's directory; one left behind by a kvexe that aborted kept the
    # fast disk busy, and tiers.sh could not unmount it.
    subprocess.run(["pkill", "-f", f"pidstat -p {proc.pid} "], check=False)
    if rc != 0:
        die(f"kvexe failed (exit {rc}): {out}/driver.log")
    for name in ("info.json", "progress", "num-accesses", "promoted-or-retained-bytes",
                 "first-level-in-last-tier", "vc_param", "rocksdb-stats-run.txt"):
        if os.path.exists(os.path.join(db, name)):
            shutil.copy(os.path.join(db, name), out)
    info = json.loads(re.sub(r",\s*}", "}", open(os.path.join(db, "info.json")).read()))
    progress = table_of(os.path.join(db, "progress"))
    # The run phase as kvexe stamps it; progress counts load and run operations together.
    n, ops = sz["records"], sz["ops"]
    run_start_ns = int(info["run-start-timestamp(ns)"])
    run_end_ns = int(info["run-end-timestamp(ns)"])
    run_s = (run_end_ns - run_start_ns) / 1e9
    # The final 10%: from the first per-second sample with 90% of the run's operations done.
    mark = next(r for r in progress if r[1] >= n + 0.9 * ops)
    final_s = max(run_end_ns - mark[0], 1) / 1e9
    final_ops = n + ops - mark[1]
    res = dict(ops_s_whole=ops / run_s, ops_s_final=final_ops / final_s,
               load_s=float(info["load-time(secs)"]), ops=ops,
               p99_us=kvexe_p99(db, run_start_ns))
    acc = table_of(os.path.join(db, "num-accesses"))
    first_sd = int(open(os.path.join(db, "first-level-in-last-tier")).read().split()[0])

    def hit(a_row, b_row):
        # Rows grow a column as levels appear.
        a_hits = a_row[1:] + [0] * (len(b_row) - len(a_row))
        d = [y - x for x, y in zip(a_hits, b_row[1:])]
        tot = sum(d)
        return sum(d[:first_sd]) / tot if tot else None

    res["fd_hit_whole"] = hit(at(acc, run_start_ns), acc[-1])
    res["fd_hit_final"] = hit(at(acc, mark[0]), acc[-1])
    if is_dynamic_cell(a.cell):
        # The dynamic workload's equal phases: the FD hit rate over 45-55% and
        # 90-100% of each, as tierkv's report gives them, from kvexe's once-a-second rows
        # (a window shorter than a second widens to the rows around it).
        def when(done):
            return next((r[0] for r in progress if r[1] >= n + done), progress[-1][0])

        def window(lo, hi):
            t0, t1 = when(lo), when(hi)
            a_row = at(acc, t0)
            b_row = next((r for r in acc if r[0] >= t1), acc[-1])
            return hit(a_row, b_row) if b_row[0] > a_row[0] else None

        k = DYNAMIC_PHASES
        res["phases"] = [dict(mid=window(ops * (p + 0.45) / k, ops * (p + 0.55) / k),
                              end=window(ops * (p + 0.9) / k, ops * (p + 1) / k))
                         for p in range(k)]
    pr = table_of(os.path.join(db, "promoted-or-retained-bytes"))
    p0, p1 = at(pr, run_start_ns), pr[-1]
    res["promoted_bytes"] = (p1[1] - p0[1]) + (p1[2] - p0[2])
    res["retained_bytes"] = p1[3] - p0[3]
    vc = os.path.join(db, "vc_param")
    if os.path.exists(vc) and table_of(vc):
        res["hot_set_limit"] = table_of(vc)[-1][1]
    res.update(outside_figures(sampler, run_start_ns, run_end_ns, ops))
    return res


# ---------------------------------------------------------------- the grid and the table


def cmd_run(a):
    fast, slow = os.environ.get("TIERKV_FAST_DIR"), os.environ.get("TIERKV_SLOW_DIR")
    if not fast or not slow:
        die("`run` goes inside scripts/tiers.sh (TIERKV_FAST_DIR and TIERKV_SLOW_DIR unset)")
    sz = sizes(a.preset, a.record_size, a.cell)
    os.makedirs(a.out, exist_ok=True)
    started = time.time()
    res = (run_tierkv if a.system == "tierkv" else run_hotrap)(a, sz, fast, slow, a.out)
    res.update(system=a.system, cell=a.cell, preset=a.preset, slow=a.slow,
               record_size=a.record_size, rep=a.rep, wall_s=time.time() - started, sizes=sz,
               finished=time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()))
    json.dump(res, open(os.path.join(a.out, "result.json"), "w"), indent=1)
    print(json.dumps(res))


def preconditions(a, sz):
    missing = []
    if os.geteuid() != 0:
        missing.append("root (scripts/tiers.sh makes loop devices, mounts and cgroup limits): run with sudo")
    if not os.path.exists("/dev/loop-control"):
        missing.append("loop devices (/dev/loop-control): this machine or container cannot make them")
    kvexe = os.path.join(a.hotrap_root, "src/kvexe/build/rocksdb-kvexe")
    if "hotrap" in a.systems and not os.access(kvexe, os.X_OK):
        missing.append(f"the prototype ({kvexe}): build it with scripts/hotrap/build-hotrap.sh "
                       "(about an hour on 2 cores; see scripts/hotrap/README.md)")
    if "tierkv" in a.systems and not os.access(a.tierkv, os.X_OK):
        missing.append(f"tierkv's binary ({a.tierkv}): cargo build --release -p tierkv-cli")
    for tool in ("findmnt", "losetup", "mkfs.ext4"):
        if shutil.which(tool) is None:
            missing.append(f"{tool} (Debian: util-linux, e2fsprogs)")
    # tiers.sh's images are sparse: the slow one fills with the data (plus what the cells
    # insert and compaction's temporary space), the fast one with the fast-disk budget and
    # logs.
    need = slow_disk_bytes(sz, a.cells.split(",")) + 4 * sz["fd"] + GIB
    os.makedirs(a.tiers_dir, exist_ok=True)
    free = shutil.disk_usage(a.tiers_dir).free
    if free < need:
        missing.append(f"disk space under {a.tiers_dir}: {free / GIB:.1f} GiB free, the "
                       f"{a.preset} preset needs about {need / GIB:.1f} GiB")
    if missing:
        die("cannot start; missing:\n  - " + "\n  - ".join(missing))


def cmd_grid(a):
    sz = sizes(a.preset, a.record_size)
    preconditions(a, sz)
    iops, bps = SLOW_PROFILES[a.slow]
    os.makedirs(a.out, exist_ok=True)
    systems = a.systems.split(",")
    for cell in a.cells.split(","):
        if is_trace_cell(cell):
            cluster_of(cell)
        elif cell.split(":")[0] not in MIXES or cell.split(":")[-1] not in DISTS:
            die(f"unknown cell {cell!r}: WORKLOAD:DISTRIBUTION with WORKLOAD in "
                f"{'/'.join(MIXES)} and DISTRIBUTION in {'/'.join(DISTS)}, or "
                "trace:clusterN")
    for cell in a.cells.split(","):
        sz = sizes(a.preset, a.record_size, cell)
        for rep in range(1, a.reps + 1):
            if is_trace_cell(cell):
                # Written before the runs, outside the throttled tiers.
                twitter_trace_dir(argparse.Namespace(cell=cell, preset=a.preset,
                                                     seed=a.seed + rep,
                                                     traces_dir=a.traces_dir), sz)
            order = systems if rep % 2 == 1 else list(reversed(systems))
            for system in order:
                run_out = os.path.join(a.out, "runs", f"{a.preset}_{a.slow}_{a.record_size}_"
                                       f"{cell.replace(':', '_').replace('%', '')}_{system}_{rep}")
                if os.path.exists(os.path.join(run_out, "result.json")):
                    print(f"== have {run_out}")
                    continue
                print(f"== {cell}, {system}, pair {rep} ({time.strftime('%H:%M:%S')})", flush=True)
                cmd = [os.path.join(ROOT, "scripts/tiers.sh"),
                       "--fast-size", f"{(4 * sz['fd'] + 2 * GIB) // MIB}M",
                       "--slow-size", f"{slow_disk_bytes(sz, [cell]) // MIB}M",
                       "--slow-iops", str(iops), "--slow-bps", str(bps),
                       os.path.join(a.tiers_dir, "tiers"), "--",
                       sys.executable, os.path.abspath(__file__), "run", "--system", system,
                       "--cell", cell, "--preset", a.preset, "--slow", a.slow,
                       "--record-size", str(a.record_size), "--rep", str(rep),
                       "--tierkv", a.tierkv, "--hotrap-root", a.hotrap_root,
                       "--traces-dir", a.traces_dir,
                       "--seed", str(a.seed + rep), "--out", run_out]
                if a.tierkv_own_sizes:
                    cmd.append("--tierkv-own-sizes")
                cmd += [f"--tierkv-arg={x}" for x in a.tierkv_arg]
                cmd += [f"--hotrap-arg={x}" for x in a.hotrap_arg]
                subprocess.run(cmd, check=True)
                render(a.out)
    print(open(os.path.join(a.out, "side-by-side.md")).read())


def fmt(v, kind):
    if v is None:
        return "-"
    if kind == "pct":
        return f"{100 * v:.1f}%"
    if kind == "int":
        return f"{v:,.0f}"
    if kind == "mib":
        return f"{v / MIB:,.0f} MiB"
    if kind == "f2":
        return f"{v:.2f}"
    if kind == "s":
        return f"{v:,.0f} s"
    return str(v)


COLUMNS = [
    ("ops/s final 10%", "ops_s_final", "int"), ("ops/s whole", "ops_s_whole", "int"),
    ("FD hit final", "fd_hit_final", "pct"), ("FD hit whole", "fd_hit_whole", "pct"),
    ("SD reads/op", "sd_reads_per_op", "f2"), ("SD writes/op", "sd_writes_per_op", "f2"),
    ("promoted", "promoted_bytes", "mib"), ("retained", "retained_bytes", "mib"),
    ("FD bg write B/op", "fd_write_bytes_per_op", "int"),
    ("SD bg write B/op", "sd_write_bytes_per_op", "int"),
    ("p99 us", "p99_us", "int"), ("CPU us/op", "cpu_us_per_op", "int"),
    ("FD used peak", "fd_used_peak", "mib"), ("FD used mean", "fd_used_mean", "mib"),
    ("peak RSS", "peak_rss", "mib"), ("load", "load_s", "s"),
]


def render(out):
    results = [json.load(open(p)) for p in sorted(glob.glob(os.path.join(out, "runs/*/result.json")))]
    lines = []
    groups = {}
    for r in results:
        groups.setdefault((r["preset"], r["slow"], r["record_size"], r["cell"]), []).append(r)
    for (preset, slow, rs, cell), rows in groups.items():
        sz = rows[0]["sizes"]
        shape = "" if is_trace_cell(cell) else f", {rs} B records"
        lines.append(f"### {cell}, {preset} preset, slow disk {slow}{shape}\n")
        rsz = sz.get("record_size", rs)
        lines.append(f"{sz['records']:,} records of {rsz} B ({sz['data'] / GIB:.1f} GiB), "
                     f"{sz['ops']:,} operations, {THREADS} threads, fast disk "
                     f"{sz['fd'] / MIB:,.0f} MiB, cache {CACHE_BYTES // MIB} MiB.\n")
        if replayed_by_prototype(cell):
            what = (f"a synthetic trace from Twitter cluster {cluster_of(cell)}'s statistics "
                    "(scripts/twitter/trace.py)" if is_trace_cell(cell)
                    else "tierkv bench's generated operations")
            lines.append(f"Input: {what}; the prototype replays the same records and "
                         "operations from kvexe traces (`tierkv bench --write-kvexe-trace`, "
                         "kvexe `--format=plain-length-only --enable_fast_process`).\n")
        lines.append("| system | pair | " + " | ".join(c[0] for c in COLUMNS) + " |")
        lines.append("|---|--:|" + "--:|" * len(COLUMNS))
        rows.sort(key=lambda r: (r["rep"], r["system"]))
        for r in rows:
            lines.append(f"| {r['system']} | {r['rep']} | "
                         + " | ".join(fmt(r.get(k), kind) for _, k, kind in COLUMNS) + " |")
        ratios = []
        for rep in sorted({r["rep"] for r in rows}):
            pair = {r["system"]: r for r in rows if r["rep"] == rep}
            if "tierkv" in pair and "hotrap" in pair:
                t, h = pair["tierkv"], pair["hotrap"]
                ratios.append(f"pair {rep}: {t['ops_s_final'] / h['ops_s_final']:.2f}x final 10%, "
                              f"{t['ops_s_whole'] / h['ops_s_whole']:.2f}x whole run")
        if ratios:
            lines.append("\ntierkv / prototype: " + "; ".join(ratios) + ".")
        phased = [r for r in rows if r.get("phases")]
        if phased:
            n = max(len(r["phases"]) for r in phased)
            lines.append("\nFD hit rate per phase, at its midpoint (45-55% of its operations) "
                         "/ its end (90-100%):\n")
            lines.append("| system | pair | " + " | ".join(f"phase {i + 1}" for i in range(n)) + " |")
            lines.append("|---|--:|" + "--:|" * n)
            for r in phased:
                lines.append(f"| {r['system']} | {r['rep']} | " + " | ".join(
                    f"{fmt(p.get('mid'), 'pct')} / {fmt(p.get('end'), 'pct')}"
                    for p in r["phases"]) + " |")
        lines.append("")
    with open(os.path.join(out, "side-by-side.md"), "w") as f:
        f.write("\n".join(lines) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--preset", choices=PRESETS, default="medium")
    common.add_argument("--slow", choices=SLOW_PROFILES, default="gp3-max")
    common.add_argument("--record-size", type=int, default=1024, choices=[1024, 200])
    common.add_argument("--tierkv", default=os.path.join(ROOT, "target/release/tierkv"))
    common.add_argument("--hotrap-root", default=os.environ.get("HOTRAP_ROOT", "/tmp/hotrap"))
    common.add_argument("--seed", type=int, default=42)
    common.add_argument("--traces-dir", default="/var/tmp/tierkv-hotrap/traces",
                        help="where trace cells' inputs are written (not on the tiers)")
    common.add_argument("--tierkv-arg", action="append", default=[],
                        help="one more flag for tierkv bench (repeat for each; an ablation)")
    common.add_argument("--hotrap-arg", action="append", default=[],
                        help="one more flag for the prototype's kvexe (repeat for each; e.g. "
                             "--hotrap-arg=--block_size=4096)")
    common.add_argument("--tierkv-own-sizes", action="store_true",
                        help="tierkv sizes its memtables, files and L1 from the fast disk itself "
                             "instead of taking the prototype's")
    g = sub.add_parser("grid", parents=[common])
    g.add_argument("--cells", default="ro:hotspot-5%,ro:zipfian,rw:hotspot-5%",
                   help="comma-separated WORKLOAD:DISTRIBUTION (ro/rw/wh/uh x "
                        "hotspot-5%%/zipfian/uniform/dynamic) or trace:clusterN (a synthetic "
                        "trace from Twitter cluster N's statistics)")
    g.add_argument("--systems", default="tierkv,hotrap")
    g.add_argument("--reps", type=int, default=1)
    g.add_argument("--tiers-dir", default="/var/tmp/tierkv-hotrap")
    g.add_argument("--out", default="hotrap-out")
    r = sub.add_parser("run", parents=[common])
    r.add_argument("--system", choices=["tierkv", "hotrap"], required=True)
    r.add_argument("--cell", required=True)
    r.add_argument("--rep", type=int, default=1)
    r.add_argument("--out", required=True)
    t = sub.add_parser("table")
    t.add_argument("out")
    a = ap.parse_args()
    if a.cmd == "grid":
        cmd_grid(a)
    elif a.cmd == "run":
        cmd_run(a)
    else:
        render(a.out)
        print(open(os.path.join(a.out, "side-by-side.md")).read())


if __name__ == "__main__":
    main()
