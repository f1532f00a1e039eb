package resp

import "fmt"

// Request size limits are enforced on the bytes as they arrive, before any
// command is parsed: a reader that buffers a whole command before it looks
// at it would read, and try to hold, whatever a client sends after a bulk
// header of 2^40 bytes. frameScanner follows the framing, header by
// header, and skips over payloads; at the first header over a limit the
// connection gets one error reply and is closed before that payload is
// read (reader.go). It also tells the reader where whole commands end, so
// that only those are parsed.

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
// ("GET k\r\n").
type frameScanner struct {
	lim   frameLimits
	state scanState
	line  [maxHeaderLine]byte // the header line being read
	n     int                 // bytes in line, or of the inline line so far
	args  int                 // bulk strings still due in this command
	skip  int                 // payload bytes (with CRLF) still due
	// badCRLF: the byte after a payload was not '\r'.
	badCRLF bool
	size    int // bytes of this command so far
	// ended is the offset in scan's bytes just after the last command
	// they completed, -1 if they completed none.
	ended int
}

// refusal is the error reply sent for a request over a limit or malformed.
type refusal string

// errInvalidBulkLength refuses a malformed bulk string header, or a
// payload not followed by CRLF.
const errInvalidBulkLength = refusal("ERR Protocol error: invalid bulk length")

func (r refusal) Error() string { return string(r) }

// scan follows b, the next bytes of the stream. It returns nil, or the
// refusal for the first request over a limit together with how many bytes
// of b come before that request's offending header: those may hold whole
// commands to serve before refusing.
func (f *frameScanner) scan(b []byte) (int, error) {
	f.ended = -1
	for i := 0; i < len(b); {
		if f.state == inBulkData {
			if f.skip > 2 { // payload
				n := min(f.skip-2, len(b)-i)
				f.skip -= n
				i += n
				continue
			}
			// The CRLF after it, checked once both bytes are in, as
			// TideKV's first reader checked it: a client is refused at
			// the byte it was refused at before.
			if f.skip == 2 {
				f.badCRLF = b[i] != '\r'
			} else if f.badCRLF || b[i] != '\n' {
				return i, errInvalidBulkLength
			}
			f.skip--
			i++
			if f.skip == 0 {
				f.args--
				f.state = atBulk
				if f.args == 0 {
					f.state, f.ended = atCommand, i
				}
			}
			continue
		}
		if err := f.step(b[i]); err != nil {
			return i, err
		}
		i++
		if f.state == atCommand {
			f.ended = i // an inline line's '\n'
		}
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
		return tooManyArgs(n, f.lim.args)
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

// tooManyArgs refuses a command of n arguments, over most: an array by its
// header (here), an inline line once it is split (reader.go).
func tooManyArgs(n int64, most int) error {
	return refusal(fmt.Sprintf("ERR Protocol error: command of %d arguments is too large (the maximum is %d arguments)", n, most))
}

// badLength is Redis's reply to a malformed length.
func (f *frameScanner) badLength() error {
	if f.state == inArrayHeader {
		return refusal("ERR Protocol error: invalid multibulk length")
	}
	return errInvalidBulkLength
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
