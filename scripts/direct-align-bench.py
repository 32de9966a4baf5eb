#!/usr/bin/env python3
# O_DIRECT random reads on this machine's disk at one thread: reads aligned to 4 KiB pages (what
# tierkv did before format 2) against reads aligned to 512-byte sectors (what it does now),
# and small against large reads. Writes a 1 GiB file at /tmp/blocks-align.dat (remove it
# after). Usage: python3 scripts/direct-align-bench.py. Prints reads/s per round and the mean.
import os, mmap, random, time
path='/tmp/blocks-align.dat'; size=1<<30
if not os.path.exists(path) or os.path.getsize(path)!=size:
    with open(path,'wb') as f:
        chunk=os.urandom(1<<20)
        for _ in range(size>>20): f.write(chunk)
        f.flush(); os.fsync(f.fileno())
fd=os.open(path, os.O_RDONLY|os.O_DIRECT)
buf=mmap.mmap(-1, 1<<16)
def run(n, length, align):
    t=time.time()
    for _ in range(n):
        off=random.randrange(0, (size-65536)//align)*align
        os.preadv(fd,[memoryview(buf)[:length]],off)
    return n/(time.time()-t)
res={}
for rnd in range(4):
    for name,(length,align) in {'4K-aligned 20480 B':(20480,4096),'512-aligned 17920 B':(17920,512),'512-aligned 16896 B':(16896,512),'4K-aligned 8192':(8192,4096),'512-aligned 6144':(6144,512)}.items():
        res.setdefault(name,[]).append(run(1500,length,align))
for k,v in res.items(): print(f"{k:40s}", " ".join(f"{x:7.0f}" for x in v), f"mean {sum(v)/len(v):7.0f}")
