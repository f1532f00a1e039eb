package resp

import (
	"errors"
	"log"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/tidwall/redcon"
)

// Output limits. redcon collects every reply to what it read in one go and
// writes them after the handler returns, with no write deadline: a client
// that pipelines GETs of large values and never reads would have the node
// hold all their replies, and a goroutine blocked in Write, for ever. So
// the handler writes replies into a replyBuffer of its own, which writes
// them out whenever they reach MaxOutputBuffer and when the pipeline is
// served, each write with OutputTimeout as its deadline. A client that does
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

// replyBuffer is the redcon.Conn commands write their replies to.
type replyBuffer struct {
	redcon.Conn
	s  *Server
	st *connState
	b  []byte // the replies after those in bufs
	// bufs: earlier replies, copied runs and big bulks by reference.
	bufs   net.Buffers
	out    net.Buffers // what flush is writing
	n      int         // bytes in bufs and b
	failed bool        // a write failed; the connection is closed
}

func (r *replyBuffer) WriteString(str string) { r.add(redcon.AppendString(r.b, str)) }

func (r *replyBuffer) WriteBulk(bulk []byte) {
	if len(bulk) < bigBulk || r.failed {
		r.add(redcon.AppendBulk(r.b, bulk))
		return
	}
	head := strconv.AppendInt(append(r.b, '$'), int64(len(bulk)), 10)
	r.bufs = append(r.bufs, append(head, '\r', '\n'), bulk)
	r.n += len(r.bufs[len(r.bufs)-2]) - len(r.b) + len(bulk)
	r.b = nil // the run is in bufs now
	r.add(append(r.b, '\r', '\n'))
}

func (r *replyBuffer) WriteBulkString(bulk string) { r.add(redcon.AppendBulkString(r.b, bulk)) }
func (r *replyBuffer) WriteInt(num int)            { r.add(redcon.AppendInt(r.b, int64(num))) }
func (r *replyBuffer) WriteInt64(num int64)        { r.add(redcon.AppendInt(r.b, num)) }
func (r *replyBuffer) WriteUint64(num uint64)      { r.add(redcon.AppendUint(r.b, num)) }
func (r *replyBuffer) WriteError(msg string)       { r.add(redcon.AppendError(r.b, msg)) }
func (r *replyBuffer) WriteArray(count int)        { r.add(appendArray(r.b, count, r.st.resp3)) }
func (r *replyBuffer) WriteNull()                  { r.add(appendNull(r.b, r.st.resp3)) }
func (r *replyBuffer) WriteRaw(data []byte)        { r.add(append(r.b, data...)) }
func (r *replyBuffer) WriteAny(v interface{})      { r.add(redcon.AppendAny(r.b, v)) }

// Close writes the replies so far (QUIT's OK) before closing.
func (r *replyBuffer) Close() error {
	r.flush()
	r.st.cmds.close()
	return r.Conn.Close()
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
	nc := r.NetConn()
	_ = nc.SetWriteDeadline(time.Now().Add(r.s.cfg.OutputTimeout))
	total := r.n
	// r.bufs keeps its array for the next flush; WriteTo consumes the
	// header in r.out (a field, so that taking its address allocates
	// nothing).
	r.bufs = append(r.bufs, r.b)
	r.out = r.bufs
	n, err := r.out.WriteTo(nc)
	// No deadline between writes: redcon's own (empty) flush after the
	// handler would fail on an expired one.
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
				r.RemoteAddr(), n, total, r.s.cfg.OutputTimeout, ReasonOutputBuffer)
		}
	}
	r.st.cmds.close()
	_ = r.Conn.Close()
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
