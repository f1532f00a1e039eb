package resp

import (
	"strconv"
	"strings"
)

// The blocking and multi-key list pops, as Redis 7.0 defines them: BLPOP,
// BRPOP, BLMOVE, BRPOPLPUSH, BLMPOP (blocking, blocked.go) and LMPOP.
// Each pop is the transaction LPOP and LMOVE run (list.go).

// popFirst pops up to count elements from the first of keys that may
// allows and holds a list, in one transaction: that key and the elements
// (key nil: nothing to pop). strict: a key of another type met before it
// fails with WRONGTYPE, as Redis's look does; otherwise it is passed over
// (a blocked client's later tries).
func (x *call) popFirst(keys [][]byte, left bool, count int64, may func([]byte) bool, strict bool) (key []byte, vals [][]byte, err error) {
	var cand [][]byte
	for _, k := range keys {
		if may(k) {
			cand = append(cand, k)
		}
	}
	if len(cand) == 0 {
		return nil, nil, nil
	}
	if !strict {
		if found, err := x.anyList(cand); err != nil || !found {
			return nil, nil, err
		}
	}
	err = x.kv.Txn(x.ctx, func(tx TxnKV) error {
		key, vals = nil, nil
		for _, k := range cand {
			t, err := x.openColl(tx, k, listMarker)
			if err == wrongType && !strict {
				continue
			}
			if err != nil {
				return err
			}
			if !t.m.exists {
				continue
			}
			for range min(count, t.listLen()) {
				v, err := t.pop(left)
				if err != nil {
					return err
				}
				vals = append(vals, v)
			}
			key = k
			return t.save()
		}
		return nil
	})
	return key, vals, err
}

// anyList reports whether any of keys holds a list, by one read outside a
// transaction: a blocked client's periodic try runs a transaction only
// when there may be something to pop.
func (x *call) anyList(keys [][]byte) (bool, error) {
	enc := make([][]byte, len(keys))
	for i, k := range keys {
		enc[i] = encKey(k)
	}
	rs, err := x.batchGet(enc)
	if err != nil {
		return false, err
	}
	for _, r := range rs {
		if _, ok := decodeMeta(listMarker, r.Value); r.Found && ok {
			return true, nil
		}
	}
	return false, nil
}

// popTry is a blocking pop's try: pop up to count elements of the first
// of keys holding any (left: from the head) and answer [key, values],
// values written by vals; false when no key held any (nothing answered).
func (x *call) popTry(keys [][]byte, left bool, count int64, vals func([][]byte)) func(may func([]byte) bool, first bool) bool {
	return func(may func([]byte) bool, first bool) bool {
		key, got, err := x.popFirst(keys, left, count, may, first)
		switch {
		case err != nil:
			writeCASErr(x.c, err)
		case key == nil:
			return false
		default:
			x.c.WriteArray(2)
			x.c.WriteBulk(key)
			vals(got)
		}
		return true
	}
}

// cmdBPop: BLPOP and BRPOP key [key ...] timeout.
func cmdBPop(x *call) {
	timeout, ok := x.parseTimeout(x.args[len(x.args)-1])
	if !ok {
		return
	}
	keys := x.args[1 : len(x.args)-1]
	x.block(keys, timeout, false, x.popTry(keys, x.name == "blpop", 1, func(vals [][]byte) { x.c.WriteBulk(vals[0]) }),
		func() { x.c.WriteArray(-1) })
}

// cmdBLMove: BLMOVE source destination LEFT|RIGHT LEFT|RIGHT timeout and
// BRPOPLPUSH source destination timeout.
func cmdBLMove(x *call) {
	from, to, ok := x.moveSides("blmove")
	if !ok {
		return
	}
	at := 3
	if x.name == "blmove" {
		at = 5
	}
	timeout, ok := x.parseTimeout(x.args[at])
	if !ok {
		return
	}
	src, dst := x.args[1], x.args[2]
	x.block(x.args[1:2], timeout, false, func(may func([]byte) bool, first bool) bool {
		if !may(src) {
			return false
		}
		if !first {
			found, err := x.anyList([][]byte{src})
			if err != nil {
				writeCASErr(x.c, err)
				return true
			}
			if !found {
				return false
			}
		}
		v, moved, err := x.lmove(src, dst, from, to, first)
		switch {
		case err != nil:
			writeCASErr(x.c, err)
		case !moved:
			return false
		default:
			x.c.WriteBulk(v)
		}
		return true
	}, func() {
		// As Redis 7.0: an empty source inside EXEC is the null bulk, a
		// timeout the null array.
		if _, inExec := x.kv.(*txView); inExec {
			x.c.WriteNull()
			return
		}
		x.c.WriteArray(-1)
	})
}

// cmdLMPop: LMPOP numkeys key [key ...] LEFT|RIGHT [COUNT count] and
// BLMPOP timeout numkeys ..., checked in Redis's order (the timeout
// last). The answer is the key and an array of its elements.
func cmdLMPop(x *call) {
	keys, left, count, ok := x.parseMPop("blmpop", parseSide)
	if !ok {
		return
	}
	try := x.popTry(keys, left, count, func(vals [][]byte) {
		x.c.WriteArray(len(vals))
		for _, v := range vals {
			x.c.WriteBulk(v)
		}
	})
	x.mpop(keys, try)
}

// parseMPop reads the arguments LMPOP, BLMPOP, ZMPOP and BZMPOP share as
// Redis checks them: numkeys (after the timeout of the blocking one,
// named blocking), the keys, a side that side reads (LEFT|RIGHT,
// MIN|MAX), [COUNT count]. ok false: it replied.
func (x *call) parseMPop(blocking string, side func([]byte) (bool, bool)) (keys [][]byte, first bool, count int64, ok bool) {
	at := 1
	if x.name == blocking {
		at = 2
	}
	n, err := strconv.ParseInt(string(x.args[at]), 10, 64)
	if err != nil || n < 1 {
		x.c.WriteError("ERR numkeys should be greater than 0")
		return nil, false, 0, false
	}
	if n > int64(len(x.args)-at-2) {
		x.c.WriteError(errSyntax)
		return nil, false, 0, false
	}
	keys = x.args[at+1 : at+1+int(n)]
	rest := x.args[at+1+int(n):]
	if first, ok = side(rest[0]); !ok {
		x.c.WriteError(errSyntax)
		return nil, false, 0, false
	}
	count = -1
	for i := 1; i < len(rest); i++ {
		if count != -1 || !strings.EqualFold(string(rest[i]), "count") || i+1 == len(rest) {
			x.c.WriteError(errSyntax)
			return nil, false, 0, false
		}
		i++
		if count, err = strconv.ParseInt(string(rest[i]), 10, 64); err != nil || count < 1 {
			x.c.WriteError("ERR count should be greater than 0")
			return nil, false, 0, false
		}
	}
	return keys, first, max(count, 1), true
}

// mpop serves a parsed LMPOP or ZMPOP by one try, answering the null
// array when there is nothing to pop, and their blocking forms (their
// first argument the timeout) by blocking.
func (x *call) mpop(keys [][]byte, try tryFunc) {
	none := func() { x.c.WriteArray(-1) }
	if x.name[0] != 'b' {
		if !try(func([]byte) bool { return true }, true) {
			none()
		}
		return
	}
	timeout, ok := x.parseTimeout(x.args[1])
	if !ok {
		return
	}
	x.block(keys, timeout, false, try, none)
}
