package resp

import (
	"errors"
	"math"
	"slices"
	"strings"
)

// The blocking and multi-key sorted-set pops, as Redis 7.0 defines them:
// BZPOPMIN, BZPOPMAX, BZMPOP (blocking as the list pops do, blocked.go)
// and ZMPOP. Each pop removes as ZPOPMIN and ZPOPMAX remove (zremove).

// zpopPick is zremove's pick of the count members of z with the lowest
// (highest) scores, in the order they pop: ZPOPMAX's highest first.
func zpopPick(z []byte, highest bool, count int) func(in *call, card int, first []byte) ([]zEntry, error) {
	return func(in *call, card int, first []byte) ([]zEntry, error) {
		skip := 0
		if highest {
			skip = max(card-count, 0)
		}
		es, err := in.zpick(z, first, zIndexEnd(z), skip, count)
		if highest {
			slices.Reverse(es)
		}
		return es, err
	}
}

// zpopTry is a try of the blocking pops (tryFunc) and ZMPOP's only one:
// pop up to count members of the first of keys that may allows and holds
// a sorted set, and answer with answer. A key of another type fails the
// first try with WRONGTYPE, as in Redis; later tries pass over it.
func (x *call) zpopTry(keys [][]byte, highest bool, count int, answer func(z []byte, es []zEntry)) tryFunc {
	return func(may func([]byte) bool, first bool) bool {
		for _, z := range keys {
			if !may(z) {
				continue
			}
			v, err := x.kv.Get(x.ctx, encKey(z))
			switch {
			case errors.Is(err, ErrNotFound):
				continue
			case err != nil:
				replyErr(x.c, err)
				return true
			case !isZSetMeta(v) && first:
				x.c.WriteError(errWrongType)
				return true
			case !isZSetMeta(v):
				continue
			}
			es, ok := x.zremove(z, !highest, zpopPick(z, highest, count))
			if !ok {
				return true // it replied
			}
			if len(es) == 0 {
				continue
			}
			answer(z, es)
			return true
		}
		return false
	}
}

// cmdBZPop: BZPOPMIN and BZPOPMAX key [key ...] timeout, answered as the
// key, the member and its score.
func cmdBZPop(x *call) {
	timeout, ok := x.parseTimeout(x.args[len(x.args)-1])
	if !ok {
		return
	}
	keys := x.args[1 : len(x.args)-1]
	x.block(keys, timeout, false, x.zpopTry(keys, x.name == "bzpopmax", 1, func(z []byte, es []zEntry) {
		x.c.WriteArray(3)
		x.c.WriteBulk(z)
		x.c.WriteBulk(es[0].member)
		x.writeScore(es[0].score)
	}), func() { x.c.WriteArray(-1) })
}

// cmdZMPop: ZMPOP numkeys key [key ...] MIN|MAX [COUNT count] and BZMPOP
// timeout numkeys ..., checked in Redis's order (the timeout last),
// answered as the key and an array of [member, score] pairs, nested in
// RESP2 too.
func cmdZMPop(x *call) {
	keys, lowest, count, ok := x.parseMPop("bzmpop", func(b []byte) (bool, bool) {
		s := strings.ToLower(string(b))
		return s == "min", s == "min" || s == "max"
	})
	if !ok {
		return
	}
	x.mpop(keys, x.zpopTry(keys, !lowest, int(min(count, math.MaxInt32)), func(z []byte, es []zEntry) {
		x.c.WriteArray(2)
		x.c.WriteBulk(z)
		x.c.WriteArray(len(es))
		for _, e := range es {
			x.c.WriteArray(2)
			x.c.WriteBulk(e.member)
			x.writeScore(e.score)
		}
	}))
}
