package cliformat

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/units"
)

// The views below are the JSON shapes of `tidekv ctl status|ranges|events
// --json` and of the dashboard's /api endpoints (docs/dashboard.md): flat,
// named for people and scripts, the same in both places.

// NodeView is one node of StatusView.
type NodeView struct {
	ID        uint64  `json:"id"`
	Addr      string  `json:"addr"`
	HTTPAddr  string  `json:"http_addr"`
	RedisAddr string  `json:"redis_addr"`
	State     string  `json:"state"`
	Live      bool    `json:"live"`
	Locality  string  `json:"locality"`
	Replicas  uint32  `json:"replicas"`
	Leases    uint32  `json:"leases"`
	Bytes     uint64  `json:"bytes"`
	QPS       float64 `json:"qps"`
	CPU       float64 `json:"cpu"`
	// CPUQuota is the node's CPU size in CPUs, 0 when it is not sized; CPU
	// is then the utilisation of that quota.
	CPUQuota  float64       `json:"cpu_quota"`
	Score     float64       `json:"score"`
	P99Ms     float64       `json:"p99_ms"`
	Admission AdmissionView `json:"admission"`
	Clock     ClockView     `json:"clock"`
	// LastSeenSeconds is -1 when the node has not heartbeated to the
	// current meta leaseholder.
	LastSeenSeconds float64 `json:"last_seen_seconds"`
}

// AdmissionView is a node's admission control (docs/admission.md): whether
// it is overloaded, the share of new requests it admits, the smallest
// queueing delay of its last window, and requests it refused per second.
type AdmissionView struct {
	Overloaded   bool    `json:"overloaded"`
	AdmitShare   float64 `json:"admit_share"`
	QueueDelayMs float64 `json:"queue_delay_ms"`
	RejectedQPS  float64 `json:"rejected_qps"`
}

// String is the status table's cell: "ok", or the share admitted, the
// delay and the refusals; "-" before the node has reported.
func (a AdmissionView) String() string {
	switch {
	case a.AdmitShare == 0:
		return "-"
	case !a.Overloaded && a.AdmitShare >= 1 && a.RejectedQPS < 0.5:
		return "ok"
	}
	return fmt.Sprintf("admits %.0f%%, delay %.1fms, %.0f refused/s", 100*a.AdmitShare, a.QueueDelayMs, a.RejectedQPS)
}

// ClockView is a node's offset monitor (docs/design.md, "Clocks"): whether
// its clock is too far from a majority of its peers for it to hold leases,
// why, and the largest offset it measured to a peer (signed: positive when
// the peer's clock is ahead).
type ClockView struct {
	Untrusted   bool    `json:"untrusted"`
	Reason      string  `json:"reason,omitempty"`
	MaxOffsetMs float64 `json:"max_offset_ms"`
}

// String is the status table's cell: the largest offset, marked when the
// node holds no leases for it; "-" before the node measured any.
func (c ClockView) String() string {
	switch {
	case c.Untrusted:
		return fmt.Sprintf("UNTRUSTED %+.0fms", c.MaxOffsetMs)
	case c.MaxOffsetMs == 0:
		return "-"
	}
	return fmt.Sprintf("%+.0fms", c.MaxOffsetMs)
}

// ImbalanceView holds stddev/mean indices across live nodes.
type ImbalanceView struct {
	Replicas float64 `json:"replicas"`
	Bytes    float64 `json:"bytes"`
	QPS      float64 `json:"qps"`
	CPU      float64 `json:"cpu"`
}

// StatusView is the cluster status: nodes by id, range count, imbalance.
type StatusView struct {
	ClusterID  string        `json:"cluster_id"`
	NodeID     uint64        `json:"node_id"`
	RangeCount uint32        `json:"range_count"`
	LogVersion uint32        `json:"log_version"`
	Nodes      []NodeView    `json:"nodes"`
	Imbalance  ImbalanceView `json:"imbalance"`
}

// StatusOf flattens a Status answer, nodes ordered by id.
func StatusOf(resp *tidekvpb.StatusResponse) StatusView {
	v := StatusView{ClusterID: fmt.Sprintf("%x", resp.GetClusterId()), NodeID: resp.GetNodeId(), RangeCount: resp.GetRangeCount(),
		LogVersion: resp.GetLogVersion(), Nodes: []NodeView{}}
	for _, n := range resp.GetNodes() {
		d := n.GetNode()
		v.Nodes = append(v.Nodes, NodeView{
			ID: d.GetNodeId(), Addr: d.GetGrpcAddr(), HTTPAddr: d.GetHttpAddr(), RedisAddr: d.GetRedisAddr(),
			State: n.GetState(), Live: n.GetLive(), Locality: d.GetLocality(),
			Replicas: n.GetReplicas(), Leases: n.GetLeases(), Bytes: n.GetBytes(), QPS: n.GetQps(),
			CPU: n.GetCpu(), CPUQuota: n.GetCpuQuota(), Score: n.GetScore(), P99Ms: n.GetP99Ms(), LastSeenSeconds: n.GetLastSeenSeconds(),
			Admission: AdmissionView{Overloaded: n.GetOverloaded(), AdmitShare: n.GetAdmitShare(), QueueDelayMs: n.GetQueueDelayMs(), RejectedQPS: n.GetRejectedQps()},
			Clock:     ClockView{Untrusted: n.GetClockUntrusted(), Reason: n.GetClockReason(), MaxOffsetMs: n.GetMaxClockOffsetMs()},
		})
	}
	sort.Slice(v.Nodes, func(i, j int) bool { return v.Nodes[i].ID < v.Nodes[j].ID })
	im := resp.GetImbalance()
	v.Imbalance = ImbalanceView{Replicas: im.GetReplicas(), Bytes: im.GetBytes(), QPS: im.GetQps(), CPU: im.GetCpu()}
	return v
}

// StatusTable writes the nodes, the range count and the imbalance indices.
func StatusTable(w io.Writer, v StatusView) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tADDRESS\tSTATE\tLOCALITY\tREPLICAS\tLEASES\tDATA\tQPS\tCPUS\tCPU\tSCORE\tP99\tLAST SEEN\tCLOCK\tADMISSION")
	for _, n := range v.Nodes {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d\t%d\t%s\t%.1f\t%s\t%.0f%%\t%.2f\t%.1fms\t%s\t%s\t%s\n",
			n.ID, n.Addr, n.State, orDash(n.Locality), n.Replicas, n.Leases, units.Human(n.Bytes), n.QPS,
			cpuSize(n.CPUQuota), 100*n.CPU, n.Score, n.P99Ms, Ago(n.LastSeenSeconds), n.Clock, n.Admission)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, n := range v.Nodes {
		if n.Clock.Untrusted {
			fmt.Fprintf(w, "node %d holds no leases: %s\n", n.ID, n.Clock.Reason)
		}
	}
	im := v.Imbalance
	_, err := fmt.Fprintf(w, "%s, %s, log version %d; imbalance (stddev/mean): replicas %.2f, data %.2f, qps %.2f, cpu %.2f\n",
		plural(len(v.Nodes), "node"), plural(int(v.RangeCount), "range"), v.LogVersion, im.Replicas, im.Bytes, im.QPS, im.CPU)
	return err
}

// cpuSize is the status table's CPUS cell: a sized node's quota in CPUs,
// "-" for a node that shares the machine.
func cpuSize(cpus float64) string {
	if cpus <= 0 {
		return "-"
	}
	return strconv.FormatFloat(cpus, 'f', -1, 64)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// ReplicaView is one replica of a RangeView.
type ReplicaView struct {
	Node uint64 `json:"node"`
	Type string `json:"type"`
}

// RangeView is one range: bounds as printable text ("" is the start or end
// of the key space), replicas, leaseholder and load.
type RangeView struct {
	ID         uint64        `json:"id"`
	Start      string        `json:"start"`
	End        string        `json:"end"`
	Generation uint64        `json:"generation"`
	Replicas   []ReplicaView `json:"replicas"`
	Leader     uint64        `json:"leader"`
	QPS        float64       `json:"qps"`
	Bytes      uint64        `json:"bytes"`
	// GarbageBytes: old versions GC could remove once past gc-ttl.
	GarbageBytes uint64 `json:"garbage_bytes"`
}

// RangesView lists ranges in key order.
type RangesView struct {
	Ranges []RangeView `json:"ranges"`
}

var replicaTypeNames = map[tidekvpb.ReplicaType]string{
	tidekvpb.ReplicaType_VOTER:          "voter",
	tidekvpb.ReplicaType_LEARNER:        "learner",
	tidekvpb.ReplicaType_VOTER_INCOMING: "voter-incoming",
	tidekvpb.ReplicaType_VOTER_OUTGOING: "voter-outgoing",
}

// RangesOf flattens a Ranges answer.
func RangesOf(resp *tidekvpb.RangesResponse) RangesView {
	v := RangesView{Ranges: []RangeView{}}
	for _, ri := range sortedRanges(resp) {
		d := ri.GetDesc()
		rv := RangeView{ID: d.GetRangeId(), Start: printableKey(d.GetStartKey()), End: printableKey(d.GetEndKey()),
			Generation: d.GetGeneration(), Leader: ri.GetLeaderNodeId(), QPS: ri.GetQps(), Bytes: ri.GetBytes(),
			GarbageBytes: ri.GetGarbageBytes(), Replicas: []ReplicaView{}}
		for _, r := range d.GetReplicas() {
			rv.Replicas = append(rv.Replicas, ReplicaView{Node: r.GetNodeId(), Type: replicaTypeNames[r.GetType()]})
		}
		v.Ranges = append(v.Ranges, rv)
	}
	return v
}

func printableKey(k []byte) string {
	if len(k) == 0 {
		return ""
	}
	return Quote(k)
}

// EventView is one event.
type EventView struct {
	Time    time.Time `json:"time"`
	Node    uint64    `json:"node"`
	Kind    string    `json:"kind"`
	Subject string    `json:"subject"`
	Reason  string    `json:"reason"`
}

// EventsView lists events oldest first.
type EventsView struct {
	Events []EventView `json:"events"`
}

// EventsOf converts events, keeping their order.
func EventsOf(es []*tidekvpb.Event) EventsView {
	v := EventsView{Events: make([]EventView, 0, len(es))}
	for _, e := range es {
		v.Events = append(v.Events, EventView{Time: time.Unix(0, e.GetUnixNanos()).UTC(), Node: e.GetNodeId(),
			Kind: e.GetKind(), Subject: e.GetSubject(), Reason: e.GetReason()})
	}
	return v
}

// EventsTable writes one line per event, oldest first, times in UTC.
func EventsTable(w io.Writer, v EventsView) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME (UTC)\tNODE\tKIND\tSUBJECT\tREASON")
	for _, e := range v.Events {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\n", e.Time.Format("2006-01-02 15:04:05.000"), e.Node, e.Kind, e.Subject,
			strings.ReplaceAll(e.Reason, "\n", " "))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintln(w, plural(len(v.Events), "event"))
	return err
}
