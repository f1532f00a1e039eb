package resp

import (
	"bytes"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
)

// Sets (collection.go): member m of a set is the key enc(k) 0x00 0x01 gen
// m with an empty value, and the metadata counts the members, so SCARD is
// one read, SADD, SREM and SISMEMBER a few point reads and writes, and
// SMEMBERS one scan. Members come out in byte order.

// member reports whether m is a member, inside the transaction.
func (t *collTx) member(m []byte) (bool, error) {
	r, err := t.tx.Get(t.ctx, t.elemKey(m))
	return r.Found, err
}

// members reports which of ms are members, read in one call.
func (t *collTx) members(ms [][]byte) ([]bool, error) {
	keys := make([][]byte, len(ms))
	for i, m := range ms {
		keys[i] = t.elemKey(m)
	}
	rs, err := t.tx.BatchGet(t.ctx, keys)
	in := make([]bool, len(rs))
	for i, r := range rs {
		in[i] = r.Found
	}
	return in, err
}

// distinct is args without repeats, in their order.
func distinct(args [][]byte) [][]byte {
	seen := map[string]bool{}
	var out [][]byte
	for _, a := range args {
		if !seen[string(a)] {
			seen[string(a)] = true
			out = append(out, a)
		}
	}
	return out
}

// cmdSAddRem: SADD and SREM key member..., the number of members added
// (removed).
func cmdSAddRem(x *call) {
	add := x.name == "sadd"
	members := distinct(x.args[2:])
	var n int64
	err := x.collTxnReading(x.args[1], setMarker, members, func(t *collTx) (bool, error) {
		n = 0
		if !add && !t.m.exists {
			return false, nil
		}
		in, err := t.members(members)
		if err != nil {
			return false, err
		}
		for i, m := range members {
			switch {
			case add && !in[i]:
				err = t.tx.Put(x.ctx, t.elemKey(m), nil)
				t.m.a++
			case !add && in[i]:
				err = t.tx.Delete(x.ctx, t.elemKey(m))
				t.m.a--
			default:
				continue
			}
			if err != nil {
				return false, err
			}
			n++
		}
		return n > 0, nil
	})
	if err != nil {
		writeCASErr(x.c, err)
		return
	}
	x.c.WriteInt64(n)
}

func cmdSCard(x *call) {
	if m, ok := x.readMeta(x.args[1], setMarker); ok {
		x.c.WriteInt64(int64(m.a))
	}
}

// cmdSIsMember: SISMEMBER key member, SMISMEMBER key member...
func cmdSIsMember(x *call) {
	var in []bool
	err := x.collTxnReading(x.args[1], setMarker, x.args[2:], func(t *collTx) (bool, error) {
		in = make([]bool, len(x.args)-2)
		if !t.m.exists {
			return false, nil
		}
		var err error
		in, err = t.members(x.args[2:])
		return false, err
	})
	if err != nil {
		writeCASErr(x.c, err)
		return
	}
	if x.name == "smismember" {
		x.c.WriteArray(len(in))
	}
	for _, b := range in {
		if b {
			x.c.WriteInt(1)
		} else {
			x.c.WriteInt(0)
		}
	}
}

// setRead is one set as a consistent read found it.
type setRead struct {
	m       meta
	members [][]byte
}

// readSets reads the sets at keys, each whole, as of one moment: each
// set's metadata is read again after all are scanned, and the reads are
// retried while any changed (each set was then unchanged from its scan
// on, so all were at the last scan's start). A key of another type
// replies WRONGTYPE. ok false: it replied.
func (x *call) readSets(keys [][]byte) ([]setRead, bool) {
	for range x.s.cfg.CASAttempts {
		out := make([]setRead, len(keys))
		for i, k := range keys {
			m, kvs, ok := x.scanElems(k, setMarker, func(meta) ([]byte, []byte, int) { return nil, nil, -1 })
			if !ok {
				return nil, false
			}
			out[i].m = m
			for _, kv := range kvs {
				out[i].members = append(out[i].members, kv.Key)
			}
		}
		same := true
		for i, k := range keys {
			m, ok := x.readMeta(k, setMarker)
			if !ok {
				return nil, false
			}
			if m.exists != out[i].m.exists || m.gen != out[i].m.gen || m.ver != out[i].m.ver {
				same = false
				break
			}
		}
		if same {
			return out, true
		}
	}
	x.c.WriteError("ERR too much contention on the keys, retry")
	return nil, false
}

func cmdSMembers(x *call) {
	sets, ok := x.readSets(x.args[1:2])
	if ok {
		writeMembers(x, sets[0].members)
	}
}

// writeBulks answers an array of values.
func writeBulks(x *call, vals [][]byte) {
	x.c.WriteArray(len(vals))
	for _, v := range vals {
		x.c.WriteBulk(v)
	}
}

// writeMembers answers a set's members (a RESP3 set).
func writeMembers(x *call, members [][]byte) {
	x.writeSet(len(members))
	for _, m := range members {
		x.c.WriteBulk(m)
	}
}

// cmdSetAlgebra: SINTER, SUNION, SDIFF key..., and their STORE forms
// destination key..., which replace destination (whatever its type):
// the sorted-set algebra's transaction (cmdZAlgebra) over sets, members
// all scoring 1, so the result comes in byte order.
func cmdSetAlgebra(x *call) {
	op := strings.TrimSuffix(x.name, "store")
	keys := x.args[1:]
	var dst []byte
	if op != x.name {
		dst, keys = keys[0], keys[1:]
	}
	var out [][]byte
	err := x.kv.Txn(x.ctx, func(tx TxnKV) error {
		v := &txView{tx: tx, now: x.s.cfg.Now}
		ins, exists, err := x.zreadInputs(v, keys, true)
		if err != nil {
			return err
		}
		out = nil
		for _, e := range zcombine(op[1:], ins, exists, nil, "min") {
			out = append(out, e.member)
		}
		if dst == nil {
			return nil
		}
		if err := x.clearKey(v, dst); err != nil || len(out) == 0 {
			return err
		}
		t := &collTx{ctx: x.ctx, tx: tx, key: dst, marker: setMarker, m: newMeta(setMarker)}
		for _, m := range out {
			if err := tx.Put(x.ctx, t.elemKey(m), nil); err != nil {
				return err
			}
		}
		t.m.a = uint64(len(out))
		return t.save()
	})
	switch {
	case err != nil:
		x.zreplyErr(err)
	case dst != nil:
		x.c.WriteInt(len(out))
	default:
		writeMembers(x, out)
	}
}

// draw reads, inside the transaction, the members to draw n of
// (drawKeys): all of them (whole) or n from a random point on.
func (t *collTx) draw(n, maxWhole int) (out [][]byte, whole bool, err error) {
	kvs, whole, err := drawKeys(t.ctx, t.tx, elemPrefix(t.key, t.m.gen), int(t.m.a), n, maxWhole)
	for _, kv := range kvs {
		out = append(out, kv.Key)
	}
	return out, whole, err
}

// binaryRand is a random point among member keys.
func binaryRand() []byte {
	var b [8]byte
	for i := range b {
		b[i] = byte(rand.UintN(256))
	}
	return b[:]
}

// cmdSPop: SPOP key [count]: draws members and removes them in the
// transaction of the set's key, which the commands on that key share
// (keyTxn): concurrent SPOPs of one set run one after another in one
// transaction, each drawing from what the ones before it left, instead of
// each drawing outside and all but one conflicting when they commit.
func cmdSPop(x *call) {
	if len(x.args) > 3 {
		x.c.WriteError(errSyntax)
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
	n := int(min(count, math.MaxInt32))
	var drawn [][]byte
	err := x.collTxn(x.args[1], setMarker, func(t *collTx) (bool, error) {
		drawn = nil
		pool, whole, err := t.draw(n, x.s.cfg.MaxBatchKeys)
		if err != nil || len(pool) == 0 {
			return false, err
		}
		if drawn = pool; whole {
			drawn = sample(pool, n, x.s.cfg.randN)
		}
		for _, d := range drawn {
			if err := t.tx.Delete(t.ctx, t.elemKey(d)); err != nil {
				return false, err
			}
		}
		t.m.a -= uint64(len(drawn))
		return true, nil
	})
	switch {
	case err != nil:
		writeCASErr(x.c, err)
	case !hasCount && len(drawn) == 0:
		x.c.WriteNull()
	case !hasCount:
		x.c.WriteBulk(drawn[0])
	default:
		writeMembers(x, drawn)
	}
}

// cmdSRandMember: SRANDMEMBER key [count]; a negative count may repeat
// members.
func cmdSRandMember(x *call) {
	if len(x.args) > 3 {
		x.c.WriteError(errSyntax)
		return
	}
	count, ok := x.randCount()
	if !ok {
		return
	}
	want := max(count, -count)
	var drawn [][]byte
	var whole bool
	// One read-only transaction, not the key's shared one (keyTxn): a
	// read need not wait for the writes queued on the key.
	err := x.kv.Txn(x.ctx, func(tx TxnKV) error {
		t, err := x.openColl(tx, x.args[1], setMarker)
		if err == nil {
			drawn, whole, err = t.draw(int(min(want, math.MaxInt32)), x.s.cfg.MaxBatchKeys)
		}
		return err
	})
	if err != nil {
		writeCASErr(x.c, err)
		return
	}
	if whole && count >= 0 {
		drawn = sample(drawn, int(min(want, math.MaxInt32)), x.s.cfg.randN)
	}
	switch {
	case len(x.args) == 2 && len(drawn) == 0:
		x.c.WriteNull()
	case len(x.args) == 2:
		x.c.WriteBulk(drawn[0])
	case count < 0 && len(drawn) > 0:
		// From a whole set each draw is made anew, as Redis draws; else
		// the members read repeat in turn.
		out, ok := repeatedDraws(x, want, func(i int64) []byte {
			if whole {
				return drawn[x.s.cfg.randN(len(drawn))]
			}
			return drawn[i%int64(len(drawn))]
		}, func(d []byte) int { return len(d) })
		if ok {
			writeBulks(x, out)
		}
	default:
		writeBulks(x, drawn)
	}
}

// randCount is SRANDMEMBER's and ZRANDMEMBER's count (1 when none is
// given; negative: members may repeat); ok false: it replied.
func (x *call) randCount() (int64, bool) {
	if len(x.args) < 3 {
		return 1, true
	}
	n, err := strconv.ParseInt(string(x.args[2]), 10, 64)
	if err != nil {
		x.c.WriteError(errNotInt)
		return 0, false
	}
	if n == math.MinInt64 {
		x.c.WriteError("ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807")
		return 0, false
	}
	return n, true
}

// cmdSScan: SSCAN key cursor [MATCH pattern] [COUNT n]: COUNT members a
// call, in byte order, the cursor naming the member to resume at.
func cmdSScan(x *call) {
	id, err := strconv.ParseUint(string(x.args[2]), 10, 64)
	if err != nil {
		x.c.WriteError("ERR invalid cursor")
		return
	}
	a, ok := x.collectionScanArgs()
	if !ok {
		return
	}
	start, ok := x.resumeCursor(id, nil)
	if !ok {
		return
	}
	_, kvs, ok := x.scanElems(x.args[1], setMarker, func(meta) ([]byte, []byte, int) { return start, nil, a.count })
	if !ok {
		return
	}
	var cur uint64
	if len(kvs) == a.count {
		cur = x.s.saveCursor(append(append([]byte(nil), kvs[len(kvs)-1].Key...), 0))
	}
	var out [][]byte
	for _, kv := range kvs {
		if a.pattern == nil || globMatch(a.pattern, kv.Key) {
			out = append(out, kv.Key)
		}
	}
	x.writeScanReply(cur, out)
}

// cmdSMove: SMOVE source destination member, in one transaction over
// both sets. A missing source answers 0 before the destination's type is
// looked at, as in Redis.
func cmdSMove(x *call) {
	src, dst, member := x.args[1], x.args[2], x.args[3]
	moved := false
	err := x.kv.Txn(x.ctx, func(tx TxnKV) error {
		moved = false
		from, err := x.openColl(tx, src, setMarker)
		if err != nil || !from.m.exists {
			return err
		}
		to, err := x.openColl(tx, dst, setMarker)
		if err != nil {
			return err
		}
		if moved, err = from.member(member); err != nil || !moved || bytes.Equal(src, dst) {
			return err
		}
		if err := tx.Delete(x.ctx, from.elemKey(member)); err != nil {
			return err
		}
		from.m.a--
		if err := from.save(); err != nil {
			return err
		}
		in, err := to.member(member)
		if err != nil || in {
			return err
		}
		if err := tx.Put(x.ctx, to.elemKey(member), nil); err != nil {
			return err
		}
		to.m.a++
		return to.save()
	})
	switch {
	case err != nil:
		writeCASErr(x.c, err)
	case moved:
		x.c.WriteInt(1)
	default:
		x.c.WriteInt(0)
	}
}
