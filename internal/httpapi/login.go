package httpapi

import (
	"net/http"

	"github.com/tidekv/tidekv/internal/dashboard"
	"github.com/tidekv/tidekv/internal/security"
)

// registerDashboard serves the dashboard's page and assets and, on a
// secure node, its login: the page sends a visitor without credentials to
// the login page, which opens a session (a cookie) for a user name and
// password of the users file.
func registerDashboard(m *mux) {
	m.handle("GET /static/", Public, dashboard.Static())
	if m.auth == nil {
		m.handle("GET /{$}", security.RoleRead, dashboard.Page())
		return
	}
	toLogin := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { seeOther(w, "login") })
	m.guard("GET /{$}", security.RoleRead, dashboard.Page(), toLogin)
	m.handleFunc("GET /login", Public, func(w http.ResponseWriter, r *http.Request) { dashboard.LoginPage(w, http.StatusOK, "") })
	m.handleFunc("POST /login", Public, func(w http.ResponseWriter, r *http.Request) {
		c, err := m.auth.Login(r.PostFormValue("user"), r.PostFormValue("password"), r.RemoteAddr)
		if err != nil {
			dashboard.LoginPage(w, security.RefusalStatus(w.Header(), err), err.Error())
			return
		}
		http.SetCookie(w, c)
		seeOther(w, "./")
	})
	m.handleFunc("POST /logout", Public, func(w http.ResponseWriter, r *http.Request) {
		http.SetCookie(w, m.auth.Logout(r))
		seeOther(w, "login")
	})
}

// seeOther answers 303 to a location relative to the request's URL, left
// relative: http.Redirect would make it absolute from the path the node
// saw, which is not the browser's when a proxy serves the node under a
// path prefix (/tidekv/login would become /login).
func seeOther(w http.ResponseWriter, to string) {
	w.Header().Set("Location", to)
	w.WriteHeader(http.StatusSeeOther)
}
