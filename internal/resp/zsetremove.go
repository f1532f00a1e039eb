package resp

import (
	"math"
	"strconv"
	"strings"
)

// zremove removes the members pick chooses from z (a walk of its index,
// for a set of card members, from no earlier than first, the index's
// start hint) in the transaction of z's key, which the commands on z
// share (keyTxn); pick reads through in, whose reads are the
// transaction's. lowest: pick takes the members with the lowest scores,
// so the start hint moves past the last of them (a set without one gets
// one only once the cluster lets the front end write it: setPositions).
// Concurrent pops of one set so run one after another in one transaction, each choosing from what the ones before it left, where
// choosing outside the transaction and removing inside made all but one
// conflict and start again. It returns what it removed (none: z holds no
// sorted set); ok false: it replied (WRONGTYPE or an error).
func (x *call) zremove(z []byte, lowest bool, pick func(in *call, card int, first []byte) ([]zEntry, error)) (removed []zEntry, ok bool) {
	err := x.keyTxn(z, nil, func(tx TxnKV) error {
		removed = nil
		v := &txView{tx: tx, now: x.s.cfg.Now}
		meta, err := v.read(x.ctx, encKey(z))
		switch {
		case err != nil || !meta.Found:
			return err
		case !isZSetMeta(meta.Value):
			return errZWrongType
		}
		in := *x
		in.kv = v
		card, hint := int(zsetCard(meta.Value)), zsetHint(meta.Value)
		es, err := pick(&in, card, zIndexFirst(z, meta.Value))
		if err != nil || len(es) == 0 {
			return err
		}
		var ops []Op
		for _, e := range es {
			ops = append(ops, Op{Key: zMemberKey(z, e.member), Delete: true},
				Op{Key: zIndexKey(z, e.member, e.score), Delete: true})
		}
		if lowest && (len(hint) > 0 || x.setPositions()) {
			last := es[len(es)-1]
			hint = append(zIndexKey(z, last.member, last.score)[len(zIndexPrefix(z)):], 0)
		}
		removed = es
		return x.zwriteMeta(v, z, true, card-len(es), hint, ops)
	})
	if err != nil {
		x.zreplyErr(err)
		return nil, false
	}
	return removed, true
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
	es, ok := x.zremove(z, x.name == "zpopmin", zpopPick(z, x.name == "zpopmax", count))
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
	var pick func(in *call, card int, first []byte) ([]zEntry, error)
	switch strings.TrimPrefix(x.name, "zremrangeby") {
	case "rank":
		lo, err1 := strconv.ParseInt(string(x.args[2]), 10, 64)
		hi, err2 := strconv.ParseInt(string(x.args[3]), 10, 64)
		if err1 != nil || err2 != nil {
			x.c.WriteError(errNotInt)
			return
		}
		pick = func(in *call, card int, first []byte) ([]zEntry, error) {
			skip, take := rankWindow(int64(card), lo, hi, false)
			if take == 0 {
				return nil, nil
			}
			return in.zpick(z, first, zIndexEnd(z), skip, take)
		}
	case "score":
		r, ok := parseScoreRange(x.args[2], x.args[3])
		if !ok {
			x.c.WriteError("ERR min or max is not a float")
			return
		}
		start, end := r.span(z)
		pick = func(in *call, _ int, first []byte) ([]zEntry, error) {
			return in.zpick(z, zAtOrAfter(start, first), end, 0, -1)
		}
	default:
		lo, ok1 := parseLexBound(x.args[2])
		hi, ok2 := parseLexBound(x.args[3])
		if !ok1 || !ok2 {
			x.c.WriteError("ERR min or max not valid string range item")
			return
		}
		pick = func(in *call, _ int, first []byte) ([]zEntry, error) {
			start, end, _, err := in.lexSpan(z, first, lo, hi, false, 0)
			if err != nil {
				return nil, err
			}
			return in.zpick(z, start, end, 0, -1)
		}
	}
	if es, ok := x.zremove(z, false, pick); ok {
		x.c.WriteInt(len(es))
	}
}
