package resp

import (
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// byteConn is a connection that reads from r, most bytes at a time.
type byteConn struct {
	net.Conn
	r    io.Reader
	most int
}

func (c byteConn) Read(p []byte) (int, error) { return c.r.Read(p[:min(len(p), c.most)]) }

// testScan is the tests' readers' scanner: generous limits.
var testScan = frameScanner{lim: frameLimits{bulk: 1 << 20, args: 1 << 10, inline: 1 << 16, command: 1 << 22}}

// readAll reads every command in input, most bytes a read, and returns
// them (each argument quoted) and the refusal that ended them, if any.
func readAll(input string, most int) (cmds []string, refused string) {
	r := reader{nc: byteConn{r: strings.NewReader(input), most: most}, now: time.Now,
		scan: testScan}
	for {
		n, err := r.next()
		if err != nil {
			if r.refused != nil {
				refused = r.refused.Error()
			}
			return cmds, refused
		}
		for i := range n {
			cmds = append(cmds, fmt.Sprintf("%q", r.command(i)))
		}
	}
}

// Inline commands are split close to Redis, as TideKV's first reader split
// them: spaces, quotes, three escapes; every other command of the read is
// served before a line that does not parse.
func TestInlineCommands(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    []string
		refused string
	}{
		{in: "GET k\r\n", want: []string{`["GET" "k"]`}},
		{in: "GET k\n", want: []string{`["GET" "k"]`}},
		{in: "  SET   k  v  \r\n", want: []string{`["SET" "k" "v"]`}},
		{in: "\r\n   \r\n\nPING\r\n", want: []string{`["PING"]`}},
		{in: `SET "a b" 'c\nd' "" "\t\r\\\"\x"` + "\r\n", want: []string{`["SET" "a b" "c\nd" "" "\t\r\\\"x"]`}},
		{in: "SET k a\tb\rc\r\n", want: []string{`["SET" "k" "a\tb\rc"]`}},
		{in: "PING\r\nSET a\"b c\r\n", want: []string{`["PING"]`}, refused: "ERR Protocol error: unbalanced quotes in request"},
		{in: `SET "k"v` + "\r\n", refused: "ERR Protocol error: unbalanced quotes in request"},
		{in: `SET "k v` + "\r\n", refused: "ERR Protocol error: unbalanced quotes in request"},
		{in: `SET "k\"` + "\r\n", refused: "ERR Protocol error: unbalanced quotes in request"},
		{in: "*1\r\n$4\r\nPINGxx\r\n", refused: "ERR Protocol error: invalid bulk length"},
		{in: "*2\r\n$4\r\nECHO\r\n$0\r\n\r\n*1\r\n$4\r\nPING\r\n", want: []string{`["ECHO" ""]`, `["PING"]`}},
		// MaxArgs (1,024 here) holds for an inline line as for an array.
		{in: "PING\r\n" + strings.Repeat("a ", 1025) + "\r\n", want: []string{`["PING"]`},
			refused: "ERR Protocol error: command of 1025 arguments is too large (the maximum is 1024 arguments)"},
	} {
		for _, most := range []int{1, 3, 1 << 20} {
			cmds, refused := readAll(tc.in, most)
			if fmt.Sprint(cmds) != fmt.Sprint(tc.want) || refused != tc.refused {
				t.Errorf("%q read %d bytes at a time: %v, refused %q; want %v, refused %q", tc.in, most, cmds, refused, tc.want, tc.refused)
			}
		}
	}
}

// A command larger than the read buffer, and many commands across several
// buffers, read whole.
func TestReaderAcrossBuffers(t *testing.T) {
	big := strings.Repeat("v", 3*readChunk+17)
	var in strings.Builder
	var want []string
	for i := range 500 {
		fmt.Fprintf(&in, "*3\r\n$3\r\nSET\r\n$%d\r\nk%d\r\n$%d\r\n%s\r\n", len(fmt.Sprint(i))+1, i, len(big[:i*20]), big[:i*20])
		want = append(want, fmt.Sprintf("%q", [][]byte{[]byte("SET"), []byte(fmt.Sprint("k", i)), []byte(big[:i*20])}))
	}
	for _, most := range []int{7, 1000, 1 << 20} {
		cmds, refused := readAll(in.String(), most)
		if refused != "" || len(cmds) != len(want) {
			t.Fatalf("%d bytes a read: %d commands, refused %q; want %d", most, len(cmds), refused, len(want))
		}
		for i := range cmds {
			if cmds[i] != want[i] {
				t.Fatalf("%d bytes a read: command %d differs", most, i)
			}
		}
	}
}

// A MULTI's queue holds its commands' arguments across reads and across
// the reader's buffers: commands of every form, sent in one write several
// buffers long, then EXEC.
func TestArgumentsOutliveTheirBuffer(t *testing.T) {
	s, _ := start(t, newFakeKV(), nil, nil)
	c := dialRaw(t, s)
	var in strings.Builder
	in.WriteString("MULTI\r\n")
	const n = 600
	for i := range n {
		switch i % 3 {
		case 0:
			fmt.Fprintf(&in, "*3\r\n$3\r\nSET\r\n$%d\r\nk%d\r\n$%d\r\nv%d\r\n", len(fmt.Sprint(i))+1, i, len(fmt.Sprint(i))+1, i)
		case 1:
			fmt.Fprintf(&in, "SET k%d v%d\r\n", i, i)
		default:
			fmt.Fprintf(&in, "SET \"k%d\" 'v\\t%d'\r\n", i, i)
		}
	}
	if in.Len() < 3*readChunk {
		t.Fatalf("%d bytes: not several buffers", in.Len())
	}
	in.WriteString("EXEC\r\n")
	if _, err := c.c.Write([]byte(in.String())); err != nil {
		t.Fatal(err)
	}
	for i := range n + 1 {
		want := "+QUEUED"
		if i == 0 {
			want = "+OK"
		}
		if got := c.reply(t); got != want {
			t.Fatalf("reply %d: %q, want %q", i, got, want)
		}
	}
	if got := c.reply(t); got != "*["+strings.TrimSuffix(strings.Repeat("+OK ", n), " ")+"]" {
		t.Fatalf("EXEC: %q", got)
	}
	for i := range n {
		want := fmt.Sprint("$v", i)
		if i%3 == 2 {
			want = fmt.Sprint("$v\t", i)
		}
		if got := c.do(t, "GET", fmt.Sprint("k", i)); got != want {
			t.Fatalf("GET k%d: %q, want %q", i, got, want)
		}
	}
}

// A connection's read buffer grows with what it sent, not with the length
// its bulk header announces: a client that announced a 1 MiB argument and
// sent 20 KB of it holds less than four times that.
func TestReadBufferGrowsWithWhatArrived(t *testing.T) {
	sent := "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1048576\r\n" + strings.Repeat("v", 20_000)
	r := reader{nc: byteConn{r: strings.NewReader(sent), most: 1 << 20}, now: time.Now,
		scan: testScan}
	for {
		if _, err := r.next(); err != nil {
			break
		}
	}
	if len(r.buf) > 4*len(sent) {
		t.Fatalf("read buffer %d bytes for %d bytes sent of a 1 MiB argument", len(r.buf), len(sent))
	}
}

// sentAhead sees bytes the client sent that the reader has not served:
// none on a quiet socket, those waiting in the socket (asked without
// reading them), and a partial command already read.
func TestSentAhead(t *testing.T) {
	client, r := socketReader(t)
	if r.raw == nil {
		t.Fatal("no socket under a Unix connection")
	}
	if r.sentAhead() {
		t.Fatal("sent ahead on a quiet socket")
	}
	if _, err := client.Write([]byte("*1\r\n$4\r\nPING\r\n*1")); err != nil {
		t.Fatal(err)
	}
	if !r.sentAhead() {
		t.Fatal("bytes waiting in the socket not seen")
	}
	// The look did not take them: the reader reads the whole PING, and
	// the partial command after it is still ahead.
	if n, err := r.next(); err != nil || n != 1 || fmt.Sprintf("%s", r.command(0)) != "[PING]" {
		t.Fatalf("next = %d, %v, want the PING", n, err)
	}
	if !r.sentAhead() {
		t.Fatal("a partial command read is not seen as sent ahead")
	}
	// With no socket to ask, only what was read counts.
	if (&reader{}).sentAhead() {
		t.Fatal("sent ahead with nothing read and no socket")
	}
}

// socketReader is a reader (as the server makes one: its socket at hand,
// draining pipelines) on one end of a Unix socket pair and the client's
// end. A write on the pair is in the peer's socket when it returns, so
// what the tests wrote is there to be seen.
func socketReader(t *testing.T) (net.Conn, *reader) {
	t.Helper()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	conn := func(fd int) net.Conn {
		f := os.NewFile(uintptr(fd), "pair")
		defer f.Close()
		c, err := net.FileConn(f)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	client, nc := conn(fds[0]), conn(fds[1])
	return client, &reader{nc: nc, raw: rawConn(nc), drain: true, now: time.Now,
		scan: testScan}
}

// A pipeline longer than the reader's first read is taken whole, so that
// what waits at its replies' write was sent after it.
func TestPipelineReadWhole(t *testing.T) {
	client, r := socketReader(t)
	const cmds = 400 // 400 x 31 bytes: three times the first read's 4 KiB
	if _, err := client.Write([]byte(strings.Repeat("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n", cmds))); err != nil {
		t.Fatal(err)
	}
	if n, err := r.next(); err != nil || n != cmds {
		t.Fatalf("next = %d, %v; want the whole pipeline, %d commands", n, err, cmds)
	}
	if r.sentAhead() {
		t.Fatal("sent ahead after the whole pipeline was read")
	}
}
