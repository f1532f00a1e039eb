package redisdiff

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"
)

// Reply is one RESP2 or RESP3 reply.
type Reply struct {
	// Kind is the reply's type byte: RESP2's '+', '-', ':', '$' and '*',
	// RESP3's '%' (map), '~' (set), ',' (double), '_' (null), '#'
	// (boolean), '=' (verbatim string) and '(' (big number).
	Kind byte
	// Str is a simple string's, an error's, an integer's or a bulk
	// string's text.
	Str string
	// Nil: a null bulk string or a null array.
	Nil bool
	// Elems are an array's or a set's elements, a map's keys and values
	// alternately.
	Elems []Reply
}

// String renders r on one line: +OK, -ERR ..., :1, "bulk" (Go-quoted),
// (nil), [a b] for an array, (nil array); RESP3's map %{k v}, set ~[a b],
// double ,1.5, null _, verbatim ="txt:...".
func (r Reply) String() string {
	switch {
	case r.Kind == '$' && r.Nil:
		return "(nil)"
	case r.Kind == '$':
		return strconv.Quote(r.Str)
	case r.Kind == '=':
		return "=" + strconv.Quote(r.Str)
	case r.Kind == '*' && r.Nil:
		return "(nil array)"
	case r.Kind == '*':
		return "[" + r.joined() + "]"
	case r.Kind == '~':
		return "~[" + r.joined() + "]"
	case r.Kind == '%':
		return "%{" + r.joined() + "}"
	}
	return string(r.Kind) + r.Str
}

func (r Reply) joined() string {
	parts := make([]string, len(r.Elems))
	for i, e := range r.Elems {
		parts[i] = e.String()
	}
	return strings.Join(parts, " ")
}

// sameShape reports whether a and b are the same kinds of reply with
// arrays of the same lengths, whatever their values.
func sameShape(a, b Reply) bool {
	if a.Kind != b.Kind || a.Nil != b.Nil || len(a.Elems) != len(b.Elems) {
		return false
	}
	for i := range a.Elems {
		if !sameShape(a.Elems[i], b.Elems[i]) {
			return false
		}
	}
	return true
}

// conn is one client connection, one command at a time.
type conn struct {
	c net.Conn
	r *bufio.Reader
}

func dial(addr string) (*conn, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	return &conn{c: c, r: bufio.NewReader(c)}, nil
}

func (c *conn) close() { c.c.Close() }

// do sends one command and reads its reply.
func (c *conn) do(args ...string) (Reply, error) {
	_ = c.c.SetDeadline(time.Now().Add(10 * time.Second))
	var sb strings.Builder
	fmt.Fprintf(&sb, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&sb, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := io.WriteString(c.c, sb.String()); err != nil {
		return Reply{}, err
	}
	return readReply(c.r)
}

func readReply(r *bufio.Reader) (Reply, error) {
	l, err := r.ReadString('\n')
	if err != nil {
		return Reply{}, err
	}
	l = strings.TrimSuffix(l, "\r\n")
	if l == "" {
		return Reply{}, fmt.Errorf("empty reply line")
	}
	rep := Reply{Kind: l[0], Str: l[1:]}
	switch rep.Kind {
	case '+', '-', ':', ',', '#', '(':
		return rep, nil
	case '_':
		rep.Nil = true
		return rep, nil
	case '$', '*', '%', '~', '=':
	default:
		return Reply{}, fmt.Errorf("unknown reply type %q", l)
	}
	n, err := strconv.Atoi(rep.Str)
	if err != nil {
		return Reply{}, fmt.Errorf("bad length in %q", l)
	}
	rep.Str = ""
	if n < 0 {
		rep.Nil = true
		return rep, nil
	}
	if rep.Kind == '$' || rep.Kind == '=' {
		b := make([]byte, n+2)
		if _, err := io.ReadFull(r, b); err != nil {
			return Reply{}, err
		}
		rep.Str = string(b[:n])
		return rep, nil
	}
	if rep.Kind == '%' {
		n *= 2
	}
	rep.Elems = make([]Reply, n)
	for i := range rep.Elems {
		if rep.Elems[i], err = readReply(r); err != nil {
			return Reply{}, err
		}
	}
	return rep, nil
}
