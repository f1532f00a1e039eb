package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/tidekv/tidekv/api/hlc"
	"github.com/tidekv/tidekv/internal/nemesis"
	"github.com/tidekv/tidekv/internal/testutil/tier"
)

// txnChaosFaults are the faults of the transactional chaos runs. Skews
// are within the default bound, half the max offset (125 ms): the cluster
// owns read timestamps, so a node whose clock runs ahead or behind costs
// restarts, not anomalies.
const txnChaosFaults = "kill,pause,partition,skew"

// txnChaosMinCommitted is the committed transactions a history must hold
// to prove something. The workload runs on after the schedule until it
// does (bench chaos --min-ok, for at most a minute), so the floor is a
// count the run reaches however slow the machine, not a rate: starved of
// CPU, a 12 s schedule once committed fewer (docs/testing.md).
const txnChaosMinCommitted = 100

// TestBenchChaosTxn runs `tidekv bench chaos --workload txn` as an
// operator would: list-append transactions over 4 keys, each in a range
// of its own (so transactions commit in two phases, and are refreshed
// when pushed), through the Go client's Txn, while a node is partitioned,
// killed, paused and its clock skewed; after recovery every key is read once more, and the
// history must show no anomaly. TIDEKV_E2E_LONG=1 runs 3 schedules of
// 30 s.
func TestBenchChaosTxn(t *testing.T) { txnChaos(t, "txn", "list-append") }

// TestBenchChaosTxnRegister is TestBenchChaosTxn with the register
// workload.
func TestBenchChaosTxnRegister(t *testing.T) {
	tier.RequireLong(t, "a second transactional workload under faults")
	txnChaos(t, "txn", "register")
}

// TestBenchChaosTxnResp is TestBenchChaosTxn with the transactions sent
// as a Redis user writes them, over the nodes' Redis listeners: MULTI,
// GET or APPEND per step, EXEC.
func TestBenchChaosTxnResp(t *testing.T) { txnChaos(t, "txn-resp", "list-append") }

// TestBenchChaosTxnRespRegister is the check-and-set form over RESP:
// WATCH and GET the keys read, then MULTI, SET, EXEC.
func TestBenchChaosTxnRespRegister(t *testing.T) {
	tier.RequireLong(t, "a second transactional workload over RESP under faults")
	txnChaos(t, "txn-resp", "register")
}

func txnChaos(t *testing.T, via, workload string) {
	schedules, dur := 1, 12*time.Second
	if long() {
		schedules, dur = 3, 30*time.Second
	}
	reports, stderr, err := benchChaos(t, time.Duration(schedules)*(dur+2*time.Minute), schedules,
		"--workload", via, "--txn-workload", workload, "--schedules", fmt.Sprint(schedules), "--seed", "5",
		"--duration", dur.String(), "--interval", "4s", "--down", "2s", "--faults", txnChaosFaults, "--min-ok", fmt.Sprint(txnChaosMinCommitted))
	for _, r := range reports {
		t.Logf("seed %d: %s", r.Seed, r.Verdict)
		if !r.Passed() || r.Anomalies != 0 {
			t.Errorf("schedule with seed %d failed: %s", r.Seed, r.Verdict)
		}
		if faults := r.Kills + r.Pauses + r.Partitions + r.Skews; faults < 3 || r.Committed < txnChaosMinCommitted || r.FinalReads != 4 {
			t.Errorf("seed %d: %d faults, %d committed transactions and %d final reads prove too little", r.Seed, faults, r.Committed, r.FinalReads)
		}
	}
	if err != nil && !t.Failed() {
		t.Fatalf("tidekv bench chaos exited with %v although every schedule passed\n%s", err, stderr)
	}
}

// TestBenchChaosTxnBreakSkipRefresh is the checker's negative control on
// the real cluster: every node commits a two-phase transaction whose
// writes were pushed without checking its reads again (--break, the
// nodes' hidden --testing-break), and the workload must show anomalies.
// One short schedule, a node paused once: the break, not the fault, makes
// the anomalies.
func TestBenchChaosTxnBreakSkipRefresh(t *testing.T) {
	txnBreak(t, "txn", "list-append", "skip-refresh", 5)
}

// TestBenchChaosTxnRespBreakSkipRefresh is the negative control over
// RESP: MULTI/EXEC transactions (list-append) and WATCH check-and-set
// (register) on nodes that skip the refresh must show anomalies; it shows
// that the RESP workload's history is one the check can fault.
func TestBenchChaosTxnRespBreakSkipRefresh(t *testing.T) {
	t.Run("list-append", func(t *testing.T) { txnBreak(t, "txn-resp", "list-append", "skip-refresh", 5) })
	t.Run("register", func(t *testing.T) {
		tier.RequireLong(t, "the register form of the negative control over RESP")
		txnBreak(t, "txn-resp", "register", "skip-refresh", 5)
	})
}

// TestBenchChaosTxnBreakSkipTSCache is the negative control of writes
// stamped below the reads already served on their keys.
func TestBenchChaosTxnBreakSkipTSCache(t *testing.T) {
	tier.RequireLong(t, "a second broken mode")
	txnBreak(t, "txn", "list-append", "skip-tscache", 5)
}

// TestBenchChaosTxnBreakClientClock is the negative control of the
// cluster-owned timestamps: the workload's client clock runs 400 ms behind
// the nodes' (beyond the max offset, so no answer moves it on), and every
// coordinator reads at the timestamp the client proposes. Without the
// break the cluster reads at its own clock and the lag does nothing.
func TestBenchChaosTxnBreakClientClock(t *testing.T) {
	tier.RequireLong(t, "a third broken mode")
	txnBreak(t, "txn", "list-append", "client-clock", 6, "--client-clock-lag", "400ms")
}

func txnBreak(t *testing.T, via, workload, mode string, seed int, args ...string) {
	reports, stderr, err := benchChaos(t, 2*time.Minute, 1, append([]string{
		"--workload", via, "--txn-workload", workload, "--break", mode, "--seed", fmt.Sprint(seed),
		"--duration", "8s", "--interval", "4s", "--down", "1s", "--faults", "pause"}, args...)...)
	r := reports[0]
	t.Logf("seed %d: %s", r.Seed, r.Verdict)
	if !r.Passed() || r.Anomalies == 0 || r.Break != mode {
		t.Fatalf("with --break %s the check found %d anomalies: %s\n%s", mode, r.Anomalies, r.Verdict, stderr)
	}
	if err != nil {
		t.Fatalf("tidekv bench chaos exited with %v although the break was caught\n%s", err, stderr)
	}
}

// TestBenchChaosTxnLayout runs the transactional workload while the
// workload's ranges are split, merged (the right neighbour's voters moved
// beside the left's first) and their leases transferred through the admin
// API, with a node's disk slowed between them; each kind must have been
// made at least once, as the range directory shows it afterwards (the
// report counts only those), and the history must show no anomaly. The
// seed is the first whose plan has two of each operation; each gets
// the 3 s of a fault (a merge may first move a voter).
func TestBenchChaosTxnLayout(t *testing.T) {
	c := nemesis.DefaultConfig()
	c.Duration, c.Interval, c.Down = 24*time.Second, 4*time.Second, 3*time.Second
	c.Kinds = []nemesis.Kind{nemesis.RangeSplit, nemesis.Merge, nemesis.LeaseTransfer, nemesis.SlowDisk}
	seed := uint64(1)
	for ; ; seed++ {
		n := map[nemesis.Kind]int{}
		for _, s := range nemesis.Plan(seed, c) {
			n[s.Kind]++
		}
		if n[nemesis.RangeSplit] >= 2 && n[nemesis.Merge] >= 2 && n[nemesis.LeaseTransfer] >= 2 {
			break
		}
	}
	reports, stderr, err := benchChaos(t, 3*time.Minute, 1,
		"--workload", "txn", "--seed", fmt.Sprint(seed), "--duration", c.Duration.String(), "--interval", c.Interval.String(),
		"--down", c.Down.String(), "--faults", "range-split,merge,lease-transfer,slow-disk", "--min-ok", fmt.Sprint(txnChaosMinCommitted))
	r := reports[0]
	t.Logf("seed %d: %s", r.Seed, r.Verdict)
	if !r.Passed() || r.Anomalies != 0 {
		t.Fatalf("schedule failed: %s\n%s", r.Verdict, stderr)
	}
	for name, c := range map[string]nemesis.LayoutCounts{"range split": r.RangeSplits, "merge": r.Merges, "lease transfer": r.LeaseTransfers} {
		if c.Made == 0 {
			// The log says why each was not made (an error, or the
			// directory not showing it within the fault's time).
			t.Errorf("%d %ss asked, none made: %s\n%s", c.Asked, name, r.Verdict, stderr)
		}
	}
	if r.SlowDisks == 0 || r.Committed < txnChaosMinCommitted {
		t.Errorf("%d slow disks and %d committed transactions prove too little", r.SlowDisks, r.Committed)
	}
	if err != nil && !t.Failed() {
		t.Fatalf("tidekv bench chaos exited with %v although the schedule passed\n%s", err, stderr)
	}
}

// TestBenchChaosTxnSkewBeyondMaxOffset skews a node's clock beyond the
// max offset (250 ms by default), for 6 s at a time, under the
// transactional workload: the skewed node must refuse to serve (the
// cluster's status shows its clock untrusted, and then it leads no range),
// and the history must show no anomaly. The seed is the first whose plan
// skews beyond the max offset every time.
func TestBenchChaosTxnSkewBeyondMaxOffset(t *testing.T) {
	c := nemesis.DefaultConfig()
	c.Duration, c.Interval, c.Down, c.MaxSkew = 16*time.Second, 8*time.Second, 6*time.Second, time.Second
	c.Kinds = []nemesis.Kind{nemesis.Skew}
	seed := uint64(1)
	for ; ; seed++ {
		beyond := true
		for _, s := range nemesis.Plan(seed, c) {
			beyond = beyond && (s.Amount > hlc.DefaultMaxOffset || s.Amount < -hlc.DefaultMaxOffset)
		}
		if beyond {
			break
		}
	}
	reports, stderr, err := benchChaos(t, 3*time.Minute, 1,
		"--workload", "txn", "--seed", fmt.Sprint(seed), "--duration", c.Duration.String(), "--interval", c.Interval.String(),
		"--down", c.Down.String(), "--max-skew", c.MaxSkew.String(), "--faults", "skew")
	r := reports[0]
	t.Logf("seed %d: %s", r.Seed, r.Verdict)
	if !r.Passed() || r.Anomalies != 0 {
		t.Fatalf("schedule failed: %s\n%s", r.Verdict, stderr)
	}
	if r.SkewsBeyond != 2 || r.SkewsRefused != r.SkewsBeyond {
		t.Errorf("%d skews beyond the max offset, %d of them refused: each must be", r.SkewsBeyond, r.SkewsRefused)
	}
	if r.Committed == 0 || r.FinalReads != 4 {
		t.Errorf("%d committed transactions and %d final reads: the cluster must serve through the other nodes and after", r.Committed, r.FinalReads)
	}
	if err != nil && !t.Failed() {
		t.Fatalf("tidekv bench chaos exited with %v although the schedule passed\n%s", err, stderr)
	}
}
