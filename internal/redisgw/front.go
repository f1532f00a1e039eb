package redisgw

import (
	"context"
	"fmt"
	"net"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tidekv/tidekv/api/keyspace"
	"github.com/tidekv/tidekv/client"
	"github.com/tidekv/tidekv/internal/ksconfig"
	"github.com/tidekv/tidekv/internal/resp"
)

// Front is a node's Redis front end: the RESP listener, serving database
// 0 as the default key space and SELECT n as key space n through a
// Gateway, and the routing client that gateway sends through.
type Front struct {
	srv     *resp.Server
	routing *client.Client
}

// FrontConfig is what a Front is made of.
type FrontConfig struct {
	// Listener configures the RESP listener.
	Listener resp.Config
	// Local serves the calls on ranges the node leads; Routing configures
	// the routing client that serves the rest.
	Local   Local
	Routing client.Config
	Options Options
	// ByID finds key space n for SELECT n.
	ByID func(context.Context, keyspace.ID) (ksconfig.KeySpace, error)
	// Observer sees every command; Registry takes the gateway's counters.
	Observer resp.Observer
	Registry prometheus.Registerer
}

// Serve starts a Front.
func Serve(c FrontConfig) (*Front, error) {
	routing, err := client.New(c.Routing)
	if err != nil {
		return nil, err
	}
	kv := New(c.Local, FromClient(routing), c.Options)
	// Database 0 is the default key space: its scans stop short of the
	// other key spaces' keys.
	def, _ := ksconfig.Catalogue(nil).ByID(keyspace.Default)
	rs, err := resp.New(c.Listener, InKeySpace(kv, def))
	if err != nil {
		routing.Close()
		return nil, fmt.Errorf("redis listener: %w", err)
	}
	rs.SetObserver(c.Observer)
	rs.SetDatabases(Databases(kv, c.ByID))
	c.Registry.MustRegister(kv.Collectors()...)
	c.Registry.MustRegister(DisconnectCounters(rs)...)
	go rs.Serve()
	return &Front{srv: rs, routing: routing}, nil
}

// Addr is the address the front end listens on.
func (f *Front) Addr() net.Addr { return f.srv.Addr() }

// Close stops the listener, then the routing client.
func (f *Front) Close() {
	f.srv.Close()
	f.routing.Close()
}
