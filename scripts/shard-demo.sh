#!/usr/bin/env bash
# Sharding tierkv beyond one server with twemproxy (Debian package `nutcracker`): starts three
# `tierkv serve` instances and nutcracker in front of them, all on loopback; writes keys
# through the proxy, reads them back through it (GET and MGET, which twemproxy splits across
# shards), and checks that every server holds a share of the keys and that the shares add up.
#
# Usage: scripts/shard-demo.sh [KEYS]     (default 600 keys)
#        TIERKV_BIN=path/to/tierkv scripts/shard-demo.sh
# Installs nutcracker and redis-tools with apt-get when missing (needs root).
# See docs/DEPLOYMENT.md for the configuration it uses.
set -euo pipefail
cd "$(dirname "$0")/.."

keys=${1:-600}
die() { echo "shard-demo: FAIL: $*" >&2; exit 1; }
say() { echo "shard-demo: $*"; }

if ! command -v nutcracker >/dev/null || ! command -v redis-cli >/dev/null; then
  say "installing nutcracker and redis-tools"
  apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nutcracker redis-tools >/dev/null \
    || die "nutcracker/redis-tools are not installed and apt-get install failed"
fi
nutcracker=$(command -v nutcracker)

if [ -z "${TIERKV_BIN:-}" ]; then
  cargo build --release -q -p tierkv-cli
  TIERKV_BIN=${CARGO_TARGET_DIR:-target}/release/tierkv
fi

work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

# A free loopback port for the proxy (the servers pick their own with --port 0).
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

ports=()
for i in 1 2 3; do
  log="$work/serve$i.log"
  "$TIERKV_BIN" serve --db "$work/shard$i" --port 0 >"$log" 2>&1 &
  pids+=($!)
  port=""
  for _ in $(seq 1 300); do
    port=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$log" | head -1)
    [ -n "$port" ] && break
    sleep 0.1
  done
  [ -n "$port" ] || { cat "$log" >&2; die "server $i did not start"; }
  ports+=("$port")
done
say "tierkv servers on ports ${ports[*]}"

proxy_port=$(free_port)
conf="$work/nutcracker.yml"
cat >"$conf" <<EOF
tierkv:
  listen: 127.0.0.1:$proxy_port
  hash: fnv1a_64
  distribution: ketama
  redis: true
  auto_eject_hosts: false
  timeout: 5000
  server_connections: 1
  servers:
   - 127.0.0.1:${ports[0]}:1 shard1
   - 127.0.0.1:${ports[1]}:1 shard2
   - 127.0.0.1:${ports[2]}:1 shard3
EOF
"$nutcracker" --test-conf --conf-file="$conf" >/dev/null 2>&1 || die "nutcracker rejects $conf"
"$nutcracker" --conf-file="$conf" --output="$work/nutcracker.log" \
  --stats-port="$(free_port)" --stats-addr=127.0.0.1 &
pids+=($!)
for _ in $(seq 1 100); do
  [ "$(redis-cli -p "$proxy_port" PING 2>/dev/null)" = PONG ] && break
  sleep 0.1
done
[ "$(redis-cli -p "$proxy_port" PING 2>/dev/null)" = PONG ] || { cat "$work/nutcracker.log" >&2; die "proxy not answering"; }
say "nutcracker on port $proxy_port"

# Write through the proxy (one redis-cli reading commands from stdin).
for i in $(seq 1 "$keys"); do echo "SET user:$i value-$i"; done | redis-cli -p "$proxy_port" >"$work/set.out"
[ "$(grep -c '^OK$' "$work/set.out")" = "$keys" ] || die "not every SET through the proxy returned OK"
for i in $(seq 1 50); do echo "INCR hits:$((i % 5))"; done | redis-cli -p "$proxy_port" >/dev/null

# Read back through the proxy: single GETs and one MGET spanning every shard.
for i in $(seq 1 "$keys"); do echo "GET user:$i"; done | redis-cli -p "$proxy_port" >"$work/get.out"
for i in $(seq 1 "$keys"); do echo "value-$i"; done | cmp -s - "$work/get.out" || die "GET through the proxy returned wrong values"
mget=$(redis-cli -p "$proxy_port" MGET user:1 user:2 user:3 user:4 user:5 user:6 user:7 user:8 user:9 | tr '\n' ' ')
[ "$mget" = "value-1 value-2 value-3 value-4 value-5 value-6 value-7 value-8 value-9 " ] || die "MGET via proxy: $mget"
hits=0
for i in 0 1 2 3 4; do hits=$((hits + $(redis-cli -p "$proxy_port" GET "hits:$i"))); done
[ "$hits" = 50 ] || die "INCR via proxy lost updates: $hits"

# Each shard holds a share, and the shares add up.
total=0
for i in 0 1 2; do
  n=$(redis-cli -p "${ports[$i]}" DBSIZE)
  say "shard$((i + 1)) (port ${ports[$i]}) holds $n keys"
  [ "$n" -gt 0 ] || die "shard$((i + 1)) holds no key"
  total=$((total + n))
done
[ "$total" = $((keys + 5)) ] || die "shards hold $total keys, expected $((keys + 5))"

# Stop: the proxy first, then each server cleanly.
kill "${pids[3]}" 2>/dev/null || true
for i in 0 1 2; do
  redis-cli -p "${ports[$i]}" SHUTDOWN >/dev/null 2>&1 || true
done
for i in 0 1 2; do
  wait "${pids[$i]}" || die "server $((i + 1)) exited with an error"
  grep -q "store flushed and closed" "$work/serve$((i + 1)).log" || die "server $((i + 1)) did not close cleanly"
done
say "all OK"
