package faultinject

import (
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/tidekv/tidekv/internal/raftstore"
	"github.com/tidekv/tidekv/internal/storage"
	"github.com/tidekv/tidekv/internal/transport"
)

// Controls are the fault-injection controls of one node.
type Controls struct {
	Partition *transport.Partition
	Clock     *raftstore.SkewClock
	Disk      *storage.DiskFaults
}

// New makes a node's controls, no fault injected.
func New() Controls {
	return Controls{Partition: &transport.Partition{}, Clock: &raftstore.SkewClock{}, Disk: &storage.DiskFaults{}}
}

// Handler serves fault injection: GET /debug/faults reports the node's injected
// faults; POST /debug/faults/partition?peers=all|none|2,3 cuts this node's
// Raft traffic with those peers (all: isolate it) or heals it; POST
// /debug/faults/skew?offset=-300ms sets the offset of the wall clock its
// closed timestamps read (leases use the monotonic clock, which it does
// not move); POST /debug/faults/disk?delay=100ms makes
// every sync of its engine wait that long (0 removes either); POST
// /debug/faults/disk?fail=true makes every write of its engine fail, which
// stops the node at its next write (a node must not run on a disk that
// lost what it was told to keep). Only
// loopback callers are served, as chaos runs drive it from the same host;
// on a secure node they must also be admins (internal/httpapi).
func (f Controls) Handler() http.Handler {
	mux := http.NewServeMux()
	state := func(w http.ResponseWriter) {
		fmt.Fprintf(w, "partition=%s skew=%v disk-delay=%v disk-failing=%v\n", f.Partition, f.Clock.Offset(), f.Disk.Delay(), f.Disk.Failing())
	}
	mux.HandleFunc("GET /debug/faults", func(w http.ResponseWriter, r *http.Request) { state(w) })
	mux.HandleFunc("POST /debug/faults/partition", func(w http.ResponseWriter, r *http.Request) {
		if err := setPartition(f.Partition, r.URL.Query().Get("peers")); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		state(w)
	})
	duration := func(param, example string, set func(time.Duration)) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			d, err := time.ParseDuration(r.URL.Query().Get(param))
			if err != nil {
				http.Error(w, fmt.Sprintf("%s: %v (a duration like %s; 0 removes the fault)", param, err, example), http.StatusBadRequest)
				return
			}
			set(d)
			state(w)
		}
	}
	mux.HandleFunc("POST /debug/faults/skew", duration("offset", "-300ms", f.Clock.Set))
	slow := duration("delay", "100ms", f.Disk.SetDelay)
	mux.HandleFunc("POST /debug/faults/disk", func(w http.ResponseWriter, r *http.Request) {
		fail := r.URL.Query().Get("fail")
		if fail == "" {
			slow(w, r)
			return
		}
		failing, err := strconv.ParseBool(fail)
		if err != nil {
			http.Error(w, fmt.Sprintf("fail: %q is not true or false", fail), http.StatusBadRequest)
			return
		}
		f.Disk.SetFailing(failing)
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
