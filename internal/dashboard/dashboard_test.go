package dashboard

import (
	"bytes"
	"context"
	"fmt"
	"image/png"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidekv/tidekv/internal/testutil/chromium"
)

func get(t *testing.T, h http.Handler, method, path string, hdr map[string]string) *http.Response {
	t.Helper()
	req := httptest.NewRequest(method, path, nil)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Result()
}

// handler mounts the page and its assets as a node does.
func handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /{$}", Page())
	mux.Handle("GET /static/", Static())
	return mux
}

func TestHandlerServesAssets(t *testing.T) {
	h := handler()
	for _, tc := range []struct {
		path, contentType, contains string
	}{
		{"/", "text/html; charset=utf-8", `<table id="nodes"`},
		{"/static/app.js", "text/javascript; charset=utf-8", "api/status"},
		{"/static/style.css", "text/css; charset=utf-8", ".range-seg"},
	} {
		resp := get(t, h, http.MethodGet, tc.path, nil)
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s: status %d, want 200", tc.path, resp.StatusCode)
			continue
		}
		if got := resp.Header.Get("Content-Type"); got != tc.contentType {
			t.Errorf("GET %s: Content-Type %q, want %q", tc.path, got, tc.contentType)
		}
		if !bytes.Contains(body, []byte(tc.contains)) {
			t.Errorf("GET %s: body lacks %q", tc.path, tc.contains)
		}

		// The ETag makes the no-cache revalidation cheap.
		etag := resp.Header.Get("ETag")
		if etag == "" {
			t.Errorf("GET %s: no ETag", tc.path)
			continue
		}
		if resp := get(t, h, http.MethodGet, tc.path, map[string]string{"If-None-Match": etag}); resp.StatusCode != http.StatusNotModified {
			t.Errorf("GET %s with matching If-None-Match: status %d, want 304", tc.path, resp.StatusCode)
		}
	}

	if resp := get(t, h, http.MethodHead, "/", nil); resp.StatusCode != http.StatusOK {
		t.Errorf("HEAD /: status %d, want 200", resp.StatusCode)
	}
	for _, p := range []string{"/nope", "/index.html", "/static/", "/static/nope.js", "/assets/app.js", "/api/status"} {
		if resp := get(t, h, http.MethodGet, p, nil); resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: status %d, want 404", p, resp.StatusCode)
		}
	}
	if resp := get(t, h, http.MethodPost, "/", nil); resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /: status %d, want 405", resp.StatusCode)
	}
}

var absURL = regexp.MustCompile(`(?i)(https?:)?//[a-z0-9.-]+\.[a-z]{2,}`)

func TestAssetsAreSelfContained(t *testing.T) {
	h := handler()
	read := func(p string) string {
		resp := get(t, h, http.MethodGet, p, nil)
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	html := read("/")
	if m := regexp.MustCompile(`(?i)https?://`).FindString(html); m != "" {
		t.Errorf("index.html references an absolute URL (%q); assets must come from the node", m)
	}
	for _, ref := range []string{`href="static/style.css"`, `src="static/app.js"`} {
		if !strings.Contains(html, ref) {
			t.Errorf("index.html lacks %s", ref)
		}
	}
	// The SVG namespace is an identifier, not something the browser fetches.
	js := strings.ReplaceAll(read("/static/app.js"), "http://www.w3.org/2000/svg", "")
	if m := absURL.FindString(js); m != "" {
		t.Errorf("app.js references %q", m)
	}
	if strings.Contains(js, "innerHTML") || strings.Contains(js, "insertAdjacentHTML") || strings.Contains(js, "document.write") {
		t.Error("app.js inserts markup; data must go through textContent")
	}
	css := read("/static/style.css")
	if m := absURL.FindString(css); m != "" || strings.Contains(css, "@import") {
		t.Errorf("style.css loads external resources (%q)", m)
	}
}

// Canned API responses: 3 nodes (n3 draining), 4 ranges, 3 events and 10
// series points.

const clusterID = "9f3a1c7e-5b2d-4c1a-8e0f-3d6b9a2c4e11"

var statusJSON = `{"cluster_id":"` + clusterID + `","node_id":1,"range_count":4,
"nodes":[
 {"id":2,"addr":"127.0.0.1:7410","http_addr":"127.0.0.1:7411","state":"live","locality":"region=a,zone=2","replicas":3,"leases":1,"bytes":73400320,"qps":812.25,"cpu":0.31,"score":1.42,"p99_ms":2.7,"last_seen_seconds":0.3,
  "admission":{"overloaded":true,"admit_share":0.34,"queue_delay_ms":12.5,"rejected_qps":840},
  "clock":{"untrusted":true,"reason":"clock is more than 200ms (0.8 × max offset 250ms) from 2 of 2 peers","max_offset_ms":-312.4}},
 {"id":1,"addr":"127.0.0.1:7400","http_addr":"127.0.0.1:7401","state":"live","locality":"region=a,zone=1","replicas":4,"leases":2,"bytes":123456789,"qps":1523.5,"cpu":0.72,"score":1.9,"p99_ms":3.2,"last_seen_seconds":0,
  "admission":{"overloaded":false,"admit_share":1,"queue_delay_ms":0.4,"rejected_qps":0},
  "clock":{"untrusted":false,"max_offset_ms":3.2}},
 {"id":3,"addr":"127.0.0.1:7420","http_addr":"127.0.0.1:7421","state":"draining","locality":"","replicas":1,"leases":0,"bytes":0,"qps":0,"cpu":0.04,"score":0,"p99_ms":0,"last_seen_seconds":7.5}],
"imbalance":{"replicas":0.05,"bytes":0.1,"qps":0.3,"cpu":0.2}}`

const rangesJSON = `{"ranges":[
 {"id":2,"start":"","end":"user2500","replicas":[{"node":1,"type":"voter"},{"node":2,"type":"voter"},{"node":3,"type":"learner"}],"leader":1,"qps":12.5,"bytes":1024},
 {"id":5,"start":"user2500","end":"user5000","replicas":[{"node":1,"type":"voter"},{"node":2,"type":"voter"}],"leader":2,"qps":640,"bytes":67108864},
 {"id":7,"start":"user5000","end":"user7500","replicas":[{"node":1,"type":"voter"},{"node":2,"type":"voter"}],"leader":1,"qps":1500.75,"bytes":33554432},
 {"id":9,"start":"user7500","end":"","replicas":[{"node":1,"type":"voter"},{"node":2,"type":"voter"}],"leader":0,"qps":0,"bytes":0}]}`

const eventsJSON = `{"events":[
 {"time":"2026-11-22T03:00:00.123Z","node":1,"kind":"split","subject":"range 2","reason":"size 70 MiB above 64 MiB"},
 {"time":"2026-11-22T03:00:05.500Z","node":2,"kind":"lease-transfer","subject":"range 5","reason":"qps 640 on n1 <b>above</b> mean & rising"},
 {"time":"2026-11-22T03:01:00.000Z","node":3,"kind":"drain","subject":"node 3","reason":"operator requested drain"}]}`

const autoscaleJSON = `{"enabled":true,"actuator":"local","policy":{"controller":"combined","slo_p99_ms":25,"min_nodes":1,"max_nodes":4,"target_utilization":0.7},
"nodes":4,"target_nodes":4,"pending_out":0,"pending_in":0,"offered_ops":3663,"p99_ms":45.9,"migration_bytes_per_sec":8388608,
"migration_reason":"foreground p99 45.9ms (queue 0%) is near the 25ms SLO: migration cut to 8 MiB/s",
"decisions":[{"at":"2026-11-22T03:00:10Z","action":"scale-out","nodes_before":3,"nodes_after":4,"reason":"reactive: p99 45.9ms against the 25ms SLO for 3 rounds"}],
"timeline":[{"at":"2026-11-22T03:00:08Z","nodes":3,"target_nodes":3,"offered_ops":3000,"p99_ms":30,"migration_bytes_per_sec":67108864},
 {"at":"2026-11-22T03:00:09Z","nodes":3,"target_nodes":4,"offered_ops":3600,"p99_ms":45,"migration_bytes_per_sec":33554432},
 {"at":"2026-11-22T03:00:10Z","nodes":4,"target_nodes":4,"offered_ops":3663,"p99_ms":45.9,"migration_bytes_per_sec":8388608}]}`

func seriesJSON() string {
	var b strings.Builder
	b.WriteString(`{"interval_ms":1000,"points":[`)
	for i := range 10 {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"t":%d,"qps":%.1f,"p99_ms":%.1f}`, 1763780000000+int64(i)*1000, 1800+250*float64(i%4)-30*float64(i), 2.5+0.4*float64(i%3))
	}
	b.WriteString(`]}`)
	return b.String()
}

// newServer mounts Handler at / and the canned API next to it, the way the
// node does. statusFails decides, per call (1-based), whether /api/status
// answers 500.
func newServer(t *testing.T, statusFails func(call int64) bool) *httptest.Server {
	t.Helper()
	var statusCalls atomic.Int64
	series := seriesJSON()
	mux := http.NewServeMux()
	mux.Handle("/", handler())
	serveJSON := func(body string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, body)
		}
	}
	mux.HandleFunc("GET /api/status", func(w http.ResponseWriter, r *http.Request) {
		if statusFails != nil && statusFails(statusCalls.Add(1)) {
			http.Error(w, "status unavailable: store not ready", http.StatusInternalServerError)
			return
		}
		serveJSON(statusJSON)(w, r)
	})
	mux.HandleFunc("GET /api/ranges", serveJSON(rangesJSON))
	mux.HandleFunc("GET /api/events", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("limit") != "200" {
			http.Error(w, "want limit=200", http.StatusBadRequest)
			return
		}
		serveJSON(eventsJSON)(w, r)
	})
	mux.HandleFunc("GET /api/series", serveJSON(series))
	mux.HandleFunc("GET /api/autoscale", serveJSON(autoscaleJSON))
	mux.HandleFunc("GET /api/whoami", serveJSON(`{"secure":true,"user":"reader","role":"read"}`))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// budget leaves room for two or three 2 s polls; the first render needs
// only the first.
const budget = 5 * time.Second

func dumpDOM(t *testing.T, url string) string {
	t.Helper()
	if _, ok := chromium.Path(); !ok {
		t.Skip("chromium not installed")
	}
	dom, err := chromium.DumpDOM(context.Background(), url, budget)
	if err != nil {
		t.Fatal(err)
	}
	return dom
}

// element returns the outer HTML of the element with the given tag and id,
// matching nested elements of the same tag by depth.
func element(t *testing.T, dom, tag, id string) string {
	t.Helper()
	loc := regexp.MustCompile(`<` + tag + `\b[^>]*\bid="` + regexp.QuoteMeta(id) + `"`).FindStringIndex(dom)
	if loc == nil {
		t.Fatalf("no <%s id=%q> in the DOM:\n%s", tag, id, dom)
	}
	tags := regexp.MustCompile(`<(/?)` + tag + `\b`)
	depth := 0
	for _, m := range tags.FindAllStringSubmatchIndex(dom[loc[0]:], -1) {
		if m[3] > m[2] { // closing tag
			depth--
		} else {
			depth++
		}
		if depth == 0 {
			end := loc[0] + m[1] + strings.Index(dom[loc[0]+m[1]:], ">") + 1
			return dom[loc[0]:end]
		}
	}
	t.Fatalf("<%s id=%q> is not closed", tag, id)
	return ""
}

func attrValues(s, tag, attr string) []string {
	var out []string
	for _, m := range regexp.MustCompile(`<`+tag+`\b[^>]*\b`+attr+`="([^"]*)"`).FindAllStringSubmatch(s, -1) {
		out = append(out, m[1])
	}
	return out
}

func text(s string) string {
	return regexp.MustCompile(`<[^>]*>`).ReplaceAllString(s, "")
}

func TestBrowserRendersDashboard(t *testing.T) {
	srv := newServer(t, nil)
	dom := dumpDOM(t, srv.URL+"/")

	if !regexp.MustCompile(`<body\b[^>]*\bdata-ready="1"`).MatchString(dom) {
		t.Fatalf("body is not data-ready=\"1\":\n%s", dom)
	}
	if got := text(element(t, dom, "dd", "cluster-id")); got != clusterID {
		t.Errorf("cluster id shown as %q, want %q", got, clusterID)
	}
	if banner := element(t, dom, "div", "error-banner"); !regexp.MustCompile(`^<div\b[^>]*\bhidden\b`).MatchString(banner) {
		t.Errorf("error banner visible although every fetch succeeded: %s", banner)
	}

	nodes := element(t, dom, "table", "nodes")
	if ids := attrValues(nodes, "tr", "data-node-id"); !slices.Equal(ids, []string{"1", "2", "3"}) {
		t.Errorf("node rows %v, want [1 2 3]", ids)
	}
	row3 := regexp.MustCompile(`(?s)<tr\b[^>]*data-node-id="3".*?</tr>`).FindString(nodes)
	if !strings.Contains(row3, ">draining<") {
		t.Errorf("node 3's row lacks its draining state: %s", row3)
	}
	for _, want := range []string{"127.0.0.1:7400", "region=a,zone=1", "118 MiB", "1,524", "72%", "1.90", "+3 ms"} {
		if !strings.Contains(text(nodes), want) {
			t.Errorf("nodes table lacks %q", want)
		}
	}
	// Admission: a shedding node shows its share, delay and refusals; a
	// node admitting everything shows ok; one that never reported, a dash.
	row2 := regexp.MustCompile(`(?s)<tr\b[^>]*data-node-id="2".*?</tr>`).FindString(nodes)
	for _, want := range []string{"admits 34%", "delay 12.5 ms", "840 refused/s", "untrusted", "-312 ms, no leases"} {
		if !strings.Contains(text(row2), want) {
			t.Errorf("node 2's admission cell lacks %q: %s", want, text(row2))
		}
	}
	row1 := regexp.MustCompile(`(?s)<tr\b[^>]*data-node-id="1".*?</tr>`).FindString(nodes)
	if !strings.HasSuffix(strings.TrimSpace(text(row1)), "ok") || !strings.HasSuffix(strings.TrimSpace(text(row3)), "–") {
		t.Errorf("admission cells: node 1 %q, node 3 %q; want ok and –", text(row1), text(row3))
	}

	keyspace := element(t, dom, "div", "keyspace")
	if ids := attrValues(keyspace, "div", "data-range-id"); !slices.Equal(ids, []string{"2", "5", "7", "9"}) {
		t.Errorf("key-space segments %v, want [2 5 7 9]", ids)
	}
	if n := strings.Count(keyspace, `class="range-seg`); n != 4 {
		t.Errorf("%d .range-seg elements, want 4", n)
	}
	ranges := element(t, dom, "table", "ranges")
	if ids := attrValues(ranges, "tr", "data-range-id"); !slices.Equal(ids, []string{"2", "5", "7", "9"}) {
		t.Errorf("range rows %v, want [2 5 7 9]", ids)
	}
	if !strings.Contains(text(ranges), "★ n2") {
		t.Error("range 5's leaseholder n2 is not marked")
	}

	events := element(t, dom, "table", "events")
	body := events[strings.Index(events, "<tbody"):]
	if n := strings.Count(body, "<tr"); n != 3 {
		t.Errorf("%d event rows, want 3", n)
	}
	reasons := []string{"operator requested drain", "qps 640 on n1 &lt;b&gt;above&lt;/b&gt; mean &amp; rising", "size 70 MiB above 64 MiB"}
	last := -1
	for _, r := range reasons {
		i := strings.Index(body, r)
		if i < 0 {
			t.Errorf("events lack reason %q (escaped)", r)
			continue
		}
		if i < last {
			t.Errorf("events not newest first: %q out of order", r)
		}
		last = i
	}
	if strings.Contains(body, "<b>above</b>") {
		t.Error("event reason was inserted as markup")
	}

	for _, id := range []string{"chart-qps", "chart-p99", "chart-nodes", "chart-migration"} {
		if !regexp.MustCompile(`<div\b[^>]*\bid="` + id + `"[^>]*><svg\b`).MatchString(dom) {
			t.Errorf("#%s has no svg", id)
		}
	}
	if got := text(element(t, dom, "span", "elastic-state")); got != "enabled · actuator local · combined" {
		t.Errorf("elasticity state %q", got)
	}
	summary := text(element(t, dom, "p", "elastic-summary"))
	for _, want := range []string{"4 nodes serving, target 4", "against 25.0 ms", "migration 8 MiB/s: foreground p99 45.9ms"} {
		if !strings.Contains(summary, want) {
			t.Errorf("elasticity summary %q lacks %q", summary, want)
		}
	}
	decisions := text(element(t, dom, "table", "elastic-decisions"))
	for _, want := range []string{"scale-out", "3→4", "reactive: p99 45.9ms"} {
		if !strings.Contains(decisions, want) {
			t.Errorf("decisions %q lack %q", decisions, want)
		}
	}

	screenshot(t, srv.URL+"/", "dashboard.png")
}

// screenshot renders url to name in a temporary directory and, if
// TIDEKV_SCREENSHOT_DIR is set, also there, for a human to look at.
func screenshot(t *testing.T, url, name string) {
	t.Helper()
	shoot(t, url, filepath.Join(t.TempDir(), name))
	if dir := os.Getenv("TIDEKV_SCREENSHOT_DIR"); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		shoot(t, url, filepath.Join(dir, name))
	}
}

func shoot(t *testing.T, url, path string) {
	t.Helper()
	const w, h = 1440, 1280
	if err := chromium.Screenshot(context.Background(), url, path, w, h, budget); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cfg, err := png.DecodeConfig(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if cfg.Width != w || cfg.Height != h {
		t.Errorf("%s is %dx%d, want %dx%d", path, cfg.Width, cfg.Height, w, h)
	}
	t.Logf("screenshot: %s", path)
}

var visibleBanner = regexp.MustCompile(`^<div\b[^>]*\bid="error-banner"[^>]*>`)

func bannerText(t *testing.T, dom string) string {
	t.Helper()
	banner := element(t, dom, "div", "error-banner")
	if tag := visibleBanner.FindString(banner); strings.Contains(tag, "hidden") {
		t.Fatalf("error banner hidden: %s", banner)
	}
	return text(banner)
}

func TestBrowserShowsFetchError(t *testing.T) {
	srv := newServer(t, func(int64) bool { return true })
	dom := dumpDOM(t, srv.URL+"/")
	msg := bannerText(t, dom)
	for _, want := range []string{"/api/status", "HTTP 500", "status unavailable: store not ready"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error banner %q lacks %q", msg, want)
		}
	}
	// The endpoints that answered are still shown; the page is not ready.
	if ids := attrValues(element(t, dom, "table", "ranges"), "tr", "data-range-id"); len(ids) != 4 {
		t.Errorf("range rows %v, want 4 despite the status failure", ids)
	}
	if regexp.MustCompile(`<body\b[^>]*\bdata-ready=`).MatchString(dom) {
		t.Error("body marked ready although /api/status never succeeded")
	}
	if os.Getenv("TIDEKV_SCREENSHOT_DIR") != "" {
		screenshot(t, srv.URL+"/", "dashboard-error.png")
	}
}

func TestBrowserKeepsLastDataOnError(t *testing.T) {
	srv := newServer(t, func(call int64) bool { return call > 1 })
	dom := dumpDOM(t, srv.URL+"/")
	if msg := bannerText(t, dom); !strings.Contains(msg, "HTTP 500") || !strings.Contains(msg, "Showing data from") {
		t.Errorf("error banner %q should report the failure and the age of the data shown", msg)
	}
	if ids := attrValues(element(t, dom, "table", "nodes"), "tr", "data-node-id"); len(ids) != 3 {
		t.Errorf("node rows %v, want the 3 from the last successful poll", ids)
	}
	if !regexp.MustCompile(`<body\b[^>]*\bdata-ready="1"`).MatchString(dom) {
		t.Error("body not ready although every endpoint rendered once")
	}
}
