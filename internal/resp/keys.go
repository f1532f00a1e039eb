package resp

import "errors"

// cmdDel serves DEL and UNLINK. Several keys go in one transaction, as
// Redis deletes them at once: no reader sees some gone and others there,
// however many they are (their writes reach the store MaxBatchKeys a
// message, the transaction's limits bound the whole). A hash's fields and
// a collection's elements are removed after it, as one key's are: the
// keys are gone already, so what is left is unreachable garbage, removed
// only while its key is still absent (clearFields), never from a
// collection a later command made there.
func cmdDel(x *call) {
	if len(x.args) > 2 {
		x.delAtOnce()
		return
	}
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

// delAtOnce is DEL of several keys: one transaction reads and deletes
// them, then the fields of those that were hashes or collections go.
func (x *call) delAtOnce() {
	var n int
	var fields [][]byte
	// A key named twice is deleted, and counted, once.
	keys := distinct(x.args[1:])
	enc := make([][]byte, len(keys))
	for i, k := range keys {
		enc[i] = encKey(k)
	}
	err := x.kv.Txn(x.ctx, func(tx TxnKV) error {
		n, fields = 0, fields[:0] // an attempt retried after a conflict starts over
		rs, err := x.deleteFound(tx, enc)
		for i, r := range rs {
			if r.Found {
				n++
				if isMarker(r.Value) {
					fields = append(fields, keys[i])
				}
			}
		}
		return err
	})
	for _, k := range fields {
		if err == nil {
			err = x.clearFields(k)
		}
	}
	if err != nil {
		replyErr(x.c, err)
		return
	}
	x.c.WriteInt(n)
}

// deleteFound reads keys in tx (readChunks) and deletes those found: it
// returns what it read, Found for the keys deleted.
func (x *call) deleteFound(tx TxnKV, keys [][]byte) ([]Result, error) {
	rs, err := readChunks(x.ctx, tx, keys, x.s.readBatch())
	if err != nil {
		return nil, err
	}
	for i, r := range rs {
		if r.Found {
			if err := tx.Delete(x.ctx, keys[i]); err != nil {
				return nil, err
			}
		}
	}
	return rs, nil
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
