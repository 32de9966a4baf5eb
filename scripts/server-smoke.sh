#!/usr/bin/env bash
# Smoke test of `tierkv serve` with real Redis tools (Debian's redis-tools):
#   1. redis-cli commands and their replies;
#   2. redis-benchmark -t set,get,incr,mget,mset -P 16 (and MGET) must finish with no error;
#   3. SHUTDOWN stops the server cleanly (exit 0, store flushed);
#   4. SIGTERM stops it cleanly too, and the data is there after a restart;
#   5. with --sync, acknowledged writes survive kill -9;
#   6. nonsense options (an empty password, a zero limit) are refused at startup (exit 2).
#
# Usage: scripts/server-smoke.sh            (builds target/release/tierkv if needed)
#        TIERKV_BIN=path/to/tierkv scripts/server-smoke.sh
# Installs redis-tools with apt-get when redis-benchmark is missing (needs root).
set -euo pipefail
cd "$(dirname "$0")/.."

die() { echo "server-smoke: FAIL: $*" >&2; exit 1; }
say() { echo "server-smoke: $*"; }

if ! command -v redis-benchmark >/dev/null || ! command -v redis-cli >/dev/null; then
  say "installing redis-tools"
  apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-tools >/dev/null \
    || die "redis-tools is not installed and apt-get install failed"
fi

if [ -z "${TIERKV_BIN:-}" ]; then
  cargo build --release -q -p tierkv-cli
  TIERKV_BIN=${CARGO_TARGET_DIR:-target}/release/tierkv
fi

work=$(mktemp -d)
pid=""
cleanup() {
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then kill -9 "$pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

# start_server LOG ARGS...: starts `tierkv serve --port 0 ARGS` in the background; sets pid
# and port (read from the "listening on" line).
start_server() {
  local log=$1; shift
  "$TIERKV_BIN" serve --port 0 "$@" >"$log" 2>&1 &
  pid=$!
  port=""
  for _ in $(seq 1 300); do
    port=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$log" | head -1)
    [ -n "$port" ] && break
    kill -0 "$pid" 2>/dev/null || { cat "$log" >&2; die "server exited at startup"; }
    sleep 0.1
  done
  [ -n "$port" ] || die "server did not start"
  [ "$(redis-cli -p "$port" PING)" = PONG ] || die "no PONG"
}

# wait_exit: waits for the server to exit and checks its status is 0.
wait_exit() {
  local status=0
  for _ in $(seq 1 300); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  wait "$pid" || status=$?
  [ "$status" = 0 ] || die "server exited with status $status"
  pid=""
}

# expect WANT CMD...: runs redis-cli CMD and compares its output.
expect() {
  local want=$1; shift
  local got
  got=$(redis-cli -p "$port" "$@" 2>&1)
  [ "$got" = "$want" ] || die "redis-cli $*: expected [$want], got [$got]"
}

db="$work/db"
start_server "$work/serve1.log" --db "$db"
say "server on port $port"

expect PONG PING
expect OK SET greeting hello
expect hello GET greeting
expect 1 INCR counter
expect 11 INCRBY counter 10
expect 10 DECR counter
expect 10 APPEND greeting ', you'
expect 10 STRLEN greeting
expect OK MSET a 1 b 2
expect "$(printf '1\n2\n')" MGET a b
expect "" SET a 3 NX
expect 2 EXISTS a b
expect 1 DEL b
expect OK SELECT 0
expect "$(printf 'save\n')" CONFIG GET save
expect "ERR value is not an integer or out of range" INCR greeting
expect OK SET t x EX 10
ttl=$(redis-cli -p "$port" TTL t)
{ [ "$ttl" -ge 9 ] && [ "$ttl" -le 10 ]; } || die "TTL after SET EX 10: [$ttl]"
expect 2 HSET user:1 name ada visits 1
expect 2 HINCRBY user:1 visits 1
expect hash TYPE user:1
expect OK SET gone x PX 1
sleep 0.1
expect "" GET gone
# Replies are read whole before grep looks at them: `grep -q` stops at its first match, and
# with pipefail a redis-cli still writing would die of SIGPIPE and fail the check.
scan=$(redis-cli -p "$port" SCAN 0 COUNT 100)
grep -qx counter <<<"$scan" || die "SCAN misses a key"
[ "$(redis-cli -p "$port" DBSIZE)" = 5 ] || die "DBSIZE"
info=$(redis-cli -p "$port" INFO)
grep -q '^fd_hit_rate:' <<<"$info" || die "INFO lacks fd_hit_rate"
count=$(redis-cli -p "$port" COMMAND COUNT)
grep -q '^[0-9]' <<<"$count" || die "COMMAND COUNT"
say "redis-cli commands OK"

bench="$work/bench.txt"
# redis-benchmark has no built-in MGET test (-t ignores unknown names), so MGET of 10 keys
# is also run as an explicit command.
{
  redis-benchmark -p "$port" -t set,get,incr,mget,mset -P 16 -n 20000 -q
  redis-benchmark -p "$port" -P 16 -n 20000 -r 100000 -q \
    MGET key:__rand_int__ key:__rand_int__ key:__rand_int__ key:__rand_int__ key:__rand_int__ \
    key:__rand_int__ key:__rand_int__ key:__rand_int__ key:__rand_int__ key:__rand_int__
} 2>&1 | tr '\r' '\n' >"$bench" || { cat "$bench"; die "redis-benchmark failed"; }
grep ': [0-9.]* requests per second' "$bench" | sed 's/^ *//'
if grep -qiE 'error|could not' "$bench"; then cat "$bench"; die "redis-benchmark reported errors"; fi
for t in SET GET INCR MSET MGET; do
  grep -q "^ *${t}.*: [0-9.]* requests per second" "$bench" \
    || { cat "$bench"; die "redis-benchmark did not complete $t"; }
done
say "redis-benchmark OK"

redis-cli -p "$port" SHUTDOWN >/dev/null 2>&1 || true
wait_exit
grep -q "store flushed and closed" "$work/serve1.log" || die "no clean close after SHUTDOWN"
say "SHUTDOWN OK"

start_server "$work/serve2.log" --db "$db"
expect "hello, you" GET greeting
kill -TERM "$pid"
wait_exit
grep -q "store flushed and closed" "$work/serve2.log" || die "no clean close after SIGTERM"
say "SIGTERM OK"

start_server "$work/serve3.log" --db "$db" --sync
expect OK SET durable yes
expect 11 INCR counter
{ kill -9 "$pid" && wait "$pid"; } 2>/dev/null || true
pid=""
start_server "$work/serve4.log" --db "$db"
expect yes GET durable
expect 11 GET counter
redis-cli -p "$port" SHUTDOWN >/dev/null 2>&1 || true
wait_exit
say "--sync writes survive kill -9: OK"

for bad in "--requirepass=" "--max-bulk=0" "--max-clients=0" "--threads=0" "--max-bulk=1GiB"; do
  status=0
  "$TIERKV_BIN" serve --db "$work/refused" --port 0 "$bad" >"$work/refused.log" 2>&1 || status=$?
  [ "$status" = 2 ] || { cat "$work/refused.log" >&2; die "serve $bad: exit $status, expected 2"; }
  grep -q "invalid" "$work/refused.log" || { cat "$work/refused.log" >&2; die "serve $bad: no clear error"; }
  [ ! -e "$work/refused" ] || die "serve $bad created the store"
done
say "invalid options refused: OK"
say "all OK"
