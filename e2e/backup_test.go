package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidekv/tidekv/api/hlc"
	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/client"
	"github.com/tidekv/tidekv/internal/testcluster"
)

// TestBackupRestoreUnderLoad: `ctl backup` of a 3-node cluster while
// writers keep incrementing counters and adding keys, then `ctl restore`
// into a fresh cluster, which must hold exactly what a read of the source
// at the backup's timestamp returns: every key, with that value, and
// nothing written after it.
func TestBackupRestoreUnderLoad(t *testing.T) {
	bin := testcluster.Binary(t)
	ctx := testCtx(t, 4*time.Minute)
	src := testcluster.Start(t, testcluster.Options{Nodes: 3})
	cl := newClient(t, src.Addrs())
	waitReplicated(ctx, t, cl, 3)
	if _, err := cl.CreateKeySpace(ctx, &tidekvpb.KeySpace{Name: "users", Rf: 3}); err != nil {
		t.Fatal(err)
	}
	users, err := cl.KeySpace(ctx, "users")
	if err != nil {
		t.Fatal(err)
	}
	value := []byte(strings.Repeat("v", 1024))
	for i := range 3000 {
		put(ctx, t, cl.Put, fmt.Sprintf("base/%05d", i), value)
	}
	for i := range 200 {
		put(ctx, t, users.Put, fmt.Sprintf("u%04d", i), []byte(fmt.Sprint(i)))
	}
	if err := cl.PutTTL(ctx, []byte("ttl/hour"), value, time.Hour); err != nil {
		t.Fatal(err)
	}
	cache := hashedKeySpace(ctx, t, cl, "cache", 50)

	// Writers: counters that only grow, and new keys, all through the backup.
	var stop atomic.Bool
	var wg sync.WaitGroup
	var writes atomic.Int64
	for g := range 4 {
		wg.Go(func() {
			for i := 0; !stop.Load(); i++ {
				k := fmt.Sprintf("ctr/%d/%d", g, i%10)
				if cl.Put(ctx, []byte(k), []byte(fmt.Sprintf("%08d", i))) == nil &&
					cl.Put(ctx, []byte(fmt.Sprintf("new/%d/%06d", g, i)), value) == nil {
					writes.Add(1)
				}
			}
		})
	}
	time.Sleep(500 * time.Millisecond)
	dir := filepath.Join(t.TempDir(), "backup")
	out, code, err := ctl(ctx, bin, src.Addr(2), "backup", dir, "--json")
	before := writes.Load()
	time.Sleep(300 * time.Millisecond)
	stop.Store(true)
	wg.Wait()
	if err != nil {
		t.Fatalf("backup: exit %d, %v", code, err)
	}
	var sum struct {
		Timestamp string
		Pairs     int64
	}
	if err := json.Unmarshal([]byte(out), &sum); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	ts, err := hlc.Parse(sum.Timestamp)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("backup: %s; %d writer rounds by its end, %d in all", out, before, writes.Load())

	// What the source held at ts, and that writers did change it after ts
	// (or the test would prove nothing).
	want := snapshot(ctx, t, cl, users, client.ReadAt(ts))
	latest := snapshot(ctx, t, cl, users, client.Linearizable())
	if maps.Equal(want[""], latest[""]) {
		t.Fatal("no write landed after the backup's timestamp: the load did not overlap the backup")
	}
	if n := int64(len(want[""]) + len(want["users"]) + len(cache)); n != sum.Pairs {
		t.Fatalf("backup holds %d pairs, a read at its timestamp %d", sum.Pairs, n)
	}

	dst := testcluster.Start(t, testcluster.Options{Nodes: 3})
	dcl := newClient(t, dst.Addrs())
	waitReplicated(ctx, t, dcl, 3)
	if _, code, err := ctl(ctx, bin, dst.Addr(1), "restore", dir); err != nil {
		t.Fatalf("restore: exit %d, %v", code, err)
	}
	dusers, err := dcl.KeySpace(ctx, "users")
	if err != nil {
		t.Fatal(err)
	}
	got := snapshot(ctx, t, dcl, dusers, client.Linearizable())
	for _, ks := range []string{"", "users"} {
		if !maps.Equal(got[ks], want[ks]) {
			t.Errorf("key space %q: restored %d keys, the source had %d at the backup timestamp; first difference: %s",
				ks, len(got[ks]), len(want[ks]), firstDiff(got[ks], want[ks]))
		}
	}
	checkHashedKeySpace(ctx, t, dcl, "cache", cache)
	// The expiry comes back: the same instant, so a little under an hour.
	if ttl, err := dcl.TTL(ctx, []byte("ttl/hour")); err != nil || ttl <= 50*time.Minute || ttl > time.Hour {
		t.Errorf("restored ttl/hour has TTL %v (%v), want just under an hour", ttl, err)
	}
	_, code, err = ctl(ctx, bin, dst.Addr(1), "restore", dir)
	if code != 2 || err == nil || !strings.Contains(err.Error(), "restore refused: the cluster already holds data") {
		t.Fatalf("second restore: exit %d, %v", code, err)
	}
}

func put(ctx context.Context, t *testing.T, f func(context.Context, []byte, []byte) error, k string, v []byte) {
	t.Helper()
	if err := eventually(ctx, 10*time.Second, func(ctx context.Context) error { return f(ctx, []byte(k), v) }); err != nil {
		t.Fatal(err)
	}
}

// snapshot reads the default key space and users with ro.
func snapshot(ctx context.Context, t *testing.T, cl *client.Client, users *client.KeySpace, ro client.ReadOption) map[string]map[string]string {
	t.Helper()
	out := map[string]map[string]string{}
	for ks, scan := range map[string]func(context.Context, []byte, []byte, int, ...client.ReadOption) ([]client.KeyValue, error){"": cl.Scan, "users": users.Scan} {
		kvs, err := scan(ctx, nil, nil, 0, ro)
		if err != nil {
			t.Fatalf("scan %q: %v", ks, err)
		}
		out[ks] = map[string]string{}
		for _, kv := range kvs {
			out[ks][string(kv.Key)] = string(kv.Value)
		}
	}
	return out
}

func firstDiff(got, want map[string]string) string {
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			return fmt.Sprintf("key %q: restored %.20q (present %v), want %.20q", k, g, ok, v)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			return fmt.Sprintf("key %q restored but absent at the backup timestamp", k)
		}
	}
	return "none"
}

// hashedKeySpace creates hashed key space name with n keys and returns them.
func hashedKeySpace(ctx context.Context, t *testing.T, cl *client.Client, name string, n int) map[string]string {
	t.Helper()
	if _, err := cl.CreateKeySpace(ctx, &tidekvpb.KeySpace{Name: name, Mode: "hashed"}); err != nil {
		t.Fatal(err)
	}
	ks, err := cl.KeySpace(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for i := range n {
		k, v := fmt.Sprintf("c%03d", i), fmt.Sprint(i)
		put(ctx, t, ks.Put, k, []byte(v))
		want[k] = v
	}
	return want
}

// checkHashedKeySpace checks that hashed key space name holds exactly want.
func checkHashedKeySpace(ctx context.Context, t *testing.T, cl *client.Client, name string, want map[string]string) {
	t.Helper()
	ks, err := cl.KeySpace(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	kvs, err := ks.ScanHashOrder(ctx, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, kv := range kvs {
		got[string(kv.Key)] = string(kv.Value)
	}
	if !maps.Equal(got, want) {
		t.Errorf("hashed key space %q: restored %d keys, want %d; first difference: %s", name, len(got), len(want), firstDiff(got, want))
	}
}
