package resp

import (
	"strconv"
	"testing"
)

// TestMemoryUsageCountsEveryElement: MEMORY USAGE is the bytes of the
// key's own entry plus each element's key and value, so a field added to a
// hash adds exactly its stored key and value, and a string is its key and
// value alone.
func TestMemoryUsageCountsEveryElement(t *testing.T) {
	s, _ := start(t, newFakeKV(), nil, nil)
	got := pipeline(t, s,
		[]string{"SET", "s", "value"}, []string{"MEMORY", "USAGE", "s"},
		[]string{"HSET", "h", "f", "v"}, []string{"MEMORY", "USAGE", "h"},
		[]string{"HSET", "h", "g", "ww"}, []string{"MEMORY", "USAGE", "h", "SAMPLES", "1"},
		[]string{"MEMORY", "USAGE", "none"})
	if want := ":" + strconv.Itoa(len(encKey([]byte("s")))+len("value")); got[1] != want {
		t.Errorf("MEMORY USAGE of a string: %s, want %s", got[1], want)
	}
	one, err1 := strconv.Atoi(got[3][1:])
	two, err2 := strconv.Atoi(got[5][1:])
	if err1 != nil || err2 != nil {
		t.Fatalf("MEMORY USAGE of a hash: %q, %q", got[3], got[5])
	}
	if d, want := two-one, len(fieldKey([]byte("h"), []byte("g")))+len("ww"); d != want {
		t.Errorf("a second field added %d bytes to MEMORY USAGE, want %d (its key and value)", d, want)
	}
	if got[6] != "$<nil>" {
		t.Errorf("MEMORY USAGE of a missing key: %q, want nil", got[6])
	}
}
