package server

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tidekv/tidekv/client"
	"github.com/tidekv/tidekv/internal/redisgw"
	"github.com/tidekv/tidekv/internal/resp"
)

// A pipeline whose writes span a range this node leads and one led
// elsewhere: every command gets its own reply, in order, the led range's
// writes are served in process and the others routed; an invalid value in
// the middle fails alone.
func TestRedisPipelineSpansRanges(t *testing.T) {
	tc := startClusterWith(t, 3, func(c *Config) {
		c.Redis.ListenAddr = "127.0.0.1:0"
		c.Limits.MaxValueSize = 1024
	})
	c := tc.client()
	tc.waitReplicated(c, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	node := tc.server(splitLedApart(t, tc, c, "m"))
	rdb := redis.NewClient(&redis.Options{Addr: node.RedisAddr()})
	defer rdb.Close()
	localBefore, routedBefore := redisCalls(t, node, "local"), redisCalls(t, node, "routed")

	big := strings.Repeat("x", 2000)
	cmds := [][]any{
		{"SET", "a", "1"}, {"SET", "z", "26"}, {"SET", "b", big}, {"SET", "y", "25"}, {"SET", "b", "2"},
		{"GET", "a"}, {"GET", "z"}, {"GET", "b"}, {"GET", "y"},
		{"DEL", "a", "z", "nokey"}, {"SET", "y", "-"},
		{"GET", "a"}, {"GET", "z"}, {"GET", "y"},
	}
	want := []string{
		"OK", "OK", "ERR invalid argument: value of 2000 bytes is too large (the maximum value size is 1024 bytes)", "OK", "OK",
		"1", "26", "2", "25",
		"2", "OK",
		"<nil>", "<nil>", "-",
	}
	pipe := rdb.Pipeline()
	res := make([]*redis.Cmd, len(cmds))
	for i, cmd := range cmds {
		res[i] = pipe.Do(ctx, cmd...)
	}
	_, _ = pipe.Exec(ctx)
	for i, r := range res {
		v, err := r.Result()
		got := fmt.Sprint(v)
		switch {
		case errors.Is(err, redis.Nil):
			got = "<nil>"
		case err != nil:
			got = err.Error()
		}
		if got != want[i] {
			t.Errorf("%v = %q, want %q", cmds[i], got, want[i])
		}
	}
	if redisCalls(t, node, "local") == localBefore || redisCalls(t, node, "routed") == routedBefore {
		t.Fatalf("want calls both in process and routed: local %v → %v, routed %v → %v",
			localBefore, redisCalls(t, node, "local"), routedBefore, redisCalls(t, node, "routed"))
	}
}

// A range splits between WriteEach grouping its ops and writing them: the
// store refuses the group without applying it, the ops are routed, and
// each applies exactly once (a delete applied twice would report that its
// key did not exist).
func TestRedisWriteEachAcrossSplit(t *testing.T) {
	tc := startCluster(t, 3)
	c := tc.client()
	tc.waitReplicated(c, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, k := range []string{"b", "x"} {
		if err := c.Put(ctx, []byte(k), []byte("old")); err != nil {
			t.Fatal(err)
		}
	}
	var node *Server
	eventually(t, 10*time.Second, "a node leads the range of \"a\"", func() error {
		for _, s := range tc.nodes {
			if r := s.Store().LookupKey([]byte("a")); r != nil && r.IsLeader() {
				node = s
				return nil
			}
		}
		return errors.New("no node leads it")
	})
	kv := redisgw.New(newRedisLocal(node), redisgw.FromClient(c), redisgw.Options{})
	ops := []resp.Op{
		{Key: []byte("a"), Value: []byte("1")}, {Key: []byte("b"), Delete: true},
		{Key: []byte("n"), Value: []byte("1")}, {Key: []byte("x"), Delete: true},
		{Key: []byte("z"), Value: []byte("1")}, {Key: []byte("b"), Delete: true},
	}
	out := make([]resp.OpResult, len(ops))
	p := kv.Plan(ops, out)
	if len(p.Groups) != 1 || len(p.Groups[0]) != len(ops) || len(p.Routed) != 0 {
		t.Fatalf("plan %+v: want one group of all %d ops", p, len(ops))
	}
	if _, err := c.Split(ctx, []byte("m")); err != nil {
		t.Fatal(err)
	}
	kv.WritePlanned(ctx, ops, p, out)
	if kv.Routed() == 0 {
		t.Fatal("the refused group was not routed")
	}
	for i, want := range []bool{false, true, false, true, false, false} {
		if out[i].Err != nil || out[i].Existed != want {
			t.Errorf("op %d (%q): %+v, want existed=%v and no error", i, ops[i].Key, out[i], want)
		}
	}
	for k, want := range map[string]string{"a": "1", "n": "1", "z": "1", "b": "", "x": ""} {
		v, err := c.Get(ctx, []byte(k))
		if errors.Is(err, client.ErrNotFound) {
			err = nil
		}
		if err != nil || string(v) != want {
			t.Errorf("get %q = %q, %v; want %q", k, v, err, want)
		}
	}
}
