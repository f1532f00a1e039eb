package cgroup

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// fakeFS is a temp dir shaped like a machine's cgroup filesystem: proc/self
// with cgroup and mountinfo, and the mounts those name. The kernel's side
// (control files appearing in a new cgroup, rmdir ignoring them) is
// played by the tests.
type fakeFS struct {
	t    *testing.T
	root string
}

func newFakeFS(t *testing.T, selfCgroup string, mounts ...string) fakeFS {
	fs := fakeFS{t: t, root: t.TempDir()}
	fs.write("proc/self/cgroup", selfCgroup)
	var mi []string
	for i, m := range mounts {
		// m is "<fstype> <superopts> <mount point below root> <root in hierarchy>".
		f := strings.Fields(m)
		mi = append(mi, strings.Join([]string{strconv.Itoa(30 + i), "23", "0:" + strconv.Itoa(30+i), f[3], fs.path(f[2]), "rw,relatime", "-", f[0], f[0], f[1]}, " "))
	}
	fs.write("proc/self/mountinfo", strings.Join(mi, "\n")+"\n")
	return fs
}

func (fs fakeFS) path(rel string) string { return filepath.Join(fs.root, rel) }

func (fs fakeFS) write(rel, content string) {
	fs.t.Helper()
	p := fs.path(rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		fs.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		fs.t.Fatal(err)
	}
}

func (fs fakeFS) read(rel string) string {
	fs.t.Helper()
	b, err := os.ReadFile(fs.path(rel))
	if err != nil {
		fs.t.Fatal(err)
	}
	return string(b)
}

func (fs fakeFS) sys(writable error) system {
	return system{goos: "linux", proc: fs.path("proc"), writable: func(string) error { return writable }}
}

// emptyGroup plays the kernel at rmdir: a cgroup's control files are not
// entries that keep it from being removed.
func (fs fakeFS) emptyGroup(dir string) {
	fs.t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		fs.t.Fatal(err)
	}
	for _, e := range entries {
		if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
			fs.t.Fatal(err)
		}
	}
}

// thisMachine is the shape of the machine TideKV's tests run on: v1 with
// the cpu controller alone, and a unified hierarchy with no controllers.
func thisMachine(t *testing.T) fakeFS {
	fs := newFakeFS(t, "4:memory:/x\n1:cpu:/\n2:cpuacct:/\n0::/\n",
		"cgroup rw,cpu sys/cpu /", "cgroup rw,cpuacct sys/cpuacct /", "cgroup2 rw sys/unified /")
	fs.write("sys/unified/cgroup.controllers", "")
	fs.write("sys/cpu/cpu.cfs_quota_us", "-1\n")
	fs.write("sys/cpu/cpu.cfs_period_us", "100000\n")
	fs.write("sys/cpu/cpu.stat", "nr_periods 0\nnr_throttled 0\nthrottled_time 0\n")
	fs.write("sys/cpuacct/cpuacct.usage", "123456789000\n")
	return fs
}

func TestV1CreateAddReadRemove(t *testing.T) {
	fs := thisMachine(t)
	c, err := open(fs.sys(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.Parent() != fs.path("sys/cpu") || c.version != v1 {
		t.Fatalf("controller at %s v%d, want %s v1", c.Parent(), c.version, fs.path("sys/cpu"))
	}
	g, err := c.Create("up-7-node1", 0.3)
	if err != nil {
		t.Fatal(err)
	}
	rel := "sys/cpu/" + NodePrefix + "up-7-node1"
	if g.Dir() != fs.path(rel) {
		t.Fatalf("group at %s, want %s", g.Dir(), fs.path(rel))
	}
	if q, p := fs.read(rel+"/cpu.cfs_quota_us"), fs.read(rel+"/cpu.cfs_period_us"); q != "3000" || p != "10000" {
		t.Fatalf("quota %q period %q, want 3000 per 10000", q, p)
	}
	if err := g.Add(4242); err != nil {
		t.Fatal(err)
	}
	// cpuacct is a hierarchy of its own here: the node is moved into
	// the cgroup at the same path there too, and its usage read from it.
	acct := "sys/cpuacct/" + NodePrefix + "up-7-node1"
	if g.UsageDir() != fs.path(acct) {
		t.Fatalf("usage read from %q, want %s", g.UsageDir(), fs.path(acct))
	}
	for _, dir := range []string{rel, acct} {
		if got := fs.read(dir + "/cgroup.procs"); got != "4242" {
			t.Fatalf("%s/cgroup.procs %q, want 4242", dir, got)
		}
	}
	fs.write(rel+"/cpu.stat", "nr_periods 200\nnr_throttled 50\nthrottled_time 125000000\nnr_bursts 0\n")
	st, err := g.Read()
	if err != nil {
		t.Fatal(err)
	}
	if want := (Stat{CPUs: 0.3, Periods: 200, Throttled: 50, ThrottledTime: 125 * time.Millisecond}); st != want {
		t.Fatalf("read %+v, want %+v (no usage before the kernel counts it)", st, want)
	}
	fs.write(acct+"/cpuacct.usage", "1500000000\n")
	if st, err = g.Read(); err != nil || !st.UsageKnown || st.Usage != 1500*time.Millisecond {
		t.Fatalf("read %+v, %v; want 1.5 s of usage", st, err)
	}
	fs.emptyGroup(g.Dir())
	fs.emptyGroup(fs.path(acct))
	if err := g.Remove(); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{g.Dir(), fs.path(acct)} {
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Fatalf("%s still there after Remove: %v", dir, err)
		}
	}
	if err := g.Remove(); err != nil {
		t.Fatalf("removing a removed group: %v", err)
	}
}

// A node that launches nodes (the local actuator in a sized node) puts
// them beside itself, not inside its own quota.
func TestNodeLaunchesBesideItself(t *testing.T) {
	fs := newFakeFS(t, "1:cpu,cpuacct:/"+NodePrefix+"up-7-node1\n", "cgroup rw,cpu,cpuacct sys/cpu,cpuacct /")
	fs.write("sys/cpu,cpuacct/cgroup.procs", "")
	c, err := open(fs.sys(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.Parent() != fs.path("sys/cpu,cpuacct") {
		t.Fatalf("parent %s, want the hierarchy's root %s", c.Parent(), fs.path("sys/cpu,cpuacct"))
	}
	// cpuacct mounted with cpu: the usage is the node cgroup's own file.
	g, err := c.Create("up-7-node2", 0.3)
	if err != nil {
		t.Fatal(err)
	}
	if g.UsageDir() != g.Dir() {
		t.Fatalf("usage read from %q, want the cgroup %s", g.UsageDir(), g.Dir())
	}
	fs.write("sys/cpu,cpuacct/"+NodePrefix+"up-7-node2/cpu.stat", "nr_periods 0\n")
	fs.write("sys/cpu,cpuacct/"+NodePrefix+"up-7-node2/cpuacct.usage", "42\n")
	if st, err := g.Read(); err != nil || !st.UsageKnown || st.Usage != 42 {
		t.Fatalf("read %+v, %v; want 42 ns of usage", st, err)
	}
}

func TestV2PreferredAndEnabled(t *testing.T) {
	// The hierarchy is mounted from /kube inside a container's namespace.
	fs := newFakeFS(t, "1:cpu:/a\n0::/kube/app\n", "cgroup rw,cpu sys/cpu /", "cgroup2 rw sys/fs /kube")
	fs.write("sys/fs/app/cgroup.controllers", "cpuset cpu io memory\n")
	fs.write("sys/fs/app/cgroup.subtree_control", "memory\n")
	c, err := open(fs.sys(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.version != v2 || c.Parent() != fs.path("sys/fs/app") {
		t.Fatalf("controller at %s v%d, want %s v2", c.Parent(), c.version, fs.path("sys/fs/app"))
	}
	if got := fs.read("sys/fs/app/cgroup.subtree_control"); got != "+cpu" {
		t.Fatalf("subtree_control written %q, want +cpu", got)
	}
	g, err := c.Create("n1", 0.5)
	if err != nil {
		t.Fatal(err)
	}
	if got := fs.read("sys/fs/app/" + NodePrefix + "n1/cpu.max"); got != "5000 10000" {
		t.Fatalf("cpu.max %q, want \"5000 10000\"", got)
	}
	fs.write("sys/fs/app/"+NodePrefix+"n1/cpu.stat", "usage_usec 9\nnr_periods 10\nnr_throttled 4\nthrottled_usec 2500\n")
	st, err := g.Read()
	if err != nil {
		t.Fatal(err)
	}
	if want := (Stat{CPUs: 0.5, Periods: 10, Throttled: 4, ThrottledTime: 2500 * time.Microsecond, Usage: 9 * time.Microsecond, UsageKnown: true}); st != want {
		t.Fatalf("read %+v, want %+v", st, want)
	}
}

func TestReadUnlimited(t *testing.T) {
	fs := thisMachine(t)
	r, err := find(fs.sys(nil), "self")
	if err != nil {
		t.Fatal(err)
	}
	if st, err := r.Read(); err != nil || st.CPUs != 0 {
		t.Fatalf("v1 quota -1 read as %+v, %v; want CPUs 0", st, err)
	}
	fs2 := newFakeFS(t, "0::/\n", "cgroup2 rw sys/fs /")
	fs2.write("sys/fs/cgroup.controllers", "cpu\n")
	fs2.write("sys/fs/cpu.stat", "usage_usec 1\n")
	r, err = find(fs2.sys(nil), "self")
	if err != nil {
		t.Fatal(err)
	}
	if st, err := r.Read(); err != nil || st.CPUs != 0 {
		t.Fatalf("v2 root (no cpu.max) read as %+v, %v; want CPUs 0", st, err)
	}
}

// A sized node reads its usage from its cgroup in a separate cpuacct
// hierarchy when that is at its cpu cgroup's path, and reads none
// otherwise: the root's (or a launcher's) usage is not the node's.
func TestSelfUsage(t *testing.T) {
	node := NodePrefix + "up-7-node1"
	for name, tc := range map[string]struct {
		acctPath string
		known    bool
	}{
		"twin":      {"/" + node, true},
		"not moved": {"/", false},
		"elsewhere": {"/other/" + node, false},
	} {
		t.Run(name, func(t *testing.T) {
			fs := newFakeFS(t, "2:cpuacct:"+tc.acctPath+"\n1:cpu:/"+node+"\n0::/\n",
				"cgroup rw,cpu sys/cpu /", "cgroup rw,cpuacct sys/cpuacct /")
			fs.write("sys/cpu/"+node+"/cpu.cfs_quota_us", "3000\n")
			fs.write("sys/cpu/"+node+"/cpu.cfs_period_us", "10000\n")
			fs.write("sys/cpu/"+node+"/cpu.stat", "nr_periods 0\n")
			fs.write("sys/cpuacct/cpuacct.usage", "999999999999\n")
			fs.write("sys/cpuacct"+tc.acctPath+"/cpuacct.usage", "300000000\n")
			r, err := find(fs.sys(nil), "self")
			if err != nil {
				t.Fatal(err)
			}
			st, err := r.Read()
			if err != nil || st.CPUs != 0.3 {
				t.Fatalf("read %+v, %v; want 0.3 CPUs", st, err)
			}
			if st.UsageKnown != tc.known || (tc.known && st.Usage != 300*time.Millisecond) {
				t.Fatalf("usage %v known %v, want known %v (300 ms)", st.Usage, st.UsageKnown, tc.known)
			}
		})
	}
}

// A launcher whose cpuacct cgroup is not at its cpu cgroup's path makes
// no twin: its nodes run sized as before and read no usage.
func TestNoTwinWithoutMatchingParent(t *testing.T) {
	fs := newFakeFS(t, "1:cpu:/bench\n2:cpuacct:/\n0::/\n",
		"cgroup rw,cpu sys/cpu /", "cgroup rw,cpuacct sys/cpuacct /")
	fs.write("sys/cpu/bench/cgroup.procs", "")
	fs.write("sys/cpuacct/cpuacct.usage", "1\n")
	c, err := open(fs.sys(nil))
	if err != nil {
		t.Fatal(err)
	}
	g, err := c.Create("n1", 0.3)
	if err != nil {
		t.Fatal(err)
	}
	if g.UsageDir() != "" {
		t.Fatalf("usage read from %q, want none", g.UsageDir())
	}
	if _, err := os.Stat(fs.path("sys/cpuacct/bench")); !os.IsNotExist(err) {
		t.Fatalf("a cpuacct cgroup was made for the launcher's path: %v", err)
	}
}

func TestRefusals(t *testing.T) {
	noCPU := newFakeFS(t, "1:memory:/\n0::/\n", "cgroup rw,memory sys/memory /", "cgroup2 rw sys/unified /")
	noCPU.write("sys/unified/cgroup.controllers", "memory\n")
	v2Busy := newFakeFS(t, "0::/app\n", "cgroup2 rw sys/fs /")
	v2Busy.write("sys/fs/app/cgroup.controllers", "cpu\n")
	// A directory in place of the file makes the write fail, as the
	// kernel's EBUSY does for a cgroup holding processes.
	v2Busy.write("sys/fs/app/cgroup.subtree_control/x", "")
	machine := thisMachine(t)
	for _, tc := range []struct {
		name string
		sys  system
		want string
	}{
		{"not linux", system{goos: "darwin"}, "needs Linux cgroups, and this is darwin"},
		{"no cpu controller", noCPU.sys(nil), "no cpu controller"},
		{"not root", machine.sys(syscall.EACCES), "cannot create cgroups in " + machine.path("sys/cpu") + " (permission denied): run as root"},
		{"v2 cpu not delegable", v2Busy.sys(nil), "cannot give the cpu controller to child cgroups"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := open(tc.sys)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("open: %v, want an error containing %q", err, tc.want)
			}
		})
	}
	c, err := open(machine.sys(nil))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Create("small", 0.05); err == nil || !strings.Contains(err.Error(), "at least 0.1") {
		t.Fatalf("Create 0.05 CPUs: %v, want the minimum named", err)
	}
	if entries, _ := os.ReadDir(c.Parent()); len(entries) != 3 {
		t.Fatalf("a refused Create left something behind: %v", entries)
	}
}

// TestLive sizes a real process on this machine, where the cgroups are
// writable (root).
func TestLive(t *testing.T) {
	c, err := Open()
	if err != nil {
		t.Skipf("cgroups are not usable here: %v", err)
	}
	g, err := c.Create("test-"+strconv.Itoa(os.Getpid()), 0.2)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if err := g.Add(cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(cmd.Process.Pid), "cgroup"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), filepath.Base(g.Dir())) {
		t.Fatalf("process not in %s: %s", g.Dir(), b)
	}
	st, err := g.Read()
	if err != nil || st.CPUs != 0.2 {
		t.Fatalf("read %+v, %v; want 0.2 CPUs", st, err)
	}
	// The process reads its usage where it can, and the reading is its
	// cgroup's: the one at its cpu cgroup's path.
	r, err := Of(cmd.Process.Pid)
	if err != nil || r.Dir() != g.Dir() || r.UsageDir() != g.UsageDir() {
		t.Fatalf("process reads %s (usage %q), %v; want %s (usage %q)", r.Dir(), r.UsageDir(), err, g.Dir(), g.UsageDir())
	}
	if st, err := r.Read(); err != nil || st.UsageKnown != (g.UsageDir() != "") {
		t.Fatalf("read %+v, %v; want usage known where it has a usage cgroup (%q)", st, err, g.UsageDir())
	}
	if err := g.Remove(); err == nil {
		t.Fatal("removed a cgroup that holds a process")
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if err := g.Remove(); err != nil {
		t.Fatal(err)
	}
}

// A sized node makes a child of its own cgroup, with its own quota, and
// only there.
func TestOwnChild(t *testing.T) {
	node := NodePrefix + "up-7-node1"
	fs := newFakeFS(t, "1:cpu,cpuacct:/"+node+"\n0::/\n", "cgroup rw,cpu,cpuacct sys/cpu /")
	fs.write("sys/cpu/"+node+"/cgroup.procs", "")
	c, err := own(fs.sys(nil))
	if err != nil {
		t.Fatal(err)
	}
	g, err := c.CreateChild("derive", 0.1)
	if err != nil {
		t.Fatal(err)
	}
	rel := "sys/cpu/" + node + "/derive"
	if g.Dir() != fs.path(rel) {
		t.Fatalf("child at %s, want %s", g.Dir(), fs.path(rel))
	}
	if q, p := fs.read(rel+"/cpu.cfs_quota_us"), fs.read(rel+"/cpu.cfs_period_us"); q != "1000" || p != "10000" {
		t.Fatalf("quota %q period %q, want 1000 per 10000", q, p)
	}
	if err := g.Add(4343); err != nil {
		t.Fatal(err)
	}
	if got := fs.read(rel + "/cgroup.procs"); got != "4343" {
		t.Fatalf("cgroup.procs %q, want 4343", got)
	}
	// The node's cgroup goes with its child, as after the node was killed.
	fs.emptyGroup(g.Dir())
	if err := os.Remove(fs.path("sys/cpu/" + node + "/cgroup.procs")); err != nil {
		t.Fatal(err)
	}
	if err := Remove(fs.path("sys/cpu/" + node)); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(fs.path("sys/cpu/" + node)); !os.IsNotExist(err) {
		t.Fatalf("node's cgroup still there after Remove: %v", err)
	}

	for name, tc := range map[string]struct {
		fs       fakeFS
		writable error
	}{
		"unsized":  {newFakeFS(t, "1:cpu:/\n", "cgroup rw,cpu sys/cpu /"), nil},
		"not root": {newFakeFS(t, "1:cpu:/"+node+"\n", "cgroup rw,cpu sys/cpu /"), syscall.EACCES},
		"v2": {func() fakeFS {
			fs := newFakeFS(t, "0::/"+node+"\n", "cgroup2 rw sys/fs /")
			fs.write("sys/fs/"+node+"/cgroup.controllers", "cpu\n")
			return fs
		}(), nil},
	} {
		if c, err := own(tc.fs.sys(tc.writable)); err == nil {
			t.Errorf("%s: own cgroup at %s, want a refusal", name, c.Parent())
		}
	}
}

// A co-runner's cgroup sits inside a sized node's, with its share of the
// node's quota and the most weight; it is refused on v2, outside a quota
// and for shares that leave the node nothing or take nothing.
func TestCoRunner(t *testing.T) {
	fs := thisMachine(t)
	c, err := open(fs.sys(nil))
	if err != nil {
		t.Fatal(err)
	}
	node, err := c.Create("7-1", 0.3)
	if err != nil {
		t.Fatal(err)
	}
	fs.write("sys/cpu/"+NodePrefix+"7-1/cpu.stat", "nr_periods 0\nnr_throttled 0\nthrottled_time 0\n")
	h, err := node.CoRunner("hog", 0.5)
	if err != nil {
		t.Fatal(err)
	}
	rel := "sys/cpu/" + NodePrefix + "7-1/hog"
	if h.Dir() != fs.path(rel) {
		t.Fatalf("co-runner at %s, want %s", h.Dir(), fs.path(rel))
	}
	if q, p, s := fs.read(rel+"/cpu.cfs_quota_us"), fs.read(rel+"/cpu.cfs_period_us"), fs.read(rel+"/cpu.shares"); q != "1500" || p != "10000" || s != "262144" {
		t.Fatalf("quota %q period %q shares %q, want 1500 per 10000 and 262144", q, p, s)
	}
	// Its accounting is a child of the node's: the node's usage counts it.
	if want := fs.path("sys/cpuacct/" + NodePrefix + "7-1/hog"); h.UsageDir() != want {
		t.Fatalf("co-runner's usage read from %q, want %s", h.UsageDir(), want)
	}
	if err := h.Add(77); err != nil || fs.read("sys/cpuacct/"+NodePrefix+"7-1/hog/cgroup.procs") != "77" {
		t.Fatalf("co-runner not moved into its cpuacct cgroup: %v", err)
	}
	for _, share := range []float64{0, 1, -0.5} {
		if g, err := node.CoRunner("bad", share); err == nil {
			t.Errorf("share %v: co-runner at %s, want a refusal", share, g.Dir())
		}
	}
	if g, err := node.CoRunner("small", 0.2); err == nil { // 0.06 CPU: below the kernel's least quota
		t.Errorf("0.2 of 0.3 CPU: co-runner at %s, want a refusal", g.Dir())
	}
	if g, err := (Group{Reader{version: v1, dir: fs.path("sys/cpu")}}).CoRunner("hog", 0.5); err == nil {
		t.Errorf("no quota: co-runner at %s, want a refusal", g.Dir())
	}
	if g, err := (Group{Reader{version: v2, dir: fs.path("sys/cpu/" + NodePrefix + "7-1")}}).CoRunner("hog", 0.5); err == nil {
		t.Errorf("v2: co-runner at %s, want a refusal", g.Dir())
	}
}
