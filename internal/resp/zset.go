package resp

import (
	"bytes"
	"errors"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// errZWrongType ends a sorted-set transaction whose key holds another
// type; the command answers WRONGTYPE.
var errZWrongType = errors.New(errWrongType)

// zsetState reads z's metadata. It writes WRONGTYPE and returns ok=false
// if z holds another type.
func (x *call) zsetState(z []byte) (card int, exists, ok bool) {
	v, err := x.kv.Get(x.ctx, encKey(z))
	switch {
	case errors.Is(err, ErrNotFound):
		return 0, false, true
	case err != nil:
		replyErr(x.c, err)
		return 0, false, false
	case !isZSetMeta(v):
		x.c.WriteError(errWrongType)
		return 0, false, false
	}
	return int(zsetCard(v)), true, true
}

// zwalk calls fn on the index entries of [start, end) in order, after
// skipping skip of them, for at most take (< 0: all), reading at most
// MaxBatchKeys keys a page and no more than it needs. fn returning false
// stops the walk.
func (x *call) zwalk(z, start, end []byte, skip, take int, fn func(zEntry) bool) error {
	if start == nil || bytes.Compare(start, end) >= 0 {
		return nil
	}
	for take != 0 {
		limit := x.s.cfg.MaxBatchKeys
		if take > 0 {
			limit = min(limit, skip+take)
		}
		kvs, err := x.kv.Scan(x.ctx, start, end, limit)
		if err != nil {
			return err
		}
		for _, kv := range kvs {
			if skip > 0 {
				skip--
				continue
			}
			if take == 0 || !fn(zEntryOf(z, kv)) {
				return nil
			}
			take--
		}
		if len(kvs) < limit {
			return nil
		}
		start = append(append([]byte(nil), kvs[len(kvs)-1].Key...), 0)
	}
	return nil
}

// zcount counts the index entries of [start, end), holding one page.
func (x *call) zcount(z, start, end []byte) (int, error) {
	n := 0
	err := x.zwalk(z, start, end, 0, -1, func(zEntry) bool { n++; return true })
	return n, err
}

// zMember is a member's state in a transaction: its score if present.
type zMember struct {
	score   float64
	present bool
}

// zupdate changes members of z in one transaction: it reads the metadata
// and each named member, lets change set their new states (it runs again
// if the transaction retries, and returns false to write nothing), then
// writes the member keys, their index entries and the count together, so
// no reader sees one without the others. The set is deleted when its last
// member goes; the metadata keeps its TTL.
//
// A new set is made on a clean span: what an earlier set at z left (after
// SET, GETDEL or its expiry) is deleted in the same transaction
// (zclearInTxn), so a ZADD is one transaction, batched with the other
// writes of z (keyTxn). Only when more is left than a transaction should
// carry is it cleared first on its own (zclearStale), and the transaction
// run again.
func (x *call) zupdate(z []byte, names [][]byte, change func(exists bool, ms []zMember) (bool, error)) error {
	body := func(tx TxnKV) error {
		v := &txView{tx: tx, now: x.s.cfg.Now}
		meta, err := v.read(x.ctx, encKey(z))
		if err != nil {
			return err
		}
		if meta.Found && !isZSetMeta(meta.Value) {
			return errZWrongType
		}
		card := 0
		var hint []byte
		if meta.Found {
			card, hint = int(zsetCard(meta.Value)), zsetHint(meta.Value)
		} else if err := x.zclearInTxn(v, z, meta.Version); err != nil {
			return err
		}
		keys := make([][]byte, len(names))
		for i, m := range names {
			keys[i] = zMemberKey(z, m)
		}
		rs, err := v.readAll(x.ctx, keys)
		if err != nil {
			return err
		}
		stored := make([]zMember, len(names))
		for i, r := range rs {
			if r.Found {
				stored[i] = zMember{score: zScoreOf(r.Value), present: true}
			}
		}
		ms := slices.Clone(stored)
		before := slices.Clone(ms)
		if write, err := change(meta.Found, ms); err != nil || !write {
			return err
		}
		var ops []Op
		for i, m := range names {
			s, n := stored[i], ms[i]
			same := s.present == n.present && math.Float64bits(s.score) == math.Float64bits(n.score)
			if !same && s.present {
				ops = append(ops, Op{Key: zIndexKey(z, m, s.score), Delete: true})
				if !n.present {
					ops = append(ops, Op{Key: zMemberKey(z, m), Delete: true})
				}
			}
			if !same && n.present {
				ik := zIndexKey(z, m, n.score)
				ops = append(ops, Op{Key: zMemberKey(z, m), Value: zScoreBytes(n.score)},
					Op{Key: ik, Value: zScoreBytes(n.score)})
				// An entry below the start hint moves it down to the entry:
				// the hint's promise (nothing below it) holds again.
				if suffix := ik[len(zIndexPrefix(z)):]; bytes.Compare(suffix, hint) < 0 {
					hint = suffix
				}
			}
			switch {
			case n.present && !before[i].present:
				card++
			case before[i].present && !n.present:
				card--
			}
		}
		return x.zwriteMeta(v, z, meta.Found, card, hint, ops)
	}
	// The metadata and the named members are read ahead with the batch's
	// other commands' keys.
	reads := func(TxnKV) [][]byte {
		keys := [][]byte{encKey(z)}
		for _, m := range names {
			keys = append(keys, zMemberKey(z, m))
		}
		return keys
	}
	return x.clearingTxn(z, func() error { return x.keyTxn(z, reads, body) })
}

// clearingTxn runs run, a transaction that may make a hash or sorted set
// at k anew (zclearInTxn), and when it stopped for k's span, reads the
// span outside a transaction (zprobe) or clears it (zclearStale), then
// runs it again.
func (x *call) clearingTxn(k []byte, run func() error) error {
	for range 2 {
		err := run()
		var span *zSpanError
		if !errors.As(err, &span) {
			return err
		}
		if !span.stale {
			err = x.zprobe(k, span.ver)
		} else if err = x.zclearStale(k); err == nil {
			// Cleared at once while the metadata was absent: a transaction
			// that finds it at the same version need not look again.
			x.s.zprobes.found(x.kv, k, span.ver)
		}
		if err != nil {
			return err
		}
	}
	return run()
}

// zStaleInTxn is the most keys an earlier set left that a new set's
// transaction deletes itself; more are cleared before it.
const zStaleInTxn = 64

// zclearInTxn deletes, inside v, the keys an earlier set left in z's span
// (none, nearly always: one read of an empty span), or fails with a
// stale *zSpanError if there are more than zStaleInTxn. z's metadata is
// absent, its newest version (a deletion, an expired value) ver as v read
// it: a version whose span a read outside the transaction found clean is
// not scanned again, and one not read yet fails the command with a
// *zSpanError, to read it (zprobe) and run again.
func (x *call) zclearInTxn(v *txView, z []byte, ver Version) error {
	if _, inExec := x.kv.(*txView); !inExec && ver != (Version{}) {
		switch clean, known := x.s.zprobes.known(x.kv, z, ver); {
		case !known:
			return &zSpanError{ver: ver}
		case clean:
			return nil
		}
	}
	kvs, err := v.Scan(x.ctx, fieldPrefix(z), fieldsEnd(z), zStaleInTxn+1)
	if err != nil {
		return err
	}
	if len(kvs) > zStaleInTxn {
		return &zSpanError{ver: ver, stale: true}
	}
	for _, kv := range kvs {
		if err := v.tx.Delete(x.ctx, kv.Key); err != nil {
			return v.fail(err)
		}
	}
	return nil
}

// zSpanError ends a transaction making a hash or sorted set where a key
// was (its metadata's newest version ver) before the span was read
// outside a transaction (zprobe), or, stale, where an earlier set left
// more than zStaleInTxn keys, which are cleared first (zclearStale).
type zSpanError struct {
	ver   Version
	stale bool
}

func (e *zSpanError) Error() string {
	if e.stale {
		return "sorted set: too much left by an earlier set to clear in the transaction"
	}
	return "sorted set: the span of a deleted set is read before the transaction"
}

// A span where a large set was just deleted holds its deletions (MVCC
// tombstones) until GC. A transaction's scan of it records the span, and
// committing checks the span again on every replica, in their apply loop,
// stepping over every deletion again: a ZADD after a DEL of 10,000
// members stalled the range and timed out (issue 37). So a new set's
// transaction does not scan a span whose metadata has a version (it held
// a set, or something else, once) until a read outside it, which steps
// over the deletions once on the leaseholder, found what is there
// (zprobe). It reads the metadata first and must find the same version:
// then no write of z's metadata came between that version and the scan,
// and every write of elements writes the metadata too, which the
// transaction's own read of it sees when it commits. Concurrent commands
// of one key share one read; what it found is kept for the key until
// another is read.

// zprobes keeps what zspanClean found, by key.
type zprobes struct {
	mu sync.Mutex
	m  map[combineKey]*zprobe
}

// zprobe is one read of a key's span: clean, found at metadata version
// ver, once done is closed.
type zprobe struct {
	ver   Version
	done  chan struct{}
	clean bool
	err   error
}

// failed reports whether the read is done and failed: it is made again.
func (r *zprobe) failed() bool {
	select {
	case <-r.done:
		return r.err != nil
	default:
		return false
	}
}

// zprobesKept bounds the keys zprobes keeps; past it, it starts again.
const zprobesKept = 1024

// known reports whether z's span was read at metadata version ver, and
// whether it was clean.
func (p *zprobes) known(kv KV, z []byte, ver Version) (clean, known bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	r := p.m[combineKey{kv: kv, key: string(z)}]
	if r == nil || r.ver != ver {
		return false, false
	}
	select {
	case <-r.done:
		return r.clean && r.err == nil, r.err == nil
	default:
		return false, false
	}
}

// found records that z's span is clean at metadata version ver.
func (p *zprobes) found(kv KV, z []byte, ver Version) {
	r := &zprobe{ver: ver, done: make(chan struct{}), clean: true}
	close(r.done)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.keep(combineKey{kv: kv, key: string(z)}, r)
}

// keep records r for k, p.mu held.
func (p *zprobes) keep(k combineKey, r *zprobe) {
	if p.m == nil || len(p.m) >= zprobesKept {
		p.m = map[combineKey]*zprobe{}
	}
	p.m[k] = r
}

// zprobe reads z's span outside a transaction for metadata version ver
// (zspanClean), or waits for the read of it another command started.
func (x *call) zprobe(z []byte, ver Version) error {
	p := &x.s.zprobes
	k := combineKey{kv: x.kv, key: string(z)}
	p.mu.Lock()
	if r := p.m[k]; r != nil && r.ver == ver && !r.failed() {
		p.mu.Unlock()
		<-r.done
		return r.err
	}
	r := &zprobe{ver: ver, done: make(chan struct{})}
	p.keep(k, r)
	p.mu.Unlock()
	r.clean, r.err = x.zspanClean(z, ver)
	close(r.done)
	return r.err
}

// zspanClean reports whether z's span holds no key, read outside a
// transaction after z's metadata, which must be absent at version ver.
func (x *call) zspanClean(z []byte, ver Version) (bool, error) {
	rs, err := x.kv.BatchGet(x.ctx, [][]byte{encKey(z)})
	if err != nil || rs[0].Found || rs[0].Version != ver {
		return false, err
	}
	kvs, err := x.kv.Scan(x.ctx, fieldPrefix(z), fieldsEnd(z), 1)
	return err == nil && len(kvs) == 0, err
}

// zHintMax bounds a start hint's bytes: a prefix of a hint is one too
// (nothing is below it either), and every write of the set rewrites it.
const zHintMax = 8 + 64

// zwriteMeta writes ops and z's metadata for card members (none: the set
// is deleted) with start hint hint (cut to zHintMax), keeping the set's TTL.
func (x *call) zwriteMeta(v *txView, z []byte, exists bool, card int, hint []byte, ops []Op) error {
	hint = hint[:min(len(hint), zHintMax)]
	switch {
	case card > 0:
		ops = append(ops, Op{Key: encKey(z), Value: zsetMeta(uint64(card), hint), Expiry: Expiry{Keep: exists}})
	case exists:
		ops = append(ops, Op{Key: encKey(z), Delete: true})
	}
	return v.Write(x.ctx, ops)
}

// zclearStale removes what an earlier set at z left (after SET, GETDEL or
// its expiry), when more than a transaction carries, before a set is
// created there: one guarded write that
// clears z's span if z is absent, and else does nothing (absentGuard; its
// op only touches a TTL). When z and its span lie in different ranges the
// clearing is DEL's (clearFields), each batch guarded on z's absence too,
// so a ZADD creating the same set meanwhile keeps its members.
func (x *call) zclearStale(z []byte) error {
	g := absentGuard(z)
	g.ClearStart, g.ClearEnd = fieldPrefix(z), fieldsEnd(z)
	ctx, cancel := x.clearingCtx()
	_, err := x.kv.GuardedWrite(ctx, []Op{{Key: encKey(z), SetTTL: true}}, g)
	cancel()
	switch {
	case errors.Is(err, ErrUnordered):
		return nil
	case errors.Is(err, ErrInvalidArgument):
		if _, err := x.kv.Get(x.ctx, encKey(z)); !errors.Is(err, ErrNotFound) {
			return err
		}
		return x.clearFields(z)
	}
	return err
}

// zreplyErr answers a failed sorted-set write.
func (x *call) zreplyErr(err error) {
	if errors.Is(err, errZWrongType) {
		x.c.WriteError(errWrongType)
	} else {
		replyErr(x.c, err)
	}
}

// zaddFlags are ZADD's options.
type zaddFlags struct{ nx, xx, gt, lt, ch, incr bool }

func cmdZAdd(x *call) {
	f, pairs, scores, ok := parseZAdd(x)
	if !ok {
		return
	}
	names, at := zdistinct(pairs)
	if f.xx {
		// XX adds nothing, so a missing set stays missing.
		if _, exists, ok := x.zsetState(x.args[1]); !ok {
			return
		} else if !exists {
			x.zaddReply(f, 0, 0, false, 0)
			return
		}
	}
	var r zaddResult
	err := x.zupdate(x.args[1], names, func(_ bool, ms []zMember) (bool, error) {
		r = f.apply(scores, at, ms)
		return !r.nan && r.added+r.updated > 0, nil
	})
	switch {
	case err != nil:
		x.zreplyErr(err)
	case r.nan:
		x.c.WriteError("ERR resulting score is not a number (NaN)")
	default:
		if r.added > 0 {
			x.ready(x.args[1]) // it may have created the set (BZPOPMIN)
		}
		x.zaddReply(f, r.added, r.updated, r.processed, r.last)
	}
}

// parseZAdd reads ZADD's options and score-member pairs, answering the
// first error itself (ok false).
func parseZAdd(x *call) (f zaddFlags, pairs [][]byte, scores []float64, ok bool) {
	i := 2
flags:
	for ; i < len(x.args); i++ {
		switch strings.ToLower(string(x.args[i])) {
		case "nx":
			f.nx = true
		case "xx":
			f.xx = true
		case "gt":
			f.gt = true
		case "lt":
			f.lt = true
		case "ch":
			f.ch = true
		case "incr":
			f.incr = true
		default:
			break flags
		}
	}
	pairs = x.args[i:]
	switch {
	case len(pairs)%2 != 0 || len(pairs) == 0:
		x.c.WriteError(errSyntax)
		return f, nil, nil, false
	case f.nx && f.xx:
		x.c.WriteError("ERR XX and NX options at the same time are not compatible")
		return f, nil, nil, false
	case (f.gt && f.nx) || (f.lt && f.nx) || (f.gt && f.lt):
		x.c.WriteError("ERR GT, LT, and/or NX options at the same time are not compatible")
		return f, nil, nil, false
	case f.incr && len(pairs) > 2:
		x.c.WriteError("ERR INCR option supports a single increment-element pair")
		return f, nil, nil, false
	}
	scores = make([]float64, len(pairs)/2)
	for j := range scores {
		s, ok := parseScore(pairs[2*j])
		if !ok {
			x.c.WriteError(errNotFloat)
			return f, nil, nil, false
		}
		scores[j] = s
	}
	return f, pairs, scores, true
}

// zaddResult is what one attempt of ZADD's transaction did.
type zaddResult struct {
	added, updated int
	processed, nan bool    // processed: some member passed the options
	last           float64 // the last score written (INCR's answer)
}

// apply sets scores[j] on member ms[at[j]] by ZADD's options; with INCR a
// NaN sum stops it (nan), changing nothing the caller keeps.
func (f zaddFlags) apply(scores []float64, at []int, ms []zMember) (r zaddResult) {
	for j, s := range scores {
		m := &ms[at[j]]
		if m.present {
			if f.nx {
				continue
			}
			if f.incr {
				if s += m.score; math.IsNaN(s) {
					return zaddResult{nan: true}
				}
			}
			if (f.lt && s >= m.score) || (f.gt && s <= m.score) {
				continue
			}
			if s != m.score {
				m.score = s
				r.updated++
			}
		} else {
			if f.xx {
				continue
			}
			*m = zMember{score: s, present: true}
			r.added++
		}
		r.processed, r.last = true, s
	}
	return r
}

// zaddReply answers ZADD (or ZINCRBY): the new score with INCR (null if
// nothing was done), else the members added (and changed, with CH).
func (x *call) zaddReply(f zaddFlags, added, updated int, processed bool, score float64) {
	switch {
	case f.incr && processed:
		x.writeScore(score)
	case f.incr:
		x.c.WriteNull()
	case f.ch:
		x.c.WriteInt(added + updated)
	default:
		x.c.WriteInt(added)
	}
}

// zdistinct lists the distinct members of score-member pairs and, per
// pair, the index of its member in that list.
func zdistinct(pairs [][]byte) (names [][]byte, at []int) {
	seen := map[string]int{}
	for j := 1; j < len(pairs); j += 2 {
		k, ok := seen[string(pairs[j])]
		if !ok {
			k = len(names)
			seen[string(pairs[j])] = k
			names = append(names, pairs[j])
		}
		at = append(at, k)
	}
	return names, at
}

func cmdZIncrBy(x *call) {
	x.args = [][]byte{x.args[0], x.args[1], []byte("incr"), x.args[2], x.args[3]}
	cmdZAdd(x)
}

func cmdZRem(x *call) {
	pairs := make([][]byte, 0, 2*len(x.args[2:]))
	for _, m := range x.args[2:] {
		pairs = append(pairs, nil, m)
	}
	names, _ := zdistinct(pairs)
	removed := 0
	err := x.zupdate(x.args[1], names, func(exists bool, ms []zMember) (bool, error) {
		removed = 0
		for i := range ms {
			if ms[i].present {
				ms[i].present = false
				removed++
			}
		}
		return removed > 0, nil
	})
	if err != nil {
		x.zreplyErr(err)
		return
	}
	x.c.WriteInt(removed)
}

// zscores reads z's metadata and the named members in one BatchGet; it
// writes WRONGTYPE and returns ok=false if z holds another type.
func (x *call) zscores(z []byte, names [][]byte) (rs []Result, ok bool) {
	keys := [][]byte{encKey(z)}
	for _, m := range names {
		keys = append(keys, zMemberKey(z, m))
	}
	rs, err := x.batchGet(keys)
	switch {
	case err != nil:
		replyErr(x.c, err)
		return nil, false
	case rs[0].Found && !isZSetMeta(rs[0].Value):
		x.c.WriteError(errWrongType)
		return nil, false
	case !rs[0].Found:
		clear(rs) // members without metadata are garbage
	}
	return rs[1:], true
}

func cmdZScore(x *call) {
	rs, ok := x.zscores(x.args[1], x.args[2:])
	if !ok {
		return
	}
	if x.name == "zmscore" {
		x.c.WriteArray(len(rs))
	}
	for _, r := range rs {
		if r.Found {
			x.writeScore(zScoreOf(r.Value))
		} else {
			x.c.WriteNull()
		}
	}
}

func cmdZCard(x *call) {
	if card, _, ok := x.zsetState(x.args[1]); ok {
		x.c.WriteInt(card)
	}
}

// cmdZCount: ZCOUNT and ZLEXCOUNT count by walking the range: their cost
// is the number they answer.
func cmdZCount(x *call) {
	z := x.args[1]
	var span func() ([]byte, []byte, error)
	if x.name == "zlexcount" {
		lo, ok1 := parseLexBound(x.args[2])
		hi, ok2 := parseLexBound(x.args[3])
		if !ok1 || !ok2 {
			x.c.WriteError("ERR min or max not valid string range item")
			return
		}
		span = func() ([]byte, []byte, error) {
			start, end, _, err := x.lexSpan(z, zIndexPrefix(z), lo, hi, false, 0)
			return start, end, err
		}
	} else {
		r, ok := parseScoreRange(x.args[2], x.args[3])
		if !ok {
			x.c.WriteError("ERR min or max is not a float")
			return
		}
		span = func() ([]byte, []byte, error) { s, e := r.span(z); return s, e, nil }
	}
	_, exists, ok := x.zsetState(z)
	if !ok {
		return
	}
	if !exists { // index entries without metadata are garbage
		x.c.WriteInt(0)
		return
	}
	start, end, err := span()
	if err != nil {
		replyErr(x.c, err)
		return
	}
	n, err := x.zcount(z, start, end)
	if err != nil {
		replyErr(x.c, err)
		return
	}
	x.c.WriteInt(n)
}

// lexSpan is the key range of a lex range (nil: z has no members, or is
// no sorted set; its index read from first on, its start hint or its
// start), read forward or, for the REV forms, backward, and what
// is left of LIMIT's offset to skip in it. When every member has one
// score, as Redis says BYLEX needs, it is the members of that score
// between the bounds, found by two seeks, offset untouched. Otherwise
// (lexRun) it is what Redis answers for a small set, whose answer Redis
// calls undefined: the run of members its walk in score order yields,
// offset skipped in it.
func (x *call) lexSpan(z, first []byte, lo, hi zLexBound, rev bool, offset int) (start, end []byte, skip int, err error) {
	lowest, err := x.kv.Scan(x.ctx, first, zIndexEnd(z), 1)
	if err != nil || len(lowest) == 0 {
		return nil, nil, 0, err
	}
	p := lowest[0].Key[:len(zIndexPrefix(z))+8]
	other, err := x.kv.Scan(x.ctx, zLexBound{plus: true}.key(p, false), zIndexEnd(z), 1)
	if err != nil || len(other) > 0 {
		start, end, err = x.lexRun(z, first, lo, hi, rev, offset, err)
		return start, end, 0, err
	}
	return zAtOrAfter(lo.key(p, true), first), hi.key(p, false), offset, nil
}

// lexRun is a lex range over a set of several scores as Redis answers it
// for a set in its small encoding (a listpack, walked in score order):
// nothing unless the last member is at or above lo and the first at or
// below hi. Forward: from the first member at or above lo, if it is at or
// below hi, offset members on whatever they are, then members for as
// long as they are at or below hi. Backward: from the last member at or
// below hi, if it is at or above lo, offset members back, then members
// for as long as they are at or above lo. It reads the whole set. (A
// large Redis set searches its skiplist instead, whose answer then
// depends on the skiplist's random levels.)
func (x *call) lexRun(z, first []byte, lo, hi zLexBound, rev bool, offset int, err error) (start, end []byte, _ error) {
	var all []zEntry
	if err == nil {
		err = x.zwalk(z, first, zIndexEnd(z), 0, -1, func(e zEntry) bool {
			all = append(all, zEntry{member: bytes.Clone(e.member), score: e.score})
			return true
		})
	}
	n := len(all)
	if err != nil || n == 0 || lexEmpty(lo, hi) || !lo.atOrBelow(all[n-1].member) || !hi.atOrAbove(all[0].member) {
		return nil, nil, err
	}
	i, j := 0, n
	if !rev {
		for !lo.atOrBelow(all[i].member) {
			i++
		}
		if !hi.atOrAbove(all[i].member) || i+offset >= n {
			return nil, nil, nil
		}
		for i, j = i+offset, i+offset; j < n && hi.atOrAbove(all[j].member); j++ {
		}
	} else {
		for !hi.atOrAbove(all[j-1].member) {
			j--
		}
		if !lo.atOrBelow(all[j-1].member) || j-offset <= 0 {
			return nil, nil, nil
		}
		for i, j = j-offset, j-offset; i > 0 && lo.atOrBelow(all[i-1].member); i-- {
		}
	}
	key := func(k int) []byte {
		if k == n {
			return zIndexEnd(z)
		}
		return zIndexKey(z, all[k].member, all[k].score)
	}
	return key(i), key(j), nil
}

// zrank is the number of members before m (score s): a walk of the index
// up to it.
func (x *call) zrank(z, m []byte, s float64) (int, error) {
	return x.zcount(z, zIndexPrefix(z), zIndexKey(z, m, s))
}

func cmdZRank(x *call) {
	z := x.args[1]
	rs, ok := x.zscores(z, x.args[2:3])
	if !ok {
		return
	}
	if !rs[0].Found {
		x.c.WriteNull()
		return
	}
	n, err := x.zrank(z, x.args[2], zScoreOf(rs[0].Value))
	card, _, ok := x.zsetState(z)
	switch {
	case !ok:
	case err != nil:
		replyErr(x.c, err)
	case x.name == "zrevrank":
		x.c.WriteInt(card - 1 - n)
	default:
		x.c.WriteInt(n)
	}
}

// zrangeSpec is a parsed ZRANGE and its older forms.
type zrangeSpec struct {
	by                string // "rank", "score", "lex"
	rev, withScores   bool
	offset, count     int64
	startArg, stopArg []byte
}

// zrangeForms presets the older commands' ZRANGE options.
var zrangeForms = map[string]zrangeSpec{
	"zrange":           {},
	"zrevrange":        {by: "rank", rev: true},
	"zrangebyscore":    {by: "score"},
	"zrevrangebyscore": {by: "score", rev: true},
	"zrangebylex":      {by: "lex"},
	"zrevrangebylex":   {by: "lex", rev: true},
}

// parseZRange reads ZRANGE's options as Redis does, its errors in its
// order; ok=false: it replied.
func (x *call) parseZRange() (zrangeSpec, bool) {
	sp := zrangeForms[x.name]
	form := x.name
	sp.count = -1
	for j := 4; j < len(x.args); j++ {
		switch a := strings.ToLower(string(x.args[j])); {
		case a == "withscores":
			sp.withScores = true
		case a == "limit" && len(x.args)-j-1 >= 2:
			off, err1 := strconv.ParseInt(string(x.args[j+1]), 10, 64)
			cnt, err2 := strconv.ParseInt(string(x.args[j+2]), 10, 64)
			if err1 != nil || err2 != nil {
				x.c.WriteError(errNotInt)
				return sp, false
			}
			sp.offset, sp.count = off, cnt
			j += 2
		case form == "zrange" && !sp.rev && a == "rev":
			sp.rev = true
		case form == "zrange" && sp.by == "" && (a == "byscore" || a == "bylex"):
			sp.by = a[2:]
		default:
			x.c.WriteError(errSyntax)
			return sp, false
		}
	}
	if sp.by == "" {
		sp.by = "rank"
	}
	switch {
	case sp.count != -1 && sp.by == "rank": // Redis ignores LIMIT n -1 there
		x.c.WriteError("ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX")
		return sp, false
	case sp.withScores && sp.by == "lex":
		x.c.WriteError("ERR syntax error, WITHSCORES not supported in combination with BYLEX")
		return sp, false
	}
	sp.startArg, sp.stopArg = x.args[2], x.args[3]
	if sp.rev && sp.by != "rank" {
		sp.startArg, sp.stopArg = sp.stopArg, sp.startArg // given as max min
	}
	return sp, true
}

// cmdZRange serves ZRANGE and its older forms. A forward range reads
// what it answers plus what it skips (the start rank, LIMIT's offset); a
// reverse one walks the range forward (the index has no reverse scan):
// by rank, the members from the start of its forward equivalent; by score
// or lex, a count of the range and then its part.
func cmdZRange(x *call) {
	sp, ok := x.parseZRange()
	if !ok {
		return
	}
	q, e := zrangeBounds(sp, x.args[1])
	if e != "" {
		x.c.WriteError(e)
		return
	}
	out, err := x.zrangeRead(q, x.args[1])
	if err != nil {
		x.zreplyErr(err)
		return
	}
	x.zreplyEntries(out, sp.withScores)
}

// cmdZRangeStore: ZRANGESTORE dst src min max [BYSCORE|BYLEX] [REV]
// [LIMIT offset count] reads the range and replaces dst by it in one
// transaction (zstore).
func cmdZRangeStore(x *call) {
	y := *x
	y.name, y.args = "zrange", append([][]byte{x.args[0]}, x.args[2:]...)
	sp, ok := y.parseZRange()
	if !ok {
		return
	}
	if sp.withScores {
		x.c.WriteError(errSyntax)
		return
	}
	q, e := zrangeBounds(sp, y.args[1])
	if e != "" {
		x.c.WriteError(e)
		return
	}
	var out []zEntry
	err := x.kv.Txn(x.ctx, func(tx TxnKV) error {
		v := &txView{tx: tx, now: x.s.cfg.Now}
		in := y
		in.kv = v
		var err error
		if out, err = in.zrangeRead(q, y.args[1]); err != nil {
			return err
		}
		return x.zstore(v, x.args[1], out)
	})
	if err != nil {
		x.zreplyErr(err)
		return
	}
	if len(out) > 0 {
		x.ready(x.args[1]) // a new set at the destination (BZPOPMIN)
	}
	x.c.WriteInt(len(out))
}

// zrangeQuery is a ZRANGE's parsed bounds.
type zrangeQuery struct {
	sp             zrangeSpec
	start, end     []byte // by score
	lo, hi         zLexBound
	rankLo, rankHi int64
}

// zrangeBounds parses sp's bounds; e is the error reply.
func zrangeBounds(sp zrangeSpec, z []byte) (q zrangeQuery, e string) {
	q.sp = sp
	switch sp.by {
	case "rank":
		lo, err1 := strconv.ParseInt(string(sp.startArg), 10, 64)
		hi, err2 := strconv.ParseInt(string(sp.stopArg), 10, 64)
		if err1 != nil || err2 != nil {
			return q, errNotInt
		}
		q.rankLo, q.rankHi = lo, hi
	case "score":
		r, ok := parseScoreRange(sp.startArg, sp.stopArg)
		if !ok {
			return q, "ERR min or max is not a float"
		}
		q.start, q.end = r.span(z)
	case "lex":
		var ok1, ok2 bool
		q.lo, ok1 = parseLexBound(sp.startArg)
		q.hi, ok2 = parseLexBound(sp.stopArg)
		if !ok1 || !ok2 {
			return q, "ERR min or max not valid string range item"
		}
	}
	return q, ""
}

// zrangeRead reads q's members of z, in the order ZRANGE answers them;
// errZWrongType if z holds another type. Its walk starts no earlier than
// the index's start hint. Outside a transaction the metadata is read again
// after the walk when the set has a hint, and the read made again if it
// changed: a write that moved the hint down meanwhile (a ZADD below it)
// would otherwise be missed while later writes are seen.
func (x *call) zrangeRead(q zrangeQuery, z []byte) ([]zEntry, error) {
	_, inTxn := x.kv.(*txView)
	for range x.s.cfg.CASAttempts {
		v, err := x.kv.Get(x.ctx, encKey(z))
		switch {
		case errors.Is(err, ErrNotFound): // index entries without metadata are garbage
			return nil, nil
		case err != nil:
			return nil, err
		case !isZSetMeta(v):
			return nil, errZWrongType
		}
		out, err := x.zrangeWalk(q, z, v)
		if err != nil || inTxn || len(zsetHint(v)) == 0 {
			return out, err
		}
		again, err := x.kv.Get(x.ctx, encKey(z))
		if err == nil && bytes.Equal(again, v) {
			return out, nil
		}
		if err != nil && !errors.Is(err, ErrNotFound) {
			return nil, err
		}
	}
	return nil, errContention
}

// zrangeWalk is zrangeRead's walk of z's index, given its metadata.
func (x *call) zrangeWalk(q zrangeQuery, z, meta []byte) ([]zEntry, error) {
	sp, start, end := q.sp, q.start, q.end
	first := zIndexFirst(z, meta)
	card := int(zsetCard(meta))
	skip := int(min(max(sp.offset, 0), math.MaxInt32))
	var err error
	switch sp.by {
	case "lex":
		if start, end, skip, err = x.lexSpan(z, first, q.lo, q.hi, sp.rev, skip); err != nil {
			return nil, err
		}
	case "score":
		start = zAtOrAfter(start, first)
	}
	var take int
	if sp.by == "rank" {
		// Ranks count from the first member, which is at or after the hint.
		skip, take = rankWindow(int64(card), q.rankLo, q.rankHi, sp.rev)
		start, end = first, zIndexEnd(z)
	} else {
		take = int(max(min(sp.count, math.MaxInt32), -1))
		if sp.offset < 0 {
			take = 0
		}
		if sp.rev && take != 0 {
			n, err := x.zcount(z, start, end)
			if err != nil {
				return nil, err
			}
			if take < 0 || skip+take > n {
				take = max(n-skip, 0)
			}
			skip = max(n-skip-take, 0)
		}
	}
	var out []zEntry
	if err := x.zwalk(z, start, end, skip, take, func(e zEntry) bool {
		out = append(out, zEntry{member: bytes.Clone(e.member), score: e.score})
		return true
	}); err != nil {
		return nil, err
	}
	if sp.rev {
		slices.Reverse(out)
	}
	return out, nil
}

// rankWindow turns a rank range (negative: from the end) of a set of n
// members into the forward walk that reads it: skip, then take.
func rankWindow(n, lo, hi int64, rev bool) (skip, take int) {
	if lo < 0 {
		lo += n
	}
	if hi < 0 {
		hi += n
	}
	lo = max(lo, 0)
	if lo > hi || lo >= n {
		return 0, 0
	}
	hi = min(hi, n-1)
	if rev {
		lo, hi = n-1-hi, n-1-lo
	}
	return int(lo), int(hi - lo + 1)
}

// zreplyEntries answers members, with their scores as pairs (RESP3
// nests each pair) when withScores.
func (x *call) zreplyEntries(es []zEntry, withScores bool) {
	if !withScores {
		x.c.WriteArray(len(es))
		for _, e := range es {
			x.c.WriteBulk(e.member)
		}
		return
	}
	x.writePairs(len(es))
	for _, e := range es {
		x.writePair()
		x.c.WriteBulk(e.member)
		x.writeScore(e.score)
	}
}
