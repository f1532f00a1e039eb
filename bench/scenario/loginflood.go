package scenario

// loginflood: what a flood of bad logins costs the users already logged in,
// end to end (docs/security.md, "What a flood costs"). One secure node (TLS,
// a users file with a write user, certificates made by `tidekv cert`) is a
// real process, sized by --node-cpus (default 1) so that it has a CPU of its
// own. A logged-in client sends GET and SET at a fixed rate over both user
// paths: Redis on connections that gave AUTH once, and the Go client over
// gRPC with Basic auth. Each round measures a window without a flood, then
// a window in which attackers, each from its own loopback address
// (127.R.x.y, fresh every round so that no back-off carries over), send
// wrong passwords of the write user and made-up users through Redis AUTH
// and gRPC Basic auth. The claim: the logged-in requests' p99 during the
// flood is within 20% (or 1 ms, whichever is larger) of the p99 without.
//
// Latencies are measured from each request's send, in a goroutine of its
// own, so a slow answer delays no later request. The report gives, per
// window, the node's CPU time and the derivations the flood cost (wrong
// answers: each is one Argon2id derivation) and the attempts refused
// unchecked (in a back-off, or busy: beyond the node's derivation budget,
// --login-derivation-share), from the node's /metrics. With --dir the
// node's CPU profile over each window of round 1 is kept there
// (window-R-KIND.pprof; `go tool pprof BINARY FILE`).

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/client"
	"github.com/tidekv/tidekv/internal/launcher"
	"github.com/tidekv/tidekv/internal/security"
)

func init() {
	register(Scenario{
		Name:  "loginflood",
		Short: "p99 of logged-in Redis and gRPC clients at a fixed rate, without and during a flood of bad logins from many addresses (one secure node)",
		Run: func(ctx context.Context, opts Options, out io.Writer) error {
			_, err := loginFlood(ctx, opts, out)
			return err
		},
	})
}

// lfConfig is the scenario's shape; lfDefaults gives it per mode.
type lfConfig struct {
	Rounds    int           // pairs of windows: without, then during a flood
	Window    time.Duration // length of each window
	Rate      int           // logged-in requests per second on each protocol
	Keys      int           // keys the requests read and write
	Attackers int           // source addresses of a flood
	Every     time.Duration // each attacker's pace: at most one attempt per Every
	NodeCPUs  float64       // the node's size
}

func lfDefaults(opts Options) lfConfig {
	c := lfConfig{Rounds: 3, Window: lrStep(opts, 20*time.Second, 5*time.Second), Rate: 200, Keys: 1000,
		Attackers: 64, Every: 10 * time.Millisecond, NodeCPUs: 1}
	if opts.Quick {
		c.Rounds, c.Attackers = 1, 8
	}
	if opts.NodeCPUs > 0 {
		c.NodeCPUs = opts.NodeCPUs
	}
	return c
}

// The users of the scenario's node.
const (
	lfUser     = "app"
	lfPassword = "app-password-of-the-loginflood-scenario"
)

// lfWindow is one measured window.
type lfWindow struct {
	Round int
	Flood bool
	Redis lrResult // logged-in Redis GET/SET
	GRPC  lrResult // logged-in gRPC Get/Put
	// The same requests by kind, both protocols: reads, and writes (which
	// also wait for a synced commit).
	Reads, Writes lrResult
	// Logged-in requests refused as logins (an error, never expected),
	// per protocol.
	RedisAuthRefused, GRPCAuthRefused int
	// Attackers that had 5 wrong answers and then another attempt
	// answered, and of them those whose next answer was a refusal.
	PastFive, RefusedAfterFive int64
	// Of the flood: attempts answered as a wrong login (one derivation
	// each), refused in a back-off or busy, and attempts that failed
	// otherwise (a dropped connection, a timeout).
	Wrong, Refused, Busy, Other int64
	// From the node's /metrics across the window.
	NodeCPU                     time.Duration
	MetricWrong, Backoff, MBusy float64
}

// All is both protocols' requests together.
func (w lfWindow) All() lrResult {
	var r lrResult
	r.merge(w.Redis)
	r.merge(w.GRPC)
	r.Elapsed = w.Redis.Elapsed
	r.finish()
	return r
}

// loginFlood runs the scenario and writes its report; it returns the
// windows measured.
func loginFlood(ctx context.Context, opts Options, out io.Writer) ([]lfWindow, error) {
	cfg := lfDefaults(opts)
	dir, cleanup, err := lrWorkDir(opts, "loginflood")
	if err != nil {
		return nil, err
	}
	defer cleanup()
	bin, err := lrBinary(opts, dir)
	if err != nil {
		return nil, err
	}
	certs, users := filepath.Join(dir, "certs"), filepath.Join(dir, "users.json")
	if err := lfSecure(bin, certs, users); err != nil {
		return nil, err
	}
	caTLS, _, err := security.LoadClientTLS(security.OSFiles{}, certs, "")
	if err != nil {
		return nil, err
	}
	rootTLS, _, err := security.LoadClientTLS(security.OSFiles{}, certs, security.RootUser)
	if err != nil {
		return nil, err
	}
	base, err := launcher.FreeBasePort("127.0.0.1", 1)
	if err != nil {
		return nil, err
	}
	lc := launcher.Config{Nodes: 1, DataDir: dir, Host: "127.0.0.1", BasePort: base, Binary: bin, HTTPTLS: caTLS,
		NodeCPUs: cfg.NodeCPUs, ExtraArgs: []string{"--certs-dir", certs, "--users-file", users, "--enable-pprof"}}
	spec := lc.Node(1)
	node, err := launcher.Start(bin, spec)
	if err != nil {
		return nil, err
	}
	defer node.Stop(10 * time.Second)
	rctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	err = node.Ready(rctx)
	cancel()
	if err != nil {
		return nil, err
	}
	lrLogf(opts, "loginflood: node pid %d, %g CPU, gRPC %s, Redis %s", node.Pid(), cfg.NodeCPUs, spec.GRPCAddr, spec.RedisAddr)

	ccfg := client.DefaultConfig()
	ccfg.Addrs, ccfg.TLS = []string{spec.GRPCAddr}, caTLS
	ccfg.Credentials = security.PasswordCredentials{User: lfUser, Password: lfPassword}
	kv, err := client.New(ccfg)
	if err != nil {
		return nil, err
	}
	defer kv.Close()
	rc := redis.NewClient(&redis.Options{Addr: spec.RedisAddr, Username: lfUser, Password: lfPassword, TLSConfig: caTLS,
		PoolSize: 64, MinIdleConns: 16, MaxRetries: -1})
	defer rc.Close()
	if err := lfPrepare(ctx, kv, rc, cfg.Keys); err != nil {
		return nil, err
	}

	var windows []lfWindow
	for r := 1; r <= cfg.Rounds; r++ {
		for _, flood := range []bool{false, true} {
			w, err := lfMeasure(ctx, opts, cfg, r, flood, kv, rc, spec, caTLS, rootTLS, dir, node.Pid())
			if err != nil {
				return windows, err
			}
			lrLogf(opts, "loginflood: round %d flood=%v: p99 %s ms (Redis %s, gRPC %s), node CPU %v, derivations %.0f, refused %.0f in back-off, %.0f busy",
				r, flood, lrMs(w.All().Q(0.99)), lrMs(w.Redis.Q(0.99)), lrMs(w.GRPC.Q(0.99)), w.NodeCPU.Round(time.Millisecond), w.MetricWrong, w.Backoff, w.MBusy)
			windows = append(windows, w)
		}
	}
	lfReport(out, cfg, windows)
	return windows, nil
}

// lfSecure makes the node's certificates and users file with the commands
// docs/security.md gives an operator.
func lfSecure(bin, certs, users string) error {
	for _, step := range []struct {
		env  string
		args []string
	}{
		{"", []string{"cert", "create-ca", "--certs-dir", certs}},
		{"", []string{"cert", "create-node", "--certs-dir", certs, "127.0.0.1", "localhost"}},
		{"", []string{"cert", "create-client", "--certs-dir", certs, security.RootUser}},
		{"", []string{"cert", "create-gossip-key", "--certs-dir", certs}},
		{"TIDEKV_NEW_PASSWORD=" + lfPassword, []string{"user", "add", lfUser, "--role", "write", "--users-file", users}},
	} {
		cmd := exec.Command(bin, step.args...)
		cmd.Env = append(os.Environ(), step.env)
		if b, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("tidekv %s: %v: %s", strings.Join(step.args, " "), err, b)
		}
	}
	return nil
}

// lfPrepare logs both clients in (the one derivation each user's first
// login costs) and writes the keys.
func lfPrepare(ctx context.Context, kv *client.Client, rc *redis.Client, keys int) error {
	val := lrValue("loginflood", 100)
	for i := range keys {
		if err := kv.Put(ctx, lrKey("g", i), val); err != nil {
			return fmt.Errorf("loginflood: gRPC put: %w", err)
		}
		if err := rc.Set(ctx, string(lrKey("r", i)), val, 0).Err(); err != nil {
			return fmt.Errorf("loginflood: Redis SET: %w", err)
		}
	}
	return nil
}

// lfMeasure runs one window: the logged-in load, and a flood if asked.
func lfMeasure(ctx context.Context, opts Options, cfg lfConfig, round int, flood bool, kv *client.Client, rc *redis.Client,
	spec launcher.NodeSpec, caTLS, rootTLS *tls.Config, dir string, pid int) (lfWindow, error) {
	w := lfWindow{Round: round, Flood: flood}
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: rootTLS}}
	defer hc.CloseIdleConnections()
	before, err := lfScrape(ctx, hc, spec.HTTPAddr)
	if err != nil {
		return w, err
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	var profErr error
	if round == 1 && opts.Dir != "" {
		kind := map[bool]string{false: "quiet", true: "flood"}[flood]
		wg.Go(func() {
			profErr = lfProfile(wctx, hc, spec.HTTPAddr, cfg.Window, filepath.Join(opts.Dir, fmt.Sprintf("window-%d-%s.pprof", round, kind)))
		})
	}
	var fl *lfFlood
	if flood {
		if fl, err = startFlood(wctx, cfg, round, spec, caTLS); err != nil {
			return w, err
		}
	}
	seed := opts.Seed*1000 + uint64(round)*2
	var rr, rw, gr, gw []time.Duration
	wg.Go(func() {
		w.Redis, rr, rw = lfOpenLoop(wctx, cfg.Rate, cfg.Window, seed, &w.RedisAuthRefused, func(ctx context.Context, r *rand.Rand) (bool, error) {
			k := string(lrKey("r", r.IntN(cfg.Keys)))
			if r.IntN(2) == 0 {
				return false, rc.Get(ctx, k).Err()
			}
			return true, rc.Set(ctx, k, lrValue(k, 100), 0).Err()
		})
	})
	wg.Go(func() {
		w.GRPC, gr, gw = lfOpenLoop(wctx, cfg.Rate, cfg.Window, seed+1, &w.GRPCAuthRefused, func(ctx context.Context, r *rand.Rand) (bool, error) {
			k := lrKey("g", r.IntN(cfg.Keys))
			if r.IntN(2) == 0 {
				_, err := kv.Get(ctx, k, client.Linearizable())
				return false, err
			}
			return true, kv.Put(ctx, k, lrValue(string(k), 100))
		})
	})
	if fl != nil {
		// The flood runs exactly as long as the logged-in load.
		time.Sleep(cfg.Window)
		fl.stop(&w)
	}
	wg.Wait()
	w.Reads = lrResult{Ops: len(rr) + len(gr), Elapsed: cfg.Window, Lat: append(rr, gr...)}
	w.Writes = lrResult{Ops: len(rw) + len(gw), Elapsed: cfg.Window, Lat: append(rw, gw...)}
	w.Reads.finish()
	w.Writes.finish()
	if profErr != nil {
		lrLogf(opts, "loginflood: no profile: %v", profErr)
	}
	if flood {
		// Derivations in progress when the attackers stop are the flood's
		// cost, and must not fall into the next window (a node before the
		// derivation budget queued many).
		if err := lfDrain(ctx, hc, spec.HTTPAddr); err != nil {
			return w, err
		}
	}
	after, err := lfScrape(ctx, hc, spec.HTTPAddr)
	if err != nil {
		return w, err
	}
	w.NodeCPU = time.Duration((after["process_cpu_seconds_total"] - before["process_cpu_seconds_total"]) * float64(time.Second))
	w.MetricWrong = after[`tidekv_login_failures_total{result="wrong"}`] - before[`tidekv_login_failures_total{result="wrong"}`]
	w.Backoff = after[`tidekv_login_failures_total{result="backoff"}`] - before[`tidekv_login_failures_total{result="backoff"}`]
	w.MBusy = after[`tidekv_login_failures_total{result="busy"}`] - before[`tidekv_login_failures_total{result="busy"}`]
	return w, nil
}

// lfOpenLoop sends rate requests a second for d, each from its own
// goroutine at its scheduled time, and measures each from its send. A
// request has 5 s. Failures that are refused logins are also counted in
// refused.
func lfOpenLoop(ctx context.Context, rate int, d time.Duration, seed uint64, refused *int, op func(context.Context, *rand.Rand) (write bool, err error)) (res lrResult, reads, writes []time.Duration) {
	var mu sync.Mutex
	res.Elapsed = d
	var wg sync.WaitGroup
	every := time.Second / time.Duration(rate)
	start := time.Now()
	for i := 0; ; i++ {
		at := start.Add(time.Duration(i) * every)
		if at.Sub(start) >= d {
			break
		}
		t := time.NewTimer(time.Until(at))
		select {
		case <-ctx.Done():
			t.Stop()
		case <-t.C:
		}
		if ctx.Err() != nil {
			break
		}
		wg.Go(func() {
			r := rand.New(rand.NewPCG(seed, uint64(i)))
			octx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			sent := time.Now()
			write, err := op(octx, r)
			lat := time.Since(sent)
			mu.Lock()
			defer mu.Unlock()
			if err != nil && !errors.Is(err, redis.Nil) && !errors.Is(err, client.ErrNotFound) {
				res.Errors++
				if lfOutcome(err.Error()) != "other" || strings.Contains(err.Error(), "NOAUTH") || strings.Contains(err.Error(), "Unauthenticated") {
					*refused++
				}
				return
			}
			res.Ops++
			res.Lat = append(res.Lat, lat)
			if write {
				writes = append(writes, lat)
			} else {
				reads = append(reads, lat)
			}
		})
	}
	wg.Wait()
	res.finish()
	return res, reads, writes
}

// lfFlood is a running flood of bad logins.
type lfFlood struct {
	cancel                     context.CancelFunc
	wg                         sync.WaitGroup
	wrong, refused, busy, othr atomic.Int64
	// pastFive counts attackers that had their 5th wrong answer and an
	// answer after it; refusedAfterFive those whose answer after it was a
	// refusal (the address's back-off starts at the 5th failure).
	pastFive, refusedAfterFive atomic.Int64
}

// startFlood starts cfg.Attackers attackers, attacker i from 127.R.x.y
// (R = round), each with one Redis and one gRPC connection of its own,
// taking turns: Redis AUTH as the write user with a wrong password, Redis
// AUTH as a made-up user, the same two as gRPC Basic auth on a Get. Each
// waits for its answer and sends at most one attempt per cfg.Every.
func startFlood(ctx context.Context, cfg lfConfig, round int, spec launcher.NodeSpec, caTLS *tls.Config) (*lfFlood, error) {
	ctx, cancel := context.WithCancel(ctx)
	f := &lfFlood{cancel: cancel}
	for i := range cfg.Attackers {
		src := net.IPv4(127, byte(round), byte(i/250), byte(2+i%250))
		dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: src}, Timeout: 5 * time.Second}
		conn, err := grpc.NewClient(spec.GRPCAddr, grpc.WithTransportCredentials(credentials.NewTLS(caTLS)),
			grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
				return dialer.DialContext(ctx, "tcp", addr)
			}))
		if err != nil {
			f.stop(&lfWindow{})
			return nil, err
		}
		f.wg.Go(func() {
			defer conn.Close()
			f.attack(ctx, cfg.Every, i, dialer, spec.RedisAddr, caTLS, tidekvpb.NewKVClient(conn))
		})
	}
	return f, nil
}

// stop ends the flood and returns its attempts by outcome.
func (f *lfFlood) stop(w *lfWindow) {
	f.cancel()
	f.wg.Wait()
	w.Wrong, w.Refused, w.Busy, w.Other = f.wrong.Load(), f.refused.Load(), f.busy.Load(), f.othr.Load()
	w.PastFive, w.RefusedAfterFive = f.pastFive.Load(), f.refusedAfterFive.Load()
}

// attack is attacker i's loop.
func (f *lfFlood) attack(ctx context.Context, every time.Duration, i int, dialer *net.Dialer, redisAddr string, caTLS *tls.Config, kv tidekvpb.KVClient) {
	var rconn *tls.Conn
	var rbuf *bufio.Reader
	defer func() {
		if rconn != nil {
			rconn.Close()
		}
	}()
	tick := time.NewTicker(every)
	defer tick.Stop()
	wrongs := 0 // wrong answers, up to 5; 6 once the answer after the 5th was seen
	for n := 0; ; n++ {
		user, pass := lfUser, fmt.Sprintf("guess-%d-%d", i, n)
		if n%2 == 1 {
			user = fmt.Sprintf("made-up-%d-%d", i, n)
		}
		var outcome string
		if n%4 < 2 {
			if rconn == nil {
				c, err := tls.DialWithDialer(dialer, "tcp", redisAddr, caTLS)
				if err == nil {
					rconn, rbuf = c, bufio.NewReader(c)
				}
			}
			if rconn != nil {
				var err error
				if outcome, err = lfRedisAuth(rconn, rbuf, user, pass); err != nil {
					rconn.Close()
					rconn = nil
				}
			}
		} else {
			actx, cancel := context.WithTimeout(ctx, 10*time.Second)
			_, err := kv.Get(actx, &tidekvpb.GetRequest{Key: []byte("k")},
				grpc.PerRPCCredentials(security.PasswordCredentials{User: user, Password: pass}))
			cancel()
			outcome = lfOutcome(fmt.Sprint(err))
		}
		if ctx.Err() != nil {
			return // an attempt cut short by the window's end is not counted
		}
		if wrongs == 5 && outcome != "other" {
			f.pastFive.Add(1)
			if outcome == "refused" {
				f.refusedAfterFive.Add(1)
			}
			wrongs++ // counted once
		}
		switch outcome {
		case "wrong":
			if wrongs < 5 {
				wrongs++
			}
			f.wrong.Add(1)
		case "refused":
			f.refused.Add(1)
		case "busy":
			f.busy.Add(1)
		default:
			f.othr.Add(1)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// lfRedisAuth sends AUTH user pass on c and classifies the answer.
func lfRedisAuth(c *tls.Conn, r *bufio.Reader, user, pass string) (string, error) {
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := fmt.Fprintf(c, "*3\r\n$4\r\nAUTH\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n", len(user), user, len(pass), pass); err != nil {
		return "", err
	}
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	return lfOutcome(line), nil
}

// lfOutcome classifies a refusal by its sentence (docs/security.md).
func lfOutcome(answer string) string {
	switch {
	case strings.Contains(answer, "too many failed logins"):
		return "refused"
	case strings.Contains(answer, "too many login attempts"):
		return "busy"
	case strings.Contains(answer, "WRONGPASS"), strings.Contains(answer, "invalid user name or password"):
		return "wrong"
	default:
		return "other"
	}
}

// lfScrape reads the node's /metrics (public on a secure node) into a map
// from "name{labels}" to value.
func lfScrape(ctx context.Context, hc *http.Client, httpAddr string) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+httpAddr+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			out[line[:i]] = v
		}
	}
	return out, sc.Err()
}

// lfDrain waits until the node's count of wrong logins has not moved for
// a second (at most 60 s).
func lfDrain(ctx context.Context, hc *http.Client, httpAddr string) error {
	const wrong = `tidekv_login_failures_total{result="wrong"}`
	last, still := -1.0, 0
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); {
		m, err := lfScrape(ctx, hc, httpAddr)
		if err != nil {
			return err
		}
		if m[wrong] == last {
			if still++; still == 4 {
				return nil
			}
		} else {
			last, still = m[wrong], 0
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
	return errors.New("loginflood: the node was still deriving hashes 60 s after the flood")
}

// lfProfile writes the node's CPU profile over d to path (as root: the
// profiles need the admin role).
func lfProfile(ctx context.Context, hc *http.Client, httpAddr string, d time.Duration, path string) error {
	secs := max(1, int(d/time.Second))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("https://%s/debug/pprof/profile?seconds=%d", httpAddr, secs), nil)
	if err != nil {
		return err
	}
	pc := &http.Client{Timeout: d + 10*time.Second, Transport: hc.Transport}
	resp, err := pc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s", resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, resp.Body)
	return errors.Join(err, f.Close())
}

// lfReport writes the windows and the claim's verdict as markdown.
func lfReport(out io.Writer, cfg lfConfig, ws []lfWindow) {
	fmt.Fprintf(out, "## loginflood: logged-in requests during a flood of bad logins\n\n")
	fmt.Fprintf(out, "One secure node of %g CPU; %d GET/SET a second on each of Redis (AUTH once per connection) and gRPC (Basic auth), "+
		"%v windows; a flood is %d addresses, each at most one attempt per %v (wrong passwords of %q and made-up users, Redis AUTH and gRPC Basic in turn).\n\n",
		cfg.NodeCPUs, cfg.Rate, cfg.Window, cfg.Attackers, cfg.Every, lfUser)
	fmt.Fprintln(out, "| round | flood | requests | p50 ms | p99 ms | Redis p99 | gRPC p99 | read p99 | write p99 | max ms | errors | node CPU s | attempts | derivations | refused in back-off | refused busy |")
	fmt.Fprintln(out, "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	var quiet, flood, quietReads, floodReads lrResult
	for _, w := range ws {
		a := w.All()
		if w.Flood {
			flood.merge(a)
			floodReads.merge(w.Reads)
		} else {
			quiet.merge(a)
			quietReads.merge(w.Reads)
		}
		fmt.Fprintf(out, "| %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %d | %.2f | %s | %.0f | %.0f | %.0f |\n", w.Round, map[bool]string{false: "no", true: "yes"}[w.Flood],
			lrThousands(float64(a.Ops)), lrMs(a.Q(0.5)), lrMs(a.Q(0.99)), lrMs(w.Redis.Q(0.99)), lrMs(w.GRPC.Q(0.99)),
			lrMs(w.Reads.Q(0.99)), lrMs(w.Writes.Q(0.99)), lrMs(a.Q(1)), a.Errors,
			w.NodeCPU.Seconds(), lrThousands(float64(w.Wrong+w.Refused+w.Busy+w.Other)), w.MetricWrong, w.Backoff, w.MBusy)
	}
	quiet.finish()
	flood.finish()
	quietReads.finish()
	floodReads.finish()
	q, f := quiet.Q(0.99), flood.Q(0.99)
	bound := max(q*6/5, q+time.Millisecond)
	verdict := "holds"
	if f > bound {
		verdict = "does not hold"
	}
	fmt.Fprintf(out, "\nAll rounds: p99 %s ms without a flood, %s ms during one (%+.0f%%); the bound, 20%% or 1 ms above, is %s ms: the claim %s.\n",
		lrMs(q), lrMs(f), 100*(float64(f)/float64(q)-1), lrMs(bound), verdict)
	fmt.Fprintf(out, "Reads alone: p99 %s ms without, %s ms during.\n", lrMs(quietReads.Q(0.99)), lrMs(floodReads.Q(0.99)))
}
