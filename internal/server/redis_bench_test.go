package server

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
)

// BenchmarkRESPGet measures a GET of a 1000-byte value through the Redis
// front end of the key's leaseholder: the command's parsing, the Redis
// gateway, the KV path (admission, routing to the replica, the read,
// metrics) and the reply, over an in-memory connection. Its allocs/op
// include the client's side, which allocates nothing per command.
func BenchmarkRESPGet(b *testing.B) {
	conn, key := benchRESP(b, false)
	cmd := respCommand("GET", key)
	want := []byte("$1000\r\n")
	b.ReportAllocs()
	for b.Loop() {
		if reply := conn.do(b, cmd); !bytes.HasPrefix(reply, want) {
			b.Fatalf("GET: %q", reply[:min(len(reply), 64)])
		}
	}
}

// BenchmarkRESPSet measures a SET of 1000 bytes through the Redis front
// end of the key's leaseholder, through Raft and the apply on the
// in-memory engine (as BenchmarkLeaseholderPut, for the same reason).
func BenchmarkRESPSet(b *testing.B) {
	conn, key := benchRESP(b, true)
	cmd := respCommand("SET", key, make([]byte, 1000))
	b.ReportAllocs()
	for b.Loop() {
		if reply := conn.do(b, cmd); string(reply) != "+OK\r\n" {
			b.Fatalf("SET: %q", reply)
		}
	}
}

// benchRESP starts a 1-node cluster whose Redis front end serves an
// in-memory listener and returns a connection to it and the key that
// benchNode wrote.
func benchRESP(b *testing.B, inMemory bool) (*respConn, []byte) {
	ln := newPipeListener()
	_, key := benchNode(b, func(c *Config) {
		c.InMemory = inMemory
		c.Redis.ListenAddr, c.Redis.Listener = "pipe", ln
	})
	c, err := ln.dial()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	return &respConn{c: c, r: bufio.NewReaderSize(c, 64<<10), reply: make([]byte, 0, 64<<10)}, key
}

// respCommand encodes a command as a RESP array of bulk strings.
func respCommand(args ...any) []byte {
	out := fmt.Appendf(nil, "*%d\r\n", len(args))
	for _, a := range args {
		var arg []byte
		switch a := a.(type) {
		case string:
			arg = []byte(a)
		case []byte:
			arg = a
		}
		out = fmt.Appendf(out, "$%d\r\n", len(arg))
		out = append(append(out, arg...), "\r\n"...)
	}
	return out
}

// respConn is a minimal Redis client that reuses its buffers, so that a
// benchmark's allocations are the node's.
type respConn struct {
	c     net.Conn
	r     *bufio.Reader
	reply []byte
}

// do sends cmd and returns its reply (a simple string, an error or a bulk
// string), valid until the next call.
func (c *respConn) do(b *testing.B, cmd []byte) []byte {
	if _, err := c.c.Write(cmd); err != nil {
		b.Fatal(err)
	}
	line, err := c.r.ReadSlice('\n')
	if err != nil {
		b.Fatal(err)
	}
	c.reply = append(c.reply[:0], line...)
	if line[0] != '$' || line[1] == '-' {
		return c.reply
	}
	n := 0
	for _, d := range line[1 : len(line)-2] {
		n = n*10 + int(d-'0')
	}
	start := len(c.reply)
	c.reply = append(c.reply, make([]byte, n+2)...)[:start+n+2]
	if _, err := io.ReadFull(c.r, c.reply[start:]); err != nil {
		b.Fatal(err)
	}
	return c.reply
}

// pipeListener hands out the server ends of in-memory connections.
type pipeListener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

// dial returns the client end of a new connection.
func (l *pipeListener) dial() (net.Conn, error) {
	client, server := net.Pipe()
	select {
	case l.conns <- server:
		return client, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return pipeAddr{} }

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "pipe" }
