package resp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/redcon"
)

// call is one command being served.
type call struct {
	s  *Server
	c  redcon.Conn
	st *connState
	// kv is what the command reads and writes: the connection's database,
	// or inside EXEC the transaction (multi.go).
	kv   KV
	ctx  context.Context
	name string
	args [][]byte
}

type cmdSpec struct {
	// arity as in Redis COMMAND: > 0 exact argument count including the
	// name, < 0 at least -arity.
	arity  int
	noAuth bool // allowed before AUTH
	fn     func(*call)
}

var commands map[string]cmdSpec

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
		"getset":      {arity: 3, fn: cmdGetSet},
		"del":         {arity: -2, fn: cmdDel},
		"unlink":      {arity: -2, fn: cmdDel},
		"exists":      {arity: -2, fn: cmdExists},
		"type":        {arity: 2, fn: cmdType},
		"mget":        {arity: -2, fn: cmdMGet},
		"mset":        {arity: -3, fn: cmdMSet},
		"incr":        {arity: 2, fn: cmdIncr},
		"decr":        {arity: 2, fn: cmdIncr},
		"incrby":      {arity: 3, fn: cmdIncr},
		"decrby":      {arity: 3, fn: cmdIncr},
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
		"tkv.range":   {arity: -3, fn: cmdRange},
		"multi":       {arity: 1, fn: cmdMulti},
		"exec":        {arity: 1, fn: cmdExec},
		"discard":     {arity: 1, fn: cmdDiscard},
		"watch":       {arity: -2, fn: cmdWatch},
		"unwatch":     {arity: 1, fn: cmdUnwatch},
	}
}

const (
	errWrongType = "WRONGTYPE Operation against a key holding the wrong kind of value"
	errNotInt    = "ERR value is not an integer or out of range"
	errSyntax    = "ERR syntax error"
	errReserved  = "ERR value is reserved by TideKV's hash encoding"
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

func cmdClient(x *call) {
	sub := strings.ToLower(string(x.args[1]))
	switch {
	case sub == "setname" && len(x.args) == 3:
		if bytes.ContainsAny(x.args[2], " \n\r") {
			x.c.WriteError("ERR Client names cannot contain spaces, newlines or special characters.")
			return
		}
		x.st.name = string(x.args[2])
		x.c.WriteString("OK")
	case sub == "getname" && len(x.args) == 2:
		if x.st.name == "" {
			x.c.WriteNull()
		} else {
			x.c.WriteBulkString(x.st.name)
		}
	case sub == "id" && len(x.args) == 2:
		x.c.WriteInt64(x.st.id)
	case sub == "setinfo" && len(x.args) == 4:
		x.c.WriteString("OK")
	case sub == "setname" || sub == "getname" || sub == "id" || sub == "setinfo":
		x.c.WriteError(fmt.Sprintf("ERR wrong number of arguments for 'client|%s' command", sub))
	default:
		x.c.WriteError(fmt.Sprintf("ERR unknown subcommand '%s'. Try CLIENT HELP.", trunc(x.args[1])))
	}
}

func cmdCommand(x *call) {
	if len(x.args) >= 2 && strings.EqualFold(string(x.args[1]), "count") {
		x.c.WriteInt(len(commands))
		return
	}
	// COMMAND, COMMAND DOCS, COMMAND INFO: no documentation; clients
	// (redis-cli) then work without hints.
	x.c.WriteArray(0)
}

func cmdInfo(x *call) {
	port := 0
	if a, ok := x.s.Addr().(*net.TCPAddr); ok {
		port = a.Port
	}
	up := time.Since(x.s.start)
	info := fmt.Sprintf("# Server\r\nredis_version:7.0.0-tidekv\r\nredis_mode:standalone\r\n"+
		"tidekv_protocol:resp2\r\ntcp_port:%d\r\nuptime_in_seconds:%d\r\nuptime_in_days:%d\r\n\r\n"+
		"# Clients\r\nconnected_clients:%d\r\n\r\n# Keyspace\r\n",
		port, int64(up.Seconds()), int64(up.Hours()/24), x.s.conns.Load())
	x.c.WriteBulkString(info)
}

// cmdConfig answers CONFIG GET for the parameters redis-benchmark asks
// about (save, appendonly), and an empty list for the rest.
func cmdConfig(x *call) {
	if !strings.EqualFold(string(x.args[1]), "get") {
		x.c.WriteError(fmt.Sprintf("ERR CONFIG %s is not supported by TideKV", trunc(x.args[1])))
		return
	}
	known := map[string]string{"save": "", "appendonly": "no", "databases": "1"}
	var out []string
	for _, a := range x.args[2:] {
		p := strings.ToLower(string(a))
		for k, v := range known {
			if globMatch([]byte(p), []byte(k)) {
				out = append(out, k, v)
			}
		}
	}
	x.c.WriteArray(len(out))
	for _, s := range out {
		x.c.WriteBulkString(s)
	}
}

// cmdHello speaks RESP2 only. HELLO 3 gets the reply a Redis without HELLO
// gives ("ERR unknown command 'HELLO'..."): every client falls back to RESP2
// on that one, while some (go-redis before v9.0.0 final, which go-ycsb
// pins) treat any other error, NOPROTO included, as fatal. HELLO [2]
// [AUTH user pass] [SETNAME name] answers like Redis.
func cmdHello(x *call) {
	args := x.args[1:]
	if len(args) > 0 {
		v, err := strconv.Atoi(string(args[0]))
		if err != nil {
			x.c.WriteError("ERR Protocol version is not an integer or out of range")
			return
		}
		if v != 2 {
			x.c.WriteError(fmt.Sprintf("ERR unknown command 'HELLO', with args beginning with: %s", argsPreview(x.args[1:])))
			return
		}
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
			x.st.name = string(args[1])
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
	x.c.WriteArray(14)
	x.c.WriteBulkString("server")
	x.c.WriteBulkString("redis")
	x.c.WriteBulkString("version")
	x.c.WriteBulkString("7.0.0-tidekv")
	x.c.WriteBulkString("proto")
	x.c.WriteInt(2)
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
	if x.s.cfg.Auth != nil {
		return x.authenticate(user, pass)
	}
	if x.s.cfg.Password == "" {
		x.c.WriteError("ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?")
		return false
	}
	if (user != nil && string(user) != "default") || string(pass) != x.s.cfg.Password {
		x.c.WriteError("WRONGPASS invalid username-password pair or user is disabled.")
		return false
	}
	x.st.authed, x.st.user, x.st.access = true, "default", AccessWrite
	return true
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

// ---- strings ----

func cmdGet(x *call) {
	v, err := x.kv.Get(x.ctx, encKey(x.args[1]))
	switch {
	case errors.Is(err, ErrNotFound):
		x.c.WriteNull()
	case err != nil:
		replyErr(x.c, err)
	case isHashMarker(v):
		x.c.WriteError(errWrongType)
	default:
		x.c.WriteBulk(v)
	}
}

func cmdIncr(x *call) {
	delta := int64(1)
	switch x.name {
	case "decr":
		delta = -1
	case "incrby", "decrby":
		d, err := strconv.ParseInt(string(x.args[2]), 10, 64)
		if err != nil || (x.name == "decrby" && d == math.MinInt64) {
			x.c.WriteError(errNotInt)
			return
		}
		if x.name == "decrby" {
			d = -d
		}
		delta = d
	}
	var result int64
	// The counter keeps its TTL, as in Redis.
	_, _, _, err := x.casLoop(encKey(x.args[1]), Expiry{Keep: true}, func(cur []byte, exists bool) ([]byte, bool, string) {
		var n int64
		if exists {
			if isHashMarker(cur) {
				return nil, false, errWrongType
			}
			v, err := strconv.ParseInt(string(cur), 10, 64)
			if err != nil || strconv.FormatInt(v, 10) != string(cur) {
				return nil, false, errNotInt
			}
			n = v
		}
		if (delta > 0 && n > math.MaxInt64-delta) || (delta < 0 && n < math.MinInt64-delta) {
			return nil, false, "ERR increment or decrement would overflow"
		}
		result = n + delta
		return []byte(strconv.FormatInt(result, 10)), true, ""
	})
	if err != nil {
		writeCASErr(x.c, err)
		return
	}
	x.c.WriteInt64(result)
}

func cmdDel(x *call) {
	n := 0
	for _, k := range x.args[1:] {
		existed, err := x.deleteKey(k)
		if err != nil {
			replyErr(x.c, err)
			return
		}
		if existed {
			n++
		}
	}
	x.c.WriteInt(n)
}

// deleteKey deletes key k, a string or a hash with its fields, and reports
// whether it existed.
func (x *call) deleteKey(k []byte) (bool, error) {
	existed, err := x.kv.Delete(x.ctx, encKey(k))
	if err != nil || !existed {
		return existed, err
	}
	// The key may have been a hash: remove its fields too.
	return true, x.clearFields(k)
}

// clearFields deletes every field of hash h (not its marker). A KV that
// cannot scan holds no hashes.
func (x *call) clearFields(h []byte) error {
	start, end := fieldPrefix(h), fieldsEnd(h)
	for {
		kvs, err := x.kv.Scan(x.ctx, start, end, x.s.cfg.MaxBatchKeys)
		if errors.Is(err, ErrUnordered) {
			return nil
		}
		if err != nil || len(kvs) == 0 {
			return err
		}
		ops := make([]Op, len(kvs))
		for i, kv := range kvs {
			ops[i] = Op{Key: kv.Key, Delete: true}
		}
		if err := x.write(ops); err != nil {
			return err
		}
		if len(kvs) < x.s.cfg.MaxBatchKeys {
			return nil
		}
		start = append(append([]byte(nil), kvs[len(kvs)-1].Key...), 0)
	}
}

// batchGet reads keys in batches of at most MaxBatchKeys.
func (x *call) batchGet(keys [][]byte) ([]Result, error) {
	out := make([]Result, 0, len(keys))
	for len(keys) > 0 {
		n := min(len(keys), x.s.cfg.MaxBatchKeys)
		r, err := x.kv.BatchGet(x.ctx, keys[:n])
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

func cmdExists(x *call) {
	n := 0
	ok := true
	x.readArgs(func(_ int, rs []Result, err error) bool {
		if err != nil {
			replyErr(x.c, err)
			ok = false
			return false
		}
		for _, r := range rs {
			if r.Found {
				n++
			}
		}
		return true
	})
	if ok {
		x.c.WriteInt(n)
	}
}

func cmdType(x *call) {
	v, err := x.kv.Get(x.ctx, encKey(x.args[1]))
	switch {
	case errors.Is(err, ErrNotFound):
		x.c.WriteString("none")
	case err != nil:
		replyErr(x.c, err)
	case isHashMarker(v):
		x.c.WriteString("hash")
	default:
		x.c.WriteString("string")
	}
}

// cmdMGet replies batch by batch. A batch that fails after the first has
// been written answers each of its keys with the error, as an element of
// the array (RESP allows it; EXEC does the same), and ends the command.
func cmdMGet(x *call) {
	keys := len(x.args) - 1
	x.readArgs(func(done int, rs []Result, err error) bool {
		switch {
		case err != nil && done == 0:
			replyErr(x.c, err)
			return false
		case err != nil:
			for range keys - done {
				replyErr(x.c, err)
			}
			return false
		case done == 0:
			x.c.WriteArray(keys)
		}
		for _, r := range rs {
			if r.Found && !isHashMarker(r.Value) {
				x.c.WriteBulk(r.Value)
			} else {
				x.c.WriteNull()
			}
		}
		return true
	})
}

func cmdMSet(x *call) {
	if len(x.args)%2 != 1 {
		x.c.WriteError(errArity(x.name))
		return
	}
	ops := make([]Op, 0, len(x.args)/2)
	for i := 1; i < len(x.args); i += 2 {
		if isHashMarker(x.args[i+1]) {
			x.c.WriteError(errReserved)
			return
		}
		ops = append(ops, Op{Key: encKey(x.args[i]), Value: x.args[i+1]})
	}
	if err := x.write(ops); err != nil {
		replyErr(x.c, err)
		return
	}
	x.c.WriteString("OK")
}

// ---- hashes ----

// hashState reads hash h's marker and the given fields in one BatchGet. It
// writes WRONGTYPE and returns ok=false if h holds a string.
func (x *call) hashState(h []byte, fields [][]byte) (exists bool, vals []Result, ok bool) {
	keys := make([][]byte, 0, 1+len(fields))
	keys = append(keys, encKey(h))
	for _, f := range fields {
		keys = append(keys, fieldKey(h, f))
	}
	rs, err := x.batchGet(keys)
	if err != nil {
		replyErr(x.c, err)
		return false, nil, false
	}
	if rs[0].Found && !isHashMarker(rs[0].Value) {
		x.c.WriteError(errWrongType)
		return false, nil, false
	}
	if !rs[0].Found {
		// Without its marker the hash does not exist; any fields left
		// behind (after SET or DEL) are stale.
		for i := range rs[1:] {
			rs[1+i] = Result{}
		}
	}
	return rs[0].Found, rs[1:], true
}

func cmdHSet(x *call) {
	if len(x.args)%2 != 0 {
		x.c.WriteError(errArity(x.name))
		return
	}
	h := x.args[1]
	var fields [][]byte
	vals := map[string][]byte{}
	for i := 2; i < len(x.args); i += 2 {
		f := string(x.args[i])
		if _, dup := vals[f]; !dup {
			fields = append(fields, x.args[i])
		}
		vals[f] = x.args[i+1]
	}
	if !x.hsetOneStep(h, fields, vals) {
		x.hsetReadThenWrite(h, fields, vals)
	}
}

// replyHSet answers HSET with the number of new fields, HMSET with OK.
func (x *call) replyHSet(added int) {
	if x.name == "hmset" {
		x.c.WriteString("OK")
	} else {
		x.c.WriteInt(added)
	}
}

// hashOps are the writes of HSET: the marker, then each field.
func hashOps(h []byte, fields [][]byte, vals map[string][]byte) []Op {
	ops := make([]Op, 0, 1+len(fields))
	// The marker keeps the hash's TTL, as in Redis.
	ops = append(ops, Op{Key: encKey(h), Value: hashMarker, Expiry: Expiry{Keep: true}})
	for _, f := range fields {
		ops = append(ops, Op{Key: fieldKey(h, f), Value: vals[string(f)]})
	}
	return ops
}

// hsetOneStep writes the hash in one guarded write: the store checks the
// marker (WRONGTYPE on a string), clears stale fields if the hash is new,
// and says which fields existed. It returns false, having replied nothing,
// when the write cannot be one step (too many fields for one write, or the
// hash spans ranges).
func (x *call) hsetOneStep(h []byte, fields [][]byte, vals map[string][]byte) bool {
	if 1+len(fields) > x.s.cfg.MaxBatchKeys {
		return false
	}
	g := Guard{Key: encKey(h), Value: hashMarker, ClearStart: fieldPrefix(h), ClearEnd: fieldsEnd(h)}
	res, err := x.kv.GuardedWrite(x.ctx, hashOps(h, fields, vals), g)
	switch {
	case errors.Is(err, ErrInvalidArgument):
		return false
	case err != nil:
		replyErr(x.c, err)
	case res.Failed:
		x.c.WriteError(errWrongType)
	default:
		added := 0
		for _, existed := range res.Existed[1:] {
			if !existed {
				added++
			}
		}
		x.replyHSet(added)
	}
	return true
}

// hsetReadThenWrite is HSET for hashes one write cannot cover: read the
// marker and fields, clear stale fields of a new hash, then write in
// batches.
func (x *call) hsetReadThenWrite(h []byte, fields [][]byte, vals map[string][]byte) {
	exists, cur, ok := x.hashState(h, fields)
	if !ok {
		return
	}
	if !exists {
		if err := x.clearFields(h); err != nil {
			replyErr(x.c, err)
			return
		}
	}
	added := 0
	for i := range fields {
		if !cur[i].Found {
			added++
		}
	}
	if err := x.write(hashOps(h, fields, vals)); err != nil {
		replyErr(x.c, err)
		return
	}
	x.replyHSet(added)
}

func cmdHGet(x *call) {
	_, rs, ok := x.hashState(x.args[1], x.args[2:3])
	if !ok {
		return
	}
	if rs[0].Found {
		x.c.WriteBulk(rs[0].Value)
	} else {
		x.c.WriteNull()
	}
}

func cmdHExists(x *call) {
	_, rs, ok := x.hashState(x.args[1], x.args[2:3])
	if !ok {
		return
	}
	if rs[0].Found {
		x.c.WriteInt(1)
	} else {
		x.c.WriteInt(0)
	}
}

func cmdHMGet(x *call) {
	_, rs, ok := x.hashState(x.args[1], x.args[2:])
	if !ok {
		return
	}
	x.c.WriteArray(len(rs))
	for _, r := range rs {
		if r.Found {
			x.c.WriteBulk(r.Value)
		} else {
			x.c.WriteNull()
		}
	}
}

// cmdHGetAll serves HGETALL, HKEYS, HVALS and HLEN with a range scan over
// [enc(h), enc(h) 0x00 0x02): the marker followed by the fields. A hash
// whose fields exceed the output buffer is refused (HLEN only counts, so it
// reads page by page, holding one page).
func cmdHGetAll(x *call) {
	h := x.args[1]
	budget := x.s.cfg.MaxOutputBuffer
	if x.name == "hlen" {
		budget = -1
	}
	kvs, n, err := x.readSpan(encKey(h), fieldsEnd(h), budget)
	if errors.Is(err, errReplyTooLarge) {
		x.c.WriteError(fmt.Sprintf("ERR hash of more than %d bytes: %s replies at most the output buffer limit (--redis-max-output-buffer); read it with HMGET in parts", budget, strings.ToUpper(x.name)))
		return
	}
	if err != nil {
		replyErr(x.c, err)
		return
	}
	if len(kvs) == 0 || !bytes.Equal(kvs[0].Key, encKey(h)) {
		kvs = nil // no marker: no hash (any fields are stale)
	} else if !isHashMarker(kvs[0].Value) {
		x.c.WriteError(errWrongType)
		return
	} else {
		kvs = kvs[1:]
	}
	pre := fieldPrefix(h)
	switch x.name {
	case "hlen":
		if kvs == nil {
			n = 0
		}
		x.c.WriteInt(max(n-1, 0))
	case "hkeys":
		x.c.WriteArray(len(kvs))
		for _, kv := range kvs {
			x.c.WriteBulk(kv.Key[len(pre):])
		}
	case "hvals":
		x.c.WriteArray(len(kvs))
		for _, kv := range kvs {
			x.c.WriteBulk(kv.Value)
		}
	default:
		x.c.WriteArray(2 * len(kvs))
		for _, kv := range kvs {
			x.c.WriteBulk(kv.Key[len(pre):])
			x.c.WriteBulk(kv.Value)
		}
	}
}

func cmdHDel(x *call) {
	h := x.args[1]
	exists, rs, ok := x.hashState(h, x.args[2:])
	if !ok {
		return
	}
	if !exists {
		x.c.WriteInt(0)
		return
	}
	n := 0
	seen := map[string]bool{}
	var ops []Op
	for i, f := range x.args[2:] {
		if rs[i].Found && !seen[string(f)] {
			seen[string(f)] = true
			n++
			ops = append(ops, Op{Key: fieldKey(h, f), Delete: true})
		}
	}
	if len(ops) > 0 {
		if err := x.write(ops); err != nil {
			replyErr(x.c, err)
			return
		}
		// The last field gone, the hash goes too.
		left, err := x.kv.Scan(x.ctx, fieldPrefix(h), fieldsEnd(h), 1)
		if err != nil {
			replyErr(x.c, err)
			return
		}
		if len(left) == 0 {
			m := hashMarker
			if _, _, _, err := x.kv.CompareAndSet(x.ctx, encKey(h), &m, nil, Expiry{}); err != nil {
				replyErr(x.c, err)
				return
			}
		}
	}
	x.c.WriteInt(n)
}
