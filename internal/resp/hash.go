package resp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
)

// clearFields deletes what is left in the span of key k (a hash's fields,
// a collection's elements) while k does not exist: the garbage of a hash
// or collection deleted (DEL) or replaced. Each batch's deletes are one
// write guarded on k's absence (clearWhileAbsent), and the clearing stops
// once k exists again: a command that made k anew meanwhile owns the span
// and keeps its own elements (a hash's or sorted set's creation clears
// what is left before it writes; a list, set or stream is under a new
// generation, whose old one stays as garbage until the next DEL). An
// unguarded delete would remove the new collection's elements under its
// metadata. A KV that cannot scan holds no hashes.
//
// A clearing of more than one batch leaves as many deletions (MVCC
// tombstones, until GC) in the span, which the read of the span a ZADD or
// HSET making k anew does first (zprobe) would step over, every one: after
// a DEL of ~38,000 members that read was slow enough for admission to
// refuse the ZADD (issue 37). So such a clearing reads k's metadata
// before its scans and again after the last, and if k was absent at the
// same version both times, no write came to the span in between (every
// write of elements writes the metadata), and the clearing, from the
// span's start to its end, left nothing: it records the span clean at
// that version (zprobes.found), and a command of this node making k anew
// while that version is k's newest neither reads nor scans the span.
func (x *call) clearFields(k []byte) error {
	start := fieldPrefix(k)
	var ver *Version // k's metadata's, read before a clearing of batches
	for start != nil {
		var made bool
		var err error
		if start, made, err = x.clearBatch(k, start, &ver); err != nil || made {
			return err
		}
	}
	if ver == nil {
		return nil
	}
	ctx, cancel := x.clearingCtx()
	defer cancel()
	rs, err := x.kv.BatchGet(ctx, [][]byte{encKey(k)})
	if err == nil && !rs[0].Found && rs[0].Version == *ver {
		x.s.zprobes.found(x.kv, k, *ver)
	}
	return err
}

// clearBatch clears a batch of k's span from start (clearFields) and
// returns where the next begins (nil: the clearing is done); made: k
// exists again, and the clearing stops. The first of several batches
// reads k's metadata's version into ver first, and is scanned again.
func (x *call) clearBatch(k, start []byte, ver **Version) (next []byte, made bool, err error) {
	ctx, cancel := x.clearingCtx()
	defer cancel()
	kvs, err := x.kv.Scan(ctx, start, fieldsEnd(k), x.s.cfg.MaxBatchKeys)
	switch {
	case errors.Is(err, ErrUnordered):
		return nil, false, nil
	case err != nil || len(kvs) == 0:
		return nil, false, err
	case *ver == nil && len(kvs) == x.s.cfg.MaxBatchKeys:
		rs, err := x.kv.BatchGet(ctx, [][]byte{encKey(k)})
		if err != nil || rs[0].Found {
			return nil, rs != nil && rs[0].Found, err
		}
		*ver = &rs[0].Version
		return start, false, nil
	}
	ops := make([]Op, len(kvs))
	for i, kv := range kvs {
		ops[i] = Op{Key: kv.Key, Delete: true}
	}
	if made, err := x.clearWhileAbsent(ctx, k, ops); err != nil || made {
		return nil, made, err
	}
	if len(kvs) < x.s.cfg.MaxBatchKeys {
		return nil, false, nil
	}
	return append(append([]byte(nil), kvs[len(kvs)-1].Key...), 0), false, nil
}

// clearingCtx is the context of one step of a span's clearing, for a
// command of its own: a request's time of its own (RequestTimeout), as
// the clearing takes as many batches as the key had elements, not as
// its command had arguments (Server.timeout; a DEL of a sorted set of
// 38,000 members in two ranges ran out of its 5 s, ambiguous, issue 37);
// going on to the end if the client leaves (what the clearing leaves is
// garbage); and not measured by admission from the command's arrival,
// which would take the command's own scans and batches before it for
// queueing delay (a node at load 8 refused a DEL's clearing midway:
// TRYAGAIN, the key gone and its members left). Inside EXEC or a script
// it is EXEC's.
func (x *call) clearingCtx() (context.Context, context.CancelFunc) {
	if _, own := x.ctx.(*cmdCtx); !own {
		return x.ctx, func() {}
	}
	return context.WithTimeout(x.s.ctx, x.s.cfg.RequestTimeout)
}

// clearWhileAbsent applies ops, deletes of keys of k's span, at once if k
// is absent; made: k exists, and nothing was deleted. It is one guarded
// write, or, where the guard cannot cover them (k and the keys in
// different ranges, inside EXEC), one transaction that reads k and
// deletes them.
func (x *call) clearWhileAbsent(ctx context.Context, k []byte, ops []Op) (made bool, err error) {
	res, err := x.kv.GuardedWrite(ctx, ops, absentGuard(k))
	if !errors.Is(err, ErrInvalidArgument) {
		return res.Failed, err
	}
	err = x.kv.Txn(ctx, func(tx TxnKV) error {
		r, err := tx.Get(ctx, encKey(k))
		if made = r.Found; err != nil || made {
			return err
		}
		for _, op := range ops {
			if err := tx.Delete(ctx, op.Key); err != nil {
				return err
			}
		}
		return nil
	})
	return made, err
}

// hashState reads hash h's marker and the given fields in one BatchGet. It
// writes WRONGTYPE and returns ok=false if h holds a string.
func (x *call) hashState(h []byte, fields [][]byte) (exists bool, vals []Result, ok bool) {
	keys := make([][]byte, 0, 1+len(fields))
	keys = append(keys, encKey(h))
	for _, f := range fields {
		keys = append(keys, fieldKey(h, f))
	}
	rs, err := x.batchGet(keys)
	if err != nil {
		replyErr(x.c, err)
		return false, nil, false
	}
	if rs[0].Found && !isHash(rs[0].Value) {
		x.c.WriteError(errWrongType)
		return false, nil, false
	}
	if !rs[0].Found {
		// Without its marker the hash does not exist; any fields left
		// behind (after SET or DEL) are stale.
		for i := range rs[1:] {
			rs[1+i] = Result{}
		}
	}
	return rs[0].Found, rs[1:], true
}

func cmdHSet(x *call) {
	if len(x.args)%2 != 0 {
		x.c.WriteError(errArity(x.name))
		return
	}
	h := x.args[1]
	var fields [][]byte
	vals := map[string][]byte{}
	for i := 2; i < len(x.args); i += 2 {
		f := string(x.args[i])
		if _, dup := vals[f]; !dup {
			fields = append(fields, x.args[i])
		}
		vals[f] = x.args[i+1]
	}
	if !x.hsetOneStep(h, fields, vals) {
		x.hsetInTxn(h, fields, vals)
	}
}

// replyHSet answers HSET with the number of new fields, HMSET with OK.
func (x *call) replyHSet(added int) {
	if x.name == "hmset" {
		x.c.WriteString("OK")
	} else {
		x.c.WriteInt(added)
	}
}

// hashOps are the writes of HSET: the marker, then each field.
func hashOps(h []byte, fields [][]byte, vals map[string][]byte) []Op {
	ops := make([]Op, 0, 1+len(fields))
	// The marker keeps the hash's TTL, as in Redis.
	ops = append(ops, Op{Key: encKey(h), Value: hashMarker, Expiry: Expiry{Keep: true}})
	for _, f := range fields {
		ops = append(ops, Op{Key: fieldKey(h, f), Value: vals[string(f)]})
	}
	return ops
}

// hsetOneStep writes the hash in one guarded write: the store checks the
// marker (WRONGTYPE on a string), clears stale fields if the hash is new,
// and says which fields existed. It returns false, having replied nothing,
// when the write cannot be one step (too many fields for one write, or the
// hash spans ranges).
func (x *call) hsetOneStep(h []byte, fields [][]byte, vals map[string][]byte) bool {
	if 1+len(fields) > x.s.cfg.MaxBatchKeys {
		return false
	}
	g := Guard{Key: encKey(h), Value: hashMarker, ClearStart: fieldPrefix(h), ClearEnd: fieldsEnd(h)}
	res, err := x.kv.GuardedWrite(x.ctx, hashOps(h, fields, vals), g)
	switch {
	case errors.Is(err, ErrInvalidArgument):
		return false
	case err != nil:
		replyErr(x.c, err)
	case res.Failed:
		x.c.WriteError(errWrongType)
	default:
		added := 0
		for _, existed := range res.Existed[1:] {
			if !existed {
				added++
			}
		}
		x.replyHSet(added)
	}
	return true
}

// hsetInTxn is HSET for hashes one guarded write cannot cover (more
// fields than one write takes, or the marker and fields in different
// ranges): one transaction reads the marker and the fields and writes
// them, so that the hash changes at once however many fields it gets. A
// new hash clears what an earlier one left in its span, in the
// transaction or, past zStaleInTxn keys, before it (zclearStale).
func (x *call) hsetInTxn(h []byte, fields [][]byte, vals map[string][]byte) {
	keys := make([][]byte, len(fields))
	for i, f := range fields {
		keys[i] = fieldKey(h, f)
	}
	added := 0
	body := func(tx TxnKV) error {
		added = 0 // an attempt retried after a conflict starts over
		v := &txView{tx: tx, now: x.s.cfg.Now}
		m, err := v.read(x.ctx, encKey(h))
		if err != nil {
			return err
		}
		if m.Found && !isHash(m.Value) {
			return errZWrongType
		}
		if !m.Found {
			if err := x.zclearInTxn(v, h, m.Version); err != nil {
				return err
			}
		}
		rs, err := readChunks(x.ctx, tx, keys, x.s.readBatch())
		if err != nil {
			return err
		}
		for _, r := range rs {
			if !r.Found {
				added++
			}
		}
		return v.Write(x.ctx, hashOps(h, fields, vals))
	}
	if err := x.clearingTxn(h, func() error { return x.kv.Txn(x.ctx, body) }); err != nil {
		x.zreplyErr(err)
		return
	}
	x.replyHSet(added)
}

func cmdHGet(x *call) {
	_, rs, ok := x.hashState(x.args[1], x.args[2:3])
	if !ok {
		return
	}
	if rs[0].Found {
		x.c.WriteBulk(rs[0].Value)
	} else {
		x.c.WriteNull()
	}
}

func cmdHExists(x *call) {
	_, rs, ok := x.hashState(x.args[1], x.args[2:3])
	if !ok {
		return
	}
	if rs[0].Found {
		x.c.WriteInt(1)
	} else {
		x.c.WriteInt(0)
	}
}

func cmdHMGet(x *call) {
	_, rs, ok := x.hashState(x.args[1], x.args[2:])
	if !ok {
		return
	}
	x.c.WriteArray(len(rs))
	for _, r := range rs {
		if r.Found {
			x.c.WriteBulk(r.Value)
		} else {
			x.c.WriteNull()
		}
	}
}

// cmdHGetAll serves HGETALL, HKEYS, HVALS and HLEN with a range scan over
// [enc(h), enc(h) 0x00 0x02): the marker followed by the fields. A hash
// whose fields exceed the output buffer is refused (HLEN only counts, so it
// reads page by page, holding one page).
func cmdHGetAll(x *call) {
	h := x.args[1]
	budget := x.s.cfg.MaxOutputBuffer
	if x.name == "hlen" {
		budget = -1
	}
	kvs, n, err := x.readSpan(encKey(h), fieldsEnd(h), budget)
	if errors.Is(err, errReplyTooLarge) {
		x.c.WriteError(fmt.Sprintf("ERR hash of more than %d bytes: %s replies at most the output buffer limit (--redis-max-output-buffer); read it with HMGET in parts", budget, strings.ToUpper(x.name)))
		return
	}
	if err != nil {
		replyErr(x.c, err)
		return
	}
	if len(kvs) == 0 || !bytes.Equal(kvs[0].Key, encKey(h)) {
		kvs = nil // no marker: no hash (any fields are stale)
	} else if !isHash(kvs[0].Value) {
		x.c.WriteError(errWrongType)
		return
	} else {
		kvs = kvs[1:]
	}
	pre := fieldPrefix(h)
	switch x.name {
	case "hlen":
		if kvs == nil {
			n = 0
		}
		x.c.WriteInt(max(n-1, 0))
	case "hkeys":
		x.c.WriteArray(len(kvs))
		for _, kv := range kvs {
			x.c.WriteBulk(kv.Key[len(pre):])
		}
	case "hvals":
		x.c.WriteArray(len(kvs))
		for _, kv := range kvs {
			x.c.WriteBulk(kv.Value)
		}
	default:
		x.writeMap(len(kvs))
		for _, kv := range kvs {
			x.c.WriteBulk(kv.Key[len(pre):])
			x.c.WriteBulk(kv.Value)
		}
	}
}

// cmdHDel deletes fields. Up to MaxBatchKeys-1 of them (nearly always)
// it reads them in one BatchGet and deletes them in one Write, served by
// the node leading the hash's range; more are one transaction
// (hdelInTxn), as Redis deletes them at once.
func cmdHDel(x *call) {
	h := x.args[1]
	if len(x.args)-2 >= x.s.cfg.MaxBatchKeys {
		x.hdelInTxn(h)
		return
	}
	exists, rs, ok := x.hashState(h, x.args[2:])
	if !ok {
		return
	}
	if !exists {
		x.c.WriteInt(0)
		return
	}
	n := 0
	seen := map[string]bool{}
	var ops []Op
	for i, f := range x.args[2:] {
		if rs[i].Found && !seen[string(f)] {
			seen[string(f)] = true
			n++
			ops = append(ops, Op{Key: fieldKey(h, f), Delete: true})
		}
	}
	if len(ops) > 0 {
		if err := x.write(ops); err != nil {
			replyErr(x.c, err)
			return
		}
		// The last field gone, the hash goes too.
		left, err := x.kv.Scan(x.ctx, fieldPrefix(h), fieldsEnd(h), 1)
		if err != nil {
			replyErr(x.c, err)
			return
		}
		if len(left) == 0 {
			m := hashMarker
			if _, _, _, err := x.kv.CompareAndSet(x.ctx, encKey(h), &m, nil, Expiry{}); err != nil {
				replyErr(x.c, err)
				return
			}
		}
	}
	x.c.WriteInt(n)
}

// hdelInTxn is HDEL of more fields than one write takes: one transaction
// reads and deletes them, and the hash with its last field.
func (x *call) hdelInTxn(h []byte) {
	// A field named twice is deleted, and counted, once.
	fields := distinct(x.args[2:])
	keys := make([][]byte, len(fields))
	for i, f := range fields {
		keys[i] = fieldKey(h, f)
	}
	n := 0
	err := x.kv.Txn(x.ctx, func(tx TxnKV) error {
		n = 0 // an attempt retried after a conflict starts over
		v := &txView{tx: tx, now: x.s.cfg.Now}
		m, err := v.read(x.ctx, encKey(h))
		if err != nil || !m.Found {
			return err
		}
		if !isHash(m.Value) {
			return errZWrongType
		}
		rs, err := x.deleteFound(tx, keys)
		if err != nil {
			return err
		}
		for _, r := range rs {
			if r.Found {
				n++
			}
		}
		if n == 0 {
			return nil
		}
		// The last field gone, the hash goes too.
		left, err := v.Scan(x.ctx, fieldPrefix(h), fieldsEnd(h), 1)
		if err == nil && len(left) == 0 {
			_, err = v.Delete(x.ctx, encKey(h))
		}
		return err
	})
	if err != nil {
		x.zreplyErr(err)
		return
	}
	x.c.WriteInt(n)
}
