#!/usr/bin/env bash
# Regenerates the seed corpora in fuzz/seeds/ from real files: a two-tier store with
# promotion written by the test `write_fuzz_seeds` (tables, WALs, manifests, RALT files),
# and RESP traffic of redis-cli and redis-benchmark against `tierkv serve`, captured by a
# small proxy. Needs redis-cli, redis-benchmark and python3.
set -euo pipefail
cd "$(dirname "$0")/.."
out=fuzz/seeds
rm -rf "$out"
mkdir -p "$out/resp"
TIERKV_FUZZ_SEEDS="$PWD/$out" cargo test -q -p tierkv --test fuzz_regressions \
    write_fuzz_seeds -- --ignored --exact >/dev/null

cargo build -q -p tierkv-cli
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
./target/debug/tierkv serve --db "$work/db" --port 6391 2>"$work/serve.log" &
# A proxy on 6392 that forwards to the server and records what clients send, one file per
# connection.
python3 - "$work" <<'PY' &
import socket, sys, threading, os
work = sys.argv[1]
ls = socket.socket(); ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind(("127.0.0.1", 6392)); ls.listen()
n = 0
def pipe(a, b, log):
    while True:
        d = a.recv(65536)
        if not d:
            break
        if log:
            log.write(d); log.flush()
        b.sendall(d)
    try: b.shutdown(socket.SHUT_WR)
    except OSError: pass
while True:
    c, _ = ls.accept()
    s = socket.create_connection(("127.0.0.1", 6391))
    log = open(os.path.join(work, f"conn-{n}"), "wb"); n += 1
    threading.Thread(target=pipe, args=(c, s, log), daemon=True).start()
    threading.Thread(target=pipe, args=(s, c, None), daemon=True).start()
PY
for _ in $(seq 50); do redis-cli -p 6392 PING >/dev/null 2>&1 && break; sleep 0.2; done
cli() { redis-cli -p 6392 "$@" >/dev/null; }
cli SET greeting "hello world"
cli MSET k1 v1 k2 "a \"quoted\" value" k3 ""
cli INCR counter
cli MGET k1 k2 nope
cli EXPIRE k1 100
cli DEL k2 k3
cli SCAN 0 MATCH 'k*' COUNT 10
cli HELLO 3
printf 'SET inline value\r\nGET inline\r\nPING "with spaces"\r\n' | redis-cli -p 6392 >/dev/null
redis-benchmark -p 6392 -n 40 -c 1 -P 8 -t set,get,incr,lpush -d 16 -q >/dev/null 2>&1 || true
sleep 0.5
i=0
for f in "$work"/conn-*; do
    [ -s "$f" ] || continue
    # First byte of a resp input: bits 0-5 chunk size - 1, bit 6 authenticated.
    { printf '\x47'; cat "$f"; } >"$out/resp/redis-cli-$i"
    i=$((i + 1))
done
# Hand-written frames: errors and limits (small limits: bit 7).
printf '\xc3*2\r\n$3\r\nGET\r\n$100\r\n' >"$out/resp/oversized-bulk"
printf '\x40*1\r\n$4\r\nPING\r\n*-1\r\n*0\r\n  \r\nECHO "a\\x41\\n" '"'"'b'"'"'\r\n' >"$out/resp/mixed"
redis-cli -p 6391 SHUTDOWN NOSAVE >/dev/null 2>&1 || true
du -sh "$out"/* | sed 's|^|seeds: |'
