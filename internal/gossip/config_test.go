package gossip

import (
	"strings"
	"testing"
	"time"
)

func TestConfigValidate(t *testing.T) {
	good := DefaultConfig()
	good.NodeID = 1
	good.GRPCAddr = "127.0.0.1:7000"
	good.Seeds = []string{"127.0.0.1:7946", "node-a.example:7946"}
	if err := good.Validate(); err != nil {
		t.Fatalf("good config: %v", err)
	}
	d := DefaultConfig()
	if d.ProbeInterval != time.Second || d.ProbeTimeout != 200*time.Millisecond || d.SuspicionMult != 3 ||
		d.SuspicionMaxTimeoutMult != 6 || d.GossipInterval != 100*time.Millisecond || d.PushPullInterval != 15*time.Second {
		t.Errorf("defaults drifted from memberlist.DefaultLocalConfig: %+v", d)
	}
	for name, tc := range map[string]struct {
		mut  func(*Config)
		want string
	}{
		"bind":          {func(c *Config) { c.BindAddr = "127.0.0.1" }, "BindAddr"},
		"bind port":     {func(c *Config) { c.BindAddr = "127.0.0.1:70000" }, "BindAddr"},
		"seed":          {func(c *Config) { c.Seeds = []string{"nope"} }, "seed"},
		"seed port 0":   {func(c *Config) { c.Seeds = []string{"127.0.0.1:0"} }, "port 0"},
		"node id":       {func(c *Config) { c.NodeID = 0 }, "NodeID"},
		"grpc":          {func(c *Config) { c.GRPCAddr = "" }, "GRPCAddr"},
		"grpc long":     {func(c *Config) { c.GRPCAddr = strings.Repeat("x", 300) }, "GRPCAddr"},
		"probe":         {func(c *Config) { c.ProbeInterval = 0 }, "ProbeInterval"},
		"probe timeout": {func(c *Config) { c.ProbeTimeout = c.ProbeInterval }, "ProbeTimeout"},
		"gossip":        {func(c *Config) { c.GossipInterval = -1 }, "GossipInterval"},
		"pushpull":      {func(c *Config) { c.PushPullInterval = 0 }, "PushPullInterval"},
		"tcp":           {func(c *Config) { c.TCPTimeout = 0 }, "TCPTimeout"},
		"join retry":    {func(c *Config) { c.JoinRetryInterval = 0 }, "JoinRetryInterval"},
		"rejoin":        {func(c *Config) { c.RejoinInterval = -1 }, "RejoinInterval"},
		"suspicion":     {func(c *Config) { c.SuspicionMult = 0 }, "SuspicionMult"},
		"suspicion max": {func(c *Config) { c.SuspicionMaxTimeoutMult = 0 }, "SuspicionMaxTimeoutMult"},
		"key size":      {func(c *Config) { c.Keys = [][]byte{make([]byte, 32), make([]byte, 20)} }, "key 2"},
	} {
		c := good
		tc.mut(&c)
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Validate() = %v, want an error about %s", name, err, tc.want)
		}
	}
}
