package kubernetes

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/tidekv/tidekv/internal/control"
)

const scalePath = "/apis/apps/v1/namespaces/db/statefulsets/tidekv/scale"

// fakeAPI answers the scale subresource of statefulset db/tidekv like the
// API server does, checks every request, and can refuse updates.
type fakeAPI struct {
	t        *testing.T
	mu       sync.Mutex
	replicas int32
	version  int
	refuse   int      // HTTP status for updates (409, 403), 0 to accept
	log      []string // "GET", "PUT 4"
}

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r.URL.Path != scalePath {
		f.t.Errorf("request to %s %s, want %s", r.Method, r.URL.Path, scalePath)
		status(w, http.StatusNotFound, "NotFound", "no such path")
		return
	}
	switch r.Method {
	case http.MethodGet:
		f.log = append(f.log, "GET")
	case http.MethodPut:
		if ct := r.Header.Get("Content-Type"); ct != "application/json" {
			f.t.Errorf("PUT Content-Type %q, want application/json", ct)
		}
		var body struct {
			Kind, APIVersion string
			Metadata         struct{ Name, Namespace, ResourceVersion string }
			Spec             struct{ Replicas int32 }
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			f.t.Errorf("PUT body: %v", err)
		}
		f.log = append(f.log, fmt.Sprintf("PUT %d", body.Spec.Replicas))
		if body.Kind != "Scale" || body.APIVersion != "autoscaling/v1" || body.Metadata.Name != "tidekv" {
			f.t.Errorf("PUT body is %s %s %s, want a Scale autoscaling/v1 of tidekv", body.Kind, body.APIVersion, body.Metadata.Name)
		}
		switch {
		case f.refuse == http.StatusForbidden:
			status(w, f.refuse, "Forbidden", `statefulsets.apps "tidekv" is forbidden: User "system:serviceaccount:db:tidekv" cannot update resource "statefulsets/scale"`)
			return
		case f.refuse == http.StatusConflict || body.Metadata.ResourceVersion != fmt.Sprint(f.version):
			status(w, http.StatusConflict, "Conflict", "the object has been modified; please apply your changes to the latest version and try again")
			return
		}
		f.replicas = body.Spec.Replicas
		f.version++
	default:
		f.t.Errorf("unexpected method %s", r.Method)
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"kind":"Scale","apiVersion":"autoscaling/v1","metadata":{"name":"tidekv","namespace":"db","resourceVersion":"%d"},"spec":{"replicas":%d},"status":{"replicas":%d,"selector":"app=tidekv"}}`,
		f.version, f.replicas, f.replicas)
}

func status(w http.ResponseWriter, code int, reason, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	b, _ := json.Marshal(map[string]any{"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": msg, "reason": reason, "code": code})
	w.Write(b)
}

func (f *fakeAPI) requests() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := strings.Join(f.log, ", ")
	f.log = nil
	return s
}

// apiActuator points a real client, built through New from a kubeconfig
// file, at a fake API server on 127.0.0.1.
func apiActuator(t *testing.T, replicas int32) (*Actuator, *fakeAPI) {
	f := &fakeAPI{t: t, replicas: replicas, version: 1}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: fake, cluster: {server: "`+srv.URL+`"}}]
users: [{name: u, user: {token: t0k3n}}]
contexts: [{name: c, context: {cluster: fake, user: u}}]
current-context: c
`), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Namespace, cfg.Kubeconfig, cfg.MaxReplicas = "db", kubeconfig, 6
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return a, f
}

func TestAPIServerScaleOutAndRemove(t *testing.T) {
	a, f := apiActuator(t, 3)
	ctx := context.Background()
	if _, err := a.ScaleOut(ctx, 1, nil); err != nil {
		t.Fatal(err)
	}
	if got := f.requests(); got != "GET, PUT 4" {
		t.Fatalf("requests %q, want GET, PUT 4", got)
	}
	m := control.Member{ID: 8, Addr: "tidekv-3.tidekv-peer.db.svc.cluster.local:7400"}
	if _, err := a.Remove(ctx, m); err != nil {
		t.Fatal(err)
	}
	if got := f.requests(); got != "GET, PUT 3" || f.replicas != 3 {
		t.Fatalf("requests %q (replicas %d), want GET, PUT 3", got, f.replicas)
	}
	// The pod at ordinal 3 is gone now: a retry succeeds and must not
	// lower replicas below ordinal 2, which still holds data.
	if msg, err := a.Remove(ctx, m); err != nil || !strings.Contains(msg, "already removed") {
		t.Fatalf("second Remove of the same ordinal = %q, %v", msg, err)
	}
	if got := f.requests(); got != "GET" || f.replicas != 3 {
		t.Fatalf("requests %q (replicas %d), want only GET", got, f.replicas)
	}
}

func TestAPIServerRefusalIsAnError(t *testing.T) {
	a, f := apiActuator(t, 2)
	ctx := context.Background()
	f.refuse = http.StatusForbidden
	_, err := a.ScaleOut(ctx, 1, nil)
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "cannot update resource") {
		t.Fatalf("forbidden: err %v", err)
	}
	f.refuse = http.StatusConflict
	if _, err := a.Remove(ctx, control.Member{ID: 2, Addr: "tidekv-1.tidekv-peer:7400"}); !apierrors.IsConflict(err) {
		t.Fatalf("conflict: err %v", err)
	}
	if got := f.requests(); got != "GET, PUT 3, GET, PUT 1" || f.replicas != 2 {
		t.Fatalf("requests %q (replicas %d)", got, f.replicas)
	}
}
