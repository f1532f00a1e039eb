package e2e

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/client"
	"github.com/tidekv/tidekv/internal/linearizability"
	"github.com/tidekv/tidekv/internal/testcluster"
	"github.com/tidekv/tidekv/internal/testutil/tier"
)

// Placement of the real binary under churn (the multi-process versions of
// internal/server/placement_test.go): scaling a cluster out from one node
// under a porcupine-checked workload, decommissioning a node under load, and
// SIGKILLs in the middle of a replica move and of the placement
// controller's work. Placement runs with the binary's defaults (rebalancing
// on); only the dead-node grace is shortened, and where a move has to be
// caught in flight the snapshot rate is capped so that it lasts seconds.

// plArgs are the server flags of every test here: a dead-node grace of 8 s
// instead of 20 s (it must exceed the 5 s liveness timeout).
var plArgs = []string{"--dead-node-grace", "8s"}

// plSlowSnapshots caps each node's outgoing snapshots at about 1 MB/s, so
// that moving a range of a few MB keeps its learner visible for seconds.
var plSlowSnapshots = []string{"--snapshot-rate", "1000000"}

const plMetaRange = 1

// ---- cluster observations ----

// plRanges reads the range directory.
func plRanges(ctx context.Context, cl *client.Client) (*tidekvpb.RangesResponse, error) {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := cl.Ranges(cctx)
	if err == nil && len(resp.GetRanges()) == 0 {
		err = errors.New("no ranges reported")
	}
	return resp, err
}

// plDesc formats a descriptor's replicas compactly: n1 n2 n4(L) ...
func plDesc(d *tidekvpb.RangeDescriptor) string {
	var parts []string
	for _, r := range d.GetReplicas() {
		s := fmt.Sprintf("n%d", r.GetNodeId())
		switch r.GetType() {
		case tidekvpb.ReplicaType_LEARNER:
			s += "(L)"
			if r.GetAdaptive() {
				s += "(adaptive)"
			}
		case tidekvpb.ReplicaType_VOTER_INCOMING:
			s += "(in)"
		case tidekvpb.ReplicaType_VOTER_OUTGOING:
			s += "(out)"
		}
		parts = append(parts, s)
	}
	return fmt.Sprintf("r%d[%s]", d.GetRangeId(), strings.Join(parts, " "))
}

// plQuorumVoters is the voter count that matters for safety: during a
// joint change the smaller of the outgoing and the incoming configuration.
func plQuorumVoters(d *tidekvpb.RangeDescriptor) int {
	old, nu := 0, 0
	for _, r := range d.GetReplicas() {
		switch r.GetType() {
		case tidekvpb.ReplicaType_VOTER:
			old++
			nu++
		case tidekvpb.ReplicaType_VOTER_OUTGOING:
			old++
		case tidekvpb.ReplicaType_VOTER_INCOMING:
			nu++
		}
	}
	return min(old, nu)
}

func plLayout(resp *tidekvpb.RangesResponse) string {
	var parts []string
	for _, r := range resp.GetRanges() {
		parts = append(parts, fmt.Sprintf("%s lh=n%d", plDesc(r.GetDesc()), r.GetLeaderNodeId()))
	}
	return strings.Join(parts, ", ")
}

// plConverged reports why the directory is not in its steady state: every
// user range with exactly rf voters, nothing in a joint state, no learner
// but adaptive ones, a known leaseholder, and no replica on a node in
// exclude.
func plConverged(resp *tidekvpb.RangesResponse, rf int, exclude ...uint64) error {
	for _, r := range resp.GetRanges() {
		d := r.GetDesc()
		if v := voters(d); v != rf {
			return fmt.Errorf("range %d has %d voters, want %d: %s", d.GetRangeId(), v, rf, plDesc(d))
		}
		for _, rd := range d.GetReplicas() {
			switch {
			case rd.GetType() == tidekvpb.ReplicaType_LEARNER && !rd.GetAdaptive():
				return fmt.Errorf("range %d has a leftover learner on node %d: %s", d.GetRangeId(), rd.GetNodeId(), plDesc(d))
			case rd.GetType() != tidekvpb.ReplicaType_VOTER && rd.GetType() != tidekvpb.ReplicaType_LEARNER:
				return fmt.Errorf("range %d is in a joint configuration: %s", d.GetRangeId(), plDesc(d))
			case slices.Contains(exclude, rd.GetNodeId()):
				return fmt.Errorf("range %d still has a replica on node %d: %s", d.GetRangeId(), rd.GetNodeId(), plDesc(d))
			}
		}
		if r.GetLeaderNodeId() == 0 {
			return fmt.Errorf("range %d has no known leaseholder", d.GetRangeId())
		}
	}
	return nil
}

// plMetaVoters counts the running nodes holding a voter of the meta range
// (which the directory does not list), and returns the node index of its
// leader (0 if none answered as leader).
func plMetaVoters(ctx context.Context, tc *testcluster.Cluster, cl *client.Client) (n, leader int) {
	for i := 1; i <= tc.N(); i++ {
		if !tc.Node(i).Running() {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		st, err := cl.LocalStatus(cctx, tc.Addr(i))
		cancel()
		if err != nil {
			continue
		}
		for _, r := range st.GetReplicas() {
			if r.GetRangeId() != plMetaRange {
				continue
			}
			if r.GetType() == tidekvpb.ReplicaType_VOTER {
				n++
			}
			if r.GetLeader() {
				leader = i
			}
		}
	}
	return n, leader
}

// plWaitConverged waits until plConverged holds and the meta range has rf
// voters on running nodes; it returns the final directory.
func plWaitConverged(ctx context.Context, t *testing.T, tc *testcluster.Cluster, cl *client.Client, d time.Duration, rf int, exclude ...uint64) *tidekvpb.RangesResponse {
	t.Helper()
	return plAwaitConverged(ctx, t, tc, cl, d, rf, nil, exclude...)
}

// plAwaitConverged is plWaitConverged; onStuck, if not nil, is called (and
// the wait ends) when a leftover learner stays for plStuckAfter.
func plAwaitConverged(ctx context.Context, t *testing.T, tc *testcluster.Cluster, cl *client.Client, d time.Duration, rf int, onStuck func(string), exclude ...uint64) *tidekvpb.RangesResponse {
	t.Helper()
	start := time.Now()
	var resp *tidekvpb.RangesResponse
	stuck := newPlStuck()
	var stuckDesc string
	err := eventually(ctx, d, func(ctx context.Context) error {
		var err error
		if resp, err = plRanges(ctx, cl); err != nil {
			return err
		}
		if stuckDesc = stuck.observe(resp); stuckDesc != "" && onStuck != nil {
			return nil
		}
		if err := plConverged(resp, rf, exclude...); err != nil {
			return err
		}
		if n, _ := plMetaVoters(ctx, tc, cl); n < rf {
			return fmt.Errorf("the meta range has voters on %d running nodes, want %d", n, rf)
		}
		return nil
	})
	if err == nil && stuckDesc != "" && onStuck != nil {
		t.Logf("directory: %s", plLayout(resp))
		onStuck(stuckDesc)
	}
	if err != nil {
		if resp != nil {
			t.Logf("directory: %s", plLayout(resp))
		}
		t.Fatalf("the cluster did not converge within %v: %v", d, err)
	}
	t.Logf("converged after %v: %s", time.Since(start).Round(time.Millisecond), plLayout(resp))
	return resp
}

// plStuckAfter is how long a learner may stay in the directory, its range
// otherwise unchanged, before it counts as left over: far longer than any
// move of these tests takes (a few MB at ~1 MB/s).
const plStuckAfter = 20 * time.Second

// plStuck notices leftover learners across polls of the directory.
type plStuck struct{ since map[string]time.Time }

func newPlStuck() *plStuck { return &plStuck{since: map[string]time.Time{}} }

// observe returns the descriptor of a range whose non-adaptive learner has
// been there, with the same replicas, for plStuckAfter; else "".
func (s *plStuck) observe(resp *tidekvpb.RangesResponse) string {
	now := time.Now()
	seen := map[string]bool{}
	found := ""
	for _, r := range resp.GetRanges() {
		d := r.GetDesc()
		for _, rd := range d.GetReplicas() {
			if rd.GetType() != tidekvpb.ReplicaType_LEARNER || rd.GetAdaptive() {
				continue
			}
			key := plDesc(d)
			seen[key] = true
			if _, ok := s.since[key]; !ok {
				s.since[key] = now
			}
			if now.Sub(s.since[key]) >= plStuckAfter {
				found = key
			}
		}
	}
	for k := range s.since {
		if !seen[k] {
			delete(s.since, k)
		}
	}
	return found
}

// plLeftoverLearner fails the test: a learner left by an interrupted move
// stayed for plStuckAfter although placement removes such learners after
// its learner grace (set to plLearnerGrace by these tests).
func plLeftoverLearner(t *testing.T, format string, args ...any) {
	t.Helper()
	t.Fatalf("leftover learner not cleaned up: "+format, args...)
}

// plLearnerGrace shortens placement's learner grace so that a learner left
// over by an interrupted move goes well within plStuckAfter.
const plLearnerGrace = "5s"

func plShortLearnerGrace(ctx context.Context, t *testing.T, cl *client.Client) {
	t.Helper()
	if _, err := cl.Settings(ctx, map[string]string{"learner-grace": plLearnerGrace}); err != nil {
		t.Fatalf("setting learner-grace: %v", err)
	}
}

func plReplicasOn(resp *tidekvpb.RangesResponse, node uint64) int {
	n := 0
	for _, r := range resp.GetRanges() {
		for _, rd := range r.GetDesc().GetReplicas() {
			if rd.GetNodeId() == node {
				n++
			}
		}
	}
	return n
}

// plMetaLeader finds the meta range's leaseholder (the placement
// controller) through every running node's local status.
func plMetaLeader(ctx context.Context, t *testing.T, tc *testcluster.Cluster, cl *client.Client) int {
	t.Helper()
	var idx int
	if err := eventually(ctx, 20*time.Second, func(ctx context.Context) error {
		if _, idx = plMetaVoters(ctx, tc, cl); idx == 0 {
			return errors.New("no node leads the meta range")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return idx
}

// ---- ctl ----

// plEvent is one event of `ctl events --json`.
type plEvent struct {
	Time    time.Time `json:"time"`
	Node    uint64    `json:"node"`
	Kind    string    `json:"kind"`
	Subject string    `json:"subject"`
	Reason  string    `json:"reason"`
}

func (e plEvent) String() string {
	return fmt.Sprintf("%s n%d %-15s %-9s %s", e.Time.Format("15:04:05.000"), e.Node, e.Kind, e.Subject, e.Reason)
}

// plCtlEvents runs `ctl events --json --limit 0` against addrs.
func plCtlEvents(ctx context.Context, bin string, addrs ...string) ([]plEvent, error) {
	cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	out, code, err := ctl(cctx, bin, strings.Join(addrs, ","), "--timeout", "10s", "events", "--json", "--limit", "0")
	if err != nil {
		return nil, fmt.Errorf("exit %d: %w", code, err)
	}
	var v struct {
		Events []plEvent `json:"events"`
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		return nil, fmt.Errorf("ctl events --json: %v\n%s", err, out)
	}
	return v.Events, nil
}

// plFindEvents returns the events of kind whose reason contains part and
// whose subject is subject (any if "").
func plFindEvents(evs []plEvent, kind, part, subject string) []plEvent {
	var out []plEvent
	for _, e := range evs {
		if e.Kind == kind && strings.Contains(e.Reason, part) && (subject == "" || e.Subject == subject) {
			out = append(out, e)
		}
	}
	return out
}

// plWaitEvents waits until `ctl events` shows every wanted {kind, reason
// part, subject} (an operator's event is recorded when its call returns).
func plWaitEvents(ctx context.Context, t *testing.T, bin string, addrs []string, want ...[3]string) []plEvent {
	t.Helper()
	var evs []plEvent
	err := eventually(ctx, 20*time.Second, func(ctx context.Context) error {
		var err error
		if evs, err = plCtlEvents(ctx, bin, addrs...); err != nil {
			return err
		}
		for _, w := range want {
			if len(plFindEvents(evs, w[0], w[1], w[2])) == 0 {
				return fmt.Errorf("no %s event about %q mentioning %q", w[0], w[2], w[1])
			}
		}
		return nil
	})
	if err != nil {
		for _, e := range evs {
			t.Logf("  %s", e)
		}
		t.Fatalf("ctl events: %v", err)
	}
	return evs
}

// plNodeStatus is one node of `ctl status --json`.
type plNodeStatus struct {
	ID       uint64 `json:"id"`
	State    string `json:"state"`
	Live     bool   `json:"live"`
	Replicas int    `json:"replicas"`
	Leases   int    `json:"leases"`
}

// plCtlStatus runs `ctl status --json` against addrs and returns the node
// with the given id.
func plCtlStatus(ctx context.Context, bin string, node uint64, addrs ...string) (plNodeStatus, error) {
	cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	out, code, err := ctl(cctx, bin, strings.Join(addrs, ","), "--timeout", "10s", "status", "--json")
	if err != nil {
		return plNodeStatus{}, fmt.Errorf("exit %d: %w", code, err)
	}
	var v struct {
		Nodes []plNodeStatus `json:"nodes"`
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		return plNodeStatus{}, fmt.Errorf("ctl status --json: %v\n%s", err, out)
	}
	for _, n := range v.Nodes {
		if n.ID == node {
			return n, nil
		}
	}
	return plNodeStatus{}, fmt.Errorf("ctl status lists no node %d: %s", node, out)
}

// plWaitState waits until `ctl status` shows node in state.
func plWaitState(ctx context.Context, t *testing.T, bin string, addrs []string, node uint64, state string, d time.Duration) {
	t.Helper()
	start := time.Now()
	var last plNodeStatus
	if err := eventually(ctx, d, func(ctx context.Context) error {
		var err error
		if last, err = plCtlStatus(ctx, bin, node, addrs...); err != nil {
			return err
		}
		if last.State != state {
			return fmt.Errorf("node %d is %q (%d replicas), want %q", node, last.State, last.Replicas, state)
		}
		return nil
	}); err != nil {
		t.Fatalf("ctl status: %v", err)
	}
	t.Logf("ctl status: node %d is %s after %v", node, state, time.Since(start).Round(time.Millisecond))
}

// plAddrsExcept lists the gRPC addresses of the nodes but those given.
func plAddrsExcept(tc *testcluster.Cluster, skip ...int) []string {
	var out []string
	for i := 1; i <= tc.N(); i++ {
		if !slices.Contains(skip, i) {
			out = append(out, tc.Addr(i))
		}
	}
	return out
}

// ---- data ----

// plFill writes n keys prefix%05d with values of size bytes (and the key
// in front, so each is distinct), eight at a time.
func plFill(ctx context.Context, t *testing.T, cl *client.Client, prefix string, n, size int) {
	t.Helper()
	start := time.Now()
	var wg sync.WaitGroup
	var failed atomic.Value
	next := atomic.Int64{}
	for range 8 {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n || failed.Load() != nil {
					return
				}
				k, v := plFillKV(prefix, i, size)
				if err := eventually(ctx, 20*time.Second, func(ctx context.Context) error { return cl.Put(ctx, k, v) }); err != nil {
					failed.Store(fmt.Errorf("put %s: %w", k, err))
					return
				}
			}
		})
	}
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %d keys of %d bytes under %s in %v", n, size, prefix, time.Since(start).Round(time.Millisecond))
}

// plFillKV is plFill's i-th pair: the value is the key followed by
// pseudo-random bytes derived from i (incompressible, so that snapshots
// really carry size bytes per key).
func plFillKV(prefix string, i, size int) (k, v []byte) {
	k = []byte(fmt.Sprintf("%s%05d", prefix, i))
	v = append(make([]byte, 0, max(size, len(k))), k...)
	rng := rand.New(rand.NewPCG(uint64(i), 0x9e3779b97f4a7c15))
	for len(v) < size {
		v = binary.LittleEndian.AppendUint64(v, rng.Uint64())
	}
	return k, v[:max(size, len(k))]
}

// plCheckFill checks that the n keys plFill wrote are all there, intact.
func plCheckFill(ctx context.Context, t *testing.T, cl *client.Client, prefix string, n, size int) {
	t.Helper()
	kvs := plScan(ctx, t, cl, prefix)
	if len(kvs) != n {
		t.Fatalf("scan %s: %d keys, want %d", prefix, len(kvs), n)
	}
	for i, kv := range kvs {
		k, v := plFillKV(prefix, i, size)
		if !bytes.Equal(kv.Key, k) || !bytes.Equal(kv.Value, v) {
			t.Fatalf("scan %s: entry %d is %q (%d bytes), want %q (%d bytes)", prefix, i, kv.Key, len(kv.Value), k, len(v))
		}
	}
	t.Logf("all %d keys under %s read back intact", n, prefix)
}

// plScan scans every key with prefix (prefixes here end in '/').
func plScan(ctx context.Context, t *testing.T, cl *client.Client, prefix string) []client.KeyValue {
	t.Helper()
	end := []byte(prefix)
	end[len(end)-1]++
	var kvs []client.KeyValue
	if err := eventually(ctx, 30*time.Second, func(ctx context.Context) (err error) {
		cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		kvs, err = cl.Scan(cctx, []byte(prefix), end, 0)
		return err
	}); err != nil {
		t.Fatalf("scan %s: %v", prefix, err)
	}
	return kvs
}

// plSplit splits at each key (retrying across failover).
func plSplit(ctx context.Context, t *testing.T, cl *client.Client, keys ...string) {
	t.Helper()
	for _, k := range keys {
		// Done once the range directory shows a range starting at k: an
		// ambiguous split may have happened, and a split that did is in
		// the directory only a moment after it applies, while the tests
		// pick ranges from the directory (a move of the range "at" k read
		// just after the split found the left half, empty, and moved it
		// too fast to see its learner).
		split := false
		err := eventually(ctx, 20*time.Second, func(ctx context.Context) error {
			if resp, err := cl.Ranges(ctx); err == nil {
				if r := rangeFor(resp, []byte(k)); r != nil && bytes.Equal(r.GetDesc().GetStartKey(), []byte(k)) {
					return nil
				}
			}
			if split {
				return fmt.Errorf("the range directory does not show the split at %s yet", k)
			}
			if _, err := cl.Split(ctx, []byte(k)); err != nil {
				return err
			}
			split = true
			return fmt.Errorf("split at %s; waiting for the range directory", k)
		})
		if err != nil {
			t.Fatalf("split at %s: %v", k, err)
		}
	}
}

// plAckLoad is a simple load of its own keys: writers put fresh keys
// (prefix/w<writer>/<seq>, each written once) and remember which were
// acknowledged; readers read acknowledged keys back, where anything but
// the acknowledged value is a lost write. verify then checks every
// acknowledged write is readable.
type plAckLoad struct {
	prefix string

	mu         sync.Mutex
	acked      map[string]string // acknowledged key → value
	unsure     map[string]string // outcome unknown: may or may not exist
	ackedKeys  []string
	writeErrs  map[string]int
	violations []string

	reads, readErrs atomic.Int64
	stop            context.CancelFunc
	wg              sync.WaitGroup
}

// plStartAckLoad runs writers and readers on cl until stop.
func plStartAckLoad(ctx context.Context, cl *client.Client, prefix string, writers, readers int) *plAckLoad {
	l := &plAckLoad{prefix: prefix, acked: map[string]string{}, unsure: map[string]string{}, writeErrs: map[string]int{}}
	ctx, l.stop = context.WithCancel(ctx)
	for w := range writers {
		l.wg.Go(func() {
			for seq := 0; ctx.Err() == nil; seq++ {
				k := fmt.Sprintf("%sw%d/%06d", prefix, w, seq)
				v := fmt.Sprintf("v%d-%d", w, seq)
				octx, cancel := context.WithTimeout(ctx, 5*time.Second)
				err := cl.Put(octx, []byte(k), []byte(v))
				cancel()
				l.mu.Lock()
				if err == nil {
					l.acked[k] = v
					l.ackedKeys = append(l.ackedKeys, k)
				} else {
					l.unsure[k] = v
					msg := err.Error()
					if len(msg) > 100 {
						msg = msg[:100] + "..."
					}
					if len(l.writeErrs) < 10 || l.writeErrs[msg] > 0 {
						l.writeErrs[msg]++
					}
				}
				l.mu.Unlock()
				if err != nil {
					select {
					case <-ctx.Done():
					case <-time.After(50 * time.Millisecond):
					}
				}
			}
		})
	}
	for r := range readers {
		rng := rand.New(rand.NewPCG(uint64(r), uint64(time.Now().UnixNano())))
		l.wg.Go(func() {
			for ctx.Err() == nil {
				l.mu.Lock()
				n := len(l.ackedKeys)
				var k, want string
				if n > 0 {
					k = l.ackedKeys[rng.IntN(n)]
					want = l.acked[k]
				}
				l.mu.Unlock()
				if n == 0 {
					time.Sleep(20 * time.Millisecond)
					continue
				}
				octx, cancel := context.WithTimeout(ctx, 5*time.Second)
				v, err := cl.Get(octx, []byte(k))
				cancel()
				l.reads.Add(1)
				switch {
				case err == nil && string(v) != want:
					l.violate("read %s = %q, acknowledged %q", k, v, want)
				case errors.Is(err, client.ErrNotFound):
					l.violate("read %s: not found, acknowledged %q", k, want)
				case err != nil:
					l.readErrs.Add(1)
					time.Sleep(20 * time.Millisecond)
				}
			}
		})
	}
	return l
}

func (l *plAckLoad) violate(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.violations) < 20 {
		l.violations = append(l.violations, fmt.Sprintf(format, args...))
	}
}

// ackedCount is how many writes were acknowledged so far.
func (l *plAckLoad) ackedCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.acked)
}

// halt stops the load and waits for it.
func (l *plAckLoad) halt() {
	l.stop()
	l.wg.Wait()
}

// verify checks what the readers saw, then scans the prefix: every
// acknowledged write is there with its value, and nothing else is but
// writes of unknown outcome.
func (l *plAckLoad) verify(ctx context.Context, t *testing.T, cl *client.Client, when string) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	t.Logf("%s: load wrote %d keys acknowledged, %d of unknown outcome; %d reads (%d failed)",
		when, len(l.acked), len(l.unsure), l.reads.Load(), l.readErrs.Load())
	for msg, n := range l.writeErrs {
		t.Logf("  %4d x put: %s", n, msg)
	}
	for _, v := range l.violations {
		t.Errorf("%s: lost write seen by a reader: %s", when, v)
	}
	if len(l.acked) < 20 {
		t.Errorf("%s: only %d writes acknowledged: the load proves too little", when, len(l.acked))
	}
	got := map[string]string{}
	for _, kv := range plScan(ctx, t, cl, l.prefix) {
		got[string(kv.Key)] = string(kv.Value)
	}
	bad := 0
	resp, _ := plRanges(ctx, cl) // to say where lost writes should be
	for k, want := range l.acked {
		if v, ok := got[k]; !ok || v != want {
			if bad++; bad <= 10 {
				where := "range unknown"
				if r := rangeFor(resp, []byte(k)); r != nil {
					where = fmt.Sprintf("in %s lh=n%d", plDesc(r.GetDesc()), r.GetLeaderNodeId())
				}
				t.Errorf("%s: acknowledged write %s=%s lost (found %v, %q), %s", when, k, want, ok, v, where)
			}
		}
	}
	for k, v := range got {
		if l.acked[k] != v && l.unsure[k] != v {
			if bad++; bad <= 10 {
				t.Errorf("%s: %s=%q was never written", when, k, v)
			}
		}
	}
	if bad == 0 {
		t.Logf("%s: all %d acknowledged writes read back (%d keys in all)", when, len(l.acked), len(got))
	}
}

// plVoterWatch polls the directory in the background and remembers the
// fewest voters any range had (counting a joint configuration's smaller
// half), and in what layout.
type plVoterWatch struct {
	stop context.CancelFunc
	done chan struct{}

	mu       sync.Mutex
	min      int
	minSeen  string
	polls    int
	learners map[uint64]bool // nodes a non-adaptive learner was seen on
}

func plWatchVoters(ctx context.Context, cl *client.Client) *plVoterWatch {
	w := &plVoterWatch{done: make(chan struct{}), min: 1 << 30, learners: map[uint64]bool{}}
	ctx, w.stop = context.WithCancel(ctx)
	go func() {
		defer close(w.done)
		for ctx.Err() == nil {
			if resp, err := plRanges(ctx, cl); err == nil {
				w.mu.Lock()
				w.polls++
				for _, r := range resp.GetRanges() {
					if v := plQuorumVoters(r.GetDesc()); v < w.min {
						w.min, w.minSeen = v, plDesc(r.GetDesc())
					}
					for _, rd := range r.GetDesc().GetReplicas() {
						if rd.GetType() == tidekvpb.ReplicaType_LEARNER && !rd.GetAdaptive() {
							w.learners[rd.GetNodeId()] = true
						}
					}
				}
				w.mu.Unlock()
			}
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	return w
}

func (w *plVoterWatch) halt() (minVoters int, seen string, polls int) {
	w.stop()
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.min, w.minSeen, w.polls
}

// plLearnerIn waits until the directory shows range rangeID with a
// (non-adaptive) learner on node, polling fast: a move's learner is
// there only while the snapshot is sent.
func plLearnerIn(ctx context.Context, cl *client.Client, rangeID, node uint64, d time.Duration) (*tidekvpb.RangeDescriptor, error) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var last *tidekvpb.RangeDescriptor
	for {
		if resp, err := plRanges(ctx, cl); err == nil {
			for _, r := range resp.GetRanges() {
				if r.GetDesc().GetRangeId() != rangeID {
					continue
				}
				last = r.GetDesc()
				for _, rd := range last.GetReplicas() {
					if rd.GetNodeId() == node && rd.GetType() == tidekvpb.ReplicaType_LEARNER && !rd.GetAdaptive() {
						return last, nil
					}
				}
			}
		}
		select {
		case <-ctx.Done():
			return last, fmt.Errorf("no learner of range %d on node %d appeared within %v (last seen %s)", rangeID, node, d, plDesc(last))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// ---- 1. scale out 1 → 4 under a checked workload ----

// TestScaleOneToFourLinearizable starts one node (with the default
// replication factor 3, so its ranges are under-replicated until others
// join), runs the porcupine workload of linearizability_test.go and an
// acknowledged-writes load, and adds nodes 2, 3 and 4 one at a time,
// waiting each time for the replicas to arrive. The history must be
// linearizable, every acknowledged write readable, every range at 3
// voters, and node 4 must have been bootstrapped with replicas (as `ctl
// events` says).
func TestScaleOneToFourLinearizable(t *testing.T) {
	tier.RequireLong(t, "three scale-outs under a checked workload, about 30 s")
	dwell := 3 * time.Second // workload time after each node has its replicas
	if long() {
		dwell = 20 * time.Second
	}
	tc := testcluster.Start(t, testcluster.Options{Nodes: 1, MaxNodes: 4, ExtraArgs: plArgs, LogLines: 150})
	ctx := testCtx(t, 5*time.Minute)
	bin := testcluster.Binary(t)
	admin := newClient(t, tc.Addrs()) // node 1 only: the client learns the rest

	// Some data over a few ranges, so that scaling out has something to
	// replicate and to give the new nodes; the workload's keys straddle a
	// boundary.
	plFill(ctx, t, admin, "scale/bulk/", 400, 512)
	plSplit(ctx, t, admin, "linz/k2", "scale/", "scale/bulk/00200")
	resp, err := plRanges(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("one node: %s", plLayout(resp))

	keys := linearizability.Keys(4)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rec := linearizability.NewRecorder()
	stats := &linearizability.Stats{}
	errs := &linzErrors{}
	wctx, stopWorkers := context.WithCancel(ctx)
	defer stopWorkers()
	var wg sync.WaitGroup
	const workers = 6
	for i := range workers {
		w := linearizability.NewClient(i, rec, keys, seed)
		w.OnReply = func(in linearizability.Input, start time.Time, res linearizability.Reply) {
			stats.Record(in, start, res)
			errs.record(in, res)
		}
		do := linearizability.ClientDo(wctx, newClient(t, tc.Addrs()))
		wg.Go(func() {
			for wctx.Err() == nil {
				w.Step(do)
			}
		})
	}
	load := plStartAckLoad(ctx, newClient(t, tc.Addrs()), "scale/w/", 1, 1)
	defer load.halt()

	stats.Mark("1 node")
	time.Sleep(2 * time.Second) // a single-node start
	var newID uint64
	for want := 2; want <= 4; want++ {
		stats.Mark(fmt.Sprintf("add node %d", want))
		start := time.Now()
		i := tc.AddNode()
		if i != want {
			t.Fatalf("AddNode started node %d, want %d", i, want)
		}
		id := tc.NodeID(i)
		if want < 4 {
			// Up-replication: every range (meta included) gains a voter.
			err := eventually(ctx, 45*time.Second, func(ctx context.Context) error {
				resp, err := plRanges(ctx, admin)
				if err != nil {
					return err
				}
				for _, r := range resp.GetRanges() {
					if v := voters(r.GetDesc()); v < want {
						return fmt.Errorf("range %d has %d voters, want %d: %s", r.GetDesc().GetRangeId(), v, want, plDesc(r.GetDesc()))
					}
				}
				if n, _ := plMetaVoters(ctx, tc, admin); n < want {
					return fmt.Errorf("the meta range has %d voters, want %d", n, want)
				}
				return nil
			})
			if err != nil {
				t.Fatalf("after adding node %d: %v", want, err)
			}
		} else {
			// Scale-out beyond the replication factor: bootstrap gives
			// the new node replicas taken from the others.
			newID = id
			err := eventually(ctx, 45*time.Second, func(ctx context.Context) error {
				resp, err := plRanges(ctx, admin)
				if err != nil {
					return err
				}
				n := 0
				for _, r := range resp.GetRanges() {
					for _, rd := range r.GetDesc().GetReplicas() {
						if rd.GetNodeId() == id && rd.GetType() == tidekvpb.ReplicaType_VOTER {
							n++
						}
					}
				}
				if n < 2 {
					return fmt.Errorf("node %d holds %d voters: %s", id, n, plLayout(resp))
				}
				return nil
			})
			if err != nil {
				t.Fatalf("the new node 4 got no replicas: %v", err)
			}
		}
		resp, _ := plRanges(ctx, admin)
		t.Logf("node %d (id %d) serving with its replicas after %v: %s", want, id, time.Since(start).Round(time.Millisecond), plLayout(resp))
		time.Sleep(dwell)
	}
	if long() {
		plWaitEvents(ctx, t, bin, tc.Addrs(), [3]string{"bootstrap", "bootstrap done", fmt.Sprintf("node %d", newID)})
	}
	end := time.Now()
	stopWorkers()
	wg.Wait()
	load.halt()

	final := plWaitConverged(ctx, t, tc, admin, 60*time.Second, 3)
	if n := plReplicasOn(final, newID); n == 0 {
		t.Errorf("node 4 (id %d) holds no replica at the end: %s", newID, plLayout(final))
	}
	evs := plWaitEvents(ctx, t, bin, tc.Addrs(),
		[3]string{"bootstrap", "bootstrap phase 1", fmt.Sprintf("node %d", newID)},
		[3]string{"replica-add", "replication: 1 of 3 voters", ""},
		[3]string{"replica-add", "replication: 2 of 3 voters", ""},
		[3]string{"node-join", "joined the cluster", fmt.Sprintf("node %d", newID)})
	for _, e := range evs {
		if e.Kind == "bootstrap" || strings.HasPrefix(e.Reason, "replica moved") && strings.Contains(e.Reason, "bootstrap") {
			t.Logf("  %s", e)
		}
	}
	load.verify(ctx, t, admin, "after scaling out")

	t.Logf("operations: %s", stats)
	for msg, n := range errs.errs {
		t.Logf("  %4d x %s", n, msg)
	}
	for _, ev := range stats.Events(end) {
		t.Logf("after %-14s %5d successful ops", ev.What+":", ev.Ok)
		if ev.Ok < 10 {
			t.Errorf("only %d successful operations between %q and the next step", ev.Ok, ev.What)
		}
	}
	// Final reads of every key, by a client of their own, join the history:
	// the state the cluster ends in must be one the history explains.
	for _, k := range keys {
		err := eventually(ctx, 20*time.Second, func(ctx context.Context) error {
			return rec.Run(workers, linearizability.GetInput(k), linearizability.ClientDo(ctx, admin)).Err
		})
		if err != nil {
			t.Fatalf("final read of %s: %v", k, err)
		}
	}
	res := linearizability.CheckWithArtifacts(t, rec.History(), 3*time.Minute)
	if !res.Ok {
		logFiles(t, tc)
		t.Fatalf("history is not linearizable (seed %d)", seed)
	}
	if res.Ops < 500 {
		t.Fatalf("only %d operations checked: the test proves too little", res.Ops)
	}
}

// ---- 2. decommission under load ----

// TestDecommissionUnderLoad decommissions, with `ctl decommission --wait`,
// a node of a 4-node cluster holding replicas while writers and readers
// run: it must end "drained" with no range ever below 3 voters, every
// acknowledged write readable, every range at 3 voters off the node, and
// `ctl status` showing it drained; stopped, it is decommissioned.
func TestDecommissionUnderLoad(t *testing.T) {
	tier.RequireLong(t, "drains a node under load, about 20 s")
	nbulk := 300
	if long() {
		nbulk = 3000
	}
	tc := testcluster.Start(t, testcluster.Options{Nodes: 4, ExtraArgs: plArgs, LogLines: 150})
	ctx := testCtx(t, 4*time.Minute)
	bin := testcluster.Binary(t)
	cl := newClient(t, tc.Addrs())
	waitReplicated(ctx, t, cl, 3)

	plFill(ctx, t, cl, "dec/bulk/", nbulk, 1024)
	splits := []string{"dec/w/", "dec/w/w1/"}
	parts := 2
	if long() {
		parts = 8
	}
	for i := 1; i < parts; i++ {
		splits = append(splits, fmt.Sprintf("dec/bulk/%05d", i*nbulk/parts))
	}
	plSplit(ctx, t, cl, splits...)
	resp := plWaitConverged(ctx, t, tc, cl, 30*time.Second, 3)

	// The victim: the node (not node 1, through which nothing goes then)
	// holding the most replicas.
	victim, most := 0, -1
	for i := 2; i <= tc.N(); i++ {
		if n := plReplicasOn(resp, tc.NodeID(i)); n > most {
			victim, most = i, n
		}
	}
	id := tc.NodeID(victim)
	if most == 0 {
		t.Fatalf("no node holds replicas: %s", plLayout(resp))
	}
	others := plAddrsExcept(tc, victim)

	load := plStartAckLoad(ctx, newClient(t, others), "dec/w/", 2, 2)
	defer load.halt()
	watch := plWatchVoters(ctx, cl)
	time.Sleep(time.Second)

	t.Logf("decommissioning node %d (id %d), which holds %d replicas", victim, id, most)
	start := time.Now()
	cctx, cancel := context.WithTimeout(ctx, 100*time.Second)
	out, code, err := ctl(cctx, bin, strings.Join(others, ","), "--timeout", "90s", "decommission", fmt.Sprint(id), "--wait")
	cancel()
	t.Logf("ctl decommission --wait (%v):\n%s", time.Since(start).Round(time.Millisecond), out)
	if err != nil || code != 0 {
		t.Fatalf("ctl decommission %d --wait: exit %d: %v", id, code, err)
	}
	lines := strings.Split(out, "\n")
	if last := lines[len(lines)-1]; !strings.Contains(last, "drained") {
		t.Fatalf("ctl decommission --wait ended with %q, want it drained", last)
	}
	if !strings.Contains(out, "draining") {
		t.Errorf("ctl decommission --wait printed no progress:\n%s", out)
	}
	plWaitState(ctx, t, bin, others, id, "drained", 30*time.Second)
	time.Sleep(time.Second) // the load keeps running on the drained layout
	load.halt()
	minV, minSeen, polls := watch.halt()
	t.Logf("fewest voters of any range during the drain: %d (%s; %d polls)", minV, minSeen, polls)
	if minV < 3 {
		t.Errorf("a range went down to %d voters during the drain: %s", minV, minSeen)
	}

	plWaitConverged(ctx, t, tc, cl, 30*time.Second, 3, id)
	load.verify(ctx, t, cl, "after the drain")
	plCheckFill(ctx, t, cl, "dec/bulk/", nbulk, 1024)
	evs := plWaitEvents(ctx, t, bin, others,
		[3]string{"decommission", "draining requested", fmt.Sprintf("node %d", id)},
		[3]string{"replica-move", "decommission: node " + fmt.Sprint(id) + " is draining", ""})
	t.Logf("%d replica moves for the drain", len(plFindEvents(evs, "replica-move", "decommission:", "")))

	// The drained node may be stopped: nothing depends on it.
	tc.Stop(victim)
	plWaitState(ctx, t, bin, others, id, "decommissioned", 30*time.Second)
	plCheckFill(ctx, t, newClient(t, others), "dec/bulk/", nbulk, 1024)
}

// ---- 3. SIGKILL in the middle of a replica move ----

// The moved range holds ~3.3 MB of incompressible data: at ~1 MB/s its
// snapshot takes about 3 s.
const plMoveKeys, plMoveSize = 800, 4096

// plMoveCluster starts the 4-node cluster of the replica-move tests, with
// capped snapshots and the range to move (keys mv/...) filled.
func plMoveCluster(t *testing.T) (context.Context, *testcluster.Cluster, *client.Client, string) {
	tc := testcluster.Start(t, testcluster.Options{Nodes: 4, ExtraArgs: append(slices.Clone(plArgs), plSlowSnapshots...), LogLines: 150})
	ctx := testCtx(t, 5*time.Minute)
	cl := newClient(t, tc.Addrs())
	waitReplicated(ctx, t, cl, 3)
	plShortLearnerGrace(ctx, t, cl)
	plFill(ctx, t, cl, "mv/", plMoveKeys, plMoveSize)
	plSplit(ctx, t, cl, "mv/")
	plWaitConverged(ctx, t, tc, cl, 60*time.Second, 3)
	return ctx, tc, cl, testcluster.Binary(t)
}

// plKillDuringMove runs `ctl move-replica` of the mv/ range from a voter
// that is not its leaseholder to the free node and, once the learner shows
// in the directory, SIGKILLs who ("target", "source" or "leaseholder", the
// node running the move), restarting it 2 s later. The cluster must then
// converge (onStuck, if not nil, is called on a leftover learner) with the
// range's data intact.
func plKillDuringMove(ctx context.Context, t *testing.T, tc *testcluster.Cluster, cl *client.Client, bin, who string, onStuck func(string)) {
	t.Logf("=== kill the %s of a move ===", who)
	var rid, from, to, lh uint64
	err := eventually(ctx, 30*time.Second, func(ctx context.Context) error {
		resp, err := plRanges(ctx, cl)
		if err != nil {
			return err
		}
		if err := plConverged(resp, 3); err != nil {
			return err
		}
		r := rangeFor(resp, []byte("mv/00000"))
		d := r.GetDesc()
		rid, lh = d.GetRangeId(), r.GetLeaderNodeId()
		vs := voterNodes(d)
		from, to = 0, 0
		for i := 1; i <= tc.N(); i++ {
			if id := tc.NodeID(i); !slices.Contains(vs, id) {
				to = id
			}
		}
		for _, v := range vs {
			if v != lh {
				from = v
			}
		}
		if from == 0 || to == 0 {
			return fmt.Errorf("no move to make from %s (leaseholder %d)", plDesc(d), lh)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	victimID := map[string]uint64{"target": to, "source": from, "leaseholder": lh}[who]
	victim := tc.IndexOf(victimID)
	via := plAddrsExcept(tc, victim)
	t.Logf("moving range %d from node %d to node %d (leaseholder %d); will kill node %d (%s)", rid, from, to, lh, victimID, who)

	type result struct {
		out  string
		code int
		err  error
		took time.Duration
	}
	done := make(chan result, 1)
	start := time.Now()
	go func() {
		cctx, cancel := context.WithTimeout(ctx, 80*time.Second)
		defer cancel()
		out, code, err := ctl(cctx, bin, strings.Join(via, ","), "--timeout", "70s", "move-replica", fmt.Sprint(rid), fmt.Sprint(from), fmt.Sprint(to))
		done <- result{out, code, err, time.Since(start)}
	}()
	d, err := plLearnerIn(ctx, cl, rid, to, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("learner in after %v: %s; SIGKILL node %d (%s)", time.Since(start).Round(time.Millisecond), plDesc(d), victimID, who)
	tc.Kill(victim)
	time.Sleep(2 * time.Second)
	tc.Restart(victim)
	t.Logf("node %d restarted %v after the move began", victimID, time.Since(start).Round(time.Millisecond))

	var res result
	select {
	case res = <-done:
	case <-time.After(90 * time.Second):
		t.Fatalf("ctl move-replica did not return within 90 s")
	}
	// Either outcome is fine (a move whose leaseholder died is ambiguous):
	// what matters is where the cluster ends.
	t.Logf("ctl move-replica returned after %v: exit %d, %v\n%s", res.took.Round(time.Millisecond), res.code, res.err, res.out)

	final := plAwaitConverged(ctx, t, tc, cl, 60*time.Second, 3, onStuck)
	if r := rangeFor(final, []byte("mv/00000")); r != nil {
		t.Logf("range %d ended as %s", rid, plDesc(r.GetDesc()))
	}
	plCheckFill(ctx, t, cl, "mv/", plMoveKeys, plMoveSize)
}

// plLogMoveEvents logs the replica changes `ctl events` shows.
func plLogMoveEvents(ctx context.Context, t *testing.T, tc *testcluster.Cluster, bin string) {
	t.Helper()
	evs, err := plCtlEvents(ctx, bin, tc.Addrs()...)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		if strings.HasPrefix(e.Kind, "replica-") || e.Kind == "learner-add" || e.Kind == "operator-failed" {
			t.Logf("  %s", e)
		}
	}
}

// TestKillDuringReplicaMove starts `ctl move-replica` of a range holding a
// few MB (snapshots capped at ~1 MB/s so the move takes seconds) and, once
// the learner shows in the directory, SIGKILLs the move's target, then in
// a second move its source (with TIDEKV_E2E_LONG=1, each twice more). The
// node is restarted; the cluster must converge to 3 voters per range with
// no leftover learner, and the data must be intact.
func TestKillDuringReplicaMove(t *testing.T) {
	tier.RequireLong(t, "kills the source and the target of moves, about 22 s (TestKillLeaseholderDuringReplicaMove covers a kill mid-move by default)")
	victims := []string{"target", "source"}
	if long() {
		victims = append(victims, victims...)
		victims = append(victims, victims...)
	}
	ctx, tc, cl, bin := plMoveCluster(t)
	for _, who := range victims {
		plKillDuringMove(ctx, t, tc, cl, bin, who, nil)
	}
	plLogMoveEvents(ctx, t, tc, bin)
}

// TestKillLeaseholderDuringReplicaMove is TestKillDuringReplicaMove with
// the range's leaseholder, the node running the move, SIGKILLed: the move
// dies with it, leaving its learner, which placement must finish or remove.
func TestKillLeaseholderDuringReplicaMove(t *testing.T) {
	ctx, tc, cl, bin := plMoveCluster(t)
	plKillDuringMove(ctx, t, tc, cl, bin, "leaseholder", func(desc string) {
		plLogMoveEvents(ctx, t, tc, bin)
		plLeftoverLearner(t, "%s stayed so for %v after the leaseholder running the move was killed", desc, plStuckAfter)
	})
	plLogMoveEvents(ctx, t, tc, bin)
}

// ---- 4. SIGKILL of the placement controller mid-operation ----

// TestKillControllerMidOperation decommissions a node of a 4-node cluster
// whose ranges hold a few MB each (snapshots capped, so each move takes
// seconds) and SIGKILLs the meta range's leaseholder, which runs
// placement, while a move is in flight; it restarts it a few seconds
// later. Another node must take the meta lease (a new "meta-lease" event),
// the drain must complete, and the cluster converge with every write
// intact.
func TestKillControllerMidOperation(t *testing.T) {
	tier.RequireLong(t, "slow snapshots so the kill lands mid-operation, about 20 s")
	const nkeys, size = 900, 4096
	tc := testcluster.Start(t, testcluster.Options{Nodes: 4, ExtraArgs: append(slices.Clone(plArgs), plSlowSnapshots...), LogLines: 150})
	ctx := testCtx(t, 5*time.Minute)
	bin := testcluster.Binary(t)
	cl := newClient(t, tc.Addrs())
	waitReplicated(ctx, t, cl, 3)
	plShortLearnerGrace(ctx, t, cl)
	plFill(ctx, t, cl, "ctl/bulk/", nkeys, size)
	plSplit(ctx, t, cl, "ctl/bulk/", fmt.Sprintf("ctl/bulk/%05d", nkeys/3), fmt.Sprintf("ctl/bulk/%05d", 2*nkeys/3), "ctl/w/")
	resp := plWaitConverged(ctx, t, tc, cl, 60*time.Second, 3)

	// Drain the node, other than the controller, with the most replicas.
	// (Lease balance may move the meta lease meanwhile: the controller is
	// looked up again just before the kill.)
	ctlIdx := plMetaLeader(ctx, t, tc, cl)
	drain, most := 0, -1
	for i := 1; i <= tc.N(); i++ {
		if n := plReplicasOn(resp, tc.NodeID(i)); i != ctlIdx && n > most {
			drain, most = i, n
		}
	}
	drainID := tc.NodeID(drain)
	t.Logf("controller (meta leaseholder) is node %d; draining node %d with %d replicas", tc.NodeID(ctlIdx), drainID, most)

	load := plStartAckLoad(ctx, newClient(t, tc.Addrs()), "ctl/w/", 2, 1)
	defer load.halt()
	time.Sleep(time.Second)

	start := time.Now()
	if left, err := cl.Decommission(ctx, drainID, true); err != nil || left == 0 {
		t.Fatalf("decommission node %d: %d replicas left, %v", drainID, left, err)
	}
	// Wait for a drain move in flight: a learner in the directory.
	var inFlight string
	if err := eventually(ctx, 30*time.Second, func(ctx context.Context) error {
		resp, err := plRanges(ctx, cl)
		if err != nil {
			return err
		}
		for _, r := range resp.GetRanges() {
			for _, rd := range r.GetDesc().GetReplicas() {
				if rd.GetType() == tidekvpb.ReplicaType_LEARNER && !rd.GetAdaptive() {
					inFlight = plDesc(r.GetDesc())
					return nil
				}
			}
		}
		return errors.New("no move in flight yet")
	}); err != nil {
		t.Fatalf("the drain started no move: %v", err)
	}
	ctlIdx = plMetaLeader(ctx, t, tc, cl)
	ctlID := tc.NodeID(ctlIdx)
	killedAt := time.Now()
	t.Logf("move in flight after %v (%s): SIGKILL the controller, node %d", killedAt.Sub(start).Round(time.Millisecond), inFlight, ctlID)
	tc.Kill(ctlIdx)

	// Another node takes the meta lease and says so.
	survivors := plAddrsExcept(tc, ctlIdx)
	var taker plEvent
	var evs []plEvent
	if err := eventually(ctx, 30*time.Second, func(ctx context.Context) error {
		var err error
		if evs, err = plCtlEvents(ctx, bin, survivors...); err != nil {
			return err
		}
		for _, e := range plFindEvents(evs, "meta-lease", "acquired", "") {
			if e.Time.After(killedAt) && e.Node != ctlID {
				taker = e
				return nil
			}
		}
		return errors.New("no new meta-lease event")
	}); err != nil {
		for _, e := range evs {
			t.Logf("  %s", e)
		}
		_, lead := plMetaVoters(ctx, tc, cl)
		t.Fatalf("no node took over the controller: %v (node %d leads the meta range now)", err, lead)
	}
	t.Logf("node %d took over the meta lease %v after the kill", taker.Node, taker.Time.Sub(killedAt).Round(time.Millisecond))

	time.Sleep(2 * time.Second)
	tc.Restart(ctlIdx)
	t.Logf("old controller node %d restarted", ctlID)

	// The drain completes under the new controller.
	stuck := newPlStuck()
	var stuckDesc string
	if err := eventually(ctx, 90*time.Second, func(ctx context.Context) error {
		left, err := cl.Decommission(ctx, drainID, true)
		if err != nil {
			return err
		}
		if left != 0 {
			resp, err := plRanges(ctx, cl)
			if err == nil {
				if stuckDesc = stuck.observe(resp); stuckDesc != "" {
					return nil
				}
			}
			return fmt.Errorf("node %d still holds %d replicas: %s", drainID, left, plLayout(resp))
		}
		return nil
	}); err != nil {
		t.Fatalf("the drain did not complete after the controller's death: %v", err)
	}
	if stuckDesc != "" {
		evs, _ := plCtlEvents(ctx, bin, tc.Addrs()...)
		for _, e := range evs {
			if e.Kind != "lease-transfer" {
				t.Logf("  %s", e)
			}
		}
		plLeftoverLearner(t, "%s stayed so for %v after the controller was killed, and node %d's drain stalls",
			stuckDesc, plStuckAfter, drainID)
	}
	t.Logf("node %d drained %v after the decommission began", drainID, time.Since(start).Round(time.Millisecond))
	plWaitState(ctx, t, bin, tc.Addrs(), drainID, "drained", 30*time.Second)
	load.halt()
	plWaitConverged(ctx, t, tc, cl, 60*time.Second, 3, drainID)
	load.verify(ctx, t, cl, "after the drain")
	plCheckFill(ctx, t, cl, "ctl/bulk/", nkeys, size)
	evs, err := plCtlEvents(ctx, bin, tc.Addrs()...)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		switch e.Kind {
		case "meta-lease", "replica-move", "replica-add", "replica-remove", "operator-failed", "decommission", "node-suspect", "node-live":
			t.Logf("  %s", e)
		}
	}
}
