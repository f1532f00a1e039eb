package main

import (
	"slices"
	"testing"

	"github.com/spf13/pflag"

	"github.com/tidekv/tidekv/internal/server"
)

// A node the local actuator starts inherits this node's settings, not its
// directory, addresses or join list.
func TestInheritedArgs(t *testing.T) {
	got := inheritedArgs([]string{"--data-dir", "d/node1", "--listen=127.0.0.1:7400", "--replication-factor", "3",
		"--http-listen", "127.0.0.1:7401", "--autoscale", "--join", "a,b", "--redis-listen=x", "--autoscale-max-nodes", "4"})
	want := []string{"--replication-factor", "3", "--autoscale", "--autoscale-max-nodes", "4"}
	if !slices.Equal(got, want) {
		t.Fatalf("inherited %q, want %q", got, want)
	}
}

// --insecure and --certs-dir contradict; --users-file means nothing
// without certificates; no flag at all is the insecure default.
func TestServerSecurityFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		ok   bool
	}{
		{nil, true},
		{[]string{"--insecure"}, true},
		{[]string{"--certs-dir", "c"}, true},
		{[]string{"--certs-dir", "c", "--users-file", "u.json"}, true},
		{[]string{"--certs-dir", "c", "--insecure"}, false},
		{[]string{"--users-file", "u.json"}, false},
	} {
		var cfg server.SecurityConfig
		var sec serverSecurity
		f := pflag.NewFlagSet("server", pflag.ContinueOnError)
		sec.addFlags(f, &cfg)
		if err := f.Parse(c.args); err != nil {
			t.Fatal(err)
		}
		if err := sec.check(); (err == nil) != c.ok {
			t.Errorf("%q: check() = %v, want ok=%v", c.args, err, c.ok)
		}
	}
}
