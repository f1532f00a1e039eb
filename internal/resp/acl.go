package resp

import (
	"errors"
	"fmt"
	"time"
)

// Users with roles (Config.Auth): AUTH user password names a user, whose
// access decides which commands the connection may run. Without Auth every
// connection may run everything.

// Access is what an authenticated connection may do.
type Access int

const (
	AccessNone Access = iota
	AccessRead
	AccessWrite
	// AccessAdmin may also run adminCommands (FLUSHDB, FLUSHALL).
	AccessAdmin
)

// Authenticator checks AUTH's user name and password ("default" when AUTH
// names none), given from source (the client's host:port), and says what
// the user may do; a wrong pair is an error. An error with a RetryAfter()
// time.Duration method (too many failures) is sent to the client as it
// is. Implementations must not log the password.
type Authenticator interface {
	Authenticate(user, password, source string) (Access, error)
}

// writeCommands change data and need AccessWrite; every other command
// needs only an authenticated connection.
var writeCommands = map[string]bool{
	"set": true, "setnx": true, "getset": true, "del": true, "unlink": true, "mset": true,
	"expire": true, "pexpire": true, "expireat": true, "pexpireat": true, "persist": true,
	"incr": true, "decr": true, "incrby": true, "decrby": true,
	"hset": true, "hmset": true, "hdel": true,
	"rename": true, "renamenx": true, "copy": true, "sort": true, "restore": true,
	"hincrby": true, "hincrbyfloat": true, "hsetnx": true,
	"append": true, "setrange": true, "getdel": true, "getex": true, "setex": true, "psetex": true,
	"msetnx": true, "incrbyfloat": true, "setbit": true,
	"lpush": true, "rpush": true, "lpushx": true, "rpushx": true, "lpop": true, "rpop": true,
	"lset": true, "ltrim": true, "lmove": true, "rpoplpush": true, "lrem": true, "linsert": true,
	"blpop": true, "brpop": true, "blmove": true, "brpoplpush": true, "lmpop": true, "blmpop": true,
	"sadd": true, "srem": true, "spop": true, "sinterstore": true, "sunionstore": true, "sdiffstore": true, "smove": true,
	"zadd": true, "zincrby": true, "zrem": true, "zpopmin": true, "zpopmax": true, "bzpopmin": true, "bzpopmax": true, "zmpop": true, "bzmpop": true,
	"zremrangebyscore": true, "zremrangebyrank": true, "zremrangebylex": true,
	"zunionstore": true, "zinterstore": true, "zdiffstore": true, "zrangestore": true,
	"xadd": true, "xdel": true, "xtrim": true, "xsetid": true,
	"xgroup": true, "xreadgroup": true, "xack": true, "xclaim": true, "xautoclaim": true,
	// A script's commands are checked again one by one (lua.go).
	"eval": true, "evalsha": true,
}

// readCommands change no data: every command is in exactly one of
// readCommands, writeCommands and adminCommands (TestEveryCommandHasAnAccess),
// so a new command cannot reach a read-only user by being forgotten.
var readCommands = map[string]bool{
	"auth": true, "client": true, "command": true, "config": true, "dbsize": true, "discard": true,
	"echo": true, "exec": true, "exists": true, "expiretime": true, "get": true, "getrange": true,
	"hello": true, "hexists": true, "hget": true, "hgetall": true, "hkeys": true, "hlen": true,
	"hmget": true, "hrandfield": true, "hscan": true, "hstrlen": true, "hvals": true, "info": true,
	"keys": true, "sort_ro": true, "dump": true, "lindex": true, "llen": true, "lpos": true, "lrange": true, "mget": true,
	"multi": true, "object": true, "pexpiretime": true, "ping": true, "pttl": true, "quit": true,
	"randomkey": true, "scan": true, "scard": true, "sdiff": true, "select": true, "sinter": true,
	"sismember": true, "smembers": true, "smismember": true, "srandmember": true, "sscan": true,
	"strlen": true, "substr": true, "sunion": true, "time": true, "tkv.range": true, "ttl": true,
	"type": true, "unwatch": true, "watch": true,
	"xlen": true, "xrange": true, "xrevrange": true, "xread": true, "xinfo": true, "xpending": true,
	"zcard": true, "zcount": true, "zlexcount": true, "zmscore": true, "zrange": true,
	"zrangebylex": true, "zrangebyscore": true, "zrank": true, "zrevrange": true,
	"zrevrangebylex": true, "zrevrangebyscore": true, "zrevrank": true, "zscan": true, "zscore": true,
	"zrandmember": true, "zunion": true, "zinter": true, "zdiff": true, "zintercard": true, "sintercard": true,
	"function": true, "script": true, "getbit": true, "memory": true,
	"eval_ro": true, "evalsha_ro": true,
}

// denial is the error reply to a command the connection's user may not
// run, or "".
func (st *connState) denial(name string) string {
	if (writeCommands[name] && st.access < AccessWrite) || (adminCommands[name] && st.access < AccessAdmin) {
		return fmt.Sprintf("NOPERM User %s has no permissions to run the '%s' command", st.user, name)
	}
	return ""
}

// authenticate runs AUTH against Config.Auth, writing the error if the
// pair is wrong.
func (x *call) authenticate(user, pass []byte) bool {
	name := "default"
	if user != nil {
		name = string(user)
	}
	access, err := x.s.cfg.Auth.Authenticate(name, string(pass), x.c.RemoteAddr())
	var later interface{ RetryAfter() time.Duration }
	if errors.As(err, &later) {
		x.c.WriteError("ERR " + err.Error())
		return false
	}
	if err != nil || access == AccessNone {
		x.c.WriteError("WRONGPASS invalid username-password pair or user is disabled.")
		return false
	}
	x.st.authed, x.st.user, x.st.access = true, name, access
	return true
}
