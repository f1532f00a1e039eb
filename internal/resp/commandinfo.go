package resp

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// COMMAND and its subcommands describe the command table, so that what a
// client learns (redis-cli's hints, a cluster client's key positions)
// matches what is served: COUNT, LIST, INFO, DOCS, GETKEYS.

// keyPos is where a command's keys are, as COMMAND INFO states it: the
// first and last argument (negative: from the end) and the step.
type keyPos struct{ first, last, step int }

// keyPositions are the commands whose keys are not just the first
// argument; keyless lists those with none.
var (
	keyPositions = map[string]keyPos{
		"del": {1, -1, 1}, "unlink": {1, -1, 1}, "exists": {1, -1, 1}, "mget": {1, -1, 1},
		"watch": {1, -1, 1}, "mset": {1, -1, 2}, "msetnx": {1, -1, 2},
		"rename": {1, 2, 1}, "renamenx": {1, 2, 1}, "copy": {1, 2, 1},
		"object": {2, 2, 1}, "memory": {2, 2, 1},
		"sinter": {1, -1, 1}, "sunion": {1, -1, 1}, "sdiff": {1, -1, 1},
		"sinterstore": {1, -1, 1}, "sunionstore": {1, -1, 1}, "sdiffstore": {1, -1, 1},
		"smove": {1, 2, 1}, "lmove": {1, 2, 1}, "rpoplpush": {1, 2, 1},
		"blpop": {1, -2, 1}, "brpop": {1, -2, 1}, "zrangestore": {1, 2, 1},
		"blmove": {1, 2, 1}, "brpoplpush": {1, 2, 1}, "bzpopmin": {1, -2, 1}, "bzpopmax": {1, -2, 1},
		// keys counted by a numkeys argument: Redis states none here
		"zunion": {}, "zinter": {}, "zdiff": {}, "zintercard": {}, "sintercard": {},
		"lmpop": {}, "blmpop": {}, "zmpop": {}, "bzmpop": {},
		"eval": {}, "evalsha": {}, "eval_ro": {}, "evalsha_ro": {},
		"xread": {}, "xreadgroup": {}, // after STREAMS (streamKeys)
	}
	keyless = map[string]bool{
		"ping": true, "echo": true, "quit": true, "select": true, "client": true, "command": true,
		"info": true, "config": true, "hello": true, "auth": true, "dbsize": true, "time": true,
		"multi": true, "exec": true, "discard": true, "unwatch": true, "scan": true, "tkv.range": true,
		"keys": true, "flushdb": true, "flushall": true, "randomkey": true,
		"function": true, "script": true,
		"xinfo": true, "xgroup": true, // Redis states its subcommands' keys only (streamKeys)
	}
)

// positions is where name's keys are (zero: none).
func positions(name string) keyPos {
	if keyless[name] {
		return keyPos{}
	}
	if p, ok := keyPositions[name]; ok {
		return p
	}
	return keyPos{1, 1, 1}
}

// flags are COMMAND INFO's flags of name: write, readonly, or none.
func flags(name string) []string {
	switch {
	case adminCommands[name]:
		return []string{"write", "admin"}
	case writeCommands[name]:
		return []string{"write"}
	case keyless[name]:
		return nil
	}
	return []string{"readonly"}
}

// tableNames are the command table's names in order.
func tableNames() []string {
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// cmdCommand: COMMAND [COUNT | LIST | INFO [name ...] | DOCS [name ...] |
// GETKEYS command arg ...]. COMMAND alone is COMMAND INFO of everything.
func cmdCommand(x *call) {
	sub := "info"
	if len(x.args) > 1 {
		sub = strings.ToLower(string(x.args[1]))
	}
	switch {
	case sub == "count" && len(x.args) == 2:
		x.c.WriteInt(len(commands))
	case sub == "list" && len(x.args) > 2:
		// COMMAND LIST FILTERBY ... is not served.
		x.c.WriteError(errSyntax)
	case sub == "list":
		names := tableNames()
		x.c.WriteArray(len(names))
		for _, n := range names {
			x.c.WriteBulkString(n)
		}
	case sub == "info" || sub == "docs":
		names := tableNames()
		if len(x.args) > 2 {
			names = names[:0]
			for _, a := range x.args[2:] {
				names = append(names, strings.ToLower(string(a)))
			}
		}
		if sub == "info" {
			x.c.WriteArray(len(names))
			for _, n := range names {
				writeCommandInfo(x, n)
			}
			return
		}
		var known []string
		for _, n := range names {
			if _, ok := commands[n]; ok {
				known = append(known, n)
			}
		}
		// A map name -> docs; TideKV has no docs to give beyond the name.
		x.writeMap(len(known))
		for _, n := range known {
			x.c.WriteBulkString(n)
			x.writeMap(0)
		}
	case sub == "getkeys" && len(x.args) >= 4:
		commandGetKeys(x)
	case sub == "count" || sub == "getkeys":
		x.c.WriteError(fmt.Sprintf("ERR wrong number of arguments for 'command|%s' command", sub))
	default:
		x.c.WriteError(fmt.Sprintf("ERR unknown subcommand '%s'. Try COMMAND HELP.", trunc(x.args[1])))
	}
}

// writeCommandInfo writes Redis 7's ten-element entry of COMMAND INFO for
// name (nil if unknown): name, arity, flags, first key, last key, step,
// ACL categories, tips, key specs, subcommands.
func writeCommandInfo(x *call, name string) {
	spec, ok := commands[name]
	if !ok {
		x.c.WriteNull()
		return
	}
	p := positions(name)
	x.c.WriteArray(10)
	x.c.WriteBulkString(name)
	x.c.WriteInt(spec.arity)
	fl := flags(name)
	x.writeSet(len(fl))
	for _, f := range fl {
		x.c.WriteString(f)
	}
	x.c.WriteInt(p.first)
	x.c.WriteInt(p.last)
	x.c.WriteInt(p.step)
	x.writeSet(0)     // ACL categories
	x.writeSet(0)     // tips
	x.c.WriteArray(0) // key specs
	x.c.WriteArray(0) // subcommands
}

// commandGetKeys: COMMAND GETKEYS command arg ..., the keys of that
// command line by its positions.
func commandGetKeys(x *call) {
	line := x.args[2:]
	name := strings.ToLower(string(line[0]))
	spec, ok := commands[name]
	switch {
	case !ok:
		x.c.WriteError("ERR Invalid command specified")
		return
	case (spec.arity > 0 && len(line) != spec.arity) || (spec.arity < 0 && len(line) < -spec.arity):
		x.c.WriteError("ERR Invalid number of arguments specified for command")
		return
	}
	if at, ok := numKeysAt[name]; ok {
		keys, ok := numKeys(line, at)
		switch {
		case ok || evalNames[name]:
			// A script may name no key (Redis's NO_MANDATORY_KEYS):
			// a wrong count is no keys rather than an error.
			x.c.WriteArray(len(keys))
			for _, k := range keys {
				x.c.WriteBulk(k)
			}
		default:
			x.c.WriteError("ERR Invalid arguments specified for command")
		}
		return
	}
	p := positions(name)
	if name == "xread" || name == "xreadgroup" || name == "xinfo" || name == "xgroup" {
		keys, ok := streamKeys(name, line)
		if !ok {
			x.c.WriteError("ERR Invalid arguments specified for command")
			return
		}
		x.c.WriteArray(len(keys))
		for _, k := range keys {
			x.c.WriteBulk(k)
		}
		return
	}
	if p.first == 0 {
		x.c.WriteError("ERR The command has no key arguments")
		return
	}
	last := p.last
	if last < 0 {
		last += len(line)
	}
	var keys [][]byte
	for i := p.first; i <= last && i < len(line); i += p.step {
		keys = append(keys, line[i])
	}
	if name == "sort" {
		if k := sortStoreKey(line); k != nil {
			keys = append(keys, k)
		}
	}
	x.c.WriteArray(len(keys))
	for _, k := range keys {
		x.c.WriteBulk(k)
	}
}

// numKeysAt are the commands whose keys a numkeys argument counts, with
// its position; the STORE forms' destination key comes first.
var numKeysAt = map[string]int{
	"eval": 2, "evalsha": 2, "eval_ro": 2, "evalsha_ro": 2,
	"zunion": 1, "zinter": 1, "zdiff": 1, "zintercard": 1, "sintercard": 1, "lmpop": 1, "zmpop": 1,
	"blmpop": 2, "bzmpop": 2, "zunionstore": 2, "zinterstore": 2, "zdiffstore": 2,
}

var evalNames = map[string]bool{"eval": true, "evalsha": true, "eval_ro": true, "evalsha_ro": true}

// numKeys are the keys counted by the numkeys argument at index at of
// line, after the destination key of the STORE forms, or false if the
// count is not a positive number of the arguments there are.
func numKeys(line [][]byte, at int) ([][]byte, bool) {
	n, err := strconv.Atoi(string(line[at]))
	if err != nil || n < 1 || n > len(line)-at-1 {
		return nil, false
	}
	keys := line[at+1 : at+1+n]
	if strings.HasSuffix(strings.ToLower(string(line[0])), "store") {
		keys = append([][]byte{line[1]}, keys...)
	}
	return keys, true
}

// sortStoreKey is SORT's STORE key as Redis's sortGetKeys finds it: the
// last STORE's, stepping over LIMIT's, GET's and BY's arguments.
func sortStoreKey(line [][]byte) []byte {
	var store []byte
	for i := 2; i < len(line); i++ {
		switch strings.ToLower(string(line[i])) {
		case "limit":
			i += 2
		case "get", "by":
			i++
		case "store":
			if i+1 < len(line) {
				store = line[i+1]
			}
		}
	}
	return store
}

// streamKeys are the keys of XREAD and XREADGROUP (half of what follows STREAMS,
// rounded down, as Redis's key spec finds them) and of XINFO and XGROUP (a
// subcommand's key, after it); false if there is none.
func streamKeys(name string, line [][]byte) ([][]byte, bool) {
	if name == "xinfo" || name == "xgroup" {
		if len(line) < 3 || strings.EqualFold(string(line[1]), "help") {
			return nil, false
		}
		return line[2:3], true
	}
	for i := 1; i < len(line); i++ {
		if strings.EqualFold(string(line[i]), "streams") {
			rest := line[i+1:]
			return rest[:len(rest)/2], len(rest) >= 2
		}
	}
	return nil, false
}
