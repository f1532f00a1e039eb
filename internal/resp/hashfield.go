package resp

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
)

// The hash commands that read a field and write it again (HINCRBY,
// HINCRBYFLOAT, HSETNX) and the rest of Redis's hash commands (HSTRLEN,
// HRANDFIELD, HSCAN).

// errNoHash: updateField's transaction found no hash to write into.
var errNoHash = errors.New("no hash")

// updateField runs decide on field f of hash h and writes what it
// returns, atomically: one transaction reads the marker and the field and
// writes the field (and the marker again, keeping its TTL, so that a
// WATCH of the hash sees the change, as HSET's). A hash that does not
// exist yet is first created empty by a guarded write, which also clears
// fields a former hash left behind, and the transaction runs again: so a
// new hash is briefly empty. decide gets the field's value (found false:
// none) and returns the new value, whether to write, or an error reply.
func (x *call) updateField(h, f []byte, decide func(cur []byte, found bool) ([]byte, bool, string)) error {
	for range 3 {
		err := x.kv.Txn(x.ctx, func(tx TxnKV) error {
			m, err := tx.Get(x.ctx, encKey(h))
			if err != nil {
				return err
			}
			if m.Found && !isHash(m.Value) {
				return replyError(errWrongType)
			}
			var cur Result
			if m.Found {
				if cur, err = tx.Get(x.ctx, fieldKey(h, f)); err != nil {
					return err
				}
			}
			nv, write, rerr := decide(cur.Value, cur.Found)
			switch {
			case rerr != "":
				return replyError(rerr)
			case !write:
				return nil
			case !m.Found:
				return errNoHash
			}
			if err := tx.Put(x.ctx, fieldKey(h, f), nv); err != nil {
				return err
			}
			if m.Expiry == (Expiry{}) {
				return tx.Put(x.ctx, encKey(h), hashMarker)
			}
			return tx.PutExpiring(x.ctx, encKey(h), hashMarker, m.Expiry)
		})
		if !errors.Is(err, errNoHash) {
			return err
		}
		g := Guard{Key: encKey(h), Value: hashMarker, ClearStart: fieldPrefix(h), ClearEnd: fieldsEnd(h)}
		res, err := x.kv.GuardedWrite(x.ctx, []Op{{Key: encKey(h), Value: hashMarker, Expiry: Expiry{Keep: true}}}, g)
		switch {
		case errors.Is(err, ErrInvalidArgument):
			// The marker and its fields lie in different ranges: the
			// fields are cleared while h is absent (clearFields), then
			// the marker is put without a guard.
			if err = x.clearFields(h); err == nil {
				err = x.kv.Put(x.ctx, encKey(h), hashMarker)
			}
		case err == nil && res.Failed:
			err = replyError(errWrongType)
		}
		if err != nil {
			return err
		}
	}
	return fmt.Errorf("%w: hash %q was deleted and created again while it was written", errContention, h)
}

// cmdHIncrBy: HINCRBY key field n.
func cmdHIncrBy(x *call) {
	delta, err := strconv.ParseInt(string(x.args[3]), 10, 64)
	if err != nil {
		x.c.WriteError(errNotInt)
		return
	}
	var result int64
	err = x.updateField(x.args[1], x.args[2], func(cur []byte, found bool) ([]byte, bool, string) {
		var n int64
		if found {
			v, err := strconv.ParseInt(string(cur), 10, 64)
			if err != nil || strconv.FormatInt(v, 10) != string(cur) {
				return nil, false, "ERR hash value is not an integer"
			}
			n = v
		}
		if (delta > 0 && n > math.MaxInt64-delta) || (delta < 0 && n < math.MinInt64-delta) {
			return nil, false, "ERR increment or decrement would overflow"
		}
		result = n + delta
		return []byte(strconv.FormatInt(result, 10)), true, ""
	})
	if err != nil {
		writeCASErr(x.c, err)
		return
	}
	x.c.WriteInt64(result)
}

// cmdHIncrByFloat: HINCRBYFLOAT key field x, in long double arithmetic as
// INCRBYFLOAT (float.go).
func cmdHIncrByFloat(x *call) {
	incr, ok := parseLongDouble(x.args[3])
	switch {
	case !ok:
		x.c.WriteError(errNotFloat)
		return
	case incr.IsInf():
		x.c.WriteError("ERR value is NaN or Infinity")
		return
	}
	var result string
	err := x.updateField(x.args[1], x.args[2], func(cur []byte, found bool) ([]byte, bool, string) {
		n := new(big.Float)
		if found {
			var ok bool
			if n, ok = parseLongDouble(cur); !ok {
				return nil, false, "ERR hash value is not a float"
			}
		}
		sum, ok := addLongDouble(n, incr)
		if !ok {
			return nil, false, "ERR increment would produce NaN or Infinity"
		}
		result = formatLongDouble(sum)
		return []byte(result), true, ""
	})
	if err != nil {
		writeCASErr(x.c, err)
		return
	}
	x.c.WriteBulkString(result)
}

// cmdHSetNX: HSETNX key field value.
func cmdHSetNX(x *call) {
	set := false
	err := x.updateField(x.args[1], x.args[2], func(_ []byte, found bool) ([]byte, bool, string) {
		set = !found
		return x.args[3], !found, ""
	})
	switch {
	case err != nil:
		writeCASErr(x.c, err)
	case set:
		x.c.WriteInt(1)
	default:
		x.c.WriteInt(0)
	}
}

// cmdHStrLen: HSTRLEN key field.
func cmdHStrLen(x *call) {
	_, rs, ok := x.hashState(x.args[1], x.args[2:3])
	if ok {
		x.c.WriteInt(len(rs[0].Value))
	}
}

// readHash reads hash h's fields (keys without the prefix), at most
// MaxOutputBuffer bytes of them; it writes the error and returns ok=false
// on WRONGTYPE, a failure or a larger hash.
func (x *call) readHash(h []byte) (fields []KeyValue, ok bool) {
	kvs, _, err := x.readSpan(encKey(h), fieldsEnd(h), x.s.cfg.MaxOutputBuffer)
	switch {
	case errors.Is(err, errReplyTooLarge):
		x.c.WriteError(fmt.Sprintf("ERR hash of more than %d bytes: %s replies at most the output buffer limit (--redis-max-output-buffer); read it with HSCAN", x.s.cfg.MaxOutputBuffer, strings.ToUpper(x.name)))
		return nil, false
	case err != nil:
		replyErr(x.c, err)
		return nil, false
	case len(kvs) == 0 || !bytes.Equal(kvs[0].Key, encKey(h)):
		return nil, true // no marker: no hash
	case !isHash(kvs[0].Value):
		x.c.WriteError(errWrongType)
		return nil, false
	}
	pre := len(fieldPrefix(h))
	for _, kv := range kvs[1:] {
		fields = append(fields, KeyValue{Key: kv.Key[pre:], Value: kv.Value})
	}
	return fields, true
}

// cmdHRandField: HRANDFIELD key [count [WITHVALUES]], as Redis: without a
// count one field (nil: no hash); a positive count that many distinct
// fields (all of them if fewer), a negative one that many drawn with
// repetition. The hash is read whole (at most the output buffer), and so
// is the reply.
func cmdHRandField(x *call) {
	if len(x.args) > 4 || (len(x.args) == 4 && !strings.EqualFold(string(x.args[3]), "withvalues")) {
		x.c.WriteError(errSyntax)
		return
	}
	// -2^63 is out of range, as Redis has it: its draws could not be
	// counted.
	count, ok := x.randCount()
	if !ok {
		return
	}
	withCount := len(x.args) >= 3
	fields, ok := x.readHash(x.args[1])
	if !ok {
		return
	}
	randN := x.s.cfg.randN
	if !withCount {
		if len(fields) == 0 {
			x.c.WriteNull()
		} else {
			x.c.WriteBulk(fields[randN(len(fields))].Key)
		}
		return
	}
	var pick []KeyValue
	switch {
	case len(fields) == 0 || count == 0:
	case count >= int64(len(fields)):
		pick = fields
	case count > 0:
		pick = sample(fields, int(count), randN)
	default:
		if pick, ok = repeatedDraws(x, -count, func(int64) KeyValue { return fields[randN(len(fields))] },
			func(kv KeyValue) int { return len(kv.Key) + len(kv.Value) }); !ok {
			return
		}
	}
	withValues := len(x.args) == 4
	if withValues {
		x.writePairs(len(pick))
	} else {
		x.c.WriteArray(len(pick))
	}
	for _, kv := range pick {
		if withValues {
			x.writePair()
		}
		x.c.WriteBulk(kv.Key)
		if withValues {
			x.c.WriteBulk(kv.Value)
		}
	}
}

// hscanBatch is the fewest fields one HSCAN call reads: a hash of up to
// that many comes back in one call, as a small (listpack) Redis hash does.
const hscanBatch = 128

// cmdHScan: HSCAN key cursor [MATCH pattern] [COUNT n]. Each call reads
// max(COUNT, 128) fields in field order from the cursor on; cursors are
// SCAN's (kept by the node that issued them).
func cmdHScan(x *call) {
	h := x.args[1]
	id, err := strconv.ParseUint(string(x.args[2]), 10, 64)
	if err != nil {
		x.c.WriteError("ERR invalid cursor")
		return
	}
	a, ok := x.collectionScanArgs()
	if !ok {
		return
	}
	start, ok := x.resumeCursor(id, fieldPrefix(h))
	if !ok {
		return
	}
	exists, _, ok := x.hashState(h, nil)
	if !ok {
		return
	}
	var kvs []KeyValue
	limit := max(a.count, hscanBatch)
	if exists {
		if kvs, err = x.kv.Scan(x.ctx, start, fieldsEnd(h), limit); err != nil {
			replyErr(x.c, err)
			return
		}
	}
	var cur uint64
	if len(kvs) == limit {
		cur = x.s.saveCursor(append(append([]byte(nil), kvs[len(kvs)-1].Key...), 0))
	}
	pre := len(fieldPrefix(h))
	out := kvs[:0]
	for _, kv := range kvs {
		if a.pattern == nil || globMatch(a.pattern, kv.Key[pre:]) {
			out = append(out, kv)
		}
	}
	x.c.WriteArray(2)
	x.c.WriteBulkString(strconv.FormatUint(cur, 10))
	x.c.WriteArray(2 * len(out))
	for _, kv := range out {
		x.c.WriteBulk(kv.Key[pre:])
		x.c.WriteBulk(kv.Value)
	}
}
