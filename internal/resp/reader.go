package resp

import (
	"bytes"
	"errors"
	"io"
	"math"
	"net"
	"os"
	"sync/atomic"
	"syscall"
	"time"
)

// The request reader. A connection reads into a buffer of its own, checks
// what arrives with its frameScanner (limits.go: the limits, at each
// header, before a payload is read), and parses only whole commands: RESP
// arrays of bulk strings and inline lines. A command's arguments are
// slices of that buffer, not copies, and they outlive the read: a MULTI's
// queue holds them, and so may a KV the values it is given
// (TestArgumentsOutliveTheirRead). So bytes once parsed are never written
// again: the reader appends to its buffer until it is nearly full, then
// moves what is unparsed to a new one, and the old one lives as long as
// arguments in it do. Commands that do not keep their arguments (nearly
// all) cost an allocation per readChunk bytes of requests, not per
// command.

// readChunk is the size of a connection's read buffer; a command larger
// than one gets a buffer that fits it.
const readChunk = 4 << 10

// minRead is the least free space a read is given: with less left in the
// buffer, the next read goes to a new one.
const minRead = 512

// maxPipelineRead bounds the bytes next takes from the socket, beyond its
// first read, for one pipeline: a client's pipeline up to it is served
// whole.
const maxPipelineRead = 64 << 10

// keepArgs is the most argument slots a connection keeps between
// pipelines; a pipeline of more lets its larger array go.
const keepArgs = 4 << 10

// errUnbalancedQuotes refuses an inline line that does not parse, in
// Redis's words. The scanner refuses every other malformed request itself.
const errUnbalancedQuotes = refusal("ERR Protocol error: unbalanced quotes in request")

// argSpan is one command's arguments: reader.args[lo:hi].
type argSpan struct{ lo, hi int }

// reader reads a connection's requests. Only the goroutine serving the
// connection uses it, or, while its command blocks, watch's, which that
// goroutine waits for.
type reader struct {
	nc net.Conn
	// raw is nc's socket (under TLS, the socket beneath), nil where there
	// is none: sentAhead asks it whether bytes are waiting.
	raw  syscall.RawConn
	scan frameScanner
	// buf[start:parsed] are whole commands the scanner passed,
	// buf[parsed:end] what was read after them. Nothing before start is
	// written again (above).
	buf                []byte
	start, parsed, end int
	// refused: the refusal of the request after parsed (over a limit or
	// malformed), held back while the commands before it are served.
	refused error
	// err ended the reading (the connection closed), after what was read.
	err error
	// args and cmds are the commands parsed last (command), reused.
	args [][]byte
	cmds []argSpan
	// readAt is when the commands parsed last were read (Arrival); ahead:
	// watch read bytes while a command blocked, which arrive when they
	// are taken up, not when they were read.
	readAt time.Time
	ahead  bool
	// lastFull: the last read filled the room it was given; drain: bytes
	// waiting in raw are nc's own to read (not TLS, whose read of a
	// record's first bytes would wait for the rest).
	lastFull, drain bool
	// paced: the client sent the commands read next after it had every
	// earlier reply (Paced); the serving loop sets it before it writes a
	// pipeline's replies (sentAhead), true on a new connection.
	paced bool
	now   func() time.Time
	// counted counts refused connections.
	counted *atomic.Uint64
}

// next parses the whole commands read, reading until there is one, and
// reports how many it parsed (command gives them). It returns 0 and an
// error when the connection is done: a refusal (refuse then answers it)
// or the read's error.
func (r *reader) next() (int, error) {
	for r.parsed == r.start {
		if r.refused != nil {
			return 0, r.refused
		}
		if r.err != nil {
			return 0, r.err
		}
		r.fill(math.MaxInt)
	}
	// A read that filled its buffer may have left the rest of the same
	// write in the socket: take it now, up to maxPipelineRead, so that a
	// client's pipeline is served whole and what waits at the replies'
	// write was sent after it (sentAhead).
	for r.drain && r.lastFull && r.err == nil && r.refused == nil && r.end-r.start < maxPipelineRead && r.waiting() {
		r.fill(maxPipelineRead - (r.end - r.start))
	}
	if r.ahead {
		r.ahead, r.readAt = false, r.now()
	}
	return r.parse(), nil
}

// sentAhead reports whether the client has sent bytes the node has not
// served yet, looked at before the replies to everything before them are
// written: read already (a partial command, or commands a blocked one
// read ahead), or waiting in the socket. Such bytes were sent ahead of
// the replies (an open loop, or a pipeline deeper than one read); a
// client that waits for its replies cannot have sent any. One system
// call; false where there is no socket to ask.
func (r *reader) sentAhead() bool {
	return r.end > r.start || r.waiting()
}

// waiting reports whether bytes wait in the socket, without reading them
// (false where there is no socket to ask).
func (r *reader) waiting() bool {
	if r.raw == nil {
		return false
	}
	var b [1]byte
	n := 0
	_ = r.raw.Read(func(fd uintptr) bool {
		n, _, _ = syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		return true // never wait: an empty socket is the answer
	})
	return n > 0
}

// command is the arguments of the i-th command parsed last, at least one,
// valid until the next parse; the arguments themselves stay valid
// (above).
func (r *reader) command(i int) [][]byte {
	s := r.cmds[i]
	return r.args[s.lo:s.hi:s.hi]
}

// fill reads once into buf, at most most bytes, checks what it read and
// reports how many bytes it read.
func (r *reader) fill(most int) int {
	if len(r.buf)-r.end < minRead || (r.start == r.end && len(r.buf) > readChunk) {
		r.renew()
	}
	p := r.buf[r.end:]
	if len(p) > most {
		p = p[:most]
	}
	n, err := r.nc.Read(p)
	r.lastFull = n == len(p)
	if n > 0 {
		r.readAt = r.now()
		_, ferr := r.scan.scan(r.buf[r.end : r.end+n])
		if r.scan.ended >= 0 {
			r.parsed = r.end + r.scan.ended
		}
		r.end += n
		if ferr != nil {
			r.refused = ferr
		}
	}
	if err != nil {
		r.err = err
	}
	return n
}

// renew moves what is unparsed to a new buffer at least twice its size.
// It grows with the bytes that arrived, never with a length a header
// announced: sized for a bulk string's whole payload up front, a
// connection that sent a "$536870912" header and 4 KiB held the payload's
// size, so max-connections such connections held connections × the bulk
// limit for a few KiB each. Doubling copies a large argument about twice
// over in all.
func (r *reader) renew() {
	pending := r.end - r.start
	buf := make([]byte, max(readChunk, pending+minRead, 2*pending))
	copy(buf, r.buf[r.start:r.end])
	r.buf, r.parsed, r.end = buf, r.parsed-r.start, pending
	r.start = 0
}

// parse parses buf[start:parsed] into args and cmds. A command the
// scanner passed that does not parse (an inline line's unbalanced quotes)
// becomes the refusal, after the commands before it.
func (r *reader) parse() int {
	if cap(r.args) > keepArgs || cap(r.cmds) > keepArgs {
		r.args, r.cmds = nil, nil
	}
	r.args, r.cmds = r.args[:0], r.cmds[:0]
	b := r.buf[:r.parsed]
	for i := r.start; i < len(b); {
		lo := len(r.args)
		var err error
		if b[i] == '*' {
			i, err = r.parseArray(b, i)
		} else {
			i, err = r.parseInline(b, i)
		}
		if err != nil {
			r.args, r.refused = r.args[:lo], err
			break
		}
		if len(r.args) > lo {
			r.cmds = append(r.cmds, argSpan{lo, len(r.args)})
		}
	}
	r.start = r.parsed
	return len(r.cmds)
}

// header parses the "<n>\r\n" after b[i] ('*' or '$') and returns n and
// the index after the line.
func header(b []byte, i int) (int, int, error) {
	nl := bytes.IndexByte(b[i:], '\n')
	if nl < 0 {
		return 0, 0, errInvalidBulkLength
	}
	n, ok := parseLength(b[i+1 : i+nl])
	if !ok || n < 0 {
		return 0, 0, errInvalidBulkLength
	}
	return int(n), i + nl + 1, nil
}

// parseArray parses the array at b[i] ("*2\r\n$3\r\nGET\r\n$1\r\nk\r\n").
// The scanner passed its headers and CRLFs; they are checked again, not
// trusted, so that the two disagreeing could never index past the buffer.
func (r *reader) parseArray(b []byte, i int) (int, error) {
	n, i, err := header(b, i)
	for ; err == nil && n > 0; n-- {
		if i >= len(b) || b[i] != '$' {
			return 0, errInvalidBulkLength
		}
		var size int
		if size, i, err = header(b, i); err != nil {
			return 0, err
		}
		end := i + size
		if end+2 > len(b) || b[end] != '\r' || b[end+1] != '\n' {
			return 0, errInvalidBulkLength
		}
		// Capped, so that appending to one argument never writes over
		// the next.
		r.args = append(r.args, b[i:end:end])
		i = end + 2
	}
	return i, err
}

// parseInline parses the inline command line at b[i] ("SET k v\r\n"),
// close to Redis and unchanged since TideKV's first reader, so that what
// clients sent before still means the same: arguments split by spaces; an
// argument in double or single quotes may hold spaces and the escapes \n,
// \r and \t (a backslash keeps any other byte); a quote inside an unquoted
// argument, or a closing one not followed by a space or the end, is
// unbalanced. An empty line is no command. Quoted arguments are unescaped
// in place: the bytes are read already, and an argument is never longer
// than its quoted form. A line of more arguments than MaxArgs is refused
// as an array of them is: the scanner bounds only its bytes.
func (r *reader) parseInline(b []byte, i int) (int, error) {
	lo := len(r.args)
	nl := i + bytes.IndexByte(b[i:], '\n')
	end := nl
	if end > i && b[end-1] == '\r' {
		end--
	}
	for p := i; p < end; {
		switch c := b[p]; c {
		case ' ':
			p++
		case '"', '\'':
			w, q, escaped := p, p+1, false
			for ; q < end && (escaped || b[q] != c); q++ {
				d := b[q]
				switch {
				case escaped:
					escaped = false
					switch d {
					case 'n':
						d = '\n'
					case 'r':
						d = '\r'
					case 't':
						d = '\t'
					}
				case d == '\\':
					escaped = true
					continue
				}
				b[w] = d
				w++
			}
			if q == end || (q+1 < end && b[q+1] != ' ') {
				return 0, errUnbalancedQuotes
			}
			r.args = append(r.args, b[p:w:w])
			p = q + 1
		default:
			s := p
			for ; p < end && b[p] != ' '; p++ {
				if b[p] == '"' || b[p] == '\'' {
					return 0, errUnbalancedQuotes
				}
			}
			r.args = append(r.args, b[s:p:p])
		}
	}
	if n := len(r.args) - lo; n > r.scan.lim.args {
		return 0, tooManyArgs(int64(n), r.scan.lim.args)
	}
	return nl + 1, nil
}

// errRefused ends a connection after its refusal was sent.
var errRefused = errors.New("resp: request refused")

// drainFor bounds how long a refused connection is read (and discarded)
// before it is closed.
const drainFor = time.Second

// refuse sends the refusal, then stops writing and discards what the client
// is still sending, for at most drainFor, before the caller closes: closing
// with unread input would reset the connection, and the client could lose
// the reply. The replies before it were written (the pipeline's flush).
func (r *reader) refuse() error {
	r.counted.Add(1)
	_ = r.nc.SetWriteDeadline(time.Now().Add(drainFor))
	_, _ = io.WriteString(r.nc, "-"+r.refused.Error()+"\r\n")
	if cw, ok := r.nc.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
	_ = r.nc.SetReadDeadline(time.Now().Add(drainFor))
	_, _ = io.Copy(io.Discard, r.nc)
	return errRefused
}

// maxReadAhead bounds what is read from a blocked client's connection:
// the connection is read between pipelines, so while a command blocks it
// is read here, to see it close. What the client sends meanwhile is kept
// for the pipelines after it; past this much the reading stops, and a
// close is then seen only when the command ends.
const maxReadAhead = 4 << 10

// watch reads the connection ahead until stop; gone closes if it ends.
func (r *reader) watch() (gone <-chan struct{}, stop func()) {
	closed, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for read := 0; read < maxReadAhead && r.refused == nil; {
			n := r.fill(maxReadAhead - read)
			read += n
			r.ahead = r.ahead || n > 0
			if r.err != nil {
				if errors.Is(r.err, os.ErrDeadlineExceeded) {
					r.err = nil
				} else {
					close(closed)
				}
				return
			}
		}
	}()
	return closed, func() {
		// A deadline in the past ends the read under way.
		_ = r.nc.SetReadDeadline(time.Unix(1, 0))
		<-done
		_ = r.nc.SetReadDeadline(time.Time{})
	}
}
