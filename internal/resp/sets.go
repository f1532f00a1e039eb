package resp

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"strconv"
	"strings"
)

// Sets (collection.go): member m of a set is the key enc(k) 0x00 0x01 gen
// m, and the metadata counts the members, so SCARD is one read, SADD, SREM
// and SISMEMBER a few point reads and writes, and SMEMBERS one scan.
// Members come out in byte order.
//
// The members are also numbered: member m's value is its position (8
// bytes, big-endian), and position i, 0 <= i < count, is the key enc(k)
// 0x00 0x01 posGen(gen) i whose value is the member there. A uniform draw
// (SPOP, SRANDMEMBER) so draws positions and reads them, a few point reads
// whatever the set's size and however its keys are split into ranges,
// where a scan from a random point among the member keys favours members
// after a gap and, after pops, steps over the deletions they left. Adding
// a member gives it the next position; removing members moves the members
// at the last positions into the freed ones, so positions stay 0..count-1.
//
// A set not numbered (its metadata's b is 0, not setNumbered; member
// values empty) keeps being served as it was: SADD and SREM write only
// member keys, SPOP and SRANDMEMBER draw by scanning (draw). Such sets
// are those a TideKV wrote before the numbering, and every set written
// while the cluster has not reached the log version that lets the front
// end number them (SetPositioner, collTx.numbering): an older binary's
// front end on another node may write the set too, and would leave the
// positions out of step (an SADD giving none, an SREM leaving a hole).
// Once the cluster is there, new sets are numbered, and a write to one of
// at most maxNumbering members (those the command names included)
// numbers it first, in its transaction (numberSmall), so small sets
// become numbered as they are used; a larger one stays as it is until it
// is emptied or shrinks to that size. A numbered set is kept numbered by
// every write, whatever the version this node has learnt: only a cluster
// at that version numbers sets, so no older binary is left to write it.

// setNumbered, in a set's metadata b, says its members are numbered.
const setNumbered = 1

// maxNumbering is the most members of a set not numbered, with those the
// writing command names, that the write numbers in its transaction: two
// keys written a member, well within a transaction's 10,000.
const maxNumbering = 1000

// numbered reports whether the set's members have positions.
func (t *collTx) numbered() bool { return t.m.b == setNumbered }

// numberSmall numbers the members of a set not numbered, if sets may be
// numbered and it and the n members a write names are at most
// maxNumbering, inside the write's transaction; numbered reports whether it did (the metadata is to be
// saved).
func (t *collTx) numberSmall(n int) (numbered bool, err error) {
	if !t.numbering || !t.m.exists || t.numbered() || t.m.a+uint64(n) > maxNumbering {
		return false, nil
	}
	pre := elemPrefix(t.key, t.m.gen)
	kvs, err := t.tx.Scan(t.ctx, pre, prefixEnd(pre), int(t.m.a))
	if err != nil {
		return false, err
	}
	t.m.a, t.m.b = 0, setNumbered
	for _, kv := range kvs {
		if err := t.add(kv.Key[len(pre):]); err != nil {
			return false, err
		}
	}
	return true, nil
}

// posGen is the generation under which the positions of the set of
// generation gen are kept: another span than its members', so scans of
// the members never meet them.
func posGen(gen uint64) uint64 { return gen ^ 1<<63 }

// posKey is the key of position i.
func (t *collTx) posKey(i uint64) []byte {
	return binary.BigEndian.AppendUint64(elemPrefix(t.key, posGen(t.m.gen)), i)
}

// positions reads where each of ms is (-1: not a member; 0 for every
// member of a set not numbered), in one call.
func (t *collTx) positions(ms [][]byte) ([]int64, error) {
	keys := make([][]byte, len(ms))
	for i, m := range ms {
		keys[i] = t.elemKey(m)
	}
	rs, err := readChunks(t.ctx, t.tx, keys, t.batch)
	if err != nil {
		return nil, err
	}
	at := make([]int64, len(rs))
	for i, r := range rs {
		switch {
		case !r.Found:
			at[i] = -1
		case !t.numbered():
			at[i] = 0
		case len(r.Value) != 8:
			return nil, errPositions
		default:
			at[i] = int64(binary.BigEndian.Uint64(r.Value))
		}
	}
	return at, nil
}

// errPositions: a numbered set whose member keys and position keys
// disagree, which no TideKV command leaves.
var errPositions = errors.New("set member positions disagree with its members")

// membersAt reads the members at positions ps, in one call per MaxBatchKeys.
func (t *collTx) membersAt(ps []uint64) ([][]byte, error) {
	keys := make([][]byte, len(ps))
	for i, p := range ps {
		keys[i] = t.posKey(p)
	}
	rs, err := readChunks(t.ctx, t.tx, keys, t.batch)
	if err != nil {
		return nil, err
	}
	out := make([][]byte, len(rs))
	for i, r := range rs {
		if !r.Found {
			return nil, errPositions
		}
		out[i] = r.Value
	}
	return out, nil
}

// add makes m, not a member, a member at the next position (of a set not
// numbered: a member).
func (t *collTx) add(m []byte) error {
	i := t.m.a
	if !t.numbered() {
		t.m.a++
		return t.tx.Put(t.ctx, t.elemKey(m), nil)
	}
	if err := t.tx.Put(t.ctx, t.elemKey(m), binary.BigEndian.AppendUint64(nil, i)); err != nil {
		return err
	}
	t.m.a++
	return t.tx.Put(t.ctx, t.posKey(i), m)
}

// remove removes the distinct members ms, at positions ps (release; ps
// unused for a set not numbered).
func (t *collTx) remove(ms [][]byte, ps []uint64) error {
	if !t.numbered() {
		for _, m := range ms {
			if err := t.tx.Delete(t.ctx, t.elemKey(m)); err != nil {
				return err
			}
		}
		t.m.a -= uint64(len(ms))
		return nil
	}
	movers, err := t.membersAt(t.tail(ps))
	if err != nil {
		return err
	}
	return t.release(ms, ps, movers)
}

// tail is the positions past the count that removing the members at ps
// leaves whose members stay: they move into the positions freed below it.
func (t *collTx) tail(ps []uint64) []uint64 {
	left := t.m.a - uint64(len(ps))
	freed := make(map[uint64]bool, len(ps))
	for _, p := range ps {
		freed[p] = true
	}
	var out []uint64
	for p := left; p < t.m.a; p++ {
		if !freed[p] {
			out = append(out, p)
		}
	}
	return out
}

// release removes the distinct members ms, at positions ps: movers, the
// members at t.tail(ps), move into the positions freed below the new
// count, and the positions past it go.
func (t *collTx) release(ms [][]byte, ps []uint64, movers [][]byte) error {
	n := t.m.a
	left := n - uint64(len(ms))
	var holes []uint64
	for _, p := range ps {
		if p < left {
			holes = append(holes, p)
		}
	}
	put := func(k, v []byte) error { return t.tx.Put(t.ctx, k, v) }
	for i, m := range movers {
		if err := errors.Join(put(t.posKey(holes[i]), m), put(t.elemKey(m), binary.BigEndian.AppendUint64(nil, holes[i]))); err != nil {
			return err
		}
	}
	for p := left; p < n; p++ {
		if err := t.tx.Delete(t.ctx, t.posKey(p)); err != nil {
			return err
		}
	}
	for _, m := range ms {
		if err := t.tx.Delete(t.ctx, t.elemKey(m)); err != nil {
			return err
		}
	}
	t.m.a = left
	return nil
}

// draw reads, inside the transaction, members of a set not numbered to
// draw n of (drawKeys): all of them (whole) or n from a random point of
// the member keys on.
func (t *collTx) draw(n int) (out [][]byte, whole bool, err error) {
	kvs, whole, err := drawKeys(t.ctx, t.tx, elemPrefix(t.key, t.m.gen), int(t.m.a), n, t.batch)
	for _, kv := range kvs {
		out = append(out, kv.Key)
	}
	return out, whole, err
}

// drawPositions is n distinct positions of [0, card) drawn uniformly, in
// random order (all of them, shuffled, when n >= card): a Fisher-Yates
// shuffle of [0, card) stopped after n steps, the positions it moved kept
// in a map.
func drawPositions(card uint64, n int, randN func(int) int) []uint64 {
	n = int(min(uint64(n), card))
	moved := make(map[uint64]uint64, n)
	get := func(i uint64) uint64 {
		if v, ok := moved[i]; ok {
			return v
		}
		return i
	}
	out := make([]uint64, n)
	for i := range uint64(n) {
		j := i + uint64(randN(int(card-i)))
		out[i] = get(j)
		moved[j] = get(i)
	}
	return out
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
		numbered, err := t.numberSmall(len(members))
		if err != nil {
			return false, err
		}
		at, err := t.positions(members)
		if err != nil {
			return false, err
		}
		var gone [][]byte
		var ps []uint64
		for i, m := range members {
			switch {
			case add && at[i] < 0:
				if err := t.add(m); err != nil {
					return false, err
				}
				n++
			case !add && at[i] >= 0:
				gone, ps = append(gone, m), append(ps, uint64(at[i]))
			}
		}
		if len(gone) > 0 {
			n = int64(len(gone))
			if err := t.remove(gone, ps); err != nil {
				return false, err
			}
		}
		return n > 0 || numbered, nil
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
		at, err := t.positions(x.args[2:])
		for i := range at {
			in[i] = at[i] >= 0
		}
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
		t := x.newColl(tx, dst, setMarker)
		for _, m := range out {
			if err := t.add(m); err != nil {
				return err
			}
		}
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
		if t.m.a == 0 || n == 0 {
			return false, nil
		}
		if _, err := t.numberSmall(n); err != nil {
			return false, err
		}
		if !t.numbered() {
			pool, whole, err := t.draw(n)
			if err != nil {
				return false, err
			}
			if drawn = pool; whole {
				drawn = sample(pool, n, x.s.cfg.randN)
			}
			return true, t.remove(drawn, nil)
		}
		// The members drawn and those that will move into their
		// positions, in one read.
		ps := drawPositions(t.m.a, n, x.s.cfg.randN)
		read, err := t.membersAt(append(ps, t.tail(ps)...))
		if err != nil {
			return false, err
		}
		drawn = read[:len(ps)]
		return true, t.release(drawn, ps, read[len(ps):])
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
	want := int(min(max(count, -count), math.MaxInt32))
	var drawn [][]byte
	var whole bool
	// One read-only transaction, not the key's shared one (keyTxn): a
	// read need not wait for the writes queued on the key.
	err := x.kv.Txn(x.ctx, func(tx TxnKV) error {
		drawn = nil
		t, err := x.openColl(tx, x.args[1], setMarker)
		if err != nil || t.m.a == 0 {
			return err
		}
		if !t.numbered() {
			drawn, whole, err = t.draw(want)
			if whole && count >= 0 {
				drawn = sample(drawn, want, x.s.cfg.randN)
			}
			return err
		}
		var ps []uint64
		whole = count < 0 && (uint64(want) >= t.m.a || int64(want) != -count)
		switch {
		case count >= 0 || whole:
			// Distinct members; or, for at least as many repeated draws
			// as members, the whole set to draw from.
			ps = drawPositions(t.m.a, want, x.s.cfg.randN)
		default:
			ps = make([]uint64, want)
			for i := range ps {
				ps[i] = uint64(x.s.cfg.randN(int(t.m.a)))
			}
		}
		drawn, err = t.membersAt(ps)
		return err
	})
	if err != nil {
		writeCASErr(x.c, err)
		return
	}
	switch {
	case len(x.args) == 2 && len(drawn) == 0:
		x.c.WriteNull()
	case len(x.args) == 2:
		x.c.WriteBulk(drawn[0])
	case count < 0 && len(drawn) > 0:
		// Each of -count draws anew from the whole set; else the
		// members drawn (of a set not numbered: read from a random
		// point, fewer than -count) in turn.
		out, ok := repeatedDraws(x, -count, func(i int64) []byte {
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
		at, err := from.positions([][]byte{member})
		if moved = err == nil && at[0] >= 0; !moved || bytes.Equal(src, dst) {
			return err
		}
		// Only a set the move writes is numbered (its numbering is saved
		// with the move), and then read again.
		renumbered, err := from.numberSmall(1)
		if err == nil && renumbered {
			at, err = from.positions([][]byte{member})
		}
		if err != nil {
			return err
		}
		if err := from.remove([][]byte{member}, []uint64{uint64(at[0])}); err != nil {
			return err
		}
		if err := from.save(); err != nil {
			return err
		}
		if at, err = to.positions([][]byte{member}); err != nil || at[0] >= 0 {
			return err
		}
		if _, err := to.numberSmall(1); err != nil {
			return err
		}
		if err := to.add(member); err != nil {
			return err
		}
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
