package transport

import (
	"bufio"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/tidekv/tidekv/api/tidekvpb"
)

// Raft batches travel on a connection of their own to each peer, as
// length-prefixed protobuf frames (a 4-byte little-endian length, then a
// RaftMessageBatch): one write per batch on the sending goroutine and one
// read loop per connection that hands messages to the store, where a
// gRPC stream adds HTTP/2 framing, flow-control frames and a hand-off to
// gRPC's writer and reader goroutines on every batch
// (docs/benchmarks/cost.md, "Raft frames beside gRPC").
//
// The connection shares the node's gRPC port. The dialer writes
// frameMagic first, in plaintext; Listen hands every connection that does
// not start with it to gRPC untouched. On a secure node the connection
// then turns TLS with the node certificates, the listener requiring a
// verified client certificate that Config.Authorize accepts (a node's)
// before it reads a frame, so the port checks credentials on both paths.
// The listener answers frameMagic once it accepts the connection. A peer
// that does not (a node from before frames: its gRPC server drops the
// connection on the bad preface) gets a gRPC stream instead, so nodes of
// both kinds replicate to each other.
//
// Messages carry no checksum of their own on either path: TCP's (and
// TLS's record MAC) cover them, as under gRPC. Snapshots stay on gRPC
// streams with their end-to-end CRC-32C (checksum.go).

const (
	frameMagic = "TKVRAFT1"
	// maxFrame bounds a frame as gRPC bounds a message (conn's options).
	maxFrame = 64 << 20
	// frameHandshakeTimeout bounds the magic, TLS and the answer.
	frameHandshakeTimeout = 10 * time.Second
)

// errNoFrames says the peer does not accept frame connections.
var errNoFrames = errors.New("peer does not accept Raft frames")

// Listen returns a listener for the gRPC server on lis: it serves frame
// connections itself and passes every other connection on. Closing it
// closes lis and the frame connections it accepted.
func (t *GRPC) Listen(lis net.Listener) net.Listener {
	m := &muxListener{Listener: lis, t: t, conns: make(chan net.Conn), done: make(chan struct{}), frames: map[net.Conn]struct{}{}}
	go m.acceptLoop()
	return m
}

type muxListener struct {
	net.Listener
	t     *GRPC
	conns chan net.Conn // for gRPC
	done  chan struct{}
	once  sync.Once

	mu     sync.Mutex
	err    error                 // Accept's error once the loop stopped
	frames map[net.Conn]struct{} // frame connections being served
}

func (m *muxListener) acceptLoop() {
	for backoff := 5 * time.Millisecond; ; {
		c, err := m.Listener.Accept()
		if err != nil {
			// Out of descriptors and the like: wait, as gRPC's Serve does.
			if ne, ok := err.(interface{ Temporary() bool }); ok && ne.Temporary() {
				select {
				case <-time.After(backoff):
					backoff = min(2*backoff, time.Second)
					continue
				case <-m.done:
				}
			}
			m.mu.Lock()
			m.err = err
			m.mu.Unlock()
			m.Close()
			return
		}
		backoff = 5 * time.Millisecond
		go m.classify(c)
	}
}

// classify reads as much of frameMagic as the connection's first bytes
// match and serves frames or hands the connection, those bytes put back,
// to gRPC. HTTP/2's preface and a TLS ClientHello differ from the
// magic's first byte, so gRPC's connections are passed on after one read.
func (m *muxListener) classify(c net.Conn) {
	_ = c.SetReadDeadline(time.Now().Add(frameHandshakeTimeout))
	var b [len(frameMagic)]byte
	n := 0
	for n < len(b) {
		k, err := c.Read(b[n:])
		if err != nil {
			c.Close()
			return
		}
		if string(b[n:n+k]) != frameMagic[n:n+k] {
			n += k
			_ = c.SetReadDeadline(time.Time{})
			select {
			case m.conns <- &prefixConn{Conn: c, pre: b[:n]}:
			case <-m.done:
				c.Close()
			}
			return
		}
		n += k
	}
	if !m.track(c, true) {
		c.Close()
		return
	}
	defer m.track(c, false)
	m.t.serveFrames(c)
}

// track adds or removes a frame connection; false: the listener closed.
func (m *muxListener) track(c net.Conn, add bool) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !add {
		delete(m.frames, c)
		return true
	}
	select {
	case <-m.done:
		return false
	default:
	}
	m.frames[c] = struct{}{}
	return true
}

func (m *muxListener) Accept() (net.Conn, error) {
	select {
	case c := <-m.conns:
		return c, nil
	case <-m.done:
		m.mu.Lock()
		defer m.mu.Unlock()
		if m.err != nil {
			return nil, m.err
		}
		return nil, net.ErrClosed
	}
}

func (m *muxListener) Close() error {
	var err error
	m.once.Do(func() {
		m.mu.Lock()
		close(m.done)
		for c := range m.frames {
			c.Close()
		}
		m.mu.Unlock()
		err = m.Listener.Close()
	})
	return err
}

// prefixConn is a connection whose first bytes were already read.
type prefixConn struct {
	net.Conn
	pre []byte
}

func (c *prefixConn) Read(p []byte) (int, error) {
	if len(c.pre) > 0 {
		n := copy(p, c.pre)
		c.pre = c.pre[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}

// serveFrames accepts a frame connection whose magic was read and hands
// its messages to the handler until it closes.
func (t *GRPC) serveFrames(c net.Conn) {
	defer c.Close()
	if t.cfg.ServerTLS != nil {
		cfg := t.cfg.ServerTLS.Clone()
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
		tc := tls.Server(c, cfg)
		if err := tc.Handshake(); err != nil {
			log.Printf("raft frames from %s refused: %v", c.RemoteAddr(), err)
			return
		}
		if err := t.cfg.Authorize(tc.ConnectionState()); err != nil {
			log.Printf("raft frames from %s refused: %v", c.RemoteAddr(), err)
			return
		}
		c = tc
	}
	if _, err := io.WriteString(c, frameMagic); err != nil {
		return
	}
	_ = c.SetDeadline(time.Time{})
	r := bufio.NewReaderSize(c, 64<<10)
	var hdr [4]byte
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return
		}
		n := binary.LittleEndian.Uint32(hdr[:])
		if n > maxFrame {
			log.Printf("raft frames from %s: a frame of %d bytes exceeds %d; closing", c.RemoteAddr(), n, maxFrame)
			return
		}
		// A body per frame: the decoded entries alias it (decodeBatch).
		body := make([]byte, n)
		if _, err := io.ReadFull(r, body); err != nil {
			return
		}
		msgs, err := decodeBatch(body)
		if err != nil {
			log.Printf("raft frames from %s: %v; closing", c.RemoteAddr(), err)
			return
		}
		t.deliver(msgs)
	}
}

// frameSender writes batches to one peer's frame connection.
type frameSender struct {
	c   net.Conn
	t   *GRPC
	buf []byte
}

// dialFrames opens a frame connection to addr: errNoFrames if the peer
// answered but not as a frame listener (then a gRPC stream serves).
func (t *GRPC) dialFrames(addr string) (*frameSender, error) {
	c, err := net.DialTimeout("tcp", addr, frameHandshakeTimeout)
	if err != nil {
		return nil, err
	}
	_ = c.SetDeadline(time.Now().Add(frameHandshakeTimeout))
	if err := t.frameHandshake(&c, addr); err != nil {
		c.Close()
		return nil, fmt.Errorf("%w: %v", errNoFrames, err)
	}
	_ = c.SetDeadline(time.Time{})
	if !t.trackFrames(c, true) {
		c.Close()
		return nil, errStopped
	}
	// Nothing more is read after the answer; a read that returns means the
	// peer closed (it restarted), so the next write fails at once instead
	// of going into a dead socket.
	go func() {
		var b [1]byte
		_, _ = c.Read(b[:])
		c.Close()
	}()
	return &frameSender{c: c, t: t}, nil
}

var errStopped = errors.New("transport stopped")

// trackFrames adds or removes an open frame connection to a peer; false:
// the transport stopped.
func (t *GRPC) trackFrames(c net.Conn, add bool) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !add {
		delete(t.frames, c)
		return true
	}
	select {
	case <-t.stopper:
		return false
	default:
	}
	t.frames[c] = struct{}{}
	return true
}

// frameHandshake writes the magic, turns *c TLS on a secure node and
// reads the listener's answer.
func (t *GRPC) frameHandshake(c *net.Conn, addr string) error {
	if _, err := io.WriteString(*c, frameMagic); err != nil {
		return err
	}
	if t.cfg.TLS != nil {
		cfg := t.cfg.TLS.Clone()
		if cfg.ServerName == "" {
			// As gRPC's TLS credentials do: the peer's certificate must
			// name the host dialled.
			host, _, err := net.SplitHostPort(addr)
			if err != nil {
				return err
			}
			cfg.ServerName = host
		}
		tc := tls.Client(*c, cfg)
		if err := tc.Handshake(); err != nil {
			return err
		}
		*c = tc
	}
	var b [len(frameMagic)]byte
	if _, err := io.ReadFull(*c, b[:]); err != nil {
		return err
	}
	if string(b[:]) != frameMagic {
		return fmt.Errorf("answered %q", b[:])
	}
	return nil
}

func (f *frameSender) send(b *tidekvpb.RaftMessageBatch) error {
	var err error
	f.buf = append(f.buf[:0], 0, 0, 0, 0)
	if f.buf, err = (proto.MarshalOptions{}).MarshalAppend(f.buf, b); err != nil {
		return err
	}
	if len(f.buf)-4 > maxFrame {
		return fmt.Errorf("a batch of %d bytes exceeds the frame limit %d", len(f.buf)-4, maxFrame)
	}
	binary.LittleEndian.PutUint32(f.buf, uint32(len(f.buf)-4))
	_, err = f.c.Write(f.buf)
	if cap(f.buf) > 1<<20 {
		f.buf = nil // a snapshot-sized batch's buffer is not kept
	}
	return err
}

func (f *frameSender) close() {
	f.c.Close()
	f.t.trackFrames(f.c, false)
}
