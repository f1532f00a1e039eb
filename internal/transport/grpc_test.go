package transport

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	"github.com/tidekv/tidekv/api/tidekvpb"
)

// recorder is a Handler that keeps what it receives.
type recorder struct {
	msgs chan *tidekvpb.RaftMessage
	mu   sync.Mutex
	// snap handles snapshots; nil accepts and drains them.
	snap        func(hdr *tidekvpb.RaftMessage, r io.Reader) error
	unreachable atomic.Int64
}

func newRecorder() *recorder { return &recorder{msgs: make(chan *tidekvpb.RaftMessage, 100000)} }

func (h *recorder) HandleRaftMessage(m *tidekvpb.RaftMessage) { h.msgs <- m }

func (h *recorder) setSnap(f func(hdr *tidekvpb.RaftMessage, r io.Reader) error) {
	h.mu.Lock()
	h.snap = f
	h.mu.Unlock()
}

func (h *recorder) HandleSnapshot(hdr *tidekvpb.RaftMessage, r io.Reader) error {
	h.mu.Lock()
	f := h.snap
	h.mu.Unlock()
	if f != nil {
		return f(hdr, r)
	}
	_, err := io.Copy(io.Discard, r)
	return err
}

// ReportUnreachable is what the store implements; the transport calls it
// for messages it had to drop.
func (h *recorder) ReportUnreachable(rangeID, toReplica uint64) { h.unreachable.Add(1) }

// addrBook is a Resolver backed by a map that tests fill in as servers start.
type addrBook struct {
	mu    sync.Mutex
	addrs map[uint64]string
}

func (b *addrBook) set(node uint64, addr string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.addrs == nil {
		b.addrs = map[uint64]string{}
	}
	b.addrs[node] = addr
}

func (b *addrBook) resolve(node uint64) (string, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	a, ok := b.addrs[node]
	return a, ok
}

// serve runs a gRPC server for register on a fresh 127.0.0.1 port (or addr,
// to come back on the same one) and returns its address and a stop func.
// listen, if not nil, wraps the port's listener (GRPC.Listen: Raft frames
// on the same port; nil: a node from before frames).
func serve(t *testing.T, addr string, register func(*grpc.Server), listen func(net.Listener) net.Listener) (string, func()) {
	t.Helper()
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	var lis net.Listener
	var err error
	// A just-closed port can take a moment to become free again.
	for deadline := time.Now().Add(5 * time.Second); ; {
		if lis, err = net.Listen("tcp", addr); err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.MaxRecvMsgSize(64 << 20))
	register(srv)
	served := lis
	if listen != nil {
		served = listen(lis)
	}
	go func() { _ = srv.Serve(served) }()
	var once sync.Once
	stop := func() { once.Do(srv.Stop) }
	t.Cleanup(stop)
	return lis.Addr().String(), stop
}

// startNode starts a GRPC transport for node with its own server.
func startNode(t *testing.T, cfg Config, book *addrBook, node uint64, h Handler) *GRPC {
	t.Helper()
	tr, err := NewGRPC(cfg, book.resolve, h)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tr.Stop)
	addr, _ := serve(t, "", tr.Register, tr.Listen)
	book.set(node, addr)
	return tr
}

func msg(rangeID, from, to, index uint64) *tidekvpb.RaftMessage {
	return &tidekvpb.RaftMessage{RangeId: rangeID, FromNodeId: from, ToNodeId: to,
		Message: &raftpb.Message{Type: raftpb.MsgApp.Enum(), To: proto.Uint64(to), Index: proto.Uint64(index)}}
}

// receive collects n messages or fails after a deadline.
func receive(t *testing.T, ch <-chan *tidekvpb.RaftMessage, n int) []*tidekvpb.RaftMessage {
	t.Helper()
	out := make([]*tidekvpb.RaftMessage, 0, n)
	timeout := time.After(10 * time.Second)
	for len(out) < n {
		select {
		case m := <-ch:
			out = append(out, m)
		case <-timeout:
			t.Fatalf("received %d of %d messages", len(out), n)
		}
	}
	return out
}

func TestGRPCDeliversInOrderBothWays(t *testing.T) {
	book := &addrBook{}
	h1, h2 := newRecorder(), newRecorder()
	t1 := startNode(t, DefaultConfig(), book, 1, h1)
	t2 := startNode(t, DefaultConfig(), book, 2, h2)
	const n = 3000
	var wg sync.WaitGroup
	for _, dir := range []struct {
		tr       *GRPC
		from, to uint64
	}{{t1, 1, 2}, {t2, 2, 1}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := uint64(0); i < n; i++ {
				// Ranges interleave on the one stream per node pair.
				if !dir.tr.Send(msg(i%7, dir.from, dir.to, i)) {
					t.Errorf("send %d from n%d dropped with an empty queue", i, dir.from)
					return
				}
			}
		}()
	}
	wg.Wait()
	for _, c := range []struct {
		h    *recorder
		from uint64
	}{{h2, 1}, {h1, 2}} {
		got := receive(t, c.h.msgs, n)
		for i, m := range got {
			if m.GetMessage().GetIndex() != uint64(i) || m.GetFromNodeId() != c.from || m.GetRangeId() != uint64(i)%7 {
				t.Fatalf("message %d from n%d: got %v", i, c.from, m)
			}
		}
	}
	select {
	case m := <-h2.msgs:
		t.Fatalf("extra message %v", m)
	case <-time.After(50 * time.Millisecond):
	}
}

// batchServer is a Raft service that records the size of every batch.
type batchServer struct {
	tidekvpb.UnimplementedRaftServer
	mu      sync.Mutex
	batches []int
	indexes []uint64
}

func (s *batchServer) RaftStream(stream tidekvpb.Raft_RaftStreamServer) error {
	for {
		b, err := stream.Recv()
		if err != nil {
			if err == io.EOF {
				return stream.SendAndClose(&tidekvpb.RaftBatchAck{})
			}
			return err
		}
		s.mu.Lock()
		s.batches = append(s.batches, len(b.GetMessages()))
		for _, m := range b.GetMessages() {
			s.indexes = append(s.indexes, m.GetMessage().GetIndex())
		}
		s.mu.Unlock()
	}
}

func (s *batchServer) received() ([]int, []uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]int(nil), s.batches...), append([]uint64(nil), s.indexes...)
}

// TestGRPCBatchesWhatAccumulated: messages queued while the sender is busy
// (here: held up resolving the address) go out together, at most MaxBatch
// per batch, in order.
func TestGRPCBatchesWhatAccumulated(t *testing.T) {
	recv := &batchServer{}
	addr, _ := serve(t, "", func(s *grpc.Server) { tidekvpb.RegisterRaftServer(s, recv) }, nil)
	release := make(chan struct{})
	resolve := func(uint64) (string, bool) {
		<-release
		return addr, true
	}
	cfg := DefaultConfig()
	cfg.MaxBatch = 16
	tr, err := NewGRPC(cfg, resolve, newRecorder())
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Stop()
	const n = 100
	for i := uint64(0); i < n; i++ {
		if !tr.Send(msg(1, 1, 2, i)) {
			t.Fatalf("send %d dropped", i)
		}
	}
	close(release)
	var batches []int
	var indexes []uint64
	deadline := time.Now().Add(10 * time.Second)
	for len(indexes) < n {
		if time.Now().After(deadline) {
			t.Fatalf("received %d of %d messages", len(indexes), n)
		}
		time.Sleep(5 * time.Millisecond)
		batches, indexes = recv.received()
	}
	for i, idx := range indexes {
		if idx != uint64(i) {
			t.Fatalf("message %d arrived as %d-th", idx, i)
		}
	}
	largest := 0
	for _, b := range batches {
		if b > cfg.MaxBatch {
			t.Fatalf("batch of %d exceeds MaxBatch %d", b, cfg.MaxBatch)
		}
		largest = max(largest, b)
	}
	// At most the first batch was formed before the queue filled up; the
	// rest waited behind the resolver and left in full batches.
	if largest != cfg.MaxBatch || len(batches) > n/cfg.MaxBatch+2 {
		t.Fatalf("batches %v: queued messages were not batched", batches)
	}
}

// chunkyReader returns data in odd-sized reads, as a file might not.
type chunkyReader struct {
	data []byte
	rng  *rand.Rand
}

func (r *chunkyReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	n := min(len(p), len(r.data), 1+r.rng.IntN(300_000))
	copy(p, r.data[:n])
	r.data = r.data[n:]
	return n, nil
}

func snapHeader() *tidekvpb.RaftMessage {
	return &tidekvpb.RaftMessage{RangeId: 5, FromNodeId: 1, ToNodeId: 2, Message: &raftpb.Message{
		Type: raftpb.MsgSnap.Enum(), To: proto.Uint64(3), From: proto.Uint64(1),
		Snapshot: &raftpb.Snapshot{Data: []byte("descriptor"), Metadata: &raftpb.SnapshotMetadata{Index: proto.Uint64(42), Term: proto.Uint64(7)}}}}
}

func TestGRPCSnapshotStreamsExactBytes(t *testing.T) {
	book := &addrBook{}
	type received struct {
		hdr  *tidekvpb.RaftMessage
		data []byte
	}
	recv := make(chan received, 1)
	h2 := newRecorder()
	h2.setSnap(func(hdr *tidekvpb.RaftMessage, r io.Reader) error {
		data, err := io.ReadAll(r)
		recv <- received{hdr, data}
		return err
	})
	cfg := DefaultConfig()
	cfg.SnapshotChunkSize = 256 << 10
	t1 := startNode(t, cfg, book, 1, newRecorder())
	startNode(t, cfg, book, 2, h2)

	rng := rand.New(rand.NewPCG(1, 2))
	data := make([]byte, 5<<20+12345) // several chunks and a short last one
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	hdr := snapHeader()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := t1.SendSnapshot(ctx, hdr, &chunkyReader{data: append([]byte(nil), data...), rng: rng}); err != nil {
		t.Fatal(err)
	}
	got := <-recv // the handler has returned: SendSnapshot waits for its answer
	if !bytes.Equal(got.data, data) {
		t.Fatalf("receiver got %d bytes, want %d (equal prefix %d)", len(got.data), len(data), commonPrefix(got.data, data))
	}
	if !proto.Equal(got.hdr, hdr) {
		t.Fatalf("header: got %v, want %v", got.hdr, hdr)
	}

	// An empty snapshot (a range with no keys) is fine too.
	if err := t1.SendSnapshot(ctx, hdr, bytes.NewReader(nil)); err != nil {
		t.Fatalf("empty snapshot: %v", err)
	}
	if got := <-recv; len(got.data) != 0 {
		t.Fatalf("empty snapshot arrived with %d bytes", len(got.data))
	}
}

func commonPrefix(a, b []byte) int {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	return i
}

func TestGRPCSnapshotRefused(t *testing.T) {
	book := &addrBook{}
	cfg := DefaultConfig()
	cfg.SnapshotChunkSize = 64 << 10
	t1 := startNode(t, cfg, book, 1, newRecorder())
	h2 := newRecorder()
	startNode(t, cfg, book, 2, h2)
	data := bytes.Repeat([]byte("x"), 4<<20)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	for _, c := range []struct {
		name   string
		handle func(io.Reader) error
	}{
		// Refused after reading everything: the reason comes back.
		{"after reading", func(r io.Reader) error {
			_, _ = io.Copy(io.Discard, r)
			return errors.New("overlaps range 9")
		}},
		// Refused halfway, and at once: the sender must not hang on a
		// stream nobody reads, and must not report success.
		{"halfway", func(r io.Reader) error {
			_, _ = io.CopyN(io.Discard, r, 1<<20)
			return errors.New("overlaps range 9")
		}},
		{"before reading", func(io.Reader) error { return errors.New("overlaps range 9") }},
	} {
		t.Run(c.name, func(t *testing.T) {
			h2.setSnap(func(_ *tidekvpb.RaftMessage, r io.Reader) error { return c.handle(r) })
			err := t1.SendSnapshot(ctx, snapHeader(), bytes.NewReader(data))
			if err == nil {
				t.Fatal("refused snapshot reported as sent")
			}
			if !strings.Contains(err.Error(), "overlaps range 9") {
				t.Fatalf("refusal reason not returned: %v", err)
			}
		})
	}
	if ctx.Err() != nil {
		t.Fatal("refusals took too long")
	}
}

// TestGRPCSnapshotSenderAborts: a stream cut short must reach the handler
// as an error, never as a clean (truncated) end of the SST.
func TestGRPCSnapshotSenderAborts(t *testing.T) {
	book := &addrBook{}
	handlerErr := make(chan error, 1)
	h2 := newRecorder()
	h2.setSnap(func(_ *tidekvpb.RaftMessage, r io.Reader) error {
		_, err := io.Copy(io.Discard, r)
		handlerErr <- err
		return err
	})
	cfg := DefaultConfig()
	cfg.SnapshotChunkSize = 64 << 10
	t1 := startNode(t, cfg, book, 1, newRecorder())
	startNode(t, cfg, book, 2, h2)

	ctx, cancel := context.WithCancel(context.Background())
	// The SST source fails after 1 MiB; the caller then cancels the stream
	// (as the store's sender does on return).
	src := io.MultiReader(bytes.NewReader(make([]byte, 1<<20)), iotestErrReader{})
	err := t1.SendSnapshot(ctx, snapHeader(), src)
	cancel()
	if err == nil {
		t.Fatal("SendSnapshot succeeded with a failing source")
	}
	select {
	case herr := <-handlerErr:
		if herr == nil {
			t.Fatal("handler saw a clean end of a truncated snapshot")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("handler never finished")
	}
}

type iotestErrReader struct{}

func (iotestErrReader) Read([]byte) (int, error) { return 0, errors.New("disk read failed") }

// TestGRPCSendNeverBlocks: Send to a node without an address, or with an
// address nobody listens on, returns at once; what cannot be queued is
// refused, and dropped batches are reported as unreachable so Raft probes
// again.
func TestGRPCSendNeverBlocks(t *testing.T) {
	// Grab a port and close it, so nothing listens there.
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := lis.Addr().String()
	lis.Close()
	book := &addrBook{}
	book.set(8, dead)

	h := newRecorder()
	cfg := DefaultConfig()
	cfg.QueueSize, cfg.MaxBatch, cfg.ReconnectBackoff = 4, 2, time.Second
	tr, err := NewGRPC(cfg, book.resolve, h)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Stop()
	for _, node := range []uint64{8, 9} { // dead address, unknown node
		start := time.Now()
		refused := 0
		for i := uint64(0); i < 200; i++ {
			if !tr.Send(msg(1, 1, node, i)) {
				refused++
			}
		}
		if d := time.Since(start); d > time.Second {
			t.Fatalf("n%d: 200 sends took %v", node, d)
		}
		// The queue holds 4 and the sender holds one batch of 2 while it
		// backs off: nearly everything is refused.
		if refused < 200-2*(cfg.QueueSize+cfg.MaxBatch) {
			t.Fatalf("n%d: only %d of 200 sends refused with a full queue", node, refused)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for h.unreachable.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("dropped batches were not reported unreachable")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestGRPCReconnects: after the peer restarts, the sender opens a new
// stream and delivery resumes.
func TestGRPCReconnects(t *testing.T) {
	book := &addrBook{}
	cfg := DefaultConfig()
	cfg.ReconnectBackoff = 20 * time.Millisecond
	t1 := startNode(t, cfg, book, 1, newRecorder())
	h2 := newRecorder()
	t2, err := NewGRPC(cfg, book.resolve, h2)
	if err != nil {
		t.Fatal(err)
	}
	defer t2.Stop()
	addr, stop := serve(t, "", t2.Register, t2.Listen)
	book.set(2, addr)

	t1.Send(msg(1, 1, 2, 0))
	receive(t, h2.msgs, 1)
	stop()
	_, _ = serve(t, addr, t2.Register, t2.Listen)
	// Messages sent right after the restart may be lost with the old
	// stream (Raft retransmits); keep sending until one gets through.
	deadline := time.Now().Add(10 * time.Second)
	for i := uint64(1); ; i++ {
		t1.Send(msg(1, 1, 2, i))
		select {
		case <-h2.msgs:
			return
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("no delivery after the peer restarted")
		}
	}
}

func TestGRPCSnapshotWithoutHandler(t *testing.T) {
	book := &addrBook{}
	t1 := startNode(t, DefaultConfig(), book, 1, newRecorder())
	// A node whose store is not up yet has no handler.
	t2, err := NewGRPC(DefaultConfig(), book.resolve, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer t2.Stop()
	addr, _ := serve(t, "", t2.Register, t2.Listen)
	book.set(2, addr)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := t1.SendSnapshot(ctx, snapHeader(), bytes.NewReader(make([]byte, 100))); err == nil {
		t.Fatal("snapshot to a node without a handler reported as sent")
	}
	// Once the handler is set, the same node accepts it.
	h2 := newRecorder()
	t2.SetHandler(h2)
	if err := t1.SendSnapshot(ctx, snapHeader(), bytes.NewReader(make([]byte, 100))); err != nil {
		t.Fatal(err)
	}
}

func TestGRPCConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	for i, mut := range []func(*Config){
		func(c *Config) { c.QueueSize = 0 },
		func(c *Config) { c.MaxBatch = 0 },
		func(c *Config) { c.ReconnectBackoff = 0 },
		func(c *Config) { c.SnapshotChunkSize = -1 },
	} {
		c := DefaultConfig()
		mut(&c)
		if _, err := NewGRPC(c, (&addrBook{}).resolve, nil); err == nil {
			t.Errorf("case %d: invalid config accepted", i)
		}
	}
}

// A snapshot whose bytes differ from what the sender checksummed (a flipped
// bit, a lost chunk) reaches the handler as an error before its end, so no
// corrupt SST is ever staged, and the refusal says why.
func TestGRPCSnapshotChecksum(t *testing.T) {
	book := &addrBook{}
	handlerErr := make(chan error, 1)
	h2 := newRecorder()
	h2.setSnap(func(_ *tidekvpb.RaftMessage, r io.Reader) error {
		_, err := io.Copy(io.Discard, r)
		handlerErr <- err
		return err
	})
	startNode(t, DefaultConfig(), book, 2, h2)
	addr, _ := book.resolve(2)
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	data := bytes.Repeat([]byte("abcdefgh"), 1<<14)
	sum := newSummer()
	sum.Write(data)
	for _, c := range []struct {
		name         string
		sent         []byte
		length       uint64
		crc          uint32
		wantAccepted bool
	}{
		{"intact", data, sum.n, sum.h.Sum32(), true},
		{"flipped bit", append(append([]byte{}, data[:100]...), append([]byte{data[100] ^ 1}, data[101:]...)...), sum.n, sum.h.Sum32(), false},
		{"lost tail", data[:len(data)-8], sum.n, sum.h.Sum32(), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			stream, err := tidekvpb.NewRaftClient(conn).Snapshot(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, ch := range []*tidekvpb.SnapshotChunk{{Header: snapHeader()}, {Data: c.sent}, {Final: true, Crc32C: c.crc, Length: c.length}} {
				if err := stream.Send(ch); err != nil {
					t.Fatal(err)
				}
			}
			resp, err := stream.CloseAndRecv()
			if err != nil {
				t.Fatal(err)
			}
			herr := <-handlerErr
			if resp.GetAccepted() != c.wantAccepted {
				t.Fatalf("accepted %v (%q), want %v", resp.GetAccepted(), resp.GetError(), c.wantAccepted)
			}
			if !c.wantAccepted && (herr == nil || !strings.Contains(resp.GetError(), "corrupt")) {
				t.Fatalf("handler saw %v, refusal %q: want the corruption named", herr, resp.GetError())
			}
		})
	}
}
