package resp

import (
	"errors"
	"log"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
)

// Output limits. A client that pipelines GETs of large values and never
// reads must not have the node hold all their replies, nor a goroutine
// blocked in Write for ever. So commands write their replies into the
// connection's replyBuffer, which writes them out whenever they reach
// MaxOutputBuffer and when the pipeline is served, each write with
// OutputTimeout as its deadline. A client that does
// not take the bytes within it (the kernel's socket buffer is full) is
// disconnected. The node then holds at most MaxOutputBuffer plus one reply
// per connection, plus the values of one read batch (readBatch); the rest
// waits in the socket buffer, outside the node's heap.

// Disconnect reasons, for Server.Disconnects.
const (
	// ReasonMaxConns: a connection beyond MaxConns.
	ReasonMaxConns = "max_connections"
	// ReasonRequestLimit: a request over MaxBulkLen, MaxArgs, MaxInlineLen
	// or MaxCommandLen, or malformed.
	ReasonRequestLimit = "request_limit"
	// ReasonOutputBuffer: a client that did not take its replies within
	// OutputTimeout.
	ReasonOutputBuffer = "output_buffer"
)

// DisconnectReasons lists the Reason constants.
var DisconnectReasons = []string{ReasonMaxConns, ReasonRequestLimit, ReasonOutputBuffer}

// keepReplyCap is the largest reply buffer kept for a connection's next
// pipeline; a larger one is dropped, so an idle client holds little.
const keepReplyCap = 256 << 10

// bigBulk is the size from which a bulk reply is kept by reference, not
// copied: a value read for the client is then held once, not twice.
const bigBulk = 64 << 10

// replyConn is what a command writes its replies to: its connection's
// replyBuffer, or EXEC's txnReplies (multi.go), which collects the queued
// commands' replies. The Write methods append one reply (or an array's
// header) each, encoded by the append functions below.
type replyConn interface {
	WriteError(msg string)
	WriteString(str string)
	WriteBulk(bulk []byte)
	WriteBulkString(bulk string)
	WriteInt(num int)
	WriteInt64(num int64)
	WriteUint64(num uint64)
	WriteArray(count int)
	WriteNull()
	WriteRaw(data []byte)
	// RemoteAddr is the client's address, NetConn its connection.
	RemoteAddr() string
	NetConn() net.Conn
	// Close writes the replies so far (QUIT's OK) and closes the
	// connection.
	Close() error
}

// replyBuffer is the replyConn of a connection.
type replyBuffer struct {
	nc   net.Conn
	addr string
	s    *Server
	st   *connState
	b    []byte // the replies after those in bufs
	// bufs: earlier replies, copied runs and big bulks by reference.
	bufs   net.Buffers
	out    net.Buffers // what flush is writing
	n      int         // bytes in bufs and b
	failed bool        // a write failed; the connection is closed
}

func (r *replyBuffer) RemoteAddr() string { return r.addr }
func (r *replyBuffer) NetConn() net.Conn  { return r.nc }

func (r *replyBuffer) WriteString(str string) { r.add(appendString(r.b, str)) }

func (r *replyBuffer) WriteBulk(bulk []byte) {
	if len(bulk) < bigBulk || r.failed {
		r.add(appendBulk(r.b, bulk))
		return
	}
	head := strconv.AppendInt(append(r.b, '$'), int64(len(bulk)), 10)
	r.bufs = append(r.bufs, append(head, '\r', '\n'), bulk)
	r.n += len(r.bufs[len(r.bufs)-2]) - len(r.b) + len(bulk)
	r.b = nil // the run is in bufs now
	r.add(append(r.b, '\r', '\n'))
}

func (r *replyBuffer) WriteBulkString(bulk string) { r.add(appendBulkString(r.b, bulk)) }
func (r *replyBuffer) WriteInt(num int)            { r.add(appendInt(r.b, ':', int64(num))) }
func (r *replyBuffer) WriteInt64(num int64)        { r.add(appendInt(r.b, ':', num)) }
func (r *replyBuffer) WriteUint64(num uint64)      { r.add(appendUint(r.b, num)) }
func (r *replyBuffer) WriteError(msg string) {
	r.st.errors++
	if strings.HasPrefix(msg, "TRYAGAIN ") || strings.HasPrefix(msg, "OOM ") {
		r.st.refusals++
	}
	r.s.stats.errorReplied(msg)
	r.add(appendError(r.b, msg))
}
func (r *replyBuffer) WriteArray(count int) { r.add(appendArray(r.b, count, r.st.resp3)) }
func (r *replyBuffer) WriteNull()           { r.add(appendNull(r.b, r.st.resp3)) }
func (r *replyBuffer) WriteRaw(data []byte) { r.add(append(r.b, data...)) }

// Close writes the replies so far (QUIT's OK) before closing.
func (r *replyBuffer) Close() error {
	r.flush()
	r.st.cmds.close()
	return r.nc.Close()
}

// done writes the pipeline's last replies and lets go of a large buffer.
func (r *replyBuffer) done() {
	r.flush()
	if cap(r.b) > keepReplyCap {
		r.b = nil
	}
}

func (r *replyBuffer) add(b []byte) {
	if r.failed {
		return
	}
	r.n += len(b) - len(r.b)
	r.b = b
	if r.n >= r.s.cfg.MaxOutputBuffer {
		r.flush()
	}
}

// flush writes the buffered replies, giving the client OutputTimeout to
// take them; if it does not, the connection is closed and the rest of its
// pipeline dropped.
func (r *replyBuffer) flush() {
	if r.failed || r.n == 0 {
		return
	}
	nc := r.nc
	_ = nc.SetWriteDeadline(time.Now().Add(r.s.cfg.OutputTimeout))
	total := r.n
	var n int64
	var err error
	if len(r.bufs) == 0 {
		// The usual case, small replies only: one write(2).
		var m int
		m, err = nc.Write(r.b)
		n = int64(m)
	} else {
		// r.bufs keeps its array for the next flush; WriteTo (writev)
		// consumes the header in r.out (a field, so that taking its
		// address allocates nothing).
		r.bufs = append(r.bufs, r.b)
		r.out = r.bufs
		n, err = r.out.WriteTo(nc)
	}
	// Cleared rather than left to expire: on a TLS connection a read
	// may write too (tls.Conn answers a client's key update from Read).
	_ = nc.SetWriteDeadline(time.Time{})
	clear(r.bufs[:cap(r.bufs)]) // let go of the values
	r.bufs, r.b, r.n = r.bufs[:0], r.b[:0], 0
	if err == nil {
		return
	}
	r.failed, r.st.quit = true, true
	if errors.Is(err, os.ErrDeadlineExceeded) {
		r.s.disconnected(ReasonOutputBuffer)
		if r.s.loggedSlow.CompareAndSwap(false, true) {
			log.Printf("resp: disconnected client %s: it took %d of %d reply bytes in %v (the output buffer limit; later disconnects are only counted, tidekv_redis_disconnects_total{reason=%q})",
				r.addr, n, total, r.s.cfg.OutputTimeout, ReasonOutputBuffer)
		}
	}
	r.st.cmds.close()
	_ = r.nc.Close()
}

// readBatch is how many values one read asks for on behalf of a client:
// as many values of the largest size as fit in MaxOutputBuffer (at least
// one, at most MaxBatchKeys), so that what is read for a slow client is
// bounded like its replies.
func (s *Server) readBatch() int {
	return min(s.cfg.MaxBatchKeys, max(1, s.cfg.MaxOutputBuffer/s.cfg.MaxBulkLen))
}

func (s *Server) disconnected(reason string) { s.disconnects[reason].Add(1) }

// Disconnects returns how many connections were closed for reason (one of
// the Reason constants).
func (s *Server) Disconnects(reason string) uint64 {
	if c := s.disconnects[reason]; c != nil {
		return c.Load()
	}
	return 0
}

// The encoding of RESP2's replies (resp3.go adds RESP3's types). Simple
// strings and errors are one line: a CR or LF in one is sent as a space.

// appendInt appends a header or an integer reply: kind '*', '$' or ':'
// and n.
func appendInt(b []byte, kind byte, n int64) []byte {
	b = strconv.AppendInt(append(b, kind), n, 10)
	return append(b, '\r', '\n')
}

func appendUint(b []byte, n uint64) []byte {
	b = strconv.AppendUint(append(b, ':'), n, 10)
	return append(b, '\r', '\n')
}

func appendBulk(b []byte, bulk []byte) []byte {
	b = appendInt(b, '$', int64(len(bulk)))
	return append(append(b, bulk...), '\r', '\n')
}

func appendBulkString(b []byte, bulk string) []byte {
	b = appendInt(b, '$', int64(len(bulk)))
	return append(append(b, bulk...), '\r', '\n')
}

func appendString(b []byte, s string) []byte { return appendLine(append(b, '+'), s) }
func appendError(b []byte, s string) []byte  { return appendLine(append(b, '-'), s) }

// appendLine appends s and CRLF, with any CR or LF in s as a space.
func appendLine(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '\r' || c == '\n' {
			c = ' '
		}
		b = append(b, c)
	}
	return append(b, '\r', '\n')
}
