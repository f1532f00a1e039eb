package security

import (
	"bufio"
	"crypto/pbkdf2"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"sync"
	"time"

	"golang.org/x/crypto/argon2"
)

// A node derives the password hashes of logins in derivation workers:
// child processes of its own binary, at the lowest CPU priority the kernel
// has, each with a heap of its own. A derivation in the node's process
// allocated 19 MiB (Argon2id's memory), whose garbage started a GC cycle of
// the node every few derivations, and ran at the priority of the node's
// requests: a flood of bad logins slowed the requests of users logged in
// (docs/security.md, "What is left of a flood's cost").
//
// A process whose environment has workerEnv=workerToken is a worker: the
// hook below runs before the program's main (or a test binary's tests),
// serves derivations on stdin and stdout until stdin closes, and exits.
// So any binary that links this package can be its own worker.
const (
	workerEnv   = "TIDEKV_DERIVATION_WORKER"
	workerToken = "1"
)

func init() {
	if os.Getenv(workerEnv) == workerToken {
		os.Exit(serveDerivations(os.Stdin, os.Stdout))
	}
}

// derivation is one password hash to derive: Argon2id, or PBKDF2-SHA256
// (algorithm "") for files written before Argon2id.
type derivation struct {
	algorithm string
	password  []byte
	salt      []byte
	// iterations is PBKDF2's iteration count or Argon2id's passes.
	iterations uint32
	memoryKB   uint32
	threads    uint8
	keyLen     uint32
}

// run derives the hash in this process; nil if the setting is invalid.
func (r derivation) run() []byte {
	if r.algorithm == argon2id {
		return argon2.IDKey(r.password, r.salt, r.iterations, r.memoryKB, r.threads, r.keyLen)
	}
	key, err := pbkdf2.Key(sha256.New, string(r.password), r.salt, int(r.iterations), int(r.keyLen))
	if err != nil {
		return nil
	}
	return key
}

// measured is run with the process's CPU time over it, and whether the
// kernel told it.
func (r derivation) measured() (key []byte, cpu time.Duration, known bool) {
	start, startKnown := processCPU()
	key = r.run()
	end, endKnown := processCPU()
	return key, end - start, startKnown && endKnown
}

// Frames on a worker's pipes are a 4-byte big-endian length and a body of
// at most maxFrame bytes. A request's body is the algorithm (1: Argon2id,
// 0: PBKDF2), uvarints iterations, memory in KiB, threads, key length,
// salt length, the salt, password length and the password; a response's
// is whether the worker knows its CPU time (1) or not (0, where the kernel
// does not tell it), a uvarint of the CPU time the derivation took, in
// nanoseconds, and the key.
const (
	maxFrame = 64 << 10
	// maxKeyLen bounds the key a request may ask for (users files hold
	// 32-byte hashes).
	maxKeyLen = 1024
)

var errFrame = errors.New("security: malformed derivation frame")

func writeFrame(w *bufio.Writer, body []byte) error {
	if err := binary.Write(w, binary.BigEndian, uint32(len(body))); err != nil {
		return err
	}
	if _, err := w.Write(body); err != nil {
		return err
	}
	return w.Flush()
}

func readFrame(r *bufio.Reader) ([]byte, error) {
	var n uint32
	if err := binary.Read(r, binary.BigEndian, &n); err != nil {
		return nil, err
	}
	if n > maxFrame {
		return nil, errFrame
	}
	body := make([]byte, n)
	_, err := io.ReadFull(r, body)
	return body, err
}

func (r derivation) encode() []byte {
	b := []byte{0}
	if r.algorithm == argon2id {
		b[0] = 1
	}
	for _, v := range []uint64{uint64(r.iterations), uint64(r.memoryKB), uint64(r.threads), uint64(r.keyLen), uint64(len(r.salt))} {
		b = binary.AppendUvarint(b, v)
	}
	b = append(b, r.salt...)
	b = binary.AppendUvarint(b, uint64(len(r.password)))
	return append(b, r.password...)
}

// decodeDerivation parses a request body.
func decodeDerivation(b []byte) (derivation, error) {
	var r derivation
	if len(b) == 0 || b[0] > 1 {
		return r, errFrame
	}
	if b[0] == 1 {
		r.algorithm = argon2id
	}
	b = b[1:]
	next := func(limit uint64) uint64 {
		v, n := binary.Uvarint(b)
		if n <= 0 || v > limit {
			b = nil
			return 0
		}
		b = b[n:]
		return v
	}
	field := func() []byte {
		n := next(maxFrame)
		if uint64(len(b)) < n {
			b = nil
		}
		if b == nil {
			return nil
		}
		s := b[:n:n]
		b = b[n:]
		return s
	}
	r.iterations, r.memoryKB = uint32(next(1<<32-1)), uint32(next(1<<32-1))
	r.threads, r.keyLen = uint8(next(255)), uint32(next(maxKeyLen))
	if b == nil {
		return r, errFrame
	}
	if r.salt = field(); b == nil {
		return r, errFrame
	}
	if r.password = field(); b == nil || len(b) != 0 {
		return r, errFrame
	}
	return r, nil
}

// serveDerivations is a worker's life: answer requests one at a time
// until in closes; its exit status. The node lowers its priority
// (workerPool.take), not the worker itself: so no raise of the node's
// (workeraging.go) can come before it and be undone.
func serveDerivations(in io.Reader, out io.Writer) int {
	r, w := bufio.NewReader(in), bufio.NewWriter(out)
	for {
		body, err := readFrame(r)
		if errors.Is(err, io.EOF) {
			return 0
		}
		var req derivation
		if err == nil {
			req, err = decodeDerivation(body)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "security: derivation worker %d: %v\n", os.Getpid(), err)
			return 1
		}
		// The worker does nothing else: its CPU time over the derivation,
		// GC included, is the derivation's.
		key, cpu, known := req.measured()
		flag := byte(0)
		if known {
			flag = 1
		}
		if err := writeFrame(w, append(binary.AppendUvarint([]byte{flag}, uint64(cpu)), key...)); err != nil {
			return 1
		}
	}
}

// worker is the node's end of one derivation worker.
type worker struct {
	cmd *exec.Cmd
	in  io.Closer
	w   *bufio.Writer
	r   *bufio.Reader
	// lowered says the worker runs at the lowest priority; one the node
	// could not lower runs at the node's own and is not aged.
	lowered bool
}

// derive sends r and reads its answer: the key, the worker's CPU time
// and whether it knew it.
func (w *worker) derive(r derivation) ([]byte, time.Duration, bool, error) {
	if err := writeFrame(w.w, r.encode()); err != nil {
		return nil, 0, false, err
	}
	body, err := readFrame(w.r)
	if err != nil {
		return nil, 0, false, err
	}
	if len(body) == 0 || body[0] > 1 {
		return nil, 0, false, errFrame
	}
	cpu, n := binary.Uvarint(body[1:])
	if n <= 0 {
		return nil, 0, false, errFrame
	}
	key := body[1+n:]
	if len(key) == 0 {
		key = nil // an invalid setting, as run says
	}
	return key, time.Duration(cpu), body[0] == 1, nil
}

// startWorker starts a worker: the node's binary again, with the
// worker's environment variable and one CPU (Argon2id at one lane derives
// on one anyway), its stderr the node's for the little it logs. It
// starts in the node's cgroup; the pool moves it into the workers' own
// where there is one (workercgroup.go).
func startWorker() (*worker, error) {
	cmd := exec.Command(selfExe)
	cmd.Env = append(os.Environ(), workerEnv+"="+workerToken, "GOMAXPROCS=1")
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting a derivation worker: %w", err)
	}
	return &worker{cmd: cmd, in: in, w: bufio.NewWriter(in), r: bufio.NewReader(out)}, nil
}

// stop ends the worker and reaps it.
func (w *worker) stop() {
	w.in.Close()
	w.cmd.Process.Kill()
	w.cmd.Wait()
}

// workerPool hands derivations to workers, one request in flight per
// worker. Workers are started when every one is busy: the derivation
// budget's slots bound how many run at once, and so how many exist. If a
// worker cannot start or dies, the derivation is tried once more on a new
// one; if that fails too, derivations run in the node's process from then
// on, and that is logged once.
type workerPool struct {
	start func() (*worker, error)
	// aging lowers a new worker and raises one whose derivation waited
	// out the grace (workeraging.go).
	aging *aging
	// cgroup makes the workers' cgroup (nil: none is tried).
	cgroup workerCgroup

	mu        sync.Mutex
	idle      []*worker
	inProcess bool
	// cores is the derivation budget in CPUs, the workers' cgroup's quota
	// (SetDerivationBudget).
	cores func() float64
	// placed says the workers' cgroup was tried; add and remove are its
	// (nil: workers stay in the node's cgroup).
	placed bool
	add    func(pid int) error
	remove func() error
}

// derivationWorkers is the process's pool: a node has one directory, and
// a test binary's directories share their workers.
var derivationWorkers = newWorkerPool(startWorker, ownCgroupChild, newDerivationBudget(DefaultLoginConfig()).cores)

// newWorkerPool returns a pool starting its workers with start, at the
// operating system's priorities and the default grace, on the wall clock.
func newWorkerPool(start func() (*worker, error), cgroup workerCgroup, cores func() float64) *workerPool {
	return &workerPool{start: start, cgroup: cgroup, cores: cores,
		aging: &aging{priority: schedThreads{canRaise: mayLeaveIdle}, after: wallAfterFunc, grace: DefaultDerivationGrace}}
}

// StopDerivationWorkers stops the process's idle derivation workers, waits
// until they have exited and removes their cgroup, if they had one. A
// node calls it as it stops, once no login is under way; a derivation
// after it starts workers again.
func StopDerivationWorkers() error { return derivationWorkers.stop() }

// stop stops p's idle workers and removes their cgroup.
func (p *workerPool) stop() error {
	p.mu.Lock()
	idle, remove := p.idle, p.remove
	p.idle, p.placed, p.add, p.remove = nil, false, nil, nil
	p.mu.Unlock()
	for _, w := range idle {
		w.stop()
	}
	if remove == nil {
		return nil
	}
	return remove()
}

// derive returns r's key and the CPU time it took, and whether that time
// is known: exact from a worker, the process's over the derivation in the
// node's process (unknown where the kernel does not tell it).
func (p *workerPool) derive(r derivation) ([]byte, time.Duration, bool) {
	var err error
	for attempt := range 2 {
		var w *worker
		if w, err = p.take(attempt > 0); err != nil {
			continue
		}
		if w == nil {
			break
		}
		var key []byte
		var cpu time.Duration
		var known bool
		serve := p.aging.serve
		if !w.lowered {
			// Nothing to raise, and lowering it after would fail as its
			// first lowering did, stopping a sound worker.
			serve = atOwnPriority
		}
		reusable, derr := serve(w.cmd.Process.Pid, func() (err error) {
			key, cpu, known, err = w.derive(r)
			return err
		})
		if reusable {
			p.give(w)
		} else {
			w.stop()
		}
		if derr == nil {
			return key, cpu, known
		}
		err = fmt.Errorf("worker %d: %w", w.cmd.Process.Pid, derr)
	}
	if err != nil {
		p.fallBack(err)
	}
	return r.measured()
}

// take returns an idle worker (unless fresh), or starts one; nil when
// derivations run in the node's process.
func (p *workerPool) take(fresh bool) (*worker, error) {
	p.mu.Lock()
	if p.inProcess {
		p.mu.Unlock()
		return nil, nil
	}
	if n := len(p.idle); n > 0 && !fresh {
		w := p.idle[n-1]
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		return w, nil
	}
	p.mu.Unlock()
	w, err := p.start()
	if err != nil {
		return nil, err
	}
	if p.cgroup != nil {
		p.place(w.cmd.Process.Pid)
	}
	// Lowered before its first request; threads its runtime starts later
	// inherit the policy.
	if err := p.aging.priority.lower(w.cmd.Process.Pid); err != nil {
		// Still worth running: its own heap keeps the node's GC out.
		log.Printf("security: derivation worker %d runs at normal priority: %v", w.cmd.Process.Pid, err)
	} else {
		w.lowered = true
	}
	return w, nil
}

// atOwnPriority serves a worker that was never lowered: it waits for the
// answer, as aging.serve does, and leaves the priority alone.
func atOwnPriority(_ int, answer func() error) (reusable bool, err error) {
	err = answer()
	return err == nil, err
}

func (p *workerPool) give(w *worker) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.idle = append(p.idle, w)
}

// fallBack makes every later derivation run in the node's process.
func (p *workerPool) fallBack(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.inProcess {
		p.inProcess = true
		log.Printf("security: password derivations run in the node's process from now on, at its priority and on its heap: a derivation worker failed twice in a row: %v", err)
	}
}
