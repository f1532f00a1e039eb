package resp

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"strconv"
)

func cmdGet(x *call) {
	if v, found, ok := x.readString(); ok && found {
		x.c.WriteBulk(v)
	} else if ok {
		x.c.WriteNull()
	}
}

// readString reads the string at the command's key (x.args[1]) and
// reports whether it exists; if the read failed or the key holds a hash
// it replies that itself and returns ok false.
func (x *call) readString() (v []byte, found, ok bool) {
	v, err := x.kv.Get(x.ctx, encKey(x.args[1]))
	switch {
	case errors.Is(err, ErrNotFound):
		return nil, false, true
	case err != nil:
		replyErr(x.c, err)
	case isMarker(v):
		x.c.WriteError(errWrongType)
	default:
		return v, true, true
	}
	return nil, false, false
}

// errTooLong is Redis's reply to a string that would outgrow its maximum,
// here Config.MaxBulkLen (Redis's proto-max-bulk-len).
const errTooLong = "ERR string exceeds maximum allowed size (proto-max-bulk-len)"

// editString replaces the string at the command's key (x.args[1]) with
// edit's result in one compare-and-set round after another (casLoop), so
// that no write of another client falls between its read and its write,
// keeping the key's TTL, and returns the new length (ok false: it replied
// an error). edit gets the current value (nil when absent) and returns the
// new one, or nil to write nothing (the length is the current one), or an
// error reply. A hash is WRONGTYPE.
func (x *call) editString(edit func(cur []byte, exists bool) ([]byte, string)) (n int, ok bool) {
	_, _, _, err := x.casLoop(encKey(x.args[1]), Expiry{Keep: true}, func(cur []byte, exists bool) ([]byte, casWrite, string) {
		if exists && isMarker(cur) {
			return nil, casNone, errWrongType
		}
		nv, rerr := edit(cur, exists)
		switch {
		case rerr != "":
			return nil, casNone, rerr
		case nv == nil:
			n = len(cur)
			return nil, casNone, ""
		case len(nv) > x.s.cfg.MaxBulkLen:
			return nil, casNone, errTooLong
		case isMarker(nv):
			return nil, casNone, errReserved
		}
		n = len(nv)
		return nv, casPut, ""
	})
	if err != nil {
		writeCASErr(x.c, err)
		return 0, false
	}
	return n, true
}

// cmdAppend: APPEND key value, the new length; a missing key is created.
func cmdAppend(x *call) {
	n, ok := x.editString(func(cur []byte, exists bool) ([]byte, string) {
		if exists && len(x.args[2]) == 0 {
			return nil, ""
		}
		return append(append(make([]byte, 0, len(cur)+len(x.args[2])), cur...), x.args[2]...), ""
	})
	if ok {
		x.c.WriteInt(n)
	}
}

// cmdStrlen: STRLEN key, 0 for a missing key.
func cmdStrlen(x *call) {
	if v, _, ok := x.readString(); ok {
		x.c.WriteInt(len(v))
	}
}

func cmdIncr(x *call) {
	delta := int64(1)
	switch x.name {
	case "decr":
		delta = -1
	case "incrby", "decrby":
		d, err := strconv.ParseInt(string(x.args[2]), 10, 64)
		switch {
		case err != nil:
			x.c.WriteError(errNotInt)
			return
		case x.name == "decrby" && d == math.MinInt64:
			x.c.WriteError("ERR decrement would overflow")
			return
		}
		if x.name == "decrby" {
			d = -d
		}
		delta = d
	}
	n, err := x.increment(encKey(x.args[1]), delta)
	if err != nil {
		writeCASErr(x.c, err)
		return
	}
	x.c.WriteInt64(n)
}

// increment adds delta to the counter at key, keeping its TTL as Redis
// does, and returns the new value: in one step of the store when the KV
// is an Incrementer that can (50 connections INCRing one key each send
// one command), else by a compare-and-set loop (inside MULTI, on a
// cluster still upgrading).
func (x *call) increment(key []byte, delta int64) (int64, error) {
	if inc, ok := x.kv.(Incrementer); ok {
		applied, before, existed, err := inc.Increment(x.ctx, key, delta, Expiry{Keep: true})
		if !errors.Is(err, errors.ErrUnsupported) {
			if err != nil {
				return 0, err
			}
			n, rerr := counted(before, existed, delta)
			switch {
			case rerr != "":
				return 0, replyError(rerr)
			case !applied:
				return 0, fmt.Errorf("the store refused to add %d to %q", delta, before)
			}
			return n, nil
		}
	}
	var n int64
	_, _, _, err := x.casLoop(key, Expiry{Keep: true}, func(cur []byte, exists bool) ([]byte, casWrite, string) {
		var rerr string
		if n, rerr = counted(cur, exists, delta); rerr != "" {
			return nil, casNone, rerr
		}
		return []byte(strconv.FormatInt(n, 10)), casPut, ""
	})
	return n, err
}

// counted is a counter's value after adding delta to cur, or the error
// INCR replies instead: WRONGTYPE for a collection, not an integer, or
// overflow.
func counted(cur []byte, exists bool, delta int64) (int64, string) {
	var n int64
	if exists {
		if isMarker(cur) {
			return 0, errWrongType
		}
		v, err := strconv.ParseInt(string(cur), 10, 64)
		if err != nil || strconv.FormatInt(v, 10) != string(cur) {
			return 0, errNotInt
		}
		n = v
	}
	if (delta > 0 && n > math.MaxInt64-delta) || (delta < 0 && n < math.MinInt64-delta) {
		return 0, "ERR increment or decrement would overflow"
	}
	return n + delta, ""
}

// cmdMGet replies batch by batch. A batch that fails after the first has
// been written answers each of its keys with the error, as an element of
// the array (RESP allows it; EXEC does the same), and ends the command.
func cmdMGet(x *call) {
	keys := len(x.args) - 1
	x.readArgs(func(done int, rs []Result, err error) bool {
		switch {
		case err != nil && done == 0:
			replyErr(x.c, err)
			return false
		case err != nil:
			for range keys - done {
				replyErr(x.c, err)
			}
			return false
		case done == 0:
			x.c.WriteArray(keys)
		}
		for _, r := range rs {
			if r.Found && !isMarker(r.Value) {
				x.c.WriteBulk(r.Value)
			} else {
				x.c.WriteNull()
			}
		}
		return true
	})
}

func cmdMSet(x *call) {
	ops, ok := x.msetOps()
	if !ok {
		return
	}
	if err := x.writeAll(ops); err != nil {
		replyErr(x.c, err)
		return
	}
	x.c.WriteString("OK")
}

// msetOps are the puts of MSET's or MSETNX's key value pairs; when the
// arguments are not pairs or a value is reserved, it replies the error
// and returns false.
func (x *call) msetOps() ([]Op, bool) {
	if len(x.args)%2 != 1 {
		x.c.WriteError(errArity(x.name))
		return nil, false
	}
	ops := make([]Op, 0, len(x.args)/2)
	for i := 1; i < len(x.args); i += 2 {
		if isMarker(x.args[i+1]) {
			x.c.WriteError(errReserved)
			return nil, false
		}
		ops = append(ops, Op{Key: encKey(x.args[i]), Value: x.args[i+1]})
	}
	return ops, true
}

// cmdMSetNX: MSETNX key value [key value ...] sets every key if none
// exists (1), else none (0): one transaction reads the keys and writes
// them, so no key can appear between the check and the writes.
func cmdMSetNX(x *call) {
	ops, ok := x.msetOps()
	if !ok {
		return
	}
	set := false
	err := x.kv.Txn(x.ctx, func(tx TxnKV) error {
		set = false // an attempt retried after a conflict starts over
		keys := make([][]byte, len(ops))
		for i, op := range ops {
			keys[i] = op.Key
		}
		rs, err := readChunks(x.ctx, tx, keys, x.s.readBatch())
		if err != nil {
			return err
		}
		for _, r := range rs {
			if r.Found {
				return nil
			}
		}
		set = true
		return (&txView{tx: tx, now: x.s.cfg.Now}).Write(x.ctx, ops)
	})
	switch {
	case err != nil:
		replyErr(x.c, err)
	case set:
		x.c.WriteInt(1)
	default:
		x.c.WriteInt(0)
	}
}

// writeAll applies ops all or none, as Redis's MSET does: as one Write
// when they fit one (at most MaxBatchKeys keys, in one range), else as a
// transaction. A Write refused as invalid applied nothing: its keys span
// ranges, or an op is invalid, which the transaction then refuses too.
func (x *call) writeAll(ops []Op) error {
	if len(ops) <= x.s.cfg.MaxBatchKeys {
		if err := x.kv.Write(x.ctx, ops); !errors.Is(err, ErrInvalidArgument) {
			return err
		}
	}
	return x.kv.Txn(x.ctx, func(tx TxnKV) error {
		return (&txView{tx: tx, now: x.s.cfg.Now}).Write(x.ctx, ops)
	})
}

// cmdGetRange: GETRANGE key start end (and SUBSTR, its old name), the
// bytes from start to end inclusive, negative indexes counting from the
// end, clamped to the string as Redis clamps them.
func cmdGetRange(x *call) {
	start, err1 := strconv.ParseInt(string(x.args[2]), 10, 64)
	end, err2 := strconv.ParseInt(string(x.args[3]), 10, 64)
	if err1 != nil || err2 != nil {
		x.c.WriteError(errNotInt)
		return
	}
	v, _, ok := x.readString()
	if !ok {
		return
	}
	n := int64(len(v))
	if start < 0 && end < 0 && start > end {
		x.c.WriteBulk(nil)
		return
	}
	if start < 0 {
		start = max(n+start, 0)
	}
	if end < 0 {
		end = max(n+end, 0)
	}
	end = min(end, n-1)
	if start > end || n == 0 {
		x.c.WriteBulk(nil)
		return
	}
	x.c.WriteBulk(v[start : end+1])
}

// cmdSetRange: SETRANGE key offset value writes value at offset, padding
// with zero bytes, and replies the new length; an empty value changes
// nothing (and creates no key).
func cmdSetRange(x *call) {
	off, err := strconv.ParseInt(string(x.args[2]), 10, 64)
	switch {
	case err != nil:
		x.c.WriteError(errNotInt)
		return
	case off < 0:
		x.c.WriteError("ERR offset is out of range")
		return
	}
	val := x.args[3]
	n, ok := x.editString(func(cur []byte, exists bool) ([]byte, string) {
		switch {
		case len(val) == 0:
			return nil, ""
		case off > int64(x.s.cfg.MaxBulkLen-len(val)):
			return nil, errTooLong
		}
		nv := make([]byte, max(len(cur), int(off)+len(val)))
		copy(nv, cur)
		copy(nv[off:], val)
		return nv, ""
	})
	if ok {
		x.c.WriteInt(n)
	}
}

const errBitOffset = "ERR bit offset is not an integer or out of range"

// bitOffset parses GETBIT's and SETBIT's offset: a bit of a string of at
// most MaxBulkLen bytes (Redis: proto-max-bulk-len).
func (x *call) bitOffset() (int64, bool) {
	off, err := strconv.ParseInt(string(x.args[2]), 10, 64)
	if err != nil || off < 0 || off>>3 >= int64(x.s.cfg.MaxBulkLen) {
		x.c.WriteError(errBitOffset)
		return 0, false
	}
	return off, true
}

// cmdGetBit: GETBIT key offset, the bit (bit 0 is the first byte's most
// significant); past the end, or a missing key, 0.
func cmdGetBit(x *call) {
	off, ok := x.bitOffset()
	if !ok {
		return
	}
	v, _, ok := x.readString()
	if !ok {
		return
	}
	bit := 0
	if off>>3 < int64(len(v)) {
		bit = int(v[off>>3]>>(7-off&7)) & 1
	}
	x.c.WriteInt(bit)
}

// cmdSetBit: SETBIT key offset 0|1 sets the bit, growing the string with
// zero bytes to reach it, and replies the bit's old value; one
// compare-and-set round after another, as SETRANGE.
func cmdSetBit(x *call) {
	off, ok := x.bitOffset()
	if !ok {
		return
	}
	on := string(x.args[3])
	if on != "0" && on != "1" {
		x.c.WriteError("ERR bit is not an integer or out of range")
		return
	}
	i, mask := int(off>>3), byte(1)<<(7-off&7)
	old := 0
	if _, ok := x.editString(func(cur []byte, exists bool) ([]byte, string) {
		nv := make([]byte, max(len(cur), i+1))
		copy(nv, cur)
		old = int(nv[i]&mask) >> (7 - off&7)
		if on == "1" {
			nv[i] |= mask
		} else {
			nv[i] &^= mask
		}
		return nv, ""
	}); ok {
		x.c.WriteInt(old)
	}
}

// cmdGetDel: GETDEL key replies the string and deletes it, in one
// compare-and-set round after another (a write in between makes the
// delete fail and the round start again).
func cmdGetDel(x *call) {
	old, found, _, err := x.casLoop(encKey(x.args[1]), Expiry{}, func(cur []byte, exists bool) ([]byte, casWrite, string) {
		switch {
		case !exists:
			return nil, casNone, ""
		case isMarker(cur):
			return nil, casNone, errWrongType
		}
		return nil, casDelete, ""
	})
	x.replyOld(old, found, err)
}

// cmdGetEx: GETEX key [EX s|PX ms|EXAT t|PXAT t|PERSIST] replies the
// string and sets its expiry (PERSIST: removes it). With an option the
// value is written again with the new expiry, compared and set, so a
// write in between is not undone; without one it is GET. As in Redis,
// the time is checked after the key: a missing key is nil, a hash
// WRONGTYPE, whatever the time.
func cmdGetEx(x *call) {
	o, rerr := parseSetOptions(x.args[2:], true)
	switch {
	case rerr != "":
		x.c.WriteError(rerr)
		return
	case o.timeOpt == "":
		cmdGet(x)
		return
	}
	e, badTime := o.expiry("getex")
	old, found, _, err := x.casLoop(encKey(x.args[1]), e, func(cur []byte, exists bool) ([]byte, casWrite, string) {
		switch {
		case !exists:
			return nil, casNone, ""
		case isMarker(cur):
			return nil, casNone, errWrongType
		case badTime != "":
			return nil, casNone, badTime
		}
		return cur, casPut, ""
	})
	x.replyOld(old, found, err)
}

// replyOld answers a compare-and-set command that replies the value it
// found: the value, nil when there was none, or the error.
func (x *call) replyOld(old []byte, found bool, err error) {
	switch {
	case err != nil:
		writeCASErr(x.c, err)
	case found:
		x.c.WriteBulk(old)
	default:
		x.c.WriteNull()
	}
}

// cmdIncrByFloat: INCRBYFLOAT key increment, in long double arithmetic as
// Redis on x86-64 (float.go), keeping the TTL; compare-and-set rounds as
// INCR. As in Redis, a hash is WRONGTYPE before any number is read.
func cmdIncrByFloat(x *call) {
	var result string
	_, _, _, err := x.casLoop(encKey(x.args[1]), Expiry{Keep: true}, func(cur []byte, exists bool) ([]byte, casWrite, string) {
		if exists && isMarker(cur) {
			return nil, casNone, errWrongType
		}
		n := new(big.Float)
		if exists {
			var ok bool
			if n, ok = parseLongDouble(cur); !ok {
				return nil, casNone, errNotFloat
			}
		}
		incr, ok := parseLongDouble(x.args[2])
		if !ok {
			return nil, casNone, errNotFloat
		}
		sum, ok := addLongDouble(n, incr)
		if !ok {
			return nil, casNone, "ERR increment would produce NaN or Infinity"
		}
		result = formatLongDouble(sum)
		return []byte(result), casPut, ""
	})
	if err != nil {
		writeCASErr(x.c, err)
		return
	}
	x.c.WriteBulkString(result)
}
