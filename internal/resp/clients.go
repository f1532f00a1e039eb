package resp

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// CLIENT and CONFIG: what client libraries ask a server about itself and
// its connections. Server.clients holds every open connection, so that
// CLIENT LIST and CLIENT KILL reach the others'.

// clientInfo is what CLIENT LIST shows of a connection. Other connections
// read it (CLIENT LIST, KILL) while its own goroutine serves it, hence
// the lock and the atomic.
type clientInfo struct {
	conn    replyConn
	created time.Time
	// active is when the connection last sent commands (Unix nanoseconds).
	active atomic.Int64
	// resp3: the connection speaks RESP3 (connState.resp3, for others
	// to read).
	resp3 atomic.Bool
	mu    sync.Mutex
	name  string
}

func (ci *clientInfo) open(c replyConn, now time.Time) {
	ci.conn, ci.created = c, now
	ci.active.Store(now.UnixNano())
}

func (ci *clientInfo) setName(n string) {
	ci.mu.Lock()
	ci.name = n
	ci.mu.Unlock()
}

func (ci *clientInfo) getName() string {
	ci.mu.Lock()
	defer ci.mu.Unlock()
	return ci.name
}

// line is the connection's line of CLIENT LIST, in Redis's field order
// with the fields TideKV knows.
func (st *connState) line(now time.Time) string {
	ci := &st.client
	laddr := ""
	if nc := ci.conn.NetConn(); nc != nil {
		laddr = nc.LocalAddr().String()
	}
	multi := -1
	if st.multi != nil {
		multi = len(st.multi.queue)
	}
	return fmt.Sprintf("id=%d addr=%s laddr=%s name=%s age=%d idle=%d flags=N db=%d sub=0 psub=0 multi=%d user=%s resp=%d",
		st.id, ci.conn.RemoteAddr(), laddr, ci.getName(), int64(now.Sub(ci.created).Seconds()),
		int64(now.Sub(time.Unix(0, ci.active.Load())).Seconds()), st.db, multi, st.user, 2+b2i(ci.resp3.Load()))
}

// eachClient calls fn for each open connection, in id order.
func (s *Server) eachClient(fn func(*connState)) {
	var all []*connState
	s.clients.Range(func(_, v any) bool {
		all = append(all, v.(*connState))
		return true
	})
	slices.SortFunc(all, func(a, b *connState) int { return int(a.id - b.id) })
	for _, st := range all {
		fn(st)
	}
}

// cmdClient: CLIENT SETNAME, GETNAME, ID, SETINFO, INFO, LIST [TYPE
// normal] [ID id ...], KILL addr and KILL with filters (ID, ADDR, LADDR,
// USER, SKIPME), UNBLOCK id [TIMEOUT|ERROR], as Redis answers them.
func cmdClient(x *call) {
	sub := strings.ToLower(string(x.args[1]))
	n := len(x.args)
	arity := map[string]func(int) bool{
		"setname": func(n int) bool { return n == 3 }, "getname": func(n int) bool { return n == 2 },
		"id": func(n int) bool { return n == 2 }, "setinfo": func(n int) bool { return n == 4 },
		"info": func(n int) bool { return n == 2 }, "list": func(n int) bool { return n >= 2 },
		"kill": func(n int) bool { return n >= 3 }, "unblock": func(n int) bool { return n == 3 || n == 4 },
	}
	ok, known := arity[sub]
	switch {
	case !known:
		x.c.WriteError(fmt.Sprintf("ERR unknown subcommand '%s'. Try CLIENT HELP.", trunc(x.args[1])))
	case !ok(n):
		x.c.WriteError(fmt.Sprintf("ERR wrong number of arguments for 'client|%s' command", sub))
	case sub == "setname":
		if bytes.ContainsAny(x.args[2], " \n\r") {
			x.c.WriteError("ERR Client names cannot contain spaces, newlines or special characters.")
			return
		}
		x.st.client.setName(string(x.args[2]))
		x.c.WriteString("OK")
	case sub == "getname":
		if name := x.st.client.getName(); name == "" {
			x.c.WriteNull()
		} else {
			x.c.WriteBulkString(name)
		}
	case sub == "id":
		x.c.WriteInt64(x.st.id)
	case sub == "setinfo":
		x.c.WriteString("OK")
	case sub == "info":
		x.writeVerbatim(x.st.line(x.s.cfg.Now()) + "\n")
	case sub == "list":
		clientList(x)
	case sub == "unblock":
		clientUnblock(x)
	default:
		clientKill(x)
	}
}

// clientUnblock: CLIENT UNBLOCK id [TIMEOUT|ERROR], 1 if the client was
// blocked (blocked.go) on this node, else 0.
func clientUnblock(x *call) {
	asError := false
	if len(x.args) == 4 {
		switch strings.ToLower(string(x.args[3])) {
		case "timeout":
		case "error":
			asError = true
		default:
			x.c.WriteError("ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR")
			return
		}
	}
	id, err := strconv.ParseInt(string(x.args[2]), 10, 64)
	if err != nil {
		x.c.WriteError(errNotInt)
		return
	}
	x.c.WriteInt(b2i(x.s.blocked.unblock(id, asError)))
}

// clientList: CLIENT LIST [TYPE normal|master|replica|pubsub] [ID id ...].
// Every connection is of TYPE normal.
func clientList(x *call) {
	var ids map[int64]bool
	normal := true
	for rest := x.args[2:]; len(rest) > 0; {
		switch opt := strings.ToLower(string(rest[0])); {
		case opt == "type" && len(rest) >= 2:
			switch t := strings.ToLower(string(rest[1])); t {
			case "normal", "master", "replica", "pubsub":
				normal = t == "normal"
			default:
				x.c.WriteError(fmt.Sprintf("ERR Unknown client type '%s'", trunc(rest[1])))
				return
			}
			rest = rest[2:]
		case opt == "id" && len(rest) >= 2:
			ids = map[int64]bool{}
			for _, a := range rest[1:] {
				id, err := strconv.ParseInt(string(a), 10, 64)
				if err != nil || id <= 0 {
					x.c.WriteError("ERR Invalid client ID")
					return
				}
				ids[id] = true
			}
			rest = nil
		default:
			x.c.WriteError(errSyntax)
			return
		}
	}
	var sb strings.Builder
	now := x.s.cfg.Now()
	x.s.eachClient(func(st *connState) {
		if normal && (ids == nil || ids[st.id]) {
			sb.WriteString(st.line(now))
			sb.WriteByte('\n')
		}
	})
	x.writeVerbatim(sb.String())
}

// clientKill: CLIENT KILL addr (OK, or an error if no connection has it)
// or CLIENT KILL <filter value> ... (how many it closed; SKIPME yes, the
// default, spares the caller). A connection is closed at its socket, so
// its own goroutine sees the end and cleans up; the caller's own is
// closed after its reply.
func clientKill(x *call) {
	var id int64
	var addr, laddr, user string
	skipme, old := true, len(x.args) == 3
	if old {
		addr, skipme = string(x.args[2]), false
	} else {
		if len(x.args)%2 != 0 {
			x.c.WriteError(errSyntax)
			return
		}
		for i := 2; i < len(x.args); i += 2 {
			v := string(x.args[i+1])
			switch strings.ToLower(string(x.args[i])) {
			case "id":
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil || n <= 0 {
					x.c.WriteError("ERR client-id should be greater than 0")
					return
				}
				id = n
			case "addr":
				addr = v
			case "laddr":
				laddr = v
			case "user":
				user = v
			case "skipme":
				switch strings.ToLower(v) {
				case "yes", "no":
					skipme = strings.EqualFold(v, "yes")
				default:
					x.c.WriteError(errSyntax)
					return
				}
			case "type", "maxage":
				// Every connection is normal and none is killed by age here.
			default:
				x.c.WriteError(errSyntax)
				return
			}
		}
	}
	killed, self := 0, false
	x.s.eachClient(func(st *connState) {
		ci := &st.client
		switch {
		case id != 0 && st.id != id,
			addr != "" && ci.conn.RemoteAddr() != addr,
			laddr != "" && (ci.conn.NetConn() == nil || ci.conn.NetConn().LocalAddr().String() != laddr),
			user != "" && st.user != user,
			skipme && st == x.st:
			return
		}
		killed++
		if st == x.st {
			self = true
			return
		}
		if nc := ci.conn.NetConn(); nc != nil {
			_ = nc.Close()
		}
	})
	switch {
	case old && killed == 0:
		x.c.WriteError("ERR No such client")
		return
	case old:
		x.c.WriteString("OK")
	default:
		x.c.WriteInt(killed)
	}
	if self {
		x.st.quit = true
		x.c.Close()
	}
}

// cmdConfig answers CONFIG GET for the parameters client libraries and
// tools read at start (what they tell them holds for TideKV: no
// persistence settings to tune, no memory limit, no idle timeout) and the
// encoding thresholds CONFIG SET takes (config.go), each pair in name
// order; other names match nothing, as in Redis. CONFIG RESETSTAT zeroes
// INFO's command and error statistics (stats.go).
func cmdConfig(x *call) {
	switch sub := strings.ToLower(string(x.args[1])); {
	case sub == "set":
		cmdConfigSet(x)
		return
	case sub == "resetstat" && len(x.args) == 2:
		x.s.stats.reset()
		x.c.WriteString("OK")
		return
	case sub == "resetstat":
		x.c.WriteError(errArity("config|resetstat"))
		return
	case sub != "get":
		x.c.WriteError(fmt.Sprintf("ERR CONFIG %s is not supported by TideKV", trunc(x.args[1])))
		return
	}
	if len(x.args) < 3 {
		x.c.WriteError(errArity("config|get"))
		return
	}
	known := x.configValues()
	names := make([]string, 0, len(known))
	for k := range known {
		names = append(names, k)
	}
	slices.Sort(names)
	matched := map[string]bool{}
	for _, a := range x.args[2:] {
		p := []byte(strings.ToLower(string(a)))
		for _, k := range names {
			if globMatch(p, []byte(k)) {
				matched[k] = true
			}
		}
	}
	x.writeMap(len(matched))
	for _, k := range names {
		if matched[k] {
			x.c.WriteBulkString(k)
			x.c.WriteBulkString(known[k])
		}
	}
}
