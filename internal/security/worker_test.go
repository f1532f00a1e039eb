package security

import (
	"bytes"
	"crypto/pbkdf2"
	"crypto/sha256"
	"errors"
	"math"
	"testing"
	"time"

	"golang.org/x/crypto/argon2"
)

// fixedDerivations are a fixed salt and password at today's Argon2id
// setting and at PBKDF2's of older users files.
var fixedDerivations = []derivation{
	{algorithm: argon2id, password: []byte("correct horse"), salt: []byte("0123456789abcdef"), iterations: argon2Time, memoryKB: argon2MemoryKB, threads: argon2Threads, keyLen: 32},
	{password: []byte("correct horse"), salt: []byte("0123456789abcdef"), iterations: 1000, keyLen: 32},
}

// want is r's key from the libraries directly.
func (r derivation) want(t *testing.T) []byte {
	t.Helper()
	if r.algorithm == argon2id {
		return argon2.IDKey(r.password, r.salt, r.iterations, r.memoryKB, r.threads, r.keyLen)
	}
	key, err := pbkdf2.Key(sha256.New, string(r.password), r.salt, int(r.iterations), int(r.keyLen))
	if err != nil {
		t.Fatal(err)
	}
	return key
}

// A worker derives what the libraries derive in this process, and says
// what CPU time it took.
func TestWorkerDerivesAsInProcess(t *testing.T) {
	p := newWorkerPool(startWorker, nil, nil)
	defer p.stop()
	for _, r := range fixedDerivations {
		key, cpu, known := p.derive(r)
		if want := r.want(t); !bytes.Equal(key, want) || !bytes.Equal(r.run(), want) {
			t.Fatalf("%q: worker %x, in process %x, want %x", r.algorithm, key, r.run(), want)
		}
		if !known || cpu <= 0 {
			t.Fatalf("%q: CPU time %v (known %v), want the worker's", r.algorithm, cpu, known)
		}
		if len(p.idle) != 1 || p.inProcess {
			t.Fatalf("%q: %d idle workers, in process %v; want the one worker back", r.algorithm, len(p.idle), p.inProcess)
		}
	}
}

// A killed worker is replaced, and the derivation it was sent is derived
// by the new one.
func TestKilledWorkerReplaced(t *testing.T) {
	p := newWorkerPool(startWorker, nil, nil)
	defer p.stop()
	r := fixedDerivations[0]
	p.derive(r)
	old := p.idle[0].cmd
	if err := old.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	key, _, known := p.derive(r)
	if !bytes.Equal(key, r.want(t)) || !known {
		t.Fatalf("after the kill: %x (CPU time known %v), want %x", key, known, r.want(t))
	}
	if len(p.idle) != 1 || p.inProcess || p.idle[0].cmd.Process.Pid == old.Process.Pid {
		t.Fatalf("after the kill: %d idle workers, in process %v, want one other than %d", len(p.idle), p.inProcess, old.Process.Pid)
	}
	if old.ProcessState == nil {
		t.Fatal("the killed worker was not reaped")
	}
}

// A worker that cannot start is tried once more; after that, derivations
// run in the node's process, with their key the same.
func TestWorkerFailingTwiceDerivesInProcess(t *testing.T) {
	starts := 0
	p := newWorkerPool(func() (*worker, error) { starts++; return nil, errors.New("no worker here") }, nil, nil)
	for _, r := range fixedDerivations {
		if key, _, _ := p.derive(r); !bytes.Equal(key, r.want(t)) {
			t.Fatalf("%q in process: %x, want %x", r.algorithm, key, r.want(t))
		}
	}
	if starts != 2 || !p.inProcess {
		t.Fatalf("%d starts, in process %v; want 2, then in process", starts, p.inProcess)
	}
}

// Requests and their encoding round-trip; a malformed one is refused.
func TestDerivationFrames(t *testing.T) {
	for _, r := range fixedDerivations {
		got, err := decodeDerivation(r.encode())
		if err != nil || got.algorithm != r.algorithm || !bytes.Equal(got.password, r.password) || !bytes.Equal(got.salt, r.salt) ||
			got.iterations != r.iterations || got.memoryKB != r.memoryKB || got.threads != r.threads || got.keyLen != r.keyLen {
			t.Fatalf("%+v decoded as %+v, %v", r, got, err)
		}
		b := r.encode()
		for _, bad := range [][]byte{nil, {2}, b[:len(b)-1], append(b, 0)} {
			if _, err := decodeDerivation(bad); !errors.Is(err, errFrame) {
				t.Fatalf("%x decoded: %v, want errFrame", bad, err)
			}
		}
	}
}

// A directory's logins derive in the process's workers: the right password
// logs in, a wrong one and an unknown user do not, and no derivation fell
// back to the test's process.
func TestLoginsDeriveInWorkers(t *testing.T) {
	dir, _, _ := testDirectory(t)
	if role, err := dir.PasswordRole("writer", "wpw", "10.0.0.1:1"); err != nil || role != RoleWrite {
		t.Fatalf("writer: %v, %v", role, err)
	}
	login(t, dir, "reader", "wpw", "10.0.0.2:1", wrong)
	login(t, dir, "nobody", "wpw", "10.0.0.3:1", wrong)
	derivationWorkers.mu.Lock()
	defer derivationWorkers.mu.Unlock()
	if derivationWorkers.inProcess || len(derivationWorkers.idle) == 0 {
		t.Fatalf("in process %v, %d idle workers: want the logins derived in a worker", derivationWorkers.inProcess, len(derivationWorkers.idle))
	}
}

// fakeCgroup stands in for the workers' cgroup: what it was made with,
// the processes added, and whether every one had exited when it was
// removed.
type fakeCgroup struct {
	made    []float64
	pids    []int
	removed bool
	err     error
}

func (f *fakeCgroup) make(cpus float64) (func(int) error, func() error, error) {
	f.made = append(f.made, cpus)
	if f.err != nil {
		return nil, nil, f.err
	}
	return func(pid int) error { f.pids = append(f.pids, pid); return nil },
		func() error { f.removed = true; return nil }, nil
}

// A sized node's workers go into one cgroup of the budget's CPUs (at
// least the kernel's minimum), made at the first worker's start and
// removed once they have exited.
func TestWorkersInTheirCgroup(t *testing.T) {
	for _, tc := range []struct {
		share float64
		procs int
		want  float64
	}{{0.1, 2, 0.2}, {0.5, 4, 2}, {0.01, 2, 0.1}} {
		b := newDerivationBudget(LoginConfig{DerivationShare: tc.share, DerivationBurst: time.Second})
		b.procs = func() int { return tc.procs }
		f := &fakeCgroup{}
		p := newWorkerPool(startWorker, f.make, b.cores)
		var started []*worker
		for range 2 {
			w, err := p.take(true)
			if err != nil {
				t.Fatal(err)
			}
			started = append(started, w)
			p.give(w)
		}
		if len(f.made) != 1 || math.Abs(f.made[0]-tc.want) > 1e-9 {
			t.Fatalf("share %v of %d CPUs: cgroups made with %v CPUs, want one of %v", tc.share, tc.procs, f.made, tc.want)
		}
		if len(f.pids) != 2 || f.pids[0] != started[0].cmd.Process.Pid || f.pids[1] != started[1].cmd.Process.Pid {
			t.Fatalf("added %v, want the workers %d and %d", f.pids, started[0].cmd.Process.Pid, started[1].cmd.Process.Pid)
		}
		if err := p.stop(); err != nil || !f.removed {
			t.Fatalf("stop: %v, removed %v", err, f.removed)
		}
		for _, w := range started {
			if w.cmd.ProcessState == nil {
				t.Fatalf("worker %d not reaped before its cgroup was removed", w.cmd.Process.Pid)
			}
		}
	}
}

// Without a cgroup of the node's own, workers stay where they are and
// derive as before; it is tried once.
func TestWorkersWithoutCgroup(t *testing.T) {
	f := &fakeCgroup{err: errors.New("no cgroup of the node's own")}
	p := newWorkerPool(startWorker, f.make, func() float64 { return 0.2 })
	defer p.stop()
	for _, r := range fixedDerivations {
		if key, _, known := p.derive(r); !bytes.Equal(key, r.want(t)) || !known {
			t.Fatalf("%q: %x (CPU time known %v), want %x from a worker", r.algorithm, key, known, r.want(t))
		}
	}
	if w, err := p.take(true); err != nil {
		t.Fatal(err)
	} else {
		p.give(w)
	}
	if len(f.made) != 1 || len(f.pids) != 0 || p.inProcess {
		t.Fatalf("made %v, added %v, in process %v: want one try, no process added, workers used", f.made, f.pids, p.inProcess)
	}
	if err := p.stop(); err != nil || f.removed {
		t.Fatalf("stop: %v, removed %v: want nothing to remove", err, f.removed)
	}
}
