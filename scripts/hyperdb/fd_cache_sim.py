#!/usr/bin/env python3
"""How much of YCSB C's slow-disk reads a record cache on the fast disk could take, in
HyperDB's shape (zipfian 0.99 over 4M keys), by admission policy: a simulation, not the
engine. Memory is an LRU of MEM records; the fast-disk cache sees only memory's misses and
holds FD records, either by recency (LRU: every miss admitted) or by frequency (a miss is
admitted over the cache's least-counted record only when its key has been read more often:
TinyLFU's rule with exact counts, an upper bound for a sketch). Prints slow reads per
operation (misses of both) for each.

    scripts/hyperdb/fd_cache_sim.py OPS MEM FD[,FD...]      # e.g. 2000000 200000 200000,400000

docs/bench/hyperdb-ycsb.md cites its output.
"""
import heapq
import sys
from collections import OrderedDict

import numpy as np

KEYS = 4_000_000


def zipfian(ops, seed=1):
    rng = np.random.default_rng(seed)
    p = np.arange(1, KEYS + 1, dtype=np.float64) ** -0.99
    cdf = np.cumsum(p / p.sum())
    return np.searchsorted(cdf, rng.random(ops)).tolist()


def lru_misses(stream, cap):
    cache, out = OrderedDict(), []
    for k in stream:
        if k in cache:
            cache.move_to_end(k)
        else:
            out.append(k)
            cache[k] = None
            if len(cache) > cap:
                cache.popitem(last=False)
    return out


def lfu_admitted_misses(stream, cap):
    count, cache, heap, misses = {}, set(), [], 0
    for k in stream:
        c = count.get(k, 0) + 1
        count[k] = c
        if k in cache:
            heapq.heappush(heap, (c, k))
            continue
        misses += 1
        if len(cache) < cap:
            cache.add(k)
            heapq.heappush(heap, (c, k))
            continue
        while True:  # the least-counted cached key (entries go stale as counts rise)
            vc, v = heap[0]
            if v in cache and count[v] == vc:
                break
            heapq.heappop(heap)
        if c > vc:
            heapq.heappop(heap)
            cache.discard(v)
            cache.add(k)
            heapq.heappush(heap, (c, k))
    return misses


def main():
    ops, mem = int(sys.argv[1]), int(sys.argv[2])
    fds = [int(x) for x in sys.argv[3].split(",")]
    keys = zipfian(ops)
    missed = lru_misses(keys, mem)
    print(f"{ops:,} reads, memory LRU of {mem:,}: {len(missed) / ops:.3f} misses per read")
    for fd in fds:
        lru = len(lru_misses(missed, fd)) / ops
        lfu = lfu_admitted_misses(missed, fd) / ops
        print(f"  fast-disk cache of {fd:,}: by recency {lru:.3f}, by frequency {lfu:.3f}")


if __name__ == "__main__":
    main()
