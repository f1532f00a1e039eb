package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/tidekv/tidekv/internal/cliformat"
	"github.com/tidekv/tidekv/internal/security"
)

// fakeAdmin answers readiness with ready and every other call with an
// error.
type fakeAdmin struct{ ready Readiness }

var errFake = errors.New("not in this test")

func (fakeAdmin) Status(context.Context) (cliformat.StatusView, error) {
	return cliformat.StatusView{}, errFake
}
func (fakeAdmin) Ranges(context.Context) (cliformat.RangesView, error) {
	return cliformat.RangesView{}, errFake
}
func (fakeAdmin) Events(context.Context, bool, int) (cliformat.EventsView, error) {
	return cliformat.EventsView{}, errFake
}
func (fakeAdmin) Autoscale(context.Context) (json.RawMessage, error)      { return nil, errFake }
func (fakeAdmin) Settings(context.Context, ...Setting) ([]Setting, error) { return nil, errFake }
func (a fakeAdmin) Readiness(context.Context) (Readiness, error)          { return a.ready, nil }

func testNode(id *atomic.Uint64, auth *security.HTTPAuth) Node {
	return Node{ID: id.Load, Serving: func() bool { return true }, Admin: fakeAdmin{Readiness{Ready: true}},
		Metrics: http.NotFoundHandler(), Series: func() []SeriesPoint { return nil }, Peers: func() []string { return nil },
		Auth: auth}
}

// /ready names the node's ID as it is at the request: a joining node gets
// its ID after its HTTP port opened.
func TestReadyReadsNodeIDPerRequest(t *testing.T) {
	var id atomic.Uint64
	h, _ := Handler(testNode(&id, nil))
	get := func() ReadyView {
		t.Helper()
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/ready", nil))
		var v ReadyView
		if err := json.NewDecoder(rec.Body).Decode(&v); err != nil || rec.Code != http.StatusOK {
			t.Fatalf("GET /ready: %d %v", rec.Code, err)
		}
		return v
	}
	if v := get(); v.NodeID != 0 || !v.Ready {
		t.Fatalf("before the node has an ID: %+v", v)
	}
	id.Store(2)
	if v := get(); v.NodeID != 2 {
		t.Fatalf("after the node got ID 2: %+v", v)
	}
}

// Behind a proxy that serves the node under a path prefix, the login's
// redirects stay under it: the page sends a visitor without credentials
// to the login page, a login back to the page, a logout to the login page,
// each relative to where the browser is.
func TestLoginRedirectsStayUnderPathPrefix(t *testing.T) {
	uf, path := &security.UserFile{}, filepath.Join(t.TempDir(), "users.json")
	if err := uf.Add("reader", security.RoleRead, "r-pass"); err != nil {
		t.Fatal(err)
	}
	if err := uf.Write(security.OSFiles{}, path); err != nil {
		t.Fatal(err)
	}
	users, err := security.NewDirectory(security.OSFiles{}, path)
	if err != nil {
		t.Fatal(err)
	}
	auth := &security.HTTPAuth{Authenticator: security.Authenticator{Users: users}, Sessions: security.NewSessions()}
	var id atomic.Uint64
	h, _ := Handler(testNode(&id, auth))
	const prefix = "/tidekv"
	proxied := http.StripPrefix(prefix, h)
	for _, c := range []struct {
		method, path, form, want string
	}{
		{"GET", prefix + "/", "", prefix + "/login"},
		{"POST", prefix + "/login", "user=reader&password=r-pass", prefix + "/"},
		{"POST", prefix + "/logout", "", prefix + "/login"},
	} {
		req := httptest.NewRequest(c.method, "https://node.example"+c.path, strings.NewReader(c.form))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		rec := httptest.NewRecorder()
		proxied.ServeHTTP(rec, req)
		loc, err := url.Parse(rec.Header().Get("Location"))
		if rec.Code != http.StatusSeeOther || err != nil {
			t.Fatalf("%s %s: %d to %q, want 303", c.method, c.path, rec.Code, rec.Header().Get("Location"))
		}
		if got := req.URL.ResolveReference(loc).Path; got != c.want {
			t.Errorf("%s %s: to %q (%s), want %s", c.method, c.path, loc, got, c.want)
		}
	}
}

// The cluster's series adds rates and keeps the worst p99 per second.
func TestMergeSeries(t *testing.T) {
	got := mergeSeries(
		[]SeriesPoint{{T: 1000, QPS: 10, P99Ms: 2}, {T: 2000, QPS: 5, P99Ms: 1}},
		[]SeriesPoint{{T: 1400, QPS: 3, P99Ms: 7}, {T: 3100, QPS: 1, P99Ms: 1}},
	)
	want := []SeriesPoint{{T: 1000, QPS: 13, P99Ms: 7}, {T: 2000, QPS: 5, P99Ms: 1}, {T: 3000, QPS: 1, P99Ms: 1}}
	if len(got) != len(want) {
		t.Fatalf("%+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("%+v, want %+v", got, want)
		}
	}
}
