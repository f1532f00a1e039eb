package resp

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	lua "github.com/yuin/gopher-lua"
)

// Scripting: EVAL, EVALSHA, EVAL_RO, EVALSHA_RO and SCRIPT LOAD, EXISTS,
// FLUSH and KILL, on gopher-lua (lua.go: the sandbox and the conversions;
// scriptcache.go: the compiled scripts; scriptrun.go: the time limit).
//
// A script runs atomically, as in Redis, as one KV.Txn: its redis.call
// and redis.pcall run commands through their usual code over a txView of
// the transaction, as EXEC's queued commands do (multi.go), so a command
// reads what the script wrote before it, and the writes commit together
// with its reads validated. A conflict runs the whole script again, on a
// new transaction, from the start (KV.Txn's retries, MaxTxnAttempts), and
// its replies are kept only from the attempt that commits. A script that
// raises an error commits what it wrote before, as Redis keeps those
// writes; one stopped by its time limit, SCRIPT KILL, the end of its
// command's context or a failure of the store applies nothing. Inside
// EXEC a script runs on a savepoint of EXEC's transaction.
//
// FUNCTION LOAD and FCALL are not served: FUNCTION answers for an empty
// library (the subcommands that inspect or clear it), refuses the ones
// that would load or run a library, and FCALL and FCALL_RO stay unknown
// commands, so COMMAND lists nothing that cannot run.

// notInScripts are the commands a script cannot call: those EXEC cannot
// run (notInMulti), and, as in Redis, the transaction's own, the
// scripting commands, QUIT and the blocking ones.
var notInScripts = func() map[string]bool {
	m := map[string]bool{}
	for _, n := range append([]string{"multi", "exec", "discard", "watch", "unwatch", "eval", "evalsha", "eval_ro", "evalsha_ro",
		"script", "function", "quit", "blpop", "brpop", "blmove", "brpoplpush", "blmpop", "bzpopmin", "bzpopmax", "bzmpop"}, notInMulti...) {
		m[n] = true
	}
	return m
}()

// cmdEval: EVAL script numkeys key... arg..., EVALSHA sha1 numkeys ...,
// and their _RO forms, whose scripts may only read.
func cmdEval(x *call) {
	n, err := strconv.ParseInt(string(x.args[2]), 10, 64)
	switch {
	case err != nil:
		x.c.WriteError(errNotInt)
		return
	case n > int64(len(x.args)-3):
		x.c.WriteError("ERR Number of keys can't be greater than number of args")
		return
	case n < 0:
		x.c.WriteError("ERR Number of keys can't be negative")
		return
	}
	var sc *script
	if strings.HasPrefix(x.name, "evalsha") {
		if sc = x.s.scripts.get(strings.ToLower(string(x.args[1]))); sc == nil {
			x.c.WriteError("NOSCRIPT No matching script. Please use EVAL.")
			return
		}
	} else if sc = x.s.scripts.get(sha1hex(x.args[1])); sc == nil {
		var why string
		if sc, why = compileScript(x.args[1]); sc == nil {
			x.c.WriteError(why)
			return
		}
		x.s.scripts.put(sc)
	}
	readOnly := strings.HasSuffix(x.name, "_ro")
	if readOnly && sc.shebanged && !sc.readOnly {
		x.c.WriteError("ERR Can not execute a script with write flag using *_ro command.")
		return
	}
	x.runScript(sc, x.args[3:3+n], x.args[3+n:], readOnly || sc.readOnly)
}

// errStopped is a script's attempt that its time limit or SCRIPT KILL
// stopped; the error is the reply.
type errStopped struct{ reply string }

func (e *errStopped) Error() string { return e.reply }

// runScript runs sc in one transaction (see above) and answers what it
// returned.
func (x *call) runScript(sc *script, keys, argv [][]byte, readOnly bool) {
	var reply []byte
	var ready [][]byte
	err := x.kv.Txn(x.ctx, func(tx TxnKV) error {
		view := &txView{tx: tx, now: x.s.cfg.Now}
		r, err := x.scriptAttempt(sc, view, keys, argv, readOnly)
		reply, ready = r, view.ready
		return err
	})
	var stopped *errStopped
	switch {
	case errors.As(err, &stopped):
		x.c.WriteError(stopped.reply)
		return
	case err != nil:
		replyErr(x.c, err)
		return
	}
	if v, inExec := x.kv.(*txView); inExec {
		v.ready = append(v.ready, ready...)
	} else {
		for _, k := range ready {
			x.awaitServed(x.s.blocked.ready(blockKey{x.st.db, string(k)}))
		}
	}
	if len(reply) > 0 && reply[0] == '-' {
		// An error reply is counted as one (INFO errorstats, stats.go).
		x.c.WriteError(string(reply[1 : len(reply)-2]))
		return
	}
	x.c.WriteRaw(reply)
}

// scriptAttempt runs sc once over view and returns its reply, or an error
// that rolls the attempt back: the store's (a conflict makes KV.Txn run
// the script again), the command's context's, or errStopped.
func (x *call) scriptAttempt(sc *script, view *txView, keys, argv [][]byte, readOnly bool) ([]byte, error) {
	run := newScriptRun(x.ctx, x.s.cfg.Now, x.s.cfg.ScriptTimeLimit)
	x.s.running.add(run)
	defer x.s.running.remove(run)
	var e *scriptEnv
	select {
	case e = <-x.s.luaStates:
	default:
		e = newScriptEnv()
	}
	e.begin(x, view, run, sc, keys, argv, readOnly)
	fn := e.L.NewFunctionFromProto(sc.proto)
	fn.Env = e.env
	e.L.Push(fn)
	r, err := e.result(e.L.PCall(0, 1, e.onError))
	// Put back only here: a state left by a panic (a fault of TideKV's,
	// which the connection's recover answers) may be mid-call.
	e.end()
	if !stackGrown(e.L) {
		select {
		case x.s.luaStates <- e:
		default:
		}
	}
	return r, err
}

// result is the attempt's reply, or the error that rolls it back
// (scriptAttempt), once the script has returned perr.
func (e *scriptEnv) result(perr error) ([]byte, error) {
	x := e.x
	switch why := e.run.stopped(); {
	case e.view.err != nil:
		return nil, e.view.err
	case errors.Is(why, errScriptTimeout):
		return nil, &errStopped{e.stopReply(fmt.Sprintf("ERR Script killed: it ran past the time limit of %v (ScriptTimeLimit); nothing it wrote was applied", x.s.cfg.ScriptTimeLimit))}
	case errors.Is(why, errScriptKilled):
		return nil, &errStopped{e.stopReply("ERR Script killed by user with SCRIPT KILL; nothing it wrote was applied")}
	case why != nil:
		return nil, why
	}
	var ae *lua.ApiError
	switch {
	case errors.As(perr, &ae):
		return []byte("-" + e.errorReply(ae.Object) + "\r\n"), nil
	case perr != nil:
		return []byte("-" + e.errorReply(lua.LString(perr.Error())) + "\r\n"), nil
	}
	b, err := e.appendValue(nil, e.L.Get(-1), 0)
	if err != nil {
		return []byte("-" + err.Error() + "\r\n"), nil
	}
	return b, nil
}

// stopReply is msg with where the script was, as Redis's reply to a
// killed script has it.
func (e *scriptEnv) stopReply(msg string) string {
	if e.errLine > 0 {
		msg += fmt.Sprintf(" script: %s, on @%s:%d.", e.sc.sha, luaSource, e.errLine)
	}
	return msg
}

// cmdScript: SCRIPT LOAD script, EXISTS sha..., FLUSH [ASYNC|SYNC], KILL;
// DEBUG is refused (there is no Lua debugger).
func cmdScript(x *call) {
	sub := strings.ToLower(string(x.args[1]))
	switch {
	case sub == "flush":
		if flushModeOK(x, "ERR SCRIPT FLUSH only support SYNC|ASYNC option") {
			x.s.scripts.flush()
			x.c.WriteString("OK")
		}
	case sub == "exists" && len(x.args) > 2:
		x.c.WriteArray(len(x.args) - 2)
		for _, sha := range x.args[2:] {
			x.c.WriteInt(b2i(x.s.scripts.get(strings.ToLower(string(sha))) != nil))
		}
	case sub == "load" && len(x.args) == 3:
		sc, why := compileScript(x.args[2])
		if sc == nil {
			x.c.WriteError(why)
			return
		}
		x.s.scripts.put(sc)
		x.c.WriteBulkString(sc.sha)
	case sub == "kill" && len(x.args) == 2:
		if x.s.running.kill() {
			x.c.WriteString("OK")
		} else {
			x.c.WriteError("NOTBUSY No scripts in execution right now.")
		}
	case sub == "exists" || sub == "load" || sub == "kill":
		x.c.WriteError(errArity("script|" + sub))
	case sub == "debug":
		x.c.WriteError("ERR SCRIPT DEBUG is not supported: TideKV has no Lua debugger")
	default:
		x.c.WriteError(fmt.Sprintf("ERR unknown subcommand '%s'. Try SCRIPT HELP.", trunc(x.args[1])))
	}
}

// cmdFunction: FUNCTION FLUSH [ASYNC|SYNC] and FUNCTION LIST [WITHCODE]
// [LIBRARYNAME pattern] answer for an empty library; LOAD, DELETE, DUMP,
// RESTORE, STATS and KILL are refused.
func cmdFunction(x *call) {
	sub := strings.ToLower(string(x.args[1]))
	switch sub {
	case "flush":
		if flushModeOK(x, "ERR FUNCTION FLUSH only supports SYNC|ASYNC option") {
			x.c.WriteString("OK")
		}
	case "list":
		if functionListOK(x) {
			x.c.WriteArray(0)
		}
	case "load", "delete", "dump", "restore", "stats", "kill":
		x.c.WriteError(fmt.Sprintf("ERR FUNCTION %s is not supported: TideKV runs scripts (EVAL) but no function libraries", strings.ToUpper(sub)))
	default:
		x.c.WriteError(fmt.Sprintf("ERR unknown subcommand '%s'. Try FUNCTION HELP.", trunc(x.args[1])))
	}
}

// functionListOK checks FUNCTION LIST's options, each at most once, with
// Redis's errors. They only filter or widen what is listed, and nothing is.
func functionListOK(x *call) bool {
	var withCode, name bool
	for i := 2; i < len(x.args); i++ {
		switch a := strings.ToLower(string(x.args[i])); {
		case a == "withcode" && !withCode:
			withCode = true
		case a == "libraryname" && !name:
			if i+1 == len(x.args) {
				x.c.WriteError("ERR library name argument was not given")
				return false
			}
			name = true
			i++
		default:
			x.c.WriteError("ERR Unknown argument " + trunc(x.args[i]))
			return false
		}
	}
	return true
}

// flushModeOK checks a FLUSH subcommand's optional ASYNC or SYNC, answering
// bad (Redis's words differ between FUNCTION and SCRIPT) for anything else.
func flushModeOK(x *call, bad string) bool {
	switch {
	case len(x.args) == 2:
		return true
	case len(x.args) == 3 && (strings.EqualFold(string(x.args[2]), "async") || strings.EqualFold(string(x.args[2]), "sync")):
		return true
	case len(x.args) > 3 && strings.EqualFold(string(x.args[0]), "function"):
		x.c.WriteError(fmt.Sprintf("ERR unknown subcommand or wrong number of arguments for '%s'. Try FUNCTION HELP.", trunc(x.args[1])))
	default:
		x.c.WriteError(bad)
	}
	return false
}
