package resp

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// ZUNION, ZINTER, ZDIFF, their STORE forms, ZINTERCARD and SINTERCARD
// read their inputs whole inside one transaction (KV.Txn), so they see
// one moment of every key, and a STORE writes its destination in the same
// transaction: the sources cannot change between the read and the write.
// An input may be a set (each member scoring 1), as in Redis. The result
// is computed by zcombine. SINTER, SUNION, SDIFF and their STORE forms
// (sets.go) run the same transaction over sets.

// zalgebra is a parsed ZUNION, ZINTER, ZDIFF (STORE), ZINTERCARD or
// SINTERCARD.
type zalgebra struct {
	op         string // "union", "inter", "diff"
	dst        []byte // STORE's destination
	keys       [][]byte
	weights    []float64
	agg        string // "sum", "min", "max"
	withScores bool
	card       bool  // ZINTERCARD, SINTERCARD: the count alone
	limit      int64 // of a card, 0: none
	setsOnly   bool  // SINTERCARD: a sorted set is WRONGTYPE
}

// errZSyntax ends the read of a command whose options were wrong: Redis
// answers WRONGTYPE before it parses them, so the inputs are read first.
var errZSyntax = errors.New("zset algebra syntax")

// parseZAlgebra reads the command as Redis does; parseErr is an option's
// error, which Redis reports only after its inputs' types; ok false: it
// replied.
func (x *call) parseZAlgebra() (sp zalgebra, parseErr string, ok bool) {
	name := x.name
	at := 1
	if base, found := strings.CutSuffix(name, "store"); found {
		name, sp.dst, at = base, x.args[1], 2
	}
	if base, found := strings.CutSuffix(name, "card"); found {
		name, sp.card = base, true
	}
	sp.op, sp.agg, sp.setsOnly = strings.TrimPrefix(name[1:], "s"), "sum", name == "sinter"
	if len(x.args) <= at {
		x.c.WriteError(fmt.Sprintf("ERR wrong number of arguments for '%s' command", x.name))
		return sp, "", false
	}
	n, err := strconv.ParseInt(string(x.args[at]), 10, 64)
	switch {
	case sp.setsOnly && (err != nil || n < 1):
		x.c.WriteError("ERR numkeys should be greater than 0")
		return sp, "", false
	case sp.setsOnly && n > int64(len(x.args)-at-1):
		x.c.WriteError("ERR Number of keys can't be greater than number of args")
		return sp, "", false
	case err != nil:
		x.c.WriteError(errNotInt)
		return sp, "", false
	case n < 1:
		x.c.WriteError(fmt.Sprintf("ERR at least 1 input key is needed for '%s' command", x.name))
		return sp, "", false
	case n > int64(len(x.args)-at-1):
		x.c.WriteError(errSyntax)
		return sp, "", false
	}
	sp.keys = x.args[at+1 : at+1+int(n)]
	opts := x.args[at+1+int(n):]
	for len(opts) > 0 {
		switch a := strings.ToLower(string(opts[0])); {
		case sp.op != "diff" && !sp.card && a == "weights" && len(opts) > len(sp.keys):
			sp.weights = make([]float64, len(sp.keys))
			for i, w := range opts[1 : 1+len(sp.keys)] {
				f, ok := parseScore(w)
				if !ok {
					return sp, "ERR weight value is not a float", true
				}
				sp.weights[i] = f
			}
			opts = opts[1+len(sp.keys):]
		case sp.op != "diff" && !sp.card && a == "aggregate" && len(opts) >= 2:
			sp.agg = strings.ToLower(string(opts[1]))
			if sp.agg != "sum" && sp.agg != "min" && sp.agg != "max" {
				return sp, errSyntax, true
			}
			opts = opts[2:]
		case sp.dst == nil && !sp.card && a == "withscores":
			sp.withScores, opts = true, opts[1:]
		case sp.card && a == "limit" && len(opts) >= 2:
			l, err := strconv.ParseInt(string(opts[1]), 10, 64)
			if err != nil || l < 0 {
				if sp.setsOnly {
					x.c.WriteError("ERR LIMIT can't be negative")
					return sp, "", false
				}
				return sp, "ERR LIMIT can't be negative", true
			}
			sp.limit, opts = l, opts[2:]
		default:
			if sp.setsOnly {
				x.c.WriteError(errSyntax)
				return sp, "", false
			}
			return sp, errSyntax, true
		}
	}
	return sp, "", true
}

// cmdZAlgebra serves ZUNION, ZINTER, ZDIFF, their STORE forms, ZINTERCARD
// and SINTERCARD.
func cmdZAlgebra(x *call) {
	sp, parseErr, ok := x.parseZAlgebra()
	if !ok {
		return
	}
	var out []zEntry
	err := x.kv.Txn(x.ctx, func(tx TxnKV) error {
		v := &txView{tx: tx, now: x.s.cfg.Now}
		ins, exists, err := x.zreadInputs(v, sp.keys, sp.setsOnly)
		if err != nil {
			return err
		}
		if parseErr != "" {
			return errZSyntax
		}
		out = zcombine(sp.op, ins, exists, sp.weights, sp.agg)
		if sp.dst == nil {
			return nil
		}
		return x.zstore(v, sp.dst, out)
	})
	if err == nil && sp.dst != nil && len(out) > 0 {
		x.ready(sp.dst) // a new set at the destination (BZPOPMIN)
	}
	switch {
	case errors.Is(err, errZSyntax):
		x.c.WriteError(parseErr)
	case err != nil:
		x.zreplyErr(err)
	case sp.card && sp.limit > 0:
		x.c.WriteInt(int(min(int64(len(out)), sp.limit)))
	case sp.card, sp.dst != nil:
		x.c.WriteInt(len(out))
	default:
		x.zreplyEntries(out, sp.withScores)
	}
}

// zreadInputs reads the inputs at keys (zreadInput).
func (x *call) zreadInputs(v *txView, keys [][]byte, setsOnly bool) (ins [][]zEntry, exists []bool, err error) {
	ins, exists = make([][]zEntry, len(keys)), make([]bool, len(keys))
	for i, k := range keys {
		if ins[i], exists[i], err = x.zreadInput(v, k, setsOnly); err != nil {
			return nil, nil, err
		}
	}
	return ins, exists, nil
}

// zreadInput reads the sorted set or set at k whole inside v, a set's
// members scoring 1 (setsOnly: a sorted set is WRONGTYPE); exists false:
// there is no key.
func (x *call) zreadInput(v *txView, k []byte, setsOnly bool) ([]zEntry, bool, error) {
	r, err := v.read(x.ctx, encKey(k))
	if err != nil || !r.Found {
		return nil, false, err
	}
	var pre []byte
	if !isZSetMeta(r.Value) || setsOnly {
		m, ok := decodeMeta(setMarker, r.Value)
		if !ok {
			return nil, false, errZWrongType
		}
		pre = elemPrefix(k, m.gen)
	}
	var start, end []byte
	if pre == nil {
		start, end = zIndexFirst(k, r.Value), zIndexEnd(k)
	} else {
		start, end = pre, prefixEnd(pre)
	}
	var out []zEntry
	for {
		kvs, err := v.Scan(x.ctx, start, end, x.s.cfg.MaxBatchKeys)
		if err != nil {
			return nil, false, err
		}
		for _, kv := range kvs {
			e := zEntry{score: 1}
			if pre != nil {
				e.member = kv.Key[len(pre):]
			} else {
				e = zEntryOf(k, kv)
			}
			out = append(out, zEntry{member: bytes.Clone(e.member), score: e.score})
		}
		if len(kvs) < x.s.cfg.MaxBatchKeys {
			return out, true, nil
		}
		start = append(bytes.Clone(kvs[len(kvs)-1].Key), 0)
	}
}

// zstore replaces dst, whatever it held, by a sorted set of es (none:
// dst is deleted), inside v; the new set has no TTL, as in Redis.
func (x *call) zstore(v *txView, dst []byte, es []zEntry) error {
	if err := x.clearKey(v, dst); err != nil || len(es) == 0 {
		return err
	}
	return x.zwrite(v, dst, es, Expiry{})
}

// zwrite writes a sorted set of es (at least one) at dst, whose span is
// clear, with expiry exp, inside v.
func (x *call) zwrite(v *txView, dst []byte, es []zEntry, exp Expiry) error {
	ops := []Op{{Key: encKey(dst), Value: zsetMeta(uint64(len(es)), nil), Expiry: exp}}
	for _, e := range es {
		ops = append(ops, Op{Key: zMemberKey(dst, e.member), Value: zScoreBytes(e.score)},
			Op{Key: zIndexKey(dst, e.member, e.score), Value: zScoreBytes(e.score)})
	}
	return v.Write(x.ctx, ops)
}

// clearKey deletes k and every key of its span (a hash's fields, a
// collection's elements of any generation, a sorted set's members and
// index) inside v: what a STORE replaces.
func (x *call) clearKey(v *txView, k []byte) error {
	err := x.scanSpan(v, fieldPrefix(k), fieldsEnd(k), func(kv KeyValue) error {
		_, err := v.Delete(x.ctx, kv.Key)
		return err
	})
	if err == nil {
		_, err = v.Delete(x.ctx, encKey(k))
	}
	return err
}

// zcombine is the union, intersection or difference (op) of inputs ins
// (exists: the key was there), each score multiplied by its weight (nil:
// 1) and the scores of a member aggregated by agg, a NaN counting as 0
// as Redis counts it; in Redis's order (score, then member). A
// difference keeps the first input's scores.
func zcombine(op string, ins [][]zEntry, exists []bool, weights []float64, agg string) []zEntry {
	type acc struct {
		score float64
		n     int
	}
	seen := map[string]*acc{}
	for i, in := range ins {
		if op == "inter" && !exists[i] {
			return nil
		}
		w := 1.0
		if weights != nil {
			w = weights[i]
		}
		for _, e := range in {
			s := e.score * w
			if math.IsNaN(s) {
				s = 0
			}
			a := seen[string(e.member)]
			switch {
			case op == "diff" && i > 0:
				delete(seen, string(e.member))
			case a == nil && (i == 0 || op == "union"):
				seen[string(e.member)] = &acc{score: s, n: 1}
			case a == nil:
			case agg == "min":
				a.score, a.n = min(a.score, s), a.n+1
			case agg == "max":
				a.score, a.n = max(a.score, s), a.n+1
			default:
				if a.score += s; math.IsNaN(a.score) {
					a.score = 0
				}
				a.n++
			}
		}
	}
	var out []zEntry
	for m, a := range seen {
		if op != "inter" || a.n == len(ins) {
			out = append(out, zEntry{member: []byte(m), score: a.score})
		}
	}
	slices.SortFunc(out, func(a, b zEntry) int {
		if c := cmpScore(a.score, b.score); c != 0 {
			return c
		}
		return bytes.Compare(a.member, b.member)
	})
	return out
}

func cmpScore(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
