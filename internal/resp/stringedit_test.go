package resp

import "testing"

// APPEND and SETRANGE refuse a string longer than MaxBulkLen (Redis's
// proto-max-bulk-len, which the differential test cannot reach) with
// Redis's error, and write nothing.
func TestStringMaximum(t *testing.T) {
	s, _ := start(t, newFakeKV(), func(c *Config) { c.MaxBulkLen = 8 }, nil)
	eqReplies(t, pipeline(t, s,
		[]string{"APPEND", "k", "12345"},
		[]string{"APPEND", "k", "6789"},
		[]string{"SETRANGE", "k", "7", "xy"},
		[]string{"SETRANGE", "n", "9", "x"},
		[]string{"SETRANGE", "k", "6", "xy"},
		[]string{"GET", "k"},
		[]string{"EXISTS", "n"},
	), []string{":5", "-" + errTooLong, "-" + errTooLong, "-" + errTooLong, ":8", "$12345\x00xy", ":0"})
}
