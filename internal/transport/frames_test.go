package transport

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/security"
)

// noRaftService registers nothing: a port on which only frames can carry
// Raft messages.
func noRaftService(*grpc.Server) {}

// TestFramesCarryRaftMessages: a node whose gRPC server has no Raft
// service still receives messages in order, so they came as frames on
// its gRPC port; the port still serves gRPC (a snapshot) beside them.
func TestFramesCarryRaftMessages(t *testing.T) {
	book := &addrBook{}
	t1 := startNode(t, DefaultConfig(), book, 1, newRecorder())
	h2 := newRecorder()
	t2, err := NewGRPC(DefaultConfig(), book.resolve, h2)
	if err != nil {
		t.Fatal(err)
	}
	defer t2.Stop()
	addr, _ := serve(t, "", noRaftService, t2.Listen)
	book.set(2, addr)
	const n = 2000
	for i := uint64(0); i < n; i++ {
		if !t1.Send(msg(i%5, 1, 2, i)) {
			t.Fatalf("send %d dropped", i)
		}
	}
	for i, m := range receive(t, h2.msgs, n) {
		if m.GetMessage().GetIndex() != uint64(i) || m.GetRangeId() != uint64(i)%5 {
			t.Fatalf("message %d: got %v", i, m)
		}
	}

	// The same port still serves gRPC: t2 snapshots to t1's.
	back := snapHeader()
	back.FromNodeId, back.ToNodeId = 2, 1
	if err := t2.SendSnapshot(context.Background(), back, bytes.NewReader([]byte("sst"))); err != nil {
		t.Fatalf("snapshot over gRPC beside frames: %v", err)
	}
}

// TestFramesFallBackToGRPCStream: a node from before frames (its port
// serves gRPC only and drops the frame connection on the bad preface)
// gets its messages, in order, on a gRPC stream.
func TestFramesFallBackToGRPCStream(t *testing.T) {
	book := &addrBook{}
	t1 := startNode(t, DefaultConfig(), book, 1, newRecorder())
	h2 := newRecorder()
	t2, err := NewGRPC(DefaultConfig(), book.resolve, h2)
	if err != nil {
		t.Fatal(err)
	}
	defer t2.Stop()
	addr, _ := serve(t, "", t2.Register, nil)
	book.set(2, addr)
	if _, err := t1.dialFrames(addr); !errors.Is(err, errNoFrames) {
		t.Fatalf("frames to a gRPC-only port: %v, want errNoFrames", err)
	}
	const n = 500
	for i := uint64(0); i < n; i++ {
		t1.Send(msg(1, 1, 2, i))
	}
	for i, m := range receive(t, h2.msgs, n) {
		if m.GetMessage().GetIndex() != uint64(i) {
			t.Fatalf("message %d arrived as %d-th", m.GetMessage().GetIndex(), i)
		}
	}
}

// TestFramesStalledDialerBlocksNobody: a connection that sends part of
// the magic and stops holds up neither gRPC nor other frame connections.
func TestFramesStalledDialerBlocksNobody(t *testing.T) {
	book := &addrBook{}
	t1 := startNode(t, DefaultConfig(), book, 1, newRecorder())
	h2 := newRecorder()
	startNode(t, DefaultConfig(), book, 2, h2)
	addr, _ := book.resolve(2)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte(frameMagic[:3])); err != nil {
		t.Fatal(err)
	}
	t1.Send(msg(1, 1, 2, 1))
	receive(t, h2.msgs, 1)
	back := snapHeader()
	back.FromNodeId, back.ToNodeId = 1, 2
	if err := t1.SendSnapshot(context.Background(), back, bytes.NewReader([]byte("sst"))); err != nil {
		t.Fatalf("snapshot beside a stalled dialer: %v", err)
	}
}

// secureConfig is a node's transport configuration from a certs
// directory, as the server builds it (internal/server/security.go).
func secureConfig(t *testing.T, dir string) Config {
	t.Helper()
	nt, err := security.LoadNodeTLS(security.OSFiles{}, dir)
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Credentials, cfg.TLS = credentials.NewTLS(nt.Client), nt.Client
	cfg.ServerTLS, cfg.Authorize = nt.Server, security.RequireNode
	return cfg
}

// TestFramesSecure: on secure nodes frames are TLS and need a node
// certificate: nodes exchange messages on them (the ports have no Raft
// service, so nothing else could carry them), while a client
// certificate, no certificate, a certificate of another CA and
// plaintext are all refused before a frame is read.
func TestFramesSecure(t *testing.T) {
	o := security.CertOptions{Dir: t.TempDir(), Lifetime: 24 * time.Hour, Files: security.OSFiles{}}
	if err := security.CreateCA(o); err != nil {
		t.Fatal(err)
	}
	if err := security.CreateNode(o, []string{"127.0.0.1"}); err != nil {
		t.Fatal(err)
	}
	if err := security.CreateClient(o, "alice"); err != nil {
		t.Fatal(err)
	}
	cfg := secureConfig(t, o.Dir)
	book := &addrBook{}
	var trs [2]*GRPC
	var hs [2]*recorder
	for i := range trs {
		hs[i] = newRecorder()
		tr, err := NewGRPC(cfg, book.resolve, hs[i])
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(tr.Stop)
		addr, _ := serve(t, "", noRaftService, tr.Listen)
		book.set(uint64(i+1), addr)
		trs[i] = tr
	}
	trs[0].Send(msg(1, 1, 2, 7))
	trs[1].Send(msg(1, 2, 1, 8))
	if m := receive(t, hs[1].msgs, 1)[0]; m.GetMessage().GetIndex() != 7 {
		t.Fatalf("1 -> 2: %v", m)
	}
	if m := receive(t, hs[0].msgs, 1)[0]; m.GetMessage().GetIndex() != 8 {
		t.Fatalf("2 -> 1: %v", m)
	}

	addr, _ := book.resolve(2)
	client, _, err := security.LoadClientTLS(security.OSFiles{}, o.Dir, "alice")
	if err != nil {
		t.Fatal(err)
	}
	anonymous, _, err := security.LoadClientTLS(security.OSFiles{}, o.Dir, "")
	if err != nil {
		t.Fatal(err)
	}
	other := security.CertOptions{Dir: t.TempDir(), Lifetime: 24 * time.Hour, Files: security.OSFiles{}}
	if err := security.CreateCA(other); err != nil {
		t.Fatal(err)
	}
	if err := security.CreateNode(other, []string{"127.0.0.1"}); err != nil {
		t.Fatal(err)
	}
	foreign := secureConfig(t, other.Dir).TLS.Clone()
	// Trust node 2's CA, so only node 2's check of the client's
	// certificate can refuse.
	foreign.RootCAs = cfg.TLS.RootCAs
	for name, tc := range map[string]*tls.Config{"client certificate": client, "no certificate": anonymous,
		"another CA's node certificate": foreign} {
		c := DefaultConfig()
		c.TLS, c.Credentials = tc, credentials.NewTLS(tc)
		dialer, err := NewGRPC(c, book.resolve, newRecorder())
		if err != nil {
			t.Fatal(err)
		}
		f, err := dialer.dialFrames(addr)
		if err == nil {
			// TLS 1.3 finishes the client's handshake before the server
			// checks its certificate: the refusal is the connection
			// closing instead of the answer, which dialFrames reads.
			f.close()
			t.Fatalf("%s: frame connection accepted", name)
		}
		dialer.Stop()
	}
	// Plaintext: the magic and a frame, which the node reads as the start
	// of a TLS handshake and refuses.
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	f := &frameSender{c: c}
	if _, err := c.Write([]byte(frameMagic)); err != nil {
		t.Fatal(err)
	}
	if err := f.send(&tidekvpb.RaftMessageBatch{Messages: []*tidekvpb.RaftMessage{msg(1, 1, 2, 9)}}); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadAll(c); err != nil {
		t.Fatalf("plaintext: the node did not close the connection: %v", err)
	}
	// The node closed each refused connection before reading a frame and
	// delivers what it reads before it reads on: nothing can be pending.
	nothingReceived(t, hs[1].msgs, "frames from a refused connection")
}

// nothingReceived fails if ch holds a message now.
func nothingReceived(t *testing.T, ch <-chan *tidekvpb.RaftMessage, what string) {
	t.Helper()
	select {
	case m := <-ch:
		t.Fatalf("%s: got %v", what, m)
	default:
	}
}

// TestFramesListenerCloseEndsConnections: closing the listener (the gRPC
// server stopping) closes the frame connections it serves, so a stopped
// node stops receiving, and the sender notices and reports the batches
// it could not send.
func TestFramesListenerCloseEndsConnections(t *testing.T) {
	book := &addrBook{}
	cfg := DefaultConfig()
	cfg.ReconnectBackoff = 20 * time.Millisecond
	h1 := newRecorder()
	t1 := startNode(t, cfg, book, 1, h1)
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
	deadline := time.Now().Add(10 * time.Second)
	for i := uint64(1); h1.unreachable.Load() == 0; i++ {
		if time.Now().After(deadline) {
			t.Fatal("no batch reported unreachable after the peer stopped")
		}
		t1.Send(msg(1, 1, 2, i))
		time.Sleep(10 * time.Millisecond)
	}
	// stop returned after closing the node's frame connections, and only
	// message 0 was sent before it.
	nothingReceived(t, h2.msgs, "a stopped node's frames")
}

// TestFramesReconnectAfterPeerRestart: a peer restarted on the same port
// gets frames again on a new connection (its port has no Raft service,
// so no gRPC stream can stand in).
func TestFramesReconnectAfterPeerRestart(t *testing.T) {
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
	addr, stop := serve(t, "", noRaftService, t2.Listen)
	book.set(2, addr)
	t1.Send(msg(1, 1, 2, 0))
	receive(t, h2.msgs, 1)
	stop()
	// The restarted node is a new process: a new transport, same port.
	h2b := newRecorder()
	t2b, err := NewGRPC(cfg, book.resolve, h2b)
	if err != nil {
		t.Fatal(err)
	}
	defer t2b.Stop()
	serve(t, addr, noRaftService, t2b.Listen)
	// Messages sent into the old connection are lost with it (Raft
	// retransmits); keep sending until one gets through, then the rest
	// arrive in order.
	deadline := time.Now().Add(10 * time.Second)
	var first uint64
	for i := uint64(1); first == 0; i++ {
		t1.Send(msg(1, 1, 2, i))
		select {
		case m := <-h2b.msgs:
			first = m.GetMessage().GetIndex()
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("no delivery after the peer restarted")
		}
	}
	// Drain what the loop above sent after first, then check order.
	next := first + 1
	for _, m := range receiveFor(h2b.msgs, 200*time.Millisecond) {
		if m.GetMessage().GetIndex() != next {
			t.Fatalf("after the restart: message %d, want %d", m.GetMessage().GetIndex(), next)
		}
		next++
	}
	for i := next; i < next+100; i++ {
		t1.Send(msg(1, 1, 2, i))
	}
	for i, m := range receive(t, h2b.msgs, 100) {
		if m.GetMessage().GetIndex() != next+uint64(i) {
			t.Fatalf("after the restart: message %d, want %d", m.GetMessage().GetIndex(), next+uint64(i))
		}
	}
}

// receiveFor collects what arrives until nothing has for quiet.
func receiveFor(ch <-chan *tidekvpb.RaftMessage, quiet time.Duration) []*tidekvpb.RaftMessage {
	var out []*tidekvpb.RaftMessage
	for {
		select {
		case m := <-ch:
			out = append(out, m)
		case <-time.After(quiet):
			return out
		}
	}
}

// TestFramesPartitionDropsMessages: a partition loses frames both ways
// (the receiver drops what a cut peer sends, the sender sends nothing to
// a cut peer), on connections opened before the cut, and healing
// restores them; the ports have no Raft service, so frames are all there
// is. Order on a connection shows what was dropped, without waiting.
func TestFramesPartitionDropsMessages(t *testing.T) {
	book := &addrBook{}
	part := &Partition{}
	cfg := DefaultConfig()
	cfg.Partition = part
	h1, h2 := newRecorder(), newRecorder()
	var trs []*GRPC
	for i, c := range []Config{cfg, DefaultConfig()} {
		tr, err := NewGRPC(c, book.resolve, []*recorder{h1, h2}[i])
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(tr.Stop)
		addr, _ := serve(t, "", noRaftService, tr.Listen)
		book.set(uint64(i+1), addr)
		trs = append(trs, tr)
	}
	// Connections open before the cut: the cut must drop on them too.
	trs[0].Send(msg(1, 1, 2, 1))
	trs[1].Send(msg(1, 2, 1, 2))
	receive(t, h2.msgs, 1)
	receive(t, h1.msgs, 1)
	part.Cut([]uint64{2})
	for i := uint64(10); i < 20; i++ {
		trs[0].Send(msg(1, 1, 2, i))
		trs[1].Send(msg(1, 2, 1, i))
	}
	// Node 1 drops what node 2 sent when it reads it: a message on the
	// same connection from a node the cut spares (3) is read after them,
	// so once it arrives they were read, and it must come first.
	trs[1].Send(msg(1, 3, 1, 99))
	if m := receive(t, h1.msgs, 1)[0]; m.GetMessage().GetIndex() != 99 {
		t.Fatalf("2 -> 1 across the partition: %v", m)
	}
	part.Heal()
	// Node 1 dropped its own sends to 2 before queueing them: had it not,
	// they would arrive before this one.
	trs[0].Send(msg(1, 1, 2, 30))
	trs[1].Send(msg(1, 2, 1, 31))
	if m := receive(t, h2.msgs, 1)[0]; m.GetMessage().GetIndex() != 30 {
		t.Fatalf("1 -> 2 across the partition or after healing: %v", m)
	}
	if m := receive(t, h1.msgs, 1)[0]; m.GetMessage().GetIndex() != 31 {
		t.Fatalf("2 -> 1 after healing: %v", m)
	}
}
