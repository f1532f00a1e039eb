package resp

import (
	"errors"
	"strconv"
	"strings"
	"testing"
)

// DUMP and RESTORE carry every type whole, TTL as RESTORE says, and a
// payload changed on the way or made by redis-server is refused with
// Redis's error.
func TestDumpRestoreEveryType(t *testing.T) {
	s, _ := start(t, newFakeKV(), nil, nil)
	pipeline(t, s,
		[]string{"SET", "str", "v\x00w"},
		[]string{"HSET", "h", "f", "1", "g", "two"},
		[]string{"RPUSH", "l", "c", "a", "b", "a"},
		[]string{"SADD", "s", "x", "y", "\x00"},
		[]string{"ZADD", "z", "2", "b", "1", "a", "-inf", "m"},
	)
	reads := map[string][]string{
		"str": {"GET"}, "h": {"HGETALL"}, "l": {"LRANGE", "*", "0", "-1"},
		"s": {"SMEMBERS"}, "z": {"ZRANGE", "*", "0", "-1", "WITHSCORES"},
	}
	read := func(k, at string) string {
		cmd := append([]string(nil), reads[k]...)
		if len(cmd) == 1 {
			cmd = append(cmd, at)
		} else {
			cmd[1] = at
		}
		return strings.Join(pipeline(t, s, cmd, []string{"TYPE", at}), " ")
	}
	for k := range reads {
		payload := pipeline(t, s, []string{"DUMP", k})[0]
		if !strings.HasPrefix(payload, "$") {
			t.Fatalf("DUMP %s: %s", k, payload)
		}
		raw := payload[1:]
		want := read(k, k)
		eqReplies(t, pipeline(t, s,
			[]string{"RESTORE", k, "0", raw},
			[]string{"RESTORE", k + "2", "0", raw},
			[]string{"RESTORE", k, "0", raw, "REPLACE", "IDLETIME", "5"},
			[]string{"OBJECT", "REFCOUNT", k + "2"},
		), []string{"-BUSYKEY Target key name already exists.", "+OK", "+OK", ":1"})
		if got := read(k, k+"2"); got != want {
			t.Errorf("%s restored: %s, want %s", k, got, want)
		}
		// One byte changed anywhere: the checksum no longer holds.
		for _, i := range []int{0, len(raw) / 2, len(raw) - 9, len(raw) - 1} {
			bad := []byte(raw)
			bad[i] ^= 0x20
			eqReplies(t, pipeline(t, s, []string{"RESTORE", "x", "0", string(bad)}), []string{"-ERR DUMP payload version or checksum are wrong"})
		}
	}
	// redis-server 7.0's DUMP of "bar": a payload of another server.
	eqReplies(t, pipeline(t, s,
		[]string{"RESTORE", "x", "0", "\x00\x03bar\n\x00\xe6\xbeI`\xeef\xfd\x17"},
		[]string{"RESTORE", "x", "0", "short"},
		[]string{"DUMP", "missing"},
		[]string{"OBJECT", "REFCOUNT", "missing"},
		[]string{"EXISTS", "x"},
	), []string{"-ERR DUMP payload version or checksum are wrong", "-ERR DUMP payload version or checksum are wrong", "$<nil>", "$<nil>", ":0"})
}

// RESTORE's options and errors come in Redis's order: syntax, BUSYKEY,
// the TTL, then the payload; a TTL or absolute time is the key's, and a
// time already past creates nothing (REPLACE still deletes).
func TestRestoreOptions(t *testing.T) {
	s, _ := start(t, newFakeKV(), nil, nil)
	pipeline(t, s, []string{"RPUSH", "l", "a", "b"})
	raw := pipeline(t, s, []string{"DUMP", "l"})[0]
	raw = raw[1:]
	eqReplies(t, pipeline(t, s,
		[]string{"RESTORE", "l", "x", raw, "BOGUS"},
		[]string{"RESTORE", "l", "x", raw},
		[]string{"RESTORE", "n", "x", raw},
		[]string{"RESTORE", "n", "-1", raw},
		[]string{"RESTORE", "n", "0", raw, "IDLETIME", "-1"},
		[]string{"RESTORE", "n", "0", raw, "FREQ", "256"},
		[]string{"RESTORE", "n", "0", raw, "FREQ", "1", "IDLETIME", "1"},
		[]string{"RESTORE", "n", "5000", raw, "FREQ", "255"},
		[]string{"PTTL", "n"},
		[]string{"RESTORE", "old", "1000", raw, "ABSTTL"},
		[]string{"EXISTS", "old"},
		[]string{"RESTORE", "l", "1000", raw, "ABSTTL", "REPLACE"},
		[]string{"EXISTS", "l"},
		[]string{"RESTORE", "far", "4102444800000", raw, "ABSTTL"},
		[]string{"LRANGE", "far", "0", "-1"},
	), []string{
		"-ERR syntax error",
		"-BUSYKEY Target key name already exists.",
		"-ERR value is not an integer or out of range",
		"-ERR Invalid TTL value, must be >= 0",
		"-ERR Invalid IDLETIME value, must be >= 0",
		"-ERR Invalid FREQ value, must be >= 0 and <= 255",
		"-ERR syntax error",
		"+OK", ":5000",
		"+OK", ":0",
		"+OK", ":0",
		"+OK", "*[$a $b]",
	})
}

// A RESTORE is one transaction: when it fails, what the key held stays
// whole, and nothing of the payload is written.
func TestRestoreIsOneTransaction(t *testing.T) {
	kv := &writeCountKV{fakeKV: newFakeKV()}
	s, _ := start(t, kv, nil, nil)
	pipeline(t, s, []string{"ZADD", "z", "1", "a", "2", "b"}, []string{"SADD", "s", "x", "y", "z"})
	raw := pipeline(t, s, []string{"DUMP", "s"})[0]
	raw = raw[1:]
	before := kv.txns.Load()
	eqReplies(t, pipeline(t, s, []string{"RESTORE", "z", "0", raw, "REPLACE"}), []string{"+OK"})
	if n := kv.txns.Load() - before; n != 1 {
		t.Errorf("RESTORE ran %d transactions, want 1", n)
	}
	pipeline(t, s, []string{"ZADD", "z2", "1", "a", "2", "b"})
	kv.mu.Lock()
	kv.txFail = errors.New("injected")
	kv.mu.Unlock()
	got := pipeline(t, s, []string{"RESTORE", "z2", "0", raw, "REPLACE"})
	kv.mu.Lock()
	kv.txFail = nil
	kv.mu.Unlock()
	eqReplies(t, got, []string{"-ERR injected"})
	eqReplies(t, pipeline(t, s,
		[]string{"ZRANGE", "z2", "0", "-1", "WITHSCORES"}, []string{"SMEMBERS", "z"},
	), []string{"*[$a $1 $b $2]", "*[$x $y $z]"})
	// Inside EXEC it is the transaction's, and reads after it see it.
	eqReplies(t, pipeline(t, s,
		[]string{"MULTI"}, []string{"RESTORE", "m", "0", raw}, []string{"SCARD", "m"}, []string{"DUMP", "nothing"}, []string{"EXEC"},
	), []string{"+OK", "+QUEUED", "+QUEUED", "+QUEUED", "*[+OK :3 $<nil>]"})
}

// DUMP refuses a payload larger than RESTORE takes, and stops reading the
// collection once its payload passes that.
func TestDumpTooLarge(t *testing.T) {
	kv := newFakeKV()
	s, _ := start(t, kv, func(c *Config) { c.MaxBulkLen, c.MaxBatchKeys = 64, 4 }, nil)
	for i := range 30 {
		pipeline(t, s, []string{"RPUSH", "l", "element-" + strconv.Itoa(i)})
	}
	pipeline(t, s, []string{"SET", "k", strings.Repeat("v", 60)})
	scans := func() int {
		kv.mu.Lock()
		defer kv.mu.Unlock()
		return kv.scans
	}
	before := scans()
	eqReplies(t, pipeline(t, s, []string{"DUMP", "l"}, []string{"DUMP", "k"}), []string{
		"-ERR DUMP payload of more than 64 bytes, the most a RESTORE takes (--redis-max-bulk-len)",
		"-ERR DUMP payload of more than 64 bytes, the most a RESTORE takes (--redis-max-bulk-len)",
	})
	// 64 bytes are 6 elements: two pages of 4, not the list's 8.
	if n := scans() - before; n > 2 {
		t.Errorf("DUMP of a 30-element list read %d pages of 4 elements, want 2", n)
	}
}
