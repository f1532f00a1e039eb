package main

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/tidekv/tidekv/internal/server"
)

// A node the local actuator starts inherits this node's settings, not its
// directory, addresses or join list, and shares its actuator directory
// (resolved).
func TestInheritedArgs(t *testing.T) {
	got := inheritedArgs([]string{"--data-dir", "d/node1", "--listen=127.0.0.1:7400", "--replication-factor", "3",
		"--http-listen", "127.0.0.1:7401", "--autoscale", "--join", "a,b", "--redis-listen=x", "--autoscale-max-nodes", "4",
		"--autoscale-dir=rel"}, "/abs/autoscaled")
	want := []string{"--autoscale-dir", "/abs/autoscaled", "--replication-factor", "3", "--autoscale", "--autoscale-max-nodes", "4"}
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

// A plaintext ctl reaching a TLS node sees only "error reading server
// preface: EOF"; the error then says what to try.
func TestCtlFailHintsAtTLS(t *testing.T) {
	err := ctlFail(errors.New("tidekv: ranges: rpc error: code = Unavailable desc = connection error: desc = error reading server preface: EOF"))
	if !strings.Contains(err.Error(), "--certs-dir") {
		t.Fatalf("no TLS hint in %q", err)
	}
	if err := ctlFail(errors.New("tidekv: invalid argument: empty key")); strings.Contains(err.Error(), "--certs-dir") {
		t.Fatalf("TLS hint on an unrelated error: %q", err)
	}
}

// The transaction flags set server.TxnConfig; values that cannot work are
// refused by its Validate in a sentence naming the flag.
func TestTxnFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		bad  string // the flag the refusal names; empty: accepted
	}{
		{nil, ""},
		{[]string{"--txn-heartbeat-interval", "200ms", "--txn-expiry", "1s", "--txn-intent-wait", "3s", "--txn-max-keys", "5", "--txn-max-bytes", "1024", "--txn-max-duration", "10s"}, ""},
		{[]string{"--txn-expiry", "2s"}, "--txn-expiry"},
		{[]string{"--txn-heartbeat-interval", "0s"}, "--txn-heartbeat-interval"},
		{[]string{"--txn-intent-wait", "-1s"}, "--txn-intent-wait"},
		{[]string{"--txn-max-duration", "0s"}, "--txn-max-duration"},
		{[]string{"--txn-max-keys", "0"}, "--txn-max-keys"},
		{[]string{"--txn-max-bytes", "-5"}, "--txn-max-bytes"},
	} {
		cfg := server.DefaultConfig()
		f := pflag.NewFlagSet("server", pflag.ContinueOnError)
		addServerFlags(f, &cfg, &serverOpts{})
		if err := f.Parse(c.args); err != nil {
			t.Fatal(err)
		}
		err := cfg.Txn.Validate()
		if c.bad == "" {
			if err != nil {
				t.Errorf("%q refused: %v", c.args, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.bad) {
			t.Errorf("%q: Validate() = %v, want a refusal naming %s", c.args, err, c.bad)
		}
	}
	cfg := server.DefaultConfig()
	f := pflag.NewFlagSet("server", pflag.ContinueOnError)
	addServerFlags(f, &cfg, &serverOpts{})
	if err := f.Parse([]string{"--txn-max-keys", "7", "--txn-expiry", "9s"}); err != nil {
		t.Fatal(err)
	}
	if cfg.Txn.MaxKeys != 7 || cfg.Txn.Expiry != 9*time.Second {
		t.Fatalf("flags set %+v", cfg.Txn)
	}
}
