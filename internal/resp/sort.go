package resp

import (
	"bytes"
	"slices"
	"strings"
)

// SORT and SORT_RO, as Redis 7.0's sort.c: the elements of a list, set or
// sorted set, sorted as numbers (or ALPHA, as bytes), by themselves or by
// the values of keys a BY pattern names, windowed by LIMIT, answered as
// themselves or as the values GET patterns name, or stored as a list
// (STORE, SORT only). The source is read whole in one KV.Txn; the keys
// the patterns name (one per element and pattern, as Redis reads) in
// batches after it, or with STORE in it, which then writes the list.

// sortSpec is a parsed SORT.
type sortSpec struct {
	by []byte // nil: the elements themselves
	// dontsort: a BY pattern without '*' (the elements' own order). Set
	// by any such BY, as Redis does, even if a later BY has a '*'.
	dontsort      bool
	gets          [][]byte
	desc, alpha   bool
	offset, count int64 // LIMIT; count < 0: all
	store         []byte
}

// errSortScores is Redis's reply when an element or BY value is no
// number (without ALPHA).
var errSortScores = replyError("ERR One or more scores can't be converted into double")

// sortOptions parses SORT's options after its key; false once it has
// answered a bad one.
func (x *call) sortOptions() (sortSpec, bool) {
	sp := sortSpec{count: -1}
	for j := 2; j < len(x.args); j++ {
		left := len(x.args) - j - 1
		switch opt := strings.ToLower(string(x.args[j])); {
		case opt == "asc":
			sp.desc = false
		case opt == "desc":
			sp.desc = true
		case opt == "alpha":
			sp.alpha = true
		case opt == "limit" && left >= 2:
			n, ok := x.parseInts(x.args[j+1], x.args[j+2])
			if !ok {
				return sp, false
			}
			sp.offset, sp.count = n[0], n[1]
			j += 2
		case opt == "store" && left >= 1 && x.name == "sort":
			sp.store = x.args[j+1]
			j++
		case opt == "by" && left >= 1:
			sp.by = x.args[j+1]
			sp.dontsort = sp.dontsort || !bytes.Contains(sp.by, []byte("*"))
			j++
		case opt == "get" && left >= 1:
			sp.gets = append(sp.gets, x.args[j+1])
			j++
		default:
			x.c.WriteError(errSyntax)
			return sp, false
		}
	}
	return sp, true
}

// cmdSort is SORT and SORT_RO: the source read in one transaction, with
// STORE the list written in it too.
func cmdSort(x *call) {
	sp, ok := x.sortOptions()
	if !ok {
		return
	}
	var out [][]byte // nil entries: a GET's key is missing
	var elems [][]byte
	var typ string
	err := x.kv.Txn(x.ctx, func(tx TxnKV) error {
		v := &txView{tx: tx, now: x.s.cfg.Now}
		var err error
		if elems, typ, err = x.sortSource(v, x.args[1]); err != nil || sp.store == nil {
			return err
		}
		if out, err = x.sortOut(v, sp, elems, typ); err != nil {
			return err
		}
		if err := x.clearKey(v, sp.store); err != nil || len(out) == 0 {
			return err
		}
		t, err := x.openColl(v.tx, sp.store, listMarker)
		if err != nil {
			return err
		}
		for _, e := range out {
			if err := t.push(e, false); err != nil { // a missing GET key: ""
				return v.fail(err)
			}
		}
		return t.save()
	})
	if err == nil && sp.store == nil {
		// Without STORE the patterns' keys are read after the source's
		// transaction, in batches (BatchGet; inside EXEC, in EXEC's
		// transaction): in it, one read a key. With STORE they are read
		// in it, so that the list stored is one moment's.
		out, err = x.sortOut(x.kv, sp, elems, typ)
	}
	switch {
	case err != nil:
		writeCASErr(x.c, err)
	case sp.store != nil:
		if len(out) > 0 {
			x.ready(sp.store) // a new list (BLPOP)
		}
		x.c.WriteInt(len(out))
	default:
		x.c.WriteArray(len(out))
		for _, e := range out {
			if e == nil {
				x.c.WriteNull()
			} else {
				x.c.WriteBulk(e)
			}
		}
	}
}

// sortElem is an element being sorted, with what it sorts by.
type sortElem struct {
	elem  []byte
	score float64
	by    []byte // ALPHA BY's value; nil: its key is missing
}

// sortOut sorts and windows elems, the source's elements (sortSource),
// reading the patterns' keys from lookups, and returns the elements (or
// the GET patterns' values, nil for a missing one) in the answer's order.
func (x *call) sortOut(lookups KV, sp sortSpec, elems [][]byte, typ string) ([][]byte, error) {
	var err error
	if sp.dontsort && typ == "set" && sp.store != nil {
		// Redis sorts a set it stores, so that replicas store the same
		// list: ALPHA, by the members.
		sp.dontsort, sp.alpha, sp.by = false, true, nil
	}
	if sp.dontsort && sp.desc && typ != "set" {
		slices.Reverse(elems) // a list's or sorted set's own order, from its end
	}
	n := int64(len(elems))
	start := min(max(sp.offset, 0), n)
	count := min(max(sp.count, -1), n)
	end := start + count - 1
	if count < 0 {
		end = n - 1
	}
	if start >= n {
		start, end = n-1, n-2
	}
	end = min(end, n-1)
	if !sp.dontsort {
		var bys []sortValue
		if sp.by != nil {
			if bys, err = x.sortFetch(lookups, sp.by, elems); err != nil {
				return nil, err
			}
		}
		ses := make([]sortElem, len(elems))
		for i, e := range elems {
			ses[i].elem = e
			by := e
			if sp.by != nil {
				if bys[i].val == nil {
					continue // numeric: 0; ALPHA: before every value
				}
				by = bys[i].val
			}
			if sp.alpha {
				if sp.by != nil {
					ses[i].by = by
				}
				continue
			}
			s, ok := sortScore(by)
			if !ok {
				return nil, errSortScores
			}
			ses[i].score = s
		}
		slices.SortStableFunc(ses, func(a, b sortElem) int {
			c := sortCompare(a, b, sp)
			if sp.desc {
				return -c
			}
			return c
		})
		for i, se := range ses {
			elems[i] = se.elem
		}
	}
	if end < start {
		return nil, nil
	}
	window := elems[start : end+1]
	if len(sp.gets) == 0 {
		return window, nil
	}
	gets := make([][]sortValue, len(sp.gets))
	for i, g := range sp.gets {
		if gets[i], err = x.sortFetch(lookups, g, window); err != nil {
			return nil, err
		}
	}
	var out [][]byte
	for j := range window {
		for i := range sp.gets {
			val := gets[i][j].val
			if val == nil && sp.store != nil {
				val = []byte{} // STORE keeps a missing value as ""
			}
			out = append(out, val)
		}
	}
	return out, nil
}

// sortCompare is Redis's sortCompare, ascending: by score, equal scores
// by the elements' bytes; ALPHA by the elements' bytes, or with BY by
// the BY values' (a missing one first, two missing equal). Redis's ALPHA
// without STORE compares with strcoll, which is the bytes' order in the
// C locale.
func sortCompare(a, b sortElem, sp sortSpec) int {
	switch {
	case !sp.alpha && a.score < b.score:
		return -1
	case !sp.alpha && a.score > b.score:
		return 1
	case !sp.alpha || sp.by == nil:
		return bytes.Compare(a.elem, b.elem)
	case a.by == nil && b.by == nil:
		return 0
	case a.by == nil:
		return -1
	case b.by == nil:
		return 1
	}
	return bytes.Compare(a.by, b.by)
}

// sortScore reads an element or BY value as Redis's strtod check does:
// all of it a number, leading white space allowed, "" is 0, no NaN, and
// no overflow or underflow.
func sortScore(b []byte) (float64, bool) {
	if len(b) == 0 {
		return 0, true
	}
	s := strings.TrimLeft(string(b), " \t\n\v\f\r")
	f, outOfRange, ok := parseDouble(s)
	return f, ok && !outOfRange
}

// sortSource reads the list, set or sorted set at k whole inside v: its
// elements in its own order (a set's in byte order) and its type; a
// missing key is an empty list, another type WRONGTYPE.
func (x *call) sortSource(v *txView, k []byte) ([][]byte, string, error) {
	r, err := v.read(x.ctx, encKey(k))
	if err != nil || !r.Found {
		return nil, "list", err
	}
	typ := valueType(r.Value)
	var start, end []byte
	switch typ {
	case "list", "set":
		m, _ := decodeMeta(map[string][]byte{"list": listMarker, "set": setMarker}[typ], r.Value)
		start = elemPrefix(k, m.gen)
		end = prefixEnd(start)
	case "zset":
		start, end = zIndexFirst(k, r.Value), zIndexEnd(k)
	default:
		return nil, "", wrongType
	}
	var out [][]byte
	for from := start; ; {
		kvs, err := v.Scan(x.ctx, from, end, x.s.cfg.MaxBatchKeys)
		if err != nil {
			return nil, "", err
		}
		for _, kv := range kvs {
			// nonNil: an empty element is no missing GET value.
			switch typ {
			case "list":
				out = append(out, nonNil(kv.Value))
			case "set":
				out = append(out, nonNil(bytes.Clone(kv.Key[len(start):])))
			default:
				out = append(out, nonNil(bytes.Clone(zEntryOf(k, kv).member)))
			}
		}
		if len(kvs) < x.s.cfg.MaxBatchKeys {
			return out, typ, nil
		}
		from = append(bytes.Clone(kvs[len(kvs)-1].Key), 0)
	}
}

// sortValue is what a pattern gives for one element: val nil if nothing.
type sortValue struct{ val []byte }

// sortFetch is Redis's lookupKeyByPattern for each of elems, read from r
// in batches: "#" gives the element itself; otherwise the pattern's first
// '*' replaced by the element names a key, whose string value it gives,
// or, with "->field" after the '*', that field of the hash at the key.
// Nothing: no '*', no such key or field, or a key of another type.
func (x *call) sortFetch(r KV, pattern []byte, elems [][]byte) ([]sortValue, error) {
	out := make([]sortValue, len(elems))
	if string(pattern) == "#" {
		for i, e := range elems {
			out[i].val = nonNil(e)
		}
		return out, nil
	}
	star := bytes.IndexByte(pattern, '*')
	if star < 0 {
		return out, nil
	}
	post := pattern[star+1:]
	var field []byte
	if f := bytes.Index(post, []byte("->")); f >= 0 && f+2 < len(post) {
		field = post[f+2:]
		post = post[:f]
	}
	var at []int // the elements whose key is read
	var keys, enc [][]byte
	for i, e := range elems {
		key := append(append(append([]byte(nil), pattern[:star]...), e...), post...)
		if len(key) > 0 { // TideKV has no empty key: nothing there
			at = append(at, i)
			keys = append(keys, key)
			enc = append(enc, encKey(key))
		}
	}
	rs, err := x.batchGetFrom(r, enc)
	if err != nil {
		return nil, err
	}
	if field == nil {
		for j, res := range rs {
			if res.Found && !isMarker(res.Value) {
				out[at[j]].val = nonNil(res.Value)
			}
		}
		return out, nil
	}
	var fields [][]byte // of the keys holding a hash, and their elements
	var hat []int
	for j, res := range rs {
		if res.Found && isHash(res.Value) {
			fields = append(fields, fieldKey(keys[j], field))
			hat = append(hat, at[j])
		}
	}
	fs, err := x.batchGetFrom(r, fields)
	if err != nil {
		return nil, err
	}
	for j, res := range fs {
		if res.Found {
			out[hat[j]].val = nonNil(res.Value)
		}
	}
	return out, nil
}

// nonNil is v, or an empty slice for nil: a found value, even empty, is
// not nil, which stands for a missing one.
func nonNil(v []byte) []byte {
	if v == nil {
		return []byte{}
	}
	return v
}
