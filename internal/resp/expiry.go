package resp

import "time"

// Expiry commands: EXPIRE, PEXPIRE, EXPIREAT, PEXPIREAT, TTL, PTTL,
// EXPIRETIME, PEXPIRETIME, PERSIST (SET's EX, PX, EXAT, PXAT and KEEPTTL are in set.go). A key's TTL is its stored value's, so a hash's
// is its marker's: the whole hash expires with it, its fields left as
// garbage the next HSET creating the hash, or DEL, removes. The store
// fixes the expiry when it orders the write and every replica judges it
// at its own clock (docs/expiry.md).

// cmdExpire: EXPIRE key seconds, PEXPIRE key milliseconds, EXPIREAT key
// unix-seconds, PEXPIREAT key unix-milliseconds, each with NX, XX, GT or
// LT (expirecond.go). 1 if the key exists and its expiry was set, else 0;
// a relative time that is not positive, or an absolute one that is not,
// deletes the key, as in Redis (an absolute time already past leaves it
// absent too).
func cmdExpire(x *call) {
	cond, rerr := parseExpireCond(x.args[3:])
	if rerr != "" {
		x.c.WriteError(rerr)
		return
	}
	seconds := x.name == "expire" || x.name == "expireat"
	d, rerr := parseTTL(x.args[2], seconds, "ERR invalid expire time in '"+x.name+"' command")
	if rerr != "" {
		x.c.WriteError(rerr)
		return
	}
	if cond != (expireCond{}) {
		x.replyFlag(x.expireIf(cond, d, x.name == "expireat" || x.name == "pexpireat"))
		return
	}
	if d <= 0 {
		existed, err := x.deleteKey(x.args[1])
		x.replyFlag(existed, err)
		return
	}
	x.replyFlag(x.setExpiry(expiryOf(d, x.name == "expireat" || x.name == "pexpireat")))
}

// setExpiry sets the key's expiry (none: removes it) if it exists, and
// reports whether it did.
func (x *call) setExpiry(e Expiry) (bool, error) {
	r := x.kv.WriteEach(x.ctx, []Op{{Key: encKey(x.args[1]), SetTTL: true, Expiry: e}})
	return r[0].Existed, r[0].Err
}

// replyFlag replies 1 or 0, or the error.
func (x *call) replyFlag(ok bool, err error) {
	switch {
	case err != nil:
		replyErr(x.c, err)
	case ok:
		x.c.WriteInt(1)
	default:
		x.c.WriteInt(0)
	}
}

// cmdTTL: TTL key in seconds (rounded as Redis does), PTTL key in
// milliseconds; -2 if the key does not exist, -1 if it has no TTL.
func cmdTTL(x *call) {
	if ttl, ok := x.keyTTL(); ok && x.name == "ttl" {
		x.c.WriteInt64(int64((ttl + 500*time.Millisecond) / time.Second))
	} else if ok {
		x.c.WriteInt64(ttl.Milliseconds())
	}
}

// keyTTL reads the key's remaining TTL; when the key is missing (-2), has
// none (-1) or the read failed, it replies that itself and returns false.
func (x *call) keyTTL() (time.Duration, bool) {
	r, err := x.kv.BatchGet(x.ctx, [][]byte{encKey(x.args[1])})
	switch {
	case err != nil:
		replyErr(x.c, err)
	case !r[0].Found:
		x.c.WriteInt(-2)
	case r[0].TTL == 0:
		x.c.WriteInt(-1)
	default:
		return r[0].TTL, true
	}
	return 0, false
}

// cmdExpireTime: EXPIRETIME key, the Unix time in seconds at which the
// key expires (PEXPIRETIME: in milliseconds); -2 if the key does not
// exist, -1 if it has no TTL. The time is this node's clock plus the
// remaining TTL the serving replica reports (to the millisecond).
func cmdExpireTime(x *call) {
	ttl, ok := x.keyTTL()
	if !ok {
		return
	}
	ms := x.s.cfg.Now().Add(ttl).UnixMilli()
	if x.name == "expiretime" {
		ms /= 1000
	}
	x.c.WriteInt64(ms)
}

// cmdPersist: PERSIST key removes the key's TTL: 1 if it had one, else 0.
// It reads first, since the removal alone cannot tell a key that had no
// TTL from one that had.
func cmdPersist(x *call) {
	r, err := x.kv.BatchGet(x.ctx, [][]byte{encKey(x.args[1])})
	switch {
	case err != nil:
		replyErr(x.c, err)
	case !r[0].Found || r[0].TTL == 0:
		x.c.WriteInt(0)
	default:
		x.replyFlag(x.setExpiry(Expiry{}))
	}
}
