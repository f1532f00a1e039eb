package main

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/tidekv/tidekv/client"
	"github.com/tidekv/tidekv/internal/security"
	"github.com/tidekv/tidekv/internal/server"
)

// clientSecurity are the flags by which ctl and bench reach a secure
// cluster. The password comes from $TIDEKV_PASSWORD only: a flag's value
// is visible to every user of the machine.
type clientSecurity struct {
	certsDir, user string
}

func (c *clientSecurity) addFlags(f *pflag.FlagSet) {
	user := os.Getenv("TIDEKV_USER")
	if user == "" {
		user = security.RootUser
	}
	f.StringVar(&c.certsDir, "certs-dir", os.Getenv("TIDEKV_CERTS_DIR"), "certs dir of a secure cluster (ca.crt, client.<user>.crt/.key); empty: plaintext ($TIDEKV_CERTS_DIR)")
	f.StringVar(&c.user, "user", user, "user to authenticate as: by client.<user>.crt in --certs-dir if present, else by the password in $TIDEKV_PASSWORD ($TIDEKV_USER)")
	refuseSecretFlag(f, "password", "set $TIDEKV_PASSWORD")
}

// apply configures cfg for TLS and credentials when --certs-dir is set.
func (c *clientSecurity) apply(cfg *client.Config) error {
	if c.certsDir == "" {
		return nil
	}
	tc, hasCert, err := security.LoadClientTLS(security.OSFiles{}, c.certsDir, c.user)
	if err != nil {
		return err
	}
	cfg.TLS = tc
	if hasCert {
		return nil
	}
	pw := os.Getenv("TIDEKV_PASSWORD")
	if pw == "" {
		return fmt.Errorf("no %s in %s and no $TIDEKV_PASSWORD: give user %s a certificate or a password", security.ClientCert(c.user), c.certsDir, c.user)
	}
	cfg.Credentials = security.PasswordCredentials{User: c.user, Password: pw}
	return nil
}

// serverSecurity are `tidekv server`'s security flags.
type serverSecurity struct {
	insecure          bool
	redisPasswordFile string
}

func (s *serverSecurity) addFlags(f *pflag.FlagSet, cfg *server.SecurityConfig) {
	f.StringVar(&cfg.CertsDir, "certs-dir", "", "serve TLS with ca.crt and node.crt/.key from this dir, require node certificates between nodes, encrypt gossip with gossip.key and authenticate every client (docs/security.md)")
	f.StringVar(&cfg.UsersFile, "users-file", "", "with --certs-dir: users, roles and password hashes (`tidekv user`); re-read within a second of a change")
	f.BoolVar(&s.insecure, "insecure", false, "plaintext and no authentication: needed to start without --certs-dir on any address but loopback")
	f.StringVar(&s.redisPasswordFile, "redis-password-file", "", "file whose first line is the password Redis clients must give with AUTH as the default user (else $"+redisPasswordEnv+"; empty: none)")
	f.Float64Var(&cfg.Login.DerivationShare, "login-derivation-share", cfg.Login.DerivationShare, "share of the node's CPUs, in [0.001, 1], that password derivations of logins not yet verified may use; a login beyond it is refused at once, to be retried (docs/security.md)")
	f.DurationVar(&cfg.Login.DerivationBurst, "login-derivation-burst", cfg.Login.DerivationBurst, "CPU time, in (0, 1m], that those derivations may spend at once beyond --login-derivation-share, saved while they spend less: new logins one after another (docs/security.md)")
	f.DurationVar(&cfg.Login.DerivationGrace, "login-derivation-grace", cfg.Login.DerivationGrace, "how long, in [0, 5s], a login's password derivation waits at the lowest CPU priority before it runs at the node's (0: at once); at the lowest alone a busy node never ran it (docs/security.md)")
	f.DurationVar(&cfg.Login.RefusalHold, "login-refusal-hold", cfg.Login.RefusalHold, "how long, in [0, 10s], a login refused unchecked (in a back-off, or with the derivation budget spent) waits before its answer, on a timer: attackers, who wait for each answer, send fewer (docs/security.md)")
	refuseSecretFlag(f, "redis-password", "put the password in $"+redisPasswordEnv+" or in a file named by --redis-password-file, or give the users file a user named default")
}

// redisPasswordEnv holds the default Redis user's password when no
// --redis-password-file is given.
const redisPasswordEnv = "TIDEKV_REDIS_PASSWORD"

// check refuses contradictory flags, and plaintext on an address other
// hosts can reach unless --insecure says that is meant.
func (s *serverSecurity) check(cfg *server.Config) error {
	sc := cfg.Security
	switch {
	case s.insecure && sc.CertsDir != "":
		return fmt.Errorf("--insecure and --certs-dir contradict each other: give one")
	case sc.UsersFile != "" && sc.CertsDir == "":
		return fmt.Errorf("--users-file needs --certs-dir: an insecure node authenticates no one")
	case strings.TrimSpace(sc.CertsDir) != sc.CertsDir:
		return fmt.Errorf("--certs-dir %q has surrounding spaces", sc.CertsDir)
	case sc.CertsDir != "" || s.insecure:
		return nil
	}
	for _, a := range []struct{ flag, addr string }{
		{"--listen", cfg.GRPCAddr}, {"--advertise", cfg.AdvertiseAddr}, {"--http-listen", cfg.HTTPAddr},
		{"--redis-listen", cfg.Redis.ListenAddr}, {"--gossip-listen", cfg.Gossip.BindAddr},
	} {
		if a.addr != "" && a.addr != server.AutoAddr && !loopback(a.addr) {
			return fmt.Errorf("%s %s is not a loopback address, so this node would serve plaintext without authentication to the network: give --certs-dir to secure it, or --insecure if that is meant", a.flag, a.addr)
		}
	}
	return nil
}

// loopback reports whether host:port names only this machine: localhost
// or a loopback IP. An empty host (all interfaces) or any other name is
// taken as reachable from elsewhere.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// redisPassword sets the default Redis user's password from
// --redis-password-file, else from $TIDEKV_REDIS_PASSWORD.
func (s *serverSecurity) redisPassword(cfg *server.Config) error {
	env := os.Getenv(redisPasswordEnv)
	if s.redisPasswordFile == "" {
		cfg.Security.RedisPassword = env
		return nil
	}
	if env != "" {
		return fmt.Errorf("both --redis-password-file and $%s give the Redis password: give one", redisPasswordEnv)
	}
	b, err := os.ReadFile(s.redisPasswordFile)
	if err != nil {
		return fmt.Errorf("--redis-password-file: %w", err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	if cfg.Security.RedisPassword = strings.TrimRight(line, "\r"); cfg.Security.RedisPassword == "" {
		return fmt.Errorf("--redis-password-file %s has an empty first line", s.redisPasswordFile)
	}
	return nil
}

// refusedSecret is a flag that would take a secret, whose value every
// user of the machine could read (ps, /proc/PID/cmdline) and the shell
// keeps in its history. The parser accepts it only so that the command
// can refuse it saying what to use instead, without echoing the value as
// a parse error would.
type refusedSecret struct{ instead string }

func (*refusedSecret) String() string   { return "" }
func (*refusedSecret) Set(string) error { return nil }
func (*refusedSecret) Type() string     { return "string" }

// refuseSecretFlag adds the hidden flag name, refused by
// checkSecretFlags with the advice instead.
func refuseSecretFlag(f *pflag.FlagSet, name, instead string) {
	f.Var(&refusedSecret{instead: instead}, name, "refused: "+instead)
	_ = f.MarkHidden(name)
}

// checkSecretFlags refuses the first secret flag given to cmd (the root
// command's PersistentPreRunE, so that every command checks).
func checkSecretFlags(cmd *cobra.Command) error {
	var err error
	cmd.Flags().Visit(func(fl *pflag.Flag) {
		if r, ok := fl.Value.(*refusedSecret); ok && err == nil {
			err = fmt.Errorf("--%s is refused because every user of this machine can read a command's flags: %s", fl.Name, r.instead)
		}
	})
	return err
}
