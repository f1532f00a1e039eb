package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/tidekv/tidekv/bench/cachebench"
)

// migrationReport is one index in `tidekv bench cache --scenario
// migration --json`; times are milliseconds.
type migrationReport struct {
	Scenario   string          `json:"scenario"`
	Index      string          `json:"index"`
	Keys       int             `json:"keys"`
	ValueBytes int             `json:"value_bytes"`
	TotalMs    float64         `json:"total_ms"`
	MeanMs     float64         `json:"mean_ms"`
	MinMs      float64         `json:"min_ms"`
	MaxMs      float64         `json:"max_ms"`
	Migrations []migrationStep `json:"migrations"`
}

// migrationStep is one move: the keys moved, what the source held before,
// and the time of each part (cachebench.Migration).
type migrationStep struct {
	Keys       int     `json:"keys"`
	SourceKeys int     `json:"source_keys"`
	SplitMs    float64 `json:"split_ms"`
	ExtractMs  float64 `json:"extract_ms"`
	DeleteMs   float64 `json:"delete_ms"`
	IngestMs   float64 `json:"ingest_ms"`
	TotalMs    float64 `json:"total_ms"`
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func runMigration(w io.Writer, cfg cachebench.MigrationConfig, out string, asJSON bool) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "tidekv-migration-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	var results []cachebench.MigrationResult
	var reports []migrationReport
	for _, v := range cachebench.PaperIndexes() {
		r, err := cachebench.RunMigration(cfg, v, dir)
		if err != nil {
			return err
		}
		results = append(results, r)
		reports = append(reports, migrationReportOf(cfg, r))
	}
	if out != "" {
		if _, err := cachebench.WriteSVG(out, "cache-migration", cachebench.MigrationChart(cfg, results)); err != nil {
			return err
		}
	}
	if asJSON {
		return json.NewEncoder(w).Encode(reports)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "INDEX\tTOTAL ms\tMEAN ms\tMIN ms\tMAX ms\tPER MIGRATION ms (keys moved)")
	for _, r := range reports {
		var each []string
		for _, m := range r.Migrations {
			each = append(each, fmt.Sprintf("%.1f (%d)", m.TotalMs, m.Keys))
		}
		fmt.Fprintf(tw, "%s\t%.1f\t%.1f\t%.1f\t%.1f\t%s\n", r.Index, r.TotalMs, r.MeanMs, r.MinMs, r.MaxMs, strings.Join(each, " "))
	}
	return tw.Flush()
}

func migrationReportOf(cfg cachebench.MigrationConfig, r cachebench.MigrationResult) migrationReport {
	rep := migrationReport{Scenario: "migration", Index: r.Index, Keys: cfg.Keys, ValueBytes: cfg.ValueBytes, TotalMs: ms(r.Total())}
	for i, m := range r.Migrations {
		t := ms(m.Total())
		rep.Migrations = append(rep.Migrations, migrationStep{Keys: m.Keys, SourceKeys: m.SourceKeys, SplitMs: ms(m.Split),
			ExtractMs: ms(m.Extract), DeleteMs: ms(m.Delete), IngestMs: ms(m.Ingest), TotalMs: t})
		if i == 0 || t < rep.MinMs {
			rep.MinMs = t
		}
		rep.MaxMs = max(rep.MaxMs, t)
	}
	rep.MeanMs = rep.TotalMs / float64(len(r.Migrations))
	return rep
}

// fig3Report is one variant at one rate in `tidekv bench cache --scenario
// paper-fig3 --json`.
type fig3Report struct {
	Scenario string `json:"scenario"`
	cachebench.Fig3Run
}

func runFig3(w io.Writer, cfg cachebench.Fig3Config, out string, asJSON bool) error {
	runs, err := cachebench.RunFig3(cfg)
	if err != nil {
		return err
	}
	if out != "" {
		for _, rate := range cfg.Rates {
			if _, err := cachebench.WriteSVG(out, fmt.Sprintf("cache-fig3-rate%d", rate), cachebench.Fig3Chart(cfg, rate, runs)); err != nil {
				return err
			}
		}
	}
	if asJSON {
		reports := make([]fig3Report, 0, len(runs))
		for _, r := range runs {
			reports = append(reports, fig3Report{Scenario: "paper-fig3", Fig3Run: r})
		}
		return json.NewEncoder(w).Encode(reports)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "RATE\tVARIANT\tMISS RATE\tLAST %d STEPS\tNODES AT END\tMEAN NODES\tEVICTED\tMISS RATE PER %d STEPS\n", cfg.BucketSteps, cfg.BucketSteps)
	for _, r := range runs {
		var each []string
		for _, m := range r.MissRate {
			each = append(each, fmt.Sprintf("%.2f", m))
		}
		fmt.Fprintf(tw, "%d\t%s\t%.3f\t%.3f\t%d\t%.1f\t%d\t%s\n", r.Rate, r.Variant, float64(r.Misses)/float64(r.Queries),
			r.MissRate[len(r.MissRate)-1], r.Nodes[len(r.Nodes)-1], float64(r.NodeSteps)/float64(cfg.Steps), r.Evicted, strings.Join(each, " "))
	}
	return tw.Flush()
}
