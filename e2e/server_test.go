package e2e

import (
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/tidekv/tidekv/internal/launcher"
	"github.com/tidekv/tidekv/internal/testcluster"
)

// TestServersShareAHost: two `tidekv server` processes on one host, each
// given only --listen and --data-dir, both start. The first serves HTTP at
// its gRPC port + 1; the second finds that port taken (here by the test)
// and serves HTTP on a free port, which its ready line names.
func TestServersShareAHost(t *testing.T) {
	bin := testcluster.Binary(t)
	dir := t.TempDir()
	base := testcluster.FreeBasePort(t, 2)
	taken, err := net.Listen("tcp", launcher.HostPort("127.0.0.1", base+launcher.PortsPerNode+1))
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()

	ctx := testCtx(t, time.Minute)
	var https []string
	for i := 1; i <= 2; i++ {
		spec := launcher.NodeSpec{Index: i, DataDir: filepath.Join(dir, fmt.Sprintf("node%d", i)),
			GRPCAddr: launcher.HostPort("127.0.0.1", launcher.Port(base, i, launcher.OffsetGRPC))}
		if args := spec.Args(); len(args) != 5 {
			t.Fatalf("server arguments %q: want only --data-dir and --listen", args)
		}
		if sec := testcluster.Secured(t); sec != nil {
			spec.ExtraArgs, spec.HTTPTLS = sec.ServerArgs(), testcluster.CATLS(t)
		}
		p, err := launcher.Start(bin, spec)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := p.Stop(10 * time.Second); err != nil {
				t.Error(err)
			}
		})
		if err := p.Ready(ctx); err != nil { // the ready line, then /health on the announced address
			t.Fatal(err)
		}
		rl, _ := p.Announced()
		https = append(https, rl.HTTPAddr)
	}
	if want := launcher.HostPort("127.0.0.1", base+1); https[0] != want {
		t.Errorf("node 1 serves HTTP on %s, want %s (its gRPC port + 1)", https[0], want)
	}
	_, port, _ := net.SplitHostPort(https[1])
	if p, _ := strconv.Atoi(port); p == 0 || https[1] == taken.Addr().String() {
		t.Errorf("node 2 announced HTTP on %s, want a free port", https[1])
	}
	t.Logf("HTTP: node 1 on %s, node 2 (its gRPC port + 1 taken) on %s", https[0], https[1])
}
