package resp

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Whole-database commands (KEYS, FLUSHDB, FLUSHALL, RANDOMKEY) and the
// commands that move a key's value (RENAME, RENAMENX, COPY), plus OBJECT
// ENCODING.

// adminCommands need AccessAdmin (an admin user in secure mode).
var adminCommands = map[string]bool{"flushdb": true, "flushall": true}

// cmdKeys: KEYS pattern, a scan of the whole database (as SCAN to the end)
// whose reply is at most MaxOutputBuffer bytes of keys.
func cmdKeys(x *call) {
	var out [][]byte
	var start []byte
	size := 0
	for {
		keys, next, err := scanKeys(x, start, scanArgs{pattern: x.args[1], count: x.s.cfg.MaxBatchKeys})
		if err != nil {
			replyErr(x.c, err)
			return
		}
		for _, k := range keys {
			if size += len(k); size > x.s.cfg.MaxOutputBuffer {
				x.c.WriteError(fmt.Sprintf("ERR KEYS reply of more than %d bytes (the output buffer limit, --redis-max-output-buffer): use SCAN", x.s.cfg.MaxOutputBuffer))
				return
			}
		}
		out = append(out, keys...)
		if next == nil {
			break
		}
		start = next
	}
	x.c.WriteArray(len(out))
	for _, k := range out {
		x.c.WriteBulk(k)
	}
}

// cmdFlush: FLUSHDB [ASYNC|SYNC] empties the connection's database;
// FLUSHALL [ASYNC|SYNC] empties database 0 and the connection's. TideKV
// has no range deletion to call on: both scan the database and delete
// what they find, MaxBatchKeys stored keys (hash fields included) per
// WriteEach (one write per range), each batch with its own deadline. The flush is not atomic: a
// reader sees the keys go batch by batch, and keys written meanwhile may
// stay (docs/redis.md).
func cmdFlush(x *call) {
	if len(x.args) > 2 {
		x.c.WriteError(errSyntax)
		return
	}
	if len(x.args) == 2 {
		if m := strings.ToLower(string(x.args[1])); m != "async" && m != "sync" {
			x.c.WriteError(errSyntax)
			return
		}
	}
	dbs := []KV{x.kv}
	if x.name == "flushall" && x.st.db != 0 {
		dbs = append(dbs, x.s.kv)
	}
	for _, kv := range dbs {
		if err := x.s.flush(kv); err != nil {
			replyErr(x.c, err)
			return
		}
	}
	x.c.WriteString("OK")
}

// flush deletes every key of kv in batches.
func (s *Server) flush(kv KV) error {
	var start []byte
	for {
		ctx, cancel := context.WithTimeout(s.ctx, s.cfg.RequestTimeout)
		kvs, err := kv.Scan(ctx, start, nil, s.cfg.MaxBatchKeys)
		if err == nil && len(kvs) > 0 {
			ops := make([]Op, len(kvs))
			for i, p := range kvs {
				ops[i] = Op{Key: p.Key, Delete: true}
			}
			// WriteEach: one write per range of the batch, whatever
			// ranges it spans.
			for _, r := range kv.WriteEach(ctx, ops) {
				if r.Err != nil {
					err = r.Err
					break
				}
			}
		}
		cancel()
		if err != nil || len(kvs) < s.cfg.MaxBatchKeys {
			return err
		}
		start = append(append([]byte(nil), kvs[len(kvs)-1].Key...), 0)
	}
}

// cmdRandomKey: RANDOMKEY, a key drawn uniformly, as Redis draws, when
// the database holds at most MaxBatchKeys stored keys (one scan reads them
// all); else the first key at or after a random point of the key space
// (wrapping around once), so that keys after a long gap come up more
// often than in Redis. nil when the database is empty.
func cmdRandomKey(x *call) {
	keys, next, err := scanKeys(x, nil, scanArgs{count: x.s.cfg.MaxBatchKeys})
	switch {
	case err != nil:
		replyErr(x.c, err)
		return
	case next == nil && len(keys) == 0:
		x.c.WriteNull()
		return
	case next == nil:
		x.c.WriteBulk(keys[x.s.cfg.randN(len(keys))])
		return
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	for _, start := range [][]byte{b[:], nil} {
		for from := start; ; {
			keys, next, err := scanKeys(x, from, scanArgs{count: 16})
			if err != nil {
				replyErr(x.c, err)
				return
			}
			if len(keys) > 0 {
				x.c.WriteBulk(keys[0])
				return
			}
			if next == nil {
				break
			}
			from = next
		}
	}
	x.c.WriteNull()
}

// collectionEncoding is OBJECT ENCODING's answer for each collection type:
// the encoding Redis uses for a large one (TideKV has one encoding each).
var collectionEncoding = map[string]string{"hash": "hashtable", "list": "quicklist", "set": "hashtable", "zset": "skiplist", "stream": "stream"}

// cmdObject: OBJECT ENCODING key, the encoding Redis would report for a
// string value (int, embstr, raw); a hash is "hashtable" (a range of keys,
// as a large Redis hash). OBJECT REFCOUNT key is 1, as Redis answers for
// a value no other key shares (TideKV shares none). OBJECT FREQ and
// IDLETIME need an eviction policy that keeps them, which TideKV has not.
func cmdObject(x *call) {
	sub := strings.ToLower(string(x.args[1]))
	switch {
	case (sub == "encoding" || sub == "refcount") && len(x.args) == 3:
	case sub == "encoding" || sub == "freq" || sub == "idletime" || sub == "refcount":
		if len(x.args) != 3 {
			x.c.WriteError(fmt.Sprintf("ERR wrong number of arguments for 'object|%s' command", sub))
			return
		}
		x.c.WriteError(fmt.Sprintf("ERR OBJECT %s is not supported by TideKV", strings.ToUpper(sub)))
		return
	default:
		x.c.WriteError(fmt.Sprintf("ERR unknown subcommand '%s'. Try OBJECT HELP.", trunc(x.args[1])))
		return
	}
	v, err := x.kv.Get(x.ctx, encKey(x.args[2]))
	switch {
	case errors.Is(err, ErrNotFound):
		x.c.WriteNull()
	case err != nil:
		replyErr(x.c, err)
	case sub == "refcount":
		x.c.WriteInt(1)
	case isMarker(v):
		x.c.WriteBulkString(collectionEncoding[valueType(v)])
	default:
		x.c.WriteBulkString(stringEncoding(v))
	}
}

// stringEncoding is Redis's encoding of a string value: int for the
// canonical text of a 64-bit integer, embstr up to 44 bytes, else raw.
func stringEncoding(v []byte) string {
	if n, err := strconv.ParseInt(string(v), 10, 64); err == nil && strconv.FormatInt(n, 10) == string(v) {
		return "int"
	}
	if len(v) <= 44 {
		return "embstr"
	}
	return "raw"
}

// cmdRename: RENAME src dst, RENAMENX src dst and COPY src dst [DB n]
// [REPLACE], of any type, each one transaction (KV.Txn), so atomic across
// ranges; the TTL goes with the value. A collection's elements are read
// whole and written again under dst (moveKey), so the transaction's
// limits bound the collection that can move (docs/redis.md). A list or
// sorted set arriving at dst wakes the clients blocked on it.
func cmdRename(x *call) {
	src, dst := x.args[1], x.args[2]
	replace := x.name == "rename"
	if x.name == "copy" {
		for i := 3; i < len(x.args); i++ {
			switch opt := strings.ToLower(string(x.args[i])); {
			case opt == "replace":
				replace = true
			case opt == "db" && i+1 < len(x.args):
				n, err := strconv.Atoi(string(x.args[i+1]))
				if err != nil {
					x.c.WriteError(errNotInt)
					return
				}
				if n != x.st.db {
					x.c.WriteError("ERR COPY to another database is not supported by TideKV")
					return
				}
				i++
			default:
				x.c.WriteError(errSyntax)
				return
			}
		}
		if string(src) == string(dst) {
			x.c.WriteError("ERR source and destination objects are the same")
			return
		}
	} else if len(x.args) != 3 {
		x.c.WriteError(errArity(x.name))
		return
	}
	done := false
	var moved []byte // the value moved: its type says whom to wake
	err := x.kv.Txn(x.ctx, func(tx TxnKV) error {
		done, moved = false, nil
		v := &txView{tx: tx, now: x.s.cfg.Now}
		r, err := v.read(x.ctx, encKey(src))
		switch {
		case err != nil:
			return err
		case !r.Found:
			if x.name == "copy" {
				return nil
			}
			return replyError("ERR no such key")
		case string(src) == string(dst):
			done = x.name == "rename"
			return nil
		}
		if !replace {
			d, err := v.read(x.ctx, encKey(dst))
			if err != nil || d.Found {
				return err
			}
		}
		if err := x.moveKey(v, src, dst, r, x.name != "copy"); err != nil {
			return err
		}
		done, moved = true, r.Value
		return nil
	})
	if err == nil && done && moved != nil {
		if t := valueType(moved); t == "list" || t == "zset" || t == "stream" {
			x.ready(dst)
		}
	}
	switch {
	case err != nil:
		writeCASErr(x.c, err)
	case x.name == "rename":
		x.c.WriteString("OK")
	case done:
		x.c.WriteInt(1)
	default:
		x.c.WriteInt(0)
	}
}

// moveKey writes the value r read at src, with its expiry, and every
// element of the collection it heads, to dst inside v, replacing whatever
// dst held (clearKey); del: src and its elements go (RENAME). A list's or
// set's elements are those of its generation (others are garbage, left
// where they are), with a set's positions and a stream's groups; a
// hash's fields and a sorted set's members and index are its whole span.
// Element keys keep their suffix after the key's field prefix, so a list
// keeps its generation and indexes.
func (x *call) moveKey(v *txView, src, dst []byte, r Result, del bool) error {
	if err := x.clearKey(v, dst); err != nil {
		return err
	}
	put := func(k, val []byte) error {
		if r.Expiry == (Expiry{}) {
			return v.tx.Put(x.ctx, k, val)
		}
		return v.tx.PutExpiring(x.ctx, k, val, r.Expiry)
	}
	if err := put(encKey(dst), r.Value); err != nil {
		return v.fail(err)
	}
	if del {
		if err := v.tx.Delete(x.ctx, encKey(src)); err != nil {
			return v.fail(err)
		}
	}
	if !isMarker(r.Value) {
		return nil
	}
	from, to := fieldPrefix(src), fieldPrefix(dst)
	spans := [][2][]byte{{from, fieldsEnd(src)}}
	if gen, ok := generation(r.Value); ok { // a list's or stream's
		spans = [][2][]byte{{elemPrefix(src, gen)}}
	}
	if m, ok := decodeMeta(setMarker, r.Value); ok {
		// A set's member positions (sets.go) go with it.
		spans = [][2][]byte{{elemPrefix(src, m.gen)}, {elemPrefix(src, posGen(m.gen))}}
	}
	if m, ok := decodeStreamMeta(r.Value); ok {
		// A stream's consumer groups (streamgroup.go) go with it.
		spans = append(spans, [2][]byte{elemPrefix(src, posGen(m.gen))})
	}
	for _, sp := range spans {
		if sp[1] == nil {
			sp[1] = prefixEnd(sp[0])
		}
		if err := x.scanSpan(v, sp[0], sp[1], func(kv KeyValue) error {
			// Elements carry no TTL of their own: the metadata's is the
			// collection's.
			if err := v.tx.Put(x.ctx, append(bytes.Clone(to), kv.Key[len(from):]...), kv.Value); err != nil {
				return v.fail(err)
			}
			if del {
				return v.fail(v.tx.Delete(x.ctx, kv.Key))
			}
			return nil
		}); err != nil {
			return err
		}
	}
	return nil
}
