package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// memStore is an in-memory Store: a map for point operations and a sorted
// key slice for Scan. failEvery > 0 makes every failEvery-th call fail.
type memStore struct {
	failEvery int64
	delay     time.Duration // per call, honouring ctx
	calls     atomic.Int64

	mu    sync.Mutex
	data  map[string][]byte
	keys  []string       // sorted
	reads map[string]int // Get calls per key
	log   []string       // "op key" per call, when logging
	logOn bool
}

func newMemStore() *memStore {
	return &memStore{data: map[string][]byte{}, reads: map[string]int{}}
}

var errInjected = errors.New("injected failure")

func (s *memStore) enter(ctx context.Context) error {
	n := s.calls.Add(1)
	if s.delay > 0 {
		select {
		case <-time.After(s.delay):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if s.failEvery > 0 && n%s.failEvery == 0 {
		return errInjected
	}
	return nil
}

func (s *memStore) Get(ctx context.Context, key []byte) ([]byte, bool, error) {
	if err := s.enter(ctx); err != nil {
		return nil, false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reads[string(key)]++
	if s.logOn {
		s.log = append(s.log, "get "+string(key))
	}
	v, ok := s.data[string(key)]
	return bytes.Clone(v), ok, nil
}

func (s *memStore) Put(ctx context.Context, key, value []byte) error {
	if err := s.enter(ctx); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := string(key)
	if _, ok := s.data[k]; !ok {
		i, _ := slices.BinarySearch(s.keys, k)
		s.keys = slices.Insert(s.keys, i, k)
	}
	s.data[k] = bytes.Clone(value)
	if s.logOn {
		s.log = append(s.log, "put "+k)
	}
	return nil
}

func (s *memStore) Scan(ctx context.Context, start []byte, limit int) (int, error) {
	if err := s.enter(ctx); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	i, _ := slices.BinarySearch(s.keys, string(start))
	if s.logOn {
		s.log = append(s.log, "scan "+string(start))
	}
	return min(limit, len(s.keys)-i), nil
}

func testConfig(workload string) Config {
	cfg := DefaultConfig()
	cfg.Workload = workload
	cfg.RecordCount = 2000
	cfg.OperationCount = 6000
	cfg.Threads = 8
	cfg.Seed = 1
	return cfg
}

func keyOf(n int64) string { return string(appendKey(nil, n)) }

func opByName(t *testing.T, p *PhaseResult, name string) OpResult {
	t.Helper()
	for _, o := range p.Ops {
		if o.Op == name {
			return o
		}
	}
	return OpResult{Op: name}
}

func TestKeysMatchYCSB(t *testing.T) {
	// YCSB's first key with the default hashed insert order.
	if got := keyOf(0); got != "user6284781860667377211" {
		t.Fatalf("key 0 = %s", got)
	}
}

func TestRunAllWorkloads(t *testing.T) {
	for _, name := range []string{"a", "b", "c", "d", "e", "f"} {
		t.Run(name, func(t *testing.T) {
			cfg := testConfig(name)
			store := newMemStore()
			res, err := Run(context.Background(), cfg, store, nil)
			if err != nil {
				t.Fatal(err)
			}
			wl, _ := lookupWorkload(name)
			wantDist := Zipfian
			if name == "d" {
				wantDist = Latest
			}
			if res.Config.Distribution != wantDist || res.Config.LoadThreads != cfg.Threads {
				t.Errorf("resolved config %+v", res.Config)
			}

			load := res.Load
			if load.Operations != cfg.RecordCount || load.Errors != 0 || load.Stopped != StoppedCompleted ||
				len(load.Ops) != 1 || load.Ops[0].Op != "INSERT" {
				t.Fatalf("load result %+v", load)
			}

			run := res.Run
			if run.Operations != cfg.OperationCount || run.Errors != 0 || run.Stopped != StoppedCompleted {
				t.Fatalf("run: %d operations, %d errors, stopped %s", run.Operations, run.Errors, run.Stopped)
			}
			var sum int64
			for _, o := range run.Ops {
				sum += o.Count
				if o.NotFound != 0 {
					t.Errorf("%s: %d not found; readers must only see inserted keys", o.Op, o.NotFound)
				}
				if !(o.MinMs <= o.P50Ms && o.P50Ms <= o.P95Ms && o.P95Ms <= o.P99Ms &&
					o.P99Ms <= o.P999Ms && o.P999Ms <= o.MaxMs && o.MinMs <= o.AvgMs && o.AvgMs <= o.MaxMs) {
					t.Errorf("%s: inconsistent latencies %+v", o.Op, o)
				}
			}
			if sum != run.Operations {
				t.Errorf("op counts sum to %d, want %d", sum, run.Operations)
			}
			for k, p := range wl.mix {
				got := float64(opByName(t, run, opKind(k).String()).Count) / float64(run.Operations)
				if math.Abs(got-p) > 0.03 {
					t.Errorf("%v: %.3f of operations, want %.2f", opKind(k), got, p)
				}
			}

			// Every run-phase insert is in the store, and so is every
			// loaded record.
			inserts := opByName(t, run, "INSERT").Count
			if got, want := int64(len(store.data)), cfg.RecordCount+inserts; got != want {
				t.Errorf("store holds %d records, want %d", got, want)
			}
			for n := range cfg.RecordCount + inserts {
				if _, ok := store.data[keyOf(n)]; !ok {
					t.Fatalf("record %d missing", n)
				}
			}
			if name == "d" {
				// Latest makes readers find fresh inserts.
				hits := 0
				for n := cfg.RecordCount; n < cfg.RecordCount+inserts; n++ {
					hits += store.reads[keyOf(n)]
				}
				if inserts == 0 || hits == 0 {
					t.Errorf("%d inserts, %d reads of inserted keys", inserts, hits)
				}
			}

			// Every stored value is a well-formed record, including
			// those rewritten by read-modify-write.
			for k, v := range store.data {
				fields, err := decodeRecord(nil, v)
				if err != nil || len(fields) != cfg.FieldCount {
					t.Fatalf("%s: %d fields, err %v", k, len(fields), err)
				}
				for _, f := range fields {
					if len(f) != cfg.FieldLength {
						t.Fatalf("%s: field of %d bytes", k, len(f))
					}
				}
			}
		})
	}
}

func TestRunCountsErrors(t *testing.T) {
	cfg := testConfig("a")
	store := newMemStore()
	store.failEvery = 10
	res, err := Run(context.Background(), cfg, store, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Workload A makes one store call per operation, so exactly a tenth
	// of each phase fails.
	if res.Load.Errors != cfg.RecordCount/10 {
		t.Errorf("load errors %d, want %d", res.Load.Errors, cfg.RecordCount/10)
	}
	if res.Run.Errors != cfg.OperationCount/10 || res.Run.Operations != cfg.OperationCount {
		t.Errorf("run: %d errors of %d, want %d of %d",
			res.Run.Errors, res.Run.Operations, cfg.OperationCount/10, cfg.OperationCount)
	}
	var opErrs int64
	for _, o := range res.Run.Ops {
		opErrs += o.Errors
	}
	if opErrs != res.Run.Errors {
		t.Errorf("per-op errors sum to %d, phase says %d", opErrs, res.Run.Errors)
	}
	// Loads that failed leave records missing, which reads report.
	if opByName(t, res.Run, "READ").NotFound == 0 {
		t.Error("no reads of failed loads were counted as not found")
	}

	// F's read-modify-write makes two calls; either may fail.
	cfg = testConfig("f")
	store = newMemStore()
	store.failEvery = 10
	res, err = Run(context.Background(), cfg, store, nil)
	if err != nil {
		t.Fatal(err)
	}
	if f := float64(res.Run.Errors) / float64(res.Run.Operations); f < 0.1 || f > 0.2 {
		t.Errorf("workload f error rate %.3f, want 0.1-0.2", f)
	}
}

func TestResultJSONAndTable(t *testing.T) {
	cfg := testConfig("e")
	res, err := Run(context.Background(), cfg, newMemStore(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := res.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	var raw map[string]any
	if err := json.Unmarshal(buf.Bytes(), &raw); err != nil {
		t.Fatalf("JSON does not parse: %v\n%s", err, buf.String())
	}
	for _, k := range []string{"config", "load", "run"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("JSON lacks %q", k)
		}
	}
	var back Result
	if err := json.Unmarshal(buf.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if back.Config != res.Config || back.Run.Operations != res.Run.Operations ||
		!slices.Equal(back.Run.Ops, res.Run.Ops) {
		t.Errorf("JSON round trip changed the result")
	}

	buf.Reset()
	if err := res.WriteTable(&buf); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{"YCSB workload e", "load:", "run:", "SCAN", "INSERT", "P99.9(ms)", "OPS/S"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}

func TestRunDurationCap(t *testing.T) {
	cfg := testConfig("c")
	cfg.OperationCount = 0
	cfg.Duration = 200 * time.Millisecond
	cfg.SkipLoad = true
	store := newMemStore()
	store.delay = time.Millisecond
	start := time.Now()
	res, err := Run(context.Background(), cfg, store, nil)
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("took %v for a %v cap", d, cfg.Duration)
	}
	if res.Load != nil || res.Run.Stopped != StoppedDuration || res.Run.Operations == 0 || res.Run.Errors != 0 {
		t.Fatalf("result %+v / %+v", res.Load, res.Run)
	}
	// Nothing was loaded, so every read misses.
	if r := opByName(t, res.Run, "READ"); r.NotFound != r.Count {
		t.Errorf("%d of %d reads not found", r.NotFound, r.Count)
	}
}

func TestRunCancel(t *testing.T) {
	cfg := testConfig("a")
	store := newMemStore()
	store.delay = 5 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	res, err := Run(ctx, cfg, store, nil)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want the context's", err)
	}
	if res == nil || res.Load == nil || res.Run != nil {
		t.Fatalf("partial result %+v", res)
	}
	if res.Load.Stopped != StoppedCanceled || res.Load.Operations == 0 ||
		res.Load.Operations >= cfg.RecordCount || res.Load.Errors != 0 {
		t.Errorf("load %+v: want some operations, no errors from cancellation", res.Load)
	}
}

func TestRunDeterministic(t *testing.T) {
	trace := func() []string {
		cfg := testConfig("f")
		cfg.Threads, cfg.LoadThreads = 1, 1
		cfg.RecordCount, cfg.OperationCount = 200, 500
		store := newMemStore()
		store.logOn = true
		if _, err := Run(context.Background(), cfg, store, nil); err != nil {
			t.Fatal(err)
		}
		return store.log
	}
	if a, b := trace(), trace(); !slices.Equal(a, b) {
		t.Error("same seed and one thread gave different operation sequences")
	}
}

func TestRunProgress(t *testing.T) {
	var buf bytes.Buffer
	cfg := testConfig("b")
	if _, err := Run(context.Background(), cfg, newMemStore(), &buf); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	if strings.Contains(out, "\r") {
		t.Errorf("carriage return in non-terminal progress: %q", out)
	}
	if !strings.Contains(out, "load: 2000/2000 ops (100.0%)") || !strings.Contains(out, "run: 6000/6000 ops (100.0%)") {
		t.Errorf("progress lacks final lines:\n%s", out)
	}
}

func TestProgressTerminal(t *testing.T) {
	var buf bytes.Buffer
	p := newProgress(&buf, "run")
	p.tty = true
	p.interval = 10 * time.Millisecond
	w := &worker{}
	start := time.Now()
	p.start(start, 100, 0, []*worker{w})
	for range 5 {
		w.done.Add(10)
		time.Sleep(15 * time.Millisecond)
	}
	p.stop(time.Now())
	out := buf.String()
	if strings.Count(out, "\r") < 2 || !strings.HasSuffix(out, "\n") || strings.Count(out, "\n") != 1 {
		t.Errorf("terminal progress should rewrite one line: %q", out)
	}
	if !strings.Contains(out, "[##########..........] run: 50/100 ops (50.0%)") {
		t.Errorf("final line missing: %q", out)
	}
}

func TestValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("default config invalid: %v", err)
	}
	cfg := DefaultConfig()
	cfg.Workload = "E"
	cfg.Distribution = Hotspot
	if err := cfg.Validate(); err != nil {
		t.Fatalf("upper-case workload rejected: %v", err)
	}
	for _, c := range []struct {
		mutate func(*Config)
		want   string
	}{
		{func(c *Config) { c.Workload = "g" }, "workload"},
		{func(c *Config) { c.Distribution = "pareto" }, "distribution"},
		{func(c *Config) { c.RecordCount = 0 }, "record count"},
		{func(c *Config) { c.OperationCount = -1 }, "operation count"},
		{func(c *Config) { c.OperationCount = 0 }, "needs a duration"},
		{func(c *Config) { c.Duration = -time.Second }, "duration"},
		{func(c *Config) { c.Threads = 0 }, "threads"},
		{func(c *Config) { c.LoadThreads = -1 }, "load threads"},
		{func(c *Config) { c.ZipfianConstant = 1 }, "zipfian constant"},
		{func(c *Config) { c.FieldCount = 0 }, "field count"},
		{func(c *Config) { c.FieldLength = 0 }, "field length"},
		{func(c *Config) { c.MaxScanLength = 0 }, "scan length"},
		{func(c *Config) { c.HotspotDataFraction = 1.5 }, "hotspot data"},
		{func(c *Config) { c.HotspotOpnFraction = -0.1 }, "hotspot operation"},
	} {
		cfg := DefaultConfig()
		c.mutate(&cfg)
		err := cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("want error about %q, got %v", c.want, err)
		}
		if _, err := Run(context.Background(), cfg, newMemStore(), nil); err == nil {
			t.Errorf("Run accepted config with bad %s", c.want)
		}
	}
	if _, err := Run(context.Background(), DefaultConfig(), nil, nil); err == nil {
		t.Error("Run accepted a nil store")
	}
}

func TestRecordEncoding(t *testing.T) {
	in := [][]byte{[]byte("a"), {}, bytes.Repeat([]byte("x"), 300)}
	var v []byte
	for _, f := range in {
		v = appendField(v, f)
	}
	out, err := decodeRecord(nil, v)
	if err != nil || len(out) != len(in) {
		t.Fatalf("decoded %d fields, err %v", len(out), err)
	}
	for i := range in {
		if !bytes.Equal(in[i], out[i]) {
			t.Errorf("field %d = %q, want %q", i, out[i], in[i])
		}
	}
	if _, err := decodeRecord(nil, []byte{5, 'a'}); err == nil {
		t.Error("truncated record decoded")
	}
	// A default record is 10 fields of 1-byte length + 100 bytes.
	w := (&benchmark{cfg: DefaultConfig()}).newWorker(0, 0)
	if n := len(w.appendRecord(nil)); n != 1010 {
		t.Errorf("default record is %d bytes, want 1010", n)
	}
}

func TestWorkloadFWithOtherDistributions(t *testing.T) {
	for _, dist := range []string{Uniform, Latest, Hotspot} {
		cfg := testConfig("f")
		cfg.Distribution = dist
		cfg.ZipfianConstant = 0.9
		store := newMemStore()
		res, err := Run(context.Background(), cfg, store, nil)
		if err != nil {
			t.Fatal(err)
		}
		if res.Run.Operations != cfg.OperationCount || res.Run.Errors != 0 {
			t.Errorf("%s: %+v", dist, res.Run)
		}
	}
	// Non-default theta with the scrambled zipfian chooser.
	cfg := testConfig("d")
	cfg.Distribution = Zipfian
	cfg.ZipfianConstant = 0.5
	res, err := Run(context.Background(), cfg, newMemStore(), nil)
	if err != nil || res.Run.Operations != cfg.OperationCount || opByName(t, res.Run, "READ").NotFound != 0 {
		t.Fatalf("zipfian 0.5 on d: %v %+v", err, res)
	}
}

func TestRunTinyKeySpace(t *testing.T) {
	// One record and more threads than operations: degenerate but valid.
	for _, name := range []string{"a", "b", "c", "d", "e", "f"} {
		for _, dist := range []string{Zipfian, Uniform, Latest, Hotspot} {
			cfg := testConfig(name)
			cfg.RecordCount, cfg.OperationCount, cfg.Distribution = 1, 5, dist
			res, err := Run(context.Background(), cfg, newMemStore(), nil)
			if err != nil {
				t.Fatalf("%s/%s: %v", name, dist, err)
			}
			if res.Load.Operations != 1 || res.Run.Operations != 5 || res.Run.Errors != 0 {
				t.Errorf("%s/%s: load %d, run %d ops, %d errors",
					name, dist, res.Load.Operations, res.Run.Operations, res.Run.Errors)
			}
		}
	}
}

// nopStore measures the benchmark's own per-operation cost.
type nopStore struct{}

func (nopStore) Get(context.Context, []byte) ([]byte, bool, error) { return nil, true, nil }
func (nopStore) Put(context.Context, []byte, []byte) error         { return nil }
func (nopStore) Scan(context.Context, []byte, int) (int, error)    { return 0, nil }

func BenchmarkRunOverhead(b *testing.B) {
	for _, name := range []string{"a", "d", "e", "f"} {
		b.Run(name, func(b *testing.B) {
			cfg := DefaultConfig()
			cfg.Workload, cfg.SkipLoad, cfg.Threads, cfg.Seed = name, true, 1, 1
			cfg.OperationCount = int64(b.N)
			b.ResetTimer()
			if _, err := Run(context.Background(), cfg, nopStore{}, nil); err != nil {
				b.Fatal(err)
			}
		})
	}
}

func BenchmarkHistogramRecord(b *testing.B) {
	var h histogram
	for i := range b.N {
		h.record(uint64(i&0xfffff) * 997)
	}
}

// ReadMode is only recorded: left out of the JSON when empty (so reports of
// linearizable runs are unchanged), shown in the table header otherwise.
func TestReadModeRecorded(t *testing.T) {
	for _, mode := range []string{"", "bounded:500ms"} {
		cfg := testConfig("c")
		cfg.ReadMode = mode
		res, err := Run(context.Background(), cfg, newMemStore(), nil)
		if err != nil {
			t.Fatal(err)
		}
		var js, table bytes.Buffer
		if err := res.WriteJSON(&js); err != nil {
			t.Fatal(err)
		}
		if err := res.WriteTable(&table); err != nil {
			t.Fatal(err)
		}
		inJSON := strings.Contains(js.String(), `"read_mode"`)
		inTable := strings.Contains(table.String(), ", "+mode+" reads")
		if mode == "" && (inJSON || strings.Contains(table.String(), " reads")) {
			t.Errorf("empty read mode shows up:\n%s\n%s", js.String(), table.String())
		}
		if mode != "" && (!inJSON || !inTable) {
			t.Errorf("read mode %q missing: json %v table %v\n%s", mode, inJSON, inTable, table.String())
		}
	}
}
