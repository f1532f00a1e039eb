package main

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/tidekv/tidekv/internal/security"
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
// without certificates; without either, every address the node listens on
// or advertises must be loopback.
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
		{[]string{"--listen", "localhost:7400", "--redis-listen", "127.0.0.2:6379", "--gossip-listen", "[::1]:7403", "--http-listen", ""}, true},
		{[]string{"--listen", "0.0.0.0:7400"}, false},
		{[]string{"--listen", ":7400"}, false},
		{[]string{"--listen", "0.0.0.0:7400", "--insecure"}, true},
		{[]string{"--listen", "0.0.0.0:7400", "--certs-dir", "c"}, true},
		{[]string{"--advertise", "node1.example:7400"}, false},
		{[]string{"--http-listen", "10.0.0.1:7401"}, false},
		{[]string{"--redis-listen", ":6379"}, false},
		{[]string{"--gossip-listen", "192.168.1.5:7403"}, false},
	} {
		cfg := server.DefaultConfig()
		var o serverOpts
		f := pflag.NewFlagSet("server", pflag.ContinueOnError)
		addServerFlags(f, &cfg, &o)
		if err := f.Parse(c.args); err != nil {
			t.Fatal(err)
		}
		if err := o.sec.check(&cfg); (err == nil) != c.ok {
			t.Errorf("%q: check() = %v, want ok=%v", c.args, err, c.ok)
		}
	}
}

// runCmd runs the tidekv command line args as main does.
func runCmd(args ...string) error {
	root := newRootCmd()
	root.SetArgs(args)
	root.SetOut(io.Discard)
	return root.Execute()
}

// `tidekv server` on a non-loopback address without --certs-dir stops
// before it creates anything, saying what to give in one sentence.
func TestServerRefusesInsecureOffLoopback(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	err := runCmd("server", "--data-dir", data, "--listen", "0.0.0.0:0")
	want := "--listen 0.0.0.0:0 is not a loopback address, so this node would serve plaintext without authentication to the network: give --certs-dir to secure it, or --insecure if that is meant"
	if err == nil || err.Error() != want {
		t.Fatalf("err = %v, want %q", err, want)
	}
	if _, err := os.Stat(data); !os.IsNotExist(err) {
		t.Fatalf("the refused node created its data dir: %v", err)
	}
}

// Every flag that would take a secret is refused, naming what to use
// instead and without repeating the value.
func TestSecretFlagsRefused(t *testing.T) {
	for _, c := range []struct {
		args    []string
		instead string
	}{
		{[]string{"server", "--redis-password", "hunter2"}, "$TIDEKV_REDIS_PASSWORD"},
		{[]string{"ctl", "--password=hunter2", "get", "k"}, "$TIDEKV_PASSWORD"},
		{[]string{"bench", "--password", "hunter2"}, "$TIDEKV_PASSWORD"},
		{[]string{"user", "add", "app", "--users-file", filepath.Join(t.TempDir(), "u.json"), "--password", "hunter2"}, "$TIDEKV_NEW_PASSWORD"},
		{[]string{"user", "passwd", "app", "--password", "hunter2"}, "$TIDEKV_NEW_PASSWORD"},
	} {
		err := runCmd(c.args...)
		if err == nil || !strings.Contains(err.Error(), "is refused because every user of this machine can read a command's flags") ||
			!strings.Contains(err.Error(), c.instead) || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%q: err = %v, want a refusal naming %s", c.args, err, c.instead)
		}
	}
}

// The default Redis user's password comes from --redis-password-file (its
// first line) or $TIDEKV_REDIS_PASSWORD, not both.
func TestRedisPasswordSources(t *testing.T) {
	file := filepath.Join(t.TempDir(), "redis.pw")
	if err := os.WriteFile(file, []byte("from-file\nignored\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		env, file, want string
		ok              bool
	}{
		{"", "", "", true},
		{"from-env", "", "from-env", true},
		{"", file, "from-file", true},
		{"from-env", file, "", false},
		{"", filepath.Join(filepath.Dir(file), "missing"), "", false},
	} {
		t.Setenv(redisPasswordEnv, c.env)
		cfg := server.DefaultConfig()
		s := serverSecurity{redisPasswordFile: c.file}
		err := s.redisPassword(&cfg)
		if (err == nil) != c.ok || cfg.Security.RedisPassword != c.want {
			t.Errorf("env %q file %q: password %q, err %v; want %q, ok=%v", c.env, c.file, cfg.Security.RedisPassword, err, c.want, c.ok)
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

// The transaction flags set txn.Config; values that cannot work are
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

// The login flags set the derivation budget's share and burst; values out
// of bounds are refused by its Validate, naming which.
func TestLoginFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want security.LoginConfig
		bad  string // what the refusal names; empty: accepted
	}{
		{nil, security.DefaultLoginConfig(), ""},
		{[]string{"--login-derivation-share", "0.5", "--login-derivation-burst", "3s", "--login-refusal-hold", "250ms", "--login-derivation-grace", "0s"}, security.LoginConfig{DerivationShare: 0.5, DerivationBurst: 3 * time.Second, RefusalHold: 250 * time.Millisecond}, ""},
		{[]string{"--login-derivation-share", "0"}, security.LoginConfig{DerivationBurst: time.Second, RefusalHold: time.Second, DerivationGrace: security.DefaultDerivationGrace}, "derivation share"},
		{[]string{"--login-derivation-burst", "0s"}, security.LoginConfig{DerivationShare: 0.1, RefusalHold: time.Second, DerivationGrace: security.DefaultDerivationGrace}, "derivation burst"},
		{[]string{"--login-derivation-burst", "2m"}, security.LoginConfig{DerivationShare: 0.1, DerivationBurst: 2 * time.Minute, RefusalHold: time.Second, DerivationGrace: security.DefaultDerivationGrace}, "derivation burst"},
		{[]string{"--login-refusal-hold", "11s"}, security.LoginConfig{DerivationShare: 0.1, DerivationBurst: time.Second, RefusalHold: 11 * time.Second, DerivationGrace: security.DefaultDerivationGrace}, "hold of a refused login"},
		{[]string{"--login-derivation-grace", "6s"}, security.LoginConfig{DerivationShare: 0.1, DerivationBurst: time.Second, RefusalHold: time.Second, DerivationGrace: 6 * time.Second}, "grace of a login derivation"},
	} {
		cfg := server.DefaultConfig()
		f := pflag.NewFlagSet("server", pflag.ContinueOnError)
		addServerFlags(f, &cfg, &serverOpts{})
		if err := f.Parse(c.args); err != nil {
			t.Fatal(err)
		}
		if cfg.Security.Login != c.want {
			t.Errorf("%q: %+v, want %+v", c.args, cfg.Security.Login, c.want)
		}
		err := cfg.Security.Login.Validate()
		if (c.bad == "" && err != nil) || (c.bad != "" && (err == nil || !strings.Contains(err.Error(), c.bad))) {
			t.Errorf("%q: Validate() = %v, want a refusal naming %q (none if empty)", c.args, err, c.bad)
		}
	}
}

// The blocking knobs of the Redis listener are node flags; values its
// Validate refuses are refused naming the flag.
func TestRedisBlockFlags(t *testing.T) {
	for _, c := range []struct {
		args    []string
		recheck time.Duration
		max     int
		bad     string // the flag the refusal names; empty: accepted
	}{
		{nil, 100 * time.Millisecond, 1000, ""},
		{[]string{"--redis-block-recheck", "20ms", "--redis-max-blocked-clients", "50"}, 20 * time.Millisecond, 50, ""},
		{[]string{"--redis-block-recheck", "0s"}, 0, 1000, "--redis-block-recheck"},
		{[]string{"--redis-max-blocked-clients", "0"}, 100 * time.Millisecond, 0, "--redis-max-blocked-clients"},
		{[]string{"--redis-max-blocked-clients", "-3"}, 100 * time.Millisecond, -3, "--redis-max-blocked-clients"},
	} {
		cfg := server.DefaultConfig()
		f := pflag.NewFlagSet("server", pflag.ContinueOnError)
		addServerFlags(f, &cfg, &serverOpts{})
		if err := f.Parse(append([]string{"--redis-listen", "127.0.0.1:0"}, c.args...)); err != nil {
			t.Fatal(err)
		}
		if cfg.Redis.BlockRecheck != c.recheck || cfg.Redis.MaxBlockedClients != c.max {
			t.Errorf("%q: BlockRecheck %v, MaxBlockedClients %d; want %v, %d", c.args, cfg.Redis.BlockRecheck, cfg.Redis.MaxBlockedClients, c.recheck, c.max)
		}
		err := cfg.Validate()
		if (c.bad == "" && err != nil) || (c.bad != "" && (err == nil || !strings.Contains(err.Error(), c.bad))) {
			t.Errorf("%q: Validate() = %v, want a refusal naming %q (none if empty)", c.args, err, c.bad)
		}
	}
}
