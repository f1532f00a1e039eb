package resp

import (
	"bytes"
	"strconv"
)

// cmdZScan: ZSCAN key cursor [MATCH pattern] [COUNT n] walks z's index,
// so members come in score order: COUNT index keys a call (a set that
// fits in one call comes whole, with cursor 0, as a small Redis set
// does). The cursor names the next index key, as SCAN's does.
func cmdZScan(x *call) {
	z := x.args[1]
	id, err := strconv.ParseUint(string(x.args[2]), 10, 64)
	if err != nil {
		x.c.WriteError("ERR invalid cursor")
		return
	}
	_, exists, ok := x.zsetState(z)
	if !ok {
		return
	}
	if !exists {
		x.writeScanReply(0, nil)
		return
	}
	a, ok := x.collectionScanArgs()
	if !ok {
		return
	}
	start, ok := x.resumeCursor(id, zIndexPrefix(z))
	if !ok {
		return
	}
	var out [][]byte
	var next []byte
	read := 0
	err = x.zwalk(z, start, zIndexEnd(z), 0, a.count+1, func(e zEntry) bool {
		if read++; read > a.count {
			next = zIndexKey(z, e.member, e.score)
			return false
		}
		if a.pattern == nil || globMatch(a.pattern, e.member) {
			out = append(out, bytes.Clone(e.member), formatScore(e.score))
		}
		return true
	})
	if err != nil {
		replyErr(x.c, err)
		return
	}
	var cur uint64
	if next != nil {
		cur = x.s.saveCursor(next)
	}
	x.writeScanReply(cur, out)
}

// writeScanReply answers a scan: the cursor, then the items.
func (x *call) writeScanReply(cur uint64, items [][]byte) {
	x.c.WriteArray(2)
	x.c.WriteBulkString(strconv.FormatUint(cur, 10))
	writeBulks(x, items)
}
