package nodereport

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/raftstore"
)

// fakeNode holds no replicas and records the reports it is asked to send.
type fakeNode struct {
	Node
	reports chan *tidekvpb.ReportRangeRequest
}

func (fakeNode) ID() uint64                           { return 4 }
func (fakeNode) Replica(id uint64) *raftstore.Replica { return nil }
func (fakeNode) Garbage(id uint64) uint64             { return 100 * id }

func (n fakeNode) ReportRange(ctx context.Context, req *tidekvpb.ReportRangeRequest) (*tidekvpb.ReportRangeResponse, error) {
	n.reports <- req
	return &tidekvpb.ReportRangeResponse{}, nil
}

// A queued range is reported by Send, from this node with its garbage; a
// full queue drops the report rather than block the caller (the periodic
// report catches up).
func TestQueuedReportsSent(t *testing.T) {
	n := fakeNode{reports: make(chan *tidekvpb.ReportRangeRequest, 1)}
	r := New(n, Handles{})
	for i := 0; i < cap(r.queue)+10; i++ {
		r.Queue(&tidekvpb.RangeDescriptor{RangeId: 7})
	}
	if len(r.queue) != cap(r.queue) {
		t.Fatalf("queue holds %d, want it full (%d)", len(r.queue), cap(r.queue))
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { r.Send(stop); close(done) }()
	select {
	case req := <-n.reports:
		if req.GetDesc().GetRangeId() != 7 || req.GetLeaderNodeId() != 4 || req.GetGarbageBytes() != 700 {
			t.Fatalf("report %v, want range 7 from node 4 with 700 garbage bytes", req)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no report sent")
	}
	close(stop)
	for { // Send returns once it sees stop, between reports
		select {
		case <-done:
			return
		case <-n.reports:
		}
	}
}

// The rejected rate is the counter's growth over the time between two
// heartbeats; the first heartbeat, and a counter that went back, report 0.
func TestRejectedRate(t *testing.T) {
	var h heartbeatRates
	t0 := time.Unix(1000, 0)
	if got := h.rejectedRate(50, t0); got != 0 {
		t.Fatalf("first rate %v, want 0", got)
	}
	if got := h.rejectedRate(70, t0.Add(2*time.Second)); got != 10 {
		t.Fatalf("rate %v, want 10/s", got)
	}
	if got := h.rejectedRate(5, t0.Add(3*time.Second)); got != 0 {
		t.Fatalf("rate after the counter went back %v, want 0", got)
	}
}

// recorder is a node that keeps its events.
type recorder struct {
	fakeNode
	events *[]string
}

func (n recorder) Record(kind, subject, format string, args ...any) {
	*n.events = append(*n.events, kind+" "+subject+" "+fmt.Sprintf(format, args...))
}

// A heartbeat answer refused for its log version is said once, however
// many heartbeats bring it (a node behind keeps hearing it).
func TestLogVersionRefusedSaidOnce(t *testing.T) {
	var evs []string
	r := New(recorder{events: &evs}, Handles{})
	for range 3 {
		r.logVersionRefused(errors.New("log version 12 is above this binary's 11"))
	}
	if want := []string{"log-version node 4 log version 12 is above this binary's 11"}; !slices.Equal(evs, want) {
		t.Fatalf("events %q, want %q", evs, want)
	}
}
