package cache

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// origin is an httptest miss handler that counts its calls: it answers
// "value-of-KEY", 404 for keys starting "absent", and waits for release
// (when set) before answering.
type origin struct {
	*httptest.Server
	calls   atomic.Int64
	release chan struct{}
}

func newOrigin(t *testing.T) *origin {
	o := &origin{}
	o.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o.calls.Add(1)
		if o.release != nil {
			<-o.release
		}
		k := r.URL.Query().Get("key")
		if strings.HasPrefix(k, "absent") {
			http.NotFound(w, r)
			return
		}
		w.Write([]byte("value-of-" + k))
	}))
	t.Cleanup(o.Close)
	return o
}

func TestFlightsCallTheOriginOncePerKey(t *testing.T) {
	o := newOrigin(t)
	o.release = make(chan struct{})
	f := NewFlights(4, 5*time.Second)
	ctx := context.Background()
	var wg sync.WaitGroup
	results := make(chan string, 50)
	for range 50 {
		wg.Go(func() {
			v, found, err := f.Do(ctx, "k", func(ctx context.Context) ([]byte, bool, error) {
				return Fetch(ctx, http.DefaultClient, o.URL, []byte("a key/with ?&="), 1<<20)
			})
			if err != nil || !found {
				t.Errorf("Do = %q, %v, %v", v, found, err)
			}
			results <- string(v)
		})
	}
	// Let the 50 misses pile up behind the first call, then answer it.
	for o.calls.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond)
	close(o.release)
	wg.Wait()
	close(results)
	for v := range results {
		if v != "value-of-a key/with ?&=" {
			t.Fatalf("a miss got %q (the key must reach the origin URL-encoded and whole)", v)
		}
	}
	if n := o.calls.Load(); n != 1 {
		t.Fatalf("50 concurrent misses of one key made %d origin calls, want 1", n)
	}
}

func TestFetchOutcomes(t *testing.T) {
	o := newOrigin(t)
	ctx := context.Background()
	if v, found, err := Fetch(ctx, http.DefaultClient, o.URL, []byte("absent1"), 1<<20); err != nil || found || v != nil {
		t.Errorf("404: %q, %v, %v; want a plain miss", v, found, err)
	}
	if _, _, err := Fetch(ctx, http.DefaultClient, o.URL, []byte("k"), 4); err == nil || !strings.Contains(err.Error(), "over the 4-byte maximum value size") {
		t.Errorf("too large a value: %v", err)
	}
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close()
	_, _, err := Fetch(ctx, http.DefaultClient, down.URL, []byte("k"), 1<<20)
	var oe *OriginError
	if !errors.As(err, &oe) || !strings.Contains(err.Error(), "read-through: miss handler "+down.URL) {
		t.Errorf("origin down: %v; want an error naming the origin", err)
	}
	broken := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTeapot) }))
	defer broken.Close()
	if _, _, err := Fetch(ctx, http.DefaultClient, broken.URL, []byte("k"), 1<<20); err == nil || !strings.Contains(err.Error(), "answered 418 I'm a teapot (want 200 with the value, or 404)") {
		t.Errorf("origin answering 418: %v", err)
	}
}

// A slow origin fails the fetch at the timeout, and so does a wait for a
// free slot when every slot is taken.
func TestFlightsTimeOut(t *testing.T) {
	o := newOrigin(t)
	o.release = make(chan struct{})
	defer close(o.release)
	f := NewFlights(1, 100*time.Millisecond)
	ctx := context.Background()
	_, _, err := f.Do(ctx, "slow", func(ctx context.Context) ([]byte, bool, error) {
		return Fetch(ctx, http.DefaultClient, o.URL, []byte("slow"), 1<<20)
	})
	if err == nil || !strings.Contains(err.Error(), "read-through: miss handler "+o.URL+": no answer within the miss handler timeout") {
		t.Fatalf("slow origin: %v", err)
	}
	hold := make(chan struct{})
	defer close(hold)
	go f.Do(ctx, "holder", func(context.Context) ([]byte, bool, error) { <-hold; return nil, false, nil })
	for len(f.slots) == 0 {
		time.Sleep(time.Millisecond)
	}
	_, _, err = f.Do(ctx, "other", func(context.Context) ([]byte, bool, error) { return nil, false, nil })
	if err == nil || err.Error() != "no free slot for a miss handler call within 100ms (all 1 of this node's slots busy)" {
		t.Fatalf("every slot taken: %v", err)
	}
}
