package resp

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strconv"
	"strings"
)

// The list commands that search by value (LPOS, LREM, LINSERT) read the
// list page by page (MaxBatchKeys elements a scan) from one end and stop
// where the search is done; LREM and LINSERT then write in one
// transaction that first checks the list is as read. They cost as much as
// Redis's: the elements passed over, and for LREM and LINSERT the
// elements moved to close or open the gap (LINSERT moves the shorter
// side).

// errChanged aborts a write whose collection changed since it was read;
// the command starts again.
var errChanged = errors.New("the collection changed since it was read")

// walkList calls fn on the list's elements (pos counts from the head)
// from the head, or from the tail, until fn returns false or the list
// ends. changed: the list changed between two pages, and the caller
// starts again; ok false: it replied.
func (x *call) walkList(key []byte, reverse bool, fn func(pos int64, v []byte) bool) (m meta, changed, ok bool) {
	page := int64(x.s.cfg.MaxBatchKeys)
	for done := int64(0); ; {
		var from, to int64
		pm, kvs, ok := x.scanElems(key, listMarker, func(cur meta) ([]byte, []byte, int) {
			n := int64(cur.b - cur.a)
			from, to = done, min(done+page, n)
			if reverse {
				from, to = max(n-done-page, 0), n-done
			}
			if from >= to {
				return nil, nil, 0
			}
			return binary.BigEndian.AppendUint64(nil, cur.a+uint64(from)),
				binary.BigEndian.AppendUint64(nil, cur.a+uint64(to)), int(to - from)
		})
		if !ok {
			return pm, false, false
		}
		if done == 0 {
			m = pm
		} else if pm.gen != m.gen || pm.ver != m.ver || pm.exists != m.exists {
			return m, true, true
		}
		if len(kvs) == 0 {
			return m, false, true
		}
		for i := range kvs {
			j, pos := i, from+int64(i)
			if reverse {
				j, pos = len(kvs)-1-i, to-1-int64(i)
			}
			if !fn(pos, kvs[j].Value) {
				return m, false, true
			}
		}
		done += int64(len(kvs))
	}
}

// listTxnIf runs fn in a transaction over the list at key if it is still
// as m read it; otherwise errChanged.
func (x *call) listTxnIf(key []byte, m meta, fn func(t *collTx) error) error {
	return x.collTxn(key, listMarker, func(t *collTx) (bool, error) {
		if t.m.exists != m.exists || t.m.gen != m.gen || t.m.ver != m.ver {
			return false, errChanged
		}
		return true, fn(t)
	})
}

// cmdLPos: LPOS key element [RANK rank] [COUNT num-matches] [MAXLEN len].
func cmdLPos(x *call) {
	rank, count, maxLen := int64(1), int64(-1), int64(0)
	for i := 3; i < len(x.args); i += 2 {
		if i+1 >= len(x.args) {
			x.c.WriteError(errSyntax)
			return
		}
		opt := strings.ToUpper(string(x.args[i]))
		if opt != "RANK" && opt != "COUNT" && opt != "MAXLEN" {
			x.c.WriteError(errSyntax)
			return
		}
		n, err := strconv.ParseInt(string(x.args[i+1]), 10, 64)
		rerr := ""
		switch {
		case err != nil && opt == "RANK":
			rerr = errNotInt
		case opt == "RANK" && n == 0:
			rerr = "ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list"
		case opt != "RANK" && (err != nil || n < 0):
			// Redis's answer to COUNT or MAXLEN not a number, too.
			rerr = "ERR " + opt + " can't be negative"
		case opt == "RANK":
			rank = n
		case opt == "COUNT":
			count = n
		default:
			maxLen = n
		}
		if rerr != "" {
			x.c.WriteError(rerr)
			return
		}
	}
	skip := max(rank, -rank) - 1
	for range x.s.cfg.CASAttempts {
		var found []int64
		seen := int64(0)
		_, changed, ok := x.walkList(x.args[1], rank < 0, func(pos int64, v []byte) bool {
			seen++
			if bytes.Equal(v, x.args[2]) {
				if skip > 0 {
					skip--
				} else {
					found = append(found, pos)
				}
			}
			return (count == 0 || int64(len(found)) < max(count, 1)) && (maxLen == 0 || seen < maxLen)
		})
		switch {
		case !ok:
		case changed:
			skip = max(rank, -rank) - 1
			continue
		case count < 0 && len(found) == 0:
			x.c.WriteNull()
		case count < 0:
			x.c.WriteInt64(found[0])
		default:
			x.c.WriteArray(len(found))
			for _, p := range found {
				x.c.WriteInt64(p)
			}
		}
		return
	}
	x.c.WriteError("ERR too much contention on the key, retry")
}

// cmdLRem: LREM key count element: removes the first count occurrences
// (count < 0: the last; 0: all), moving the elements after the first one
// removed (before the last, from the tail) to close the gaps.
func cmdLRem(x *call) {
	count, err := strconv.ParseInt(string(x.args[2]), 10, 64)
	if err != nil {
		x.c.WriteError(errNotInt)
		return
	}
	for range x.s.cfg.CASAttempts {
		var gone []int64
		m, changed, ok := x.walkList(x.args[1], count < 0, func(pos int64, v []byte) bool {
			if bytes.Equal(v, x.args[3]) {
				gone = append(gone, pos)
			}
			return count == 0 || int64(len(gone)) < max(count, -count)
		})
		if !ok {
			return
		}
		if changed {
			continue
		}
		if len(gone) == 0 {
			x.c.WriteInt(0)
			return
		}
		err := x.listTxnIf(x.args[1], m, func(t *collTx) error {
			return t.removeAt(gone)
		})
		if errors.Is(err, errChanged) {
			continue
		}
		if err != nil {
			writeCASErr(x.c, err)
			return
		}
		x.c.WriteInt(len(gone))
		return
	}
	x.c.WriteError("ERR too much contention on the key, retry")
}

// removeAt removes the elements at positions gone (offsets from the head,
// distinct) by moving each kept element after the first removed one
// down, then shortening the list at the tail.
func (t *collTx) removeAt(gone []int64) error {
	drop := map[int64]bool{}
	first := gone[0]
	for _, p := range gone {
		drop[p] = true
		first = min(first, p)
	}
	n := t.listLen()
	w := first
	for r := first; r < n; r++ {
		if drop[r] {
			continue
		}
		if w != r {
			v, err := t.at(t.m.a + uint64(r))
			if err != nil {
				return err
			}
			if err := t.tx.Put(t.ctx, t.indexKey(t.m.a+uint64(w)), v); err != nil {
				return err
			}
		}
		w++
	}
	for p := w; p < n; p++ {
		if err := t.tx.Delete(t.ctx, t.indexKey(t.m.a+uint64(p))); err != nil {
			return err
		}
	}
	t.m.b = t.m.a + uint64(w)
	return nil
}

// cmdLInsert: LINSERT key BEFORE|AFTER pivot element.
func cmdLInsert(x *call) {
	where := strings.ToUpper(string(x.args[2]))
	if where != "BEFORE" && where != "AFTER" {
		x.c.WriteError(errSyntax)
		return
	}
	for range x.s.cfg.CASAttempts {
		at := int64(-1)
		m, changed, ok := x.walkList(x.args[1], false, func(pos int64, v []byte) bool {
			if bytes.Equal(v, x.args[3]) {
				at = pos
				return false
			}
			return true
		})
		if !ok {
			return
		}
		if changed {
			continue
		}
		switch {
		case !m.exists:
			x.c.WriteInt(0)
			return
		case at < 0:
			x.c.WriteInt(-1)
			return
		}
		if where == "AFTER" {
			at++
		}
		var n int64
		err := x.listTxnIf(x.args[1], m, func(t *collTx) error {
			err := t.insertAt(at, x.args[4])
			n = t.listLen()
			return err
		})
		if errors.Is(err, errChanged) {
			continue
		}
		if err != nil {
			writeCASErr(x.c, err)
			return
		}
		x.c.WriteInt64(n)
		return
	}
	x.c.WriteError("ERR too much contention on the key, retry")
}

// insertAt makes v the element at offset at, moving the shorter side
// outwards by one.
func (t *collTx) insertAt(at int64, v []byte) error {
	n := t.listLen()
	move := func(from, to uint64) error {
		e, err := t.at(from)
		if err != nil {
			return err
		}
		return t.tx.Put(t.ctx, t.indexKey(to), e)
	}
	if at < n-at {
		// Elements [0, at) one step towards the head.
		for i := int64(0); i < at; i++ {
			if err := move(t.m.a+uint64(i), t.m.a+uint64(i)-1); err != nil {
				return err
			}
		}
		t.m.a--
	} else {
		// Elements [at, n) one step towards the tail.
		for i := n - 1; i >= at; i-- {
			if err := move(t.m.a+uint64(i), t.m.a+uint64(i)+1); err != nil {
				return err
			}
		}
		t.m.b++
	}
	return t.tx.Put(t.ctx, t.indexKey(t.m.a+uint64(at)), v)
}
