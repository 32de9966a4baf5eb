#!/usr/bin/env bash
# F2 (Microsoft FASTER's F2Kv, with the f2_ycsb driver) and tierkv side by side on the same key
# files: YCSB A, B, C and F, at 2 and 16 client threads, on two key sequences, with
# one memory budget, both on this machine's disk with direct I/O and no device model, the two
# systems alternating cell by cell. Writes one markdown table (OUT/side-by-side.md).
#
#   scripts/f2-side-by-side.sh [--quick] [OUT_DIR]
#
# F2 is not part of tierkv's build or CI. Build it once (about 3 minutes on 2 cores) with the
# scripts in scripts/f2/ (see its README), from a bare git mirror of the public
# github.com/microsoft/FASTER repository:
#   git clone --mirror https://github.com/microsoft/FASTER /tmp/FASTER.git
#   GIT_DIR=/tmp/FASTER.git VARIANTS="20:14" scripts/f2/build-f2.sh     # -> $F2_ROOT/build-p20/f2_ycsb
# and tierkv's release binary with `cargo build --release -p tierkv-cli`.
#
# Per cell (workload x threads x key sequence): F2 runs for F2_SECONDS over the run file; tierkv
# then runs as many operations over the same run file (at most TIERKV_MAX_OPS; operation i
# addresses run key i for both; the operation type is each driver's own draw from the same
# mix). Each process loads the same load file into a fresh store first. Sampled every 0.2 s from outside both
# processes, over the run phase only (from the driver's end-of-load line to its end-of-run
# line):
#   ops/s          the driver's own figure for its whole run phase (tierkv: results.json
#                  throughput_run_ops, not the report's final-10% figure; before 2026-11-26 22:30
#                  UTC this script took the final 10%)
#   read B/op      disk bytes the process read (/proc/PID/io read_bytes, direct I/O included)
#                  per operation
#   reads/op       read requests completed by the disk (/sys/dev/block/M:m/stat) per operation;
#                  machine-wide, so other work on the machine adds to it. (Per-process read
#                  syscalls, /proc/PID/io syscr, do not count F2's libaio reads.)
#   read size      disk bytes per read request (device sectors read x 512 / reads)
#   reads/s        read requests per second, and their share of fio's 512 B ceiling
#   in flight      average reads in flight at the disk: the device's read time (the sum of
#                  every read's latency) over the wall time (Little's law); machine-wide
#   CPU            cores the process used (utime + stime over the run)
#   peak RSS       VmHWM over the run phase (reset by writing 5 to /proc/PID/clear_refs at the
#                  end-of-load line); both hold the run file in memory (tierkv streams the
#                  load file; F2 frees it after loading)
# The disk's small-read ceiling is measured with fio in the same invocation: 4 KiB and 512 B
# random reads, iodepth 32, direct=1, libaio.
#
# Environment (defaults: the full run; --quick: a few minutes' sanity check):
#   F2_ROOT        F2's build dir (default /tmp/f2peer); F2_BIN overrides the binary path
#   TIERKV         tierkv binary (default target/release/tierkv)
#   TIERKV_ARGS    extra `tierkv bench` flags (default none), e.g.
#                  "--last-level-filters always" (the defaults give these records 8-record
#                  blocks and no filters on the deepest level)
#   TIERKV_SYSTEM  the `tierkv bench --systems` name to run (default tierkv), e.g. tierkv-kvonly
#   RECORDS        records in the load file (4,000,000; quick 500,000)
#   RUN_KEYS       keys in the run file (1,600,000; quick 320,000); both drivers cycle it
#   TIERKV_MAX_OPS at most this many tierkv operations per cell (default RUN_KEYS), so a cell
#                  where F2 runs from memory does not make tierkv's run minutes long; the per-
#                  operation columns stay comparable, the ops count is in the logs
#   F2_SECONDS     F2's run duration per cell (20; quick 3)
#   F2_TIMEOUT     seconds before a hung F2 process (load and run) is killed; the cell is retried once (600)
#   WORKLOADS      "A B C F"     THREADS "2 16"     SEQS "ycsb records"
#                  (ycsb: YCSB's scrambled zipfian 0.99, F2's paper; records: zipfian 0.99 over
#                  the records themselves, gen_ycsb_keys.py --over-records)
#   REPS           alternating F2/tierkv pairs per cell (1)
#   TIERKV_BATCH   gets in flight per tierkv client thread (1): passed as `tierkv bench --batch`,
#                  each thread issues up to this many gets as one multi_get (F2's
#                  driver also keeps many reads outstanding per thread); recorded in each
#                  cell's report.md and in the table's header
#   RUN_DIR        where both stores and the fio file live (/tmp/f2-side-by-side; use the disk
#                  under test)
#   FIO_SECONDS    seconds per fio job (10)
#   Memory: F2's split of the budget (the default is F2's 41 MiB for 4M records of 108 B, 10%
#   of the data; quick: F2's minimum, 18.8 MiB):
#   HOT_LOG_MB (8; quick 6) HOT_MUTABLE (0.9) COLD_LOG_MB (6) COLD_INDEX_MB (6)
#   READ_CACHE_MB (15; quick 0) HOT_INDEX_BUCKETS (65536; quick 8192, 64 B each)
#   COLD_INDEX_CHUNKS (32768; quick 4096, 64 B each in memory)
#   tierkv gets --memory-budget = the sum, --fd-budget = 10% of the data (FD_BUDGET), both
#   tiers under RUN_DIR, --slow-device none, and its default durability (WAL written on every
#   write, not fsynced: survives a process crash). F2 has no write-ahead log.
set -euo pipefail
cd "$(dirname "$0")/.."
HERE=$PWD/scripts

QUICK=0
if [ "${1:-}" = "--quick" ]; then QUICK=1; shift; fi
OUT=${1:-bench-out/f2-side-by-side}
q() { if [ "$QUICK" = 1 ]; then echo "$2"; else echo "$1"; fi; }

F2_ROOT=${F2_ROOT:-/tmp/f2peer}
F2_BIN=${F2_BIN:-$F2_ROOT/build-p20/f2_ycsb}
TIERKV=${TIERKV:-${CARGO_TARGET_DIR:-target}/release/tierkv}
TIERKV_ARGS=${TIERKV_ARGS:-}
TIERKV_SYSTEM=${TIERKV_SYSTEM:-tierkv}
RECORDS=${RECORDS:-$(q 4000000 500000)}
RUN_KEYS=${RUN_KEYS:-$(q 1600000 320000)}
TIERKV_MAX_OPS=${TIERKV_MAX_OPS:-$RUN_KEYS}
F2_SECONDS=${F2_SECONDS:-$(q 20 3)}
F2_TIMEOUT=${F2_TIMEOUT:-600}
WORKLOADS=${WORKLOADS:-"A B C F"}
THREADS=${THREADS:-"2 16"}
SEQS=${SEQS:-"ycsb records"}
REPS=${REPS:-1}
TIERKV_BATCH=${TIERKV_BATCH:-1}
RUN_DIR=${RUN_DIR:-/tmp/f2-side-by-side}
FIO_SECONDS=${FIO_SECONDS:-10}
HOT_LOG_MB=${HOT_LOG_MB:-$(q 8 6)}
HOT_MUTABLE=${HOT_MUTABLE:-0.9}
COLD_LOG_MB=${COLD_LOG_MB:-6}
COLD_INDEX_MB=${COLD_INDEX_MB:-6}
READ_CACHE_MB=${READ_CACHE_MB:-$(q 15 0)}
HOT_INDEX_BUCKETS=${HOT_INDEX_BUCKETS:-$(q 65536 8192)}
COLD_INDEX_CHUNKS=${COLD_INDEX_CHUNKS:-$(q 32768 4096)}
PY=${PYTHON:-/usr/bin/python3}

die() { echo "f2-side-by-side: $*" >&2; exit 1; }
[ -x "$F2_BIN" ] || die "$F2_BIN not found: build F2 first (see this script's header; F2_ROOT=$F2_ROOT)"
[ -x "$TIERKV" ] || die "$TIERKV not found: cargo build --release -p tierkv-cli"
"$TIERKV" bench --help | grep -q -- --load-keys || die "$TIERKV has no --load-keys: rebuild it"
"$TIERKV" bench --help | grep -q -- --batch || die "$TIERKV has no --batch: rebuild it"
command -v fio >/dev/null || die "fio not found (Debian: apt-get install fio)"
"$PY" -c 'import numpy' 2>/dev/null || die "$PY cannot import numpy (Debian: apt-get install python3-numpy)"
[ "$(id -u)" = 0 ] || echo "f2-side-by-side: not root: peak RSS is not reset after loading" >&2

mkdir -p "$OUT/logs" "$RUN_DIR/keys"
OUT=$(cd "$OUT" && pwd)
DEV=$(stat -c '%Hd:%Ld' "$RUN_DIR")
DEVSTAT=/sys/dev/block/$DEV/stat
[ -r "$DEVSTAT" ] || die "no block device statistics for $RUN_DIR ($DEVSTAT)"
DEVNAME=$(basename "$(readlink -f "/sys/dev/block/$DEV")")

MIB=1048576
# F2's in-memory budget, as f2_ycsb computes it (log buffers, read cache, index tables).
MEM_BYTES=$(( (HOT_LOG_MB + COLD_LOG_MB + COLD_INDEX_MB + READ_CACHE_MB) * MIB
              + HOT_INDEX_BUCKETS * 64 + COLD_INDEX_CHUNKS * 64 ))
DATA_BYTES=$((RECORDS * 108))
FD_BUDGET=${FD_BUDGET:-$(( DATA_BYTES / 10 > MIB ? DATA_BYTES / 10 : MIB ))}

# ---- key files: generated once per sequence ----
load_file=$RUN_DIR/keys/load_$RECORDS.dat
declare -A RUNFILE
for s in $SEQS; do
    f=$RUN_DIR/keys/run_${RECORDS}_${RUN_KEYS}_$s.dat
    RUNFILE[$s]=$f
    if [ ! -s "$f" ] || [ ! -s "$load_file" ]; then
        extra=()
        case $s in
            ycsb) ;;
            records) extra=(--over-records) ;;
            *) die "unknown key sequence $s (ycsb or records)" ;;
        esac
        "$PY" "$HERE/f2/gen_ycsb_keys.py" --records "$RECORDS" --ops "$RUN_KEYS" \
            --out-load "$load_file" --out-run "$f" "${extra[@]}" | tee -a "$OUT/keys.txt"
    fi
done

# ---- sampling ----
# One line: time, read_bytes, syscr, cpu ticks, VmHWM kB, dev reads, dev sectors read, dev read ms.
sample() {
    local pid=$1 rb sc cpu hwm
    rb=$(awk '/^read_bytes/ {print $2}' "/proc/$pid/io" 2>/dev/null) || return 1
    sc=$(awk '/^syscr/ {print $2}' "/proc/$pid/io" 2>/dev/null) || return 1
    cpu=$(awk '{print $14 + $15}' "/proc/$pid/stat" 2>/dev/null) || return 1
    hwm=$(awk '/^VmHWM/ {print $2}' "/proc/$pid/status" 2>/dev/null) || return 1
    [ -n "$rb" ] && [ -n "$hwm" ] || return 1
    read -r d1 _ d3 d4 _ < "$DEVSTAT"
    echo "$EPOCHREALTIME $rb $sc $cpu $hwm $d1 $d3 $d4"
}

# monitor PID LOG START_REGEX END_REGEX SAMPLES: tags each sample load/run/end. A sample is
# "run" when taken after the start line appeared and before the end line did.
monitor() {
    local pid=$1 log=$2 start=$3 end=$4 out=$5 phase=load line
    : > "$out"
    while kill -0 "$pid" 2>/dev/null; do
        if [ "$phase" = load ] && grep -Eq "$start" "$log"; then
            phase=run
            echo 5 > "/proc/$pid/clear_refs" 2>/dev/null || true
        fi
        line=$(sample "$pid") || break
        if [ "$phase" = run ] && grep -Eq "$end" "$log"; then phase=end; fi
        echo "$phase $line" >> "$out"
        [ "$phase" = end ] && break
        sleep 0.2
    done
}

# summarize SAMPLES OPS -> "secs read_B_per_op reads_per_op read_size reads_per_s in_flight cpu hwm_kB"
summarize() {
    awk -v ops="$2" -v tck="$(getconf CLK_TCK)" '
        $1 == "run" { n++; if (n == 1) { split($0, a) } split($0, b) }
        END {
            if (n < 2 || ops <= 0) { print "NA NA NA NA NA NA NA NA"; exit }
            dt = b[2] - a[2]; reads = b[7] - a[7]; sect = b[8] - a[8]; rms = b[9] - a[9]
            size = 0; if (reads > 0) size = sect * 512 / reads
            printf("%.2f %.1f %.3f %.0f %.0f %.2f %.2f %d\n", dt, (b[3] - a[3]) / ops, reads / ops,
                size, reads / dt, rms / (dt * 1000), (b[5] - a[5]) / tck / dt, b[6])
        }' "$1"
}

# ---- the disk's small-read ceiling ----
fio_iops() {
    local bs=$1 json
    json=$OUT/logs/fio_$bs.json
    fio --name=ceiling --filename="$RUN_DIR/fio.dat" --size=1G --rw=randread --bs="$bs" \
        --iodepth=32 --direct=1 --ioengine=libaio --runtime="$FIO_SECONDS" --time_based \
        --output-format=json > "$json"
    "$PY" -c 'import json,sys; print(round(json.load(open(sys.argv[1]))["jobs"][0]["read"]["iops"]))' "$json"
}
echo "== fio: random reads, iodepth 32, direct, ${FIO_SECONDS} s each, on $DEVNAME"
FIO_4K=$(fio_iops 4k)
FIO_512=$(fio_iops 512)
rm -f "$RUN_DIR/fio.dat"
echo "fio: 4 KiB $FIO_4K IOPS, 512 B $FIO_512 IOPS"

# ---- runs ----
run_f2() { # W T SEQ REP -> prints "ops ops_per_sec"
    local w=$1 t=$2 s=$3 r=$4 d=$RUN_DIR/f2 log=$OUT/logs/f2_$1_$2_$3_$4.log
    rm -rf "$d"; mkdir -p "$d"
    : > "$log"  # the monitor may look before the driver writes
    "$F2_BIN" --load "$load_file" --run "${RUNFILE[$s]}" --workload "$w" --threads "$t" \
        --seconds "$F2_SECONDS" --dir "$d" \
        --hot-log-mem-mb "$HOT_LOG_MB" --hot-log-mutable "$HOT_MUTABLE" \
        --cold-log-mem-mb "$COLD_LOG_MB" --read-cache-mb "$READ_CACHE_MB" \
        --hot-index-buckets "$HOT_INDEX_BUCKETS" --cold-index-chunks "$COLD_INDEX_CHUNKS" \
        --cold-index-mem-mb "$COLD_INDEX_MB" --hot-budget-mb 64 > "$log" 2>&1 &
    local pid=$!
    # A watchdog, not `timeout`: the monitor samples the driver's own /proc entry. It
    # polls, so it ends with the driver and leaves nothing behind.
    (
        for _ in $(seq "$F2_TIMEOUT"); do kill -0 "$pid" 2>/dev/null || exit 0; sleep 1; done
        kill -KILL "$pid" 2>/dev/null
    ) >/dev/null 2>&1 &
    monitor "$pid" "$log" '^MEM after-load' '^RUN workload=' "$log.samples"
    wait "$pid" || die "F2 failed: $log"
    rm -rf "$d"
    local ops rate
    ops=$(sed -n 's/^RUN .* ops=\([0-9]*\) .*/\1/p' "$log")
    rate=$(sed -n 's/^THROUGHPUT .*ops_per_sec=\([0-9]*\).*/\1/p' "$log")
    [ -n "$ops" ] && [ -n "$rate" ] || die "no RUN/THROUGHPUT line in $log"
    echo "$ops $rate"
}

run_tierkv() { # W T SEQ REP OPS -> prints "ops ops_per_sec"
    local w=$1 t=$2 s=$3 r=$4 ops=$5 d=$RUN_DIR/tierkv log=$OUT/logs/tierkv_$1_$2_$3_$4.log
    rm -rf "$d"
    : > "$log"
    "$TIERKV" bench --workload "$w" --load-keys "$load_file" --run-keys "${RUNFILE[$s]}" \
        --ops "$ops" --threads "$t" --memory-budget "$MEM_BYTES" --fd-budget "$FD_BUDGET" \
        --slow-device none --systems "$TIERKV_SYSTEM" --batch "$TIERKV_BATCH" --no-progress $TIERKV_ARGS \
        --out "$d" > "$log" 2>&1 &
    local pid=$!
    monitor "$pid" "$log" ': loaded [0-9]+ records in' 'run phase done in' "$log.samples"
    wait "$pid" || die "tierkv failed: $log"
    cp "$d/report.md" "$OUT/logs/tierkv_$1_$2_$3_$4.report.md" 2>/dev/null || true
    local rate
    rate=$("$PY" -c 'import json,sys; print(round(json.load(open(sys.argv[1]))["systems"][0]["throughput_run_ops"]))' "$d/results.json")
    rm -rf "$d"
    echo "$ops $rate"
}

ROWS=$OUT/rows.txt
: > "$ROWS"
for s in $SEQS; do
    for t in $THREADS; do
        for w in $WORKLOADS; do
            for r in $(seq 1 "$REPS"); do
                echo "== YCSB $w, $t threads, keys $s, pair $r"
                f2_rate=
                read -r f2_ops f2_rate < <(run_f2 "$w" "$t" "$s" "$r") || true
                if [ -z "${f2_rate:-}" ]; then
                    # F2's driver has been seen spinning in its load phase for over ten
                    # minutes (2026-11-26, YCSB F, 2 threads); one retry on a fresh store.
                    echo "F2 failed or timed out after ${F2_TIMEOUT}s; retrying once"
                    mv "$OUT/logs/f2_${w}_${t}_${s}_$r.log" "$OUT/logs/f2_${w}_${t}_${s}_$r.failed.log"
                    read -r f2_ops f2_rate < <(run_f2 "$w" "$t" "$s" "$r") || true
                fi
                [ -n "${f2_rate:-}" ] || die "F2 run failed (logs in $OUT/logs)"
                f2_m=$(summarize "$OUT/logs/f2_${w}_${t}_${s}_$r.log.samples" "$f2_ops")
                echo "F2:     $f2_rate ops/s ($f2_ops ops); $f2_m"
                tk_want=$(( f2_ops < TIERKV_MAX_OPS ? f2_ops : TIERKV_MAX_OPS ))
                read -r tk_ops tk_rate < <(run_tierkv "$w" "$t" "$s" "$r" "$tk_want") || true
                [ -n "${tk_rate:-}" ] || die "tierkv run failed (logs in $OUT/logs)"
                tk_m=$(summarize "$OUT/logs/tierkv_${w}_${t}_${s}_$r.log.samples" "$tk_ops")
                echo "tierkv: $tk_rate ops/s ($tk_ops ops); $tk_m"
                echo "$w $t $s $r $f2_ops $f2_rate $f2_m $tk_rate $tk_m" >> "$ROWS"
            done
        done
    done
done

# ---- the table ----
MODE=""
[ "$QUICK" = 1 ] && MODE=" --quick"
LOAD_NOW=$(uptime | sed 's/.*load average/load average/')
"$PY" - "$ROWS" "$OUT/side-by-side.md" <<EOF
import sys, datetime
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
fio512, fio4k = $FIO_512, $FIO_4K
def num(x):
    try: return float(x)
    except ValueError: return None
def pair(a, b, fmt, ratio=True):
    a, b = num(a), num(b)
    if a is None or b is None: return "-"
    s = f"{fmt(a)} / {fmt(b)}"
    if ratio and b > 0: s += f" ({a / b:.2f})"
    return s
keys = {"ycsb": "YCSB scrambled zipfian", "records": "zipf 0.99 over the records"}
out = []
out.append("F2 / tierkv side by side (scripts/f2-side-by-side.sh$MODE), "
           + datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M UTC") + ".")
out.append("")
out.append("$RECORDS records of 8-byte keys and 100-byte values, run file of $RUN_KEYS keys; "
           "memory budget $((MEM_BYTES / 1024)) KiB for both (F2: hot log ${HOT_LOG_MB} MiB, cold log "
           "${COLD_LOG_MB} MiB, cold-index log ${COLD_INDEX_MB} MiB, read cache ${READ_CACHE_MB} MiB, "
           "$HOT_INDEX_BUCKETS hot-index buckets, $COLD_INDEX_CHUNKS cold-index chunks; tierkv: "
           "--memory-budget, fast tier $((FD_BUDGET / 1024)) KiB, both tiers on the same disk, "
           "--slow-device none, --systems $TIERKV_SYSTEM, --batch $TIERKV_BATCH gets in flight per client thread${TIERKV_ARGS:+, $TIERKV_ARGS}); F2 ran ${F2_SECONDS} s per cell, tierkv as many operations over the same run file "
           "(at most $TIERKV_MAX_OPS). "
           "Disk $DEVNAME, fio random-read ceiling at iodepth 32: {:,} IOPS at 512 B, {:,} at 4 KiB. "
           "Durability: tierkv's default (WAL written on every write, not fsynced); F2 has no WAL.".format(fio512, fio4k))
out.append("")
out.append("Each cell: F2 / tierkv (F2 / tierkv ratio). Machine $LOAD_NOW (at the end; a shared machine).")
out.append("")
out.append("| YCSB | threads | keys | ops/s | run s | read B/op | reads/op | read size B | reads/s (% of fio 512 B) | reads in flight | CPU cores | peak RSS MiB |")
out.append("|---|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
i0 = lambda x: f"{x:,.0f}"
f1 = lambda x: f"{x:,.1f}"
f2 = lambda x: f"{x:.2f}"
f3 = lambda x: f"{x:.3f}"
for r in rows:
    w, t, s, rep, f2ops, f2rate = r[:6]
    fm = r[6:14]
    tkrate = r[14]
    tm = r[15:23]
    rps = lambda m: "-" if num(m[4]) is None else f"{num(m[4]):,.0f} ({100 * num(m[4]) / fio512:.0f}%)"
    mib = lambda m: None if num(m[7]) is None else str(num(m[7]) / 1024)
    out.append(f"| {w} | {t} | {keys.get(s, s)} | {pair(f2rate, tkrate, i0)} | {pair(fm[0], tm[0], f1, False)} | {pair(fm[1], tm[1], i0)} | "
               f"{pair(fm[2], tm[2], f3)} | {pair(fm[3], tm[3], i0, False)} | {rps(fm)} / {rps(tm)} | "
               f"{pair(fm[5], tm[5], f2, False)} | {pair(fm[6], tm[6], f2, False)} | "
               f"{pair(mib(fm) or 'x', mib(tm) or 'x', f1, False)} |")
open(sys.argv[2], "w").write("\n".join(out) + "\n")
print("\n".join(out))
EOF
echo "wrote $OUT/side-by-side.md"
