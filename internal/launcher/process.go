package launcher

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/tidekv/tidekv/internal/cgroup"
)

// LogName is the file, inside a node's data directory, that its output is
// appended to unless NodeSpec.LogPath says otherwise.
const LogName = "tidekv.log"

// NodeSpec says how to run one `tidekv server` process.
type NodeSpec struct {
	// Index is the node's 1-based position in its local cluster. It only
	// names the node in messages; the cluster assigns the real node ID.
	Index int
	// DataDir is the node's data directory (--data-dir); created if missing.
	DataDir string
	// GRPCAddr and HTTPAddr are the listen addresses (host:port) passed as
	// --listen and --http-listen. HTTPAddr may be empty to leave the flag
	// out: the server then puts HTTP beside gRPC (see server.AutoAddr) and
	// announces where.
	GRPCAddr, HTTPAddr string
	// RedisAddr is the Redis-protocol listen address (--redis-listen);
	// empty leaves the flag out.
	RedisAddr string
	// GossipAddr is the gossip (memberlist) listen address
	// (--gossip-listen); "" leaves gossip off.
	GossipAddr string
	// Join lists gRPC addresses of existing nodes (--join); empty means
	// "bootstrap a new cluster" for a node without state.
	Join []string
	// Label is passed as --node-label when non-empty.
	Label string
	// ExtraArgs are appended after the flags above.
	ExtraArgs []string
	// Env entries ("K=V") are added to the launcher's own environment.
	Env []string
	// LogPath is where stderr and stdout are appended; empty means
	// <DataDir>/tidekv.log.
	LogPath string
	// HTTPTLS, when set, reaches the node's HTTP port over HTTPS with it
	// (a node started with --certs-dir); nil uses plain HTTP.
	HTTPTLS *tls.Config
	// CPUs, when positive, is the node's CPU size: it runs in a cgroup of
	// its own with a quota of CPUs (internal/cgroup), removed once it has
	// exited.
	CPUs float64
}

// Validate reports whether the spec can be started.
func (s NodeSpec) Validate() error {
	if s.DataDir == "" {
		return errors.New("launcher: NodeSpec.DataDir is empty")
	}
	if s.GRPCAddr == "" {
		return errors.New("launcher: NodeSpec.GRPCAddr is empty")
	}
	if s.CPUs != 0 {
		if err := cgroup.CheckCPUs(s.CPUs); err != nil {
			return fmt.Errorf("launcher: %w", err)
		}
	}
	for _, a := range append([]string{s.GRPCAddr, s.HTTPAddr, s.RedisAddr, s.GossipAddr}, s.Join...) {
		if a == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(a); err != nil {
			return fmt.Errorf("launcher: bad address %q: %w", a, err)
		}
	}
	return nil
}

// Args returns the command-line arguments (without the binary) that run the
// node: "server --data-dir ... --listen ... [--http-listen ...] [--redis-listen ...]
// [--gossip-listen ...] [--join a,b]
// [--node-label L] extra...".
func (s NodeSpec) Args() []string {
	args := []string{"server", "--data-dir", s.DataDir, "--listen", s.GRPCAddr}
	if s.HTTPAddr != "" {
		args = append(args, "--http-listen", s.HTTPAddr)
	}
	if s.RedisAddr != "" {
		args = append(args, "--redis-listen", s.RedisAddr)
	}
	if s.GossipAddr != "" {
		args = append(args, "--gossip-listen", s.GossipAddr)
	}
	if len(s.Join) > 0 {
		args = append(args, "--join", strings.Join(s.Join, ","))
	}
	if s.Label != "" {
		args = append(args, "--node-label", s.Label)
	}
	return append(args, s.ExtraArgs...)
}

// Log returns the path of the node's log file.
func (s NodeSpec) Log() string {
	if s.LogPath != "" {
		return s.LogPath
	}
	return filepath.Join(s.DataDir, LogName)
}

// ReadyLine is what a server announces on stdout once it serves.
type ReadyLine struct {
	NodeID             uint64
	GRPCAddr, HTTPAddr string
}

var readyRE = regexp.MustCompile(`^tidekv: node (\d+) ready grpc=(\S+) http=(\S+)`)

// ParseReadyLine parses "tidekv: node <ID> ready grpc=<addr> http=<addr>".
// Trailing fields are ignored so that the server can add some later.
func ParseReadyLine(line string) (ReadyLine, bool) {
	m := readyRE.FindStringSubmatch(strings.TrimSpace(line))
	if m == nil {
		return ReadyLine{}, false
	}
	id, err := strconv.ParseUint(m[1], 10, 64)
	if err != nil {
		return ReadyLine{}, false
	}
	return ReadyLine{NodeID: id, GRPCAddr: m[2], HTTPAddr: m[3]}, true
}

// Process is one running (or exited) server process. Its methods are safe
// for concurrent use.
type Process struct {
	spec   NodeSpec
	binary string
	cmd    *exec.Cmd
	log    *os.File     // shared by the child's stderr and our stdout copier
	stdout *os.File     // read end of the child's stdout
	group  cgroup.Group // a sized node's cgroup (zero when unsized), removed after exit

	ready      chan struct{} // closed when the ready line has been read
	readyLine  ReadyLine     // set before ready is closed
	readerDone chan struct{}
	done       chan struct{} // closed once the process has been reaped
	waitErr    error         // set before done is closed

	stopRequested atomic.Bool
}

// Start runs `binary server ...` for spec and returns at once; use Ready to
// wait until it serves. The child gets its own process group, so a Ctrl-C in
// the launcher's terminal reaches only the launcher, which then decides how
// to stop its nodes. On Linux the child also receives SIGTERM if the
// launcher dies, so crashed launchers and timed-out tests do not leave
// servers behind. A sized node (spec.CPUs) runs in a cgroup of its own
// (see StartSized).
func Start(binary string, spec NodeSpec) (*Process, error) {
	if binary == "" {
		return nil, errors.New("launcher: no binary")
	}
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(spec.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("launcher: node %d: %w", spec.Index, err)
	}
	logf, err := os.OpenFile(spec.Log(), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("launcher: node %d: %w", spec.Index, err)
	}
	args := spec.Args()
	fmt.Fprintf(logf, "=== launcher %s: starting %s %s\n",
		time.Now().Format(time.RFC3339), binary, strings.Join(args, " "))

	// A plain pipe (rather than cmd.StdoutPipe) lets Wait run independently
	// of the reader, and the child's stderr goes straight to the file so it
	// keeps being logged even if this process stalls or dies.
	pr, pw, err := os.Pipe()
	if err != nil {
		logf.Close()
		return nil, err
	}
	cmd := exec.Command(binary, args...)
	cmd.Stdout = pw
	cmd.Stderr = logf
	cmd.Env = append(os.Environ(), spec.Env...)
	cmd.SysProcAttr = sysProcAttr()
	group, err := StartSized(cmd, spec, fmt.Sprintf("%d-%d", os.Getpid(), spec.Index), startCmd)
	pw.Close()
	if err != nil {
		pr.Close()
		fmt.Fprintf(logf, "=== launcher: start failed: %v\n", err)
		logf.Close()
		return nil, fmt.Errorf("launcher: node %d: start %s: %w", spec.Index, binary, err)
	}
	if group.Dir() != "" {
		fmt.Fprintf(logf, "=== launcher: pid %d runs in %s with %v CPUs\n", cmd.Process.Pid, group.Dir(), spec.CPUs)
	}

	p := &Process{
		spec:       spec,
		binary:     binary,
		cmd:        cmd,
		log:        logf,
		stdout:     pr,
		group:      group,
		ready:      make(chan struct{}),
		readerDone: make(chan struct{}),
		done:       make(chan struct{}),
	}
	go p.readStdout()
	go p.wait()
	return p, nil
}

// readStdout copies the child's stdout into the log and watches for the
// ready line.
func (p *Process) readStdout() {
	defer close(p.readerDone)
	sc := bufio.NewScanner(p.stdout)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	seen := false
	for sc.Scan() {
		line := sc.Text()
		p.log.Write(append([]byte(line), '\n'))
		if seen {
			continue
		}
		if rl, ok := ParseReadyLine(line); ok {
			p.readyLine = rl
			seen = true
			close(p.ready)
		}
	}
	// Drain whatever is left (e.g. an over-long line) so the child never
	// blocks writing to a full pipe.
	io.Copy(p.log, p.stdout)
}

func (p *Process) wait() {
	err := p.cmd.Wait()
	// The child is gone, so stdout reaches EOF unless a grandchild inherited
	// it; do not wait for that forever.
	select {
	case <-p.readerDone:
	case <-time.After(2 * time.Second):
		p.stdout.Close()
		<-p.readerDone
	}
	p.stdout.Close()
	fmt.Fprintf(p.log, "=== launcher %s: pid %d exited: %s\n",
		time.Now().Format(time.RFC3339), p.cmd.Process.Pid, exitString(err))
	if rerr := p.group.Remove(); rerr != nil {
		fmt.Fprintf(p.log, "=== launcher: %v\n", rerr)
	}
	p.log.Close()
	p.waitErr = err
	close(p.done)
}

// StartSized starts cmd, which runs spec, with start. For a sized spec it
// first creates the cgroup cgroup.NodePrefix+name with spec.CPUs and moves
// the child into it right after it starts: os/exec cannot place a child in
// a cgroup before it runs, so the child runs unsized for that moment,
// before it has read its flags. The group is the zero Group for an unsized
// spec. On error nothing is left running and no cgroup remains.
func StartSized(cmd *exec.Cmd, spec NodeSpec, name string, start func(*exec.Cmd) error) (cgroup.Group, error) {
	var group cgroup.Group
	if spec.CPUs > 0 {
		c, err := cgroup.Open()
		if err == nil {
			group, err = c.Create(name, spec.CPUs)
		}
		if err != nil {
			return cgroup.Group{}, err
		}
	}
	if err := start(cmd); err != nil {
		return cgroup.Group{}, errors.Join(err, group.Remove())
	}
	if group.Dir() == "" {
		return group, nil
	}
	if err := group.Add(cmd.Process.Pid); err != nil {
		// A node must not run unsized when it was asked to be sized.
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return cgroup.Group{}, errors.Join(fmt.Errorf("moving pid %d into %s: %w", cmd.Process.Pid, group.Dir(), err), group.Remove())
	}
	return group, nil
}

func exitString(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}

// String names the process in messages: "node 2 (pid 1234)".
func (p *Process) String() string {
	return fmt.Sprintf("node %d (pid %d)", p.spec.Index, p.Pid())
}

// Spec returns the spec the process was started with.
func (p *Process) Spec() NodeSpec { return p.spec }

// Cgroup returns the directory of a sized node's cgroup, "" for an unsized
// node; the cgroup is gone once the process has exited.
func (p *Process) Cgroup() string { return p.group.Dir() }

// Pid returns the operating-system process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// NodeID returns the cluster-assigned node id from the ready line, or 0
// before the node has announced it.
func (p *Process) NodeID() uint64 {
	select {
	case <-p.ready:
		return p.readyLine.NodeID
	default:
		return 0
	}
}

// Announced returns the parsed ready line and whether it has been seen.
func (p *Process) Announced() (ReadyLine, bool) {
	select {
	case <-p.ready:
		return p.readyLine, true
	default:
		return ReadyLine{}, false
	}
}

// Done is closed once the process has exited and been reaped.
func (p *Process) Done() <-chan struct{} { return p.done }

// Exited reports whether the process has exited.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Wait blocks until the process exits and returns its exit error (nil for
// exit status 0, an *exec.ExitError otherwise).
func (p *Process) Wait() error {
	<-p.done
	return p.waitErr
}

// ExitErr returns the exit error once the process has exited (see Wait), and
// nil while it runs.
func (p *Process) ExitErr() error {
	if !p.Exited() {
		return nil
	}
	return p.waitErr
}

// StopRequested reports whether Stop or Kill has been called, i.e. whether
// an exit is expected.
func (p *Process) StopRequested() bool { return p.stopRequested.Load() }

// Ready waits until the process has printed its ready line and its announced
// HTTP address answers GET /health with 200. It fails early, with the tail
// of the log, if the process exits first.
func (p *Process) Ready(ctx context.Context) error {
	select {
	case <-p.ready:
	case <-p.done:
		return p.notReadyErr(fmt.Errorf("exited (%s)", exitString(p.waitErr)))
	case <-ctx.Done():
		return p.notReadyErr(ctx.Err())
	}
	rl := p.readyLine
	if rl.HTTPAddr == "" {
		return nil
	}
	hctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-p.done:
			cancel()
		case <-hctx.Done():
		}
	}()
	if err := pollGET(hctx, []string{rl.HTTPAddr}, "/health", p.spec.HTTPTLS, healthy); err != nil {
		if p.Exited() {
			err = fmt.Errorf("exited (%s)", exitString(p.waitErr))
		}
		return p.notReadyErr(err)
	}
	return nil
}

func (p *Process) notReadyErr(cause error) error {
	return fmt.Errorf("launcher: %s not ready: %w\n--- last lines of %s ---\n%s",
		p, cause, p.spec.Log(), p.LogTail(40))
}

// Signal sends sig to the process. It does not count as a requested stop.
func (p *Process) Signal(sig os.Signal) error { return p.cmd.Process.Signal(sig) }

// Stop asks the process to shut down with SIGTERM and waits up to timeout
// for it to exit, then SIGKILLs it. When Stop returns the process is gone.
// It returns nil if the process exited with status 0 after SIGTERM or had
// already exited before Stop was called, and an error if it exited with
// another status or had to be killed.
func (p *Process) Stop(timeout time.Duration) error {
	p.stopRequested.Store(true)
	if p.Exited() {
		return nil
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-p.done:
		if p.waitErr != nil {
			return fmt.Errorf("launcher: %s exited after SIGTERM with %v", p, p.waitErr)
		}
		return nil
	case <-t.C:
	}
	_ = p.cmd.Process.Kill()
	<-p.done
	return fmt.Errorf("launcher: %s did not exit within %v of SIGTERM; sent SIGKILL", p, timeout)
}

// Kill sends SIGKILL (a crash: nothing is flushed, the data directory
// survives) and waits until the process is gone.
func (p *Process) Kill() error {
	p.stopRequested.Store(true)
	if p.Exited() {
		return nil
	}
	if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("launcher: kill %s: %w", p, err)
	}
	<-p.done
	return nil
}

// LogTail returns the last n lines of the process's log file.
func (p *Process) LogTail(n int) string { return LogTail(p.spec.Log(), n) }

// LogTail returns the last n lines of the file at path (at most the last
// 256 KiB of it), or a note saying why it could not be read.
func LogTail(path string, n int) string {
	const window = 256 << 10
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	off := st.Size() - window
	if off < 0 {
		off = 0
	}
	buf := make([]byte, st.Size()-off)
	k, err := f.ReadAt(buf, off)
	if err != nil && err != io.EOF {
		return fmt.Sprintf("(reading log: %v)", err)
	}
	lines := bytes.Split(bytes.TrimRight(buf[:k], "\n"), []byte("\n"))
	if off > 0 && len(lines) > 0 {
		lines = lines[1:] // the first line was probably cut in half
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

// WaitHealthy polls GET http://addr/health until it answers 200 or ctx ends.
// An unspecified host (0.0.0.0, ::) is reached through loopback.
func WaitHealthy(ctx context.Context, addr string) error {
	return pollGET(ctx, []string{addr}, "/health", nil, healthy)
}

func healthy(code int, _ []byte) bool { return code == http.StatusOK }

// Readiness is a node's answer to GET /ready.
type Readiness struct {
	Ready             bool   `json:"ready"`
	NodeID            uint64 `json:"node_id"`
	Reason            string `json:"reason"`
	ReplicationFactor int    `json:"replication_factor"`
	LiveNodes         int    `json:"live_nodes"`
	Ranges            int    `json:"ranges"`
}

// WaitReady polls GET /ready on the first of addrs that answers until the
// cluster is ready (every range has its replication factor) or ctx ends,
// and returns the ready answer. Each time the reason for not being ready
// changes, progress (if non-nil) is told it.
func WaitReady(ctx context.Context, addrs []string, progress func(reason string)) (Readiness, error) {
	var r Readiness
	last := ""
	err := pollGET(ctx, addrs, "/ready", nil, func(code int, body []byte) bool {
		r = Readiness{}
		if json.Unmarshal(body, &r) != nil {
			return false
		}
		if r.Reason != last && r.Reason != "" && progress != nil {
			progress(r.Reason)
		}
		last = r.Reason
		return code == http.StatusOK && r.Ready
	})
	return r, err
}

// pollGET asks GET path of addrs[0], every 100 ms, until done(status, body)
// is true or ctx ends. A node that cannot be reached is left for the next
// of addrs; one that answers is asked again.
func pollGET(ctx context.Context, addrs []string, path string, tc *tls.Config, done func(code int, body []byte) bool) error {
	cl, scheme := &http.Client{Timeout: 3 * time.Second}, "http://"
	if tc != nil {
		cl.Transport, scheme = &http.Transport{TLSClientConfig: tc}, "https://"
	}
	var last error
	for next := 0; ; {
		url := scheme + dialable(addrs[next]) + path
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := cl.Do(req)
		if err == nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
			resp.Body.Close()
			if done(resp.StatusCode, body) {
				return nil
			}
			err = fmt.Errorf("GET %s: %s %s", url, resp.Status, bytes.TrimSpace(body))
		} else {
			next = (next + 1) % len(addrs)
		}
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last answer: %v)", ctx.Err(), last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// dialable turns a listen address into one a client can dial.
func dialable(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		if ip != nil && ip.To4() == nil {
			host = "::1"
		} else {
			host = "127.0.0.1"
		}
	}
	return net.JoinHostPort(host, port)
}

// HasState reports whether dataDir holds anything besides the launcher's
// log file, i.e. whether a server has run there and the node would rejoin
// with its data rather than need bootstrapping or joining fresh.
func HasState(dataDir string) (bool, error) {
	entries, err := os.ReadDir(dataDir)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	for _, e := range entries {
		if e.Name() != LogName {
			return true, nil
		}
	}
	return false, nil
}

// WipeState removes everything in dataDir but the launcher's log file: the
// node started there next is a fresh one (HasState is then false), as on a
// replaced disk, and its log still holds the earlier runs.
func WipeState(dataDir string) error {
	entries, err := os.ReadDir(dataDir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.Name() != LogName {
			if err := os.RemoveAll(filepath.Join(dataDir, e.Name())); err != nil {
				return err
			}
		}
	}
	return nil
}
