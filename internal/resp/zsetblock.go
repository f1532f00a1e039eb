package resp

import "errors"

// cmdBZPop: BZPOPMIN and BZPOPMAX key [key ...] timeout, blocking as the
// list pops do (blocked.go): the first key holding a sorted set gives its
// lowest (highest) member, removed as ZPOPMIN and ZPOPMAX remove it
// (zremove), answered as the key, the member and its score.
func cmdBZPop(x *call) {
	timeout, ok := x.parseTimeout(x.args[len(x.args)-1])
	if !ok {
		return
	}
	keys := x.args[1 : len(x.args)-1]
	highest := x.name == "bzpopmax"
	x.block(keys, timeout, func(may func([]byte) bool, first bool) bool {
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
			es, ok := x.zremove(z, func(card int) ([]zEntry, error) {
				skip := 0
				if highest {
					skip = max(card-1, 0)
				}
				return x.zpick(z, zIndexPrefix(z), zIndexEnd(z), skip, 1)
			})
			if !ok {
				return true // it replied
			}
			if len(es) == 0 {
				continue
			}
			x.c.WriteArray(3)
			x.c.WriteBulk(z)
			x.c.WriteBulk(es[0].member)
			x.writeScore(es[0].score)
			return true
		}
		return false
	}, func() { x.c.WriteArray(-1) })
}
