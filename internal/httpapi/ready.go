package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// readyTimeout bounds GET /ready: a meta range without a reachable
// leaseholder is itself a reason not to be ready, not a reason to hang.
const readyTimeout = 2 * time.Second

// ReadyView is the body of GET /ready.
type ReadyView struct {
	Ready             bool   `json:"ready"`
	NodeID            uint64 `json:"node_id"`
	Reason            string `json:"reason,omitempty"`
	ReplicationFactor uint32 `json:"replication_factor,omitempty"`
	LiveNodes         uint32 `json:"live_nodes,omitempty"`
	Ranges            uint32 `json:"ranges,omitempty"`
}

// serveReady answers GET /ready: 200 when this node serves and the cluster
// is fully replicated, 503 with the reason otherwise.
func (n Node) serveReady(w http.ResponseWriter, r *http.Request) {
	v := ReadyView{NodeID: n.ID()}
	if !n.Serving() {
		v.Reason = "this node is not serving yet."
	} else {
		ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
		defer cancel()
		rd, err := n.Admin.Readiness(ctx)
		switch {
		case ctx.Err() != nil:
			v.Reason = fmt.Sprintf("no meta range leaseholder answered within %v.", readyTimeout)
		case err != nil:
			v.Reason = fmt.Sprintf("the meta range could not be read (%v).", err)
		default:
			v.Ready, v.Reason = rd.Ready, rd.Reason
			v.ReplicationFactor, v.LiveNodes, v.Ranges = rd.ReplicationFactor, rd.LiveNodes, rd.Ranges
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	if !v.Ready {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	json.NewEncoder(w).Encode(v)
}
