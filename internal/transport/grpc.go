package transport

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/tidekv/tidekv/api/tidekvpb"
)

// Handler receives traffic addressed to this node.
type Handler interface {
	HandleRaftMessage(m *tidekvpb.RaftMessage)
	HandleSnapshot(header *tidekvpb.RaftMessage, sst io.Reader) error
}

// Resolver maps a node ID to its gRPC address.
type Resolver func(nodeID uint64) (string, bool)

// Config tunes the gRPC transport.
type Config struct {
	// QueueSize bounds messages queued per destination node; beyond it
	// messages are dropped (Raft retransmits).
	QueueSize int
	// MaxBatch caps messages sent in one batch.
	MaxBatch int
	// ReconnectBackoff is the wait after a failed connection attempt.
	ReconnectBackoff time.Duration
	// SnapshotChunkSize is the bytes per snapshot chunk.
	SnapshotChunkSize int
	// Delays, if set, emulates WAN latency: traffic from node A to node B
	// leaves Delays.Get(A, B) after it was sent, A and B being the
	// message's FromNodeId and ToNodeId (so the transport needs no node ID
	// of its own). Messages waiting out their delay occupy the destination
	// queue, so QueueSize must cover message rate × delay. One table may be
	// shared by every node's transport. nil costs nothing.
	Delays *Delays
	// Partition, if set, loses traffic to and from the peers it cuts (fault
	// injection; the server sets it only with fault injection on). nil
	// costs nothing.
	Partition *Partition
	// Credentials secure connections to other nodes (TLS with this node's
	// certificate, which the peer checks); nil dials plaintext.
	Credentials credentials.TransportCredentials
	// TLS is Credentials' configuration for frame connections
	// (frames.go); nil dials them plaintext. Set with Credentials.
	TLS *tls.Config
	// ServerTLS, if set, makes frame connections to this node TLS with a
	// client certificate verified against its CAs, and Authorize decides
	// which verified certificates may send Raft traffic (a node's).
	ServerTLS *tls.Config
	Authorize func(tls.ConnectionState) error
}

// DefaultConfig returns settings for a local cluster.
func DefaultConfig() Config {
	return Config{QueueSize: 8192, MaxBatch: 512, ReconnectBackoff: 200 * time.Millisecond, SnapshotChunkSize: 1 << 20}
}

// Validate rejects unusable settings.
func (c Config) Validate() error {
	if c.QueueSize <= 0 || c.MaxBatch <= 0 || c.ReconnectBackoff <= 0 || c.SnapshotChunkSize <= 0 {
		return errors.New("transport: all settings must be positive")
	}
	if c.ServerTLS != nil && c.Authorize == nil {
		return errors.New("transport: ServerTLS needs Authorize: any certificate its CAs signed would pass")
	}
	if (c.TLS == nil) != (c.Credentials == nil) {
		return errors.New("transport: TLS and Credentials secure peers' frame connections and gRPC streams: set both or neither")
	}
	return nil
}

// GRPC sends Raft messages as frames (frames.go; a gRPC stream to a node
// without them) and snapshots over gRPC, and serves the Raft service.
type GRPC struct {
	tidekvpb.UnimplementedRaftServer
	cfg     Config
	resolve Resolver
	handler Handler
	mu      sync.Mutex
	queues  map[uint64]*sendQueue
	conns   map[string]*grpc.ClientConn
	// frames are the open frame connections to peers, closed by Stop
	// (a write blocked on a peer that stopped reading ends with them).
	frames   map[net.Conn]struct{}
	stopper  chan struct{}
	stopOnce sync.Once
	// batchesSent counts the batches sent (one frame or stream message
	// each, whatever it carries): how many writes and reads of a socket
	// Raft traffic costs (docs/benchmarks/cost.md, "The floor of the
	// pieces we keep").
	batchesSent atomic.Uint64
}

// BatchesSent is the number of message batches sent to peers so far.
func (t *GRPC) BatchesSent() uint64 { return t.batchesSent.Load() }

type sendQueue struct {
	ch chan queued
}

// queued is a message in a send queue, stamped on enqueue with when it may
// leave (Delays clock units; 0: at once). The queue is thus a delay line:
// every message waits out its own delay concurrently with the others.
type queued struct {
	m   *tidekvpb.RaftMessage
	due int64
}

// NewGRPC creates the transport; handler receives incoming traffic.
func NewGRPC(cfg Config, resolve Resolver, handler Handler) (*GRPC, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &GRPC{cfg: cfg, resolve: resolve, handler: handler, queues: map[uint64]*sendQueue{}, conns: map[string]*grpc.ClientConn{}, frames: map[net.Conn]struct{}{}, stopper: make(chan struct{})}, nil
}

// SetHandler sets the receiver of incoming traffic (the store is created
// after the transport).
func (t *GRPC) SetHandler(h Handler) {
	t.mu.Lock()
	t.handler = h
	t.mu.Unlock()
}

func (t *GRPC) getHandler() Handler {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.handler
}

// Register adds the Raft service to a gRPC server.
func (t *GRPC) Register(s *grpc.Server) { tidekvpb.RegisterRaftServer(s, t) }

// Stop closes connections and stops senders.
func (t *GRPC) Stop() {
	t.stopOnce.Do(func() {
		close(t.stopper)
		t.mu.Lock()
		defer t.mu.Unlock()
		for _, c := range t.conns {
			c.Close()
		}
		for c := range t.frames {
			c.Close()
		}
	})
}

// Send queues m for its destination without blocking. A message to a cut
// peer is lost on the wire: the sender is not told, as in a real partition.
func (t *GRPC) Send(m *tidekvpb.RaftMessage) bool {
	if t.cfg.Partition.Blocked(m.GetToNodeId()) {
		return true
	}
	q := t.queue(m.GetToNodeId())
	select {
	case q.ch <- queued{m: m, due: t.cfg.Delays.dueTime(m.GetFromNodeId(), m.GetToNodeId())}:
		return true
	default:
		return false
	}
}

func (t *GRPC) queue(node uint64) *sendQueue {
	t.mu.Lock()
	defer t.mu.Unlock()
	q := t.queues[node]
	if q == nil {
		q = &sendQueue{ch: make(chan queued, t.cfg.QueueSize)}
		t.queues[node] = q
		go t.sendLoop(node, q)
	}
	return q
}

func (t *GRPC) conn(node uint64) (*grpc.ClientConn, error) {
	addr, ok := t.resolve(node)
	if !ok {
		return nil, fmt.Errorf("no address for node %d", node)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if c := t.conns[addr]; c != nil {
		return c, nil
	}
	creds := t.cfg.Credentials
	if creds == nil {
		creds = insecure.NewCredentials()
	}
	c, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20), grpc.MaxCallSendMsgSize(64<<20)))
	if err != nil {
		return nil, err
	}
	t.conns[addr] = c
	return c, nil
}

// sendLoop keeps one connection open to a node (a frame connection, or a
// gRPC stream to a node without frames) and sends whatever is queued in
// batches: everything that accumulated while the previous batch was in
// flight goes out together.
//
// With emulated delays the queue is a delay line: the loop waits for the
// head's due time, then batches every following message that is also due,
// stopping at (and holding back) the first that is not. Messages sent in
// a burst thus all leave one delay later, not one delay apart.
func (t *GRPC) sendLoop(node uint64, q *sendQueue) {
	var out batchSender
	defer func() {
		if out != nil {
			out.close()
		}
	}()
	batch := &tidekvpb.RaftMessageBatch{}
	var held queued // taken from q.ch but not due yet; next batch's head
	hasHeld := false
	var timer *time.Timer
	for {
		var first queued
		if hasHeld {
			first, hasHeld = held, false
		} else {
			select {
			case <-t.stopper:
				return
			case first = <-q.ch:
			}
		}
		if first.due != 0 && !t.cfg.Delays.clockOf().waitUntil(&timer, first.due, t.stopper) {
			return
		}
		if first.due == 0 {
			// Let the sender of first finish its round: the messages it
			// is about to queue for this node join this frame.
			runtime.Gosched()
		}
		batch.Messages = append(batch.Messages[:0], first.m)
		var now int64 // read lazily: undelayed messages never read the clock
	fill:
		for len(batch.Messages) < t.cfg.MaxBatch {
			select {
			case e := <-q.ch:
				if e.due != 0 {
					if now == 0 {
						now = t.cfg.Delays.clockOf().now()
					}
					if e.due > now {
						held, hasHeld = e, true
						break fill
					}
				}
				batch.Messages = append(batch.Messages, e.m)
			default:
				break fill
			}
		}
		if out == nil {
			var err error
			if out, err = t.connect(node); err != nil {
				t.dropBatch(batch)
				select {
				case <-t.stopper:
					return
				case <-time.After(t.cfg.ReconnectBackoff):
				}
				continue
			}
		}
		if err := out.send(batch); err != nil {
			out.close()
			out = nil
			t.dropBatch(batch)
		} else {
			t.batchesSent.Add(1)
		}
	}
}

// batchSender sends batches to one node: a frame connection or a stream.
type batchSender interface {
	send(*tidekvpb.RaftMessageBatch) error
	close()
}

// connect opens a frame connection to node, or a gRPC stream if the node
// does not accept frames.
func (t *GRPC) connect(node uint64) (batchSender, error) {
	addr, ok := t.resolve(node)
	if !ok {
		return nil, fmt.Errorf("no address for node %d", node)
	}
	f, err := t.dialFrames(addr)
	if err == nil {
		return f, nil
	}
	if !errors.Is(err, errNoFrames) {
		return nil, err
	}
	log.Printf("raft to node %d at %s on a gRPC stream: %v", node, addr, err)
	stream, cancel, err := t.openStream(node)
	if err != nil {
		return nil, err
	}
	return streamSender{stream, cancel}, nil
}

// streamSender sends batches on a gRPC stream.
type streamSender struct {
	stream tidekvpb.Raft_RaftStreamClient
	cancel context.CancelFunc
}

func (s streamSender) send(b *tidekvpb.RaftMessageBatch) error { return s.stream.Send(b) }
func (s streamSender) close()                                  { s.cancel() }

func (t *GRPC) openStream(node uint64) (tidekvpb.Raft_RaftStreamClient, context.CancelFunc, error) {
	c, err := t.conn(node)
	if err != nil {
		return nil, func() {}, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	stream, err := tidekvpb.NewRaftClient(c).RaftStream(ctx)
	if err != nil {
		cancel()
		return nil, func() {}, err
	}
	return stream, cancel, nil
}

// dropBatch tells Raft which followers missed their appends so it probes
// them again instead of waiting.
func (t *GRPC) dropBatch(b *tidekvpb.RaftMessageBatch) {
	h := t.getHandler()
	if un, ok := h.(interface {
		ReportUnreachable(rangeID, toReplica uint64)
	}); ok {
		for _, m := range b.Messages {
			un.ReportUnreachable(m.GetRangeId(), m.GetMessage().GetTo())
		}
	}
}

// RaftStream receives batches from one peer.
func (t *GRPC) RaftStream(stream tidekvpb.Raft_RaftStreamServer) error {
	for {
		b, err := stream.Recv()
		if err != nil {
			if err == io.EOF {
				return stream.SendAndClose(&tidekvpb.RaftBatchAck{})
			}
			return err
		}
		t.deliver(b.GetMessages())
	}
}

// deliver hands received messages to the handler, but those from peers
// a partition cuts.
func (t *GRPC) deliver(msgs []*tidekvpb.RaftMessage) {
	h := t.getHandler()
	if h == nil {
		return
	}
	for _, m := range msgs {
		if t.cfg.Partition.Blocked(m.GetFromNodeId()) {
			continue
		}
		h.HandleRaftMessage(m)
	}
}

// SendSnapshot streams header then the SST bytes. With Config.Delays the
// stream starts the pair's one-way delay late, shifting its arrival as a
// whole (chunks are pipelined, so one wait is the same as one per chunk).
func (t *GRPC) SendSnapshot(ctx context.Context, header *tidekvpb.RaftMessage, sst io.Reader) error {
	if t.cfg.Partition.Blocked(header.GetToNodeId()) {
		return errPartitioned(header.GetToNodeId())
	}
	if err := t.cfg.Delays.sleepCtx(ctx, header.GetFromNodeId(), header.GetToNodeId()); err != nil {
		return err
	}
	c, err := t.conn(header.GetToNodeId())
	if err != nil {
		return err
	}
	stream, err := tidekvpb.NewRaftClient(c).Snapshot(ctx)
	if err != nil {
		return err
	}
	// A receiver that refuses the snapshot answers and closes early; Send
	// then fails with io.EOF and the reason is in the response.
	sendErr := stream.Send(&tidekvpb.SnapshotChunk{Header: header})
	buf := make([]byte, t.cfg.SnapshotChunkSize)
	sum := newSummer()
	sst = summingReader{r: sst, s: sum}
	for sendErr == nil {
		n, rerr := sst.Read(buf)
		if n > 0 {
			if sendErr = stream.Send(&tidekvpb.SnapshotChunk{Data: buf[:n]}); sendErr != nil {
				break
			}
		}
		if rerr == io.EOF {
			sendErr = stream.Send(&tidekvpb.SnapshotChunk{Final: true, Crc32C: sum.h.Sum32(), Length: sum.n})
			break
		}
		if rerr != nil {
			return rerr
		}
	}
	if sendErr != nil && sendErr != io.EOF {
		return sendErr
	}
	resp, err := stream.CloseAndRecv()
	if err != nil {
		return err
	}
	if !resp.GetAccepted() {
		return fmt.Errorf("snapshot refused: %s", resp.GetError())
	}
	return nil
}

// Snapshot receives a snapshot stream and hands it to the handler as a reader.
func (t *GRPC) Snapshot(stream tidekvpb.Raft_SnapshotServer) error {
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	if first.GetHeader() == nil {
		return stream.SendAndClose(&tidekvpb.SnapshotResponse{Error: "first chunk carries no header"})
	}
	if from := first.GetHeader().GetFromNodeId(); t.cfg.Partition.Blocked(from) {
		return errPartitioned(from)
	}
	pr, pw := io.Pipe()
	go func() {
		sum := newSummer()
		for {
			c, err := stream.Recv()
			if err != nil {
				pw.CloseWithError(err)
				return
			}
			if len(c.GetData()) > 0 {
				sum.Write(c.GetData())
				if _, err := pw.Write(c.GetData()); err != nil {
					return
				}
			}
			if c.GetFinal() {
				// The reader sees the end only if every byte arrived intact.
				pw.CloseWithError(sum.check(c.GetLength(), c.GetCrc32C()))
				return
			}
		}
	}()
	h := t.getHandler()
	if h == nil {
		pr.CloseWithError(errors.New("node not ready"))
		return stream.SendAndClose(&tidekvpb.SnapshotResponse{Error: "node not ready"})
	}
	if err := h.HandleSnapshot(first.GetHeader(), pr); err != nil {
		pr.CloseWithError(err)
		log.Printf("refused snapshot for range %d: %v", first.GetHeader().GetRangeId(), err)
		return stream.SendAndClose(&tidekvpb.SnapshotResponse{Error: err.Error()})
	}
	return stream.SendAndClose(&tidekvpb.SnapshotResponse{Accepted: true})
}
