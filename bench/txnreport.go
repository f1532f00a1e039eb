package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"text/tabwriter"
	"time"
)

// TxnBenchResult is the outcome of RunTxn; its JSON field names are the
// script interface of `tidekv bench txn --json`.
type TxnBenchResult struct {
	// Config is what ran, the seed filled in.
	Config TxnBenchConfig `json:"config"`
	// Committed counts transactions that committed; Aborted those the
	// store gave up on after conflicts; Errors those that failed
	// otherwise (an ambiguous commit, an unreachable cluster), the first
	// of which is FirstError. Retries counts attempts beyond each
	// transaction's first.
	Committed  int64  `json:"committed"`
	Aborted    int64  `json:"aborted"`
	Errors     int64  `json:"errors"`
	Retries    int64  `json:"retries"`
	FirstError string `json:"first_error,omitempty"`
	// ElapsedSeconds is the run's wall time, the setup and final check
	// not included; CommittedPerSec is Committed over it.
	ElapsedSeconds  float64 `json:"elapsed_s"`
	CommittedPerSec float64 `json:"committed_per_sec"`
	// Latencies of committed transactions, retries included, in ms.
	P50Ms float64 `json:"p50_ms"`
	P99Ms float64 `json:"p99_ms"`
	MaxMs float64 `json:"max_ms"`
	// InvariantChecks counts snapshot reads of every account that were
	// checked, the final one included; InvariantCheckErrors those that
	// could not be read.
	InvariantChecks      int64 `json:"invariant_checks"`
	InvariantCheckErrors int64 `json:"invariant_check_errors"`
	// InvariantOK is true when every check saw the total and the final
	// one was read; otherwise InvariantError says what was seen.
	InvariantOK    bool   `json:"invariant_ok"`
	InvariantError string `json:"invariant_error,omitempty"`
	// Stopped says what ended the run: StoppedDuration, StoppedCompleted
	// (the transaction count), StoppedInvariant or StoppedCanceled.
	Stopped string `json:"stopped"`
	// Timeline has one point per second: transactions (committed or
	// not), the failed ones as errors, and the committed ones' p99.
	Timeline []TimelinePoint `json:"timeline"`
}

// summarize merges the workers' counts and latencies.
func (r *txnRun) summarize(workers []*txnWorker, elapsed time.Duration) *TxnBenchResult {
	res := &TxnBenchResult{Config: r.cfg, ElapsedSeconds: elapsed.Seconds()}
	var h histogram
	for _, w := range workers {
		h.merge(&w.hist)
		res.Committed += w.committed
		res.Aborted += w.aborted
		res.Errors += w.errors
		res.Retries += w.retries
		if w.firstErr != nil && res.FirstError == "" {
			res.FirstError = w.firstErr.Error()
		}
	}
	res.CommittedPerSec = rate(res.Committed, elapsed)
	res.P50Ms, res.P99Ms, res.MaxMs = float64(h.quantile(0.5))/1e6, float64(h.quantile(0.99))/1e6, float64(h.max)/1e6
	return res
}

// summarizeChecks puts the checker's findings into res.
func (r *txnRun) summarizeChecks(res *TxnBenchResult) {
	res.InvariantChecks, res.InvariantCheckErrors = r.checks.Load(), r.checkErrs.Load()
	res.InvariantOK = r.violation == nil
	if !res.InvariantOK {
		res.InvariantError = r.violation.Error()
	}
}

// scale says how much data the workload ran over.
func (c TxnBenchConfig) scale() string {
	if c.Workload == WorkloadTPCCLite {
		return fmt.Sprintf("%d warehouses", c.Warehouses)
	}
	return fmt.Sprintf("%d accounts of %d", c.Accounts, c.InitialBalance)
}

// WriteJSON writes r as one indented JSON object.
func (r *TxnBenchResult) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteTable writes r for a reader: what ran, one row of results, and
// the invariant's verdict.
func (r *TxnBenchResult) WriteTable(w io.Writer) error {
	c := r.Config
	fmt.Fprintf(w, "%s: %s on %d ranges, %d workers for at most %s", c.Workload, c.scale(), c.Ranges, c.Workers, c.Duration)
	if c.Transactions > 0 {
		fmt.Fprintf(w, " or %d transactions", c.Transactions)
	}
	fmt.Fprintf(w, ", seed %d; ran %.3fs (stopped: %s)\n", c.Seed, r.ElapsedSeconds, r.Stopped)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "COMMITTED\tCOMMITTED/S\tABORTED\tERRORS\tRETRIES\tP50(ms)\tP99(ms)\tMAX(ms)\tCHECKS\tCHECK ERRORS\tINVARIANT OK\t\n")
	fmt.Fprintf(tw, "%d\t%.1f\t%d\t%d\t%d\t%.3f\t%.3f\t%.3f\t%d\t%d\t%v\t\n", r.Committed, r.CommittedPerSec, r.Aborted, r.Errors, r.Retries,
		r.P50Ms, r.P99Ms, r.MaxMs, r.InvariantChecks, r.InvariantCheckErrors, r.InvariantOK)
	if err := tw.Flush(); err != nil {
		return err
	}
	if r.FirstError != "" {
		fmt.Fprintf(w, "first error: %s\n", r.FirstError)
	}
	if r.InvariantError != "" {
		fmt.Fprintf(w, "invariant: %s\n", r.InvariantError)
	}
	return nil
}

// WriteFigure draws the run's timeline (transactions and failures per
// second, p99 of the committed ones) into dir as txn-WORKLOAD.svg.
func (r *TxnBenchResult) WriteFigure(dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	c := r.Config
	path := filepath.Join(dir, fmt.Sprintf("txn-%s.svg", c.Workload))
	title := fmt.Sprintf("bench txn %s: %s on %d ranges, %d workers", c.Workload, c.scale(), c.Ranges, c.Workers)
	f, err := os.Create(path)
	if err != nil {
		return "", err
	}
	err = timelineChart(title, "transactions/s", "failed/s", r.Timeline).WriteSVG(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", fmt.Errorf("writing %s: %w", path, err)
	}
	return path, nil
}
