package dashboard

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"net/http"
	"time"
)

//go:embed assets/index.html assets/app.js assets/style.css
var assets embed.FS

// contentSecurityPolicy forbids anything not served by the node itself,
// which also guards against a stray external asset creeping in.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; " +
	"connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

type asset struct {
	name        string
	contentType string
	body        []byte
	etag        string
}

func load(name, contentType string) asset {
	b, err := assets.ReadFile("assets/" + name)
	if err != nil {
		panic("dashboard: missing embedded asset " + name) // the embed directive guarantees it
	}
	sum := sha256.Sum256(b)
	return asset{name: name, contentType: contentType, body: b, etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
}

// Handler serves the dashboard: GET / is the page, /static/app.js and
// /static/style.css its assets; every other path is 404. Mount it at the
// root of the node's HTTP mux, next to the /api/ endpoints the page polls.
// The page uses relative URLs, so it also works behind a path prefix that
// ends in a slash.
func Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /{$}", serve(load("index.html", "text/html; charset=utf-8")))
	mux.Handle("GET /static/app.js", serve(load("app.js", "text/javascript; charset=utf-8")))
	mux.Handle("GET /static/style.css", serve(load("style.css", "text/css; charset=utf-8")))
	return mux
}

func serve(a asset) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Type", a.contentType)
		// Revalidate every time so a node upgrade is picked up at once; the
		// ETag keeps revalidation cheap.
		h.Set("Cache-Control", "no-cache")
		h.Set("ETag", a.etag)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		http.ServeContent(w, r, a.name, time.Time{}, bytes.NewReader(a.body))
	})
}
