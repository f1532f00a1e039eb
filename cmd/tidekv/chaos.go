package main

import (
	"encoding/json"
	"fmt"
	"os"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/tidekv/tidekv/internal/nemesis"
	"github.com/tidekv/tidekv/internal/raftstore"
	"github.com/tidekv/tidekv/internal/txncheck"
)

func newChaosBenchCmd() *cobra.Command {
	c := nemesis.DefaultChaosConfig()
	var asJSON bool
	faults := "kill,pause,partition,skew,slow-disk"
	txnWorkload := "list-append"
	cmd := &cobra.Command{
		Use:   "chaos",
		Short: "Seeded fault schedules against a cluster of real processes, each history checked for linearizability",
		Long: `Starts a fresh cluster of real processes per schedule (4 nodes by default),
runs a linearizability workload (concurrent put/get/compare-and-set clients
over a few keys) and, at the same time, a seeded fault plan: every
--interval a random node gets one of the --faults, undone --down later:
kill (SIGKILL, then restart), pause (SIGSTOP, then SIGCONT), partition
(its Raft traffic with every other node cut both ways, then healed; clients
still reach it), skew (its wall clock, which its HLC and closed timestamps
read, offset by up to ±--max-skew, then reset) or slow-disk (every sync of its
engine waits --disk-delay, then not). Not in the default mix, so that
recorded seeds keep their plans: disk-fail (its engine's writes fail, so
it stops, then it restarts on the same data), replace (it is killed, its data
wiped, and a fresh node started at its address, which must get the old
node's replicas re-created), bridge (the link between it and one other
node cut both ways, then healed, each still reaching the rest), split (the
cluster cut in two, both ways: it and possibly one more node, at most half,
against the rest; then healed), and two operations that run while a fault
is on: move (its replica of a range moved to a node without one, with
ChangeReplicas, given up after --down) and churn (it is decommissioned, then recommissioned --down
later); and three that change the range layout of the workload's keys:
range-split (a range split at one of the keys, or just after one, that
starts no range), merge (a range joined with its right neighbour of the same
replicas) and lease-transfer (a range's lease moved to it), each counted
made only once the range directory shows it. A step that draws an operation also gets a fault, drawn from the
faults among --faults, and the operation starts halfway through it.
Partitions, skews, slow disks, bridges and splits go through each node's
fault-injection endpoint (--enable-fault-injection).
Afterwards every range must be back at 3 voters with no learner within
--converge-within, every key is read back, and the recorded history, those
reads included, must be linearizable (porcupine). Schedule i uses seed
--seed+i. Exits non-zero if any schedule fails.

--workload txn runs transactions instead, through the Go client's Txn, on
--keys keys each split into a range of its own: --txn-workload list-append
(each step reads a list or appends a unique value to it) or register (each
step reads, writes a unique value, or both). After recovery every key is
read in one more transaction, and the history must show no anomaly
(txncheck: G0, G1a, G1b, G1c, G-single, G2-item, and cycles through real
time; docs/testing.md); --json reports committed, anomalies and
anomaly_kinds.

--workload txn-resp runs the same transactions as a Redis user writes
them, over the nodes' Redis listeners: list-append as MULTI, GET or APPEND
of "value," per step, EXEC; register as WATCH and GET of the keys read,
then MULTI, SET per write, EXEC (a null EXEC: a watched key changed).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch txnWorkload {
			case "list-append":
				c.TxnWorkload = txncheck.ListAppend
			case "register":
				c.TxnWorkload = txncheck.Register
			default:
				return fmt.Errorf("--txn-workload %q: list-append or register", txnWorkload)
			}
			if _, err := raftstore.ParseBreaks(c.Break); err != nil {
				return fmt.Errorf("--break: %w", err)
			}
			return runChaos(cmd, c, faults, asJSON)
		},
	}
	f := cmd.Flags()
	f.IntVar(&c.Schedules, "schedules", c.Schedules, "how many seeded schedules to run, one after another")
	f.Uint64Var(&c.Seed, "seed", c.Seed, "seed of the first schedule")
	f.DurationVar(&c.Faults.Duration, "duration", c.Faults.Duration, "how long faults are injected per schedule")
	f.DurationVar(&c.Faults.Interval, "interval", c.Faults.Interval, "time between fault starts")
	f.DurationVar(&c.Faults.Down, "down", c.Faults.Down, "how long a fault lasts (a node stays killed, paused, partitioned off, skewed or slowed), a move may take, or a churned node stays decommissioned")
	f.StringVar(&faults, "faults", faults, "comma-separated fault kinds a step picks from, alike (kill, pause, partition, skew, slow-disk, disk-fail, replace, bridge, split, move, churn, range-split, merge, lease-transfer; one listed twice is twice as likely)")
	f.DurationVar(&c.Faults.DiskDelay, "disk-delay", c.Faults.DiskDelay, "how long each sync of a slowed disk waits")
	f.DurationVar(&c.Faults.MaxSkew, "max-skew", c.Faults.MaxSkew, "largest clock offset of a skew fault, either way (a step of the node's wall clock: leases run on the monotonic clock); the default, half the nodes' --max-offset, never trips the offset monitor, and beyond 0.8 × --max-offset a skewed node gives up its leases")
	f.IntVar(&c.Faults.Nodes, "nodes", c.Faults.Nodes, "cluster size")
	f.IntVar(&c.Clients, "clients", c.Clients, "concurrent workload clients")
	f.IntVar(&c.Keys, "keys", c.Keys, "keys the workload's clients share")
	f.IntVar(&c.MinOK, "min-ok", 0, "the workload runs on after the schedule until this many of its operations (transactions) succeeded, for at most a minute more (0: it stops with the schedule)")
	f.StringVar(&c.Workload, "workload", "kv", "what the clients run: kv (single-key operations, checked for linearizability), txn (transactions through the Go client, checked for anomalies) or txn-resp (the same as MULTI/EXEC over RESP)")
	f.StringVar(&txnWorkload, "txn-workload", txnWorkload, "with --workload txn or txn-resp: list-append or register")
	f.StringVar(&c.Break, "break", "", "TESTING ONLY, with --workload txn or txn-resp: run every node with a deliberately broken transaction mode (skip-refresh, skip-tscache, client-clock), which the check must catch: a schedule passes when it finds anomalies")
	_ = f.MarkHidden("break")
	f.DurationVar(&c.ClientLag, "client-clock-lag", 0, "the workload client's wall clock runs this far behind the nodes' (beyond --max-offset no answer moves it on, so every read timestamp it proposes is stale)")
	f.IntVar(&c.BasePort, "base-port", c.BasePort, "first port of the cluster's port blocks")
	f.StringVar(&c.DataDir, "data-dir", c.DataDir, "parent directory of each schedule's (removed) cluster directory")
	f.DurationVar(&c.ConvergeWithin, "converge-within", c.ConvergeWithin, "bound on the wait for full replication after the last fault")
	f.StringVar(&c.Binary, "binary", "", "tidekv executable to run (default: this one)")
	f.StringVar(&c.CertsDir, "certs-dir", "", "run secure clusters: the nodes' --certs-dir, which must also hold client.root.crt/.key, by which the run acts as root (docs/security.md)")
	f.StringVar(&c.UsersFile, "users-file", "", "with --certs-dir: the nodes' --users-file")
	f.BoolVar(&asJSON, "json", false, "print the reports as JSON")
	return cmd
}

func chaosTable(cmd *cobra.Command, reports []nemesis.Report) {
	w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "SEED\tKILLS\tPAUSES\tPARTITIONS\tSKEWS\tSLOW DISKS\tFAILED DISKS (STOPPED)\tREPLACED\tBRIDGES\tSPLITS\tMOVES (MADE)\tCHURNS\tRANGE SPLITS, MERGES, LEASE TRANSFERS (MADE)\tOPS\tOK\tCHECK\tCONVERGED\tRESULT")
	for _, r := range reports {
		conv := "no"
		if r.Converged {
			conv = fmt.Sprintf("%.1fs", r.ConvergedSec)
		}
		result := "pass"
		if !r.Passed() {
			result = "FAIL"
			if r.Error != "" {
				result += ": " + r.Error
			}
		}
		check := fmt.Sprintf("%d checked, linearizable %v", r.CheckedOps, r.Linearizable)
		if r.Workload != "kv" {
			check = fmt.Sprintf("%d anomalies %v", r.Anomalies, r.AnomalyKinds)
		}
		layout := fmt.Sprintf("%d (%d), %d (%d), %d (%d)", r.RangeSplits.Asked, r.RangeSplits.Made, r.Merges.Asked, r.Merges.Made, r.LeaseTransfers.Asked, r.LeaseTransfers.Made)
		fmt.Fprintf(w, "%d\t%d\t%d\t%d\t%d\t%d\t%d (%d)\t%d\t%d\t%d\t%d (%d)\t%d\t%s\t%d\t%d\t%s\t%s\t%s\n", r.Seed, r.Kills, r.Pauses, r.Partitions, r.Skews, r.SlowDisks,
			r.DiskFails, r.DiskFailStops, r.Replaced, r.Bridges, r.Splits, r.Moves, r.MovesOK, r.Churns, layout, r.Ops, r.OkOps, check, conv, result)
	}
	w.Flush()
}

// runChaos runs the schedules and reports them; it fails if any failed.
func runChaos(cmd *cobra.Command, c nemesis.ChaosConfig, faults string, asJSON bool) error {
	kinds, err := nemesis.ParseKinds(faults)
	if err != nil {
		return err
	}
	c.Faults.Kinds = kinds
	if c.Binary == "" {
		exe, err := os.Executable()
		if err != nil {
			return err
		}
		c.Binary = exe
	}
	progress := func(format string, args ...any) { fmt.Fprintf(cmd.ErrOrStderr(), format+"\n", args...) }
	reports, err := nemesis.Chaos(cmdContext(cmd), c, progress)
	if err != nil && len(reports) == 0 {
		return err
	}
	if asJSON {
		if err := json.NewEncoder(cmd.OutOrStdout()).Encode(reports); err != nil {
			return err
		}
	} else {
		chaosTable(cmd, reports)
	}
	failed := 0
	for _, r := range reports {
		if !r.Passed() {
			failed++
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d schedules failed", failed, len(reports))
	}
	return err
}
