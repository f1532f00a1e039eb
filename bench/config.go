package bench

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Distribution names accepted by Config.Distribution.
const (
	Zipfian = "zipfian"
	Uniform = "uniform"
	Latest  = "latest"
	Hotspot = "hotspot"
)

// Config describes one benchmark. Start from DefaultConfig: Validate rejects
// the zero values of most fields.
type Config struct {
	// Workload is the YCSB core workload, "a" to "f" (case-insensitive).
	Workload string `json:"workload"`
	// RecordCount is the number of records the load phase inserts (key
	// numbers 0..RecordCount-1) and that the run phase reads from. With
	// SkipLoad it must match what an earlier load inserted.
	RecordCount int64 `json:"record_count"`
	// OperationCount is the number of run-phase operations. 0 means no
	// bound, which requires Duration.
	OperationCount int64 `json:"operation_count"`
	// Threads is the number of run-phase goroutines (concurrent clients).
	Threads int `json:"threads"`
	// LoadThreads is the number of load-phase goroutines; 0 means Threads.
	LoadThreads int `json:"load_threads"`
	// Distribution chooses the keys of reads, updates, scans and
	// read-modify-writes: zipfian, uniform, latest or hotspot. Empty means
	// the workload's YCSB default (latest for D, zipfian otherwise).
	Distribution string `json:"distribution"`
	// ZipfianConstant is the zipfian skew theta, in (0, 1); YCSB uses 0.99.
	ZipfianConstant float64 `json:"zipfian_constant"`
	// FieldCount is the number of fields per record.
	FieldCount int `json:"field_count"`
	// FieldLength is the length of each field in bytes.
	FieldLength int `json:"field_length"`
	// MaxScanLength bounds workload E scans: each scan asks for a uniform
	// 1..MaxScanLength records.
	MaxScanLength int `json:"max_scan_length"`
	// HotspotDataFraction is the fraction of records in the hot set
	// (hotspot distribution), in [0, 1].
	HotspotDataFraction float64 `json:"hotspot_data_fraction"`
	// HotspotOpnFraction is the fraction of operations that go to the hot
	// set (hotspot distribution), in [0, 1].
	HotspotOpnFraction float64 `json:"hotspot_opn_fraction"`
	// Seed seeds every random choice; each goroutine draws from its own
	// stream, so a goroutine's sequence of operations is reproducible.
	// 0 picks a time-based seed, recorded in Result.Config.
	Seed uint64 `json:"seed"`
	// Duration caps the run phase's wall time; 0 means no cap. The load
	// phase always completes so that the run phase finds its records.
	Duration time.Duration `json:"duration_ns"`
	// SkipLoad skips the load phase, for running against records loaded
	// by an earlier run with the same RecordCount.
	SkipLoad bool `json:"skip_load"`
	// ReadMode names how the Store reads (for TideKV: "any",
	// "bounded:500ms"; see docs/read-modes.md). The benchmark does not
	// interpret it: the Store applies it, the report records it. Empty means
	// the store's default (linearizable for TideKV) and is left out of JSON.
	ReadMode string `json:"read_mode,omitempty"`
	// Transport names how the Store sends requests when it has a choice
	// (for TideKV: "unary" calls instead of its Batch stream). Recorded
	// only, like ReadMode; empty for the store's default.
	Transport string `json:"transport,omitempty"`
}

// DefaultConfig returns YCSB's core workload defaults for workload A.
func DefaultConfig() Config {
	return Config{
		Workload:            "a",
		RecordCount:         100000,
		OperationCount:      100000,
		Threads:             32,
		ZipfianConstant:     ycsbZipfianConstant,
		FieldCount:          10,
		FieldLength:         100,
		MaxScanLength:       100,
		HotspotDataFraction: 0.2,
		HotspotOpnFraction:  0.8,
	}
}

// Validate reports every problem with c, joined into one error.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("bench: "+format, args...))
	}
	if _, ok := lookupWorkload(c.Workload); !ok {
		bad("workload must be one of a, b, c, d, e, f; got %q", c.Workload)
	}
	switch c.Distribution {
	case "", Zipfian, Uniform, Latest, Hotspot:
	default:
		bad("distribution must be zipfian, uniform, latest or hotspot; got %q", c.Distribution)
	}
	if c.RecordCount <= 0 {
		bad("record count must be positive; got %d", c.RecordCount)
	}
	if c.OperationCount < 0 {
		bad("operation count must not be negative; got %d", c.OperationCount)
	}
	if c.OperationCount == 0 && c.Duration <= 0 {
		bad("operation count 0 (unbounded) needs a duration")
	}
	if c.Duration < 0 {
		bad("duration must not be negative; got %v", c.Duration)
	}
	if c.Threads <= 0 {
		bad("threads must be positive; got %d", c.Threads)
	}
	if c.LoadThreads < 0 {
		bad("load threads must not be negative; got %d", c.LoadThreads)
	}
	// Gray's algorithm divides by 1-theta.
	if !(c.ZipfianConstant > 0 && c.ZipfianConstant < 1) {
		bad("zipfian constant must be in (0, 1); got %v", c.ZipfianConstant)
	}
	if c.FieldCount <= 0 {
		bad("field count must be positive; got %d", c.FieldCount)
	}
	if c.FieldLength <= 0 {
		bad("field length must be positive; got %d", c.FieldLength)
	}
	if c.MaxScanLength <= 0 {
		bad("max scan length must be positive; got %d", c.MaxScanLength)
	}
	if !(c.HotspotDataFraction >= 0 && c.HotspotDataFraction <= 1) {
		bad("hotspot data fraction must be in [0, 1]; got %v", c.HotspotDataFraction)
	}
	if !(c.HotspotOpnFraction >= 0 && c.HotspotOpnFraction <= 1) {
		bad("hotspot operation fraction must be in [0, 1]; got %v", c.HotspotOpnFraction)
	}
	return errors.Join(errs...)
}

// resolved fills the fields whose zero value means "default" so that the
// Result records what actually ran. c must be valid.
func (c Config) resolved() Config {
	c.Workload = strings.ToLower(c.Workload)
	w, _ := lookupWorkload(c.Workload)
	if c.Distribution == "" {
		c.Distribution = w.distribution
	}
	if c.LoadThreads == 0 {
		c.LoadThreads = c.Threads
	}
	if c.Seed == 0 {
		// Keep seeds within 2^53 so they survive JSON readers that use
		// float64 numbers.
		c.Seed = uint64(time.Now().UnixNano())&(1<<53-1) | 1
	}
	return c
}

// opKind is an operation type; its String is the name YCSB reports.
type opKind int

const (
	opRead opKind = iota
	opUpdate
	opInsert
	opScan
	opReadModifyWrite
	numOpKinds
)

func (k opKind) String() string {
	switch k {
	case opRead:
		return "READ"
	case opUpdate:
		return "UPDATE"
	case opInsert:
		return "INSERT"
	case opScan:
		return "SCAN"
	case opReadModifyWrite:
		return "READ-MODIFY-WRITE"
	}
	return fmt.Sprintf("opKind(%d)", int(k))
}

// workload is a YCSB core workload: its operation mix (proportions indexed
// by opKind, summing to 1) and default request distribution.
type workload struct {
	mix          [numOpKinds]float64
	distribution string
}

// insertProportion is the share of run-phase operations that insert.
func (w workload) insertProportion() float64 { return w.mix[opInsert] }

// lookupWorkload returns the YCSB core workload named a..f. A switch rather
// than a package-level map keeps the package free of mutable globals.
func lookupWorkload(name string) (workload, bool) {
	var w workload
	w.distribution = Zipfian
	switch strings.ToLower(name) {
	case "a":
		w.mix[opRead], w.mix[opUpdate] = 0.5, 0.5
	case "b":
		w.mix[opRead], w.mix[opUpdate] = 0.95, 0.05
	case "c":
		w.mix[opRead] = 1
	case "d":
		w.mix[opRead], w.mix[opInsert] = 0.95, 0.05
		w.distribution = Latest
	case "e":
		w.mix[opScan], w.mix[opInsert] = 0.95, 0.05
	case "f":
		w.mix[opRead], w.mix[opReadModifyWrite] = 0.5, 0.5
	default:
		return workload{}, false
	}
	return w, true
}
