package monitor

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultSampleInterval matches the period at which utilisation is worth
// re-reading: shorter intervals mostly add noise (/proc/stat counts in 10 ms
// ticks) and cost, longer ones react late to a hot node.
const DefaultSampleInterval = time.Second

// MinSampleInterval guards against deltas made of a handful of clock ticks.
const MinSampleInterval = 10 * time.Millisecond

// Config configures a Monitor.
type Config struct {
	// SampleInterval is how often Run samples. At least MinSampleInterval.
	SampleInterval time.Duration
	// Weights turn each sample into Snapshot.Score.
	Weights Weights
}

// DefaultConfig returns a 1 s interval and DefaultWeights.
func DefaultConfig() Config {
	return Config{SampleInterval: DefaultSampleInterval, Weights: DefaultWeights()}
}

// Validate reports configuration errors.
func (c Config) Validate() error {
	var errs []error
	if c.SampleInterval < MinSampleInterval {
		errs = append(errs, fmt.Errorf("monitor: SampleInterval %v, want >= %v", c.SampleInterval, MinSampleInterval))
	}
	if err := c.Weights.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// CPUQuota is the node's CPU size and its throttling since its cgroup was
// created, as the cgroup reports them.
type CPUQuota struct {
	// CPUs is the quota in CPUs; 0 when the node is not sized.
	CPUs float64
	// Periods counts the quota's enforcement periods in which the node
	// ran, Throttled those in which it used the quota up, ThrottledTime
	// the time it then waited.
	Periods, Throttled uint64
	ThrottledTime      time.Duration
	// Usage is the CPU time every process in the cgroup and its children
	// used (the node's own and a co-runner's); meaningful when
	// UsageKnown.
	Usage      time.Duration
	UsageKnown bool
}

// QuotaReader reads the node's CPUQuota. The monitor owns this interface
// so tests can fake it; the server reads the node's cgroup.
type QuotaReader interface {
	ReadCPUQuota() (CPUQuota, error)
}

// LoadFunc is supplied by the node: the current request queue depth, its
// limit (0 if unbounded) and the recent mean service time (typically
// ServiceTimer.Mean).
type LoadFunc func() (depth, limit int, serviceTime time.Duration)

// Snapshot is one published sample. It is never modified after
// publication, so readers may keep and share it freely.
type Snapshot struct {
	Usage Usage
	// Score is Score(Usage, 0, Weights): the node-local part. A chooser
	// adds its own round-trip term (Weights.RTT·rtt/1ms) or recomputes
	// Score with the real rtt.
	Score float64
}

// Monitor samples the node's load and publishes the latest Snapshot.
type Monitor struct {
	cfg   Config
	src   Source
	quota QuotaReader
	load  LoadFunc
	now   func() time.Time

	latest atomic.Pointer[Snapshot]

	mu          sync.Mutex // serialises Sample; guards the fields below
	prevCPU     cpuTimes
	haveCPU     bool
	prevProc    uint64 // the process's CPU ticks at prevCPU
	haveProc    bool
	prevDisk    map[string]uint64
	prevDiskAt  time.Time
	prevQuota   CPUQuota
	prevQuotaAt time.Time
	haveQuota   bool
}

// New returns a Monitor that has not sampled yet (Latest returns nil until
// the first Sample). A nil src reports 0 for CPU, memory and disk; a nil
// quota reports an unsized node; a nil load reports an empty queue; a nil
// now uses time.Now.
func New(cfg Config, src Source, quota QuotaReader, load LoadFunc, now func() time.Time) (*Monitor, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if now == nil {
		now = time.Now
	}
	return &Monitor{cfg: cfg, src: src, quota: quota, load: load, now: now}, nil
}

// Latest returns the most recent snapshot, or nil before the first Sample.
// It is a single atomic load: safe and cheap on every request.
func (m *Monitor) Latest() *Snapshot { return m.latest.Load() }

// Sample takes one sample, publishes it and returns it. CPU and disk are
// deltas against the previous successful read, so the first sample reports
// 0 for both. A resource whose file cannot be read or parsed reports 0 (an
// unknown load must not make a node look saturated); the errors are joined
// into the returned error, and the snapshot is published regardless.
func (m *Monitor) Sample() (*Snapshot, error) {
	m.mu.Lock()
	defer m.mu.Unlock()

	at := m.now()
	u := Usage{SampledAt: at}
	var errs []error
	read := func(name string) []byte {
		if m.src == nil {
			return nil
		}
		b, err := m.src.Read(name)
		if err != nil {
			errs = append(errs, err)
			return nil
		}
		return b
	}

	m.sampleQuota(at, &u, &errs)
	if b := read(FileStat); b != nil {
		if t, err := parseStat(b); err != nil {
			errs = append(errs, err)
		} else {
			m.sampleProcess(read, t, &u, &errs)
			u.MachineCPUs = t.cpus
			if m.haveCPU {
				u.CPU = cpuUtil(m.prevCPU, t)
			}
			m.prevCPU, m.haveCPU = t, true
		}
	}
	if b := read(FileMeminfo); b != nil {
		if v, err := parseMeminfo(b); err != nil {
			errs = append(errs, err)
		} else {
			u.Memory = v
		}
	}
	if b := read(FileDiskstats); b != nil {
		if ticks, err := parseDiskstats(b); err != nil {
			errs = append(errs, err)
		} else {
			if m.prevDisk != nil {
				u.DiskIO = diskUtil(m.prevDisk, ticks, millis(at.Sub(m.prevDiskAt)))
			}
			m.prevDisk, m.prevDiskAt = ticks, at
		}
	}
	if m.load != nil {
		u.QueueDepth, u.QueueLimit, u.ServiceTime = m.load()
	}

	s := &Snapshot{Usage: u, Score: Score(u, 0, m.cfg.Weights)}
	m.latest.Store(s)
	return s, errors.Join(errs...)
}

// sampleProcess sets u's process share: the process's CPU ticks over the
// machine's, both since the previous sample (caller holds mu, before
// prevCPU moves to t).
func (m *Monitor) sampleProcess(read func(string) []byte, t cpuTimes, u *Usage, errs *[]error) {
	b := read(FileSelfStat)
	if b == nil {
		m.haveProc = false
		return
	}
	ticks, err := parseSelfStat(b)
	if err != nil {
		*errs = append(*errs, err)
		m.haveProc = false
		return
	}
	if m.haveProc && m.haveCPU && t.total > m.prevCPU.total && ticks >= m.prevProc {
		u.ProcessCPU = min(1, float64(ticks-m.prevProc)/float64(t.total-m.prevCPU.total))
		u.ProcessKnown = true
	}
	m.prevProc, m.haveProc = ticks, true
}

// sampleQuota reads the node's quota into u, with the share of periods
// throttled and the CPUs its cgroup used since the previous reading at
// (caller holds mu). A counter that went backwards (the node was moved
// into its cgroup between the readings) gives no figure.
func (m *Monitor) sampleQuota(at time.Time, u *Usage, errs *[]error) {
	if m.quota == nil {
		return
	}
	q, err := m.quota.ReadCPUQuota()
	if err != nil {
		*errs = append(*errs, err)
		m.haveQuota = false
		return
	}
	u.Quota = q
	if m.haveQuota && q.Periods > m.prevQuota.Periods && q.Throttled >= m.prevQuota.Throttled {
		u.ThrottledShare = min(1, float64(q.Throttled-m.prevQuota.Throttled)/float64(q.Periods-m.prevQuota.Periods))
	}
	if m.haveQuota && q.UsageKnown && m.prevQuota.UsageKnown && q.Usage >= m.prevQuota.Usage && at.After(m.prevQuotaAt) {
		u.GroupCPUs = float64(q.Usage-m.prevQuota.Usage) / float64(at.Sub(m.prevQuotaAt))
		u.GroupKnown = true
	}
	m.prevQuota, m.prevQuotaAt, m.haveQuota = q, at, true
}

// Run samples immediately and then every SampleInterval until ctx is done,
// returning ctx's error. Read errors are not fatal (see Sample).
func (m *Monitor) Run(ctx context.Context) error {
	t := time.NewTicker(m.cfg.SampleInterval)
	defer t.Stop()
	for {
		_, _ = m.Sample()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}
