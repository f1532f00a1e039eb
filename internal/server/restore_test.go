package server

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/client"
	"github.com/tidekv/tidekv/internal/backup"
)

// pausedSink holds a restore after its first batch until resume is
// closed.
type pausedSink struct {
	*backup.ClientSink
	once           sync.Once
	paused, resume chan struct{}
}

func (p *pausedSink) Write(ctx context.Context, ks string, pairs []backup.Pair) error {
	err := p.ClientSink.Write(ctx, ks, pairs)
	p.once.Do(func() {
		close(p.paused)
		<-p.resume
	})
	return err
}

// A reader of a key space being restored into an empty cluster finds it
// absent or whole, never in part: the restore writes it under its staging
// name and publishes it in one meta change. The restore is held after its
// first batch while a reader looks.
func TestRestoreIsVisibleAtOnce(t *testing.T) {
	const n = 300
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	src := startClusterWith(t, 1, nil)
	sc := src.client()
	if _, err := sc.CreateKeySpace(ctx, &tidekvpb.KeySpace{Name: "users", Rf: 1}); err != nil {
		t.Fatal(err)
	}
	users, err := sc.KeySpace(ctx, "users")
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if err := users.Put(ctx, fmt.Appendf(nil, "u%04d", i), []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir() + "/b"
	if _, err := backup.Backup(ctx, backup.NewClientSource(sc), dir, backup.Options{}); err != nil {
		t.Fatal(err)
	}

	dst := startClusterWith(t, 1, nil)
	dc := dst.client()
	// look reads users as a reader would: how many keys it holds, -1 if
	// there is no such key space.
	look := func() (int, error) {
		ks, err := dc.KeySpace(ctx, "users")
		if err != nil {
			if strings.Contains(err.Error(), `no key space "users"`) {
				return -1, nil
			}
			return 0, err
		}
		kvs, err := ks.Scan(ctx, nil, nil, 0, client.Linearizable())
		return len(kvs), err
	}
	sink := &pausedSink{ClientSink: backup.NewClientSink(dc), paused: make(chan struct{}), resume: make(chan struct{})}
	done := make(chan error, 1)
	go func() {
		_, err := backup.Restore(ctx, sink, dir, false, backup.Options{BatchPairs: 50, InFlight: 1})
		done <- err
	}()
	seen := map[int]int{}
	check := func() {
		t.Helper()
		got, err := look()
		if err != nil {
			t.Fatal(err)
		}
		if got != -1 && got != n {
			t.Fatalf("a reader during the restore saw users with %d of its %d keys", got, n)
		}
		seen[got]++
	}
	<-sink.paused
	check()
	if seen[-1] != 1 {
		t.Fatalf("a reader saw users before the restore had written it: %v", seen)
	}
	close(sink.resume)
	for restored := false; !restored; {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			restored = true
		default:
		}
		check()
	}
	if seen[n] == 0 {
		t.Fatalf("the restored key space never appeared whole: %v", seen)
	}
	t.Logf("reads during and after the restore: %d found nothing, %d all %d keys", seen[-1], seen[n], n)
}
