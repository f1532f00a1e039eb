package resp

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/redis/go-redis/v9"

	"github.com/tidekv/tidekv/internal/testutil/redisdiff"
)

// TestScripts runs testdata/scripting: what TideKV's scripts do beyond
// Redis's replies (those the differential test's eval.txt compares):
// transactions and their retries, the time limit, the cache's bound.
//
//	config [time-limit=D] [clock-step=D] [cache-bytes=N]
//	    a new server over a new in-memory KV; with clock-step its clock
//	    moves on by D each time it is read
//	conflicts n=N        the KV's next N transaction attempts conflict
//	run                  the commands of the input, one a line (redisdiff's
//	                     script syntax), each reply on a line
//	eval [ro] [keys=(k,…)] [args=(a,…)]   EVAL or EVAL_RO of the input
func TestScripts(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		var (
			kv *fakeKV
			s  *Server
		)
		restart := func(mod func(*Config)) {
			kv = newFakeKV()
			s, _ = start(t, kv, mod, nil)
		}
		restart(nil)
		datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) string {
			switch td.Cmd {
			case "config":
				var limit, step time.Duration
				var cache int
				for _, a := range td.CmdArgs {
					v := a.Vals[0]
					switch a.Key {
					case "time-limit":
						limit = must(time.ParseDuration(v))
					case "clock-step":
						step = must(time.ParseDuration(v))
					case "cache-bytes":
						cache = must(strconv.Atoi(v))
					}
				}
				restart(func(c *Config) {
					if limit > 0 {
						c.ScriptTimeLimit = limit
					}
					if cache > 0 {
						c.ScriptCacheBytes = cache
					}
					if step > 0 {
						var mu sync.Mutex
						now := time.Unix(1e9, 0)
						c.Now = func() time.Time {
							mu.Lock()
							defer mu.Unlock()
							now = now.Add(step)
							return now
						}
					}
				})
				return ""
			case "conflicts":
				var n int
				td.ScanArgs(t, "n", &n)
				kv.mu.Lock()
				kv.conflicts = n
				kv.mu.Unlock()
				return ""
			case "run":
				sc, err := redisdiff.Parse(path, td.Input)
				if err != nil {
					t.Fatal(err)
				}
				var cmds [][]string
				for _, st := range sc.Steps {
					cmds = append(cmds, st.Args)
				}
				return strings.Join(pipeline(t, s, cmds...), "\n") + "\n"
			case "eval":
				cmd := []string{"EVAL", td.Input}
				var keys, args []string
				for _, a := range td.CmdArgs {
					switch a.Key {
					case "ro":
						cmd[0] = "EVAL_RO"
					case "keys":
						keys = a.Vals
					case "args":
						args = a.Vals
					}
				}
				cmd = append(append(append(cmd, strconv.Itoa(len(keys))), keys...), args...)
				return pipeline(t, s, cmd)[0] + "\n"
			}
			t.Fatalf("unknown command %s", td.Cmd)
			return ""
		})
	})
}

// SCRIPT KILL stops a script running on the node, which then applies
// nothing it wrote; with none running it answers NOTBUSY.
func TestScriptKill(t *testing.T) {
	s, _ := start(t, newFakeKV(), func(c *Config) { c.ScriptTimeLimit = time.Minute; c.RequestTimeout = time.Minute }, nil)
	done := make(chan []string)
	go func() {
		done <- pipeline(t, s, []string{"EVAL", "redis.call('set', 'k', 'v') while true do end", "0"}, []string{"GET", "k"})
	}()
	for {
		s.running.mu.Lock()
		n := len(s.running.set)
		s.running.mu.Unlock()
		if n == 1 {
			break
		}
		time.Sleep(time.Millisecond) // until the script runs: a state, not a time
	}
	eqReplies(t, pipeline(t, s, []string{"SCRIPT", "KILL"}), []string{"+OK"})
	eqReplies(t, <-done, []string{
		"-ERR Script killed by user with SCRIPT KILL; nothing it wrote was applied script: 568b86d2fd65cc68609ed729cb9cfb854214362f, on @user_script:1.",
		"$<nil>",
	})
	eqReplies(t, pipeline(t, s, []string{"SCRIPT", "KILL"}), []string{"-NOTBUSY No scripts in execution right now."})
}

// A read-only user may run EVAL_RO's reads, and neither EVAL nor a write
// from EVAL_RO.
func TestScriptsOfAReadOnlyUser(t *testing.T) {
	s, _ := start(t, newFakeKV(), func(c *Config) { c.Auth = users{"r": {"pw", AccessRead}} }, nil)
	eqReplies(t, pipeline(t, s,
		[]string{"AUTH", "r", "pw"},
		[]string{"EVAL", "return 1", "0"},
		[]string{"EVAL_RO", "return redis.call('get', 'k')", "0"},
		[]string{"EVAL_RO", "return redis.call('set', 'k', 'v')", "0"},
	), []string{
		"+OK",
		"-NOPERM User r has no permissions to run the 'eval' command",
		"$<nil>",
		"-NOPERM User r has no permissions to run the 'set' command script: 2d991be581da74a0c0c441c4beb92ae41c2e1eb9, on @user_script:1.",
	})
}

// BenchmarkEvalSHA measures one EVALSHA of a script that reads and writes
// a key, over the in-memory KV: a pooled Lua state readied per run, the
// transaction, the conversions.
func BenchmarkEvalSHA(b *testing.B) {
	cfg := DefaultConfig()
	cfg.ListenAddr = "127.0.0.1:0"
	s := must(New(cfg, newFakeKV()))
	go s.Serve()
	defer s.Close()
	rc := redis.NewClient(&redis.Options{Addr: s.Addr().String()})
	defer rc.Close()
	ctx := context.Background()
	sha := must(rc.ScriptLoad(ctx, "return redis.call('incr', KEYS[1])").Result())
	b.ResetTimer()
	for range b.N {
		if err := rc.EvalSha(ctx, sha, []string{"k"}).Err(); err != nil {
			b.Fatal(err)
		}
	}
}

// A failure of the store inside a script ends the script, whatever it
// does with the error (redis.pcall, pcall): the client gets the store's
// error and nothing the script wrote is applied.
func TestScriptStoreFailureEndsIt(t *testing.T) {
	kv := newFakeKV()
	s, _ := start(t, kv, nil, nil)
	kv.txFail = &OverloadedError{RetryAfter: 20 * time.Millisecond}
	eqReplies(t, pipeline(t, s,
		[]string{"EVAL", "redis.call('set', 'a', '1') return 'done'", "0"},
		[]string{"EVAL", "redis.pcall('set', 'a', '1') return 'caught'", "0"},
		[]string{"EVAL", "pcall(redis.call, 'set', 'a', '1') return 'caught'", "0"},
		[]string{"EVAL", "return redis.call('get', 'a')", "0"},
	), []string{
		"-TRYAGAIN overloaded, retry after 20 ms",
		"-TRYAGAIN overloaded, retry after 20 ms",
		"-TRYAGAIN overloaded, retry after 20 ms",
		"$<nil>",
	})
}

// Scripts share pooled Lua states, and a script cannot leave anything for
// the next: each way in to the globals, the libraries, the string
// metatable, other types' metatables and cjson.null fails, and the
// per-script settings (math.random's seed, cjson's, redis.setresp, KEYS)
// start anew. One state serves every script here, so each check runs in
// the state the tries ran in.
func TestLuaStatePoolCarriesNothing(t *testing.T) {
	s, rc := start(t, newFakeKV(), nil, nil)
	ctx := context.Background()
	seeded := must(rc.Eval(ctx, "math.randomseed(42) return {math.random(1, 1000000000), math.random(1, 1000000000)}", nil).Slice())
	tries := `
		local pwn = function() return 'pwned' end
		local fails = {}
		for i, try in ipairs({
			function() x = 1 end,
			function() _G.x = 1 end,
			function() rawset(_G, 'x', 1) end,
			function() table.insert(_G, 'x') end,
			function() setmetatable(_G, {}) end,
			function() getmetatable(_G).__index = {} end,
			function() string.upper = pwn end,
			function() rawset(string, 'upper', pwn) end,
			function() table.insert(string, 'x') end,
			function() table.remove(string) end,
			function() math.floor = pwn end,
			function() table.insert(math, 1) end,
			function() cjson.encode = pwn end,
			function() bit.band = pwn end,
			function() redis.call = pwn end,
			function() getmetatable('').__index = {upper = pwn} end,
			function() getmetatable('').__index.upper = pwn end,
			function() getmetatable('').x = 1 end,
			function() setmetatable('', {__index = {upper = pwn}}) end,
			function() setmetatable(1, {__index = {x = 1}}) end,
			function() setmetatable(true, {__index = {x = 1}}) end,
			function() setmetatable(cjson.null, {__index = {x = 1}}) end,
		}) do
			if pcall(try) then fails[#fails + 1] = 'try ' .. i .. ' succeeded' end
		end
		math.randomseed(42)
		math.random(1, 1000000000)
		cjson.encode_max_depth(1)
		cjson.encode_invalid_numbers(true)
		KEYS[1] = 'changed'
		redis.setresp(3)
		return fails`
	if got := must(rc.Eval(ctx, tries, []string{"k"}).Slice()); len(got) != 0 {
		t.Fatalf("the tries: %v", got)
	}
	checks := `
		local fails = {}
		local function check(ok, what) if not ok then fails[#fails + 1] = what end end
		check(not pcall(function() return x end), 'global x')
		check(rawget(_G, 1) == nil and rawget(string, 1) == nil and rawget(math, 1) == nil, 'proxy written')
		check(('a'):upper() == 'A' and string.upper('a') == 'A', 'string.upper')
		check(math.floor(1.5) == 1, 'math.floor')
		check(getmetatable(1) == nil and getmetatable(true) == nil and getmetatable(cjson.null) == nil, 'metatable')
		check(getmetatable('').__index == string and getmetatable('').x == nil, 'string metatable')
		check(pcall(cjson.encode, {{1}}), 'cjson depth')
		check(not pcall(cjson.encode, 0/0), 'cjson invalid numbers')
		check(KEYS[1] == 'k2', 'KEYS')
		check(math.random(1, 1000000000) ~= tonumber(ARGV[1]), 'random seed')
		return fails`
	if got := must(rc.Eval(ctx, checks, []string{"k2"}, seeded[1]).Slice()); len(got) != 0 {
		t.Fatalf("the checks: %v", got)
	}
	// redis.setresp(3) of the tries would answer false as RESP3's false
	// (an integer 0 to a RESP2 client).
	if err := rc.Eval(ctx, "return false", nil).Err(); err != redis.Nil {
		t.Fatalf("return false: %v, want null", err)
	}
	if n := len(s.luaStates); n != 1 {
		t.Fatalf("%d idle Lua states, want the one that ran every script", n)
	}
	// A state whose value stack grew is not kept.
	if n := must(rc.Eval(ctx, "local t = {} for i = 1, 5000 do t[i] = i end return select('#', unpack(t))", nil).Int()); n != 5000 {
		t.Fatalf("unpack: %d", n)
	}
	if n := len(s.luaStates); n != 0 {
		t.Fatalf("%d idle Lua states after a script grew its stack, want 0", n)
	}
}

// INFO counts the cached scripts and their bytes (the stock suite's SCRIPT
// FLUSH test reads number_of_cached_scripts).
func TestInfoCachedScripts(t *testing.T) {
	_, rc := start(t, newFakeKV(), nil, nil)
	ctx := context.Background()
	for i := range 3 {
		must(rc.ScriptLoad(ctx, "return "+strconv.Itoa(i)).Result())
	}
	info := must(rc.Info(ctx, "memory").Result())
	for _, want := range []string{"number_of_cached_scripts:3\r\n", "used_memory_scripts:"} {
		if !strings.Contains(info, want) {
			t.Fatalf("INFO has no %q:\n%s", want, info)
		}
	}
	must(rc.ScriptFlush(ctx).Result())
	info = must(rc.Info(ctx).Result())
	for _, want := range []string{"number_of_cached_scripts:0\r\n", "used_memory_scripts:0\r\n", "migrate_cached_sockets:0\r\n"} {
		if !strings.Contains(info, want) {
			t.Fatalf("INFO has no %q:\n%s", want, info)
		}
	}
}

// lua-time-limit (busy-reply-threshold) is taken and answered back, and
// changes nothing: no client waits for a script, so none is answered
// BUSY, and the script itself is bounded by ScriptTimeLimit.
func TestConfigBusyThreshold(t *testing.T) {
	s, _ := start(t, newFakeKV(), nil, nil)
	eqReplies(t, pipeline(t, s,
		[]string{"CONFIG", "GET", "lua-time-limit"},
		[]string{"CONFIG", "SET", "lua-time-limit", "10"},
		[]string{"CONFIG", "GET", "busy-reply-threshold"},
		[]string{"EVAL", "local n = 0 for i = 1, 1000000 do n = n + 1 end return n", "0"},
	), []string{
		"*[$lua-time-limit $5000]",
		"+OK",
		"*[$busy-reply-threshold $10]",
		":1000000",
	})
}

// cmsgpack.unpack refuses arrays and maps nested past maxMsgpackDepth
// with one sentence, and unpacks them up to it.
func TestMsgpackUnpackNestingBounded(t *testing.T) {
	_, rc := start(t, newFakeKV(), nil, nil)
	ctx := context.Background()
	nested := func(levels int) string { return strings.Repeat("\x91", levels) + "\x01" }
	depth := "local v, d = cmsgpack.unpack(ARGV[1]), 0 while type(v) == 'table' do v, d = v[1], d + 1 end return d"
	if got, err := rc.Eval(ctx, depth, nil, nested(maxMsgpackDepth)).Int(); err != nil || got != maxMsgpackDepth {
		t.Fatalf("%d levels: %v, %v", maxMsgpackDepth, got, err)
	}
	for _, in := range []string{nested(maxMsgpackDepth + 1), strings.Repeat("\x81\x01", maxMsgpackDepth+1) + "\x01"} {
		if err := rc.Eval(ctx, depth, nil, in).Err(); err == nil || !strings.Contains(err.Error(), "Too many nested arrays or maps in input") {
			t.Fatalf("%d bytes nested past the bound: %v", len(in), err)
		}
	}
}

// math.random computes in floating point as Lua 5.1 and Redis do: the
// widest intervals answer a number in them instead of a Go error from an
// overflowing width, and its argument errors are Lua's.
func TestMathRandomIntervals(t *testing.T) {
	_, rc := start(t, newFakeKV(), nil, nil)
	ctx := context.Background()
	for _, iv := range [][2]string{{"-9223372036854775808", "9223372036854775807"}, {"-4611686018427387904", "8000000000000000000"}, {"-1e300", "1e300"}, {"5", "5"}, {"-3", "-1"}} {
		inside := fmt.Sprintf("local lo, hi = %s, %s local r = math.random(lo, hi) return (r >= lo and r <= hi and r == math.floor(r)) and 1 or tostring(r)", iv[0], iv[1])
		if got, err := rc.Eval(ctx, inside, nil).Result(); err != nil || got != int64(1) {
			t.Errorf("math.random(%s, %s): %v, %v", iv[0], iv[1], got, err)
		}
	}
	// Bounds that are not integers are cut to integers first, as Redis's
	// luaL_checkint cuts them.
	cut := "for i = 1, 200 do local r = math.random(1.5, 3.7) if r ~= math.floor(r) or r < 1 or r > 3 then return tostring(r) end end return 1"
	if got, err := rc.Eval(ctx, cut, nil).Result(); err != nil || got != int64(1) {
		t.Errorf("math.random(1.5, 3.7): %v, %v; want integers from 1 to 3", got, err)
	}
	for script, want := range map[string]string{
		"return math.random(0)":       "interval is empty",
		"return math.random(3, 2)":    "interval is empty",
		"return math.random(1, 2, 3)": "wrong number of arguments",
	} {
		if err := rc.Eval(ctx, script, nil).Err(); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error with %q", script, err, want)
		}
	}
}
