package e2e

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/client"
	"github.com/tidekv/tidekv/internal/linearizability"
	"github.com/tidekv/tidekv/internal/testcluster"
)

// Linearizability of the real binary: concurrent clients run random
// put/get/CAS over a few keys while a nemesis SIGKILLs and restarts nodes;
// the recorded history must be linearizable. A negative control runs the
// nodes with --testing-stale-reads and reads from a node that cannot have
// seen the latest write; that history must not be.
//
// TIDEKV_LINZ_DURATION (a Go duration, e.g. 5m) sets how long the nemesis
// runs; TIDEKV_E2E_LONG=1 makes it 3m. TIDEKV_ARTIFACTS names a directory
// to keep the porcupine visualization and history of a failing check in.

const linzDurationEnv = "TIDEKV_LINZ_DURATION"

func linzDuration(t *testing.T, def time.Duration) time.Duration {
	t.Helper()
	s := os.Getenv(linzDurationEnv)
	if s == "" {
		if long() {
			return 3 * time.Minute
		}
		return def
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		t.Fatalf("%s=%q: want a positive Go duration", linzDurationEnv, s)
	}
	return d
}

func linzKey(i int) string { return fmt.Sprintf("linz/k%d", i) }

// linzOutcome is what a client learned about one operation.
type linzOutcome int

const (
	linzOk      linzOutcome = iota // definite result, recorded
	linzUnknown                    // may or may not have taken effect
	linzFailed                     // definitely no effect, dropped
)

// classifyPut maps a Put error to an outcome. Puts are retried inside
// the client, so any failure may follow an attempt that was applied: only
// a request rejected as malformed certainly had no effect.
func classifyPut(err error) linzOutcome {
	switch {
	case err == nil:
		return linzOk
	case errors.Is(err, client.ErrInvalidArgument):
		return linzFailed
	}
	return linzUnknown
}

// classifyCAS maps a CompareAndSet error to an outcome. The client never
// retries a CAS that may have reached a server and reports such an outcome
// as ErrAmbiguous (client/doc.go); it gives up with ErrUnavailable or
// ErrOverloaded only after attempts the cluster definitely refused, and
// never sends an invalid one. Anything else, context errors included, is
// treated as unknown.
func classifyCAS(err error) linzOutcome {
	switch {
	case err == nil:
		return linzOk
	case errors.Is(err, client.ErrAmbiguous):
		return linzUnknown
	case errors.Is(err, client.ErrInvalidArgument),
		errors.Is(err, client.ErrUnavailable),
		errors.Is(err, client.ErrOverloaded):
		return linzFailed
	}
	return linzUnknown
}

// linzStats counts outcomes and keeps the invocation time of every
// successful operation, to show progress after each nemesis step.
type linzStats struct {
	mu      sync.Mutex
	ok      []time.Time
	byKind  map[string]int
	unknown int
	failed  int
	errs    map[string]int // a sample of error texts, for the log
}

func (s *linzStats) record(kind string, start time.Time, o linzOutcome, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byKind == nil {
		s.byKind, s.errs = map[string]int{}, map[string]int{}
	}
	switch o {
	case linzOk:
		s.ok = append(s.ok, start)
		s.byKind[kind]++
	case linzUnknown:
		s.unknown++
	case linzFailed:
		s.failed++
	}
	if err != nil && !errors.Is(err, client.ErrNotFound) {
		msg := err.Error()
		if len(msg) > 120 {
			msg = msg[:120] + "..."
		}
		msg = kind + ": " + msg
		if len(s.errs) < 20 || s.errs[msg] > 0 {
			s.errs[msg]++
		}
	}
}

func (s *linzStats) okBetween(from, to time.Time) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, t := range s.ok {
		if !t.Before(from) && t.Before(to) {
			n++
		}
	}
	return n
}

func (s *linzStats) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return fmt.Sprintf("%d ok (%d get, %d put, %d cas), %d unknown, %d failed (dropped)",
		len(s.ok), s.byKind["get"], s.byKind["put"], s.byKind["cas"], s.unknown, s.failed)
}

// linzWorker is one client goroutine with its own client.Client.
type linzWorker struct {
	id    int
	cl    *client.Client
	rec   *linearizability.Recorder
	stats *linzStats
	rng   *rand.Rand
	seen  map[string]*string // last state observed per key; CAS expects it
	seq   int
}

const linzOpTimeout = 5 * time.Second

func (w *linzWorker) step(ctx context.Context, keys []string) {
	key := keys[w.rng.IntN(len(keys))]
	octx, cancel := context.WithTimeout(ctx, linzOpTimeout)
	defer cancel()
	switch p := w.rng.IntN(10); {
	case p < 4:
		start := time.Now()
		pend := w.rec.Begin(w.id, linearizability.GetInput(key))
		v, err := w.cl.Get(octx, []byte(key))
		switch {
		case err == nil:
			pend.Ok(linearizability.Output{Found: true, Value: string(v)})
			s := string(v)
			w.seen[key] = &s
			w.stats.record("get", start, linzOk, nil)
		case errors.Is(err, client.ErrNotFound):
			pend.Ok(linearizability.Output{Found: false})
			w.seen[key] = nil
			w.stats.record("get", start, linzOk, err)
		default:
			pend.Unknown() // a read has no effect; it is dropped
			w.stats.record("get", start, linzUnknown, err)
		}
	case p < 7:
		w.seq++
		val := fmt.Sprintf("c%d-%d", w.id, w.seq)
		start := time.Now()
		pend := w.rec.Begin(w.id, linearizability.PutInput(key, val))
		err := w.cl.Put(octx, []byte(key), []byte(val))
		o := classifyPut(err)
		finish(pend, o, linearizability.Output{})
		w.stats.record("put", start, o, err)
	default:
		w.seq++
		val := fmt.Sprintf("c%d-%d", w.id, w.seq)
		nv := []byte(val)
		in := linearizability.CASAbsentInput(key, val)
		var exp *[]byte
		if s := w.seen[key]; s != nil {
			b := []byte(*s)
			exp = &b
			in = linearizability.CASInput(key, *s, val)
		}
		start := time.Now()
		pend := w.rec.Begin(w.id, in)
		swapped, cur, curExists, err := w.cl.CompareAndSet(octx, []byte(key), exp, &nv)
		o := classifyCAS(err)
		finish(pend, o, linearizability.Output{Swapped: swapped})
		w.stats.record("cas", start, o, err)
		if o == linzOk {
			switch {
			case swapped:
				w.seen[key] = &val
			case curExists:
				s := string(cur)
				w.seen[key] = &s
			default:
				w.seen[key] = nil
			}
		}
	}
}

func finish(p linearizability.Pending, o linzOutcome, out linearizability.Output) {
	switch o {
	case linzOk:
		p.Ok(out)
	case linzFailed:
		p.Failed()
	default:
		p.Unknown()
	}
}

// linzArtifactDir returns $TIDEKV_ARTIFACTS, or a fresh directory that is
// removed unless the test fails.
func linzArtifactDir(t *testing.T) string {
	t.Helper()
	if d := os.Getenv(linearizability.ArtifactsEnv); d != "" {
		return d
	}
	d, err := os.MkdirTemp("", "tidekv-linz-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if !t.Failed() {
			os.RemoveAll(d)
		}
	})
	return d
}

// checkLinz checks h, and on a violation writes the visualization and the
// failing keys' operations where a human can find them.
func checkLinz(t *testing.T, h linearizability.History) linearizability.Result {
	t.Helper()
	viz := linearizability.VisualizationPath(linzArtifactDir(t), t.Name())
	start := time.Now()
	res := linearizability.Check(h, 3*time.Minute, linearizability.WithVisualization(viz))
	t.Logf("%s (checked in %v)", res.Describe, time.Since(start).Round(time.Millisecond))
	if res.Unknown {
		t.Fatal("linearizability check timed out")
	}
	if !res.Ok {
		path := strings.TrimSuffix(viz, ".html") + ".history.txt"
		if err := os.WriteFile(path, []byte(formatLinzHistory(h, res.FailedKeys)), 0o644); err == nil {
			t.Logf("operations on the failing keys: %s", path)
		}
	}
	return res
}

func formatLinzHistory(h linearizability.History, keys []string) string {
	ops := slices.Clone(h)
	slices.SortStableFunc(ops, func(a, b linearizability.Op) int {
		switch {
		case a.Call < b.Call:
			return -1
		case a.Call > b.Call:
			return 1
		}
		return 0
	})
	var b strings.Builder
	for _, op := range ops {
		if len(keys) > 0 && !slices.Contains(keys, op.Input.Key) {
			continue
		}
		in, out := op.Input, op.Output
		var call, res string
		switch in.Kind {
		case linearizability.Get:
			call = fmt.Sprintf("get(%s)", in.Key)
		case linearizability.Put:
			call = fmt.Sprintf("put(%s, %s)", in.Key, in.Value)
		case linearizability.CAS:
			exp := "<absent>"
			if in.ExpectExists {
				exp = in.Expected
			}
			call = fmt.Sprintf("cas(%s, %s -> %s)", in.Key, exp, in.Value)
		default:
			call = fmt.Sprintf("%s(%s)", in.Kind, in.Key)
		}
		switch {
		case out.Unknown:
			fmt.Fprintf(&b, "client %3d  [%12.3fms, ?]  %s -> ?\n", op.ClientID, float64(op.Call)/1e6, call)
			continue
		case in.Kind == linearizability.Get && out.Found:
			res = out.Value
		case in.Kind == linearizability.Get:
			res = "<not found>"
		case in.Kind == linearizability.CAS:
			res = fmt.Sprintf("swapped=%v", out.Swapped)
		default:
			res = "ok"
		}
		fmt.Fprintf(&b, "client %3d  [%12.3fms, %12.3fms]  %s -> %s\n", op.ClientID, float64(op.Call)/1e6, float64(op.Return)/1e6, call, res)
	}
	return b.String()
}

// logFiles names every node's full log, for a post-mortem (the tails are
// dumped by testcluster; the files survive the test with TIDEKV_E2E_KEEP=1).
func logFiles(t *testing.T, tc *testcluster.Cluster) {
	t.Helper()
	for i := 1; i <= tc.N(); i++ {
		t.Logf("node %d log: %s", i, tc.Launcher().Config().Node(i).Log())
	}
}

// waitCaughtUp waits until node i's replica of key's range has applied
// everything the leaseholder had committed when the wait began: the node
// serves its part again.
func waitCaughtUp(ctx context.Context, t *testing.T, tc *testcluster.Cluster, cl *client.Client, i int, key []byte) {
	t.Helper()
	replicaOf := func(resp *tidekvpb.LocalStatusResponse, rangeID uint64) *tidekvpb.ReplicaStatus {
		for _, r := range resp.GetReplicas() {
			if r.GetRangeId() == rangeID {
				return r
			}
		}
		return nil
	}
	var target uint64
	err := eventually(ctx, 30*time.Second, func(ctx context.Context) error {
		rs, err := cl.Ranges(ctx)
		if err != nil {
			return err
		}
		r := rangeFor(rs, key)
		if r == nil {
			return fmt.Errorf("no range covers %q", key)
		}
		lh := tc.IndexOf(r.GetLeaderNodeId())
		if lh == 0 {
			return fmt.Errorf("range %d has no known leaseholder", r.GetDesc().GetRangeId())
		}
		if target == 0 {
			st, err := cl.LocalStatus(ctx, tc.Addr(lh))
			if err != nil {
				return err
			}
			lr := replicaOf(st, r.GetDesc().GetRangeId())
			if lr == nil || !lr.GetLeader() {
				return fmt.Errorf("node %d does not lead range %d yet", lh, r.GetDesc().GetRangeId())
			}
			target = lr.GetCommitIndex()
		}
		st, err := cl.LocalStatus(ctx, tc.Addr(i))
		if err != nil {
			return err
		}
		mine := replicaOf(st, r.GetDesc().GetRangeId())
		if mine == nil || mine.GetAppliedIndex() < target {
			return fmt.Errorf("node %d has applied %d of range %d, want %d", i, mine.GetAppliedIndex(), r.GetDesc().GetRangeId(), target)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("node %d did not catch up: %v", i, err)
	}
}

// TestLinearizabilityKillRestart: 8 clients, each with its own client.Client
// over all nodes, run random put/get/CAS on 4 keys while the nemesis
// SIGKILLs a node (alternately the leaseholder of the keys' range and a
// random node), restarts it and waits until it has caught up. The history
// must be linearizable, and every kill must be followed by successful
// operations.
func TestLinearizabilityKillRestart(t *testing.T) {
	dur := linzDuration(t, 15*time.Second)
	tc := testcluster.Start(t, testcluster.Options{Nodes: 3, LogLines: 150})
	ctx := testCtx(t, dur+4*time.Minute)
	admin := newClient(t, tc.Addrs())
	waitReplicated(ctx, t, admin, 3)

	keys := make([]string, 4)
	for i := range keys {
		keys[i] = linzKey(i)
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d, nemesis for %v", seed, dur)
	rec := linearizability.NewRecorder()
	stats := &linzStats{}
	wctx, stopWorkers := context.WithCancel(ctx)
	defer stopWorkers()
	var wg sync.WaitGroup
	for i := range 8 {
		w := &linzWorker{id: i, cl: newClient(t, tc.Addrs()), rec: rec, stats: stats,
			rng: rand.New(rand.NewPCG(seed, uint64(i))), seen: map[string]*string{}}
		wg.Go(func() {
			for wctx.Err() == nil {
				w.step(wctx, keys)
			}
		})
	}

	rng := rand.New(rand.NewPCG(seed, 1<<40))
	type event struct {
		at   time.Time
		what string
	}
	var events []event
	time.Sleep(2 * time.Second) // a fault-free start
	deadline := time.Now().Add(dur)
	for round := 0; time.Now().Before(deadline); round++ {
		lh := leaseholderIndex(ctx, t, tc, admin, []byte(keys[0]))
		victim, why := lh, "leaseholder"
		if round%2 == 1 {
			victim = 1 + rng.IntN(tc.N())
			why = "random"
			if victim == lh {
				why = "random, the leaseholder"
			}
		}
		what := fmt.Sprintf("kill node %d (%s)", victim, why)
		t.Logf("nemesis: %s", what)
		events = append(events, event{time.Now(), what})
		tc.Kill(victim)
		time.Sleep(time.Second + time.Duration(rng.Int64N(int64(time.Second))))
		tc.Restart(victim)
		waitCaughtUp(ctx, t, tc, admin, victim, []byte(keys[0]))
		t.Logf("nemesis: node %d restarted and caught up", victim)
		time.Sleep(1500 * time.Millisecond)
	}
	end := time.Now()
	time.Sleep(500 * time.Millisecond)
	stopWorkers()
	wg.Wait()

	t.Logf("operations: %s", stats)
	stats.mu.Lock()
	for msg, n := range stats.errs {
		t.Logf("  %4d x %s", n, msg)
	}
	stats.mu.Unlock()
	for i, ev := range events {
		to := end
		if i+1 < len(events) {
			to = events[i+1].at
		}
		n := stats.okBetween(ev.at, to)
		t.Logf("after %-36s %5d successful ops", ev.what+":", n)
		if n < 10 {
			t.Errorf("only %d successful operations between %q and the next event", n, ev.what)
		}
	}
	if len(events) < 2 {
		t.Errorf("only %d kills", len(events))
	}
	res := checkLinz(t, rec.History())
	if !res.Ok {
		logFiles(t, tc)
		t.Fatalf("history is not linearizable (seed %d)", seed)
	}
	if res.Ops < 500 {
		t.Fatalf("only %d operations checked: the test proves too little", res.Ops)
	}
}

// TestLinearizabilityNegativeControlStaleReads runs the nodes with
// --testing-stale-reads, under which every replica answers reads from its
// local state, and reads from a node that cannot have the latest write:
// the history must fail the check, which proves the checker and the
// recording can catch a stale read end to end.
//
// The stale node is made deterministic by killing it rather than pausing
// it: a SIGSTOPped process still receives the leader's Raft traffic into
// its socket buffers, and after SIGCONT those appends race with the
// buffered client read. Instead, the follower is killed, the key is
// overwritten on the other two, both of those are killed, and the follower
// is restarted alone: it can only answer from its own old state.
func TestLinearizabilityNegativeControlStaleReads(t *testing.T) {
	tc := testcluster.Start(t, testcluster.Options{Nodes: 3, ExtraArgs: []string{"--testing-stale-reads"}})
	ctx := testCtx(t, 3*time.Minute)
	cl := newClient(t, tc.Addrs())
	waitReplicated(ctx, t, cl, 3)

	key := []byte("linz/stale")
	rec := linearizability.NewRecorder()
	put := func(val string) {
		t.Helper()
		err := eventually(ctx, 20*time.Second, func(ctx context.Context) error {
			p := rec.Begin(0, linearizability.PutInput(string(key), val))
			err := cl.Put(ctx, key, []byte(val))
			finish(p, classifyPut(err), linearizability.Output{})
			return err
		})
		if err != nil {
			t.Fatalf("put %s=%s: %v", key, val, err)
		}
	}
	put("v-old")

	lh := leaseholderIndex(ctx, t, tc, cl, key)
	follower := lh%tc.N() + 1
	conn, err := grpc.NewClient(tc.Addr(follower), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	kv := tidekvpb.NewKVClient(conn)
	// In this mode the follower answers from local state: wait until it
	// has applied v-old (these probes are not part of the history).
	if err := eventually(ctx, 20*time.Second, func(ctx context.Context) error {
		resp, err := kv.Get(ctx, &tidekvpb.GetRequest{Key: key})
		if err != nil {
			return err
		}
		if !resp.GetFound() || string(resp.GetValue()) != "v-old" {
			return fmt.Errorf("follower has %q (found %v)", resp.GetValue(), resp.GetFound())
		}
		return nil
	}); err != nil {
		t.Fatalf("node %d never answered v-old: %v", follower, err)
	}

	t.Logf("killing node %d (follower), writing v-new on the others", follower)
	tc.Kill(follower)
	put("v-new")
	t.Log("killing the other nodes, restarting the follower alone")
	for i := 1; i <= tc.N(); i++ {
		if i != follower {
			tc.Kill(i)
		}
	}
	tc.Restart(follower)

	var resp *tidekvpb.GetResponse
	if err := eventually(ctx, 20*time.Second, func(ctx context.Context) error {
		c, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		p := rec.Begin(1, linearizability.GetInput(string(key)))
		var err error
		resp, err = kv.Get(c, &tidekvpb.GetRequest{Key: key})
		if err != nil {
			p.Unknown()
			return err
		}
		p.Ok(linearizability.Output{Found: resp.GetFound(), Value: string(resp.GetValue())})
		return nil
	}); err != nil {
		t.Fatalf("restarted follower never answered: %v", err)
	}
	// Either answer is stale: v-old, or nothing at all if the follower
	// had not persisted that v-old was committed (its applied state is
	// written without fsync, and without a leader it cannot learn the
	// commit index again).
	t.Logf("restarted follower read %s = %q (found %v)", key, resp.GetValue(), resp.GetFound())
	if resp.GetFound() && string(resp.GetValue()) == "v-new" {
		t.Fatalf("the follower read v-new, which it cannot have: the test setup is broken")
	}

	h := rec.History()
	res := linearizability.Check(h, time.Minute)
	t.Logf("%s", res.Describe)
	switch {
	case res.Unknown:
		t.Fatal("check timed out")
	case res.Ok:
		t.Fatalf("negative control passed the check: the stale read went unnoticed\n%s", formatLinzHistory(h, nil))
	case !slices.Contains(res.FailedKeys, string(key)):
		t.Errorf("failing keys %q do not include %q", res.FailedKeys, key)
	}
}
