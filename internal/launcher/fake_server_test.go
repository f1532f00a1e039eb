package launcher_test

import (
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/tidekv/tidekv/internal/launcher"
)

// fakeEnv makes the test binary act as a stand-in `tidekv server`, so the
// launcher can be tested without building the real one. Its value picks the
// behaviour: normal, crash (exit 3 before serving), no-ready (serve but never
// announce), unhealthy (/health answers 503) or ignore-term (ignore
// SIGTERM).
const fakeEnv = "TIDEKV_LAUNCHER_FAKE_SERVER"

func TestMain(m *testing.M) {
	if mode := os.Getenv(fakeEnv); mode != "" {
		if len(os.Args) == 2 && os.Args[1] == launcher.HogCommand {
			launcher.Spin()
		}
		os.Exit(fakeServer(mode, os.Args[1:]))
	}
	os.Exit(m.Run())
}

// fakeServer mimics the server's process contract: flags, logs on stderr,
// exactly one ready line on stdout, /health, clean exit 0 on SIGTERM. It
// records its arguments and pid in the data directory for the tests, and
// answers /ready as a cluster being replicated; it
// keeps a node id there so that restarts keep their identity.
func fakeServer(mode string, args []string) int {
	if len(args) == 0 || args[0] != "server" {
		fmt.Fprintln(os.Stderr, "fake: want the server subcommand, got", args)
		return 2
	}
	fs := flag.NewFlagSet("server", flag.ContinueOnError)
	dataDir := fs.String("data-dir", "", "")
	listen := fs.String("listen", "", "")
	httpListen := fs.String("http-listen", "", "")
	_ = fs.String("redis-listen", "", "")
	_ = fs.String("gossip-listen", "", "")
	fs.String("join", "", "")
	fs.String("node-label", "", "")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	must := func(err error) {
		if err != nil {
			fmt.Fprintln(os.Stderr, "fake:", err)
			os.Exit(2)
		}
	}
	// Signals first, so a SIGTERM that arrives during startup is honoured.
	sigs := make(chan os.Signal, 1)
	if mode == "ignore-term" {
		signal.Ignore(syscall.SIGTERM)
	} else {
		signal.Notify(sigs, syscall.SIGTERM, os.Interrupt)
	}
	must(os.MkdirAll(*dataDir, 0o755))
	f, err := os.OpenFile(filepath.Join(*dataDir, "args"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	must(err)
	fmt.Fprintln(f, strings.Join(args, " "))
	f.Close()
	must(os.WriteFile(filepath.Join(*dataDir, "pid"), []byte(strconv.Itoa(os.Getpid())), 0o644))
	idPath := filepath.Join(*dataDir, "id")
	id := os.Getpid()
	if b, err := os.ReadFile(idPath); err == nil {
		id, _ = strconv.Atoi(string(b))
	} else {
		must(os.WriteFile(idPath, []byte(strconv.Itoa(id)), 0o644))
	}

	fmt.Fprintln(os.Stderr, "fake: starting")
	fmt.Println("fake: hello on stdout")
	if mode == "crash" {
		fmt.Fprintln(os.Stderr, "fake: boom")
		return 3
	}
	gl, err := net.Listen("tcp", *listen)
	must(err)
	go func() {
		for {
			c, err := gl.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	hl, err := net.Listen("tcp", *httpListen)
	must(err)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) {
		if mode == "unhealthy" {
			http.Error(w, "not yet", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprint(w, "ok")
	})
	// Not replicated until the test says so, by creating <data-dir>/replicated.
	mux.HandleFunc("GET /ready", func(w http.ResponseWriter, r *http.Request) {
		if _, err := os.Stat(filepath.Join(*dataDir, "replicated")); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprint(w, `{"ready":false,"reason":"range 1 has 1 of 3 voters on live nodes."}`)
			return
		}
		fmt.Fprint(w, `{"ready":true,"replication_factor":3,"live_nodes":3,"ranges":2}`)
	})
	go http.Serve(hl, mux)
	if mode != "no-ready" {
		fmt.Printf("tidekv: node %d ready grpc=%s http=%s\n", id, gl.Addr(), hl.Addr())
	}
	<-sigs
	fmt.Fprintln(os.Stderr, "fake: shutting down")
	return 0
}
