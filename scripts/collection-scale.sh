#!/usr/bin/env bash
# Collection scaling of `tierkv serve` (issue 49's target): each operation on a collection of
# 1,000,000 elements against the same operation on one of 100, measured with Debian's
# redis-benchmark, small and big runs alternating (small, big, small, big). Target: the big
# collection's cost per operation within 2x the small one's, for LRANGE / ZRANGE of 100
# elements, ZADD, SADD and SISMEMBER.
#
#   scripts/collection-scale.sh [OUT_DIR]        (builds target/release/tierkv if needed)
#   TIERKV_BIN=path/to/tierkv scripts/collection-scale.sh OUT
#
# Environment:
#   TIERKV_BIN   the tierkv binary (default: cargo build --release -p tierkv-cli)
#   BIG          elements of the big collections (default 1000000)
#   SMALL        elements of the small collections (default 100; at least 100)
#   ROUNDS       alternating rounds, each one small run then one big run (default 2)
#   CLIENTS      redis-benchmark clients (default 8), pipeline 1
#   REQUESTS     most requests per run (default 100000)
#   RUN_SECONDS  a run's requests are sized from a short probe to take about this long,
#                at most REQUESTS (default 5): an operation that costs O(rank) on the big
#                collection still finishes
#   SETTLE_MAX   most seconds to wait, after the fill, for the server to go idle (default 180)
#   TIERKV_ARGS  extra `tierkv serve` flags (default none)
# Installs redis-tools with apt-get when redis-benchmark / redis-cli are missing (needs root).
#
# The collections (members and list elements are redis-benchmark's __rand_int__ form, 12
# zero-padded digits, i = 0 .. N-1; a sorted-set member i has score i):
#   {small,big}:list  RPUSH                LRANGE (head; middle of the big list)
#   {small,big}:z     ZADD                 ZRANGE by rank (head, middle) and BYSCORE LIMIT 0 100
#   {small,big}:set   SADD                 SISMEMBER of a random member in 0 .. 2N-1 (half hit)
#   {small,big}:sadd  SADD                 SADD of a random member in 0 .. 2N-1
#   {small,big}:zadd  ZADD                 ZADD of a random member in 0 .. 2N-1, random score
# The read tests' collections are never written after the fill; the write tests have their
# own (they grow: the small one to at most 2N, the big one by at most the requests made;
# so after its first few hundred requests a small SADD finds its member present, and writes
# nothing, while a big one adds a new member about half the time; a ZADD of a present
# member changes its score, a write at both sizes).
# The fill is redis-cli --pipe of generated RESP (1000 elements per command), timed per
# collection.
#
# Writes OUT_DIR/collections.md (the table, printed too), OUT_DIR/rows.txt (every run:
# test|name|round|size|requests|ops/s|server CPU us per request),
# OUT_DIR/fill.txt and the server log.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-bench-out/collection-scale}
big=${BIG:-1000000}
small=${SMALL:-100}
rounds=${ROUNDS:-2}
clients=${CLIENTS:-8}
requests=${REQUESTS:-100000}
run_seconds=${RUN_SECONDS:-5}
settle_max=${SETTLE_MAX:-180}

say() { echo "collection-scale: $*" >&2; }
die() { echo "collection-scale: FAIL: $*" >&2; exit 1; }

if ! command -v redis-benchmark >/dev/null || ! command -v redis-cli >/dev/null; then
  say "installing redis-tools"
  apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-tools >/dev/null \
    || die "redis-tools is not installed and apt-get install failed"
fi
if [ -z "${TIERKV_BIN:-}" ]; then
  cargo build --release -q -p tierkv-cli
  TIERKV_BIN=${CARGO_TARGET_DIR:-target}/release/tierkv
fi
[ -x "$TIERKV_BIN" ] || die "$TIERKV_BIN is not an executable"
command -v python3 >/dev/null || die "python3 not found"

mkdir -p "$out"
work=$(mktemp -d /tmp/collection-scale.XXXXXX)
pid=""
# Stops the server (SIGTERM, then SIGKILL after 30 s) and waits for it before removing the
# store, which it may still be writing while it closes.
cleanup() {
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 300); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

# The server, on a fresh store; the port from its "listening on" line.
"$TIERKV_BIN" serve --port 0 --db "$work/db" ${TIERKV_ARGS:-} >"$work/serve.log" 2>&1 &
pid=$!
port=""
for _ in $(seq 1 300); do
  port=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$work/serve.log" | head -1)
  [ -n "$port" ] && break
  kill -0 "$pid" 2>/dev/null || { cat "$work/serve.log" >&2; die "server exited at startup"; }
  sleep 0.1
done
[ -n "$port" ] || die "server did not start"
[ "$(redis-cli -p "$port" PING)" = PONG ] || die "no PONG"
say "tierkv serve (pid $pid) on port $port, store $work/db; $(nproc) cores; $TIERKV_BIN"

cpu_seconds() { awk -v hz="$(getconf CLK_TCK)" '{print ($14 + $15) / hz}' "/proc/$1/stat"; }
cli() { redis-cli -p "$port" "$@"; }

# gen TYPE KEY N > file: RESP commands filling KEY with elements 0 .. N-1, 1000 per command.
gen() {
  python3 - "$@" <<'EOF'
import sys
typ, key, n = sys.argv[1], sys.argv[2].encode(), int(sys.argv[3])
cmd = {"list": b"RPUSH", "set": b"SADD", "zset": b"ZADD"}[typ]
def bulk(b):
    return b"$%d\r\n%s\r\n" % (len(b), b)
out = sys.stdout.buffer
for lo in range(0, n, 1000):
    hi = min(n, lo + 1000)
    parts = [bulk(cmd), bulk(key)]
    for i in range(lo, hi):
        m = b"%012d" % i
        if typ == "zset":
            parts.append(bulk(b"%d" % i))
        parts.append(bulk(m))
    out.write(b"*%d\r\n" % len(parts))
    out.write(b"".join(parts))
EOF
}

# fill TYPE KEY N: fills KEY and records the time in fill.txt.
: >"$out/fill.txt"
fill() {
  local typ=$1 key=$2 n=$3 t0 t1 res
  gen "$typ" "$key" "$n" >"$work/fill.resp"
  t0=$(date +%s.%N)
  res=$(redis-cli -p "$port" --pipe <"$work/fill.resp" 2>&1 | tr '\r' '\n')
  t1=$(date +%s.%N)
  echo "$res" | grep -q "errors: 0," || { echo "$res" >&2; die "fill of $key reported errors"; }
  python3 -c "import sys; t=float(sys.argv[2])-float(sys.argv[1]); n=int(sys.argv[3]); \
print(f'{sys.argv[4]} {sys.argv[5]} {n} {t:.2f} {n/t:.0f}')" "$t0" "$t1" "$n" "$typ" "$key" \
    | tee -a "$out/fill.txt" >&2
}

say "filling (type key elements seconds elements/s)"
for size in small big; do
  if [ "$size" = small ]; then n=$small; else n=$big; fi
  fill list "$size:list" "$n"
  fill zset "$size:z" "$n"
  fill set "$size:set" "$n"
  fill set "$size:sadd" "$n"
  fill zset "$size:zadd" "$n"
done
rm -f "$work/fill.resp"
for size in small big; do
  if [ "$size" = small ]; then n=$small; else n=$big; fi
  [ "$(cli LLEN "$size:list")" = "$n" ] || die "LLEN $size:list"
  for k in z zadd; do [ "$(cli ZCARD "$size:$k")" = "$n" ] || die "ZCARD $size:$k"; done
  for k in set sadd; do [ "$(cli SCARD "$size:$k")" = "$n" ] || die "SCARD $size:$k"; done
done

# Settle: wait until the server uses under 5% of a core over 2 s (flushes, compactions).
settle_t0=$(date +%s)
while :; do
  c0=$(cpu_seconds "$pid"); sleep 2; c1=$(cpu_seconds "$pid")
  python3 -c "import sys; sys.exit(0 if float(sys.argv[2])-float(sys.argv[1]) < 0.1 else 1)" "$c0" "$c1" && break
  (( $(date +%s) - settle_t0 >= settle_max )) && { say "server still busy after ${settle_max}s; measuring anyway"; break; }
done
settle_s=$(( $(date +%s) - settle_t0 ))
db_mib=$(du -sm "$work/db" | cut -f1)
fill_s=$(awk '{s += $4} END {printf "%.1f", s}' "$out/fill.txt")
say "fill ${fill_s} s (the redis-cli --pipe runs); settled after ${settle_s} s; store ${db_mib} MiB"

# The tests: name | -r for small | -r for big | small command | big command (-r 0: none).
# Middle ranges of the big collections start at BIG/2.
mid=$((big / 2)); mid_end=$((mid + 99)); smend=$((small - 1))
tests=(
  "LRANGE 100, head|0|0|LRANGE small:list 0 99|LRANGE big:list 0 99"
  "LRANGE 100, middle|0|0|LRANGE small:list 0 99|LRANGE big:list $mid $mid_end"
  "ZRANGE 100 by rank, head|0|0|ZRANGE small:z 0 99|ZRANGE big:z 0 99"
  "ZRANGE 100 by rank, middle|0|0|ZRANGE small:z 0 99|ZRANGE big:z $mid $mid_end"
  "ZRANGE BYSCORE LIMIT 0 100, middle|0|0|ZRANGE small:z 0 $smend BYSCORE LIMIT 0 100|ZRANGE big:z $mid $mid_end BYSCORE LIMIT 0 100"
  "ZADD (random score, member of 2N)|$((2 * small))|$((2 * big))|ZADD small:zadd __rand_int__ __rand_int__|ZADD big:zadd __rand_int__ __rand_int__"
  "SADD (member of 2N)|$((2 * small))|$((2 * big))|SADD small:sadd __rand_int__|SADD big:sadd __rand_int__"
  "SISMEMBER (member of 2N: half hit)|$((2 * small))|$((2 * big))|SISMEMBER small:set __rand_int__|SISMEMBER big:set __rand_int__"
)

# Each range command must return 100 elements (a check of the command, not of speed).
for t in "${tests[@]:0:5}"; do
  IFS='|' read -r name rs rb cs cb <<<"$t"
  for c in "$cs" "$cb"; do
    # shellcheck disable=SC2086
    got=$(cli $c | wc -l)
    [ "$got" = 100 ] || die "$c returned $got lines, expected 100"
  done
done

# bench R N CMD...: one redis-benchmark run; prints its requests per second.
bench() {
  local r=$1 n=$2; shift 2
  local args=(-p "$port" -c "$clients" -P 1 -n "$n" -q)
  [ "$r" != 0 ] && args+=(-r "$r")
  local res line
  res=$(redis-benchmark "${args[@]}" "$@" 2>&1 | tr '\r' '\n')
  if echo "$res" | grep -qiE 'error|could not'; then echo "$res" >&2; die "redis-benchmark $*: errors"; fi
  line=$(echo "$res" | grep -E "requests per second" | tail -1)
  [ -n "$line" ] || { echo "$res" >&2; die "redis-benchmark $*: no result"; }
  echo "$line" | sed -E 's/.*: ([0-9.]+) requests per second.*/\1/'
}

# requests_for R CMD...: a run's request count: RUN_SECONDS at the rate of a probe (4
# requests per client, then ten times more while the probe takes under half a second),
# at most REQUESTS and at least 4 per client.
requests_for() {
  local r=$1; shift
  local n=$((4 * clients)) rps
  while :; do
    rps=$(bench "$r" "$n" "$@")
    python3 -c "import sys; sys.exit(0 if int(sys.argv[1]) / float(sys.argv[2]) < 0.5 and int(sys.argv[1]) < int(sys.argv[3]) else 1)" \
      "$n" "$rps" "$requests" || break
    n=$((n * 10))
  done
  python3 -c "import sys; print(max(4 * int(sys.argv[3]), min(int(sys.argv[2]), int(float(sys.argv[1]) * float(sys.argv[4])))))" \
    "$rps" "$requests" "$clients" "$run_seconds"
}

# Every run: ops/s from redis-benchmark, and the server's CPU seconds (utime + stime from
# /proc) over the run, for CPU microseconds per request.
: >"$work/rows"
ti=0
for t in "${tests[@]}"; do
  ti=$((ti + 1))
  IFS='|' read -r name rs rb cs cb <<<"$t"
  # shellcheck disable=SC2086
  ns=$(requests_for "$rs" $cs); nb=$(requests_for "$rb" $cb)
  for ((round = 1; round <= rounds; round++)); do
    for size in small big; do
      if [ "$size" = small ]; then r=$rs; c=$cs; n=$ns; else r=$rb; c=$cb; n=$nb; fi
      before=$(cpu_seconds "$pid")
      # shellcheck disable=SC2086
      rps=$(bench "$r" "$n" $c)
      after=$(cpu_seconds "$pid")
      printf '%s|%s|%s|%s|%s|%s|%s\n' "$ti" "$name" "$round" "$size" "$n" "$rps" \
        "$(python3 -c "import sys; print(f'{1e6 * (float(sys.argv[2]) - float(sys.argv[1])) / int(sys.argv[3]):.1f}')" "$before" "$after" "$n")" \
        | tee -a "$work/rows" >&2
    done
  done
done
cp "$work/rows" "$out/rows.txt"
cp "$work/serve.log" "$out/serve.log"

python3 - "$out" "$big" "$small" "$clients" "$rounds" "$(nproc)" "$fill_s" "$settle_s" "$db_mib" <<'EOF'
import statistics, sys
out, big, small, clients, rounds, cores, fill_s, settle_s, db_mib = sys.argv[1:]
rows = [l.rstrip("\n").split("|") for l in open(f"{out}/rows.txt")]
by = {}
order = []
for ti, name, rnd, size, n, rps, cpu in rows:
    if name not in by:
        order.append(name)
        by[name] = {"small": [], "big": [], "n": {}, "cpu": {"small": [], "big": []}}
    by[name][size].append(float(rps))
    by[name]["cpu"][size].append(float(cpu))
    by[name]["n"][size] = int(n)
lines = [
    f"Collections of {int(small):,} (small) and {int(big):,} (big) elements; redis-benchmark "
    f"-c {clients} -P 1; median of {rounds} alternating runs each; cost ratio = small ops/s / big ops/s; "
    f"target: within 2x. {cores} cores. Server CPU: the server's utime + stime over a run per request "
    f"(median of the runs), small / big.",
    "",
    "| operation | small ops/s (runs) | big ops/s (runs) | cost ratio | within 2x? | server CPU us/request small / big | requests per run small / big |",
    "|---|--:|--:|--:|:-:|--:|--:|",
]
fails = []
for name in order:
    s, b = by[name]["small"], by[name]["big"]
    ms, mb = statistics.median(s), statistics.median(b)
    ratio = ms / mb
    ok = ratio <= 2.0
    if not ok:
        fails.append(name)
    lines.append(
        f"| {name} | {ms:,.0f} ({', '.join(f'{x:,.0f}' for x in s)}) | {mb:,.0f} ({', '.join(f'{x:,.0f}' for x in b)}) | "
        f"{ratio:.2f} | {'pass' if ok else '**FAIL**'} | "
        f"{statistics.median(by[name]['cpu']['small']):,.1f} / {statistics.median(by[name]['cpu']['big']):,.1f} | "
        f"{by[name]['n']['small']:,} / {by[name]['n']['big']:,} |")
fill = [l.split() for l in open(f"{out}/fill.txt")]
lines += ["", f"Fill (redis-cli --pipe, 1000 elements per command): {fill_s} s in all; the server then "
          f"idle after {settle_s} s; store {db_mib} MiB.", "",
          "| type | key | elements | seconds | elements/s |", "|---|---|--:|--:|--:|"]
for typ, key, n, sec, rate in fill:
    lines.append(f"| {typ} | {key} | {int(n):,} | {sec} | {int(rate):,} |")
text = "\n".join(lines) + "\n"
open(f"{out}/collections.md", "w").write(text)
print(text)
EOF
