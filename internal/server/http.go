package server

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc/status"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/cliformat"
	"github.com/tidekv/tidekv/internal/httpapi"
	"github.com/tidekv/tidekv/internal/metrics"
)

// httpNode is what the node's HTTP port (internal/httpapi) serves from it.
func (s *Server) httpNode() httpapi.Node {
	n := httpapi.Node{
		ID:             s.NodeID,
		Serving:        s.ports.ready.Load,
		Admin:          httpAdmin{&adminService{s: s}},
		Metrics:        promhttp.HandlerFor(s.metrics.Reg, promhttp.HandlerOpts{}),
		Series:         s.metrics.Points,
		SeriesInterval: metrics.SeriesInterval,
		Peers:          s.httpPeers,
		PeerTLS:        s.peerTLS(),
		Pprof:          s.cfg.EnablePprof,
		Faults:         s.ports.faults,
	}
	if s.sec != nil {
		n.Auth = &s.sec.http
	}
	return n
}

// httpPeers are the HTTP addresses of the other nodes in the directory.
func (s *Server) httpPeers() []string {
	var addrs []string
	for _, n := range s.peers.dir.List() {
		if n.GetNodeId() != s.NodeID() && n.GetHttpAddr() != "" {
			addrs = append(addrs, n.GetHttpAddr())
		}
	}
	return addrs
}

// httpAdmin is httpapi's Admin over the node's admin service: the same
// paths as `tidekv ctl`, translated to Go values here, at the edge.
type httpAdmin struct{ a *adminService }

func (h httpAdmin) Status(ctx context.Context) (cliformat.StatusView, error) {
	resp, err := h.a.Status(ctx, &tidekvpb.StatusRequest{})
	if err != nil {
		return cliformat.StatusView{}, err
	}
	return cliformat.StatusOf(resp), nil
}

func (h httpAdmin) Ranges(ctx context.Context) (cliformat.RangesView, error) {
	resp, err := h.a.Ranges(ctx, &tidekvpb.RangesRequest{})
	if err != nil {
		return cliformat.RangesView{}, err
	}
	return cliformat.RangesOf(resp), nil
}

func (h httpAdmin) Events(ctx context.Context, local bool, limit int) (cliformat.EventsView, error) {
	resp, err := h.a.Events(ctx, &tidekvpb.EventsRequest{Local: local, Limit: uint32(limit)})
	if err != nil {
		return cliformat.EventsView{}, err
	}
	return cliformat.EventsOf(resp.GetEvents()), nil
}

func (h httpAdmin) Autoscale(ctx context.Context) (json.RawMessage, error) {
	resp, err := h.a.AutoscaleStatus(ctx, &tidekvpb.AutoscaleStatusRequest{})
	if err != nil {
		return nil, err
	}
	return json.RawMessage(resp.GetJson()), nil
}

func (h httpAdmin) Settings(ctx context.Context, set ...httpapi.Setting) ([]httpapi.Setting, error) {
	req := &tidekvpb.SettingsRequest{}
	for _, st := range set {
		req.Set = append(req.Set, &tidekvpb.Setting{Key: st.Key, Value: st.Value})
	}
	resp, err := h.a.Settings(ctx, req)
	if err != nil {
		return nil, err
	}
	var out []httpapi.Setting
	for _, st := range resp.GetSettings() {
		out = append(out, httpapi.Setting{Key: st.GetKey(), Value: st.GetValue()})
	}
	return out, nil
}

func (h httpAdmin) Readiness(ctx context.Context) (httpapi.Readiness, error) {
	resp, err := h.a.Readiness(ctx, &tidekvpb.ReadinessRequest{})
	if err != nil {
		// The status's sentence, not its gRPC framing.
		return httpapi.Readiness{}, errors.New(status.Convert(err).Message())
	}
	return httpapi.Readiness{Ready: resp.GetReady(), Reason: resp.GetReason(),
		ReplicationFactor: resp.GetReplicationFactor(), LiveNodes: resp.GetLiveNodes(), Ranges: resp.GetRanges()}, nil
}
