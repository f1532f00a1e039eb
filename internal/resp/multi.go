package resp

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// MULTI / EXEC / DISCARD / WATCH / UNWATCH (docs/transactions.md, "Redis
// MULTI / EXEC / WATCH"). After MULTI a connection's commands are checked
// and queued (servePipeline hands them to queue); EXEC runs the queue as
// one KV.Txn, each command through its usual code over a txView, so it
// reads the transaction's earlier writes. WATCH remembers each key's
// version (Result.Version, its timestamp) and what it held (a digest of
// its value, or its absence); EXEC reads the keys again inside the
// transaction and applies nothing if one changed.

// multiState is a connection's open MULTI.
type multiState struct {
	queue []*prepared
	bytes int // the queued commands' argument bytes
	// refused: a command was refused while queuing; EXEC answers
	// EXECABORT.
	refused bool
	// overflow: the queue went past MaxMultiCommands or MaxMultiBytes and
	// was dropped. The connection stays in MULTI, answering every command
	// with the error until EXEC (EXECABORT) or DISCARD: leaving MULTI
	// would run the rest of a pipelined transaction one command at a time.
	overflow bool
}

// watchState is what WATCH read: in which database, and each key's state.
type watchState struct {
	db    int
	keys  []watchedKey
	bytes int
}

// watchedKey is a key as WATCH found it. The version tells a key written
// again with the same value; the digest (not the value, so that watching
// large values holds little) serves where the version is unknown (zero).
type watchedKey struct {
	key     []byte // encoded
	found   bool
	version Version
	sum     [sha256.Size]byte
}

func (w watchedKey) same(r Result) bool {
	return w.found == r.Found && w.version == r.Version && (!r.Found || w.sum == sha256.Sum256(r.Value))
}

const errExecAbort = "EXECABORT Transaction discarded because of previous errors."

// notInMulti are the commands EXEC cannot run, all others it can (the
// collections' included: their scans and their own transactions are
// EXEC's, txview.go). These change or describe the connection or the
// server, or, FLUSHDB and FLUSHALL, would make every key of the database
// one transaction; TKV.RANGE reads outside Redis's types.
var notInMulti = []string{"select", "auth", "hello", "client", "info", "config", "command", "flushdb", "flushall", "tkv.range"}

// notInMultiList names notInMulti's commands, for refusals.
var notInMultiList = strings.ToUpper(strings.Join(notInMulti, ", "))

// runsInMulti reports whether p runs when it arrives inside MULTI rather
// than being queued, as in Redis.
func (p *prepared) runsInMulti() bool {
	switch p.name {
	case "exec", "discard", "multi", "watch", "quit":
		return p.errMsg == ""
	}
	return false
}

// queue answers a command sent inside MULTI: QUEUED, or why it was
// refused (which aborts the transaction).
func (s *Server) queue(c replyConn, st *connState, p *prepared) {
	m := st.multi
	if m.overflow {
		c.WriteError(s.overflowText())
		return
	}
	if msg := queueCheck(p); msg != "" {
		m.refused = true
		s.stats.refused(p.stat)
		c.WriteError(msg)
		return
	}
	size := 0
	for _, a := range p.args {
		size += len(a)
	}
	if len(m.queue) >= s.cfg.MaxMultiCommands || m.bytes+size > s.cfg.MaxMultiBytes {
		m.queue, m.bytes, m.overflow = nil, 0, true
		c.WriteError(s.overflowText())
		return
	}
	m.queue = append(m.queue, p)
	m.bytes += size
	c.WriteString("QUEUED")
}

func (s *Server) overflowText() string {
	return fmt.Sprintf("ERR transaction discarded: more than %d commands or %d bytes queued; EXEC will answer EXECABORT",
		s.cfg.MaxMultiCommands, s.cfg.MaxMultiBytes)
}

// queueCheck is the error reply of a command that cannot be queued: the
// prepare's (unknown, arity, NOPERM), a command EXEC cannot run, or bad
// syntax of SET and MSET, whose checks are cheap and static.
func queueCheck(p *prepared) string {
	switch {
	case p.errMsg != "":
		return p.errMsg
	case slices.Contains(notInMulti, p.name):
		return fmt.Sprintf("ERR %s inside MULTI is not supported by TideKV; EXEC runs every command but %s", strings.ToUpper(p.name), notInMultiList)
	case (p.name == "mset" || p.name == "msetnx") && len(p.args)%2 != 1:
		return errArity(p.name)
	case p.name == "xinfo":
		return xinfoSubcommands.arityError(p.args)
	case p.name == "xgroup":
		return xgroupSubcommands.arityError(p.args)
	case p.name == "set":
		o, rerr := parseSetOptions(p.args[3:], false)
		if rerr == "" {
			_, rerr = o.expiry("set")
		}
		return rerr
	}
	return ""
}

func cmdMulti(x *call) {
	if x.st.multi != nil {
		x.c.WriteError("ERR MULTI calls can not be nested")
		return
	}
	x.st.multi = &multiState{}
	x.c.WriteString("OK")
}

func cmdDiscard(x *call) {
	if x.st.multi == nil {
		x.c.WriteError("ERR DISCARD without MULTI")
		return
	}
	x.st.multi, x.st.watch = nil, nil
	x.c.WriteString("OK")
}

func cmdUnwatch(x *call) {
	x.st.watch = nil
	x.c.WriteString("OK")
}

// cmdWatch reads the keys readBatch at a time and remembers what they
// held. The keys watched on a connection are bounded like a queue.
func cmdWatch(x *call) {
	if x.st.multi != nil {
		x.c.WriteError("ERR WATCH inside MULTI is not allowed")
		return
	}
	w := x.st.watch
	if w == nil || w.db != x.st.db {
		w = &watchState{db: x.st.db}
	}
	var failed error
	x.readArgs(func(done int, rs []Result, err error) bool {
		if err != nil {
			failed = err
			return false
		}
		for i, r := range rs {
			k := encKey(x.args[1+done+i])
			w.keys = append(w.keys, watchedKey{key: k, found: r.Found, version: r.Version, sum: sha256.Sum256(r.Value)})
			w.bytes += len(k) + sha256.Size
		}
		return true
	})
	switch {
	case failed != nil:
		replyErr(x.c, failed)
	case len(w.keys) > x.s.cfg.MaxMultiCommands || w.bytes > x.s.cfg.MaxMultiBytes:
		x.st.watch = nil
		x.c.WriteError(fmt.Sprintf("ERR too many watched keys (at most %d keys of %d bytes in all); the watches were cleared", x.s.cfg.MaxMultiCommands, x.s.cfg.MaxMultiBytes))
	default:
		x.st.watch = w
		x.c.WriteString("OK")
	}
}

// errWatched: a watched key changed; EXEC answers the null array.
var errWatched = errors.New("a watched key changed")

// cmdExec runs the queue as one transaction. Replies are collected per
// attempt (a conflict runs the queue again) and written once it commits.
func cmdExec(x *call) {
	m, w := x.st.multi, x.st.watch
	if m == nil {
		x.c.WriteError("ERR EXEC without MULTI")
		return
	}
	x.st.multi, x.st.watch = nil, nil
	if m.refused || m.overflow {
		x.c.WriteError(errExecAbort)
		return
	}
	if w != nil && w.db != x.st.db {
		// The watches were read in another database, which this
		// transaction cannot read: count them as changed.
		x.c.WriteArray(-1)
		return
	}
	var out *txnReplies
	var view *txView
	// took and failed are each queued command's, for INFO's statistics.
	took, outcomes := make([]time.Duration, len(m.queue)), make([]outcome, len(m.queue))
	err := x.kv.Txn(x.ctx, func(tx TxnKV) error {
		view = &txView{tx: tx, now: x.s.cfg.Now}
		if err := w.check(x, view); err != nil {
			return err
		}
		out = &txnReplies{replyConn: x.c, limit: x.s.cfg.MaxOutputBuffer, resp3: x.st.resp3}
		for i, p := range m.queue {
			errs, start := len(out.errs), time.Now()
			p.spec.fn(&call{s: x.s, c: out, st: x.st, kv: view, ctx: x.ctx, name: p.name, args: p.args})
			took[i] = time.Since(start)
			if len(out.errs) > errs {
				outcomes[i] = failed
			}
			if view.err != nil {
				return view.err
			}
			if out.over {
				return fmt.Errorf("%w: EXEC's replies exceed %d bytes, the output buffer limit; nothing was applied", ErrInvalidArgument, out.limit)
			}
		}
		return nil
	})
	switch {
	case errors.Is(err, errWatched):
		x.c.WriteArray(-1)
	case err != nil:
		replyErr(x.c, err)
	default:
		for _, k := range view.ready {
			x.awaitServed(x.s.blocked.ready(blockKey{x.st.db, string(k)}))
		}
		// As in Redis, the queued commands are counted as calls of their
		// own, and their errors as error replies, while EXEC succeeded.
		for i, p := range m.queue {
			x.s.stats.called(p.stat, took[i], outcomes[i])
		}
		for _, msg := range out.errs {
			x.s.stats.errorReplied(msg)
		}
		x.c.WriteArray(len(m.queue))
		x.c.WriteRaw(out.b)
	}
}

// check reads the watched keys inside the transaction: errWatched if one
// changed. Being a read of the transaction, a change after it and before
// the commit is caught by the commit's refresh.
func (w *watchState) check(x *call, view *txView) error {
	if w == nil {
		return nil
	}
	for _, k := range w.keys {
		r, err := view.read(x.ctx, k.key)
		if err != nil {
			return err
		}
		if !k.same(r) {
			return errWatched
		}
	}
	return nil
}

// txnReplies collects the replies of one attempt of EXEC's queue, up to
// limit bytes (over: the transaction is given up, so that an EXEC holds
// no more than a pipeline's output buffer).
type txnReplies struct {
	replyConn
	b     []byte
	limit int
	over  bool
	resp3 bool // the connection's protocol
	// errs are the error replies, counted once EXEC commits (stats.go).
	errs []string
}

func (r *txnReplies) add(b []byte) {
	r.b = b
	r.over = r.over || len(b) > r.limit
}

func (r *txnReplies) WriteString(str string)      { r.add(appendString(r.b, str)) }
func (r *txnReplies) WriteBulk(bulk []byte)       { r.add(appendBulk(r.b, bulk)) }
func (r *txnReplies) WriteBulkString(bulk string) { r.add(appendBulkString(r.b, bulk)) }
func (r *txnReplies) WriteInt(num int)            { r.add(appendInt(r.b, ':', int64(num))) }
func (r *txnReplies) WriteInt64(num int64)        { r.add(appendInt(r.b, ':', num)) }
func (r *txnReplies) WriteUint64(num uint64)      { r.add(appendUint(r.b, num)) }
func (r *txnReplies) WriteError(msg string) {
	r.errs = append(r.errs, msg)
	r.add(appendError(r.b, msg))
}
func (r *txnReplies) WriteArray(count int) { r.add(appendArray(r.b, count, r.resp3)) }
func (r *txnReplies) WriteNull()           { r.add(appendNull(r.b, r.resp3)) }
func (r *txnReplies) WriteRaw(data []byte) { r.add(append(r.b, data...)) }
