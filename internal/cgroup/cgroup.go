package cgroup

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Period is the quota's enforcement period. It is short so that a node
// that has used its quota waits at most this long to run again; the
// kernel's default, 100 ms, would stall its requests for up to 100 ms.
const Period = 10 * time.Millisecond

// MinCPUs is the smallest size a node can have: the kernel refuses a quota
// below 1 ms per period.
const MinCPUs = 0.1

// NodePrefix starts the name of every cgroup Create makes.
const NodePrefix = "tidekv-node-"

// CheckCPUs reports whether cpus is a size Create accepts.
func CheckCPUs(cpus float64) error {
	if !(cpus >= MinCPUs) || math.IsInf(cpus, 0) {
		return fmt.Errorf("a node's CPU size must be at least %v (the kernel's 1 ms quota per %v period), got %v", MinCPUs, Period, cpus)
	}
	return nil
}

type version int

const (
	v1 version = 1
	v2 version = 2
)

// Reader reads one cgroup's CPU quota, throttling and usage.
type Reader struct {
	version version
	dir     string
	// acct is where the cgroup's v1 cpuacct.usage is: dir itself where
	// cpuacct is mounted with cpu, the cgroup at the same path in a
	// separate cpuacct hierarchy, "" where there is none (no usage is
	// read). v2 reads usage from dir's cpu.stat and ignores it.
	acct string
}

// Dir is the cgroup's directory.
func (r Reader) Dir() string { return r.dir }

// Version is 1 or 2, the cgroup version of its hierarchy.
func (r Reader) Version() int { return int(r.version) }

// Stat is a cgroup's CPU quota and its throttling since it was created.
type Stat struct {
	// CPUs is the quota in CPUs (quota/period); 0 when there is none.
	CPUs float64
	// Periods counts the enforcement periods in which the cgroup ran,
	// Throttled those in which it used up its quota, ThrottledTime the
	// time its tasks then waited.
	Periods, Throttled uint64
	ThrottledTime      time.Duration
	// Usage is the CPU time every task of the cgroup and of its children
	// used since it was created (v2 cpu.stat usage_usec, v1
	// cpuacct.usage); meaningful when UsageKnown, which it is not where
	// the cgroup has no accounting at its path (UsageDir).
	Usage      time.Duration
	UsageKnown bool
}

// UsageDir is the directory whose counter Read takes the cgroup's usage
// from ("" when none).
func (r Reader) UsageDir() string {
	if r.version == v2 {
		return r.dir
	}
	return r.acct
}

// Read returns the cgroup's quota, throttling and usage. A cgroup without
// a quota (v2's root has no cpu.max) reads as CPUs 0; one without an
// accounting cgroup, or whose counter is gone, as usage unknown.
func (r Reader) Read() (Stat, error) {
	var s Stat
	var err error
	if r.version == v2 {
		s.CPUs, err = readCPUMax(filepath.Join(r.dir, "cpu.max"))
	} else {
		s.CPUs, err = readCFS(r.dir)
	}
	if err != nil {
		return Stat{}, err
	}
	b, err := os.ReadFile(filepath.Join(r.dir, "cpu.stat"))
	if err != nil {
		return Stat{}, fmt.Errorf("cgroup: %w", err)
	}
	st := parseKeyValues(b)
	s.Periods, s.Throttled = st["nr_periods"], st["nr_throttled"]
	if r.version == v2 {
		s.ThrottledTime = time.Duration(st["throttled_usec"]) * time.Microsecond
		us, ok := st["usage_usec"]
		s.Usage, s.UsageKnown = time.Duration(us)*time.Microsecond, ok
		return s, nil
	}
	s.ThrottledTime = time.Duration(st["throttled_time"]) // ns
	if r.acct == "" {
		return s, nil
	}
	b, err = os.ReadFile(filepath.Join(r.acct, "cpuacct.usage"))
	if errors.Is(err, os.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return Stat{}, fmt.Errorf("cgroup: %w", err)
	}
	ns, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return Stat{}, fmt.Errorf("cgroup: %s/cpuacct.usage: %w", r.acct, err)
	}
	s.Usage, s.UsageKnown = time.Duration(ns), true
	return s, nil
}

// readCPUMax parses v2's "<quota|max> <period>" (µs).
func readCPUMax(path string) (float64, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("cgroup: %w", err)
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 0, fmt.Errorf("cgroup: %s: want \"<quota> <period>\", got %q", path, bytes.TrimSpace(b))
	}
	if f[0] == "max" {
		return 0, nil
	}
	return ratio(path, f[0], f[1])
}

// readCFS reads v1's cpu.cfs_quota_us (-1: none) and cpu.cfs_period_us.
func readCFS(dir string) (float64, error) {
	q, err := os.ReadFile(filepath.Join(dir, "cpu.cfs_quota_us"))
	if err != nil {
		return 0, fmt.Errorf("cgroup: %w", err)
	}
	p, err := os.ReadFile(filepath.Join(dir, "cpu.cfs_period_us"))
	if err != nil {
		return 0, fmt.Errorf("cgroup: %w", err)
	}
	if strings.TrimSpace(string(q)) == "-1" {
		return 0, nil
	}
	return ratio(dir, strings.TrimSpace(string(q)), strings.TrimSpace(string(p)))
}

func ratio(where, quota, period string) (float64, error) {
	q, err1 := strconv.ParseUint(quota, 10, 64)
	p, err2 := strconv.ParseUint(period, 10, 64)
	if err := errors.Join(err1, err2); err != nil || p == 0 {
		return 0, fmt.Errorf("cgroup: %s: bad quota %q or period %q", where, quota, period)
	}
	return float64(q) / float64(p), nil
}

// parseKeyValues reads cpu.stat's "<key> <number>" lines.
func parseKeyValues(b []byte) map[string]uint64 {
	out := map[string]uint64{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 2 {
			continue
		}
		if v, err := strconv.ParseUint(f[1], 10, 64); err == nil {
			out[f[0]] = v
		}
	}
	return out
}

// system is what finding the cpu controller looks at: the OS, the
// directory holding self/mountinfo and self/cgroup (/proc), and whether a
// directory may be written. The tests substitute a fake cgroup filesystem.
type system struct {
	goos     string
	proc     string
	writable func(dir string) error
}

func live() system {
	return system{goos: runtime.GOOS, proc: "/proc", writable: func(dir string) error {
		return syscall.Access(dir, 2 /* W_OK */)
	}}
}

// Self returns a Reader for this process's own cpu cgroup.
func Self() (Reader, error) { return find(live(), "self") }

// Of returns a Reader for process pid's cpu cgroup.
func Of(pid int) (Reader, error) { return find(live(), strconv.Itoa(pid)) }

// hierarchy is a mounted v1 cgroup hierarchy: where it is mounted, the
// path within it of its mount's root, and whether it has cpuacct.
type hierarchy struct {
	point, root string
	acct        bool
}

// dir is the directory of the cgroup at path in h.
func (h hierarchy) dir(path string) string {
	return filepath.Join(h.point, strings.TrimPrefix(path, h.root))
}

// path is the cgroup path of dir, a directory in h ("", false when it is
// not in h).
func (h hierarchy) path(dir string) (string, bool) {
	rel, err := filepath.Rel(h.point, dir)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return "", false
	}
	return filepath.Join(h.root, rel), true
}

// layout is what /proc/<pid>/cgroup and /proc/self/mountinfo say about a
// process's cpu and cpuacct controllers.
type layout struct {
	v2Dir             string    // its v2 cgroup, when that lists the cpu controller
	cpu, acct         hierarchy // v1 hierarchies with cpu and with cpuacct (point "" when none)
	cpuPath, acctPath string    // its cgroups' paths in them
}

// twin is the cgroup at cpuDir's path in the cpuacct hierarchy: cpuDir
// itself where cpuacct is mounted with cpu, "" where there is no cpuacct
// hierarchy or cpuDir is not in the cpu one.
func (l layout) twin(cpuDir string) string {
	if l.cpu.acct {
		return cpuDir
	}
	path, ok := l.cpu.path(cpuDir)
	if !ok || l.acct.point == "" {
		return ""
	}
	return l.acct.dir(path)
}

func readLayout(sys system, who string) (layout, error) {
	if sys.goos != "linux" {
		return layout{}, fmt.Errorf("cgroup: a node's CPU size needs Linux cgroups, and this is %s", sys.goos)
	}
	self, err := os.ReadFile(filepath.Join(sys.proc, who, "cgroup"))
	if err != nil {
		return layout{}, fmt.Errorf("cgroup: %w", err)
	}
	mounts, err := os.ReadFile(filepath.Join(sys.proc, "self", "mountinfo"))
	if err != nil {
		return layout{}, fmt.Errorf("cgroup: %w", err)
	}
	var l layout
	v2Path, haveCPU, haveAcct := "", false, false
	for line := range strings.Lines(string(self)) {
		f := strings.SplitN(strings.TrimSpace(line), ":", 3)
		if len(f) != 3 {
			continue
		}
		ctrls := strings.Split(f[1], ",")
		if f[0] == "0" && f[1] == "" {
			v2Path = f[2]
		}
		if slices.Contains(ctrls, "cpu") {
			l.cpuPath, haveCPU = f[2], true
		}
		if slices.Contains(ctrls, "cpuacct") {
			l.acctPath, haveAcct = f[2], true
		}
	}
	for line := range strings.Lines(string(mounts)) {
		pre, post, ok := strings.Cut(strings.TrimSpace(line), " - ")
		a, b := strings.Fields(pre), strings.Fields(post)
		if !ok || len(a) < 5 || len(b) < 3 {
			continue
		}
		h := hierarchy{point: a[4], root: a[3]}
		opts := strings.Split(b[2], ",")
		switch {
		case b[0] == "cgroup2" && v2Path != "" && l.v2Dir == "":
			dir := h.dir(v2Path)
			c, err := os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
			if err == nil && slices.Contains(strings.Fields(string(c)), "cpu") {
				l.v2Dir = dir
			}
		case b[0] != "cgroup":
		case haveCPU && slices.Contains(opts, "cpu"):
			h.acct = slices.Contains(opts, "cpuacct")
			l.cpu = h
		case haveAcct && slices.Contains(opts, "cpuacct"):
			l.acct = h
		}
	}
	return l, nil
}

// find locates process who's cgroup in the cpu controller's hierarchy,
// preferring v2 where its cgroup lists the cpu controller. On v1 its usage
// is read from its cgroup in the cpuacct hierarchy when that is the one at
// the same path (the twin the launcher makes), so that the usage is that
// of the cgroup whose quota it is.
func find(sys system, who string) (Reader, error) {
	r, _, err := locate(sys, who)
	return r, err
}

// locate is find with the layout it read.
func locate(sys system, who string) (Reader, layout, error) {
	l, err := readLayout(sys, who)
	if err != nil {
		return Reader{}, l, err
	}
	if l.v2Dir != "" {
		return Reader{version: v2, dir: l.v2Dir, acct: l.v2Dir}, l, nil
	}
	if l.cpu.point == "" {
		return Reader{}, l, errors.New("cgroup: no cpu controller: neither a cgroup v2 hierarchy whose cgroup.controllers lists cpu nor a cgroup v1 hierarchy with the cpu controller is mounted")
	}
	r := Reader{version: v1, dir: l.cpu.dir(l.cpuPath)}
	if l.cpu.acct || l.acctPath == l.cpuPath {
		r.acct = l.twin(r.dir)
	}
	return r, l, nil
}

// Controller creates node cgroups under one parent cgroup.
type Controller struct {
	version version
	parent  string
	// acct is where the new cgroups' usage is accounted: parent itself
	// (v2, or v1 with cpuacct mounted with cpu), parent's twin in a
	// separate cpuacct hierarchy, in which each new cgroup gets a twin
	// of its own, or "" (no twin can be made there: no usage is read).
	acct string
}

// Open finds where node cgroups go: under this process's cpu cgroup, or
// beside it when this process is itself a node Create sized (a node that
// launches nodes must not share its quota with them). It refuses, naming
// what is missing, where that cgroup cannot be written or (v2) cannot hand
// the cpu controller to children.
func Open() (*Controller, error) { return open(live()) }

func open(sys system) (*Controller, error) {
	self, l, err := locate(sys, "self")
	if err != nil {
		return nil, err
	}
	parent := self.dir
	if strings.HasPrefix(filepath.Base(parent), NodePrefix) {
		parent = filepath.Dir(parent)
	}
	if err := sys.writable(parent); err != nil {
		return nil, fmt.Errorf("cgroup: cannot create cgroups in %s (%v): run as root, or delegate that cgroup to this user", parent, err)
	}
	if self.version == v2 {
		if err := enableCPU(parent); err != nil {
			return nil, err
		}
	}
	return &Controller{version: self.version, parent: parent, acct: acctParent(sys, l, self, parent)}, nil
}

// acctParent is where the accounting of cgroups made in parent goes
// (Controller.acct): v1's twin of parent when that exists and may be
// written. A launcher whose cpuacct cgroup is not at its cpu cgroup's path
// finds none; its nodes then read no usage.
func acctParent(sys system, l layout, self Reader, parent string) string {
	if self.version == v2 {
		return parent
	}
	t := l.twin(parent)
	if t == "" || t == parent {
		return t
	}
	if fi, err := os.Stat(t); err != nil || !fi.IsDir() || sys.writable(t) != nil {
		return ""
	}
	return t
}

// enableCPU makes v2 give the cpu controller (cpu.max) to parent's
// children. The kernel refuses while parent itself holds processes, unless
// it is the root: the "no internal processes" rule.
func enableCPU(parent string) error {
	path := filepath.Join(parent, "cgroup.subtree_control")
	b, err := os.ReadFile(path)
	if err == nil && slices.Contains(strings.Fields(string(b)), "cpu") {
		return nil
	}
	if err == nil {
		err = os.WriteFile(path, []byte("+cpu"), 0o644)
	}
	if err != nil {
		return fmt.Errorf("cgroup: cannot give the cpu controller to child cgroups of %s (%v): start the launcher in a cgroup of its own whose parent delegates cpu", parent, err)
	}
	return nil
}

// Parent is the directory node cgroups are created in.
func (c *Controller) Parent() string { return c.parent }

// Group is a node's cgroup.
type Group struct{ Reader }

// Create makes the cgroup NodePrefix+name with a quota of cpus CPUs per
// Period. A leftover cgroup of that name from an earlier run is replaced
// if it is empty.
func (c *Controller) Create(name string, cpus float64) (Group, error) {
	return c.create(NodePrefix+name, cpus)
}

// Own returns a Controller for child cgroups of this process's own node
// cgroup: a v1 cpu cgroup Create made (its name starts with NodePrefix)
// that this process may write. A node puts its password derivation
// workers in such a child so that their CPU time is not the node's
// (docs/security.md). It refuses, naming why, anywhere else: an unsized
// node, whose cgroup is shared, is not to be split; v2 keeps processes out
// of a cgroup that has children with the cpu controller, so the node
// would have to leave its own.
func Own() (*Controller, error) { return own(live()) }

func own(sys system) (*Controller, error) {
	self, l, err := locate(sys, "self")
	if err != nil {
		return nil, err
	}
	if self.version != v1 {
		return nil, fmt.Errorf("cgroup: %s is a cgroup v2 cgroup: children of a node's own are made on v1 only", self.dir)
	}
	if !strings.HasPrefix(filepath.Base(self.dir), NodePrefix) {
		return nil, fmt.Errorf("cgroup: %s is not a node's own cgroup (%s*)", self.dir, NodePrefix)
	}
	if err := sys.writable(self.dir); err != nil {
		return nil, fmt.Errorf("cgroup: cannot create cgroups in %s: %v", self.dir, err)
	}
	return &Controller{version: v1, parent: self.dir, acct: acctParent(sys, l, self, self.dir)}, nil
}

// CreateChild makes the cgroup name (no prefix: it is no node's) with a
// quota of cpus CPUs per Period, as Create does.
func (c *Controller) CreateChild(name string, cpus float64) (Group, error) {
	return c.create(name, cpus)
}

// maxShares is the largest cpu.shares v1 takes: a cgroup with it runs
// before its siblings whenever it is runnable and has quota left.
const maxShares = 1 << 18

// CoRunner makes the cgroup name inside g, a sized node's v1 cgroup, for
// a co-located process that shares the node's quota (a CPU hog standing
// for a noisy neighbour, in interference benchmarks): a quota of share of
// g's, so it takes at most that, and the largest cpu.shares, so it takes
// that much whenever it can, ahead of the node's own threads. v2 is
// refused: a cgroup whose children have the cpu controller may hold no
// process, and the node is in g.
func (g Group) CoRunner(name string, share float64) (Group, error) {
	if g.version != v1 {
		return Group{}, fmt.Errorf("cgroup: a co-runner inside node cgroup %s needs cgroup v1: v2 keeps the node out of a cgroup whose children have the cpu controller", g.dir)
	}
	if !(share > 0 && share < 1) {
		return Group{}, fmt.Errorf("cgroup: a co-runner's share of a node's quota must be in (0, 1), got %v", share)
	}
	st, err := g.Read()
	if err != nil {
		return Group{}, err
	}
	if st.CPUs == 0 {
		return Group{}, fmt.Errorf("cgroup: %s has no quota to share with a co-runner", g.dir)
	}
	c := Controller{version: v1, parent: g.dir, acct: g.acct}
	h, err := c.create(name, share*st.CPUs)
	if err != nil {
		return Group{}, err
	}
	if err := write(h.dir, "cpu.shares", strconv.Itoa(maxShares)); err != nil {
		return Group{}, errors.Join(err, h.Remove())
	}
	return h, nil
}

func (c *Controller) create(name string, cpus float64) (Group, error) {
	if err := CheckCPUs(cpus); err != nil {
		return Group{}, fmt.Errorf("cgroup: %w", err)
	}
	dir := filepath.Join(c.parent, name)
	if err := mkdir(dir); err != nil {
		return Group{}, err
	}
	g := Group{Reader{version: c.version, dir: dir}}
	switch c.acct {
	case "":
	case c.parent:
		g.acct = dir
	default:
		g.acct = filepath.Join(c.acct, name)
		if err := mkdir(g.acct); err != nil {
			g.acct = ""
			return Group{}, errors.Join(err, g.Remove())
		}
	}
	period := Period.Microseconds()
	quota := int64(math.Round(cpus * float64(period)))
	var err error
	if c.version == v2 {
		err = write(dir, "cpu.max", fmt.Sprintf("%d %d", quota, period))
	} else {
		// The new cgroup has no quota yet, so the period can change first.
		err = errors.Join(write(dir, "cpu.cfs_period_us", strconv.FormatInt(period, 10)),
			write(dir, "cpu.cfs_quota_us", strconv.FormatInt(quota, 10)))
	}
	if err != nil {
		return Group{}, errors.Join(err, g.Remove())
	}
	return g, nil
}

// mkdir makes the cgroup dir, replacing a leftover one of an earlier run
// if it is empty.
func mkdir(dir string) error {
	err := os.Mkdir(dir, 0o755)
	if errors.Is(err, os.ErrExist) && os.Remove(dir) == nil {
		err = os.Mkdir(dir, 0o755)
	}
	if err != nil {
		return fmt.Errorf("cgroup: %w", err)
	}
	return nil
}

// Add moves process pid, all its threads, into the cgroup and into its
// twin in a separate cpuacct hierarchy.
func (g Group) Add(pid int) error {
	if err := write(g.dir, "cgroup.procs", strconv.Itoa(pid)); err != nil {
		return err
	}
	if g.acct != "" && g.acct != g.dir {
		return write(g.acct, "cgroup.procs", strconv.Itoa(pid))
	}
	return nil
}

// Remove deletes the cgroup and its cpuacct twin, which must hold no
// process (the kernel refuses with EBUSY otherwise); one already gone, or
// the zero Group (an unsized node's), is not an error.
func (g Group) Remove() error {
	if err := removeTree(g.dir); err != nil || g.acct == g.dir {
		return err // a cgroup still busy in one hierarchy is busy in both
	}
	return removeTree(g.acct)
}

// Remove deletes the node cgroup at dir and its twin at the same path in a
// separate cpuacct hierarchy (see Group.Remove); "" is none.
func Remove(dir string) error {
	if err := removeTree(dir); err != nil {
		return err
	}
	l, err := readLayout(live(), "self")
	if err != nil {
		return nil // no hierarchies to hold a twin
	}
	if t := l.twin(dir); t != dir {
		return removeTree(t)
	}
	return nil
}

// removeTree deletes the cgroup at dir; "" is none.
// A node's children (its password derivation workers) exit after it, when
// their pipes to it close, and the kernel refuses to remove the cgroup
// (EBUSY) until the last has exited and been reaped: that is waited for,
// up to removeWait. Child cgroups go first: a node killed before it
// stopped leaves its workers' cgroup (Own) in its own, and the kernel
// refuses to remove a cgroup that has children.
func removeTree(dir string) error {
	if dir == "" {
		return nil
	}
	entries, _ := os.ReadDir(dir) // none when it is gone
	for _, e := range entries {
		if e.IsDir() {
			if err := removeTree(filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		}
	}
	for deadline := time.Now().Add(removeWait); ; time.Sleep(10 * time.Millisecond) {
		err := os.Remove(dir)
		if err == nil || errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if !errors.Is(err, syscall.EBUSY) || time.Now().After(deadline) {
			return fmt.Errorf("cgroup: %w", err)
		}
	}
}

// removeWait is how long Remove waits for a cgroup's processes to leave.
const removeWait = 2 * time.Second

func write(dir, file, value string) error {
	if err := os.WriteFile(filepath.Join(dir, file), []byte(value), 0o644); err != nil {
		return fmt.Errorf("cgroup: %w", err)
	}
	return nil
}
