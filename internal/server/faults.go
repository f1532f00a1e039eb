package server

import (
	"fmt"
	"log"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/tidekv/tidekv/internal/raftstore"
	"github.com/tidekv/tidekv/internal/transport"
)

// injectFaults gives cfg's transport a partition and its store a clock
// that the returned handler controls.
func injectFaults(cfg *Config) http.Handler {
	p, clock := &transport.Partition{}, &raftstore.SkewClock{}
	cfg.Transport.Partition, cfg.Raft.Clock = p, clock
	log.Printf("fault injection on: /debug/faults on the HTTP address can partition this node and skew its clock (loopback callers only)")
	return faultHandler(p, clock)
}

// faultHandler serves fault injection for chaos tests (Config.FaultInjection,
// --enable-fault-injection): GET /debug/faults reports the node's injected
// faults; POST /debug/faults/partition?peers=all|none|2,3 cuts this node's
// Raft traffic with those peers (all: isolate it) or heals it; POST
// /debug/faults/skew?offset=-300ms sets the offset of the clock its leases
// and closed timestamps read (0 removes it). Only loopback callers are
// served: the endpoint has no authentication, and chaos runs drive it from
// the same host.
func faultHandler(p *transport.Partition, clock *raftstore.SkewClock) http.Handler {
	mux := http.NewServeMux()
	state := func(w http.ResponseWriter) { fmt.Fprintf(w, "partition=%s skew=%v\n", p, clock.Offset()) }
	mux.HandleFunc("GET /debug/faults", func(w http.ResponseWriter, r *http.Request) { state(w) })
	mux.HandleFunc("POST /debug/faults/partition", func(w http.ResponseWriter, r *http.Request) {
		if err := setPartition(p, r.URL.Query().Get("peers")); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		state(w)
	})
	mux.HandleFunc("POST /debug/faults/skew", func(w http.ResponseWriter, r *http.Request) {
		d, err := time.ParseDuration(r.URL.Query().Get("offset"))
		if err != nil {
			http.Error(w, fmt.Sprintf("offset: %v (a duration like -300ms; 0 removes the skew)", err), http.StatusBadRequest)
			return
		}
		clock.Set(d)
		state(w)
	})
	return loopbackOnly(mux)
}

func setPartition(p *transport.Partition, peers string) error {
	switch peers {
	case "all":
		p.Isolate()
		return nil
	case "none":
		p.Heal()
		return nil
	case "":
		return fmt.Errorf("peers is required: all, none or node IDs like 2,3")
	}
	var ids []uint64
	for _, f := range strings.Split(peers, ",") {
		id, err := strconv.ParseUint(strings.TrimSpace(f), 10, 64)
		if err != nil || id == 0 {
			return fmt.Errorf("peers %q: %q is not a node ID (all, none or node IDs like 2,3)", peers, f)
		}
		ids = append(ids, id)
	}
	p.Cut(ids)
	return nil
}

func loopbackOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, err := net.SplitHostPort(r.RemoteAddr)
		if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
			http.Error(w, "fault injection is served to loopback callers only", http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, r)
	})
}
