package dashboard

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"html/template"
	"net/http"
	"time"
)

//go:embed assets/index.html assets/app.js assets/style.css assets/login.html
var assets embed.FS

// contentSecurityPolicy forbids anything not served by the node itself,
// which also guards against a stray external asset creeping in. Forms may
// post only to the node (the login page, and logging out).
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; " +
	"connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

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

// Page serves the dashboard's page (GET /). The page uses relative URLs
// (static/, api/, login), so it also works behind a path prefix that ends
// in a slash.
func Page() http.Handler { return serve(load("index.html", "text/html; charset=utf-8")) }

// Static serves the page's script and stylesheet under /static/; every
// other path is 404. They hold nothing secret, and the login page needs
// the stylesheet before anyone has logged in.
func Static() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /static/app.js", serve(load("app.js", "text/javascript; charset=utf-8")))
	mux.Handle("GET /static/style.css", serve(load("style.css", "text/css; charset=utf-8")))
	return mux
}

var loginPage = template.Must(template.ParseFS(assets, "assets/login.html"))

// LoginPage answers with the login form of a secure node and status code;
// failed says why the last attempt was refused ("" for none).
func LoginPage(w http.ResponseWriter, code int, failed string) {
	setHeaders(w.Header(), "text/html; charset=utf-8")
	h := w.Header()
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = loginPage.Execute(w, struct{ Failed string }{failed})
}

func setHeaders(h http.Header, contentType string) {
	h.Set("Content-Type", contentType)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Content-Security-Policy", contentSecurityPolicy)
}

func serve(a asset) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		setHeaders(h, a.contentType)
		// Revalidate every time so a node upgrade is picked up at once; the
		// ETag keeps revalidation cheap.
		h.Set("Cache-Control", "no-cache")
		h.Set("ETag", a.etag)
		http.ServeContent(w, r, a.name, time.Time{}, bytes.NewReader(a.body))
	})
}
