package resp

import (
	"context"
	"errors"
	"maps"
	"time"
)

// call is one command being served.
type call struct {
	s  *Server
	c  replyConn
	st *connState
	// kv is what the command reads and writes: the connection's database,
	// or inside EXEC the transaction (multi.go).
	kv   KV
	ctx  context.Context
	name string
	args [][]byte
	// cmd is ctx when the call is a command of its own (Server.begin);
	// EXEC's queued commands share EXEC's.
	cmd cmdCtx
}

// begin starts x as a command of its own, its KV calls bounded by
// its timeout and canceled when the server or the connection closes
// (cmdctx.go); the caller ends it with x.cmd.end().
func (s *Server) begin(x *call) {
	x.st.cmds.begin(&x.cmd, s.timeout(len(x.args)))
	x.cmd.arrived, x.cmd.paced = x.st.arrived, x.st.paced
	x.ctx = &x.cmd
}

// timeout bounds the KV calls of a command of args arguments:
// RequestTimeout for each MaxBatchKeys of them begun. A command naming
// thousands of keys (DEL, SADD, HSET) reads and writes them in one
// transaction, as many requests' worth of calls (its reads readBatch
// keys a call, its writes MaxBatchKeys a message), so it gets as many
// requests' time; the transaction's own limits
// (10,000 keys, a minute on a node) bound it still.
func (s *Server) timeout(args int) time.Duration {
	return s.cfg.RequestTimeout * time.Duration(max(1, (args+s.cfg.MaxBatchKeys-1)/s.cfg.MaxBatchKeys))
}

// batchArgs are the arguments of a combined batch's commands, for its
// timeout (combine.go).
func batchArgs(batch []*combined) int {
	n := 0
	for _, c := range batch {
		n += c.args
	}
	return n
}

type cmdSpec struct {
	// arity as in Redis COMMAND: > 0 exact argument count including the
	// name, < 0 at least -arity.
	arity  int
	noAuth bool // allowed before AUTH
	fn     func(*call)
	// stat is the command's stat id (stats.go), subStats its listed
	// subcommands' (nil for a command without them).
	stat     int
	subStats map[string]int
}

var commands map[string]cmdSpec

// commandNames maps each command's name to itself, the string prepare
// keeps (commandName).
var commandNames map[string]string

func init() {
	commands = map[string]cmdSpec{
		"ping":        {arity: -1, fn: cmdPing},
		"echo":        {arity: 2, fn: cmdEcho},
		"quit":        {arity: 1, noAuth: true, fn: cmdQuit},
		"select":      {arity: 2, fn: cmdSelect},
		"client":      {arity: -2, fn: cmdClient},
		"command":     {arity: -1, fn: cmdCommand},
		"info":        {arity: -1, fn: cmdInfo},
		"config":      {arity: -2, fn: cmdConfig},
		"hello":       {arity: -1, noAuth: true, fn: cmdHello},
		"auth":        {arity: -2, noAuth: true, fn: cmdAuth},
		"get":         {arity: 2, fn: cmdGet},
		"set":         {arity: -3, fn: cmdSet},
		"expire":      {arity: -3, fn: cmdExpire},
		"pexpire":     {arity: -3, fn: cmdExpire},
		"expireat":    {arity: -3, fn: cmdExpire},
		"pexpireat":   {arity: -3, fn: cmdExpire},
		"ttl":         {arity: 2, fn: cmdTTL},
		"pttl":        {arity: 2, fn: cmdTTL},
		"expiretime":  {arity: 2, fn: cmdExpireTime},
		"pexpiretime": {arity: 2, fn: cmdExpireTime},
		"persist":     {arity: 2, fn: cmdPersist},
		"setnx":       {arity: 3, fn: cmdSetNX},
		"append":      {arity: 3, fn: cmdAppend},
		"strlen":      {arity: 2, fn: cmdStrlen},
		"getrange":    {arity: 4, fn: cmdGetRange},
		"substr":      {arity: 4, fn: cmdGetRange},
		"setrange":    {arity: 4, fn: cmdSetRange},
		"getdel":      {arity: 2, fn: cmdGetDel},
		"getex":       {arity: -2, fn: cmdGetEx},
		"setex":       {arity: 4, fn: cmdSetEx},
		"psetex":      {arity: 4, fn: cmdSetEx},
		"msetnx":      {arity: -3, fn: cmdMSetNX},
		"getset":      {arity: 3, fn: cmdGetSet},
		"del":         {arity: -2, fn: cmdDel},
		"unlink":      {arity: -2, fn: cmdDel},
		"exists":      {arity: -2, fn: cmdExists},
		"type":        {arity: 2, fn: cmdType},
		"dbsize":      {arity: 1, fn: cmdDBSize},
		"time":        {arity: 1, fn: cmdTime},
		"mget":        {arity: -2, fn: cmdMGet},
		"mset":        {arity: -3, fn: cmdMSet},
		"incr":        {arity: 2, fn: cmdIncr},
		"decr":        {arity: 2, fn: cmdIncr},
		"incrby":      {arity: 3, fn: cmdIncr},
		"decrby":      {arity: 3, fn: cmdIncr},
		"incrbyfloat": {arity: 3, fn: cmdIncrByFloat},
		"hset":        {arity: -4, fn: cmdHSet},
		"hmset":       {arity: -4, fn: cmdHSet},
		"hget":        {arity: 3, fn: cmdHGet},
		"hmget":       {arity: -3, fn: cmdHMGet},
		"hgetall":     {arity: 2, fn: cmdHGetAll},
		"hkeys":       {arity: 2, fn: cmdHGetAll},
		"hvals":       {arity: 2, fn: cmdHGetAll},
		"hlen":        {arity: 2, fn: cmdHGetAll},
		"hdel":        {arity: -3, fn: cmdHDel},
		"hexists":     {arity: 3, fn: cmdHExists},
		"scan":        {arity: -2, fn: cmdScan},
		// Sorted sets (zset.go).
		"zadd": {arity: -4, fn: cmdZAdd}, "zincrby": {arity: 4, fn: cmdZIncrBy}, "zrem": {arity: -3, fn: cmdZRem},
		"zscore": {arity: 3, fn: cmdZScore}, "zmscore": {arity: -3, fn: cmdZScore}, "zcard": {arity: 2, fn: cmdZCard},
		"zcount": {arity: 4, fn: cmdZCount}, "zlexcount": {arity: 4, fn: cmdZCount},
		"zrank": {arity: 3, fn: cmdZRank}, "zrevrank": {arity: 3, fn: cmdZRank},
		"zrange": {arity: -4, fn: cmdZRange}, "zrevrange": {arity: -4, fn: cmdZRange},
		"zrangebyscore": {arity: -4, fn: cmdZRange}, "zrevrangebyscore": {arity: -4, fn: cmdZRange},
		"zrangebylex": {arity: -4, fn: cmdZRange}, "zrevrangebylex": {arity: -4, fn: cmdZRange},
		"zpopmin": {arity: -2, fn: cmdZPop}, "zpopmax": {arity: -2, fn: cmdZPop},
		"bzpopmin": {arity: -3, fn: cmdBZPop}, "bzpopmax": {arity: -3, fn: cmdBZPop},
		"zmpop": {arity: -4, fn: cmdZMPop}, "bzmpop": {arity: -5, fn: cmdZMPop},
		"zremrangebyscore": {arity: 4, fn: cmdZRemRange}, "zremrangebyrank": {arity: 4, fn: cmdZRemRange},
		"zremrangebylex": {arity: 4, fn: cmdZRemRange}, "zscan": {arity: -3, fn: cmdZScan},
		"zunion": {arity: -3, fn: cmdZAlgebra}, "zinter": {arity: -3, fn: cmdZAlgebra}, "zdiff": {arity: -3, fn: cmdZAlgebra},
		"zunionstore": {arity: -4, fn: cmdZAlgebra}, "zinterstore": {arity: -4, fn: cmdZAlgebra},
		"zdiffstore": {arity: -4, fn: cmdZAlgebra}, "zintercard": {arity: -3, fn: cmdZAlgebra},
		"zrangestore": {arity: -5, fn: cmdZRangeStore},
		"zrandmember": {arity: -2, fn: cmdZRandMember},
		"tkv.range":   {arity: -3, fn: cmdRange},
		"multi":       {arity: 1, fn: cmdMulti},
		"exec":        {arity: 1, fn: cmdExec},
		"discard":     {arity: 1, fn: cmdDiscard},
		"watch":       {arity: -2, fn: cmdWatch},
		"unwatch":     {arity: 1, fn: cmdUnwatch},
		"keys":        {arity: 2, fn: cmdKeys},
		"flushdb":     {arity: -1, fn: cmdFlush},
		"flushall":    {arity: -1, fn: cmdFlush},
		"randomkey":   {arity: 1, fn: cmdRandomKey},
		"object":      {arity: -2, fn: cmdObject},
		"rename":      {arity: 3, fn: cmdRename},
		"renamenx":    {arity: 3, fn: cmdRename},
		"copy":        {arity: -3, fn: cmdRename},
		"sort":        {arity: -2, fn: cmdSort},
		"sort_ro":     {arity: -2, fn: cmdSort},
		"dump":        {arity: 2, fn: cmdDump}, "restore": {arity: -4, fn: cmdRestore}, // dump.go

		// hashfield.go
		"hincrby": {arity: 4, fn: cmdHIncrBy}, "hincrbyfloat": {arity: 4, fn: cmdHIncrByFloat},
		"hsetnx": {arity: 4, fn: cmdHSetNX}, "hstrlen": {arity: 3, fn: cmdHStrLen},
		"hrandfield": {arity: -2, fn: cmdHRandField}, "hscan": {arity: -3, fn: cmdHScan},

		// strings.go
		"getbit": {arity: 3, fn: cmdGetBit}, "setbit": {arity: 4, fn: cmdSetBit},

		// scripting.go
		"function": {arity: -2, fn: cmdFunction}, "script": {arity: -2, fn: cmdScript},
		"eval": {arity: -3, fn: cmdEval}, "evalsha": {arity: -3, fn: cmdEval},
		"eval_ro": {arity: -3, fn: cmdEval}, "evalsha_ro": {arity: -3, fn: cmdEval},
		"memory": {arity: -2, fn: cmdMemory}, // memory.go
	}
	maps.Copy(commands, collectionCommands)
	maps.Copy(commands, streamCommands)
	commandNames = make(map[string]string, len(commands))
	for name := range commands {
		commandNames[name] = name
	}
	numberStats()
}

const (
	errWrongType = "WRONGTYPE Operation against a key holding the wrong kind of value"
	errNotInt    = "ERR value is not an integer or out of range"
	errNotFloat  = "ERR value is not a valid float"
	errSyntax    = "ERR syntax error"
	errReserved  = "ERR value is reserved by TideKV's encoding of hashes, lists and sets"
)

// batchGet reads keys in batches of at most MaxBatchKeys.
func (x *call) batchGet(keys [][]byte) ([]Result, error) { return x.batchGetFrom(x.kv, keys) }

// batchGetFrom is batchGet from kv.
func (x *call) batchGetFrom(kv KV, keys [][]byte) ([]Result, error) {
	out := make([]Result, 0, len(keys))
	for len(keys) > 0 {
		n := min(len(keys), x.s.cfg.MaxBatchKeys)
		r, err := kv.BatchGet(x.ctx, keys[:n])
		if err != nil {
			return nil, err
		}
		out = append(out, r...)
		keys = keys[n:]
	}
	return out, nil
}

// write applies ops in batches of at most MaxBatchKeys. A batch rejected as
// invalid (its keys may span ranges) is retried one op at a time, so a
// multi-key write is atomic only when its keys lie in one range.
func (x *call) write(ops []Op) error {
	for len(ops) > 0 {
		n := min(len(ops), x.s.cfg.MaxBatchKeys)
		batch := ops[:n]
		ops = ops[n:]
		err := x.kv.Write(x.ctx, batch)
		if err == nil {
			continue
		}
		if !errors.Is(err, ErrInvalidArgument) || len(batch) == 1 {
			return err
		}
		for _, op := range batch {
			if op.Delete {
				_, err = x.kv.Delete(x.ctx, op.Key)
			} else {
				err = x.kv.Put(x.ctx, op.Key, op.Value)
			}
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// readArgs reads the keys named by the command's arguments readBatch at a
// time, handing each batch's results to reply before reading the next, so
// that one command holds at most one batch of values (output.go). done is
// how many keys were replied to before.
func (x *call) readArgs(reply func(done int, rs []Result, err error) bool) {
	keys := x.args[1:]
	for done := 0; done < len(keys) && !x.st.quit; {
		batch := keys[done:min(len(keys), done+x.s.readBatch())]
		enc := make([][]byte, len(batch))
		for i, k := range batch {
			enc[i] = encKey(k)
		}
		rs, err := x.batchGet(enc)
		if !reply(done, rs, err) {
			return
		}
		done += len(batch)
	}
}
