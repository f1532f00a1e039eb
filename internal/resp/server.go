package resp

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Config configures a Server.
type Config struct {
	// ListenAddr is the TCP address to listen on, host:port (port 0 picks a
	// free port; see Server.Addr).
	ListenAddr string
	// Listener, when set, is served instead of a TCP listener on
	// ListenAddr, which then only names it (benchmarks and tests serve
	// in-memory connections). Close closes it.
	Listener net.Listener
	// Auth, when set, must be given AUTH (or HELLO ... AUTH) before any
	// other command: every connection authenticates as one of its users,
	// and a read-only user gets NOPERM for writes (acl.go). nil means no
	// authentication. resp compares no password itself: a password alone
	// is the Authenticator's user "default".
	Auth Authenticator
	// TLS, when set, serves TLS only.
	TLS *tls.Config
	// RequestTimeout bounds each command's KV calls, for each
	// MaxBatchKeys of its arguments (Server.timeout). Must be > 0.
	RequestTimeout time.Duration
	// MaxScanCount is the largest COUNT of SCAN and LIMIT of TKV.RANGE, in
	// keys; it is also TKV.RANGE's default LIMIT. Must be > 0.
	MaxScanCount int
	// MaxBatchKeys is the most keys sent in one BatchGet or Write (MGET,
	// MSET, HMGET, HSET, ...); larger commands are split. Must be > 0 and no
	// more than the cluster's BatchGet/Write key limit (1,000 by default).
	MaxBatchKeys int
	// MaxConns is the most client connections served at once; more are
	// refused with an error reply. 0 means no limit.
	MaxConns int
	// MaxBulkLen is the largest bulk string (one argument) a client may
	// send, in bytes, like Redis's proto-max-bulk-len. MaxArgs is the most
	// arguments of one command, MaxInlineLen the longest inline command
	// line in bytes, and MaxCommandLen the most bytes of one command in
	// all, like Redis's client-query-buffer-limit. A request over any of
	// them is refused at its header, before its payload is read, with one
	// error reply naming the limit, and the connection is closed: together
	// they bound what one connection can make the node buffer. Each must
	// be > 0, and MaxCommandLen at least MaxBulkLen.
	MaxBulkLen, MaxArgs, MaxInlineLen, MaxCommandLen int
	// MaxOutputBuffer is the most reply bytes the node holds for one
	// client, like Redis's client-output-buffer-limit: replies are written
	// out whenever they reach it, and values are read for a client
	// MaxOutputBuffer/MaxBulkLen at a time (pipelined GETs, MGET, EXISTS),
	// so a client that does not read holds about this much plus one such
	// batch. Must be > 0.
	MaxOutputBuffer int
	// OutputTimeout is how long a client may take to accept one write of
	// its replies (up to MaxOutputBuffer bytes and one more reply); one
	// that does not is disconnected (output.go). Must be > 0.
	OutputTimeout time.Duration
	// CursorTTL is how long an idle SCAN cursor is kept. Must be > 0.
	CursorTTL time.Duration
	// MaxCursors is the most SCAN cursors kept; the oldest is dropped beyond
	// it. Must be > 0.
	MaxCursors int
	// MaxMultiCommands is the most commands a connection may queue after
	// MULTI, and, separately, the most keys it may WATCH; MaxMultiBytes the
	// most bytes of their arguments (keys). Past them the queue is dropped
	// and EXEC answers EXECABORT (multi.go). Each must be > 0.
	MaxMultiCommands, MaxMultiBytes int
	// CASAttempts bounds the compare-and-set retries of INCR and friends
	// under contention before they fail. Must be > 0.
	CASAttempts int
	// BlockRecheck is how often a client blocked in BLPOP and the other
	// blocking pops (blocked.go) tries again on its own. A push through
	// this node wakes the client at once; a push through another node is
	// seen only by such a try, so this bounds how late it is seen. Must be
	// > 0.
	BlockRecheck time.Duration
	// MaxBlockedClients is the most clients blocked at once on this node;
	// one more is refused at once with an error rather than queued. Must
	// be > 0.
	MaxBlockedClients int
	// ScriptTimeLimit bounds how long one run of a script (EVAL and its
	// kin) may take: past it the script is stopped, nothing it wrote is
	// applied, and its client gets an error (scriptrun.go). Redis
	// answers BUSY to everyone after its 5 s and cannot stop a script that
	// wrote; TideKV's scripts run side by side, so this only ends one
	// that would hold its transaction (and its keys' writers) and its
	// connection for ever. Must be > 0. RequestTimeout bounds the whole
	// command still: a script stopped by it gets the timeout's error.
	ScriptTimeLimit time.Duration
	// ScriptCacheBytes bounds the scripts a node keeps compiled for
	// EVALSHA (scriptcache.go): past it the least recently used are
	// dropped, and EVALSHA of one answers NOSCRIPT. Must be > 0.
	ScriptCacheBytes int
	// timers makes the timers blocked clients wait on (nil: the real
	// ones); tests fire them by hand.
	timers blockTimers
	// randN draws a uniform int in [0, n) for ZRANDMEMBER and the set
	// draws (nil: math/rand/v2's IntN); tests give a seeded source.
	randN func(n int) int
	// Now is the clock EXPIRETIME and the GT/LT options of EXPIREAT read
	// to turn a remaining TTL into a time, and the one commands' arrivals
	// are stamped with (Arrival) (nil: time.Now).
	Now func() time.Time
	// Shedding reports whether the node may refuse commands by queueing
	// delay now (its admission queue is deep). Only then does a
	// connection look, after writing a pipeline's replies, whether its
	// client sent more ahead of them (Paced); nil: never.
	Shedding func() bool
}

// DefaultConfig returns a Config with the defaults for every field but
// ListenAddr (127.0.0.1:6379) and Auth (none).
func DefaultConfig() Config {
	return Config{
		ListenAddr:     "127.0.0.1:6379",
		RequestTimeout: 5 * time.Second,
		MaxScanCount:   10000,
		MaxBatchKeys:   1000,
		MaxConns:       10000,
		MaxBulkLen:     1 << 20,
		MaxArgs:        1 << 16,
		MaxInlineLen:   64 << 10,
		MaxCommandLen:  32 << 20,
		// 16 values of 1 MiB per read batch: a pipeline of 16 GETs
		// (redis-benchmark -P 16) is still one read.
		MaxOutputBuffer: 16 << 20,
		OutputTimeout:   10 * time.Second,
		CursorTTL:       10 * time.Minute,
		MaxCursors:      10000,
		CASAttempts:     1000,
		// A transaction's own limits (docs/transactions.md, txn.Config):
		// 10,000 keys and 16 MiB written.
		MaxMultiCommands: 10000,
		MaxMultiBytes:    16 << 20,
		// A tenth of a second: what a consumer blocked on one node waits
		// at most for a push through another, at a try per client.
		BlockRecheck:      100 * time.Millisecond,
		MaxBlockedClients: 1000,
		// Under RequestTimeout's 5 s, so that a script that runs too long
		// gets the reply naming this limit, with time left to roll back.
		ScriptTimeLimit:  4 * time.Second,
		ScriptCacheBytes: 64 << 20,
	}
}

// Validate reports the first invalid field.
func (c Config) Validate() error {
	switch {
	case c.ListenAddr == "":
		return errors.New("resp: ListenAddr is empty")
	case c.RequestTimeout <= 0:
		return errors.New("resp: RequestTimeout must be > 0")
	case c.MaxScanCount <= 0:
		return errors.New("resp: MaxScanCount must be > 0")
	case c.MaxBatchKeys <= 0:
		return errors.New("resp: MaxBatchKeys must be > 0")
	case c.MaxConns < 0:
		return errors.New("resp: MaxConns must be >= 0")
	case c.MaxBulkLen <= 0 || c.MaxArgs <= 0 || c.MaxInlineLen <= 0:
		return errors.New("resp: MaxBulkLen, MaxArgs and MaxInlineLen must be > 0")
	case c.MaxCommandLen < c.MaxBulkLen:
		return fmt.Errorf("resp: MaxCommandLen (%d) must be at least MaxBulkLen (%d)", c.MaxCommandLen, c.MaxBulkLen)
	case c.MaxOutputBuffer <= 0:
		return errors.New("resp: MaxOutputBuffer must be > 0")
	case c.OutputTimeout <= 0:
		return errors.New("resp: OutputTimeout must be > 0")
	case c.CursorTTL <= 0:
		return errors.New("resp: CursorTTL must be > 0")
	case c.MaxCursors <= 0:
		return errors.New("resp: MaxCursors must be > 0")
	case c.MaxMultiCommands <= 0 || c.MaxMultiBytes <= 0:
		return errors.New("resp: MaxMultiCommands and MaxMultiBytes must be > 0")
	case c.CASAttempts <= 0:
		return errors.New("resp: CASAttempts must be > 0")
	case c.BlockRecheck <= 0:
		return fmt.Errorf("resp: BlockRecheck (--redis-block-recheck) %v must be > 0", c.BlockRecheck)
	case c.MaxBlockedClients <= 0:
		return fmt.Errorf("resp: MaxBlockedClients (--redis-max-blocked-clients) %d must be > 0", c.MaxBlockedClients)
	case c.ScriptTimeLimit <= 0:
		return fmt.Errorf("resp: ScriptTimeLimit (--redis-script-time-limit) %v must be > 0", c.ScriptTimeLimit)
	case c.ScriptCacheBytes <= 0:
		return fmt.Errorf("resp: ScriptCacheBytes %d must be > 0", c.ScriptCacheBytes)
	}
	return nil
}

// Server serves the Redis protocol (RESP2) over a KV.
type Server struct {
	cfg       Config
	kv        KV
	databases Databases
	ln        net.Listener
	ctx       context.Context
	cancel    context.CancelFunc
	start     time.Time

	nextID atomic.Int64
	conns  atomic.Int64
	// clients are the open connections by id, for CLIENT LIST and KILL
	// (clients.go).
	clients sync.Map

	curMu   sync.Mutex
	cursors map[uint64]*cursor
	nextCur uint64

	observe atomic.Pointer[Observer]
	// stats are INFO's commandstats and errorstats (stats.go).
	stats *serverStats

	// blocked are the clients blocked in BLPOP and friends (blocked.go).
	blocked *blockedClients

	// tunables are the encoding thresholds CONFIG SET was given (config.go).
	tunables tunableValues

	// scripts are the compiled scripts (scriptcache.go); running the
	// scripts running now, for SCRIPT KILL (scriptrun.go).
	scripts *scriptCache
	running runningScripts
	// luaStates are the idle Lua states scripts run in (scriptEnv), up
	// to maxIdleLuaStates.
	luaStates chan *scriptEnv

	// comb queues the transactions of commands writing one collection
	// (combine.go).
	comb combiner
	// zprobes: what reads of emptied sorted-set spans found (zspanClean).
	zprobes zprobes

	// disconnects counts closed connections by reason (output.go);
	// loggedSlow: the first slow client's disconnect was logged.
	disconnects map[string]*atomic.Uint64
	loggedSlow  atomic.Bool

	closeOnce sync.Once
}

// Observer is told of every known command served: its lower-case name, how
// long it took and whether it answered with an error. It must be cheap and
// safe for concurrent use.
type Observer func(command string, took time.Duration, failed bool)

// Databases maps SELECT n (n > 0) to the KV of database n, or an error
// whose text is the client's answer.
type Databases func(ctx context.Context, n int) (KV, error)

// SetDatabases installs the databases SELECT reaches beyond 0 (nil: only
// database 0), before Serve.
func (s *Server) SetDatabases(d Databases) { s.databases = d }

// SetObserver installs an Observer (nil removes it), at any time.
func (s *Server) SetObserver(o Observer) {
	if o == nil {
		s.observe.Store(nil)
		return
	}
	s.observe.Store(&o)
}

// connState is per-connection state.
type connState struct {
	id     int64
	authed bool
	user   string
	// client is what CLIENT LIST shows of the connection (clients.go).
	client clientInfo
	access Access
	// resp3: the connection speaks RESP3 (HELLO 3; resp3.go).
	resp3 bool
	// quit: the connection is closed (QUIT, or a client too slow to take
	// its replies); the rest of its pipeline is dropped.
	quit bool
	// in reads the connection's requests, out holds the replies to the
	// pipeline being served.
	in  reader
	out replyBuffer
	// kv is the database SELECT chose (database 0 at first: Server's KV),
	// db its number.
	kv KV
	db int
	// multi: inside MULTI; watch: what WATCH read (multi.go).
	multi *multiState
	watch *watchState
	// cmds makes its commands' contexts (cmdctx.go).
	cmds *connContext
	// arrived is when the pipeline being served was read (Arrival), paced
	// whether the client sent it after every earlier reply (Paced).
	arrived time.Time
	paced   bool
	// errors counts the error replies written to the connection, refusals
	// those of them that refused a command before it ran (TRYAGAIN, OOM):
	// a command failed, or was rejected, if they grew while it ran.
	errors, refusals uint64
}

// New listens on cfg.ListenAddr and returns a Server; call Serve to serve.
func New(cfg Config, kv KV) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if kv == nil {
		return nil, errors.New("resp: nil KV")
	}
	ln := cfg.Listener
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", cfg.ListenAddr); err != nil {
			return nil, fmt.Errorf("resp: listen: %w", err)
		}
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.timers == nil {
		cfg.timers = realTimers{}
	}
	if cfg.randN == nil {
		cfg.randN = rand.IntN
	}
	s := &Server{cfg: cfg, kv: kv, ln: ln, start: time.Now(), blocked: newBlockedClients(cfg.MaxBlockedClients), stats: newServerStats(),
		cursors: map[uint64]*cursor{}, disconnects: map[string]*atomic.Uint64{}, scripts: newScriptCache(cfg.ScriptCacheBytes),
		luaStates: make(chan *scriptEnv, maxIdleLuaStates)}
	for _, r := range DisconnectReasons {
		s.disconnects[r] = new(atomic.Uint64)
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	return s, nil
}

// Addr is the address the server listens on.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Serve serves connections until Close; it returns nil after Close. When
// it returns, every connection is closed.
func (s *Server) Serve() error {
	ln := s.ln
	if s.cfg.TLS != nil {
		ln = tls.NewListener(ln, s.cfg.TLS)
	}
	defer s.clients.Range(func(_, v any) bool {
		_ = v.(*connState).in.nc.Close()
		return true
	})
	var pause time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			if s.ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			// Out of descriptors, say: try again, no faster than
			// net/http does.
			pause = min(max(2*pause, 5*time.Millisecond), time.Second)
			time.Sleep(pause)
			continue
		}
		pause = 0
		if st := s.accept(nc); st != nil {
			go s.serveConn(st)
		}
	}
}

// Close stops listening and cancels commands in flight; Serve then closes
// every connection and returns nil. Close does not wait for Serve.
func (s *Server) Close() error {
	var err error
	s.closeOnce.Do(func() {
		s.cancel()
		err = s.ln.Close()
		if errors.Is(err, net.ErrClosed) {
			err = nil
		}
	})
	return err
}

// accept admits a connection and returns its state, or refuses it (nil)
// beyond MaxConns.
func (s *Server) accept(nc net.Conn) *connState {
	if n := s.conns.Add(1); s.cfg.MaxConns > 0 && n > int64(s.cfg.MaxConns) {
		s.conns.Add(-1)
		s.disconnected(ReasonMaxConns)
		// Not in the accept loop: a TLS connection's write waits for
		// its handshake, which reads, so both directions get the
		// deadline (a client that never sends its hello would hold the
		// connection and this goroutine for good).
		go func() {
			_ = nc.SetDeadline(time.Now().Add(drainFor))
			_, _ = nc.Write(appendError(nil, fmt.Sprintf("ERR max number of clients reached (the maximum is %d connections)", s.cfg.MaxConns)))
			_ = nc.Close()
		}()
		return nil
	}
	st := &connState{id: s.nextID.Add(1), user: "default", kv: s.kv, cmds: newConnContext(s.ctx)}
	st.in = reader{nc: nc, scan: frameScanner{lim: frameLimits{bulk: s.cfg.MaxBulkLen, args: s.cfg.MaxArgs,
		inline: s.cfg.MaxInlineLen, command: s.cfg.MaxCommandLen}}, now: s.cfg.Now, counted: s.disconnects[ReasonRequestLimit]}
	_, isTLS := nc.(*tls.Conn)
	st.in.raw, st.in.paced, st.in.drain = rawConn(nc), true, !isTLS
	st.out = replyBuffer{nc: nc, addr: nc.RemoteAddr().String(), s: s, st: st}
	if s.cfg.Auth == nil {
		st.authed, st.access = true, AccessAdmin
	}
	st.client.open(&st.out, s.cfg.Now())
	s.clients.Store(st.id, st)
	return st
}

// serveConn is a connection's loop: it reads every whole command the
// client has sent (reader.go), serves them in order (pipeline.go) and
// writes their replies (output.go), until the client closes, quits or
// sends a request that is refused.
func (s *Server) serveConn(st *connState) {
	defer func() {
		st.cmds.close()
		s.conns.Add(-1)
		s.clients.Delete(st.id)
		_ = st.in.nc.Close()
	}()
	for !st.quit {
		n, err := st.in.next()
		if err != nil {
			if st.in.refused != nil {
				st.in.refuse()
			}
			return
		}
		// The reader stamped when these commands were read (by the
		// configured clock, as CLIENT LIST's idle is computed): no
		// second clock read per pipeline.
		st.arrived, st.paced = st.in.readAt, st.in.paced
		st.client.active.Store(st.arrived.UnixNano())
		s.servePipeline(&st.out, st, n)
		// Bytes the client has sent before its last replies are written
		// were sent ahead of them (the client cannot have read replies
		// not yet written), so the look comes before the write. It
		// matters only while the node may shed by delay, and costs a
		// system call.
		st.in.paced = s.cfg.Shedding == nil || !s.cfg.Shedding() || !st.in.sentAhead()
		st.out.done()
	}
}

// rawConn is nc's socket, or the socket beneath a TLS connection; nil
// where there is none.
func rawConn(nc net.Conn) syscall.RawConn {
	if tc, ok := nc.(*tls.Conn); ok {
		nc = tc.NetConn()
	}
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return nil
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	return raw
}

func errArity(name string) string {
	return fmt.Sprintf("ERR wrong number of arguments for '%s' command", name)
}

func trunc(b []byte) string {
	if len(b) > 128 {
		b = b[:128]
	}
	return string(b)
}

func argsPreview(args [][]byte) string {
	var sb strings.Builder
	for _, a := range args {
		if sb.Len() > 128 {
			break
		}
		fmt.Fprintf(&sb, "'%s' ", trunc(a))
	}
	return sb.String()
}

// replyErr writes the Redis error for a KV error.
func replyErr(c replyConn, err error) {
	c.WriteError(errText(err))
}

// errText renders a KV error as one sentence: the sentinels get fixed
// texts, never the chain of causes behind them.
func errText(err error) string {
	switch {
	case errors.Is(err, ErrOverloaded):
		return overloadedText(err)
	case errors.Is(err, errContention):
		return "ERR " + errContention.Error()
	case errors.Is(err, ErrAmbiguous):
		return "ERR " + ErrAmbiguous.Error()
	case errors.Is(err, ErrUnavailable):
		return "ERR " + ErrUnavailable.Error()
	case errors.Is(err, context.DeadlineExceeded):
		return "ERR timeout: the command did not complete in time"
	}
	return "ERR " + oneLine(err.Error())
}

// errContention: a command's compare-and-set rounds kept meeting other
// clients' writes of its key and it gave up, writing nothing. It is not
// an overload refusal (the node had room), so it is no TRYAGAIN.
var errContention = errors.New("too much contention on the key, retry")

// overloadedText is every overload refusal's one reply: TRYAGAIN (a
// prefix Redis client libraries retry) with the node's hint, or
// DefaultRetryAfter where the refusal carries none (a replica's full
// proposal queue, a client that ran out of attempts).
func overloadedText(err error) string {
	after := DefaultRetryAfter
	if oe := (*OverloadedError)(nil); errors.As(err, &oe) && oe.RetryAfter > 0 {
		after = oe.RetryAfter
	}
	return fmt.Sprintf("TRYAGAIN overloaded, retry after %d ms", max(after.Milliseconds(), 1))
}

// oneLine keeps an error message on one line, as RESP requires.
func oneLine(s string) string {
	return strings.NewReplacer("\r", " ", "\n", " ").Replace(s)
}
