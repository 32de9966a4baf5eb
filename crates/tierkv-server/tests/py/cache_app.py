"""A small realistic program using redis-py against tierkv serve: a page cache with TTLs,
a hash per user, counters and a leaderboard-ish scan. Exits non-zero on any mismatch.
Usage: python3 cache_app.py PORT"""
import sys
import time

import redis

r = redis.Redis(host="127.0.0.1", port=int(sys.argv[1]), decode_responses=True)
assert r.ping()

# A cache with TTLs: entries expire, a refresh extends them, PERSIST pins one.
for page in range(50):
    r.set(f"cache:page:{page}", f"<html>{page}</html>", ex=60)
assert r.get("cache:page:7") == "<html>7</html>"
assert 55 <= r.ttl("cache:page:7") <= 60
r.set("cache:short", "soon gone", px=150)
assert r.pttl("cache:short") > 0
assert r.setex("cache:token", 30, "abc") is True
assert r.expire("cache:token", 120, gt=True) is True
assert r.expire("cache:token", 10, gt=True) is False
assert r.persist("cache:page:0") is True
assert r.ttl("cache:page:0") == -1
assert r.ttl("cache:missing") == -2
assert r.getex("cache:page:1", px=100) == "<html>1</html>"
time.sleep(0.4)
assert r.get("cache:short") is None, "expired entries are never returned"
assert r.get("cache:page:1") is None
assert r.exists("cache:short", "cache:page:1") == 0
assert r.set("cache:page:2", "new", keepttl=True) is True
assert 0 < r.ttl("cache:page:2") <= 60

# A hash per user; counters inside it.
users = {f"user:{i}": {"name": f"user{i}", "email": f"u{i}@example.com", "visits": 0} for i in range(20)}
pipe = r.pipeline(transaction=False)
for key, fields in users.items():
    pipe.hset(key, mapping=fields)
pipe.execute()
for _ in range(3):
    r.hincrby("user:3", "visits", 1)
assert r.hget("user:3", "visits") == "3"
assert r.hgetall("user:4") == {"name": "user4", "email": "u4@example.com", "visits": "0"}
assert r.hmget("user:5", ["name", "nope"]) == ["user5", None]
assert r.hlen("user:6") == 3 and r.hexists("user:6", "email")
assert r.hdel("user:6", "email", "nope") == 1
assert sorted(r.hkeys("user:6")) == ["name", "visits"]
assert dict(r.hscan_iter("user:7")) == {"name": "user7", "email": "u7@example.com", "visits": "0"}
assert r.type("user:7") == "hash" and r.type("cache:page:3") == "string" and r.type("nope") == "none"
try:
    r.incr("user:7")
    raise AssertionError("INCR on a hash must fail")
except redis.ResponseError as e:
    assert str(e).startswith("WRONGTYPE"), e

# Counters: page views through a pipeline, a float rate, a session hash that expires.
pipe = r.pipeline(transaction=False)
for _ in range(100):
    pipe.incr("views:home")
assert pipe.execute()[-1] == 100
assert r.decrby("views:home", 10) == 90
assert r.incrbyfloat("rate", 0.5) == 0.5
r.hset("session:xyz", mapping={"user": "3", "cart": "2"})
r.pexpire("session:xyz", 100)
time.sleep(0.3)
assert r.hgetall("session:xyz") == {}
assert r.hset("session:xyz", "user", "4") == 1 and r.hlen("session:xyz") == 1

# Scanning, renaming, copying, flushing.
assert len(list(r.scan_iter(match="user:*"))) == 20
assert sorted(r.keys("user:1*")) == sorted(f"user:{i}" for i in range(20) if str(i).startswith("1"))
assert r.rename("user:19", "user:archived") is True
assert r.hget("user:archived", "name") == "user19"
assert r.copy("user:archived", "user:copy") is True
assert r.object("encoding", "user:copy") == "listpack"
assert r.getdel("views:home") == "90" and r.get("views:home") is None
assert r.randomkey() is not None
assert r.flushdb() is True
assert r.dbsize() == 0
print("redis-py program: ok")
