package resp

import (
	"fmt"
	"strings"
)

// FUNCTION and SCRIPT: TideKV runs no Lua, so there is never a script or a
// function library to list or flush. The subcommands that only inspect or
// clear that empty state answer as Redis does with nothing loaded (test
// harnesses and client libraries send FUNCTION FLUSH and SCRIPT FLUSH when
// they start); the ones that would load or run code are refused with one
// sentence, and EVAL, EVALSHA and FCALL stay unknown commands, so COMMAND
// lists nothing that cannot run.

// errNoScripts is the refusal of a subcommand that needs a scripting engine.
func errNoScripts(cmd, sub string) string {
	return fmt.Sprintf("ERR %s %s is not supported: TideKV runs no scripts or functions", strings.ToUpper(cmd), strings.ToUpper(sub))
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
		x.c.WriteError(errNoScripts("function", sub))
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

// cmdScript: SCRIPT FLUSH [ASYNC|SYNC] answers OK and SCRIPT EXISTS sha...
// answers 0 for each sha (no script is cached); LOAD, KILL and DEBUG are
// refused.
func cmdScript(x *call) {
	sub := strings.ToLower(string(x.args[1]))
	switch sub {
	case "flush":
		if flushModeOK(x, "ERR SCRIPT FLUSH only support SYNC|ASYNC option") {
			x.c.WriteString("OK")
		}
	case "exists":
		if len(x.args) < 3 {
			x.c.WriteError(errArity("script|exists"))
			return
		}
		x.c.WriteArray(len(x.args) - 2)
		for range x.args[2:] {
			x.c.WriteInt(0)
		}
	case "load", "kill", "debug":
		x.c.WriteError(errNoScripts("script", sub))
	default:
		x.c.WriteError(fmt.Sprintf("ERR unknown subcommand '%s'. Try SCRIPT HELP.", trunc(x.args[1])))
	}
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
