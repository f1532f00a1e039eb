package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/cliformat"
	"github.com/tidekv/tidekv/internal/events"
	"github.com/tidekv/tidekv/internal/httpapi"
	"github.com/tidekv/tidekv/internal/meta"
)

func getJSON(addr, path string, v any) error {
	resp, err := http.Get("http://" + addr + path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", path, resp.Status, body)
	}
	if v == nil {
		return nil
	}
	return json.Unmarshal(body, v)
}

func findEvent(es []*tidekvpb.Event, kind, subject, reasonPart string) bool {
	for _, e := range es {
		if e.GetKind() == kind && e.GetSubject() == subject && strings.Contains(e.GetReason(), reasonPart) {
			return true
		}
	}
	return false
}

// An operator sees what the cluster did and how loaded it is: events for
// automatic and requested actions from every node, liveness changes, per
// range and per node load, the dashboard API and the Prometheus series.
func TestObservability(t *testing.T) {
	tc := startClusterWith(t, 3, func(c *Config) { c.HTTPAddr = "127.0.0.1:0" })
	c := tc.client()
	tc.waitReplicated(c, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	for i := range 50 {
		if err := c.Put(ctx, []byte(fmt.Sprintf("k%02d", i)), []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Split(ctx, []byte("k25")); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "events of the split, the up-replication and the node starts", func() error {
		es, err := c.Events(ctx, 0)
		if err != nil {
			return err
		}
		switch {
		case !findEvent(es, "split", "range 2", `split at k25 into ranges 2 and`):
			return fmt.Errorf("no split event in %v", es)
		case !findEvent(es, "replica-add", "range 2", "replication: 1 of 3 voters"):
			return fmt.Errorf("no up-replication event in %v", es)
		}
		for _, s := range tc.nodes {
			if !findEvent(es, "node-start", events.NodeSubject(s.NodeID()), "serving") {
				return fmt.Errorf("no start event of node %d in %v", s.NodeID(), es)
			}
		}
		return nil
	})

	// Load on the ranges shows per range (after a report) and per node.
	stopLoad := make(chan struct{})
	loadDone := make(chan struct{})
	go func() {
		defer close(loadDone)
		for i := 0; ; i++ {
			select {
			case <-stopLoad:
				return
			default:
			}
			c.Get(ctx, []byte(fmt.Sprintf("k%02d", i%50)))
		}
	}()
	h := tc.nodes[0].HTTPAddr()
	eventually(t, 15*time.Second, "load in the ranges, series and status views", func() error {
		var rv cliformat.RangesView
		if err := getJSON(h, "/api/ranges", &rv); err != nil {
			return err
		}
		if len(rv.Ranges) != 2 {
			return fmt.Errorf("ranges: %+v", rv)
		}
		for _, r := range rv.Ranges {
			if r.QPS <= 0 || r.Leader == 0 || len(r.Replicas) != 3 {
				return fmt.Errorf("range without load, leader or replicas: %+v", r)
			}
		}
		var sv httpapi.SeriesView
		if err := getJSON(h, "/api/series", &sv); err != nil {
			return err
		}
		if n := len(sv.Points); n == 0 || sv.Points[n-1].QPS <= 0 && sv.Points[max(n-2, 0)].QPS <= 0 {
			return fmt.Errorf("series shows no load: %+v", sv)
		}
		var st cliformat.StatusView
		if err := getJSON(h, "/api/status", &st); err != nil {
			return err
		}
		var qps float64
		for _, n := range st.Nodes {
			qps += n.QPS
			if n.State != meta.StateLive || n.Score <= 0 {
				return fmt.Errorf("node not live or without score: %+v", n)
			}
		}
		if len(st.Nodes) != 3 || qps <= 0 {
			return fmt.Errorf("status: %+v", st)
		}
		return nil
	})
	close(stopLoad)
	<-loadDone
	if err := getJSON(h, "/api/events?limit=2", nil); err != nil {
		t.Fatal(err)
	}

	// Prometheus series of the store, the monitor and range load.
	metrics := map[string]bool{}
	for _, s := range tc.nodes {
		resp, err := http.Get("http://" + s.HTTPAddr() + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for _, line := range strings.Split(string(body), "\n") {
			if name, _, ok := strings.Cut(line, " "); ok && !strings.HasPrefix(line, "#") && !strings.HasSuffix(line, " 0") {
				name, _, _ = strings.Cut(name, "{")
				metrics[name] = true
			}
		}
	}
	for _, want := range []string{"tidekv_raft_syncs_total", "tidekv_raft_entries_committed_total", "tidekv_raft_messages_sent_total",
		"tidekv_snapshot_sent_bytes_total", "tidekv_snapshot_received_bytes_total", "tidekv_range_qps", "tidekv_load_score",
		"tidekv_requests_total", "tidekv_replicas", "tidekv_leases", "tidekv_migration_allowance_bytes_per_second", "tidekv_autoscale_target_nodes",
		"tidekv_process_write_bytes_total"} {
		if !metrics[want] {
			t.Errorf("no non-zero %s on any node", want)
		}
	}

	// A stopped node turns suspect, with an event saying why.
	victim := tc.nodes[2]
	id := victim.NodeID()
	victim.Stop()
	tc.nodes[2] = nil
	eventually(t, 15*time.Second, "the stopped node turning suspect", func() error {
		resp, err := c.Status(ctx)
		if err != nil {
			return err
		}
		for _, n := range resp.GetNodes() {
			if n.GetNode().GetNodeId() == id && n.GetState() != meta.StateSuspect {
				return fmt.Errorf("node %d state %q", id, n.GetState())
			}
		}
		es, err := c.Events(ctx, 0)
		if err != nil {
			return err
		}
		if !findEvent(es, "node-suspect", events.NodeSubject(id), "no heartbeat for") {
			return fmt.Errorf("no suspect event in %v", es)
		}
		return nil
	})
}
