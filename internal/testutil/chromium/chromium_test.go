package chromium

import (
	"bytes"
	"context"
	"fmt"
	"image/png"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func requireChromium(t *testing.T) {
	t.Helper()
	if _, ok := Path(); !ok {
		t.Skip("chromium not installed")
	}
}

// fetchPage serves a page whose script replaces a placeholder with text it
// fetches, after a server-side delay, from the same origin.
func fetchPage(t *testing.T, delay time.Duration) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, `<!doctype html><html><body><p id="out">placeholder</p><script>
setInterval(function () { document.title = String(Date.now()); }, 2000);
fetch("data").then(function (r) { return r.json(); }).then(function (j) {
  document.getElementById("out").textContent = "fetched " + j.word;
});
</script></body></html>`)
	})
	mux.HandleFunc("GET /data", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"word":"pelican"}`)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func TestPath(t *testing.T) {
	p, ok := Path()
	if !ok {
		t.Skip("chromium not installed")
	}
	if !filepath.IsAbs(p) {
		t.Fatalf("Path() = %q, want an absolute path", p)
	}
}

func TestDumpDOMAfterFetch(t *testing.T) {
	requireChromium(t)
	// The 1.5 s delay exceeds the 1 s budget: virtual time must pause while
	// the fetch is pending, or the placeholder would be dumped.
	srv := fetchPage(t, 1500*time.Millisecond)
	dom, err := DumpDOM(context.Background(), srv.URL+"/", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(dom, `<p id="out">fetched pelican</p>`) {
		t.Fatalf("dumped DOM lacks the fetched text:\n%s", dom)
	}
}

func TestScreenshot(t *testing.T) {
	requireChromium(t)
	srv := fetchPage(t, 0)
	png := filepath.Join(t.TempDir(), "page.png")
	if err := Screenshot(context.Background(), srv.URL+"/", png, 640, 480, time.Second); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(png)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")) {
		t.Fatalf("%s is not a PNG", png)
	}
}

func TestDumpDOMTimeout(t *testing.T) {
	requireChromium(t)
	// A fetch that never completes freezes virtual time, so only the
	// wall-clock limit ends the run.
	srv := fetchPage(t, time.Hour)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	start := time.Now()
	_, err := DumpDOM(ctx, srv.URL+"/", time.Second)
	if err == nil {
		t.Fatal("DumpDOM succeeded on a page whose fetch never completes")
	}
	if d := time.Since(start); d > 3*time.Second+waitDelay+2*time.Second {
		t.Fatalf("DumpDOM returned after %v, want shortly after the 3s deadline", d)
	}
}

// A page served with a certificate of no CA the browser knows loads only
// when that certificate is trusted.
func TestDumpDOMTrustsGivenCertificate(t *testing.T) {
	requireChromium(t)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, `<!doctype html><html><body><p id="out">over tls</p></body></html>`)
	}))
	t.Cleanup(srv.Close)
	const want = `<p id="out">over tls</p>`
	if dom, err := DumpDOM(context.Background(), srv.URL+"/", time.Second); err == nil && strings.Contains(dom, want) {
		t.Fatal("the page of an unknown CA loaded without being trusted: the test proves nothing")
	}
	dom, err := DumpDOM(context.Background(), srv.URL+"/", time.Second, srv.Certificate())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(dom, want) {
		t.Fatalf("the trusted page did not load:\n%s", dom)
	}
}

// A Browser fills and submits a form, follows the navigation it causes and
// reads what the next page's script rendered.
func TestBrowserSubmitsAForm(t *testing.T) {
	requireChromium(t)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `<!doctype html><form method="post" action="greet"><input id="name" name="name"><button id="go">Go</button></form>`)
	})
	mux.HandleFunc("POST /greet", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/hello?name="+r.PostFormValue("name"), http.StatusSeeOther)
	})
	mux.HandleFunc("GET /hello", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `<!doctype html><p id="out"></p><script>
document.getElementById("out").textContent = "hello " + new URLSearchParams(location.search).get("name");
</script>`)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b, err := Launch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.Navigate(srv.URL + "/"); err != nil {
		t.Fatal(err)
	}
	if err := b.Submit(ctx, "form", map[string]string{"name": "pelican"}); err != nil {
		t.Fatal(err)
	}
	if err := b.WaitFor(ctx, `(document.getElementById("out") || {}).textContent === "hello pelican"`); err != nil {
		t.Fatal(err)
	}
	var url string
	if err := b.Eval(`location.pathname`, &url); err != nil || url != "/hello" {
		t.Fatalf("the page is %q (%v), want /hello", url, err)
	}
	shot := filepath.Join(t.TempDir(), "hello.png")
	if err := b.Screenshot(shot, 640, 480); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(shot)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cfg, err := png.DecodeConfig(f)
	if err != nil || cfg.Width != 640 || cfg.Height != 480 {
		t.Fatalf("screenshot: %+v %v, want a 640x480 PNG", cfg, err)
	}
}
