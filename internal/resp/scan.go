package resp

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// cursor is the state of a SCAN iteration: the engine key to resume at.
// Redis clients (redis-cli, go-redis) treat cursors as unsigned 64-bit
// integers, so the key is kept here and the client gets a number.
type cursor struct {
	next []byte
	used time.Time
}

func (s *Server) saveCursor(next []byte) uint64 {
	s.curMu.Lock()
	defer s.curMu.Unlock()
	now := time.Now()
	for id, c := range s.cursors {
		if now.Sub(c.used) > s.cfg.CursorTTL {
			delete(s.cursors, id)
		}
	}
	for len(s.cursors) >= s.cfg.MaxCursors {
		var oldest uint64
		var t time.Time
		for id, c := range s.cursors {
			if oldest == 0 || c.used.Before(t) {
				oldest, t = id, c.used
			}
		}
		delete(s.cursors, oldest)
	}
	var id uint64
	for id == 0 || s.cursors[id] != nil {
		var b [8]byte
		_, _ = rand.Read(b[:])
		id = binary.BigEndian.Uint64(b[:]) >> 1 // stay within int64 for clients that parse signed
	}
	s.cursors[id] = &cursor{next: next, used: now}
	return id
}

func (s *Server) takeCursor(id uint64) ([]byte, bool) {
	s.curMu.Lock()
	defer s.curMu.Unlock()
	c, ok := s.cursors[id]
	if !ok || time.Since(c.used) > s.cfg.CursorTTL {
		delete(s.cursors, id)
		return nil, false
	}
	delete(s.cursors, id)
	return c.next, true
}

// scanArgs are SCAN's options.
type scanArgs struct {
	pattern []byte
	typ     string
	count   int
}

// collectionScanArgs reads HSCAN's, SSCAN's and ZSCAN's options after
// their key and cursor (TYPE is SCAN's alone); on a bad one it answers the
// error and returns false.
func (x *call) collectionScanArgs() (scanArgs, bool) {
	sx := *x
	sx.args = x.args[1:] // the options after the cursor, where parseScanArgs reads them
	a, ok := parseScanArgs(&sx)
	if ok && a.typ != "" {
		x.c.WriteError(errSyntax)
		return a, false
	}
	return a, ok
}

// resumeCursor is where a collection scan starts: at prefix for cursor 0,
// else where cursor id stopped, which must lie under prefix (nil: any). On
// an unknown cursor it answers the error and returns false.
func (x *call) resumeCursor(id uint64, prefix []byte) ([]byte, bool) {
	if id == 0 {
		return prefix, true
	}
	next, found := x.s.takeCursor(id)
	if !found || !bytes.HasPrefix(next, prefix) {
		x.c.WriteError("ERR invalid cursor (unknown or expired; TideKV cursors are kept by the node that issued them)")
		return nil, false
	}
	return next, true
}

// parseScanArgs reads SCAN's options after the cursor; on a bad one it
// answers the error and returns false.
func parseScanArgs(x *call) (scanArgs, bool) {
	a := scanArgs{count: 10}
	for i := 2; i < len(x.args); i += 2 {
		if i+1 >= len(x.args) {
			x.c.WriteError(errSyntax)
			return a, false
		}
		v := x.args[i+1]
		switch strings.ToUpper(string(x.args[i])) {
		case "MATCH":
			a.pattern = v
		case "COUNT":
			n, err := strconv.Atoi(string(v))
			if err != nil {
				x.c.WriteError(errNotInt)
				return a, false
			}
			if n < 1 {
				x.c.WriteError(errSyntax)
				return a, false
			}
			a.count = min(n, x.s.cfg.MaxScanCount)
		case "TYPE":
			a.typ = strings.ToLower(string(v))
		default:
			x.c.WriteError(errSyntax)
			return a, false
		}
	}
	return a, true
}

// cmdScan: SCAN cursor [MATCH pattern] [COUNT n] [TYPE string|hash|zset]. Each
// call reads at most COUNT (default 10) stored keys from the cursor on,
// skipping hash fields, and returns the user keys among them that match.
func cmdScan(x *call) {
	id, err := strconv.ParseUint(string(x.args[1]), 10, 64)
	if err != nil {
		x.c.WriteError("ERR invalid cursor")
		return
	}
	a, ok := parseScanArgs(x)
	if !ok {
		return
	}
	var start []byte
	if id != 0 {
		if start, ok = x.s.takeCursor(id); !ok {
			x.c.WriteError("ERR invalid cursor (unknown or expired; TideKV cursors are kept by the node that issued them)")
			return
		}
	}
	keys, next, err := scanKeys(x, start, a)
	if err != nil {
		replyErr(x.c, err)
		return
	}
	var cur uint64
	if next != nil {
		cur = x.s.saveCursor(next)
	}
	x.c.WriteArray(2)
	x.c.WriteBulkString(strconv.FormatUint(cur, 10))
	x.c.WriteArray(len(keys))
	for _, k := range keys {
		x.c.WriteBulk(k)
	}
}

// scanKeys reads at most a.count stored keys from start on and returns the
// matching user keys and where the next call resumes (nil: the end).
func scanKeys(x *call, start []byte, a scanArgs) (keys [][]byte, next []byte, err error) {
	for read := 0; read < a.count; {
		want := a.count - read
		kvs, err := x.kv.Scan(x.ctx, start, nil, want)
		if err != nil {
			return nil, nil, err
		}
		read += len(kvs)
		next = nil
		jumped := false
		for _, kv := range kvs {
			user, _, isField := decodeKey(kv.Key)
			if isField {
				// Skip the rest of this hash's fields in one step.
				next, jumped = fieldsEnd(user), true
				break
			}
			next = append(append([]byte(nil), kv.Key...), 0)
			if a.pattern != nil && !globMatch(a.pattern, user) {
				continue
			}
			if a.typ != "" && a.typ != valueType(kv.Value) {
				continue
			}
			keys = append(keys, user)
		}
		if !jumped && len(kvs) < want {
			return keys, nil, nil // the end of the key space
		}
		start = next
	}
	return keys, next, nil
}

// cmdRange: TKV.RANGE start end [LIMIT n] returns the string keys in
// [start, end) in key order with their values, as a flat array key1 value1
// key2 value2 ...; an empty end means no upper bound. Hashes are skipped.
// LIMIT defaults to and may not exceed MaxScanCount.
func cmdRange(x *call) {
	limit := x.s.cfg.MaxScanCount
	rest := x.args[3:]
	for len(rest) > 0 {
		if !strings.EqualFold(string(rest[0]), "limit") || len(rest) < 2 {
			x.c.WriteError(errSyntax)
			return
		}
		n, err := strconv.Atoi(string(rest[1]))
		if err != nil {
			x.c.WriteError(errNotInt)
			return
		}
		if n < 1 || n > x.s.cfg.MaxScanCount {
			x.c.WriteError(fmt.Sprintf("ERR LIMIT must be between 1 and %d", x.s.cfg.MaxScanCount))
			return
		}
		limit = n
		rest = rest[2:]
	}
	start := encKey(x.args[1])
	var end []byte
	if len(x.args[2]) > 0 {
		end = encKey(x.args[2])
		if bytes.Compare(start, end) >= 0 {
			x.c.WriteArray(0)
			return
		}
	}
	var out []KeyValue
	size := 0
	for len(out) < limit {
		want := limit - len(out)
		kvs, err := x.kv.Scan(x.ctx, start, end, want)
		if err != nil {
			replyErr(x.c, err)
			return
		}
		var next []byte
		jumped := false
		for _, kv := range kvs {
			user, _, isField := decodeKey(kv.Key)
			if isField {
				next, jumped = fieldsEnd(user), true
				break
			}
			next = append(append([]byte(nil), kv.Key...), 0)
			if isMarker(kv.Value) {
				continue
			}
			if size += len(user) + len(kv.Value); size > x.s.cfg.MaxOutputBuffer {
				x.c.WriteError(fmt.Sprintf("ERR TKV.RANGE reply of more than %d bytes (the output buffer limit, --redis-max-output-buffer): lower LIMIT", x.s.cfg.MaxOutputBuffer))
				return
			}
			out = append(out, KeyValue{Key: user, Value: kv.Value})
		}
		if !jumped && len(kvs) < want {
			break
		}
		if end != nil && bytes.Compare(next, end) >= 0 {
			break
		}
		start = next
	}
	x.c.WriteArray(2 * len(out))
	for _, kv := range out {
		x.c.WriteBulk(kv.Key)
		x.c.WriteBulk(kv.Value)
	}
}

// globMatch reports whether s matches the Redis glob pattern p: * ? [set]
// [^set] [a-z] and \ escapes. Every element but * matches one byte, so
// only the last * seen needs a way back (it takes one byte more and the
// rest is tried again): O(len(p) * len(s)), where trying every split at
// every * takes exponential time on a pattern like "a*a*a*...b"
// (the last steps of redisdiff's keys.txt).
func globMatch(p, s []byte) bool {
	pi, si := 0, 0
	star, starS := -1, 0 // the last *'s position in p, and where it began in s
	for si < len(s) {
		if pi < len(p) && p[pi] == '*' {
			star, starS = pi, si
			pi++
			continue
		}
		if pi < len(p) {
			if n, ok := globOne(p[pi:], s[si]); ok {
				pi += n
				si++
				continue
			}
		}
		if star < 0 {
			return false
		}
		starS++
		pi, si = star+1, starS
	}
	for pi < len(p) && p[pi] == '*' {
		pi++
	}
	return pi == len(p)
}

// globOne reports whether c matches p's first element (not *), and that
// element's length. An unterminated set matches nothing.
func globOne(p []byte, c byte) (int, bool) {
	switch p[0] {
	case '?':
		return 1, true
	case '[':
		i := 1
		neg := i < len(p) && p[i] == '^'
		if neg {
			i++
		}
		match := false
		for i < len(p) && p[i] != ']' {
			switch {
			case p[i] == '\\' && i+1 < len(p):
				match = match || p[i+1] == c
				i += 2
			case i+2 < len(p) && p[i+1] == '-' && p[i+2] != ']':
				lo, hi := p[i], p[i+2]
				if lo > hi {
					lo, hi = hi, lo
				}
				match = match || (c >= lo && c <= hi)
				i += 3
			default:
				match = match || p[i] == c
				i++
			}
		}
		if i >= len(p) {
			return 0, false
		}
		return i + 1, match != neg
	case '\\':
		if len(p) > 1 {
			return 2, p[1] == c
		}
	}
	return 1, p[0] == c
}

// errReplyTooLarge: what a command would reply exceeds its byte budget.
var errReplyTooLarge = errors.New("reply too large")

// readSpan reads the pairs in [start, end) page by page. With budget >= 0
// it keeps them all, failing with errReplyTooLarge once their keys and
// values pass budget bytes, so a command never holds more than that plus
// a page; with budget < 0 it only counts them, keeping the first (n is the
// count either way).
func (x *call) readSpan(start, end []byte, budget int) (kvs []KeyValue, n int, err error) {
	size := 0
	for {
		page, err := x.kv.Scan(x.ctx, start, end, x.s.cfg.MaxScanCount)
		if err != nil {
			return nil, 0, err
		}
		n += len(page)
		switch {
		case budget < 0 && len(kvs) == 0 && len(page) > 0:
			kvs = page[:1]
		case budget >= 0:
			for _, kv := range page {
				if size += len(kv.Key) + len(kv.Value); size > budget {
					return nil, 0, errReplyTooLarge
				}
			}
			kvs = append(kvs, page...)
		}
		if len(page) < x.s.cfg.MaxScanCount {
			return kvs, n, nil
		}
		start = append(append([]byte(nil), page[len(page)-1].Key...), 0)
	}
}
