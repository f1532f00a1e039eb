package resp

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"time"
)

// Request size limits are enforced on the bytes as they arrive, in front of
// redcon: redcon buffers a whole command before it parses any of it (its
// read buffer doubles until the command fits), so a bulk header of 2^40
// bytes would have it read, and try to hold, whatever the client sends.
// frameScanner follows the framing itself, header by header, and skips
// over payloads without keeping them; at the first header over a limit the
// connection gets one error reply and is closed before that payload is
// read.

// frameLimits are the limits frameScanner enforces (see Config).
type frameLimits struct {
	bulk, args, inline, command int
}

// maxHeaderLine is the longest "*<n>\r" or "$<n>\r" header line after its
// first byte: a sign, 18 digits and the '\r' (parseLength's bound). A longer
// one is malformed.
const maxHeaderLine = 20

type scanState uint8

const (
	atCommand     scanState = iota // next byte starts a command
	inInline                       // an inline command line ("GET k\r\n")
	inArrayHeader                  // after '*', up to '\n'
	atBulk                         // next byte must be the '$' of a bulk string
	inBulkHeader                   // after '$', up to '\n'
	inBulkData                     // a bulk string's payload and its CRLF
)

// frameScanner follows the framing of a stream of RESP requests: arrays of
// bulk strings ("*2\r\n$3\r\nGET\r\n$1\r\nk\r\n") or inline lines
// ("GET k\r\n"), as redcon accepts them.
type frameScanner struct {
	lim   frameLimits
	state scanState
	line  [maxHeaderLine]byte // the header line being read
	n     int                 // bytes in line, or of the inline line so far
	args  int                 // bulk strings still due in this command
	skip  int                 // payload bytes (with CRLF) still due
	size  int                 // bytes of this command so far
}

// refusal is the error reply sent for a request over a limit or malformed.
type refusal string

func (r refusal) Error() string { return string(r) }

// scan follows b, the next bytes of the stream. It returns nil, or the
// refusal for the first request over a limit together with how many bytes
// of b come before that request's offending header: those may hold whole
// commands to serve before refusing.
func (f *frameScanner) scan(b []byte) (int, error) {
	for i := 0; i < len(b); {
		if f.state == inBulkData {
			n := min(f.skip, len(b)-i)
			f.skip -= n
			i += n
			if f.skip == 0 {
				f.args--
				f.state = atBulk
				if f.args == 0 {
					f.state = atCommand
				}
			}
			continue
		}
		if err := f.step(b[i]); err != nil {
			return i, err
		}
		i++
	}
	return len(b), nil
}

// step consumes one byte outside a bulk payload.
func (f *frameScanner) step(c byte) error {
	f.size++
	switch f.state {
	case atCommand:
		f.size, f.n = 1, 0
		if c == '*' {
			f.state = inArrayHeader
			return nil
		}
		f.state = inInline
		return f.inlineByte(c)
	case inInline:
		return f.inlineByte(c)
	case atBulk:
		if c != '$' {
			return refusal(fmt.Sprintf("ERR Protocol error: expected '$', got '%c'", c))
		}
		f.state, f.n = inBulkHeader, 0
		return nil
	}
	// A header line: inArrayHeader or inBulkHeader.
	if c != '\n' {
		if f.n == len(f.line) {
			return f.badLength()
		}
		f.line[f.n] = c
		f.n++
		return nil
	}
	v, ok := parseLength(f.line[:f.n])
	if !ok {
		return f.badLength()
	}
	if f.state == inArrayHeader {
		return f.arrayHeader(v)
	}
	return f.bulkHeader(v)
}

func (f *frameScanner) inlineByte(c byte) error {
	if c == '\n' {
		f.state = atCommand
		return nil
	}
	if f.n++; f.n > f.lim.inline {
		return refusal(fmt.Sprintf("ERR Protocol error: inline command is too large (the maximum is %d bytes)", f.lim.inline))
	}
	return nil
}

func (f *frameScanner) arrayHeader(n int64) error {
	switch {
	case n <= 0:
		return f.badLength()
	case n > int64(f.lim.args):
		return refusal(fmt.Sprintf("ERR Protocol error: command of %d arguments is too large (the maximum is %d arguments)", n, f.lim.args))
	}
	f.args, f.state = int(n), atBulk
	return nil
}

func (f *frameScanner) bulkHeader(n int64) error {
	switch {
	case n < 0:
		return f.badLength()
	case n > int64(f.lim.bulk):
		return refusal(fmt.Sprintf("ERR Protocol error: bulk string of %d bytes is too large (the maximum is %d bytes)", n, f.lim.bulk))
	case int64(f.size)+n+2 > int64(f.lim.command):
		return refusal(fmt.Sprintf("ERR Protocol error: command of more than %d bytes is too large (the maximum is %d bytes)", f.lim.command, f.lim.command))
	}
	f.skip, f.size, f.state = int(n)+2, f.size+int(n)+2, inBulkData
	return nil
}

// badLength is redcon's (and Redis's) reply to a malformed length.
func (f *frameScanner) badLength() error {
	if f.state == inArrayHeader {
		return refusal("ERR Protocol error: invalid multibulk length")
	}
	return refusal("ERR Protocol error: invalid bulk length")
}

// parseLength parses the "<n>\r" of a header line.
func parseLength(b []byte) (int64, bool) {
	if len(b) < 2 || b[len(b)-1] != '\r' {
		return 0, false
	}
	b = b[:len(b)-1]
	neg := b[0] == '-'
	if neg {
		b = b[1:]
	}
	if len(b) == 0 || len(b) > 18 { // 18 digits cannot overflow an int64
		return 0, false
	}
	var v int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int64(c-'0')
	}
	if neg {
		v = -v
	}
	return v, true
}

// errRefused ends a connection after its refusal was sent.
var errRefused = errors.New("resp: request refused")

// drainFor bounds how long a refused connection is read (and discarded)
// before it is closed.
const drainFor = time.Second

// guardedConn checks the requests read from a client connection with a
// frameScanner. Only the goroutine serving the connection reads it (or,
// while its command blocks, watch's, which it waits for), and redcon
// reads again only after flushing every reply so far, so a refusal can be
// written straight to the connection in Read.
type guardedConn struct {
	net.Conn
	scan    frameScanner
	refused error // held back while the commands before it are served
	counted *atomic.Uint64
	// ahead, aheadErr: what watch (blocked.go) read while a command
	// blocked, and the error that ended its reading, for Read to give
	// first.
	ahead    []byte
	aheadErr error
	// readAt is when the last bytes were read, by now: the arrival of
	// the commands they complete (Arrival).
	readAt time.Time
	now    func() time.Time
}

func (g *guardedConn) Read(p []byte) (int, error) {
	if g.refused != nil {
		return 0, g.refuse()
	}
	var n int
	var err error
	if len(g.ahead) > 0 || g.aheadErr != nil {
		n, err = g.readAhead(p)
	} else {
		n, err = g.Conn.Read(p)
	}
	if n > 0 {
		g.readAt = g.now()
	}
	ok, ferr := g.scan.scan(p[:n])
	if ferr == nil {
		return n, err
	}
	g.refused = ferr
	if ok > 0 {
		return ok, nil
	}
	return 0, g.refuse()
}

// refuse sends the refusal, then stops writing and discards what the client
// is still sending, for at most drainFor, before the caller closes: closing
// with unread input would reset the connection, and the client could lose
// the reply. Nothing read here is kept.
func (g *guardedConn) refuse() error {
	g.counted.Add(1)
	_ = g.Conn.SetWriteDeadline(time.Now().Add(drainFor))
	_, _ = io.WriteString(g.Conn, "-"+g.refused.Error()+"\r\n")
	if cw, ok := g.Conn.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
	_ = g.Conn.SetReadDeadline(time.Now().Add(drainFor))
	_, _ = io.Copy(io.Discard, g.Conn)
	return errRefused
}

// guardedListener hands out guardedConns.
type guardedListener struct {
	net.Listener
	lim     frameLimits
	refused *atomic.Uint64 // counts refused connections
	now     func() time.Time
}

func (l guardedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &guardedConn{Conn: c, scan: frameScanner{lim: l.lim}, counted: l.refused, now: l.now}, nil
}
