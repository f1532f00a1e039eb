package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os/exec"
	"testing"
	"time"

	"github.com/tidekv/tidekv/internal/nemesis"
	"github.com/tidekv/tidekv/internal/testcluster"
)

// TestBenchChaos runs `tidekv bench chaos` as an operator would: one short
// seeded schedule of faults (kills, pauses, partitions, clock skews, slow
// disks, splits: a fault every 4 s, undone 2 s later, past the 1 s
// election timeout) with operations meeting some of them (replica moves,
// a decommission and recommission) against 4 real processes, with the
// workload's history and the final reads of every key checked by
// porcupine and the cluster back at its replication factor afterwards.
// Seed 92's six faults are one of each kind, its split cuts 2 nodes from
// 2 while the one churn decommissions a node of the cut pair, and a move
// meets a pause and a kill. TIDEKV_E2E_LONG=1 runs 10 schedules of a
// minute each.
func TestBenchChaos(t *testing.T) {
	schedules, dur := 1, 25*time.Second
	if long() {
		schedules, dur = 10, time.Minute
	}
	args := []string{"--schedules", fmt.Sprint(schedules),
		"--duration", dur.String(), "--interval", "4s", "--down", "2s", "--seed", "92",
		"--faults", "kill,pause,partition,skew,slow-disk,split,move,churn"}
	if sec := testcluster.Secured(t); sec != nil {
		args = append(args, "--certs-dir", sec.CertsDir, "--users-file", sec.UsersFile)
	}
	reports, stderr, err := benchChaos(t, time.Duration(schedules)*(dur+2*time.Minute), schedules, args...)
	for _, r := range reports {
		t.Logf("seed %d: %s", r.Seed, r.Verdict)
		if !r.Passed() {
			t.Errorf("schedule with seed %d failed: %s", r.Seed, r.Verdict)
		}
		if faults := r.Kills + r.Pauses + r.Partitions + r.Skews + r.SlowDisks + r.Splits; faults < 6 || r.CheckedOps < 500 || r.FinalReads != 4 {
			t.Errorf("seed %d: %d faults, %d checked operations and %d final reads prove too little", r.Seed, faults, r.CheckedOps, r.FinalReads)
		}
		if !long() && (r.Splits != 1 || r.Churns != 1) {
			t.Errorf("seed %d: %d splits and %d churns, want seed 92's one of each", r.Seed, r.Splits, r.Churns)
		}
	}
	if err != nil && !t.Failed() {
		t.Fatalf("tidekv bench chaos exited with %v although every schedule passed\n%s", err, stderr)
	}
}

// benchChaos runs `tidekv bench chaos --json` with args on a free port
// block for at most d, and returns its reports (schedules of them), its
// stderr and its exit error.
func benchChaos(t *testing.T, d time.Duration, schedules int, args ...string) ([]nemesis.Report, []byte, error) {
	t.Helper()
	bin := testcluster.Binary(t)
	port := testcluster.FreeBasePort(t, 4)
	args = append([]string{"bench", "chaos", "--json", "--base-port", fmt.Sprint(port), "--data-dir", t.TempDir()}, args...)
	cmd := exec.CommandContext(testCtx(t, d), bin, args...)
	// Its log, also of a run that passed: a test's own checks may still
	// fail and show it.
	var log bytes.Buffer
	cmd.Stderr = &log
	out, err := cmd.Output()
	stderr := log.Bytes()
	var reports []nemesis.Report
	if jerr := json.Unmarshal(out, &reports); jerr != nil {
		t.Fatalf("tidekv %v: %v (%v)\n%s\n%s", args, err, jerr, out, stderr)
	}
	if len(reports) != schedules {
		t.Fatalf("%d reports for %d schedules", len(reports), schedules)
	}
	return reports, stderr, err
}
