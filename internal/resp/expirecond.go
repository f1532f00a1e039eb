package resp

import (
	"fmt"
	"strings"
	"time"
)

// expireCond is EXPIRE's NX, XX, GT and LT options: set the expiry only if
// the key has none (NX), has one (XX), or the new one is later (GT) or
// earlier (LT) than its current one. A key without expiry counts as
// expiring never: GT does not set it, LT does. XX combines with GT or LT.
type expireCond struct{ nx, xx, gt, lt bool }

// parseExpireCond reads the options after EXPIRE's time, or returns
// Redis's error reply.
func parseExpireCond(args [][]byte) (expireCond, string) {
	var c expireCond
	for _, a := range args {
		switch strings.ToUpper(string(a)) {
		case "NX":
			c.nx = true
		case "XX":
			c.xx = true
		case "GT":
			c.gt = true
		case "LT":
			c.lt = true
		default:
			return c, "ERR Unsupported option " + string(a)
		}
	}
	switch {
	case c.nx && (c.xx || c.gt || c.lt):
		return c, "ERR NX and XX, GT or LT options at the same time are not compatible"
	case c.gt && c.lt:
		return c, "ERR GT and LT options at the same time are not compatible"
	}
	return c, ""
}

// allows reports whether an expiry in next may replace one in cur (0: the
// key has none).
func (c expireCond) allows(cur, next time.Duration) bool {
	switch {
	case c.nx && cur != 0, c.xx && cur == 0:
		return false
	case c.gt:
		return cur != 0 && next > cur
	case c.lt:
		return cur == 0 || next < cur
	}
	return true
}

// expireIf is EXPIRE with a condition: it reads the key's value and TTL,
// decides, and sets the expiry by a compare-and-set of the value it read,
// so that a write in between makes it decide again (a change of the TTL
// alone in between is not seen). d is a TTL or, with at, a Unix time; one
// that has passed deletes the key once the condition holds.
func (x *call) expireIf(cond expireCond, d time.Duration, at bool) (bool, error) {
	key := encKey(x.args[1])
	for range x.s.cfg.CASAttempts {
		r, err := x.kv.BatchGet(x.ctx, [][]byte{key})
		if err != nil || !r[0].Found {
			return false, err
		}
		next := d
		if at {
			next = time.Unix(0, 0).Add(d).Sub(x.s.cfg.Now())
		}
		if !cond.allows(r[0].TTL, next) {
			return false, nil
		}
		if next <= 0 {
			return x.deleteKey(x.args[1])
		}
		v := r[0].Value
		swapped, _, _, err := x.kv.CompareAndSet(x.ctx, key, &v, &v, expiryOf(d, at))
		if err != nil || swapped {
			return swapped, err
		}
	}
	return false, fmt.Errorf("%w: key %q", errContention, x.args[1])
}
