package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/httpapi"
	"github.com/tidekv/tidekv/internal/security"
	"github.com/tidekv/tidekv/internal/testutil/chromium"
)

// secureNode is one in-process node started with certificates and a
// users file, with every endpoint on (Redis, HTTP, pprof, fault
// injection), and the credentials of everyone the security table tries.
type secureNode struct {
	s     *Server
	certs string // ca.crt, node.crt and client certificates of root and carol
	other string // another CA and its root client certificate
}

// The users of the secure node: carol has a client certificate and no
// password; the others have passwords.
var secureUsers = []struct {
	name, password string
	role           security.Role
}{
	{"carol", "", security.RoleRead},
	{"reader", "r-pass", security.RoleRead},
	{"writer", "w-pass", security.RoleWrite},
	{"boss", "a-pass", security.RoleAdmin},
}

// startSecureNode starts the node; login bounds its derivations.
func startSecureNode(t *testing.T, login security.LoginConfig) *secureNode {
	t.Helper()
	dir := t.TempDir()
	n := &secureNode{certs: filepath.Join(dir, "certs"), other: filepath.Join(dir, "other")}
	files := security.OSFiles{}
	for _, o := range []security.CertOptions{{Dir: n.certs, Files: files, Lifetime: 24 * time.Hour}, {Dir: n.other, Files: files, Lifetime: 24 * time.Hour}} {
		if err := security.CreateCA(o); err != nil {
			t.Fatal(err)
		}
		if err := security.CreateClient(o, security.RootUser); err != nil {
			t.Fatal(err)
		}
	}
	o := security.CertOptions{Dir: n.certs, Files: files, Lifetime: 24 * time.Hour}
	if err := security.CreateNode(o, []string{"127.0.0.1"}); err != nil {
		t.Fatal(err)
	}
	if err := security.CreateClient(o, "carol"); err != nil {
		t.Fatal(err)
	}
	uf, usersFile := &security.UserFile{}, filepath.Join(dir, "users.json")
	for _, u := range secureUsers {
		if err := uf.Add(u.name, u.role, u.password); err != nil {
			t.Fatal(err)
		}
	}
	if err := uf.Write(files, usersFile); err != nil {
		t.Fatal(err)
	}

	cfg := testConfig(t)
	cfg.HTTPAddr, cfg.Redis.ListenAddr = "127.0.0.1:0", "127.0.0.1:0"
	cfg.Security.CertsDir, cfg.Security.UsersFile = n.certs, usersFile
	cfg.Security.Login = login
	cfg.EnablePprof, cfg.FaultInjection = true, true
	s, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	n.s = s
	kv := tidekvpb.NewKVClient(n.grpcConn(t, n.tls(t, security.RootUser), nil))
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := kv.Put(ctx, &tidekvpb.PutRequest{Key: []byte("probe"), Value: []byte("x")})
		cancel()
		if err == nil {
			return n
		}
		if time.Now().After(deadline) {
			t.Fatalf("the secure node never served a write: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// tls trusts the node's CA and presents user's client certificate ("" for
// none).
func (n *secureNode) tls(t *testing.T, user string) *tls.Config {
	t.Helper()
	cfg, has, err := security.LoadClientTLS(security.OSFiles{}, n.certs, user)
	if err != nil || (user != "" && !has) {
		t.Fatalf("client TLS for %q: %v (certificate found: %v)", user, err, has)
	}
	return cfg
}

func (n *secureNode) grpcConn(t *testing.T, tc *tls.Config, creds credentials.PerRPCCredentials) *grpc.ClientConn {
	t.Helper()
	opts := []grpc.DialOption{grpc.WithTransportCredentials(credentials.NewTLS(tc))}
	if creds != nil {
		opts = append(opts, grpc.WithPerRPCCredentials(creds))
	}
	cc, err := grpc.NewClient(n.s.Addr(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

// caller is one column of the security table: how a client presents
// itself on each port.
type caller struct {
	name string
	// tls is the client's TLS configuration: a client certificate or none.
	tls func(t *testing.T, n *secureNode) *tls.Config
	// user and password, when the caller has them: gRPC Basic
	// credentials, HTTP Basic, Redis AUTH.
	user, password string
}

var callers = []caller{
	{name: "no credentials", tls: func(t *testing.T, n *secureNode) *tls.Config { return n.tls(t, "") }},
	{name: "client certificate of another CA", tls: func(t *testing.T, n *secureNode) *tls.Config {
		cfg, _, err := security.LoadClientTLS(security.OSFiles{}, n.other, security.RootUser)
		if err != nil {
			t.Fatal(err)
		}
		cfg.RootCAs = n.tls(t, "").RootCAs // it trusts the node; the node does not trust it
		return cfg
	}},
	{name: "client certificate of a read user", tls: func(t *testing.T, n *secureNode) *tls.Config { return n.tls(t, "carol") }},
	{name: "read user", tls: func(t *testing.T, n *secureNode) *tls.Config { return n.tls(t, "") }, user: "reader", password: "r-pass"},
	{name: "write user", tls: func(t *testing.T, n *secureNode) *tls.Config { return n.tls(t, "") }, user: "writer", password: "w-pass"},
	{name: "admin user", tls: func(t *testing.T, n *secureNode) *tls.Config { return n.tls(t, "") }, user: "boss", password: "a-pass"},
	{name: "root's client certificate", tls: func(t *testing.T, n *secureNode) *tls.Config { return n.tls(t, security.RootUser) }},
}

// verdict is what a caller gets: served, refused for lack of credentials,
// refused for its role, or no connection at all (the TLS handshake).
type verdict string

const (
	served    verdict = "served"
	unauthent verdict = "unauthenticated"
	denied    verdict = "denied"
	handshake verdict = "no TLS connection"
)

// expect is the verdict of a caller of role has (RoleNone: none, or a
// Redis client that did not AUTH) on an endpoint that needs need.
func expect(c caller, has, need security.Role) verdict {
	switch {
	case c.name == "client certificate of another CA":
		return handshake
	case need == httpapi.Public || has >= need:
		return served
	case has == security.RoleNone:
		return unauthent
	}
	return denied
}

// grpcRole is the caller's role on gRPC: by certificate, else password.
func grpcRole(c caller) security.Role {
	switch c.name {
	case "client certificate of a read user":
		return security.RoleRead
	case "root's client certificate":
		return security.RoleAdmin
	}
	return passwordRole(c)
}

// passwordRole is the caller's role by password (Redis knows no other).
func passwordRole(c caller) security.Role {
	for _, u := range secureUsers {
		if u.name == c.user && c.password != "" {
			return u.role
		}
	}
	return security.RoleNone
}

func grpcOutcome(err error) verdict {
	switch status.Code(err) {
	case codes.OK:
		return served
	case codes.Unauthenticated:
		return unauthent
	case codes.PermissionDenied:
		return denied
	case codes.Unavailable:
		return handshake
	}
	return verdict("unexpected: " + err.Error())
}

// TestSecurityTable tries every port of a secure node, each class of
// endpoint on it, as each kind of caller, and checks the verdict: the
// table of docs/security.md, "What is protected".
func TestSecurityTable(t *testing.T) {
	n := startSecureNode(t, security.DefaultLoginConfig())
	ctx := context.Background()
	t.Run("gRPC", func(t *testing.T) {
		methods := []struct {
			name string
			call func(ctx context.Context, cc *grpc.ClientConn) error
		}{
			{"/tidekv.KV/Get", func(ctx context.Context, cc *grpc.ClientConn) error {
				_, err := tidekvpb.NewKVClient(cc).Get(ctx, &tidekvpb.GetRequest{Key: []byte("probe")})
				return err
			}},
			{"/tidekv.KV/Put", func(ctx context.Context, cc *grpc.ClientConn) error {
				_, err := tidekvpb.NewKVClient(cc).Put(ctx, &tidekvpb.PutRequest{Key: []byte("probe"), Value: []byte("y")})
				return err
			}},
			{"/tidekv.Admin/Settings", func(ctx context.Context, cc *grpc.ClientConn) error {
				_, err := tidekvpb.NewAdminClient(cc).Settings(ctx, &tidekvpb.SettingsRequest{})
				return err
			}},
			// A node-to-node call: no client may make it, root included.
			{"/tidekv.Admin/NodeHeartbeat", func(ctx context.Context, cc *grpc.ClientConn) error {
				_, err := tidekvpb.NewAdminClient(cc).NodeHeartbeat(ctx, &tidekvpb.NodeHeartbeatRequest{})
				return err
			}},
		}
		for _, c := range callers {
			var creds credentials.PerRPCCredentials
			if c.user != "" {
				creds = security.PasswordCredentials{User: c.user, Password: c.password}
			}
			cc := n.grpcConn(t, c.tls(t, n), creds)
			for _, m := range methods {
				cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				got := grpcOutcome(m.call(cctx, cc))
				cancel()
				if want := expect(c, grpcRole(c), security.RequiredRole(m.name)); got != want {
					t.Errorf("%s by %s: %s, want %s", m.name, c.name, got, want)
				}
			}
		}
	})
	t.Run("Redis", func(t *testing.T) {
		for _, c := range callers {
			rc := redis.NewClient(&redis.Options{Addr: n.s.RedisAddr(), Username: c.user, Password: c.password,
				TLSConfig: c.tls(t, n), MaxRetries: -1, DialTimeout: 5 * time.Second})
			for _, cmd := range []struct {
				name string
				need security.Role
				run  func() error
			}{
				{"GET", security.RoleRead, func() error { return rc.Get(ctx, "probe").Err() }},
				{"SET", security.RoleWrite, func() error { return rc.Set(ctx, "probe", "z", 0).Err() }},
			} {
				err := cmd.run()
				got := served
				switch {
				case err == nil:
				case strings.HasPrefix(err.Error(), "NOAUTH"):
					got = unauthent
				case strings.HasPrefix(err.Error(), "NOPERM"):
					got = denied
				case strings.Contains(err.Error(), "tls: "):
					got = handshake
				default:
					got = verdict("unexpected: " + err.Error())
				}
				if want := expect(c, passwordRole(c), cmd.need); got != want {
					t.Errorf("Redis %s by %s: %s, want %s", cmd.name, c.name, got, want)
				}
			}
			rc.Close()
		}
	})
	t.Run("HTTP", func(t *testing.T) {
		checkRoutesAreThoseProbed(t, n.s.ports.httpRoutes)
		for _, c := range callers {
			hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: c.tls(t, n)},
				CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
			for _, r := range n.s.ports.httpRoutes {
				p := httpProbes[r.Pattern]
				got := httpOutcome(t, hc, n.s.HTTPAddr(), p, c)
				if want := expect(c, grpcRole(c), r.Role); got != want {
					t.Errorf("%s by %s: %s, want %s", r.Pattern, c.name, got, want)
				}
			}
		}
	})
}

// httpProbe is a request that exercises one registered pattern.
type httpProbe struct {
	role        security.Role // what the endpoint must need: the table
	method      string
	path        string
	contentType string
	body        string
}

// httpProbes are the node's HTTP endpoints and the role each must need (a
// secure node, with pprof and fault injection on). A pattern the node
// registers that is not here fails the test: give a new endpoint its
// rule here and in docs/security.md.
var httpProbes = map[string]httpProbe{
	"GET /metrics":       {httpapi.Public, "GET", "/metrics", "", ""},
	"GET /health":        {httpapi.Public, "GET", "/health", "", ""},
	"GET /ready":         {httpapi.Public, "GET", "/ready", "", ""},
	"GET /static/":       {httpapi.Public, "GET", "/static/style.css", "", ""},
	"GET /login":         {httpapi.Public, "GET", "/login", "", ""},
	"POST /login":        {httpapi.Public, "POST", "/login", "application/x-www-form-urlencoded", "user=reader&password=r-pass"},
	"POST /logout":       {httpapi.Public, "POST", "/logout", "", ""},
	"GET /{$}":           {security.RoleRead, "GET", "/", "", ""},
	"GET /api/status":    {security.RoleRead, "GET", "/api/status", "", ""},
	"GET /api/ranges":    {security.RoleRead, "GET", "/api/ranges", "", ""},
	"GET /api/events":    {security.RoleRead, "GET", "/api/events?limit=5", "", ""},
	"GET /api/autoscale": {security.RoleRead, "GET", "/api/autoscale", "", ""},
	"GET /api/series":    {security.RoleRead, "GET", "/api/series?local", "", ""},
	"GET /api/whoami":    {security.RoleRead, "GET", "/api/whoami", "", ""},
	"GET /api/settings":  {security.RoleAdmin, "GET", "/api/settings", "", ""},
	// Clearing a setting that was never set changes nothing.
	"POST /api/settings":   {security.RoleAdmin, "POST", "/api/settings", "application/json", `{"key":"gc-ttl","value":""}`},
	"/debug/pprof/":        {security.RoleAdmin, "GET", "/debug/pprof/", "", ""},
	"/debug/pprof/profile": {security.RoleAdmin, "GET", "/debug/pprof/profile?seconds=1", "", ""},
	"/debug/pprof/symbol":  {security.RoleAdmin, "GET", "/debug/pprof/symbol", "", ""},
	"/debug/pprof/trace":   {security.RoleAdmin, "GET", "/debug/pprof/trace?seconds=0.05", "", ""},
	"/debug/faults":        {security.RoleAdmin, "GET", "/debug/faults", "", ""},
	"/debug/faults/":       {security.RoleAdmin, "POST", "/debug/faults/partition?peers=none", "", ""},
}

// checkRoutesAreThoseProbed fails for a registered pattern without a probe
// (a new endpoint nobody gave a rule) and for a pattern whose role is not
// the table's.
func checkRoutesAreThoseProbed(t *testing.T, routes []httpapi.Route) {
	t.Helper()
	var registered []string
	for _, r := range routes {
		registered = append(registered, r.Pattern)
		p, ok := httpProbes[r.Pattern]
		switch {
		case !ok:
			t.Errorf("the node serves %q, which the security table does not list: add it to httpProbes with the role it needs", r.Pattern)
		case p.role != r.Role:
			t.Errorf("%s needs role %s, want %s", r.Pattern, r.Role, p.role)
		}
	}
	for pattern := range httpProbes {
		if !slices.Contains(registered, pattern) {
			t.Errorf("the security table lists %q, which the node does not serve", pattern)
		}
	}
}

// httpOutcome sends p as caller c. A refusal is 401 or 403 with a
// sentence, or, for the dashboard's page, a redirect to the login page.
func httpOutcome(t *testing.T, hc *http.Client, addr string, p httpProbe, c caller) verdict {
	t.Helper()
	req, err := http.NewRequest(p.method, "https://"+addr+p.path, strings.NewReader(p.body))
	if err != nil {
		t.Fatal(err)
	}
	if p.contentType != "" {
		req.Header.Set("Content-Type", p.contentType)
	}
	if c.user != "" {
		req.SetBasicAuth(c.user, c.password)
	}
	resp, err := hc.Do(req)
	if err != nil {
		if strings.Contains(err.Error(), "tls: ") {
			return handshake
		}
		return verdict("unexpected: " + err.Error())
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	switch {
	case resp.StatusCode == http.StatusUnauthorized && p.path != "/login",
		resp.StatusCode == http.StatusSeeOther && p.path == "/" && resp.Header.Get("Location") == "login":
		return unauthent
	case resp.StatusCode == http.StatusForbidden:
		return denied
	// A single node of replication factor 3 is not ready: /ready says so.
	case resp.StatusCode >= 400 && !(p.path == "/ready" && resp.StatusCode == http.StatusServiceUnavailable):
		return verdict(fmt.Sprintf("unexpected: %s: %s", resp.Status, body))
	}
	return served
}

// /metrics is served to anyone: it must carry no user key. The node holds
// keys, a range boundary at one (a split) and a transaction's intent on
// one, and the scrape names none of them.
func TestMetricsCarryNoUserKeys(t *testing.T) {
	n := startSecureNode(t, security.DefaultLoginConfig())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cc := n.grpcConn(t, n.tls(t, security.RootUser), nil)
	kv, admin := tidekvpb.NewKVClient(cc), tidekvpb.NewAdminClient(cc)
	const marker = "userkey-7f3a"
	for i := range 20 {
		key := fmt.Sprintf("%s-%02d", marker, i)
		if _, err := kv.Put(ctx, &tidekvpb.PutRequest{Key: []byte(key), Value: []byte(marker + "-value")}); err != nil {
			t.Fatal(err)
		}
		if _, err := kv.Get(ctx, &tidekvpb.GetRequest{Key: []byte(key)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := admin.Split(ctx, &tidekvpb.SplitRequest{SplitKey: []byte(marker + "-10")}); err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: n.tls(t, "")}}
	resp, err := hc.Get("https://" + n.s.HTTPAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "tidekv_") {
		t.Fatalf("/metrics without credentials: %s\n%s", resp.Status, body)
	}
	if i := strings.Index(string(body), marker); i >= 0 {
		line := string(body)[strings.LastIndexByte(string(body[:i]), '\n')+1:]
		t.Fatalf("/metrics carries a user key: %s", line[:strings.IndexByte(line, '\n')])
	}
}

// A password login on the dashboard opens a session: a cookie only HTTPS
// carries and scripts cannot read, with the user's role; logging out ends
// it, and a wrong password opens none.
func TestDashboardSession(t *testing.T) {
	n := startSecureNode(t, security.DefaultLoginConfig())
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: n.tls(t, "")},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	base := "https://" + n.s.HTTPAddr()
	do := func(method, path string, cookie *http.Cookie, form url.Values) (*http.Response, string) {
		t.Helper()
		req, err := http.NewRequest(method, base+path, strings.NewReader(form.Encode()))
		if err != nil {
			t.Fatal(err)
		}
		if form != nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		if cookie != nil {
			req.AddCookie(cookie)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	resp, body := do("POST", "/login", nil, url.Values{"user": {"reader"}, "password": {"wrong"}})
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(body, "invalid user name or password") || len(resp.Cookies()) != 0 {
		t.Fatalf("a wrong password: %s, cookies %v\n%s", resp.Status, resp.Cookies(), body)
	}
	resp, _ = do("POST", "/login", nil, url.Values{"user": {"reader"}, "password": {"r-pass"}})
	cookies := resp.Cookies()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "./" || len(cookies) != 1 {
		t.Fatalf("login: %s to %q, cookies %v", resp.Status, resp.Header.Get("Location"), cookies)
	}
	c := cookies[0]
	if c.Name != security.SessionCookie || !c.Secure || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode {
		t.Fatalf("session cookie %v: want Secure, HttpOnly, SameSite=Strict", c)
	}
	if resp, body := do("GET", "/api/whoami", c, nil); resp.StatusCode != http.StatusOK || !strings.Contains(body, `"user":"reader","role":"read"`) {
		t.Fatalf("whoami in the session: %s %s", resp.Status, body)
	}
	if resp, body := do("GET", "/api/settings", c, nil); resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "user reader has role read; GET /api/settings needs role admin") {
		t.Fatalf("settings as a reader: %s %s", resp.Status, body)
	}
	if resp, _ := do("POST", "/logout", c, nil); resp.StatusCode != http.StatusSeeOther || len(resp.Cookies()) != 1 || resp.Cookies()[0].MaxAge >= 0 {
		t.Fatalf("logout: %s, cookies %v", resp.Status, resp.Cookies())
	}
	if resp, body := do("GET", "/api/whoami", c, nil); resp.StatusCode != http.StatusUnauthorized || !strings.Contains(body, "the session has ended") {
		t.Fatalf("whoami after logout: %s %s", resp.Status, body)
	}
}

// TestDashboardLoginInBrowser: in Chromium, the dashboard of a secure node
// shows the login page to a visitor without credentials, refuses a wrong
// password, shows a read user the dashboard without the settings form,
// and an admin the form, through which a setting is changed.
func TestDashboardLoginInBrowser(t *testing.T) {
	if _, ok := chromium.Path(); !ok {
		t.Skip("chromium not installed (.ci/run installs it): the dashboard's login is not checked in a browser")
	}
	n := startSecureNode(t, security.DefaultLoginConfig())
	nodeCert, err := tls.LoadX509KeyPair(filepath.Join(n.certs, security.NodeCert), filepath.Join(n.certs, security.NodeKey))
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(nodeCert.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	b, err := chromium.Launch(ctx, leaf)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	wait := func(expr string) {
		t.Helper()
		if err := b.WaitFor(ctx, expr); err != nil {
			var html string
			_ = b.Eval("document.documentElement.outerHTML", &html)
			t.Fatalf("%v\n%s", err, html)
		}
	}
	eval := func(expr string, out any) {
		t.Helper()
		if err := b.Eval(expr, out); err != nil {
			t.Fatal(err)
		}
	}
	const onLoginPage = `location.pathname === "/login" && document.getElementById("login-form") !== null && document.getElementById("nodes") === null`
	login := func(user, password string) {
		t.Helper()
		wait(onLoginPage)
		if err := b.Submit(ctx, "#login-form", map[string]string{"user": user, "password": password}); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Navigate("https://" + n.s.HTTPAddr() + "/"); err != nil {
		t.Fatal(err)
	}
	login("reader", "wrong")
	wait(`(document.getElementById("login-failed") || {}).textContent === "invalid user name or password"`)

	login("reader", "r-pass")
	wait(`location.pathname === "/" && document.body.dataset.ready === "1"`)
	var state struct {
		User     string `json:"user"`
		Settings bool   `json:"settings"`
		Nodes    int    `json:"nodes"`
	}
	const read = `({user: document.getElementById("session-user").textContent,
		settings: document.getElementById("settings-form") !== null,
		nodes: document.querySelectorAll("#nodes tbody tr").length})`
	eval(read, &state)
	if state.User != "reader (read)" || state.Settings || state.Nodes != 1 {
		t.Fatalf("the dashboard of a read user: %+v; want user \"reader (read)\", one node and no settings form", state)
	}

	eval(`document.querySelector("#session button").click()`, nil)
	login("boss", "a-pass")
	wait(`location.pathname === "/" && document.body.dataset.ready === "1" && document.getElementById("settings-form") !== null`)
	eval(read, &state)
	if state.User != "boss (admin)" || !state.Settings {
		t.Fatalf("the dashboard of an admin: %+v; want user \"boss (admin)\" and the settings form", state)
	}
	if err := b.Submit(ctx, "#settings-form", map[string]string{"key": "gc-ttl", "value": "2h"}); err != nil {
		t.Fatal(err)
	}
	wait(`document.getElementById("settings-table").textContent.includes("gc-ttl2h")`)
}
