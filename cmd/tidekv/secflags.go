package main

import (
	"fmt"
	"os"
	"strings"

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
	insecure bool
	cfg      *server.SecurityConfig
}

func (s *serverSecurity) addFlags(f *pflag.FlagSet, cfg *server.SecurityConfig) {
	s.cfg = cfg
	f.StringVar(&cfg.CertsDir, "certs-dir", "", "serve TLS with ca.crt and node.crt/.key from this dir, require node certificates between nodes and authenticate every client (docs/security.md)")
	f.StringVar(&cfg.UsersFile, "users-file", "", "with --certs-dir: users, roles and password hashes (`tidekv user`); re-read within a second of a change")
	f.BoolVar(&s.insecure, "insecure", false, "plaintext and no authentication (the default without --certs-dir; for loopback and tests)")
}

// check refuses contradictory flags.
func (s *serverSecurity) check() error {
	switch {
	case s.insecure && s.cfg.CertsDir != "":
		return fmt.Errorf("--insecure and --certs-dir contradict each other: give one")
	case s.cfg.UsersFile != "" && s.cfg.CertsDir == "":
		return fmt.Errorf("--users-file needs --certs-dir: an insecure node authenticates no one")
	case strings.TrimSpace(s.cfg.CertsDir) != s.cfg.CertsDir:
		return fmt.Errorf("--certs-dir %q has surrounding spaces", s.cfg.CertsDir)
	}
	return nil
}
