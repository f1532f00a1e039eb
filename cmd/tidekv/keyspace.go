package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/client"
	"github.com/tidekv/tidekv/internal/cliformat"
	"github.com/tidekv/tidekv/internal/units"
)

// newKeySpaceCmd is `ctl keyspace`: create and list named key spaces
// (docs/keyspaces.md).
func (o *ctlOptions) newKeySpaceCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "keyspace", Short: "Create and list key spaces (named, disjoint parts of the key space with settings of their own)"}
	var f struct {
		mode, engine, index, capacity, missHandler, onFull string
		rf                                                 int
		ttl, gcTTL                                         time.Duration
	}
	create := o.command("create NAME", "Create a key space; invalid settings or a name in use are refused and nothing is created", 1,
		func(ctx context.Context, cl *client.Client, w io.Writer, args []string) error {
			ks := &tidekvpb.KeySpace{Name: args[0], Mode: f.mode, Engine: f.engine, Index: f.index, TtlMs: f.ttl.Milliseconds(), MissHandler: f.missHandler, OnFull: f.onFull,
				GcTtlMs: f.gcTTL.Milliseconds()}
			if f.rf < 0 {
				return fmt.Errorf("keyspace create: --rf must not be negative, got %d", f.rf)
			}
			ks.Rf = uint32(f.rf)
			if f.ttl%time.Millisecond != 0 || f.ttl < 0 {
				return fmt.Errorf("keyspace create: --ttl must be whole milliseconds and not negative, got %s", f.ttl)
			}
			if f.gcTTL%time.Millisecond != 0 {
				return fmt.Errorf("keyspace create: --gc-ttl must be whole milliseconds, got %s", f.gcTTL)
			}
			if f.capacity != "" {
				b, err := units.ParseBytes(f.capacity)
				if err != nil || b == 0 {
					return fmt.Errorf("keyspace create: --capacity-per-node must be a size above 0 such as 512MiB, got %q", f.capacity)
				}
				ks.CapacityPerNode = b
			}
			made, err := cl.CreateKeySpace(ctx, ks)
			if err != nil {
				return err
			}
			v := cliformat.KeySpacesOf([]*tidekvpb.KeySpace{made})
			if o.json {
				return cliformat.WriteJSON(w, v.KeySpaces[0])
			}
			return cliformat.KeySpacesTable(w, v)
		})
	fl := create.Flags()
	fl.StringVar(&f.mode, "mode", "ordered", "ordered (keys in order, scans work) or hashed (placed by a hash of the key; no scans)")
	fl.IntVar(&f.rf, "rf", 0, "voters per range (0: the cluster's replication factor)")
	fl.StringVar(&f.engine, "engine", "pebble", "pebble or memory (kept in memory: a restarted node gets its share back from the other replicas; if all lost it, the ranges start empty)")
	fl.StringVar(&f.index, "index", "", "the memory engine's index: btree, exthash or cbf (default btree)")
	fl.StringVar(&f.capacity, "capacity-per-node", "", "bytes one node may hold of the key space, e.g. 512MiB; above it the node evicts the least recently used keys (default none)")
	fl.StringVar(&f.onFull, "on-full", "evict", "as a node nears --capacity-per-node: evict (least recently used keys go) or grow (nodes are added ahead of need and data moves to them; eviction only at max nodes)")
	fl.DurationVar(&f.ttl, "ttl", 0, "default time to live of values written without one (0: none)")
	fl.DurationVar(&f.gcTTL, "gc-ttl", 0, "how long overwritten and deleted versions stay readable, 1s to 720h (0: the cluster's gc-ttl with pebble, --txn-max-duration with memory; docs/keyspaces.md)")
	fl.StringVar(&f.missHandler, "miss-handler", "", "http(s) URL a read that misses asks for the value: GET URL?key=KEY (read-through; default none)")
	list := o.command("list", "List the key spaces with their settings, ranges and bytes", 0,
		func(ctx context.Context, cl *client.Client, w io.Writer, _ []string) error {
			ks, err := cl.KeySpaces(ctx)
			if err != nil {
				return err
			}
			v := cliformat.KeySpacesOf(ks)
			if o.json {
				return cliformat.WriteJSON(w, v)
			}
			return cliformat.KeySpacesTable(w, v)
		})
	cmd.AddCommand(create, list)
	return cmd
}
