package resp

import (
	"errors"
	"math"
	"strconv"
	"strings"
)

// zremove removes the members pick chooses from z (a walk of its index
// for a set of card members) in one transaction that reads each chosen
// member again: if one moved or went since the walk, the removal starts
// again, at most CASAttempts times. It returns what it removed; exists
// false: z is not a sorted set (WRONGTYPE, replied) or has no members.
func (x *call) zremove(z []byte, pick func(card int) ([]zEntry, error)) (removed []zEntry, ok bool) {
	for range x.s.cfg.CASAttempts {
		card, exists, ok := x.zsetState(z)
		if !ok {
			return nil, false
		}
		if !exists {
			return nil, true
		}
		es, err := pick(card)
		if err == nil && len(es) > 0 {
			err = x.kv.Txn(x.ctx, func(tx TxnKV) error {
				v := &txView{tx: tx, now: x.s.cfg.Now}
				meta, err := v.read(x.ctx, encKey(z))
				switch {
				case err != nil:
					return err
				case !meta.Found:
					return errZMoved
				case !isZSetMeta(meta.Value):
					return errZWrongType
				}
				var ops []Op
				for _, e := range es {
					r, err := v.read(x.ctx, zMemberKey(z, e.member))
					if err != nil {
						return err
					}
					if !r.Found || math.Float64bits(zScoreOf(r.Value)) != math.Float64bits(e.score) {
						return errZMoved
					}
					ops = append(ops, Op{Key: zMemberKey(z, e.member), Delete: true},
						Op{Key: zIndexKey(z, e.member, e.score), Delete: true})
				}
				return x.zwriteMeta(v, z, true, int(zsetCard(meta.Value))-len(es), ops)
			})
		}
		switch {
		case errors.Is(err, errZMoved):
			continue
		case err != nil:
			x.zreplyErr(err)
			return nil, false
		}
		return es, true
	}
	replyErr(x.c, errors.New("sorted set changed by other clients too often, retry"))
	return nil, false
}

// zpick is a pick of zremove that walks z's index from skip, taking take
// members (< 0: all) of [start, end).
func (x *call) zpick(z, start, end []byte, skip, take int) ([]zEntry, error) {
	var es []zEntry
	err := x.zwalk(z, start, end, skip, take, func(e zEntry) bool {
		es = append(es, zEntry{member: append([]byte(nil), e.member...), score: e.score})
		return true
	})
	return es, err
}

// cmdZPop: ZPOPMIN and ZPOPMAX key [count], the members with the lowest
// (highest) scores, removed. ZPOPMAX walks to the set's end: its cost is
// the set's size.
func cmdZPop(x *call) {
	count := 1
	if len(x.args) > 3 {
		x.c.WriteError(errSyntax)
		return
	}
	if len(x.args) == 3 {
		n, err := strconv.ParseInt(string(x.args[2]), 10, 64)
		switch {
		case err != nil || n < 0:
			x.c.WriteError("ERR value is out of range, must be positive")
			return
		case n == 0: // still WRONGTYPE on another type, as Redis
			if _, _, ok := x.zsetState(x.args[1]); ok {
				x.c.WriteArray(0)
			}
			return
		}
		count = int(min(n, math.MaxInt32))
	}
	z := x.args[1]
	es, ok := x.zremove(z, x.zpopPick(z, x.name == "zpopmax", count))
	switch {
	case !ok:
	case len(x.args) == 2 && len(es) == 1:
		// Without a count, one flat pair in RESP3 too, as Redis.
		x.c.WriteArray(2)
		x.c.WriteBulk(es[0].member)
		x.writeScore(es[0].score)
	default:
		x.zreplyEntries(es, true)
	}
}

// cmdZRemRange: ZREMRANGEBYSCORE, ZREMRANGEBYRANK and ZREMRANGEBYLEX, in
// one transaction (so at most a transaction's keys: two per member).
func cmdZRemRange(x *call) {
	z := x.args[1]
	var pick func(card int) ([]zEntry, error)
	switch strings.TrimPrefix(x.name, "zremrangeby") {
	case "rank":
		lo, err1 := strconv.ParseInt(string(x.args[2]), 10, 64)
		hi, err2 := strconv.ParseInt(string(x.args[3]), 10, 64)
		if err1 != nil || err2 != nil {
			x.c.WriteError(errNotInt)
			return
		}
		pick = func(card int) ([]zEntry, error) {
			skip, take := rankWindow(int64(card), lo, hi, false)
			if take == 0 {
				return nil, nil
			}
			return x.zpick(z, zIndexPrefix(z), zIndexEnd(z), skip, take)
		}
	case "score":
		r, ok := parseScoreRange(x.args[2], x.args[3])
		if !ok {
			x.c.WriteError("ERR min or max is not a float")
			return
		}
		start, end := r.span(z)
		pick = func(int) ([]zEntry, error) { return x.zpick(z, start, end, 0, -1) }
	default:
		lo, ok1 := parseLexBound(x.args[2])
		hi, ok2 := parseLexBound(x.args[3])
		if !ok1 || !ok2 {
			x.c.WriteError("ERR min or max not valid string range item")
			return
		}
		pick = func(int) ([]zEntry, error) {
			start, end, _, err := x.lexSpan(z, lo, hi, false, 0)
			if err != nil {
				return nil, err
			}
			return x.zpick(z, start, end, 0, -1)
		}
	}
	if es, ok := x.zremove(z, pick); ok {
		x.c.WriteInt(len(es))
	}
}
