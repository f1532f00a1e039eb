package resp

import (
	"bytes"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"

	lua "github.com/yuin/gopher-lua"
	"github.com/yuin/gopher-lua/parse"
)

// The Lua side of scripting (scripting.go runs the scripts): compiling,
// the sandbox a script runs in, its redis.* functions, and the
// conversions between Lua values and replies, as Redis 7.0 makes them.
//
// Each attempt of a script runs in a Lua state taken from a pool and
// cleared when put back (scriptEnv): nothing a script does to its globals
// or libraries can reach another script, or the same script's next
// attempt. The state has
// Lua's base, table, string and math libraries, without what reaches
// outside the state or the time limit (dofile, load, loadfile,
// loadstring, require, module, print, getfenv, setfenv, newproxy,
// collectgarbage: a runtime.GC a call; no io, os, debug, package,
// coroutine (a coroutine's instructions would not be counted: scriptRun),
// channel), and with Redis's redis table, KEYS, ARGV, and its cjson and
// bit libraries (lualibs.go) and cmsgpack (luamsgpack.go).

// luaSource is a script's chunk name: errors say "user_script:3: ...",
// and the reply "on @user_script:3.", as Redis's.
const luaSource = "user_script"

// sha1hex is the lower-case hex SHA-1 of b (the name of a script).
func sha1hex(b []byte) string {
	sum := sha1.Sum(b)
	return hex.EncodeToString(sum[:])
}

// compileScript compiles body, or answers why not in Redis's words.
func compileScript(body []byte) (*script, string) {
	s := &script{sha: sha1hex(body)}
	src, why := s.shebang(body)
	if why != "" {
		return nil, why
	}
	chunk, err := parse.Parse(bytes.NewReader(src), luaSource)
	if err == nil {
		s.proto, err = lua.Compile(chunk, luaSource)
	}
	if err != nil {
		return nil, "ERR Error compiling script (new function): " + syntaxError(err)
	}
	s.size = len(body) + protoSize(s.proto)
	return s, ""
}

// syntaxError words a compile error as Lua does ("user_script:1: ... near
// 'x'"); the messages themselves are gopher-lua's.
func syntaxError(err error) string {
	var pe *parse.Error
	if !errors.As(err, &pe) {
		return oneLine(err.Error())
	}
	if pe.Pos.Line == parse.EOF {
		return fmt.Sprintf("%s: %s near '<eof>'", luaSource, pe.Message)
	}
	return fmt.Sprintf("%s:%d: %s near '%s'", luaSource, pe.Pos.Line, pe.Message, oneLine(pe.Token))
}

// shebang reads Redis 7's first line "#!lua [flags=f1,f2]" and returns
// the source to compile: the body with that line emptied (its newline
// kept, so that lines are numbered as written).
func (s *script) shebang(body []byte) ([]byte, string) {
	if !bytes.HasPrefix(body, []byte("#!")) {
		return body, ""
	}
	end := bytes.IndexByte(body, '\n')
	if end < 0 {
		return nil, "ERR Invalid script shebang"
	}
	parts := strings.Fields(string(body[:end]))
	if parts[0] != "#!lua" {
		return nil, "ERR Unexpected engine in script shebang: " + parts[0]
	}
	s.shebanged = true
	for _, p := range parts[1:] {
		flags, ok := strings.CutPrefix(p, "flags=")
		if !ok {
			return nil, "ERR Unknown lua shebang option: " + p
		}
		for f := range strings.SplitSeq(flags, ",") {
			switch f {
			case "no-writes":
				s.readOnly = true
			case "", "allow-oom", "allow-stale", "no-cluster", "allow-cross-slot-keys":
			default:
				return nil, "ERR Unexpected flag in script shebang: " + f
			}
		}
	}
	return body[end:], ""
}

// scriptEnv is a Lua state for scripts and, while one runs in it, that
// attempt: what its redis.call runs against. States are pooled
// (Server.luaStates): making one costs about 800 allocations, a sixth of a
// short EVALSHA. A state carries nothing from one script to the next:
// what a script could change is sealed (globals, libraries, the string
// metatable, the metatables of other types), begin makes new KEYS and
// ARGV and resets what is per script (math.random's seed, cjson's
// settings, redis.setresp), and end clears the attempt.
type scriptEnv struct {
	x        *call // the EVAL
	view     *txView
	run      *scriptRun
	sc       *script
	readOnly bool
	// resp is the protocol the script's commands answer in (redis.setresp).
	resp int
	// errLine is the line a Lua error was raised at (errorHandler).
	errLine int

	L *lua.LState
	// globals is the state's real global table; env the script's
	// (sealed) view of it; sealed the tables a script may not change.
	globals, env *lua.LTable
	sealed       map[*lua.LTable]bool
	onError      *lua.LFunction // errorHandler
	rng          *rand.PCG      // math.random's
	cjson        *cjsonLib
}

// begin readies the state for one attempt of sc.
func (e *scriptEnv) begin(x *call, view *txView, run *scriptRun, sc *script, keys, argv [][]byte, readOnly bool) {
	e.x, e.view, e.run, e.sc, e.readOnly, e.resp, e.errLine = x, view, run, sc, readOnly, 2, 0
	e.globals.RawSetString("KEYS", stringsTable(e.L, keys))
	e.globals.RawSetString("ARGV", stringsTable(e.L, argv))
	e.rng.Seed(rand.Uint64(), rand.Uint64())
	e.cjson.reset()
	e.L.SetContext(run)
}

// end forgets the attempt, so that a pooled state holds none of its
// values (its stack, KEYS and ARGV) or its command.
func (e *scriptEnv) end() {
	e.L.SetTop(0)
	e.L.RemoveContext()
	e.globals.RawSetString("KEYS", lua.LNil)
	e.globals.RawSetString("ARGV", lua.LNil)
	e.x, e.view, e.run, e.sc = nil, nil, nil, nil
}

// newScriptEnv makes a Lua state for scripts (see above and the top of
// this file).
func newScriptEnv() *scriptEnv {
	L := lua.NewState(lua.Options{SkipOpenLibs: true, CallStackSize: 200, RegistrySize: luaStackSize, RegistryMaxSize: 1 << 20, MinimizeStackMemory: true})
	e := &scriptEnv{L: L, globals: L.G.Global, sealed: map[*lua.LTable]bool{}}
	e.openLibs()
	e.guardWrites()
	g := e.globals
	// Redis's globals and libraries are read-only, and reading a global
	// that is not there is an error, not nil (a misspelt local is
	// caught). The script sees them through sealed proxies: its
	// environment and each library are empty tables whose reads go to
	// the real one and whose writes fail, as do setmetatable, rawset and
	// table.insert on them.
	mt := L.NewTable()
	mt.RawSetString("__index", L.NewFunction(func(L *lua.LState) int {
		L.RaiseError("Script attempted to access nonexistent global variable '%s'", L.ToString(2))
		return 0
	}))
	L.SetMetatable(g, mt)
	deny := L.NewFunction(func(L *lua.LState) int {
		L.RaiseError("Attempt to modify a readonly table")
		return 0
	})
	seal := func(index, metatable lua.LValue) *lua.LTable {
		p, pm := L.NewTable(), L.NewTable()
		pm.RawSetString("__index", index)
		pm.RawSetString("__newindex", deny)
		pm.RawSetString("__metatable", metatable)
		L.SetMetatable(p, pm)
		e.sealed[p] = true
		return p
	}
	// what getmetatable of a sealed table gives: sealed too
	hidden := seal(lua.LNil, lua.LNil)
	var cjson *lua.LTable
	cjson, e.cjson = openCJSON(L)
	g.RawSetString("cjson", cjson)
	g.RawSetString("bit", openBit(L))
	g.RawSetString("cmsgpack", openCMsgpack(L))
	for _, lib := range []string{"string", "math", "table", "cjson", "bit", "cmsgpack"} {
		g.RawSetString(lib, seal(g.RawGetString(lib), hidden))
	}
	g.RawSetString("redis", seal(e.redisTable(), hidden))
	// Strings share one metatable, whose __index is the real string
	// library: getmetatable("") gives a sealed view of it instead, whose
	// __index is the sealed library.
	strView := L.NewTable()
	strView.RawSetString("__index", g.RawGetString("string"))
	L.GetMetatable(lua.LString("")).(*lua.LTable).RawSetString("__metatable", seal(strView, hidden))
	e.env = seal(g, hidden)
	g.RawSetString("_G", e.env)
	return e
}

// openLibs opens the libraries a script may use and removes what would
// reach outside the sandbox (files, code loading, printing), with Redis's
// error, pcall, string.rep and math.random in place of Lua's.
func (e *scriptEnv) openLibs() {
	L, g := e.L, e.globals
	for _, lib := range []struct {
		name string
		open lua.LGFunction
	}{{lua.BaseLibName, lua.OpenBase}, {lua.TabLibName, lua.OpenTable}, {lua.StringLibName, lua.OpenString}, {lua.MathLibName, lua.OpenMath}} {
		L.Push(L.NewFunction(lib.open))
		L.Push(lua.LString(lib.name))
		L.Call(1, 0)
	}
	for _, name := range []string{"dofile", "load", "loadfile", "loadstring", "print", "_printregs", "getfenv", "setfenv",
		"module", "require", "newproxy", "collectgarbage", "_GOPHER_LUA_VERSION"} {
		g.RawSetString(name, lua.LNil)
	}
	g.RawSetString("error", L.NewFunction(luaErrorFn))
	g.RawSetString("pcall", L.NewFunction(luaPCall))
	e.onError = L.NewFunction(e.errorHandler)
	g.RawGetString("string").(*lua.LTable).RawSetString("rep", L.NewFunction(e.stringRep))
	e.randomLib(L, g.RawGetString("math").(*lua.LTable))
}

// guardWrites makes the functions that write a table without its
// metamethods refuse sealed tables.
func (e *scriptEnv) guardWrites() {
	L, g := e.L, e.globals
	tab := g.RawGetString("table").(*lua.LTable)
	// setmetatable takes tables only, as Lua 5.1's: gopher-lua's would
	// set the metatable every string, number or boolean shares, or
	// cjson.null's.
	guard := func(name string, tableArg bool) {
		orig := g.RawGetString(name).(*lua.LFunction).GFunction
		g.RawSetString(name, L.NewFunction(func(L *lua.LState) int {
			if tableArg {
				L.CheckTable(1)
			}
			if t, ok := L.Get(1).(*lua.LTable); ok && e.sealed[t] {
				L.RaiseError("Attempt to modify a readonly table")
			}
			return orig(L)
		}))
	}
	guard("setmetatable", true)
	guard("rawset", false)
	// table.insert and table.remove write without metamethods.
	for _, name := range []string{"insert", "remove"} {
		orig := tab.RawGetString(name).(*lua.LFunction).GFunction
		tab.RawSetString(name, L.NewFunction(func(L *lua.LState) int {
			if e.sealed[L.CheckTable(1)] {
				L.RaiseError("Attempt to modify a readonly table")
			}
			return orig(L)
		}))
	}
}

// randomLib gives the scripts' math.random a generator of the state's
// own, which begin seeds at random for each script as Redis 7's is, and
// math.randomseed seeds (the same seed, the same numbers; gopher-lua's
// uses the process's generator, whose Seed does nothing).
func (e *scriptEnv) randomLib(L *lua.LState, m *lua.LTable) {
	e.rng = rand.NewPCG(0, 0)
	rng := rand.New(e.rng)
	m.RawSetString("random", L.NewFunction(func(L *lua.LState) int {
		if L.GetTop() == 0 {
			L.Push(lua.LNumber(rng.Float64()))
			return 1
		}
		if L.GetTop() > 2 {
			L.RaiseError("wrong number of arguments")
		}
		// In floating point, as Lua 5.1 and Redis compute it: integer
		// arithmetic overflows for intervals wider than 2^63. The bounds
		// are cut to integers first, as luaL_checkint cuts them: 1.5 and
		// 3.7 draw from 1 to 3, never 4.5.
		lo, hi := lua.LNumber(1), lua.LNumber(math.Trunc(float64(L.CheckNumber(L.GetTop()))))
		if L.GetTop() == 2 {
			lo = lua.LNumber(math.Trunc(float64(L.CheckNumber(1))))
		}
		if lo > hi {
			L.ArgError(L.GetTop(), "interval is empty")
		}
		L.Push(lua.LNumber(math.Floor(rng.Float64()*float64(hi-lo+1))) + lo)
		return 1
	}))
	m.RawSetString("randomseed", L.NewFunction(func(L *lua.LState) int {
		e.rng.Seed(uint64(int64(L.CheckNumber(1))), 0)
		return 0
	}))
}

func stringsTable(L *lua.LState, ss [][]byte) *lua.LTable {
	t := L.CreateTable(len(ss), 0)
	for i, s := range ss {
		t.RawSetInt(i+1, lua.LString(s))
	}
	return t
}

// luaErrorFn is Lua 5.1's error: a number, like a string, gets the
// position it was raised at.
func luaErrorFn(L *lua.LState) int {
	v := L.Get(1)
	if n, ok := v.(lua.LNumber); ok {
		v = lua.LString(n.String())
	}
	L.Error(v, L.OptInt(2, 1))
	return 0
}

// luaPCall is pcall as Redis's scripts have it: an error table (a failed
// redis.call, error({err=...})) is caught as its message.
func luaPCall(L *lua.LState) int {
	L.CheckAny(1)
	if err := L.PCall(L.GetTop()-1, lua.MultRet, nil); err != nil {
		var obj lua.LValue = lua.LString(err.Error())
		var ae *lua.ApiError
		if errors.As(err, &ae) {
			obj = ae.Object
		}
		if t, ok := obj.(*lua.LTable); ok {
			if msg, ok := t.RawGetString("err").(lua.LString); ok {
				obj = msg
			}
		}
		L.Push(lua.LFalse)
		L.Push(obj)
		return 2
	}
	L.Insert(lua.LTrue, 1)
	return L.GetTop()
}

// stringRep is string.rep bounded by the output buffer limit, so that a
// script cannot make the node allocate gigabytes in one call.
func (e *scriptEnv) stringRep(L *lua.LState) int {
	s, n := L.CheckString(1), L.CheckInt(2)
	if n > 0 && len(s) > 0 && n > e.x.s.cfg.MaxOutputBuffer/len(s) {
		L.RaiseError("string.rep of %d x %d bytes is over the output buffer limit (%d bytes)", n, len(s), e.x.s.cfg.MaxOutputBuffer)
	}
	L.Push(lua.LString(strings.Repeat(s, max(n, 0))))
	return 1
}

// errTable is Redis's error table {err = msg}.
func errTable(L *lua.LState, msg string) *lua.LTable {
	t := L.NewTable()
	t.RawSetString("err", lua.LString(msg))
	return t
}

// errorText is the message of an error reply as a script sees it: a code
// (ERR unless the text starts with "-CODE ") and the text, as Redis's
// luaPushErrorBuff makes it.
func errorText(s string) string {
	if !strings.HasPrefix(s, "-") {
		s = "-" + s
	}
	code, msg, found := strings.Cut(s[1:], " ")
	if !found {
		code, msg = "ERR", s[1:]
	}
	return code + " " + strings.Trim(msg, "\r\n")
}

// redisTable is the script's redis table.
func (e *scriptEnv) redisTable() *lua.LTable {
	L := e.L
	t := L.NewTable()
	fns := map[string]lua.LGFunction{
		"call":  func(L *lua.LState) int { return e.redisCall(L, true) },
		"pcall": func(L *lua.LState) int { return e.redisCall(L, false) },
		"error_reply": func(L *lua.LState) int {
			if s, ok := L.Get(1).(lua.LString); ok && L.GetTop() == 1 {
				L.Push(errTable(L, errorText(string(s))))
			} else {
				L.Push(errTable(L, "ERR wrong number or type of arguments"))
			}
			return 1
		},
		"status_reply": func(L *lua.LState) int {
			if s, ok := L.Get(1).(lua.LString); ok && L.GetTop() == 1 {
				r := L.NewTable()
				r.RawSetString("ok", s)
				L.Push(r)
			} else {
				L.Push(errTable(L, "ERR wrong number or type of arguments"))
			}
			return 1
		},
		"sha1hex": func(L *lua.LState) int {
			if L.GetTop() != 1 {
				e.raise("ERR wrong number of arguments")
			}
			L.Push(lua.LString(sha1hex([]byte(L.ToString(1)))))
			return 1
		},
		// redis.log checks its arguments as Redis does and writes
		// nothing: a node's log is not for its clients' scripts.
		"log": func(L *lua.LState) int {
			switch lv, ok := L.Get(1).(lua.LNumber); {
			case L.GetTop() < 2:
				e.raise("ERR redis.log() requires two arguments or more.")
			case !ok:
				e.raise("ERR First argument must be a number")
			case lv < 0 || lv > 3:
				e.raise("ERR Invalid debug level.")
			}
			return 0
		},
		"setresp": func(L *lua.LState) int {
			if L.GetTop() != 1 {
				e.raise("ERR redis.setresp() requires one argument.")
			}
			switch v := L.Get(1).(lua.LNumber); v {
			case 2, 3:
				e.resp = int(v)
			default:
				e.raise("ERR RESP version must be 2 or 3.")
			}
			return 0
		},
		// Replication settings mean nothing to TideKV, which replicates
		// the transaction's writes; they are checked and ignored.
		"set_repl": func(L *lua.LState) int {
			if L.GetTop() != 1 {
				e.raise("ERR redis.set_repl() requires two arguments.")
			}
			if v, ok := L.Get(1).(lua.LNumber); !ok || v < 0 || v > 3 {
				e.raise("ERR Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or REPL_NONE.")
			}
			return 0
		},
		"replicate_commands": func(L *lua.LState) int { L.Push(lua.LTrue); return 1 },
		"breakpoint":         func(L *lua.LState) int { L.Push(lua.LFalse); return 1 },
		"debug":              func(L *lua.LState) int { return 0 },
		"acl_check_cmd": func(L *lua.LState) int {
			name, ok := commandName([]byte(L.CheckString(1)))
			if !ok {
				e.raise("ERR Invalid command passed to redis.acl_check_cmd()")
			}
			L.Push(lua.LBool(e.x.st.denial(name) == ""))
			return 1
		},
	}
	for name, fn := range fns {
		t.RawSetString(name, L.NewFunction(fn))
	}
	for name, v := range map[string]lua.LValue{
		"LOG_DEBUG": lua.LNumber(0), "LOG_VERBOSE": lua.LNumber(1), "LOG_NOTICE": lua.LNumber(2), "LOG_WARNING": lua.LNumber(3),
		"REPL_NONE": lua.LNumber(0), "REPL_AOF": lua.LNumber(1), "REPL_SLAVE": lua.LNumber(2), "REPL_REPLICA": lua.LNumber(2), "REPL_ALL": lua.LNumber(3),
		"REDIS_VERSION": lua.LString("7.0.0"), "REDIS_VERSION_NUM": lua.LNumber(0x070000),
	} {
		t.RawSetString(name, v)
	}
	return t
}

// raise raises Redis's error table with msg.
func (e *scriptEnv) raise(msg string) {
	e.L.Error(errTable(e.L, msg), 0)
}

// redisCall is redis.call (raise: a failed command raises its error) and
// redis.pcall (it returns the error table).
func (e *scriptEnv) redisCall(L *lua.LState, raise bool) int {
	if err := e.run.stopped(); err != nil {
		L.RaiseError("%s", err)
	}
	v := e.command(L)
	if err := e.view.err; err != nil {
		// The store failed (a conflict, an overload): the attempt is
		// over whatever the script does with the error.
		e.run.stop(err)
		L.RaiseError("%s", err)
	}
	if t, ok := v.(*lua.LTable); ok && raise {
		if _, isErr := t.RawGetString("err").(lua.LString); isErr {
			L.Error(t, 0)
		}
	}
	L.Push(v)
	return 1
}

// command runs the command the script called and returns its reply as a
// Lua value (an error table if it failed).
func (e *scriptEnv) command(L *lua.LState) lua.LValue {
	n := L.GetTop()
	if n == 0 {
		return errTable(L, "ERR Please specify at least one argument for this redis lib call")
	}
	args := make([][]byte, n)
	for i := range args {
		switch v := L.Get(i + 1).(type) {
		case lua.LString:
			args[i] = []byte(v)
		case lua.LNumber:
			args[i] = []byte(formatArgNumber(float64(v)))
		default:
			return errTable(L, "ERR Lua redis lib command arguments must be strings or integers")
		}
		args[i] = args[i][:len(args[i]):len(args[i])]
	}
	x := e.x
	name, ok := commandName(args[0])
	spec := commands[name]
	switch {
	case !ok:
		return errTable(L, "ERR Unknown Redis command called from script")
	case (spec.arity > 0 && n != spec.arity) || (spec.arity < 0 && n < -spec.arity):
		return errTable(L, "ERR Wrong number of args calling Redis command from script")
	case notInScripts[name]:
		return errTable(L, "ERR This Redis command is not allowed from script")
	case x.st.denial(name) != "":
		return errTable(L, x.st.denial(name))
	case e.readOnly && (writeCommands[name] || adminCommands[name]):
		return errTable(L, "ERR Write commands are not allowed from read-only scripts.")
	}
	out := &txnReplies{replyConn: x.c, limit: x.s.cfg.MaxOutputBuffer, resp3: e.resp == 3}
	// The command writes in the script's protocol, whatever the
	// connection's (commands read it from the connection's state).
	conn := x.st.resp3
	x.st.resp3 = e.resp == 3
	spec.fn(&call{s: x.s, c: out, st: x.st, kv: e.view, ctx: x.ctx, name: name, args: args})
	x.st.resp3 = conn
	if out.over {
		return errTable(L, fmt.Sprintf("ERR the reply of %s is over the output buffer limit (%d bytes)", strings.ToUpper(name), out.limit))
	}
	v, _ := e.parseReply(out.b)
	return v
}

// formatArgNumber is a number given to redis.call as Redis 7.0 writes it
// ("%.17g", inf, nan).
func formatArgNumber(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	case math.IsNaN(f) && math.Signbit(f):
		return "-nan"
	case math.IsNaN(f):
		return "nan"
	}
	return fmt.Sprintf("%.17g", f)
}

// parseReply reads the first reply in b as a Lua value, as Redis converts
// replies for scripts: a status is {ok=...}, an error {err=...}, a null
// false (RESP3: nil), and RESP3's types tables of {map=}, {set=},
// {double=}, {big_number=}, {verbatim_string=}. It returns what follows.
func (e *scriptEnv) parseReply(b []byte) (lua.LValue, []byte) {
	L := e.L
	i := bytes.Index(b, []byte("\r\n"))
	if i < 1 {
		return lua.LNil, nil
	}
	head, rest := string(b[1:i]), b[i+2:]
	n, _ := strconv.Atoi(head)
	field := func(name string, v lua.LValue) *lua.LTable {
		t := L.NewTable()
		t.RawSetString(name, v)
		return t
	}
	switch b[0] {
	case '+':
		return field("ok", lua.LString(head)), rest
	case '-':
		return errTable(L, errorText(string(b[:i]))), rest
	case ':':
		v, _ := strconv.ParseInt(head, 10, 64)
		return lua.LNumber(v), rest
	case '$', '=':
		if n < 0 {
			return lua.LFalse, rest
		}
		s := string(rest[:n])
		if b[0] == '=' {
			v := L.NewTable()
			v.RawSetString("format", lua.LString(s[:3]))
			v.RawSetString("string", lua.LString(s[4:]))
			return field("verbatim_string", v), rest[n+2:]
		}
		return lua.LString(s), rest[n+2:]
	case '*', '~', '%':
		if n < 0 {
			return lua.LFalse, rest
		}
		t := L.CreateTable(n, 0)
		for j := 1; j <= n; j++ {
			var v lua.LValue
			v, rest = e.parseReply(rest)
			switch b[0] {
			case '*':
				if v != lua.LNil {
					t.RawSetInt(j, v)
				}
			case '~':
				t.RawSet(v, lua.LTrue)
			case '%':
				var val lua.LValue
				val, rest = e.parseReply(rest)
				t.RawSet(v, val)
			}
		}
		switch b[0] {
		case '~':
			return field("set", t), rest
		case '%':
			return field("map", t), rest
		}
		return t, rest
	case '_':
		return lua.LNil, rest
	case '#':
		return lua.LBool(head == "t"), rest
	case ',':
		f, _ := strconv.ParseFloat(head, 64)
		return field("double", lua.LNumber(f)), rest
	case '(':
		return field("big_number", lua.LString(head)), rest
	}
	return lua.LNil, rest
}

// maxReplyDepth bounds the nesting of a script's reply (a table holding
// itself would never end).
const maxReplyDepth = 1000

var errReplyDepth = errors.New("ERR reached lua stack limit")

// appendValue appends v, a script's result, as the client's reply, as
// Redis 7.0 converts it: a string a bulk string, a number an integer
// (truncated), true 1 and false null (after redis.setresp(3) booleans),
// a table with err or ok an error or a status, with double, map or set
// one of those, any other table an array of its elements up to the first
// nil, anything else null.
func (e *scriptEnv) appendValue(b []byte, v lua.LValue, depth int) ([]byte, error) {
	resp3 := e.x.st.resp3
	if depth > maxReplyDepth {
		return b, errReplyDepth
	}
	if len(b) > e.x.s.cfg.MaxOutputBuffer {
		return b, fmt.Errorf("ERR the script's reply is over the output buffer limit (%d bytes)", e.x.s.cfg.MaxOutputBuffer)
	}
	switch v := v.(type) {
	case lua.LString:
		return appendBulkString(b, string(v)), nil
	case lua.LNumber:
		return appendInt(b, ':', luaInt(float64(v))), nil
	case lua.LBool:
		switch {
		case e.resp == 3 && resp3:
			return append(b, map[bool]string{true: "#t\r\n", false: "#f\r\n"}[bool(v)]...), nil
		case e.resp == 3 || bool(v):
			return appendInt(b, ':', int64(b2i(bool(v)))), nil
		}
		return appendNull(b, resp3), nil
	case *lua.LTable:
		return e.appendTable(b, v, depth)
	}
	return appendNull(b, resp3), nil
}

func (e *scriptEnv) appendTable(b []byte, t *lua.LTable, depth int) ([]byte, error) {
	resp3 := e.x.st.resp3
	if s, ok := t.RawGetString("err").(lua.LString); ok {
		return appendError(b, oneLine(string(s))), nil
	}
	if s, ok := t.RawGetString("ok").(lua.LString); ok {
		return appendString(b, oneLine(string(s))), nil
	}
	if f, ok := t.RawGetString("double").(lua.LNumber); ok {
		if resp3 {
			return append(append(append(b, ','), formatScore(float64(f))...), '\r', '\n'), nil
		}
		return appendBulk(b, formatScore(float64(f))), nil
	}
	var err error
	if m, ok := t.RawGetString("map").(*lua.LTable); ok {
		var keys, vals []lua.LValue
		m.ForEach(func(k, v lua.LValue) { keys, vals = append(keys, k), append(vals, v) })
		b = e.header(b, '%', len(keys), 2*len(keys))
		for i := range keys {
			if b, err = e.appendValue(b, keys[i], depth+1); err != nil {
				return b, err
			}
			if b, err = e.appendValue(b, vals[i], depth+1); err != nil {
				return b, err
			}
		}
		return b, nil
	}
	if s, ok := t.RawGetString("set").(*lua.LTable); ok {
		var keys []lua.LValue
		s.ForEach(func(k, _ lua.LValue) { keys = append(keys, k) })
		b = e.header(b, '~', len(keys), len(keys))
		for _, k := range keys {
			if b, err = e.appendValue(b, k, depth+1); err != nil {
				return b, err
			}
		}
		return b, nil
	}
	n := 0
	for t.RawGetInt(n+1) != lua.LNil {
		n++
	}
	b = appendArray(b, n, false)
	for i := 1; i <= n; i++ {
		if b, err = e.appendValue(b, t.RawGetInt(i), depth+1); err != nil {
			return b, err
		}
	}
	return b, nil
}

// header is an aggregate's header in the client's protocol (call.header).
func (e *scriptEnv) header(b []byte, t byte, n, n2 int) []byte {
	if !e.x.st.resp3 {
		return appendArray(b, n2, false)
	}
	return append(strconv.AppendInt(append(b, t), int64(n), 10), '\r', '\n')
}

// luaInt is a Lua number as Redis makes it an integer reply: truncated,
// and what does not fit (NaN, beyond int64) the least int64, as a C cast
// gives on x86-64.
func luaInt(f float64) int64 {
	if math.IsNaN(f) || f >= 0x1p63 || f < -0x1p63 {
		return math.MinInt64
	}
	return int64(f)
}

// errorHandler is the script's error function: it notes the line the
// error was raised at (in the innermost Lua function, not in redis.call
// or error) for the reply's "on @user_script:N.".
func (e *scriptEnv) errorHandler(L *lua.LState) int {
	for level := 1; ; level++ {
		dbg, ok := L.GetStack(level)
		if !ok {
			break
		}
		if _, err := L.GetInfo("Sl", dbg, nil); err == nil && dbg.What != "G" && dbg.CurrentLine > 0 {
			e.errLine = dbg.CurrentLine
			break
		}
	}
	L.Push(L.Get(1))
	return 1
}

// errorReply is the reply to a script that raised obj, as Redis words it:
// the error table's message, or ERR and the value, then "script: <sha>,
// on @user_script:<line>.".
func (e *scriptEnv) errorReply(obj lua.LValue) string {
	var msg string
	switch v := obj.(type) {
	case *lua.LTable:
		if s, ok := v.RawGetString("err").(lua.LString); ok {
			msg = string(s)
		} else {
			msg = "ERR " + v.String()
		}
	default:
		msg = "ERR " + obj.String()
	}
	if e.errLine > 0 {
		msg += fmt.Sprintf(" script: %s, on @%s:%d.", e.sc.sha, luaSource, e.errLine)
	}
	return oneLine(msg)
}

// maxIdleLuaStates bounds the idle Lua states a node keeps: about 130 KB
// each, a state for each script that ran at once, up to this many.
const maxIdleLuaStates = 32

// luaStackSize is the value stack a state starts with; one whose stack
// grew past it (the stack never shrinks: a script's unpack of a large
// table, deep recursion, up to 16 MiB) is not kept idle.
const luaStackSize = 1024

// stackGrown reads how large L's value stack became. gopher-lua does not
// export it; TestLuaStatePoolCarriesNothing checks that this still reads
// it (a field renamed by an upgrade reads as grown: states are no longer
// kept, and the test fails).
func stackGrown(L *lua.LState) bool {
	reg := reflect.ValueOf(L).Elem().FieldByName("reg")
	if !reg.IsValid() || reg.IsNil() {
		return true
	}
	arr := reg.Elem().FieldByName("array")
	return !arr.IsValid() || arr.Cap() > luaStackSize
}
