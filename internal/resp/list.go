package resp

import (
	"bytes"
	"encoding/binary"
	"strconv"
	"strings"
)

// Lists (collection.go): element i of a list (head <= i < tail) is stored
// at enc(k) 0x00 0x01 gen i, i a big-endian uint64, so the elements are in
// list order and LRANGE reads only the span it answers. An empty list
// starts at 2^63; pushes grow it down (LPUSH) or up (RPUSH).

func (t *collTx) listLen() int64 { return int64(t.m.b - t.m.a) }

func (t *collTx) indexKey(i uint64) []byte {
	return t.elemKey(binary.BigEndian.AppendUint64(nil, i))
}

// push adds v at the head (left) or the tail.
func (t *collTx) push(v []byte, left bool) error {
	i := t.m.b
	if left {
		t.m.a--
		i = t.m.a
	} else {
		t.m.b++
	}
	return t.tx.Put(t.ctx, t.indexKey(i), v)
}

// pop removes and returns the element at the head (left) or the tail of a
// non-empty list.
func (t *collTx) pop(left bool) ([]byte, error) {
	i := t.m.b - 1
	if left {
		i = t.m.a
	}
	v, err := t.at(i)
	if err != nil {
		return nil, err
	}
	if left {
		t.m.a++
	} else {
		t.m.b--
	}
	return v, t.tx.Delete(t.ctx, t.indexKey(i))
}

// at reads the element at index i (an absolute index, head <= i < tail).
func (t *collTx) at(i uint64) ([]byte, error) {
	r, err := t.tx.Get(t.ctx, t.indexKey(i))
	if err != nil {
		return nil, err
	}
	return r.Value, nil
}

// absIndex is the absolute index of Redis index i (negative: from the
// tail), ok false if out of range.
func (t *collTx) absIndex(i int64) (uint64, bool) {
	n := t.listLen()
	if i < 0 {
		i += n
	}
	if i < 0 || i >= n {
		return 0, false
	}
	return t.m.a + uint64(i), true
}

// cmdPush: LPUSH, RPUSH, LPUSHX, RPUSHX key element...
func cmdPush(x *call) {
	left := x.name[0] == 'l'
	onlyIfExists := strings.HasSuffix(x.name, "x")
	var n int64
	err := x.collTxn(x.args[1], listMarker, func(t *collTx) (bool, error) {
		if onlyIfExists && !t.m.exists {
			n = 0
			return false, nil
		}
		for _, v := range x.args[2:] {
			if err := t.push(v, left); err != nil {
				return false, err
			}
		}
		n = t.listLen()
		return true, nil
	})
	if err != nil {
		writeCASErr(x.c, err)
		return
	}
	if n > 0 {
		x.ready(x.args[1])
	}
	x.c.WriteInt64(n)
}

// parseCount reads LPOP's, RPOP's and SPOP's count: an integer >= 0.
func parseCount(arg []byte) (int64, bool) {
	n, err := strconv.ParseInt(string(arg), 10, 64)
	return n, err == nil && n >= 0
}

const errNotPositive = "ERR value is out of range, must be positive"

// cmdPop: LPOP, RPOP key [count].
func cmdPop(x *call) {
	if len(x.args) > 3 {
		x.c.WriteError(errArity(x.name))
		return
	}
	hasCount := len(x.args) == 3
	count := int64(1)
	if hasCount {
		var ok bool
		if count, ok = parseCount(x.args[2]); !ok {
			x.c.WriteError(errNotPositive)
			return
		}
	}
	var out [][]byte
	var exists bool
	err := x.collTxn(x.args[1], listMarker, func(t *collTx) (bool, error) {
		out, exists = nil, t.m.exists
		for range min(count, t.listLen()) {
			v, err := t.pop(x.name[0] == 'l')
			if err != nil {
				return false, err
			}
			out = append(out, v)
		}
		return len(out) > 0, nil
	})
	switch {
	case err != nil:
		writeCASErr(x.c, err)
	case !exists && hasCount:
		x.c.WriteArray(-1) // a null array, as Redis answers
	case !exists:
		x.c.WriteNull()
	case !hasCount:
		x.c.WriteBulk(out[0])
	default:
		x.c.WriteArray(len(out))
		for _, v := range out {
			x.c.WriteBulk(v)
		}
	}
}

func cmdLLen(x *call) {
	m, ok := x.readMeta(x.args[1], listMarker)
	if ok {
		x.c.WriteInt64(int64(m.b - m.a))
	}
}

// parseInts reads integer arguments; ok false: it replied errNotInt.
func (x *call) parseInts(args ...[]byte) ([]int64, bool) {
	out := make([]int64, len(args))
	for i, a := range args {
		n, err := strconv.ParseInt(string(a), 10, 64)
		if err != nil {
			x.c.WriteError(errNotInt)
			return nil, false
		}
		out[i] = n
	}
	return out, true
}

// rangeOf clamps Redis's start and stop (inclusive, negative: from the
// end) to a list of n elements: the offsets [from, to), empty if
// from >= to.
func rangeOf(start, stop, n int64) (from, to int64) {
	if start < 0 {
		start += n
	}
	if stop < 0 {
		stop += n
	}
	start = max(start, 0)
	if start > stop || start >= n {
		return 0, 0
	}
	return start, min(stop, n-1) + 1
}

// cmdLRange: LRANGE key start stop, one scan of the elements it answers.
func cmdLRange(x *call) {
	se, ok := x.parseInts(x.args[2], x.args[3])
	if !ok {
		return
	}
	_, kvs, ok := x.scanElems(x.args[1], listMarker, func(m meta) ([]byte, []byte, int) {
		from, to := rangeOf(se[0], se[1], int64(m.b-m.a))
		return binary.BigEndian.AppendUint64(nil, m.a+uint64(from)),
			binary.BigEndian.AppendUint64(nil, m.a+uint64(to)), int(to - from)
	})
	if !ok {
		return
	}
	x.c.WriteArray(len(kvs))
	for _, kv := range kvs {
		x.c.WriteBulk(kv.Value)
	}
}

// listRead runs fn over the list at key in a read-only transaction; ok
// false: it replied (WRONGTYPE, an error).
func (x *call) listRead(key []byte, fn func(t *collTx) error) bool {
	err := x.collTxn(key, listMarker, func(t *collTx) (bool, error) { return false, fn(t) })
	if err != nil {
		writeCASErr(x.c, err)
		return false
	}
	return true
}

func cmdLIndex(x *call) {
	var v []byte
	var found, badIndex bool
	ok := x.listRead(x.args[1], func(t *collTx) error {
		v, found, badIndex = nil, false, false
		if !t.m.exists {
			return nil
		}
		n, err := strconv.ParseInt(string(x.args[2]), 10, 64)
		if err != nil {
			badIndex = true
			return nil
		}
		i, in := t.absIndex(n)
		if !in {
			return nil
		}
		found = true
		v, err = t.at(i)
		return err
	})
	switch {
	case !ok:
	case badIndex:
		x.c.WriteError(errNotInt)
	case found:
		x.c.WriteBulk(v)
	default:
		x.c.WriteNull()
	}
}

func cmdLSet(x *call) {
	var rerr string
	err := x.collTxn(x.args[1], listMarker, func(t *collTx) (bool, error) {
		rerr = ""
		if !t.m.exists {
			rerr = "ERR no such key"
			return false, nil
		}
		n, err := strconv.ParseInt(string(x.args[2]), 10, 64)
		if err != nil {
			rerr = errNotInt
			return false, nil
		}
		i, in := t.absIndex(n)
		if !in {
			rerr = "ERR index out of range"
			return false, nil
		}
		return true, t.tx.Put(x.ctx, t.indexKey(i), x.args[3])
	})
	switch {
	case err != nil:
		writeCASErr(x.c, err)
	case rerr != "":
		x.c.WriteError(rerr)
	default:
		x.c.WriteString("OK")
	}
}

// cmdLTrim: LTRIM key start stop, deleting each element outside the
// range: its cost is the number of elements removed.
func cmdLTrim(x *call) {
	se, ok := x.parseInts(x.args[2], x.args[3])
	if !ok {
		return
	}
	err := x.collTxn(x.args[1], listMarker, func(t *collTx) (bool, error) {
		if !t.m.exists {
			return false, nil
		}
		from, to := rangeOf(se[0], se[1], t.listLen())
		a, b := t.m.a+uint64(from), t.m.a+uint64(to)
		if from >= to {
			a, b = t.m.b, t.m.b
		}
		for i := t.m.a; i < a; i++ {
			if err := t.tx.Delete(x.ctx, t.indexKey(i)); err != nil {
				return false, err
			}
		}
		for i := b; i < t.m.b; i++ {
			if err := t.tx.Delete(x.ctx, t.indexKey(i)); err != nil {
				return false, err
			}
		}
		t.m.a, t.m.b = a, b
		return true, nil
	})
	if err != nil {
		writeCASErr(x.c, err)
		return
	}
	x.c.WriteString("OK")
}

// parseSide reads LEFT or RIGHT: left, ok.
func parseSide(arg []byte) (bool, bool) {
	switch strings.ToUpper(string(arg)) {
	case "LEFT":
		return true, true
	case "RIGHT":
		return false, true
	}
	return false, false
}

// moveSides are the sides a move pops from and pushes to: arguments 3
// and 4 of the command named withSides, RPOPLPUSH's right and left for the
// other. A bad side is answered with a syntax error (ok false).
func (x *call) moveSides(withSides string) (from, to, ok bool) {
	if x.name != withSides {
		return false, true, true
	}
	from, ok1 := parseSide(x.args[3])
	to, ok2 := parseSide(x.args[4])
	if !ok1 || !ok2 {
		x.c.WriteError(errSyntax)
		return false, false, false
	}
	return from, to, true
}

// cmdLMove: LMOVE source destination LEFT|RIGHT LEFT|RIGHT, and
// RPOPLPUSH source destination: one transaction over both lists.
func cmdLMove(x *call) {
	from, to, ok := x.moveSides("lmove")
	if !ok {
		return
	}
	v, moved, err := x.lmove(x.args[1], x.args[2], from, to, true)
	switch {
	case err != nil:
		writeCASErr(x.c, err)
	case !moved:
		x.c.WriteNull()
	default:
		x.c.WriteBulk(v)
	}
}

// lmove moves an element from src's side from to dst's side to in one
// transaction over both lists, and wakes dst's blocked clients: the
// element moved, moved false if src is empty. strict false passes over a
// src of another type as empty (a blocked client's later tries,
// blocked.go); a dst of another type is WRONGTYPE either way.
func (x *call) lmove(src, dst []byte, from, to, strict bool) (v []byte, moved bool, err error) {
	err = x.kv.Txn(x.ctx, func(tx TxnKV) error {
		v, moved = nil, false
		s, err := x.openColl(tx, src, listMarker)
		if err == wrongType && !strict {
			return nil
		}
		if err != nil || !s.m.exists {
			return err
		}
		moved = true
		d := s
		if !bytes.Equal(src, dst) {
			if d, err = x.openColl(tx, dst, listMarker); err != nil {
				return err
			}
		}
		if v, err = s.pop(from); err != nil {
			return err
		}
		if err := d.push(v, to); err != nil {
			return err
		}
		if d != s {
			if err := d.save(); err != nil {
				return err
			}
		}
		return s.save()
	})
	if err == nil && moved {
		x.ready(dst)
	}
	return v, moved, err
}
