package transport

import (
	"bytes"
	"context"
	"errors"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/tidekv/tidekv/api/tidekvpb"
)

// memNet builds a network of n recording nodes (IDs 1..n).
func memNet(t *testing.T, n int) (*MemNetwork, []*recorder, []uint64) {
	t.Helper()
	net := NewMemNetwork()
	t.Cleanup(net.Close)
	hs := make([]*recorder, n+1)
	var ids []uint64
	for i := 1; i <= n; i++ {
		hs[i] = newRecorder()
		net.Register(uint64(i), hs[i])
		ids = append(ids, uint64(i))
	}
	return net, hs, ids
}

// nothingArrives asserts ch stays empty for a short while: drops happen at
// delivery, asynchronously, so absence can only be observed over time.
func nothingArrives(t *testing.T, ch <-chan *tidekvpb.RaftMessage) {
	t.Helper()
	select {
	case m := <-ch:
		t.Fatalf("unexpected delivery %v", m)
	case <-time.After(50 * time.Millisecond):
	}
}

// sendAndFlush sends marker messages from→to until one arrives, which
// proves everything sent before it on that pair was delivered or dropped.
func sendAndFlush(t *testing.T, net *MemNetwork, h *recorder, from, to uint64) {
	t.Helper()
	if !net.Transport(from).Send(msg(99, from, to, 1<<40)) {
		t.Fatal("marker dropped")
	}
	for _, m := range receive(t, h.msgs, 1) {
		if m.GetRangeId() != 99 {
			t.Fatalf("expected only the marker, got %v", m)
		}
	}
}

func TestMemDeliversInOrder(t *testing.T) {
	net, hs, _ := memNet(t, 2)
	tr := net.Transport(1)
	const n = 2000
	for i := uint64(0); i < n; i++ {
		if !tr.Send(msg(1, 1, 2, i)) {
			t.Fatalf("send %d dropped", i)
		}
	}
	for i, m := range receive(t, hs[2].msgs, n) {
		if m.GetMessage().GetIndex() != uint64(i) {
			t.Fatalf("message %d arrived as %d-th", m.GetMessage().GetIndex(), i)
		}
	}
}

// TestMemCopiesMessages: the receiver gets its own copy; a sender reusing or
// mutating its message cannot change what was delivered.
func TestMemCopiesMessages(t *testing.T) {
	net, hs, _ := memNet(t, 2)
	m := msg(1, 1, 2, 5)
	net.Transport(1).Send(m)
	m.Message.Index = nil
	m.RangeId = 77
	got := receive(t, hs[2].msgs, 1)[0]
	if got.GetRangeId() != 1 || got.GetMessage().GetIndex() != 5 {
		t.Fatalf("delivered message changed with the sender's: %v", got)
	}
}

func TestMemCutIsOneWay(t *testing.T) {
	net, hs, _ := memNet(t, 3)
	net.SetCut(1, 2, true)
	// Send still succeeds: the message is lost in the network.
	if !net.Transport(1).Send(msg(1, 1, 2, 1)) {
		t.Fatal("send over a cut link refused")
	}
	net.Transport(2).Send(msg(1, 2, 1, 2))
	net.Transport(1).Send(msg(1, 1, 3, 3))
	if got := receive(t, hs[1].msgs, 1)[0]; got.GetMessage().GetIndex() != 2 {
		t.Fatalf("n1 got %v", got)
	}
	if got := receive(t, hs[3].msgs, 1)[0]; got.GetMessage().GetIndex() != 3 {
		t.Fatalf("n3 got %v", got)
	}
	nothingArrives(t, hs[2].msgs)
	if err := net.Transport(1).SendSnapshot(context.Background(), msg(1, 1, 2, 0), bytes.NewReader(nil)); err == nil {
		t.Fatal("snapshot over a cut link succeeded")
	}

	// Restored, the link delivers again (the message lost meanwhile stays lost).
	net.SetCut(1, 2, false)
	net.Transport(1).Send(msg(1, 1, 2, 4))
	if got := receive(t, hs[2].msgs, 1)[0]; got.GetMessage().GetIndex() != 4 {
		t.Fatalf("after restore n2 got %v", got)
	}
}

func TestMemIsolate(t *testing.T) {
	net, hs, ids := memNet(t, 3)
	net.Isolate(1, ids, true)
	for _, to := range []uint64{2, 3} {
		net.Transport(1).Send(msg(1, 1, to, 1))
		net.Transport(to).Send(msg(1, to, 1, 1))
	}
	// The others still talk to each other.
	net.Transport(2).Send(msg(1, 2, 3, 7))
	if got := receive(t, hs[3].msgs, 1)[0]; got.GetFromNodeId() != 2 || got.GetMessage().GetIndex() != 7 {
		t.Fatalf("n3 got %v", got)
	}
	sendAndFlush(t, net, hs[2], 3, 2)
	nothingArrives(t, hs[1].msgs)
	for _, to := range []uint64{2, 3} {
		if err := net.Transport(to).SendSnapshot(context.Background(), msg(1, to, 1, 0), bytes.NewReader(nil)); err == nil {
			t.Fatalf("snapshot from n%d to the isolated node succeeded", to)
		}
	}

	net.Isolate(1, ids, false)
	net.Transport(2).Send(msg(1, 2, 1, 8))
	net.Transport(1).Send(msg(1, 1, 3, 9))
	if got := receive(t, hs[1].msgs, 1)[0]; got.GetMessage().GetIndex() != 8 {
		t.Fatalf("healed n1 got %v", got)
	}
	if got := receive(t, hs[3].msgs, 1)[0]; got.GetMessage().GetIndex() != 9 {
		t.Fatalf("n3 got %v from the healed node", got)
	}
}

// TestMemUnregister: a crash loses the messages to the node still on the
// wire and those sent while it is down; restarted (registered again), it
// receives only what is sent from then on, through its new handler.
func TestMemUnregister(t *testing.T) {
	net, hs, _ := memNet(t, 2)
	// Node 2's handler holds message 1, so message 2 waits on the wire
	// behind it through the crash.
	held := &holdFirst{recorder: hs[2], entered: make(chan struct{}), release: make(chan struct{})}
	net.Register(2, held)
	net.Transport(1).Send(msg(1, 1, 2, 1))
	<-held.entered
	net.Transport(1).Send(msg(1, 1, 2, 2))
	net.Unregister(2)
	net.Transport(1).Send(msg(1, 1, 2, 3))
	if err := net.Transport(1).SendSnapshot(context.Background(), msg(1, 1, 2, 0), bytes.NewReader(nil)); err == nil {
		t.Fatal("snapshot to a crashed node succeeded")
	}
	restarted := newRecorder()
	net.Register(2, restarted)
	net.Transport(1).Send(msg(1, 1, 2, 4))
	close(held.release)
	if got := receive(t, hs[2].msgs, 1)[0]; got.GetMessage().GetIndex() != 1 {
		t.Fatalf("crashed node got %v", got)
	}
	if got := receive(t, restarted.msgs, 1)[0]; got.GetMessage().GetIndex() != 4 {
		t.Fatalf("restarted node got %v first, want message 4", got)
	}
	nothingArrives(t, restarted.msgs)
	nothingArrives(t, hs[2].msgs)
}

// holdFirst is a recorder whose first delivery waits for release.
type holdFirst struct {
	*recorder
	entered, release chan struct{}
	once             sync.Once
}

func (h *holdFirst) HandleRaftMessage(m *tidekvpb.RaftMessage) {
	h.once.Do(func() { close(h.entered); <-h.release })
	h.recorder.HandleRaftMessage(m)
}

func TestMemSnapshot(t *testing.T) {
	net, hs, _ := memNet(t, 2)
	data := bytes.Repeat([]byte("0123456789"), 300_000)
	var got []byte
	var gotHdr *tidekvpb.RaftMessage
	hs[2].setSnap(func(hdr *tidekvpb.RaftMessage, r io.Reader) error {
		gotHdr = hdr
		var err error
		got, err = io.ReadAll(r)
		return err
	})
	hdr := snapHeader()
	if err := net.Transport(1).SendSnapshot(context.Background(), hdr, bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	// Synchronous: the handler has finished when SendSnapshot returns.
	if !bytes.Equal(got, data) {
		t.Fatalf("got %d bytes, want %d", len(got), len(data))
	}
	gotHdr.RangeId = 1234
	if hdr.GetRangeId() == 1234 {
		t.Fatal("receiver shares the sender's header")
	}
	hs[2].setSnap(func(*tidekvpb.RaftMessage, io.Reader) error { return errors.New("overlaps range 9") })
	err := net.Transport(1).SendSnapshot(context.Background(), hdr, bytes.NewReader(data))
	if err == nil || err.Error() != "overlaps range 9" {
		t.Fatalf("refusal: %v", err)
	}
}
