package resp

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"
)

// pipeline sends cmds in one write and returns their replies, rendered
// one per command: "+OK", "-ERR ...", ":1", "$v", "$<nil>", "*[...]",
// "*<nil>".
func pipeline(t *testing.T, s *Server, cmds ...[]string) []string {
	t.Helper()
	return pipelineTo(t, s.Addr().String(), cmds...)
}

// pipelineTo is pipeline to any Redis-protocol server at addr (a real
// redis-server, to compare).
func pipelineTo(t *testing.T, addr string, cmds ...[]string) []string {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	var sb strings.Builder
	for _, cmd := range cmds {
		fmt.Fprintf(&sb, "*%d\r\n", len(cmd))
		for _, a := range cmd {
			fmt.Fprintf(&sb, "$%d\r\n%s\r\n", len(a), a)
		}
	}
	if _, err := c.Write([]byte(sb.String())); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(c)
	var out []string
	for range cmds {
		v, err := readReply(r)
		if err != nil {
			break // QUIT closed the connection
		}
		out = append(out, v)
	}
	return out
}

func readReply(r *bufio.Reader) (string, error) {
	l, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	l = strings.TrimRight(l, "\r\n")
	switch l[0] {
	case '$':
		n, _ := strconv.Atoi(l[1:])
		if n < 0 {
			return "$<nil>", nil
		}
		b := make([]byte, n+2)
		if _, err := io.ReadFull(r, b); err != nil {
			return "", err
		}
		return "$" + string(b[:n]), nil
	case '*':
		n, _ := strconv.Atoi(l[1:])
		if n < 0 {
			return "*<nil>", nil
		}
		var elems []string
		for range n {
			e, err := readReply(r)
			if err != nil {
				return "", err
			}
			elems = append(elems, e)
		}
		return "*" + fmt.Sprint(elems), nil
	}
	return l, nil
}

func eqReplies(t *testing.T, got, want []string) {
	t.Helper()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("replies:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// A pipeline of mixed reads, writes, failing commands and commands that
// run alone gets its replies in order; a read sees the writes before it;
// consecutive writes share one WriteEach.
func TestPipelineMixedInOrder(t *testing.T) {
	kv := newFakeKV()
	s, _ := start(t, kv, nil, nil)
	got := pipeline(t, s,
		[]string{"SET", "a", "1"},
		[]string{"SET", "b", "2"},
		[]string{"SET", "", "x"}, // fails alone: empty key
		[]string{"SET", "c", string(hashMarker)},
		[]string{"DEL", "b"},
		[]string{"DEL", "nokey"},
		[]string{"DEL", "a"},
		[]string{"SET", "a", "3"},
		[]string{"GET", "a"},
		[]string{"GET", "b"},
		[]string{"GET", "a", "extra"}, // arity error in the middle of a run
		[]string{"INCR", "a"},         // runs alone, between runs
		[]string{"GET", "a"},
		[]string{"SET", "a", "5", "NX"}, // conditional: alone
		[]string{"NOSUCH"},
		[]string{"GET", "a"},
	)
	eqReplies(t, got, []string{
		"+OK", "+OK",
		"-ERR invalid argument: empty key",
		"-" + errReserved,
		":1", ":0", ":1",
		"+OK",
		"$3", "$<nil>",
		"-ERR wrong number of arguments for 'get' command",
		":4", "$4",
		"$<nil>",
		"-ERR unknown command 'NOSUCH', with args beginning with: ",
		"$4",
	})
	if len(kv.eachOps) == 0 || len(kv.eachOps[0]) != 7 {
		t.Fatalf("WriteEach calls %v: want the first eight writes' seven ops in one call", kv.eachOps)
	}
}

// A DEL of several keys in a pipeline runs alone, as one transaction (it
// deletes its keys at once), between the runs of writes around it.
func TestPipelineDelOfSeveralKeysRunsAlone(t *testing.T) {
	kv := newFakeKV()
	s, _ := start(t, kv, nil, nil)
	got := pipeline(t, s,
		[]string{"SET", "a", "1"},
		[]string{"SET", "b", "2"},
		[]string{"DEL", "a", "nokey", "b", "a"},
		[]string{"SET", "c", "3"},
		[]string{"DEL", "c"},
	)
	eqReplies(t, got, []string{"+OK", "+OK", ":2", "+OK", ":1"})
	if want := [][]string{{"a", "b"}, {"c", "c"}}; fmt.Sprint(opKeys(kv.eachOps)) != fmt.Sprint(want) || kv.commits != 1 {
		t.Fatalf("WriteEach calls of keys %v and %d transactions; want %v and the DEL of several keys as one transaction", opKeys(kv.eachOps), kv.commits, want)
	}
}

// opKeys are the keys of each call's ops.
func opKeys(calls [][]Op) [][]string {
	out := make([][]string, len(calls))
	for i, ops := range calls {
		for _, op := range ops {
			out[i] = append(out[i], string(op.Key))
		}
	}
	return out
}

// DEL in a pipeline removes a hash's fields as DEL alone does, and GET of a
// hash in a batched read is WRONGTYPE.
func TestPipelineDelHashAndWrongType(t *testing.T) {
	s, _ := start(t, newFakeKV(), nil, nil)
	eqReplies(t, pipeline(t, s, []string{"HSET", "h", "f", "v"}), []string{":1"})
	got := pipeline(t, s,
		[]string{"GET", "h"},
		[]string{"GET", "x"},
		[]string{"DEL", "h"},
		[]string{"DEL", "h"},
		[]string{"HSET", "h", "g", "w"},
		[]string{"HGETALL", "h"},
	)
	eqReplies(t, got, []string{"-" + errWrongType, "$<nil>", ":1", ":0", ":1", "*[$g $w]"})
}

// Authentication in the middle of a pipeline applies to the commands after
// it, and QUIT drops what follows it.
func TestPipelineAuthAndQuit(t *testing.T) {
	kv := newFakeKV()
	s, _ := start(t, kv, func(c *Config) { c.Auth = users{"default": {"pw", AccessWrite}} }, nil)
	got := pipeline(t, s,
		[]string{"SET", "a", "1"},
		[]string{"GET", "a"},
		[]string{"AUTH", "pw"},
		[]string{"SET", "a", "1"},
		[]string{"SET", "b", "2"},
		[]string{"QUIT"},
		[]string{"SET", "c", "3"},
	)
	eqReplies(t, got, []string{"-NOAUTH Authentication required.", "-NOAUTH Authentication required.", "+OK", "+OK", "+OK", "+OK"})
	if _, ok := kv.m["c"]; ok {
		t.Fatal("a command after QUIT ran")
	}
}

// More writes than MaxBatchKeys are cut into several WriteEach calls.
func TestPipelineWritesChunked(t *testing.T) {
	kv := newFakeKV()
	s, _ := start(t, kv, func(c *Config) { c.MaxBatchKeys = 3 }, nil)
	var cmds [][]string
	var want []string
	for i := range 7 {
		cmds = append(cmds, []string{"SET", fmt.Sprint("k", i), "v"})
		want = append(want, "+OK")
	}
	eqReplies(t, pipeline(t, s, cmds...), want)
	var sizes []int
	for _, ops := range kv.eachOps {
		sizes = append(sizes, len(ops))
	}
	if fmt.Sprint(sizes) != "[3 3 1]" {
		t.Fatalf("WriteEach sizes %v, want [3 3 1]", sizes)
	}
}

// A read-only user's writes in a pipeline get NOPERM each, and its reads
// around them are served.
func TestPipelineReadOnlyUser(t *testing.T) {
	auth := users{"reader": {"r", AccessRead}}
	kv := newFakeKV()
	kv.m["a"] = []byte("1")
	s, _ := start(t, kv, func(c *Config) { c.Auth = auth }, nil)
	got := pipeline(t, s,
		[]string{"AUTH", "reader", "r"},
		[]string{"GET", "a"},
		[]string{"SET", "a", "2"},
		[]string{"DEL", "a"},
		[]string{"GET", "a"},
	)
	eqReplies(t, got, []string{"+OK", "$1",
		"-NOPERM User reader has no permissions to run the 'set' command",
		"-NOPERM User reader has no permissions to run the 'del' command", "$1"})
}

// A command's arguments are the reader's and not copied (prepare): they must
// stay as read while the connection reads on. A MULTI holds its queued
// commands across reads, each read here the same length as the last, so
// that a reader reusing its buffer would lay the next command over them.
func TestArgumentsOutliveTheirRead(t *testing.T) {
	s, _ := start(t, newFakeKV(), nil, nil)
	c := dialRaw(t, s)
	if got := c.do(t, "MULTI"); got != "+OK" {
		t.Fatalf("MULTI: %q", got)
	}
	for _, kv := range [][2]string{{"ka", "va"}, {"kb", "vb"}, {"kc", "vc"}} {
		if got := c.do(t, "SET", kv[0], kv[1]); got != "+QUEUED" {
			t.Fatalf("SET %s: %q", kv[0], got)
		}
	}
	for _, inline := range []string{"SET kd vd\r\n", "SET ke ve\r\n"} { // inline commands: read another way
		if _, err := c.c.Write([]byte(inline)); err != nil {
			t.Fatal(err)
		}
		if got := c.reply(t); got != "+QUEUED" {
			t.Fatalf("%q: %q", inline, got)
		}
	}
	if got := c.do(t, "EXEC"); got != "*[+OK +OK +OK +OK +OK]" {
		t.Fatalf("EXEC: %q", got)
	}
	for _, kv := range [][2]string{{"ka", "va"}, {"kb", "vb"}, {"kc", "vc"}, {"kd", "vd"}, {"ke", "ve"}} {
		if got := c.do(t, "GET", kv[0]); got != "$"+kv[1] {
			t.Errorf("GET %s = %q, want %q", kv[0], got, kv[1])
		}
	}
}
