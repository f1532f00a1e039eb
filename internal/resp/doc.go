// Package resp is TideKV's Redis-protocol front end: a RESP2 and RESP3
// server (its own connection loop and request reader, server.go and
// reader.go; replies in output.go, RESP3's types in resp3.go) that maps Redis commands onto a small KV
// interface. It owns the protocol mapping only: command parsing, replies,
// Redis-style errors, the encoding of Redis types into ordered keys, and
// SCAN cursors. Routing, limits and admission control belong to the KV
// behind it. A node's KV (internal/server's redisKV) runs commands on ranges
// the node leads in process, through the node's typed KV API, and sends the
// rest through the routing client that internal/redisgw adapts.
//
// Imports: the standard library and gopher-lua (the scripts' Lua,
// scripting.go). No SDK and nothing under
// internal/: the KV interface is defined here, by its consumer, and tests
// use an in-memory fake.
//
// # Commands
//
// Connection: PING [msg], ECHO, QUIT, SELECT n (0 is the Server's KV,
// others what Server.SetDatabases maps them to: a TideKV node maps n to key
// space number n, docs/keyspaces.md), AUTH [user] password (when Config.Auth is set, every
// command but AUTH, HELLO and QUIT gets "NOAUTH Authentication required."
// until then; AUTH user password names one of its users, AUTH password the
// user "default",
// and a read-only user gets "NOPERM User u has no permissions to run the
// 'set' command" for writes: acl.go), HELLO [2|3] [AUTH user pass] [SETNAME name] (HELLO 3
// switches the connection to RESP3: maps, sets, doubles, nulls and
// verbatim strings where Redis 7.0 sends them, resp3.go), CLIENT SETNAME/GETNAME/ID/SETINFO/
// INFO/LIST/KILL (clients.go),
// COMMAND, COMMAND INFO/DOCS/LIST/COUNT/GETKEYS (the command table with
// arities, flags and key positions: commandinfo.go),
// TIME (Config.Now), INFO [section ...] (a "# Server" section with
// redis_version:7.0.0-tidekv; the node's commandstats and errorstats,
// zeroed by CONFIG RESETSTAT: stats.go), CONFIG GET (what client libraries and
// redis-benchmark read at start: clients.go), CONFIG SET (Redis's encoding
// thresholds, kept and inert, and fixed settings to their own value:
// config.go), FUNCTION for an empty library (scripting.go), MEMORY USAGE
// (memory.go).
//
// Scripting (scripting.go; lua.go the sandbox and conversions,
// scriptcache.go, scriptrun.go): EVAL, EVALSHA, EVAL_RO, EVALSHA_RO and
// SCRIPT LOAD/EXISTS/FLUSH/KILL run Lua 5.1 (gopher-lua) as Redis 7.0
// does. A script is one KV.Txn: its redis.call runs commands over a
// txView of it, as EXEC's queue does, so it reads its own writes and
// commits them at once; a conflict runs the whole script again. Each run
// has a fresh sandboxed Lua state with read-only globals, and is stopped,
// applying nothing, past Config.ScriptTimeLimit (counted through the VM's
// context every 1,024 instructions) or by SCRIPT KILL. Compiled scripts
// are cached per node, bounded by Config.ScriptCacheBytes. FUNCTION
// LOAD and FCALL are not served.
//
// Whole database (database.go): KEYS (a full scan), FLUSHDB and FLUSHALL
// (scan and batched deletes; AccessAdmin), RANDOMKEY, RENAME, RENAMENX
// and COPY (any type, a collection's elements with it, one KV.Txn each),
// OBJECT ENCODING and REFCOUNT, SORT and SORT_RO (sort.go: BY, GET, LIMIT, ALPHA,
// STORE; one KV.Txn), DUMP and RESTORE (dump.go: a payload of TideKV's
// own, by Redis type, with a version byte and a CRC-64; one KV.Txn each).
//
// Strings: GET, SET key value [NX|XX] [GET] [EX s|PX ms|EXAT t|PXAT t|KEEPTTL],
// SETNX, SETEX, PSETEX, GETSET, GETDEL, GETEX, APPEND, STRLEN, GETRANGE
// (SUBSTR), SETRANGE, GETBIT, SETBIT, DEL/UNLINK, EXISTS, TYPE, DBSIZE, MGET, MSET,
// MSETNX, INCR, DECR, INCRBY, DECRBY, INCRBYFLOAT (long double arithmetic
// as Redis on x86-64: float.go). Plain SET and SETEX are one Put (a TTL
// with it one Write); SET with NX/XX/GET, GETSET, GETDEL, GETEX with an
// option, APPEND, SETRANGE and INCRBYFLOAT are compare-and-set loops (at
// most Config.CASAttempts rounds), so they are atomic per key; INCR, DECR,
// INCRBY and DECRBY are one Incrementer.Increment when the KV has one
// (concurrent counters on one key then never retry), else such a loop;
// MSETNX is one KV.Txn. DBSIZE scans the database. docs/redis.md lists every
// command; internal/testutil/redisdiff compares them with redis-server.
//
// Expiry (expiry.go, set.go; docs/expiry.md): EXPIRE, PEXPIRE, EXPIREAT,
// PEXPIREAT (with NX/XX/GT/LT, expirecond.go), TTL, PTTL, EXPIRETIME,
// PEXPIRETIME, PERSIST. The store fixes a
// value's expiry when it orders the write; a plain SET clears a TTL, INCR
// and HSET keep it, and a hash's TTL is its marker's.
// MSET is atomic, as in Redis: one Write when its keys lie in one range
// and are at most Config.MaxBatchKeys, else one KV.Txn. DEL and UNLINK of
// several keys are one KV.Txn (keys.go), a hash's fields or a
// collection's elements removed after it as garbage, MaxBatchKeys keys at
// a time, each batch one write guarded on the key's absence (one KV.Txn
// where the key and the batch span ranges): a command making the key anew
// meanwhile stops the clearing and keeps every element it wrote. A KV.Txn writes any number of keys up to the store's transaction
// limits (10,000 keys and 16 MiB on a node): a command is never cut into
// parts at MaxBatchKeys, which bounds one request of the KV only.
//
// Hashes: HSET/HMSET, HGET, HMGET, HGETALL, HKEYS, HVALS, HLEN, HDEL,
// HEXISTS, and (hashfield.go) HINCRBY, HINCRBYFLOAT and HSETNX (one
// KV.Txn each: atomic on the field), HSTRLEN, HRANDFIELD, HSCAN.
//
// Sorted sets (zset.go, zsetremove.go, zsetscan.go; encoding in
// zsetkeys.go): ZADD (NX XX GT LT CH INCR), ZINCRBY, ZREM, ZSCORE,
// ZMSCORE, ZCARD, ZCOUNT, ZLEXCOUNT, ZRANK, ZREVRANK, ZRANGE (BYSCORE
// BYLEX REV LIMIT WITHSCORES) and its older forms, ZPOPMIN, ZPOPMAX,
// ZMPOP and the blocking BZPOPMIN, BZPOPMAX and BZMPOP (zsetblock.go),
// ZREMRANGEBYSCORE/RANK/LEX, ZSCAN, ZRANGESTORE, ZRANDMEMBER
// (zsetrand.go), and (zsetalgebra.go) ZUNION, ZINTER, ZDIFF, their STORE
// forms, ZINTERCARD and SINTERCARD, which read every input whole in one
// KV.Txn and write a destination in it. Every write is one KV.Txn that reads
// the metadata and the members it touches and writes member keys, index
// entries and the count together; reads are a BatchGet (ZSCORE) or a
// walk of the score index that reads what it answers plus what it skips.
// The transactions of commands writing one list, set or sorted set run in
// batches, one transaction each (combine.go), not side by side.
//
// Streams (stream.go; reads in streamread.go): XADD, XLEN, XRANGE,
// XREVRANGE, XDEL, XTRIM, XSETID, XREAD (BLOCK waits as the list pops do,
// blocked.go, but an XADD wakes every client reading the key) and XINFO
// STREAM/GROUPS/CONSUMERS; consumer groups (streamgroup.go, commands in
// streamgroupcmd.go, streamclaim.go): XGROUP, XREADGROUP, XACK, XPENDING,
// XCLAIM, XAUTOCLAIM, their state and PEL kept under the stream's
// posGen(gen). XINFO's and XGROUP's subcommands (arity, HELP) are tables
// (subcommands.go). The last ID, entries added
// and greatest ID deleted live in the metadata, written in the keyTxn that
// writes the entry, so IDs grow per stream across leader changes; XADD *
// takes the node's clock but never goes below the last ID. XRANGE with
// COUNT n scans n entry keys; XREVRANGE scans widening windows of IDs
// below its end.
//
// Transactions (multi.go, txview.go; docs/transactions.md): MULTI, EXEC,
// DISCARD, WATCH, UNWATCH, with Redis's replies and errors. Queued
// commands are checked as they arrive (unknown, arity, NOPERM, SET's and
// MSET's syntax, a command EXEC cannot run): a refusal makes EXEC answer
// EXECABORT. EXEC runs the queue as one KV.Txn, a serializable
// transaction, each command reading the earlier ones' writes; a runtime
// error (WRONGTYPE, not an integer) is that command's reply and the others
// commit. EXEC runs every command but those of notInMulti (multi.go:
// SELECT, AUTH, HELLO, CLIENT, INFO, CONFIG, COMMAND, FLUSHDB, FLUSHALL,
// TKV.RANGE), in any database, hashes, lists, sets and sorted sets
// included: their scans are the transaction's (TxnKV.Scan), a guarded
// write takes its read-and-write path, and a command's own KV.Txn runs on
// a savepoint (txview.go), so a command that fails writes nothing. TTLs inside EXEC are Redis's: a transaction's read gives
// the value's expiry (Result.Expiry), which KEEPTTL and the counters
// write again, and EXPIRE and PERSIST write the value read with the new
// one (docs/redis.md). WATCH remembers each key's version (Result.Version) and a
// digest of its value (or its absence); EXEC reads the keys again inside
// the transaction and answers the null array, applying nothing, if one
// differs.
//
// Scans: SCAN cursor [MATCH pattern] [COUNT n] [TYPE string|hash|list|set|zset|stream] walks the
// whole key space in key order; COUNT bounds the stored keys read per call
// (default 10). Cursors are unsigned integers (what redis-cli and go-redis
// expect) naming a resume key kept by the serving node for Config.CursorTTL;
// a cursor is valid only on the node that issued it. TKV.RANGE start end
// [LIMIT n] is TideKV's ordered range read (Redis has none): the string keys
// in [start, end) in key order, as a flat array key1 value1 key2 value2 ...;
// an empty end means no upper bound; LIMIT defaults to and is capped at
// Config.MaxScanCount; hashes are skipped.
//
// Errors from the KV, each one sentence: not found is a nil reply;
// ErrInvalidArgument is "ERR invalid argument: <reason>" (a value over the
// node's maximum value size: "ERR invalid argument: value of N bytes is too
// large (the maximum value size is M bytes)"); ErrOverloaded is
// "TRYAGAIN overloaded, retry after N ms", a prefix Redis client libraries
// retry, N the node's hint (OverloadedError, an admission refusal) or
// DefaultRetryAfter; ErrAmbiguous is "ERR ambiguous result: the write may
// or may not have been applied"; ErrUnavailable is "ERR unavailable: no
// replica could serve the command, retry"; a deadline is "ERR timeout: the
// command did not complete in time".
//
// Request limits (Config.MaxBulkLen, MaxArgs, MaxInlineLen, MaxCommandLen,
// MaxConns): a request over one is refused at its header, before its
// payload is read, with one reply naming the limit ("ERR Protocol error:
// bulk string of N bytes is too large (the maximum is M bytes)"), and the
// connection is closed; a connection beyond MaxConns gets "ERR max number
// of clients reached (the maximum is N connections)". See limits.go.
//
// Output limits (Config.MaxOutputBuffer, OutputTimeout; output.go): the
// node holds at most MaxOutputBuffer bytes of replies for a client (plus
// one reply) and writes them out when they reach it; a client that does
// not take a write within OutputTimeout is disconnected. Values are read
// for a client MaxOutputBuffer/MaxBulkLen keys at a time (pipelined GETs,
// MGET, EXISTS), so what a client that does not read holds stays near
// MaxOutputBuffer too.
//
// Pipelining (pipeline.go): the connection's reader parses every whole
// command a client has sent (reader.go: into a buffer of its own, the
// arguments slices of it, never copied); they are served in order on the
// connection's goroutine, and their replies written together. A run of
// consecutive plain GET, SET key value and one-key DEL/UNLINK commands is served
// together: its consecutive writes as one KV.WriteEach (the node writes the
// ops of each range it leads in one Raft proposal), its consecutive reads
// as BatchGets of up to MaxOutputBuffer/MaxBulkLen keys, alternately in arrival order, so a read sees the writes
// sent before it. Every other command (SET with options, INCR, HSET, MGET,
// AUTH, ...) runs alone in its place and ends the run. Each command gets
// its own reply, an error only for itself (an invalid value fails its SET
// alone); QUIT drops what follows it. A DEL that removed a key still scans
// for hash fields afterwards, as it does alone.
//
// # Key encoding
//
// A Redis key k is stored under enc(k): k with every 0x00 byte written as
// 0x00 0xFF. Keys without 0x00 (nearly all) are stored unchanged, so TideKV's
// other clients see the same strings; enc keeps key order, so TKV.RANGE and
// SCAN are plain range scans. An enc'd key never holds 0x00 followed by
// anything but 0xFF.
//
//	string k          enc(k)                 -> value
//	hash h (marker)   enc(h)                 -> hashMarker ("\xffTideKV:hash\x00\x01\xfe")
//	field f of h      enc(h) 0x00 0x01 f     -> value
//	list or set k     enc(k)                 -> "\xffTideKV:list|set\x00\x01\xfe" gen ver a b
//	list element i    enc(k) 0x00 0x01 gen i -> value (gen, i: big-endian uint64)
//	set member m      enc(k) 0x00 0x01 gen m -> its position i (8 bytes; "" in a set not numbered, b 0)
//	set position i    enc(k) 0x00 0x01 gen' i -> the member at i (gen' = gen ^ 1<<63; sets.go)
//	sorted set z      enc(z)                 -> zsetMarker + count (8 bytes) + start hint
//	member m of z     enc(z) 0x00 0x01 0x01 m            -> score (8 bytes)
//	index entry       enc(z) 0x00 0x01 0x02 sort(s) m    -> score (8 bytes)
//	stream x          enc(x)                 -> streamMarker gen ver length last added maxDeleted
//	entry ms-seq      enc(x) 0x00 0x01 gen ms seq -> ordinal, fields and values (stream.go)
//	group state, PEL  enc(x) 0x00 0x01 posGen(gen) tag ... (streamgroup.go)
//
// Positions and start hints are written only once the KV says every
// node's front end keeps them (SetPositioner, Raft log version 13); until
// then sets are not numbered and sorted sets have no hint.
//
// The fields of h are the span [enc(h) 0x00 0x01, enc(h) 0x00 0x02), right
// after the marker, so HGETALL is one range scan of [enc(h), enc(h) 0x00
// 0x02). No string key and no other hash's field can fall in that span,
// because enc never yields 0x00 0x01. The marker's value tells a hash from a
// string: strings starting with "\xffTideKV:", the prefix of every
// marker, are refused ("ERR value is reserved"), so GET on a hash, list or
// set reliably gets WRONGTYPE, and so do their commands on a string. Without its marker a hash does not exist: SET over a
// hash replaces it (as in Redis) and leaves its fields as unreachable
// garbage, which the next HSET creating that hash, or DEL, removes. HDEL of
// the last field removes the marker. A sorted set's keys lie in the same
// span, so the same holds for it (ZADD creating a set clears the span
// first); its metadata is a reserved string value too.
//
// HSET and HMSET are one step: one guarded write (KV.GuardedWrite) of the
// marker and the fields, which the store evaluates atomically when it
// applies it. It fails, writing nothing, if the marker's key holds a string
// (WRONGTYPE); if the hash is new, it first deletes the span's garbage; and
// it reports which fields existed, so HSET returns Redis's count of new
// fields without reading first. Only a hash whose marker and fields lie in
// different ranges, or an HSET of more than Config.MaxBatchKeys-1 fields,
// is one KV.Txn instead, which reads the marker and fields and writes
// them. HGET,
// HMGET and HEXISTS are one read (the marker and the fields in one
// BatchGet); HGETALL, HKEYS, HVALS and HLEN one scan. HDEL reads first
// (its count needs it, and the last field takes the marker with it), then
// writes, or, for MaxBatchKeys fields or more, is one KV.Txn.
//
// # Known limits
//
// Hash commands other than HSET and an HDEL of MaxBatchKeys fields or
// more are not atomic against each other across several keys of one
// hash: a concurrent HDEL of a hash's last field and HSET of a new one
// can leave the hash missing fields (a DEL's clearing of the fields it
// left cannot: it stops once the hash exists again). Each single field write is atomic. Sorted-set writes are atomic; ZADD creating a
// set clears an earlier set's leftovers in its own transaction, or, past
// zStaleInTxn of them, first in one guarded write, or, when the set's keys
// span ranges, by DEL's guarded clearing. There is no eviction and no pub/sub (RESP3's push replies are never sent).
//
// Transactions: EXEC cannot run notInMulti's commands: each is refused
// when queued and aborts the transaction. EXPIRE and PERSIST inside EXEC write
// the value again (a new version) where Redis changes only the TTL. DEL of
// a collection inside EXEC clears its elements in the transaction itself
// (clearWhileAbsent). Where a read gives
// no version (an unversioned range, a read-through value, an older node),
// WATCH compares values only: a key set back to the value WATCH saw is then
// not seen as changed, where Redis would abort. A failure of the store inside EXEC (overloaded, a
// value over the size limit, an empty key, the transaction giving up
// after its retries of conflicts) fails EXEC as a whole with that error
// and applies nothing, where Redis has no such failures; conflicts are
// retried inside (client.Txn, MaxTxnAttempts) and never answered. EXEC
// holds its replies until the commit, at most MaxOutputBuffer bytes.
// A plain read (GET,
// WATCH) of a key a running transaction has written waits for it up to
// the node's intent wait, then answers an error ending in "retry". MULTI's
// queue and the watched keys are bounded (Config.MaxMultiCommands,
// MaxMultiBytes); past that the queue is dropped and the rest of the
// transaction is refused, not run, so a pipelined transaction never runs
// in part.
//
// It imports no TideKV package but itself (no SDK, API or node code), and of
// other modules only gopher-lua (internal/lint);
// the node adapts its KV to resp.KV (internal/redisgw).
package resp
