package resp

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"math/rand/v2"
)

// Lists and sets (list.go, sets.go) share one encoding: a metadata value
// at enc(k) and one key per element under enc(k) 0x00 0x01 gen, where gen
// is a random generation drawn when the collection is created. A
// collection replaced (SET over it, an expiry, DEL inside EXEC) leaves its
// elements behind under the old generation, where no read looks: they are
// garbage that DEL, or an HSET creating a hash there, removes, never
// elements of the new collection. Every change runs as one transaction
// (KV.Txn) of point reads and writes: the metadata says where the elements
// are (a list's head and tail index, a set's member keys are the members),
// so no change scans, and a change of one element costs a few keys
// whatever the collection's size. Every change also bumps the metadata's
// version, so a read that scans elements outside a transaction
// (LRANGE, SMEMBERS) checks that the metadata did not change meanwhile.

// collectionCommands are the list and set commands (commands.go adds them;
// the blocking pops are in listblock.go).
var collectionCommands = map[string]cmdSpec{
	"lpush":       {arity: -3, fn: cmdPush},
	"rpush":       {arity: -3, fn: cmdPush},
	"lpushx":      {arity: -3, fn: cmdPush},
	"rpushx":      {arity: -3, fn: cmdPush},
	"lpop":        {arity: -2, fn: cmdPop},
	"rpop":        {arity: -2, fn: cmdPop},
	"llen":        {arity: 2, fn: cmdLLen},
	"lrange":      {arity: 4, fn: cmdLRange},
	"lindex":      {arity: 3, fn: cmdLIndex},
	"lset":        {arity: 4, fn: cmdLSet},
	"ltrim":       {arity: 4, fn: cmdLTrim},
	"lmove":       {arity: 5, fn: cmdLMove},
	"rpoplpush":   {arity: 3, fn: cmdLMove},
	"lpos":        {arity: -3, fn: cmdLPos},
	"lrem":        {arity: 4, fn: cmdLRem},
	"linsert":     {arity: 5, fn: cmdLInsert},
	"blpop":       {arity: -3, fn: cmdBPop},
	"brpop":       {arity: -3, fn: cmdBPop},
	"blmove":      {arity: 6, fn: cmdBLMove},
	"brpoplpush":  {arity: 4, fn: cmdBLMove},
	"lmpop":       {arity: -4, fn: cmdLMPop},
	"blmpop":      {arity: -5, fn: cmdLMPop},
	"sadd":        {arity: -3, fn: cmdSAddRem},
	"srem":        {arity: -3, fn: cmdSAddRem},
	"scard":       {arity: 2, fn: cmdSCard},
	"sismember":   {arity: 3, fn: cmdSIsMember},
	"smismember":  {arity: -3, fn: cmdSIsMember},
	"smembers":    {arity: 2, fn: cmdSMembers},
	"sinter":      {arity: -2, fn: cmdSetAlgebra},
	"sunion":      {arity: -2, fn: cmdSetAlgebra},
	"sdiff":       {arity: -2, fn: cmdSetAlgebra},
	"sinterstore": {arity: -3, fn: cmdSetAlgebra},
	"sunionstore": {arity: -3, fn: cmdSetAlgebra},
	"sdiffstore":  {arity: -3, fn: cmdSetAlgebra},
	"sintercard":  {arity: -3, fn: cmdZAlgebra},
	"smove":       {arity: 4, fn: cmdSMove},
	"spop":        {arity: -2, fn: cmdSPop},
	"srandmember": {arity: -2, fn: cmdSRandMember},
	"sscan":       {arity: -3, fn: cmdSScan},
}

// typePrefix starts every collection's metadata value: a string value
// starting with it is refused (errReserved).
var typePrefix = []byte("\xffTideKV:")

var (
	listMarker = []byte("\xffTideKV:list\x00\x01\xfe")
	setMarker  = []byte("\xffTideKV:set\x00\x01\xfe")
)

// valueType is the Redis type of the value stored at a key.
func valueType(v []byte) string {
	switch {
	case isHash(v):
		return "hash"
	case bytes.HasPrefix(v, listMarker):
		return "list"
	case bytes.HasPrefix(v, setMarker):
		return "set"
	case isZSetMeta(v):
		return "zset"
	case bytes.HasPrefix(v, streamMarker):
		return "stream"
	}
	return "string"
}

// meta is a list's or set's metadata: marker, then four big-endian
// uint64s.
type meta struct {
	exists bool
	gen    uint64
	// ver is bumped by every change.
	ver uint64
	// a, b: a list's head (its first element's index) and tail (one past
	// its last); a set's member count and setNumbered (0: written before
	// sets were numbered, sets.go).
	a, b uint64
	// expiry is the metadata's, kept by every change as Redis keeps a
	// collection's TTL.
	expiry Expiry
}

const metaLen = 32

// listOrigin is an empty list's head and tail: pushes go either way.
const listOrigin = 1 << 63

func encodeMeta(marker []byte, m meta) []byte {
	out := append([]byte(nil), marker...)
	for _, u := range []uint64{m.gen, m.ver, m.a, m.b} {
		out = binary.BigEndian.AppendUint64(out, u)
	}
	return out
}

// decodeMeta reads a value found at a collection's key: ok false if it
// is another type's (WRONGTYPE).
func decodeMeta(marker, v []byte) (meta, bool) {
	if !bytes.HasPrefix(v, marker) || len(v) != len(marker)+metaLen {
		return meta{}, false
	}
	v = v[len(marker):]
	u := func(i int) uint64 { return binary.BigEndian.Uint64(v[8*i:]) }
	return meta{exists: true, gen: u(0), ver: u(1), a: u(2), b: u(3)}, true
}

// newMeta is a new collection's: a fresh generation, so that garbage of
// an earlier one at the key is not read as its elements; a set's members
// numbered if numbered.
func newMeta(marker []byte, numbered bool) meta {
	m := meta{gen: rand.Uint64()}
	switch {
	case bytes.Equal(marker, listMarker):
		m.a, m.b = listOrigin, listOrigin
	case bytes.Equal(marker, setMarker) && numbered:
		m.b = setNumbered
	}
	return m
}

// generation is the generation of the list, set or stream whose
// metadata is v; false for another type.
func generation(v []byte) (uint64, bool) {
	for _, marker := range [][]byte{listMarker, setMarker} {
		if m, ok := decodeMeta(marker, v); ok {
			return m.gen, true
		}
	}
	m, ok := decodeStreamMeta(v)
	return m.gen, ok
}

// elemPrefix is the prefix of the element keys of generation gen of the
// collection at k.
func elemPrefix(k []byte, gen uint64) []byte {
	return binary.BigEndian.AppendUint64(fieldPrefix(k), gen)
}

// collTx is one attempt of a change of the collection at key.
type collTx struct {
	ctx    context.Context
	tx     TxnKV
	key    []byte
	marker []byte
	m      meta
	// batch is the most keys one read of the transaction asks for
	// (MaxBatchKeys).
	batch int
	// numbering: sets may be numbered (setPositions): a new set is, and
	// a write numbers a small set that is not (numberSmall).
	numbering bool
}

// newColl is a new collection of type marker at key, inside tx.
func (x *call) newColl(tx TxnKV, key, marker []byte) *collTx {
	p := x.setPositions()
	return &collTx{ctx: x.ctx, tx: tx, key: key, marker: marker, m: newMeta(marker, p), batch: x.s.cfg.MaxBatchKeys, numbering: p}
}

// setPositions reports whether the server's KV lets the front end write
// set positions and sorted-set start hints (SetPositioner): asked for
// each attempt, so a transaction run again after the cluster's upgrade
// writes the new layouts.
func (x *call) setPositions() bool {
	p, ok := x.s.kv.(SetPositioner)
	return ok && p.SetPositions()
}

// wrongType is returned by a transaction's function to abort it with
// WRONGTYPE.
var wrongType = replyError(errWrongType)

// collTxn runs fn in a transaction over the collection of type marker at
// key, given its metadata (m.exists false: there is none). fn changes
// m; its changes are written back (an emptied collection is deleted) if
// it returns nil and changed is true. A key of another type aborts with
// WRONGTYPE before fn runs. The reply is written by the caller from what
// fn kept, after the transaction: fn may run more than once.
func (x *call) collTxn(key, marker []byte, fn func(t *collTx) (changed bool, err error)) error {
	return x.collTxnReading(key, marker, nil, fn)
}

// collTxnReading is collTxn for a change that reads the element keys of
// members (suffixes: a set's members), which are read ahead with the other
// commands' of the batch (keyTxn).
func (x *call) collTxnReading(key, marker []byte, members [][]byte, fn func(t *collTx) (changed bool, err error)) error {
	var reads func(TxnKV) [][]byte
	if members != nil {
		reads = func(tx TxnKV) [][]byte {
			// A new collection's elements are under a generation not
			// drawn yet: nothing to read of them.
			t, err := x.openColl(tx, key, marker)
			if err != nil || !t.m.exists {
				return nil
			}
			keys := make([][]byte, len(members))
			for i, m := range members {
				keys[i] = t.elemKey(m)
			}
			return keys
		}
	}
	return metaTxn(x, key, reads, func(tx TxnKV) (*collTx, error) { return x.openColl(tx, key, marker) }, fn)
}

// metaTxn runs fn in a transaction over the value at key (keyTxn; reads
// as its): open reads the value's metadata inside it (an error, such as
// wrongType, aborts before fn runs), fn changes it, and the metadata is
// written back (save) if fn returns nil and changed is true. Collections
// (collTxn) and streams (streamTxn) change through it.
func metaTxn[T interface{ save() error }](x *call, key []byte, reads func(TxnKV) [][]byte, open func(TxnKV) (T, error), fn func(T) (changed bool, err error)) error {
	return x.keyTxn(key, reads, func(tx TxnKV) error {
		t, err := open(tx)
		if err != nil {
			return err
		}
		changed, err := fn(t)
		if err != nil || !changed {
			return err
		}
		return t.save()
	})
}

// openColl reads the collection's metadata inside tx.
func (x *call) openColl(tx TxnKV, key, marker []byte) (*collTx, error) {
	t := x.newColl(tx, key, marker)
	r, err := tx.Get(x.ctx, encKey(key))
	if err != nil {
		return nil, err
	}
	if !r.Found {
		return t, nil
	}
	m, ok := decodeMeta(marker, r.Value)
	if !ok {
		return nil, wrongType
	}
	m.expiry = r.Expiry
	t.m = m
	return t, nil
}

// empty reports whether the collection holds no element.
func (t *collTx) empty() bool {
	if bytes.Equal(t.marker, listMarker) {
		return t.m.a == t.m.b
	}
	return t.m.a == 0
}

// save writes the metadata back, or deletes it if the collection is
// empty (its element keys are gone already).
func (t *collTx) save() error {
	k := encKey(t.key)
	if t.empty() {
		if !t.m.exists {
			return nil
		}
		return t.tx.Delete(t.ctx, k)
	}
	t.m.ver++
	v := encodeMeta(t.marker, t.m)
	if t.m.expiry == (Expiry{}) {
		return t.tx.Put(t.ctx, k, v)
	}
	return t.tx.PutExpiring(t.ctx, k, v, t.m.expiry)
}

func (t *collTx) elemKey(suffix []byte) []byte {
	return append(elemPrefix(t.key, t.m.gen), suffix...)
}

// readMeta reads the metadata of the collection of type marker at key
// outside a transaction; ok false: it replied WRONGTYPE or an error.
func (x *call) readMeta(key, marker []byte) (meta, bool) {
	var m meta
	ok := x.readMetaOf(key, func(v []byte) bool {
		var good bool
		m, good = decodeMeta(marker, v)
		return good
	})
	return m, ok
}

// readMetaOf reads the value at key outside a transaction and hands it to
// decode, which reports whether it is of the type wanted; ok false: it
// replied WRONGTYPE or an error. A missing key is not decoded.
func (x *call) readMetaOf(key []byte, decode func(v []byte) bool) bool {
	v, err := x.kv.Get(x.ctx, encKey(key))
	if errors.Is(err, ErrNotFound) {
		return true
	}
	if err != nil {
		replyErr(x.c, err)
		return false
	}
	if !decode(v) {
		x.c.WriteError(errWrongType)
		return false
	}
	return true
}

// prefixEnd is the first key after every key starting with p.
func prefixEnd(p []byte) []byte {
	out := append([]byte(nil), p...)
	for i := len(out) - 1; i >= 0; i-- {
		if out[i]++; out[i] != 0 {
			return out[:i+1]
		}
	}
	return nil
}

// scanElems reads up to limit element keys of the collection at key in
// [start, end) (suffixes after the generation; end nil: to the last)
// consistently (consistently). It returns the metadata and the pairs,
// keys cut to their suffixes; ok false: it replied.
func (x *call) scanElems(key, marker []byte, span func(m meta) (start, end []byte, limit int)) (meta, []KeyValue, bool) {
	var m meta
	var kvs []KeyValue
	ok := x.consistently(func() (uint64, uint64, bool, bool) {
		var ok bool
		m, ok = x.readMeta(key, marker)
		return m.gen, m.ver, m.exists, ok
	}, func() error {
		kvs = nil
		start, end, limit := span(m)
		if limit == 0 {
			return nil
		}
		pre := elemPrefix(key, m.gen)
		endKey := append(pre[:len(pre):len(pre)], end...)
		if end == nil {
			endKey = prefixEnd(pre)
		}
		var err error
		kvs, err = x.kv.Scan(x.ctx, append(pre[:len(pre):len(pre)], start...), endKey, limit)
		for i := range kvs {
			kvs[i].Key = kvs[i].Key[len(pre):]
		}
		return err
	})
	return m, kvs, ok
}

// consistently runs read, the reads of a collection's elements outside a
// transaction, between two reads of its metadata (meta: its generation,
// version, whether it exists; ok false: it replied), again while the
// metadata changed meanwhile; read runs only for a collection that exists.
// ok false: it replied.
func (x *call) consistently(meta func() (gen, ver uint64, exists, ok bool), read func() error) bool {
	for range x.s.cfg.CASAttempts {
		gen, ver, exists, ok := meta()
		if !ok || !exists {
			return ok
		}
		if err := read(); err != nil {
			replyErr(x.c, err)
			return false
		}
		gen2, ver2, exists2, ok := meta()
		if !ok {
			return false
		}
		if exists2 && gen2 == gen && ver2 == ver {
			return true
		}
	}
	x.c.WriteError("ERR too much contention on the key, retry")
	return false
}
