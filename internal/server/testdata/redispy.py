"""redis-py against a TideKV node, as an application uses it: no special
options. Usage: redispy.py host port protocol. Exits non-zero, saying
what differed, on the first surprise."""
import sys

import redis

host, port, proto = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
r = redis.Redis(host=host, port=port, protocol=proto, decode_responses=True)


def want(what, got, expected):
    if got != expected:
        sys.exit(f"{what}: got {got!r}, want {expected!r}")


want("ping", r.ping(), True)
r.flushall()

# A pipeline (no transaction).
p = r.pipeline(transaction=False)
for i in range(50):
    p.set(f"key:{i:02d}", i)
p.incr("counter")
p.hset("h", mapping={"a": 1, "b": 2})
p.get("key:07")
out = p.execute()
want("pipeline", out[-3:], [1, 2, "7"])

# MULTI/EXEC through a transactional pipeline, collections inside.
p = r.pipeline()
p.lpush("l", "x", "y")
p.sadd("s", "m")
p.zadd("z", {"a": 1.5})
p.hincrby("h", "a", 5)
p.zscore("z", "a")
want("multi/exec", p.execute(), [2, 1, 1, 6, 1.5])

# WATCH with a conflict: the transaction is not applied.
with r.pipeline() as p:
    p.watch("counter")
    r.set("counter", 100)  # another client's write
    p.multi()
    p.incr("counter")
    try:
        p.execute()
        sys.exit("watch: EXEC applied after a watched key changed")
    except redis.WatchError:
        pass
want("watched key", r.get("counter"), "100")

# SCAN to the end, and the other scans.
want("scan_iter", sorted(r.scan_iter(match="key:*", count=7)), [f"key:{i:02d}" for i in range(50)])
want("hscan_iter", sorted(r.hscan_iter("h")), [("a", "6"), ("b", "2")])
want("hgetall", r.hgetall("h"), {"a": "6", "b": "2"})
want("smembers", r.smembers("s"), {"m"})
# RESP3 pairs come as lists, RESP2 ones as tuples (redis-py does so with Redis too).
want("zrange withscores", [tuple(e) for e in r.zrange("z", 0, -1, withscores=True)], [("a", 1.5)])
want("lrange", r.lrange("l", 0, -1), ["y", "x"])
want("dbsize", r.dbsize(), 55)
want("keys", sorted(r.keys("[hlsz]")), ["h", "l", "s", "z"])
r.set("ttl", "v", ex=100)
want("ttl", 0 < r.ttl("ttl") <= 100, True)
want("info", r.info()["redis_mode"], "standalone")

# Scripts: register_script runs EVALSHA, and after SCRIPT FLUSH falls back
# to loading the script again (NOSCRIPT); Lock takes, extends and releases
# with its Lua scripts.
incr_by = r.register_script("return redis.call('incrby', KEYS[1], ARGV[1])")
want("script", incr_by(keys=["scripted"], args=[5]), 5)
r.script_flush()
want("script after flush", incr_by(keys=["scripted"], args=[2]), 7)
lock = r.lock("resource", timeout=10)
want("lock acquire", lock.acquire(blocking=False), True)
want("lock held elsewhere", r.lock("resource", timeout=10).acquire(blocking=False), False)
want("lock extend", lock.extend(5), True)
lock.release()
want("lock released", r.exists("resource"), 0)
print("ok")
