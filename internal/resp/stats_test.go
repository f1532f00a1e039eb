package resp

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// statLines are the lines of INFO's sections that start with one of
// prefixes, usec fields masked (they are timings), sorted.
func statLines(info string, prefixes ...string) []string {
	usec := regexp.MustCompile(`usec=\d+,usec_per_call=[\d.]+`)
	var out []string
	for _, l := range strings.Split(info, "\r\n") {
		for _, p := range prefixes {
			if strings.HasPrefix(l, p) {
				out = append(out, usec.ReplaceAllString(l, "usec=U"))
			}
		}
	}
	slices.Sort(out)
	return out
}

// Calls (EXEC's commands' included), rejections (arity, refused in
// MULTI) and failures are counted
// per command and subcommand, errors per prefix, as Redis 7.0 does;
// CONFIG RESETSTAT zeroes them, and INFO shows the two sections only when
// asked.
func TestCommandAndErrorStats(t *testing.T) {
	s, _ := start(t, newFakeKV(), nil, nil)
	c := dialRaw(t, s)
	do := func(args ...string) string {
		c.send(t, args...)
		return c.reply(t)
	}
	do("CONFIG", "RESETSTAT")
	for _, cmd := range [][]string{{"SET", "a", "1"}, {"GET", "a"}, {"GET", "a", "b"}, {"HSET", "a", "f", "v"},
		{"CONFIG", "GET", "maxmemory"}, {"CONFIG"}, {"CONFIG", "NOSUCH"}, {"NOSUCH"},
		{"MULTI"}, {"INCR"}, {"EXEC"}, {"CLIENT", "ID"},
		// A committed EXEC counts its commands as calls and their
		// errors, and succeeds itself.
		{"MULTI"}, {"SET", "b", "1"}, {"HSET", "b", "f", "v"}, {"EXEC"}} {
		do(cmd...)
	}
	// Pipelined GETs are served as one batched read, each counted.
	c.send(t, "GET", "a")
	c.send(t, "GET", "a")
	c.reply(t)
	c.reply(t)
	if info := do("INFO"); strings.Contains(info, "cmdstat_") || strings.Contains(info, "errorstat_") {
		t.Fatalf("INFO alone has the command or error stats:\n%s", info)
	}
	got := statLines(do("INFO", "commandstats", "ERRORSTATS", "stats"), "cmdstat_", "errorstat_", "total_error_replies")
	want := []string{
		"cmdstat_client|id:calls=1,usec=U,rejected_calls=0,failed_calls=0",
		"cmdstat_config:calls=0,usec=U,rejected_calls=1,failed_calls=0",
		"cmdstat_config|get:calls=1,usec=U,rejected_calls=0,failed_calls=0",
		"cmdstat_config|resetstat:calls=1,usec=U,rejected_calls=0,failed_calls=0",
		"cmdstat_exec:calls=2,usec=U,rejected_calls=0,failed_calls=1",
		"cmdstat_get:calls=3,usec=U,rejected_calls=1,failed_calls=0",
		"cmdstat_hset:calls=2,usec=U,rejected_calls=0,failed_calls=2",
		"cmdstat_incr:calls=0,usec=U,rejected_calls=1,failed_calls=0",
		"cmdstat_info:calls=1,usec=U,rejected_calls=0,failed_calls=0",
		"cmdstat_multi:calls=2,usec=U,rejected_calls=0,failed_calls=0",
		"cmdstat_set:calls=2,usec=U,rejected_calls=0,failed_calls=0",
		"errorstat_ERR:count=5",
		"errorstat_EXECABORT:count=1",
		"errorstat_WRONGTYPE:count=2",
		"total_error_replies:8",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("stats:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if all := do("INFO", "all"); !strings.Contains(all, "# Commandstats\r\n") || !strings.Contains(all, "# Errorstats\r\n") {
		t.Fatalf("INFO all lacks the stats sections:\n%s", all)
	}
	do("CONFIG", "RESETSTAT")
	got = statLines(do("INFO", "everything"), "cmdstat_", "errorstat_", "total_error_replies")
	want = []string{"cmdstat_config|resetstat:calls=1,usec=U,rejected_calls=0,failed_calls=0", "total_error_replies:0"}
	if !slices.Equal(got, want) {
		t.Fatalf("after CONFIG RESETSTAT:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// Past 128 distinct error prefixes, new ones are counted under one
// catch-all, so clients cannot grow the table without bound.
func TestErrorStatsAreBounded(t *testing.T) {
	s, _ := start(t, newFakeKV(), nil, nil)
	c := dialRaw(t, s)
	for i := range maxErrorPrefixes + 3 {
		c.send(t, "EVAL", fmt.Sprintf("return redis.error_reply('E%d x')", i), "0")
		c.reply(t)
	}
	c.send(t, "EVAL", "return redis.error_reply('E0 x')", "0")
	c.reply(t)
	c.send(t, "INFO", "errorstats")
	lines := statLines(c.reply(t), "errorstat_")
	if len(lines) != maxErrorPrefixes+1 || !slices.Contains(lines, "errorstat_ERRORSTATS_OVERFLOW:count=3") ||
		!slices.Contains(lines, "errorstat_E0:count=2") {
		t.Fatalf("%d error lines, want %d with the overflow's 3 and E0's 2:\n%s", len(lines), maxErrorPrefixes+1, strings.Join(lines, "\n"))
	}
}

// usec_per_call is Redis's single-precision quotient printed with two
// decimals.
func TestUsecPerCallFormat(t *testing.T) {
	st := newServerStats()
	st.cmds[commands["get"].stat].calls.Store(3)
	st.cmds[commands["get"].stat].usec.Store(10)
	if got, want := st.commandSection(), "# Commandstats\r\ncmdstat_get:calls=3,usec=10,usec_per_call=3.33,rejected_calls=0,failed_calls=0\r\n"; got != want {
		t.Fatalf("%q, want %q", got, want)
	}
}

// An admission's refusal (TRYAGAIN) counts as a rejected call, not a
// failed one, alone and in a pipelined run of SETs.
func TestRefusedCallsAreRejected(t *testing.T) {
	s, _ := start(t, errKV{newFakeKV(), &OverloadedError{RetryAfter: 50 * time.Millisecond}}, nil, nil)
	got := pipeline(t, s, []string{"SET", "a", "1"}, []string{"SET", "b", "1"}, []string{"INCR", "a"}, []string{"INFO", "commandstats", "errorstats"})
	want := []string{
		"cmdstat_incr:calls=0,usec=U,rejected_calls=1,failed_calls=0",
		"cmdstat_set:calls=0,usec=U,rejected_calls=2,failed_calls=0",
		"errorstat_TRYAGAIN:count=3",
	}
	if lines := statLines(got[3], "cmdstat_", "errorstat_"); !slices.Equal(lines, want) {
		t.Fatalf("stats:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
}
