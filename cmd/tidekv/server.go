package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/tidekv/tidekv/internal/actuator/local"
	"github.com/tidekv/tidekv/internal/georpc"
	"github.com/tidekv/tidekv/internal/raftstore"
	"github.com/tidekv/tidekv/internal/server"
	"github.com/tidekv/tidekv/internal/txn"
)

// serverOpts are the server command's flags that are not server.Config.
type serverOpts struct {
	join         string
	gcPercent    *int
	autoscale    bool
	autoscaleDir string
	sec          serverSecurity
}

func newServerCmd() *cobra.Command {
	cfg := server.DefaultConfig()
	o := &serverOpts{}
	cmd := &cobra.Command{
		Use:   "server",
		Short: "Run a TideKV node",
		Long: "Run a TideKV node. The first node, started without --join, creates the cluster;\n" +
			"others join through any existing node. Restarting on an existing data dir rejoins with its data.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runServer(cfg, o) },
	}
	addServerFlags(cmd.Flags(), &cfg, o)
	return cmd
}

// runServer runs a node until SIGINT or SIGTERM.
func runServer(cfg server.Config, o *serverOpts) error {
	if err := o.sec.check(&cfg); err != nil {
		return err
	}
	if err := o.sec.redisPassword(&cfg); err != nil {
		return err
	}
	if o.join != "" {
		cfg.Join = strings.Split(o.join, ",")
	}
	// One replication factor: the replica store's checks and
	// placement's target.
	cfg.Placement.ReplicationFactor = cfg.Raft.ReplicationFactor
	if o.autoscale {
		cfg.Autoscale.Enabled, cfg.Autoscale.Actuator = true, "local"
	}
	if err := setLocalActuator(&cfg, o.autoscaleDir); err != nil {
		return err
	}
	log.SetFlags(log.LstdFlags | log.Lmicroseconds)
	applyGCPercent(*o.gcPercent)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	s, err := server.Start(ctx, cfg)
	if err != nil {
		return err
	}
	line := fmt.Sprintf("tidekv: node %d ready grpc=%s http=%s", s.NodeID(), s.Addr(), s.HTTPAddr())
	if a := s.RedisAddr(); a != "" {
		line += " redis=" + a
	}
	fmt.Println(line)
	<-ctx.Done()
	log.Printf("node %d shutting down", s.NodeID())
	s.Stop()
	return nil
}

// addServerFlags binds the server command's flags to cfg and o.
func addServerFlags(f *pflag.FlagSet, cfg *server.Config, o *serverOpts) {
	f.StringVar(&cfg.DataDir, "data-dir", "tidekv-data", "directory for this node's data")
	f.StringVar(&cfg.GRPCAddr, "listen", "127.0.0.1:7400", "gRPC listen address (host:port) for clients and peers")
	f.StringVar(&cfg.AdvertiseAddr, "advertise", "", "gRPC address (host:port) peers and clients dial, when not the one --listen binds (e.g. a pod's DNS name)")
	f.StringVar(&cfg.HTTPAddr, "http-listen", server.AutoAddr, "HTTP listen address for /health, /ready, /metrics and the dashboard; \"auto\": the --listen host at its port + 1, or a free port if that one is taken (printed); empty disables it")
	f.StringVar(&cfg.Redis.ListenAddr, "redis-listen", "", "Redis-protocol listen address (host:port; empty disables it)")
	f.IntVar(&cfg.Redis.MaxConns, "max-connections", cfg.Redis.MaxConns, "most Redis-protocol client connections at once; one more gets 'ERR max number of clients reached' and is closed (0: no limit)")
	f.IntVar(&cfg.Redis.MaxBulkLen, "redis-max-bulk-len", cfg.Redis.MaxBulkLen, "largest Redis-protocol argument in bytes (like proto-max-bulk-len; default: the maximum value size); a larger one is refused at its header, unread, and the connection closed")
	f.IntVar(&cfg.Redis.MaxCommandLen, "redis-max-command-len", cfg.Redis.MaxCommandLen, "most bytes of one Redis-protocol command, arguments included (like client-query-buffer-limit; at least --redis-max-bulk-len)")
	f.IntVar(&cfg.Redis.MaxOutputBuffer, "redis-max-output-buffer", cfg.Redis.MaxOutputBuffer, "most reply bytes held for one Redis-protocol client (like client-output-buffer-limit): replies are written out when they reach it, and a client that does not take them within --redis-output-timeout is disconnected")
	f.DurationVar(&cfg.Redis.OutputTimeout, "redis-output-timeout", cfg.Redis.OutputTimeout, "how long a Redis-protocol client may take to accept one write of its replies before it is disconnected")
	f.DurationVar(&cfg.Redis.BlockRecheck, "redis-block-recheck", cfg.Redis.BlockRecheck, "how often a client blocked in BLPOP, BZPOPMIN and the other blocking pops tries again on its own: a push through this node wakes it at once, one through another node is seen only by such a try")
	f.DurationVar(&cfg.Redis.ScriptTimeLimit, "redis-script-time-limit", cfg.Redis.ScriptTimeLimit, "longest one run of a Redis script (EVAL, EVALSHA) may take: past it the script is stopped, nothing it wrote is applied, and its client gets an error")
	f.IntVar(&cfg.Redis.MaxBlockedClients, "redis-max-blocked-clients", cfg.Redis.MaxBlockedClients, "most Redis-protocol clients blocked at once on this node (BLPOP and the other blocking pops); one more gets 'ERR max number of blocked clients reached' at once")
	f.StringVar(&cfg.Gossip.BindAddr, "gossip-listen", "", "gossip (failure detection) listen address, TCP and UDP (host:port; empty disables it)")
	f.DurationVar(&cfg.Control.DeadNodeGrace, "dead-node-grace", cfg.Control.DeadNodeGrace, "how long a node may be unreachable before its replicas are re-created elsewhere")
	f.Float64Var(&cfg.MaxSnapshotRate, "snapshot-rate", 0, "most bytes per second for all outgoing snapshots of the node, whatever migration allowance the control loop sets (0: the allowance alone)")
	f.StringVar(&cfg.Locality, "locality", "", "this node's place as key=value labels, widest first (e.g. region=eu,zone=a)")
	o.sec.addFlags(f, &cfg.Security)
	f.StringVar(&o.join, "join", "", "comma-separated gRPC addresses of existing nodes to join")
	o.gcPercent = gcPercentFlag(f)
	f.DurationVar(&cfg.Raft.MaxClockOffset, "max-offset", cfg.Raft.MaxClockOffset, "most any two nodes' clocks may differ, the same on every node: timestamps further ahead are refused, and a node further than 0.8 × this from a majority of its peers holds no leases (at most 0.8 × half the election timeout: 400ms)")
	f.IntVar(&cfg.Raft.ReplicationFactor, "replication-factor", cfg.Raft.ReplicationFactor, "voters per range")
	f.BoolVar(&o.autoscale, "autoscale", false, "let the controller add and remove nodes with the local actuator (cluster settings autoscale.* override)")
	f.StringVar(&o.autoscaleDir, "autoscale-dir", "", "where the local actuator keeps the nodes it starts, the same for every node of the cluster (default: \"autoscaled\" beside --data-dir); nodes it starts get this node's")
	f.IntVar(&cfg.Autoscale.MinNodes, "autoscale-min-nodes", cfg.Autoscale.MinNodes, "autoscaling never goes below this many nodes (nor the replication factor)")
	f.IntVar(&cfg.Autoscale.MaxNodes, "autoscale-max-nodes", cfg.Autoscale.MaxNodes, "autoscaling never goes above this many nodes")
	f.Float64Var(&cfg.Actuators.Local.NodeCPUs, "autoscale-node-cpus", 0, "the CPU size of each node the local actuator starts: a cgroup of its own with a quota of this many CPUs (docs/operations.md, \"Node CPU size\"); 0: unsized")
	f.IntVar(&cfg.Limits.MaxMessageSize, "grpc-max-message-size", cfg.Limits.MaxMessageSize, "largest gRPC message in bytes the node receives or sends; a larger one is refused unread (at least the 16 MiB write and scan-page limits plus 1 MiB)")
	f.Uint32Var(&cfg.Limits.MaxConcurrentStreams, "grpc-max-streams", cfg.Limits.MaxConcurrentStreams, "most RPCs in progress on one gRPC connection; a client's further calls wait")
	f.IntVar(&cfg.Admission.MaxInflight, "max-inflight", cfg.Admission.MaxInflight, "KV requests in progress before the node answers 'overloaded, retry'")
	f.DurationVar(&cfg.Admission.Target, "admission-target", cfg.Admission.Target,
		"queueing delay a node tolerates as standing before it sheds new requests (0 turns delay-based admission off; docs/admission.md)")
	f.DurationVar(&cfg.Admission.Interval, "admission-interval", cfg.Admission.Interval,
		"window over which the median queueing delay is taken; also the longest a request may wait to start")
	f.IntVar(&cfg.Admission.MinInflight, "admission-min-inflight", cfg.Admission.MinInflight,
		"fewest KV requests queued or in progress (the larger of those in progress and the last window's queue by Little's law) at which the node sheds by delay: below it, a closed loop of clients is served however slow the machine is")
	addTxnFlags(f, &cfg.Txn)
	addGeoFlags(f, &cfg.Geo)
	f.BoolVar(&cfg.Raft.TestingStaleReads, "testing-stale-reads", false, "TESTING ONLY: serve reads from local state without the lease check (breaks linearizability)")
	_ = f.MarkHidden("testing-stale-reads")
	f.BoolVar(&cfg.EnablePprof, "enable-pprof", false, "serve Go's CPU, heap and other profiles on /debug/pprof/ of the HTTP address (to admins on a secure node); off by default")
	f.Var(breaksFlag{&cfg.Raft.TestingBreaks}, "testing-break", "TESTING ONLY: commit transactions in a deliberately broken mode, comma-separated: skip-refresh, skip-tscache, client-clock (breaks serializability; the anomaly checker's negative controls)")
	_ = f.MarkHidden("testing-break")
	f.BoolVar(&cfg.FaultInjection, "enable-fault-injection", false, "TESTING ONLY, off by default: serve /debug/faults on the HTTP address to loopback callers (admins on a secure node), through which chaos runs (tidekv bench chaos) cut this node's Raft traffic with its peers, offset its lease clock and slow its disk")
}

// breaksFlag is --testing-break: raftstore.Breaks by name.
type breaksFlag struct{ b *raftstore.Breaks }

func (f breaksFlag) String() string {
	if f.b == nil {
		return ""
	}
	return f.b.String()
}

func (f breaksFlag) Set(s string) (err error) {
	*f.b, err = raftstore.ParseBreaks(s)
	return err
}

func (breaksFlag) Type() string { return "modes" }

// setLocalActuator sets where the nodes the local actuator starts live
// (dir, or beside this node's data) and that they run with this node's
// settings, the actuator's directory included: whichever node holds the
// meta lease runs the controller and must find the nodes the others
// started.
func setLocalActuator(cfg *server.Config, dir string) error {
	if dir == "" {
		dir = local.DirBeside(cfg.DataDir)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("--autoscale-dir: %w", err)
	}
	cfg.Actuators.Local.Dir = abs
	cfg.Actuators.Local.ExtraArgs = inheritedArgs(os.Args[2:], abs)
	return nil
}

// perNodeFlags name a node's own directory, addresses and join list: a
// node the local actuator starts gets its own, not this node's. The
// actuator directory is given again in its resolved form.
var perNodeFlags = map[string]bool{"--data-dir": true, "--listen": true, "--advertise": true, "--http-listen": true,
	"--redis-listen": true, "--gossip-listen": true, "--join": true, "--node-label": true, "--autoscale-dir": true}

// inheritedArgs is this node's server arguments without the per-node ones,
// and with the actuator directory dir every node shares.
func inheritedArgs(args []string, dir string) []string {
	out := []string{"--autoscale-dir", dir}
	for i := 0; i < len(args); i++ {
		name, _, hasValue := strings.Cut(args[i], "=")
		if !perNodeFlags[name] {
			out = append(out, args[i])
			continue
		}
		if !hasValue {
			i++ // skip the flag's value
		}
	}
	return out
}

// addTxnFlags binds the transactions' knobs (txn.Config, whose
// Validate refuses bad values when the node starts).
func addTxnFlags(f *pflag.FlagSet, c *txn.Config) {
	f.DurationVar(&c.HeartbeatInterval, "txn-heartbeat-interval", c.HeartbeatInterval, "how often a coordinator heartbeats the record of each open transaction that has written")
	f.DurationVar(&c.Expiry, "txn-expiry", c.Expiry, "how old a transaction record's last heartbeat must be before a transaction its intents block may abort it (more than twice --txn-heartbeat-interval); bounds how long a dead coordinator's intents block others")
	f.DurationVar(&c.IntentWait, "txn-intent-wait", c.IntentWait, "how long a request that meets a live transaction's intent waits for it before it fails with a retryable error")
	f.IntVar(&c.MaxKeys, "txn-max-keys", c.MaxKeys, "most keys one transaction may write; past it the transaction is rolled back")
	f.Int64Var(&c.MaxBytes, "txn-max-bytes", c.MaxBytes, "most key and value bytes one transaction may write; past it the transaction is rolled back")
	f.DurationVar(&c.MaxDuration, "txn-max-duration", c.MaxDuration, "longest a transaction may run from its first operation before it is rolled back")
}

// addGeoFlags binds the geo mode's knobs (georpc.Config, whose Validate
// refuses bad values when the node starts).
func addGeoFlags(f *pflag.FlagSet, c *georpc.Config) {
	f.StringVar(&c.KeySpace, "geo-keyspace", "", "name of the geo key space, whose transactions commit by epoch messages between data centres (docs/transactions.md, \"Geo mode\"); empty: the geo mode is off")
	f.StringArrayVar(&c.Localities, "geo-locality", nil, "a data centre's --locality, the flag once per data centre, in the same order on every node (the node with the lowest id in each is its gateway)")
	f.DurationVar(&c.Protocol.Epoch, "geo-epoch", c.Protocol.Epoch, "how long a gateway collects geo transactions before sending them to the other data centres")
	f.DurationVar(&c.Protocol.Deadline, "geo-deadline", c.Protocol.Deadline, "how long after an epoch a data centre waits for another's message before voting to leave its transactions out (more than twice the slowest one-way delay)")
	f.DurationVar(&c.CommitTimeout, "geo-commit-timeout", c.CommitTimeout, "longest a geo commit waits for its decision")
}
