package faultinject

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestFaultEndpoint(t *testing.T) {
	f := New()
	p, clock, disk := f.Partition, f.Clock, f.Disk
	h := f.Handler()
	do := func(method, target, remote string) (int, string) {
		r := httptest.NewRequest(method, target, nil)
		r.RemoteAddr = remote
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code, w.Body.String()
	}
	const local = "127.0.0.1:5000"
	if code, body := do("POST", "/debug/faults/partition?peers=all", "192.0.2.1:5000"); code != http.StatusForbidden || p.Blocked(2) {
		t.Fatalf("a remote caller partitioned the node: %d %s", code, body)
	}
	if code, body := do("POST", "/debug/faults/partition?peers=all", local); code != http.StatusOK || !p.Blocked(2) || body != "partition=all skew=0s disk-delay=0s disk-failing=false\n" {
		t.Fatalf("isolate: %d %q", code, body)
	}
	if code, body := do("POST", "/debug/faults/partition?peers=3,2", "[::1]:5000"); code != http.StatusOK || p.Blocked(1) || !p.Blocked(3) {
		t.Fatalf("cut 2,3: %d %q", code, body)
	}
	if code, body := do("POST", "/debug/faults/partition?peers=2,x", local); code != http.StatusBadRequest || !strings.Contains(body, "not a node ID") || !p.Blocked(2) {
		t.Fatalf("a bad peer list: %d %q (and the cut must stay as it was)", code, body)
	}
	if code, body := do("POST", "/debug/faults/partition?peers=none", local); code != http.StatusOK || p.Blocked(2) {
		t.Fatalf("heal: %d %q", code, body)
	}
	if code, body := do("POST", "/debug/faults/skew?offset=-300ms", local); code != http.StatusOK || clock.Offset() != -300*time.Millisecond {
		t.Fatalf("skew: %d %q", code, body)
	}
	if code, body := do("POST", "/debug/faults/skew?offset=300", local); code != http.StatusBadRequest || !strings.Contains(body, "a duration like -300ms") || clock.Offset() != -300*time.Millisecond {
		t.Fatalf("a skew without a unit: %d %q (and the offset must stay as it was)", code, body)
	}
	if code, body := do("POST", "/debug/faults/disk?delay=100ms", local); code != http.StatusOK || disk.Delay() != 100*time.Millisecond {
		t.Fatalf("slow disk: %d %q", code, body)
	}
	if code, body := do("POST", "/debug/faults/disk?fail=maybe", local); code != http.StatusBadRequest || !strings.Contains(body, "not true or false") || disk.Failing() {
		t.Fatalf("a bad fail value: %d %q (and the disk must stay as it was)", code, body)
	}
	if code, body := do("POST", "/debug/faults/disk?fail=true", local); code != http.StatusOK || !disk.Failing() || disk.Delay() != 100*time.Millisecond {
		t.Fatalf("failing disk: %d %q", code, body)
	}
	if code, body := do("GET", "/debug/faults", local); code != http.StatusOK || body != "partition=none skew=-300ms disk-delay=100ms disk-failing=true\n" {
		t.Fatalf("status: %d %q", code, body)
	}
}
