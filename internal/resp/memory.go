package resp

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// cmdMemory: MEMORY USAGE key [SAMPLES n], the bytes TideKV stores for the
// key: its own key and value plus, for a hash, list, set or sorted set,
// every element's key and value (a scan of the collection, in pages; Redis
// estimates from n sampled elements, so SAMPLES is checked and not used).
// The other subcommands describe Redis's allocator and are refused.
func cmdMemory(x *call) {
	sub := strings.ToLower(string(x.args[1]))
	switch sub {
	case "usage":
	case "doctor", "stats", "malloc-stats", "purge":
		x.c.WriteError(fmt.Sprintf("ERR MEMORY %s is not supported by TideKV", strings.ToUpper(sub)))
		return
	default:
		x.c.WriteError(fmt.Sprintf("ERR unknown subcommand '%s'. Try MEMORY HELP.", trunc(x.args[1])))
		return
	}
	if len(x.args) < 3 {
		x.c.WriteError(errArity("memory|usage"))
		return
	}
	for i := 3; i < len(x.args); i += 2 {
		if !strings.EqualFold(string(x.args[i]), "samples") || i+1 == len(x.args) {
			x.c.WriteError(errSyntax)
			return
		}
		n, err := strconv.ParseInt(string(x.args[i+1]), 10, 64)
		switch {
		case err != nil:
			x.c.WriteError(errNotInt)
			return
		case n < 0:
			x.c.WriteError(errSyntax)
			return
		}
	}
	k := encKey(x.args[2])
	v, err := x.kv.Get(x.ctx, k)
	switch {
	case errors.Is(err, ErrNotFound):
		x.c.WriteNull()
		return
	case err != nil:
		replyErr(x.c, err)
		return
	}
	size := len(k) + len(v)
	if isMarker(v) {
		n, err := x.elementBytes(x.args[2])
		if err != nil {
			replyErr(x.c, err)
			return
		}
		size += n
	}
	x.c.WriteInt(size)
}

// elementBytes adds up the keys and values of key's elements, which lie in
// [fieldPrefix, fieldsEnd) whatever the type, MaxBatchKeys at a time. A KV
// without key order (a hashed key space) has none to scan.
func (x *call) elementBytes(key []byte) (int, error) {
	start, end := fieldPrefix(key), fieldsEnd(key)
	total := 0
	for {
		kvs, err := x.kv.Scan(x.ctx, start, end, x.s.cfg.MaxBatchKeys)
		if errors.Is(err, ErrUnordered) {
			return total, nil
		}
		if err != nil {
			return 0, err
		}
		for _, kv := range kvs {
			total += len(kv.Key) + len(kv.Value)
		}
		if len(kvs) < x.s.cfg.MaxBatchKeys {
			return total, nil
		}
		start = append(append([]byte(nil), kvs[len(kvs)-1].Key...), 0)
	}
}
