package resp

import "testing"

// FuzzFrameScanner: whatever the bytes, the scanner does not panic, never
// claims more bytes than it was given, and reaches the same verdict at the
// same offset whether the stream arrives in one read or in two.
func FuzzFrameScanner(f *testing.F) {
	for _, seed := range []string{
		"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nhello\r\n",
		"PING\r\nGET k\r\n",
		"*1099511627776\r\n",
		"$1099511627776\r\n",
		"*1\r\n$-1\r\n",
		"*2\r\n$3\r\nGET\r\n",
		"*-5\r\n*1\r\n$0\r\n\r\n",
		"\r\n\r\n*0\r\n",
	} {
		f.Add([]byte(seed), uint8(3))
	}
	lim := frameLimits{bulk: 16, args: 4, inline: 32, command: 64}
	f.Fuzz(func(t *testing.T, b []byte, cut uint8) {
		whole := frameScanner{lim: lim}
		n, err := whole.scan(b)
		if n < 0 || n > len(b) {
			t.Fatalf("scan claims %d of %d bytes", n, len(b))
		}
		c := int(cut) % (len(b) + 1)
		split := frameScanner{lim: lim}
		n1, err1 := split.scan(b[:c])
		if err1 != nil {
			if err == nil || n1 != n {
				t.Fatalf("split at %d refused at %d (%v), whole at %d (%v)", c, n1, err1, n, err)
			}
			return
		}
		n2, err2 := split.scan(b[c:])
		if (err2 == nil) != (err == nil) || n1+n2 != n {
			t.Fatalf("split at %d: %d+%d (%v), whole %d (%v)", c, n1, n2, err2, n, err)
		}
	})
}
