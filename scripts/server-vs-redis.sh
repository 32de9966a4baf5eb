#!/usr/bin/env bash
# `tierkv serve` against Debian's `redis-server` with `redis-benchmark`, on cached data, the
# two servers alternating round by round on the same machine (issue 47's server target):
# GET and SET of 100-byte values over 100,000 keys, 50 clients, pipelines of 16 and of 1.
# Each server is loaded first (every key SET once), so every GET finds its key, and a
# tierkv GET is answered from memory (memtable, caches) rather than the disk.
#
#   scripts/server-vs-redis.sh [OUT_DIR]
#
# Environment:
#   TIERKV      the tierkv binary (default target/release/tierkv)
#   ROUNDS      alternating rounds (default 3)
#   REQUESTS    requests per redis-benchmark test (default 1,000,000; -P 1: a fifth)
#   KEYS        key space (default 100000)
#   TIERKV_ARGS extra `tierkv serve` flags (default none)
# Writes OUT_DIR/summary.md: per workload, each round's req/s for both servers, the medians
# and the tierkv / redis-server ratio of the medians; and each server's CPU seconds
# (utime + stime from /proc) per request over the measured tests.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-bench-out/server-vs-redis}
bin=${TIERKV:-${CARGO_TARGET_DIR:-target}/release/tierkv}
rounds=${ROUNDS:-3}
requests=${REQUESTS:-1000000}
keys=${KEYS:-100000}
die() { echo "server-vs-redis: $*" >&2; exit 1; }
[ -x "$bin" ] || die "$bin not found: cargo build --release -p tierkv-cli"
command -v redis-server >/dev/null || die "redis-server not found (apt-get install redis-server)"
command -v redis-benchmark >/dev/null || die "redis-benchmark not found (apt-get install redis-tools)"
mkdir -p "$out"
work=$(mktemp -d /tmp/server-vs-redis.XXXXXX)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT

# A free port: the kernel's pick for a socket bound to port 0.
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_ping() {
    for _ in $(seq 100); do
        [ "$(redis-cli -p "$1" PING 2>/dev/null)" = PONG ] && return 0
        sleep 0.1
    done
    die "no PONG on port $1"
}
cpu_seconds() { awk -v hz="$(getconf CLK_TCK)" '{print ($14 + $15) / hz}' "/proc/$1/stat"; }

tport=$(free_port)
"$bin" serve --db "$work/tierkv" --port "$tport" ${TIERKV_ARGS:-} > "$work/tierkv.log" 2>&1 &
tpid=$!; pids+=("$tpid")
rport=$(free_port)
redis-server --port "$rport" --bind 127.0.0.1 --save '' --appendonly no --dir "$work" \
    > "$work/redis.log" 2>&1 &
rpid=$!; pids+=("$rpid")
wait_ping "$tport"; wait_ping "$rport"

# Every key once, so the GET tests find them: redis-benchmark's keys (`key:` and 12 digits),
# written in order through `redis-cli --pipe` (a redis-benchmark load of random keys leaves
# about a third of them unset, and a GET of those tests a miss).
python3 - "$keys" > "$work/load.resp" <<'EOF'
import sys
value = "x" * 100
out = sys.stdout
for i in range(int(sys.argv[1])):
    key = "key:%012d" % i
    out.write(f"*3\r\n$3\r\nSET\r\n${len(key)}\r\n{key}\r\n${len(value)}\r\n{value}\r\n")
EOF
for port in "$tport" "$rport"; do
    redis-cli -p "$port" --pipe < "$work/load.resp" > /dev/null
done

# test, pipeline depth, requests
tests=("get 16 $requests" "set 16 $requests" "get 1 $((requests / 5))" "set 1 $((requests / 5))")
: > "$work/rows"
for ((r = 1; r <= rounds; r++)); do
    # Alternate which server goes first in each round.
    if ((r % 2)); then order="tierkv redis"; else order="redis tierkv"; fi
    for name in $order; do
        if [ "$name" = tierkv ]; then port=$tport; pid=$tpid; else port=$rport; pid=$rpid; fi
        for t in "${tests[@]}"; do
            read -r test depth n <<< "$t"
            before=$(cpu_seconds "$pid")
            line=$(redis-benchmark -p "$port" -t "$test" -n "$n" -r "$keys" -d 100 -P "$depth" -c 50 -q \
                | tr '\r' '\n' | grep -E "requests per second" | tail -1)
            after=$(cpu_seconds "$pid")
            rps=$(echo "$line" | sed -E 's/.*: ([0-9.]+) requests per second.*/\1/')
            echo "$r $name $test $depth $rps $n $before $after" | tee -a "$work/rows"
        done
    done
done
cp "$work/rows" "$out/rows.txt"

python3 - "$out" <<'EOF'
import statistics, sys
out = sys.argv[1]
rows = [l.split() for l in open(f"{out}/rows.txt")]
cells = {}
cpu = {}
for r, name, test, depth, rps, n, before, after in rows:
    cells.setdefault((test, depth), {}).setdefault(name, []).append(float(rps))
    c = cpu.setdefault((test, depth, name), [0.0, 0])
    c[0] += float(after) - float(before)
    c[1] += int(n)
lines = ["| test | pipeline | tierkv req/s (rounds) | redis-server req/s (rounds) | ratio of medians | CPU us/request tierkv / redis |",
         "|---|--:|---|---|--:|---|"]
for (test, depth), by in cells.items():
    t, rd = by.get("tierkv", []), by.get("redis", [])
    mt, mr = statistics.median(t), statistics.median(rd)
    ct, cr = cpu[(test, depth, "tierkv")], cpu[(test, depth, "redis")]
    lines.append(f"| {test.upper()} | {depth} | {mt:,.0f} ({', '.join(f'{x:,.0f}' for x in t)}) | "
                 f"{mr:,.0f} ({', '.join(f'{x:,.0f}' for x in rd)}) | {mt / mr:.2f} | "
                 f"{1e6 * ct[0] / ct[1]:.2f} / {1e6 * cr[0] / cr[1]:.2f} |")
open(f"{out}/summary.md", "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
EOF
