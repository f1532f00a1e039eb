package e2e

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/testcluster"
)

func TestZZRestartAlone(t *testing.T) {
	tc := testcluster.Start(t, testcluster.Options{Nodes: 3, ExtraArgs: []string{"--testing-stale-reads"}})
	ctx := testCtx(t, 3*time.Minute)
	cl := newClient(t, tc.Addrs())
	waitReplicated(ctx, t, cl, 3)
	key := []byte("linz/stale")
	if err := cl.Put(ctx, key, []byte("v-old")); err != nil {
		t.Fatal(err)
	}
	lh := leaseholderIndex(ctx, t, tc, cl, key)
	f := lh%tc.N() + 1
	conn, _ := grpc.NewClient(tc.Addr(f), grpc.WithTransportCredentials(insecure.NewCredentials()))
	defer conn.Close()
	kv := tidekvpb.NewKVClient(conn)
	time.Sleep(3 * time.Second)
	resp, err := kv.Get(ctx, &tidekvpb.GetRequest{Key: key})
	t.Logf("before: %v %v", resp, err)
	st, _ := cl.LocalStatus(ctx, tc.Addr(f))
	for _, r := range st.GetReplicas() {
		t.Logf("before: %v", r)
	}
	tc.Kill(f)
	tc.Restart(f)
	c2, cancel := context.WithTimeout(ctx, 2*time.Second)
	resp, err = kv.Get(c2, &tidekvpb.GetRequest{Key: key})
	cancel()
	t.Logf("after restart (others alive): %v %v", resp, err)
	st, _ = cl.LocalStatus(ctx, tc.Addr(f))
	for _, r := range st.GetReplicas() {
		t.Logf("after: %v", r)
	}
}
