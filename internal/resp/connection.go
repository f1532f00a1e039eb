package resp

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"
)

func cmdPing(x *call) {
	switch len(x.args) {
	case 1:
		x.c.WriteString("PONG")
	case 2:
		x.c.WriteBulk(x.args[1])
	default:
		x.c.WriteError(errArity(x.name))
	}
}

func cmdEcho(x *call) { x.c.WriteBulk(x.args[1]) }

func cmdQuit(x *call) {
	x.c.WriteString("OK")
	x.st.quit = true
	x.c.Close()
}

// cmdSelect: SELECT n switches the connection to database n: 0 is the
// Server's KV, the others what Databases maps them to.
func cmdSelect(x *call) {
	n, err := strconv.Atoi(string(x.args[1]))
	switch {
	case err != nil:
		x.c.WriteError(errNotInt)
	case n == 0:
		x.st.kv, x.st.db = x.s.kv, 0
		x.c.WriteString("OK")
	case n < 0 || x.s.databases == nil:
		x.c.WriteError("ERR DB index is out of range (this node serves only database 0)")
	default:
		kv, err := x.s.databases(x.ctx, n)
		if err != nil {
			x.c.WriteError("ERR " + err.Error())
			return
		}
		x.st.kv, x.st.db = kv, n
		x.c.WriteString("OK")
	}
}

// infoSections are INFO's sections in Redis's order; the default ones
// are those INFO alone (or "default") gives, the others only when named or
// with "all" or "everything".
var infoSections = []struct {
	name  string
	isDef bool
	text  func(x *call) string
}{
	{"server", true, infoServer},
	{"clients", true, func(x *call) string {
		return fmt.Sprintf("# Clients\r\nconnected_clients:%d\r\nblocked_clients:%d\r\n", x.s.conns.Load(), x.s.blocked.count())
	}},
	{"memory", true, func(x *call) string {
		// Memory has the script cache only (scriptcache.go: sources
		// and an estimate of their compiled form), and no functions.
		scripts, scriptBytes := x.s.scripts.stats()
		return fmt.Sprintf("# Memory\r\nused_memory_scripts_eval:%d\r\nnumber_of_cached_scripts:%d\r\nnumber_of_functions:0\r\n"+
			"number_of_libraries:0\r\nused_memory_scripts:%[1]d\r\n", scriptBytes, scripts)
	}},
	{"stats", true, func(x *call) string {
		// TideKV keeps no MIGRATE connections.
		return fmt.Sprintf("# Stats\r\nmigrate_cached_sockets:0\r\ntotal_error_replies:%d\r\n", x.s.stats.errorTotal())
	}},
	{"commandstats", false, func(x *call) string { return x.s.stats.commandSection() }},
	{"errorstats", false, func(x *call) string { return x.s.stats.errorSection() }},
	{"keyspace", true, func(*call) string { return "# Keyspace\r\n" }},
}

func infoServer(x *call) string {
	port := 0
	if a, ok := x.s.Addr().(*net.TCPAddr); ok {
		port = a.Port
	}
	up := time.Since(x.s.start)
	return fmt.Sprintf("# Server\r\nredis_version:7.0.0-tidekv\r\nredis_mode:standalone\r\n"+
		"tcp_port:%d\r\nuptime_in_seconds:%d\r\nuptime_in_days:%d\r\n", port, int64(up.Seconds()), int64(up.Hours()/24))
}

// cmdInfo: INFO [section ...], the sections named (in any case), or the
// default ones, joined by an empty line as Redis does.
func cmdInfo(x *call) {
	want := map[string]bool{}
	for _, a := range x.args[1:] {
		want[strings.ToLower(string(a))] = true
	}
	all := want["all"] || want["everything"]
	def := len(want) == 0 || want["default"] || all
	var parts []string
	for _, sec := range infoSections {
		if want[sec.name] || (def && sec.isDef) || (all && !sec.isDef) {
			parts = append(parts, sec.text(x))
		}
	}
	x.writeVerbatim(strings.Join(parts, "\r\n"))
}

// cmdHello: HELLO [2|3] [AUTH user pass] [SETNAME name], as Redis 7.0:
// it switches the connection to the protocol asked (resp3.go) and answers
// with the server's properties in it; another version gets NOPROTO.
func cmdHello(x *call) {
	args := x.args[1:]
	resp3 := x.st.resp3
	if len(args) > 0 {
		v, err := strconv.Atoi(string(args[0]))
		switch {
		case err != nil:
			x.c.WriteError("ERR Protocol version is not an integer or out of range")
			return
		case v != 2 && v != 3:
			x.c.WriteError("NOPROTO unsupported protocol version")
			return
		}
		resp3 = v == 3
		args = args[1:]
	}
	for len(args) > 0 {
		opt := strings.ToLower(string(args[0]))
		switch {
		case opt == "auth" && len(args) >= 3:
			if !x.checkAuth(args[1], args[2]) {
				return
			}
			args = args[3:]
		case opt == "setname" && len(args) >= 2:
			x.st.client.setName(string(args[1]))
			args = args[2:]
		default:
			x.c.WriteError(fmt.Sprintf("ERR Syntax error in HELLO option '%s'", trunc(args[0])))
			return
		}
	}
	if !x.st.authed {
		x.c.WriteError("NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time")
		return
	}
	x.st.resp3 = resp3
	x.st.client.resp3.Store(resp3)
	x.writeMap(7)
	x.c.WriteBulkString("server")
	x.c.WriteBulkString("redis")
	x.c.WriteBulkString("version")
	x.c.WriteBulkString("7.0.0-tidekv")
	x.c.WriteBulkString("proto")
	x.c.WriteInt(2 + b2i(resp3))
	x.c.WriteBulkString("id")
	x.c.WriteInt64(x.st.id)
	x.c.WriteBulkString("mode")
	x.c.WriteBulkString("standalone")
	x.c.WriteBulkString("role")
	x.c.WriteBulkString("master")
	x.c.WriteBulkString("modules")
	x.c.WriteArray(0)
}

// checkAuth checks a user and password, writes the error if they are
// wrong, and reports whether they were right.
func (x *call) checkAuth(user, pass []byte) bool {
	if x.s.cfg.Auth == nil {
		x.c.WriteError("ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?")
		return false
	}
	return x.authenticate(user, pass)
}

func cmdAuth(x *call) {
	var ok bool
	switch len(x.args) {
	case 2:
		ok = x.checkAuth(nil, x.args[1])
	case 3:
		ok = x.checkAuth(x.args[1], x.args[2])
	default:
		x.c.WriteError(errSyntax)
		return
	}
	if ok {
		x.c.WriteString("OK")
	}
}

// cmdTime: TIME, the serving node's clock (Config.Now) as Unix seconds
// and microseconds.
func cmdTime(x *call) {
	now := x.s.cfg.Now()
	x.c.WriteArray(2)
	x.c.WriteBulkString(strconv.FormatInt(now.Unix(), 10))
	x.c.WriteBulkString(strconv.Itoa(now.Nanosecond() / 1000))
}
