package monitor

import (
	"context"
	"errors"
	"math"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// seqSource returns canned contents per file name, one per Read, in order.
// Exhausted or absent names fail like a missing /proc file.
type seqSource struct {
	mu    sync.Mutex
	files map[string][]string
}

func (s *seqSource) Read(name string) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.files[name]
	if len(q) == 0 {
		return nil, errors.New("no such file: " + name)
	}
	s.files[name] = q[1:]
	if q[0] == "ERR" {
		return nil, errors.New("read error: " + name)
	}
	return []byte(q[0]), nil
}

// fakeClock advances by step on every reading.
type fakeClock struct {
	t    time.Time
	step time.Duration
}

func (c *fakeClock) now() time.Time { t := c.t; c.t = c.t.Add(c.step); return t }

func statLine(user, system, idle, iowait uint64) string {
	return "cpu  " + u64(user) + " 0 " + u64(system) + " " + u64(idle) + " " + u64(iowait) + " 0 0 0 0 0\ncpu0 1 1 1 1 1 0 0 0 0 0\n"
}

func diskLine(name string, ioTicks uint64) string {
	return "   8       0 " + name + " 1 0 8 1 1 0 8 1 0 " + u64(ioTicks) + " 2 0 0 0 0\n"
}

// A sized node that shares its cgroup with a co-runner is as busy as its
// CPU is of what the co-runner leaves it, read from the cgroup's usage; a
// usage counter that went backwards (the node moved into its cgroup)
// gives no figure, and the throttled share stands in as before.
func TestMonitorSizedNodeWithCoRunner(t *testing.T) {
	twoCPUs := func(busy uint64) string { // 400 ticks an interval: 2 s of two CPUs
		return "cpu  " + u64(busy) + " 0 0 " + u64(busy) + " 0 0 0 0 0 0\ncpu0 1 1 1 1 1 0 0 0 0 0\ncpu1 1 1 1 1 1 0 0 0 0 0\n"
	}
	src := &seqSource{files: map[string][]string{
		FileStat: {twoCPUs(1000), twoCPUs(1200), twoCPUs(1400), twoCPUs(1600)},
		// 30 ticks (0.15 CPU), then 15 (0.075 CPU), then 30.
		FileSelfStat: {selfStat(100), selfStat(130), selfStat(145), selfStat(175)},
	}}
	for range 4 {
		src.files[FileMeminfo] = append(src.files[FileMeminfo], "MemTotal: 1000 kB\nMemAvailable: 750 kB\n")
		src.files[FileDiskstats] = append(src.files[FileDiskstats], diskLine("sda", 0))
	}
	quota := &fakeQuota{readings: []CPUQuota{
		{CPUs: 0.3, Periods: 1000, Throttled: 0, Usage: 10 * time.Second, UsageKnown: true},
		// 0.6 s in 2 s: 0.3 CPU, of which the node's 0.15.
		{CPUs: 0.3, Periods: 1200, Throttled: 200, Usage: 10600 * time.Millisecond, UsageKnown: true},
		// 0.45 s: 0.225 CPU, the node's 0.075.
		{CPUs: 0.3, Periods: 1400, Throttled: 220, Usage: 11050 * time.Millisecond, UsageKnown: true},
		{CPUs: 0.3, Periods: 1600, Throttled: 400, Usage: time.Second, UsageKnown: true},
	}}
	m, err := New(DefaultConfig(), src, quota, nil, (&fakeClock{t: time.Unix(0, 0), step: 2 * time.Second}).now)
	if err != nil {
		t.Fatal(err)
	}
	if s, err := m.Sample(); err != nil || s.Usage.GroupKnown {
		t.Fatalf("first sample: %+v, %v; want no group figure yet", s.Usage, err)
	}
	for _, want := range []struct{ group, node float64 }{{0.3, 1}, {0.225, 0.5}} {
		s, err := m.Sample()
		if err != nil {
			t.Fatal(err)
		}
		if u := s.Usage; !u.GroupKnown || !near(u.GroupCPUs, want.group) || !near(u.NodeCPU(), want.node) {
			t.Fatalf("group %v CPUs (known %v), node cpu %v; want %v and %v", u.GroupCPUs, u.GroupKnown, u.NodeCPU(), want.group, want.node)
		}
	}
	s, err := m.Sample()
	if err != nil || s.Usage.GroupKnown || !near(s.Usage.NodeCPU(), 0.9) {
		t.Fatalf("usage went backwards: %+v, %v; want no group figure and the throttled share 0.9", s.Usage, err)
	}
}

// SizedCPU: with nothing else in the cgroup a node is as busy as its CPU is
// of its quota; a co-runner's use shrinks what is left.
func TestSizedCPU(t *testing.T) {
	for _, tc := range []struct {
		name              string
		own, group, quota float64
		want              float64
	}{
		{"no co-runner", 0.15, 0.15, 0.3, 0.5},
		{"idle", 0, 0, 0.3, 0},
		{"co-runner takes half, node uses the rest", 0.15, 0.3, 0.3, 1},
		{"co-runner takes half, node uses half the rest", 0.075, 0.225, 0.3, 0.5},
		{"group read below own: nothing else", 0.15, 0.14, 0.3, 0.5},
		{"others read as the whole quota: the floor", 0.01, 0.31, 0.3, 0.01 / (MinLeftShare * 0.3)},
		{"over the floor", 0.05, 0.4, 0.3, 1},
	} {
		if got := SizedCPU(tc.own, tc.group, tc.quota); !near(got, tc.want) {
			t.Errorf("%s: SizedCPU(%v, %v, %v) = %v, want %v", tc.name, tc.own, tc.group, tc.quota, got, tc.want)
		}
	}
	// NodeCPU takes it where the cgroup's usage is known, whatever the
	// throttling, and the throttled share where it is not.
	u := Usage{ProcessCPU: 0.0375, ProcessKnown: true, MachineCPUs: 2, Quota: CPUQuota{CPUs: 0.3}, ThrottledShare: 0.95}
	if got := u.NodeCPU(); !near(got, 0.95) {
		t.Errorf("usage unknown: %v, want the throttled share 0.95", got)
	}
	u.GroupCPUs, u.GroupKnown = 0.225, true
	if got := u.NodeCPU(); !near(got, 0.5) {
		t.Errorf("usage known: %v, want 0.075 of the 0.15 CPU left, 0.5", got)
	}
}

// selfStat is a /proc/self/stat line whose utime+stime is ticks; the
// command name holds a space and a parenthesis, as names may.
func selfStat(ticks uint64) string {
	return "4242 (tidekv (x) y) S 1 4242 4242 0 -1 4194560 100 0 0 0 " + u64(ticks-ticks/4) + " " + u64(ticks/4) + " 0 0 20 0 12 0 100 0 0\n"
}

// Two nodes on one machine: the one doing the work scores worse, while a
// node alone keeps the machine's figure.
func TestNodeCPUSeparatesColocatedNodes(t *testing.T) {
	busy := Usage{CPU: 0.9, ProcessCPU: 0.6, ProcessKnown: true}
	quiet := Usage{CPU: 0.9, ProcessCPU: 0.2, ProcessKnown: true}
	alone := Usage{CPU: 0.9, ProcessCPU: 0.9, ProcessKnown: true}
	if !near(busy.NodeCPU(), 0.75) || !near(quiet.NodeCPU(), 0.55) || !near(alone.NodeCPU(), 0.9) {
		t.Fatalf("node cpu: busy %v quiet %v alone %v", busy.NodeCPU(), quiet.NodeCPU(), alone.NodeCPU())
	}
	if w := DefaultWeights(); !(Score(busy, 0, w) > Score(quiet, 0, w)) {
		t.Fatal("the loaded node does not score worse")
	}
	if u := (Usage{CPU: 0.7}); u.NodeCPU() != 0.7 {
		t.Fatal("without a process reading the machine's figure stands")
	}
	if _, err := parseSelfStat([]byte("12 (short) S 1 2")); err == nil {
		t.Fatal("a truncated stat line parsed")
	}
}

func u64(v uint64) string { return strconv.FormatUint(v, 10) }

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestMonitorSampleDeltas(t *testing.T) {
	src := &seqSource{files: map[string][]string{
		FileStat: {
			statLine(1000, 500, 8000, 500),
			// user +200, system +100, idle +80, iowait +20: busy 300 of 400 ticks
			statLine(1200, 600, 8080, 520),
		},
		// The process used 100 of the machine's 400 ticks.
		FileSelfStat: {selfStat(700), selfStat(800)},
		FileMeminfo: {
			"MemTotal: 1000 kB\nMemAvailable: 750 kB\n",
			"MemTotal: 1000 kB\nMemAvailable: 400 kB\n",
		},
		FileDiskstats: {
			diskLine("sda", 10000) + diskLine("nvme0n1", 3000) + diskLine("loop0", 0),
			// over 2 s: sda +500 ms (25%), nvme +1400 ms (70%), loop ignored
			diskLine("sda", 10500) + diskLine("nvme0n1", 4400) + diskLine("loop0", 2000),
		},
	}}
	clk := &fakeClock{t: time.Unix(1700000000, 0), step: 2 * time.Second}
	calls := 0
	load := func() (int, int, time.Duration) {
		calls++
		return 5 * calls, 100, time.Duration(calls) * time.Millisecond
	}
	m, err := New(DefaultConfig(), src, nil, load, clk.now)
	if err != nil {
		t.Fatal(err)
	}
	if m.Latest() != nil {
		t.Fatal("Latest before the first sample is not nil")
	}

	s1, err := m.Sample()
	if err != nil {
		t.Fatal(err)
	}
	if m.Latest() != s1 {
		t.Fatal("Latest is not the snapshot Sample returned")
	}
	want1 := Usage{CPU: 0, Memory: 0.25, DiskIO: 0, QueueDepth: 5, QueueLimit: 100,
		ServiceTime: time.Millisecond, SampledAt: time.Unix(1700000000, 0)}
	if !usageNear(s1.Usage, want1) {
		t.Fatalf("first sample %+v, want %+v (no previous sample: CPU and disk 0)", s1.Usage, want1)
	}
	if !near(s1.Score, Score(want1, 0, DefaultWeights())) {
		t.Fatalf("first score %v", s1.Score)
	}
	s1copy := *s1

	s2, err := m.Sample()
	if err != nil {
		t.Fatal(err)
	}
	want2 := Usage{CPU: 0.75, ProcessCPU: 0.25, ProcessKnown: true, Memory: 0.6, DiskIO: 0.7, QueueDepth: 10, QueueLimit: 100,
		ServiceTime: 2 * time.Millisecond, SampledAt: time.Unix(1700000002, 0)}
	if !usageNear(s2.Usage, want2) {
		t.Fatalf("second sample %+v, want %+v", s2.Usage, want2)
	}
	if !near(s2.Score, Score(want2, 0, DefaultWeights())) || !(s2.Score > s1.Score) {
		t.Fatalf("second score %v (first %v)", s2.Score, s1.Score)
	}
	if m.Latest() != s2 || *s1 != s1copy {
		t.Fatal("publishing a new snapshot changed or kept the old one")
	}
}

func usageNear(a, b Usage) bool {
	return near(a.CPU, b.CPU) && near(a.ProcessCPU, b.ProcessCPU) && a.ProcessKnown == b.ProcessKnown && near(a.Memory, b.Memory) && near(a.DiskIO, b.DiskIO) &&
		a.QueueDepth == b.QueueDepth && a.QueueLimit == b.QueueLimit &&
		a.ServiceTime == b.ServiceTime && a.SampledAt.Equal(b.SampledAt)
}

// A failed read zeroes that resource and keeps the previous good counters,
// so the next delta spans both intervals.
func TestMonitorReadErrors(t *testing.T) {
	src := &seqSource{files: map[string][]string{
		FileStat:      {statLine(100, 0, 100, 0), "ERR", statLine(300, 0, 200, 0)},
		FileMeminfo:   {"garbage\n", "MemTotal: 100 kB\nMemAvailable: 10 kB\n", "ERR"},
		FileDiskstats: {diskLine("sda", 0), "ERR", diskLine("sda", 1500)},
	}}
	clk := &fakeClock{t: time.Unix(0, 0), step: time.Second}
	m, err := New(DefaultConfig(), src, nil, nil, clk.now)
	if err != nil {
		t.Fatal(err)
	}
	s, err := m.Sample()
	if err == nil || !strings.Contains(err.Error(), "MemTotal") || s.Usage.Memory != 0 {
		t.Fatalf("bad meminfo: %+v, %v", s, err)
	}
	s, err = m.Sample()
	if err == nil || s.Usage.CPU != 0 || s.Usage.DiskIO != 0 || !near(s.Usage.Memory, 0.9) {
		t.Fatalf("stat/diskstats errors: %+v, %v", s.Usage, err)
	}
	if m.Latest() != s {
		t.Fatal("snapshot with errors was not published")
	}
	s, _ = m.Sample()
	// CPU: busy 200 of 300 ticks since the first sample; disk: 1500 ms over 2 s.
	if !near(s.Usage.CPU, 2.0/3) || !near(s.Usage.DiskIO, 0.75) || s.Usage.Memory != 0 {
		t.Fatalf("after recovery: %+v", s.Usage)
	}
}

func TestMonitorNoSource(t *testing.T) {
	m, err := New(DefaultConfig(), nil, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := m.Sample()
	if err != nil || s.Usage.CPU != 0 || s.Usage.Memory != 0 || s.Usage.DiskIO != 0 || !near(s.Score, 4) {
		t.Fatalf("nil source: %+v, %v", s, err)
	}
	if s.Usage.SampledAt.IsZero() {
		t.Fatal("nil clock did not default to time.Now")
	}
}

// The real /proc, where there is one: values must be in range.
func TestMonitorProcSource(t *testing.T) {
	m, err := New(DefaultConfig(), ProcSource, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Sample(); err != nil {
		t.Skipf("no usable /proc here: %v", err)
	}
	time.Sleep(20 * time.Millisecond)
	s, err := m.Sample()
	if err != nil {
		t.Fatal(err)
	}
	for name, v := range map[string]float64{"CPU": s.Usage.CPU, "Memory": s.Usage.Memory, "DiskIO": s.Usage.DiskIO} {
		if !(v >= 0 && v <= 1) {
			t.Errorf("%s = %v, want in [0,1]", name, v)
		}
	}
	if s.Usage.Memory == 0 {
		t.Error("memory utilisation of a running machine is 0")
	}
}

func TestMonitorRun(t *testing.T) {
	cfg := DefaultConfig()
	cfg.SampleInterval = MinSampleInterval
	var mu sync.Mutex
	n := 0
	load := func() (int, int, time.Duration) {
		mu.Lock()
		defer mu.Unlock()
		n++
		return n, 0, 0
	}
	m, err := New(cfg, nil, nil, load, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()

	deadline := time.Now().Add(10 * time.Second)
	for {
		if s := m.Latest(); s != nil && s.Usage.QueueDepth >= 3 {
			break // sampled immediately and then at least twice on the ticker
		}
		if time.Now().After(deadline) {
			t.Fatal("Run did not publish three samples")
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Run returned %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not stop after cancel")
	}
}

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("default config: %v", err)
	}
	tests := []struct {
		name    string
		cfg     Config
		wantErr string
	}{
		{"zero interval", Config{Weights: DefaultWeights()}, "SampleInterval 0s"},
		{"too short", Config{SampleInterval: time.Millisecond, Weights: DefaultWeights()}, "want >= 10ms"},
		{"bad weights", Config{SampleInterval: time.Second, Weights: Weights{CPU: -1}}, "CPU is -1"},
		{"zero value", Config{}, "all weights are zero"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Validate() = %v, want error containing %q", err, tc.wantErr)
			}
			if m, err := New(tc.cfg, nil, nil, nil, nil); err == nil || m != nil {
				t.Fatalf("New accepted an invalid config")
			}
		})
	}
}

func BenchmarkLatest(b *testing.B) {
	m, err := New(DefaultConfig(), nil, nil, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := m.Sample(); err != nil {
		b.Fatal(err)
	}
	var sink float64
	for b.Loop() {
		sink += m.Latest().Score
	}
	_ = sink
}

// Readers on every core while a writer republishes: reads must not slow
// down or block.
func BenchmarkLatestParallel(b *testing.B) {
	m, err := New(DefaultConfig(), nil, nil, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	_, _ = m.Sample()
	stop := make(chan struct{})
	go func() {
		for {
			select {
			case <-stop:
				return
			default:
				_, _ = m.Sample()
				time.Sleep(time.Millisecond)
			}
		}
	}()
	b.RunParallel(func(pb *testing.PB) {
		var sink float64
		for pb.Next() {
			sink += m.Latest().Score
		}
		_ = sink
	})
	close(stop)
}

func BenchmarkSample(b *testing.B) {
	src := &fixedSource{stat: statLine(1, 2, 3, 4), mem: meminfo, disk: diskstats1}
	m, err := New(DefaultConfig(), src, nil, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := m.Sample(); err != nil {
			b.Fatal(err)
		}
	}
}

// fixedSource serves fixed contents without touching the file system.
type fixedSource struct{ stat, mem, disk string }

func (s *fixedSource) Read(name string) ([]byte, error) {
	switch name {
	case FileStat:
		return []byte(s.stat), nil
	case FileMeminfo:
		return []byte(s.mem), nil
	default:
		return []byte(s.disk), nil
	}
}

// fakeQuota returns canned readings in order; an exhausted one fails.
type fakeQuota struct{ readings []CPUQuota }

func (f *fakeQuota) ReadCPUQuota() (CPUQuota, error) {
	if len(f.readings) == 0 {
		return CPUQuota{}, errors.New("cgroup gone")
	}
	q := f.readings[0]
	f.readings = f.readings[1:]
	return q, nil
}

// A sized node's CPU figure is the utilisation of its quota, not of the
// machine: on two CPUs, a node with 0.5 CPUs using 0.3 is 60% busy although
// it uses 15% of the machine; when a co-runner in its cgroup eats the
// quota, the throttled share of periods says so.
func TestMonitorSizedNode(t *testing.T) {
	twoCPUs := func(busy, idle uint64) string {
		return "cpu  " + u64(busy) + " 0 0 " + u64(idle) + " 0 0 0 0 0 0\ncpu0 1 1 1 1 1 0 0 0 0 0\ncpu1 1 1 1 1 1 0 0 0 0 0\n"
	}
	src := &seqSource{files: map[string][]string{
		// Every interval: 400 ticks, 2 s of two CPUs, half of them busy.
		FileStat: {twoCPUs(1000, 1000), twoCPUs(1200, 1200), twoCPUs(1400, 1400), twoCPUs(1600, 1600)},
		// The node used 60 ticks (0.3 CPUs), then 20 (0.1 CPUs), then 60.
		FileSelfStat: {selfStat(100), selfStat(160), selfStat(180), selfStat(240)},
	}}
	for range 4 {
		src.files[FileMeminfo] = append(src.files[FileMeminfo], "MemTotal: 1000 kB\nMemAvailable: 750 kB\n")
		src.files[FileDiskstats] = append(src.files[FileDiskstats], diskLine("sda", 0))
	}
	quota := &fakeQuota{readings: []CPUQuota{
		{CPUs: 0.5, Periods: 1000, Throttled: 10},
		{CPUs: 0.5, Periods: 1200, Throttled: 30, ThrottledTime: time.Second},      // 10% of periods throttled
		{CPUs: 0.5, Periods: 1400, Throttled: 210, ThrottledTime: 2 * time.Second}, // 90%: a co-runner
	}}
	m, err := New(DefaultConfig(), src, quota, nil, (&fakeClock{t: time.Unix(0, 0), step: 2 * time.Second}).now)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Sample(); err != nil {
		t.Fatal(err)
	}
	s, err := m.Sample()
	if err != nil {
		t.Fatal(err)
	}
	u := s.Usage
	if u.MachineCPUs != 2 || u.Quota.CPUs != 0.5 || u.Quota.ThrottledTime != time.Second || !near(u.ThrottledShare, 0.1) {
		t.Fatalf("usage %+v, want 2 CPUs, a 0.5 CPU quota, 1 s throttled, 10%% of periods", u)
	}
	if !near(u.ProcessCPU, 0.15) || !near(u.NodeCPU(), 0.6) {
		t.Fatalf("process %v of the machine, node cpu %v; want 0.15 and 0.6 of the quota", u.ProcessCPU, u.NodeCPU())
	}
	unsized := u
	unsized.Quota = CPUQuota{}
	if !near(unsized.NodeCPU(), 0.15+OtherLoadWeight*0.35) {
		t.Fatalf("the same node unsized: %v, want the machine-sharing figure", unsized.NodeCPU())
	}
	if s, _ = m.Sample(); !near(s.Usage.ThrottledShare, 0.9) || !near(s.Usage.NodeCPU(), 0.9) {
		t.Fatalf("co-runner: throttled share %v, node cpu %v; want 0.9 for both", s.Usage.ThrottledShare, s.Usage.NodeCPU())
	}
	// The cgroup cannot be read: the node is scored as unsized, and says why.
	s, err = m.Sample()
	if err == nil || s.Usage.Quota.CPUs != 0 || !near(s.Usage.NodeCPU(), 0.15+OtherLoadWeight*0.35) {
		t.Fatalf("failed quota read: %+v, %v", s.Usage, err)
	}
}
