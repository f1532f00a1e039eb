package nemesis

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// A node started with --certs-dir serves /debug/faults over TLS only: the
// endpoint client must reach it over HTTPS when given the TLS config, and
// still over plain HTTP without one.
func TestFaultEndpointSpeaksTheNodesScheme(t *testing.T) {
	for _, secure := range []bool{false, true} {
		var got string
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got = r.URL.String() })
		srv := httptest.NewUnstartedServer(h)
		if secure {
			srv.StartTLS()
		} else {
			srv.Start()
		}
		f := NewFaultEndpoint(nil)
		if secure {
			f = NewFaultEndpoint(srv.Client().Transport.(*http.Transport).TLSClientConfig)
		}
		if err := f.SetPartition(srv.Listener.Addr().String(), "2,3"); err != nil {
			t.Errorf("secure=%v: %v", secure, err)
		}
		if want := "/debug/faults/partition?peers=2%2C3"; got != want {
			t.Errorf("secure=%v: the node got %q, want %q", secure, got, want)
		}
		srv.Close()
	}
}
