package scenario

// ecstore's load generators: open-loop senders over gRPC and over the
// Redis protocol, sharing one schedule and one recorder, and a closed-loop
// calibration that finds what the nodes serve at saturation.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/client"
)

// ecsOp is one request: a read or a write of key.
type ecsOp struct {
	write bool
	key   []byte
}

// ecsOutcome classifies an answer.
type ecsOutcome int

const (
	ecsOK ecsOutcome = iota
	ecsRejected
	ecsTimedOut
	ecsOther
)

// ecsRecorder collects a step's answers.
type ecsRecorder struct {
	offered, ok, rejected, dropped, timeouts, other atomic.Int64

	mu       sync.Mutex
	lat, svc []time.Duration // served: from the scheduled send, from the actual send
	rej      []time.Duration // refused: from the actual send
	firstErr string
}

func (r *ecsRecorder) record(sched, sent time.Time, o ecsOutcome, errText string) {
	done := time.Now()
	switch o {
	case ecsOK:
		r.ok.Add(1)
	case ecsRejected:
		r.rejected.Add(1)
	case ecsTimedOut:
		r.timeouts.Add(1)
		return
	default:
		r.other.Add(1)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	switch o {
	case ecsOK:
		r.lat, r.svc = append(r.lat, done.Sub(sched)), append(r.svc, done.Sub(sent))
	case ecsRejected:
		r.rej = append(r.rej, done.Sub(sent))
	default:
		if r.firstErr == "" {
			r.firstErr = errText
		}
	}
}

// ecsSender sends requests to the nodes; issue must not block (false: the
// sender's own bound is reached and the request is dropped).
type ecsSender interface {
	issue(node int, op ecsOp, sched time.Time) bool
	// wait returns once every issued request is answered or timed out.
	wait()
}

// ecsSchedule offers rate requests/s to each node for d, open loop: request
// i of a node is due at start+i/rate whatever happened to the earlier ones.
func ecsSchedule(ctx context.Context, nodes int, rate float64, d time.Duration, seed uint64, choose func(n int, r *rand.Rand) ecsOp, snd ecsSender, rec *ecsRecorder) {
	start := time.Now()
	interval := float64(time.Second) / rate
	var wg sync.WaitGroup
	for n := range nodes {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(seed, uint64(n)+1))
			var sent int64
			for ctx.Err() == nil {
				now := time.Now()
				if now.Sub(start) >= d {
					return
				}
				for due := int64(float64(now.Sub(start))/interval) + 1; sent < due; sent++ {
					rec.offered.Add(1)
					if !snd.issue(n, choose(n, r), start.Add(time.Duration(float64(sent)*interval))) {
						rec.dropped.Add(1)
					}
				}
				// Timers are coarse: at high rates requests leave in small bursts.
				if w := time.Until(start.Add(time.Duration(float64(sent) * interval))); w > 0 {
					time.Sleep(w)
				}
			}
		})
	}
	wg.Wait()
	snd.wait()
}

// ecsCalls sends each request as its own call (a raw gRPC call or one of
// the Go client's), at most ecsMaxOutstanding per node.
type ecsCalls struct {
	ctx         context.Context
	call        ecsCall
	rec         *ecsRecorder
	outstanding []atomic.Int64
	wg          sync.WaitGroup
}

// ecsCall sends op to node n.
type ecsCall func(ctx context.Context, n int, op ecsOp) error

func newECSCalls(ctx context.Context, nodes int, call ecsCall, rec *ecsRecorder) *ecsCalls {
	return &ecsCalls{ctx: ctx, call: call, rec: rec, outstanding: make([]atomic.Int64, nodes)}
}

func (g *ecsCalls) issue(n int, op ecsOp, sched time.Time) bool {
	if g.outstanding[n].Load() >= ecsMaxOutstanding {
		return false
	}
	g.outstanding[n].Add(1)
	g.wg.Go(func() {
		defer g.outstanding[n].Add(-1)
		ctx, cancel := context.WithDeadline(g.ctx, sched.Add(ecsTimeout))
		defer cancel()
		sent := time.Now()
		err := g.call(ctx, n, op)
		o, text := ecsClassify(err)
		g.rec.record(sched, sent, o, text)
	})
	return true
}

func (g *ecsCalls) wait() { g.wg.Wait() }

// ecsRawCall sends raw gRPC calls, round robin over a node's connections:
// a client that knows nothing of admission.
func ecsRawCall(conns [][]*grpc.ClientConn, value []byte) ecsCall {
	var kv [][]tidekvpb.KVClient
	for _, nc := range conns {
		var kvs []tidekvpb.KVClient
		for _, cc := range nc {
			kvs = append(kvs, tidekvpb.NewKVClient(cc))
		}
		kv = append(kv, kvs)
	}
	var next atomic.Uint64
	return func(ctx context.Context, n int, op ecsOp) error {
		c := kv[n][next.Add(1)%uint64(len(kv[n]))]
		if op.write {
			_, err := c.Put(ctx, &tidekvpb.PutRequest{Key: op.key, Value: value})
			return err
		}
		_, err := c.Get(ctx, &tidekvpb.GetRequest{Key: op.key, ReadMode: tidekvpb.ReadMode_ANY})
		return err
	}
}

// ecsClientCall sends through the Go client, which routes to the key's
// leaseholder (node n, by construction) and keeps to the share of
// requests an overloaded node admits.
func ecsClientCall(cl *client.Client, value []byte) ecsCall {
	return func(ctx context.Context, _ int, op ecsOp) error {
		if op.write {
			return cl.Put(ctx, op.key, value)
		}
		_, err := cl.Get(ctx, op.key)
		return err
	}
}

// ecsClassify sorts a gRPC answer.
func ecsClassify(err error) (ecsOutcome, string) {
	switch {
	case err == nil:
		return ecsOK, ""
	case errors.Is(err, client.ErrOverloaded) || ecsOverloaded(err):
		return ecsRejected, ""
	case status.Code(err) == codes.DeadlineExceeded || errors.Is(err, context.DeadlineExceeded):
		return ecsTimedOut, ""
	}
	return ecsOther, err.Error()
}

// ecsOverloaded reports whether err is a node's "overloaded, retry".
func ecsOverloaded(err error) bool {
	st, ok := status.FromError(err)
	if !ok {
		return false
	}
	for _, d := range st.Details() {
		if ed, ok := d.(*tidekvpb.ErrorDetail); ok {
			return ed.GetKind() == tidekvpb.ErrorKind_OVERLOADED
		}
	}
	return st.Code() == codes.ResourceExhausted
}

// ecsRESP sends each request on a free connection of its node's pool, one
// request per connection at a time, as independent clients do. A request
// due while every connection is busy waits in the node's queue (the wait
// counts from its schedule, not from its send) and is dropped when
// ecsMaxOutstanding already wait.
type ecsRESP struct {
	queues []chan ecsOpAt
	conns  []net.Conn
	value  []byte
	rec    *ecsRecorder
	wg     sync.WaitGroup
}

type ecsOpAt struct {
	op    ecsOp
	sched time.Time
}

func newECSRESP(addrs []string, perNode int, value []byte, rec *ecsRecorder) (*ecsRESP, error) {
	r := &ecsRESP{value: value, rec: rec}
	for _, a := range addrs {
		q := make(chan ecsOpAt, ecsMaxOutstanding)
		r.queues = append(r.queues, q)
		for range perNode {
			c, err := net.Dial("tcp", a)
			if err != nil {
				r.wait()
				return nil, err
			}
			r.conns = append(r.conns, c)
			r.wg.Go(func() { r.serve(c, q) })
		}
	}
	return r, nil
}

func (r *ecsRESP) issue(n int, op ecsOp, sched time.Time) bool {
	select {
	case r.queues[n] <- ecsOpAt{op: op, sched: sched}:
		return true
	default:
		return false
	}
}

// serve sends the queue's requests on c, one at a time.
func (r *ecsRESP) serve(c net.Conn, q chan ecsOpAt) {
	w, br := bufio.NewWriter(c), bufio.NewReader(c)
	broken := false
	for req := range q {
		if broken || time.Now().After(req.sched.Add(ecsTimeout)) {
			r.rec.record(req.sched, time.Now(), ecsTimedOut, "")
			continue
		}
		sent := time.Now()
		_ = c.SetDeadline(req.sched.Add(ecsTimeout))
		ecsEncode(w, req.op, r.value)
		o, text := ecsOther, ""
		err := w.Flush()
		if err == nil {
			o, text, err = ecsReadReply(br)
		}
		if err != nil { // the reply may still come: the connection is done
			broken = true
			c.Close()
			if o != ecsTimedOut {
				o, text = ecsOther, err.Error()
			}
		}
		r.rec.record(req.sched, sent, o, text)
	}
}

// wait closes the queues, lets the connections answer what is queued,
// then closes them.
func (r *ecsRESP) wait() {
	for _, q := range r.queues {
		close(q)
	}
	r.wg.Wait()
	for _, c := range r.conns {
		c.Close()
	}
}

// ecsRESPPipe sends each request the moment it is due on its node's
// connections in turn, pipelined behind those not yet answered, as an
// open-loop client with a few connections does: what the node cannot serve
// waits on the node's side of the connection, where its admission measures
// it, rather than in the generator. A connection whose reply does not come
// within ecsTimeout of its schedule is given up, with every request
// pipelined behind it.
type ecsRESPPipe struct {
	conns [][]*ecsPipeConn
	next  []atomic.Uint64
	value []byte
	rec   *ecsRecorder
	wg    sync.WaitGroup
}

type ecsPipeConn struct {
	c  net.Conn
	mu sync.Mutex // orders sends with their place in pending
	w  *bufio.Writer
	// pending are the requests sent and not yet answered, in order.
	pending chan ecsPipeSent
}

type ecsPipeSent struct{ sched, sent time.Time }

func newECSRESPPipe(addrs []string, perNode int, value []byte, rec *ecsRecorder) (*ecsRESPPipe, error) {
	r := &ecsRESPPipe{value: value, rec: rec, next: make([]atomic.Uint64, len(addrs))}
	for _, a := range addrs {
		var node []*ecsPipeConn
		for range perNode {
			c, err := net.Dial("tcp", a)
			if err != nil {
				r.conns = append(r.conns, node)
				r.wait()
				return nil, err
			}
			pc := &ecsPipeConn{c: c, w: bufio.NewWriter(c), pending: make(chan ecsPipeSent, ecsMaxOutstanding/perNode)}
			node = append(node, pc)
			r.wg.Go(func() { r.read(pc) })
		}
		r.conns = append(r.conns, node)
	}
	return r, nil
}

func (r *ecsRESPPipe) issue(n int, op ecsOp, sched time.Time) bool {
	pc := r.conns[n][r.next[n].Add(1)%uint64(len(r.conns[n]))]
	pc.mu.Lock()
	defer pc.mu.Unlock()
	select {
	case pc.pending <- ecsPipeSent{sched: sched, sent: time.Now()}:
	default:
		return false
	}
	_ = pc.c.SetWriteDeadline(sched.Add(ecsTimeout))
	ecsEncode(pc.w, op, r.value)
	_ = pc.w.Flush() // a failed send shows as its reply's failure
	return true
}

// read records the replies of pc's requests in order.
func (r *ecsRESPPipe) read(pc *ecsPipeConn) {
	br := bufio.NewReader(pc.c)
	var failed error
	for s := range pc.pending {
		if failed != nil {
			r.rec.record(s.sched, time.Now(), ecsTimedOut, "")
			continue
		}
		_ = pc.c.SetReadDeadline(s.sched.Add(ecsTimeout))
		o, text, err := ecsReadReply(br)
		if err != nil { // the replies' order is lost: the connection is done
			failed = err
			pc.c.Close()
		}
		r.rec.record(s.sched, s.sent, o, text)
	}
}

// wait ends the sends, lets the replies come, then closes the connections.
func (r *ecsRESPPipe) wait() {
	for _, node := range r.conns {
		for _, pc := range node {
			close(pc.pending)
		}
	}
	r.wg.Wait()
	for _, node := range r.conns {
		for _, pc := range node {
			pc.c.Close()
		}
	}
}

// ecsEncode writes op as a RESP command.
func ecsEncode(w *bufio.Writer, op ecsOp, value []byte) {
	bulk := func(b []byte) {
		w.WriteString("$" + strconv.Itoa(len(b)) + "\r\n")
		w.Write(b)
		w.WriteString("\r\n")
	}
	if op.write {
		w.WriteString("*3\r\n")
		bulk([]byte("SET"))
		bulk(op.key)
		bulk(value)
		return
	}
	w.WriteString("*2\r\n")
	bulk([]byte("GET"))
	bulk(op.key)
}

// ecsReadReply reads one reply to GET or SET; err says the connection
// can no longer be read.
func ecsReadReply(br *bufio.Reader) (ecsOutcome, string, error) {
	line, err := br.ReadString('\n')
	if err != nil {
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			return ecsTimedOut, "", err
		}
		return ecsOther, err.Error(), err
	}
	line = strings.TrimRight(line, "\r\n")
	switch {
	case line == "":
		return ecsOther, "empty reply", nil
	case line[0] == '-':
		if strings.Contains(line, "overloaded") {
			return ecsRejected, "", nil
		}
		return ecsOther, line[1:], nil
	case line[0] == '$':
		n, err := strconv.Atoi(line[1:])
		if err != nil {
			return ecsOther, "bad bulk header " + line, err
		}
		if n >= 0 {
			if _, err := br.Discard(n + 2); err != nil {
				return ecsOther, err.Error(), err
			}
		}
	}
	return ecsOK, "", nil
}

// ecsCalibrate runs workers closed-loop requests per node for d and
// returns what they were served, per node per second.
func ecsCalibrate(ctx context.Context, d time.Duration, workers int, nodes int, choose func(n int, r *rand.Rand) ecsOp, do func(n, w int, op ecsOp) error) float64 {
	var ok atomic.Int64
	var wg sync.WaitGroup
	end := time.Now().Add(d)
	for n := range nodes {
		for w := range workers {
			wg.Go(func() {
				r := rand.New(rand.NewPCG(uint64(n), uint64(w)))
				for ctx.Err() == nil && time.Now().Before(end) {
					if do(n, w, choose(n, r)) == nil {
						ok.Add(1)
					} else {
						// A refused worker waits as a polite client would, so
						// that refusals do not eat what it measures.
						time.Sleep(5 * time.Millisecond)
					}
				}
			})
		}
	}
	wg.Wait()
	return float64(ok.Load()) / d.Seconds() / float64(nodes)
}

// ecsRESPDo returns a closed-loop call per (node, worker) over its own
// connection, and a closer.
func ecsRESPDo(addrs []string, workers int, value []byte) (func(n, w int, op ecsOp) error, func(), error) {
	type conn struct {
		c  net.Conn
		w  *bufio.Writer
		br *bufio.Reader
	}
	conns := make([][]conn, len(addrs))
	closeAll := func() {
		for _, nc := range conns {
			for _, c := range nc {
				c.c.Close()
			}
		}
	}
	for n, a := range addrs {
		for range workers {
			c, err := net.Dial("tcp", a)
			if err != nil {
				closeAll()
				return nil, nil, err
			}
			conns[n] = append(conns[n], conn{c: c, w: bufio.NewWriter(c), br: bufio.NewReader(c)})
		}
	}
	do := func(n, w int, op ecsOp) error {
		c := conns[n][w]
		_ = c.c.SetDeadline(time.Now().Add(ecsTimeout))
		ecsEncode(c.w, op, value)
		if err := c.w.Flush(); err != nil {
			return err
		}
		if o, text, _ := ecsReadReply(c.br); o != ecsOK {
			return fmt.Errorf("outcome %d: %s", o, text)
		}
		return nil
	}
	return do, closeAll, nil
}

// ecsSorted returns d sorted.
func ecsSorted(d []time.Duration) []time.Duration {
	slices.Sort(d)
	return d
}
