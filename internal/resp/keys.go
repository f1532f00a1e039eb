package resp

import "errors"

func cmdDel(x *call) {
	n := 0
	for _, k := range x.args[1:] {
		existed, err := x.deleteKey(k)
		if err != nil {
			replyErr(x.c, err)
			return
		}
		if existed {
			n++
		}
	}
	x.c.WriteInt(n)
}

// deleteKey deletes key k, a string or a hash with its fields, and reports
// whether it existed.
func (x *call) deleteKey(k []byte) (bool, error) {
	existed, err := x.kv.Delete(x.ctx, encKey(k))
	if err != nil || !existed {
		return existed, err
	}
	// The key may have been a hash: remove its fields too.
	return true, x.clearFields(k)
}

func cmdExists(x *call) {
	n := 0
	ok := true
	x.readArgs(func(_ int, rs []Result, err error) bool {
		if err != nil {
			replyErr(x.c, err)
			ok = false
			return false
		}
		for _, r := range rs {
			if r.Found {
				n++
			}
		}
		return true
	})
	if ok {
		x.c.WriteInt(n)
	}
}

func cmdType(x *call) {
	v, err := x.kv.Get(x.ctx, encKey(x.args[1]))
	switch {
	case errors.Is(err, ErrNotFound):
		x.c.WriteString("none")
	case err != nil:
		replyErr(x.c, err)
	default:
		x.c.WriteString(valueType(v))
	}
}

// cmdDBSize: DBSIZE, the number of keys of the connection's database,
// counted by a scan of all of it (MaxBatchKeys stored keys a read), so it
// costs as much as a SCAN to the end: each string and each hash counts
// once (a hash's fields are stepped over), expired values not at all.
// Keys written while it runs may or may not be counted.
func cmdDBSize(x *call) {
	n := 0
	var start []byte
	for {
		keys, next, err := scanKeys(x, start, scanArgs{count: x.s.cfg.MaxBatchKeys})
		if err != nil {
			replyErr(x.c, err)
			return
		}
		n += len(keys)
		if next == nil {
			break
		}
		start = next
	}
	x.c.WriteInt(n)
}
