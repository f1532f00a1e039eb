package lint

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/tidekv/tidekv/"

// rule is one import rule. Packages are module-relative import paths; a
// trailing "/..." takes the package and everything under it. A package
// breaks the rule if it imports a forbidden path: with transitive, anything
// it depends on counts (so that the package could become a module of its
// own); otherwise only its own imports (the rule is about what the package
// itself does, and the packages it builds on are governed by their own
// rules). Forbidden paths are module-relative with a trailing "/" (a
// prefix), or standard-library paths matched exactly; allow lists
// exceptions to a prefix. modules, when set, are the only other modules
// the package may import (module paths, each taking the packages under
// it): any import outside TideKV's module and the standard library but
// these breaks the rule.
type rule struct {
	pkgs       []string
	transitive bool
	forbid     []string
	allow      []string
	modules    []string
	// says is the rule as docs/architecture.md and each governed package's
	// doc.go state it; doc.go follows it with " (internal/lint)".
	says string
}

var rules = []rule{
	{
		pkgs:       []string{"client/...", "api/...", "bench", "plot"},
		transitive: true,
		forbid:     []string{"internal/"},
		says:       "imports nothing under internal/",
	},
	{
		pkgs:       []string{"internal/storage/..."},
		transitive: true,
		forbid:     []string{"api/", "internal/"},
		allow:      []string{"internal/storage/"},
		says:       "imports nothing under api/ or internal/ but internal/storage itself",
	},
	{
		pkgs:       []string{"internal/raftstore/..."},
		transitive: true,
		forbid:     []string{"internal/control/", "internal/server/", "internal/transport/", "internal/gossip/"},
		says:       "imports no control, server or network code (internal/control, internal/server, internal/transport, internal/gossip)",
	},
	{
		pkgs:       []string{"internal/kvapi/..."},
		transitive: true,
		forbid:     []string{"client/", "internal/server/", "internal/redisgw/", "internal/resp/", "internal/transport/", "internal/gossip/"},
		says:       "imports no server, gateway, client or network code (internal/server, internal/redisgw, internal/resp, client, internal/transport, internal/gossip)",
	},
	{
		pkgs:       []string{"internal/resp"},
		transitive: true,
		forbid:     []string{"client/", "api/", "internal/"},
		allow:      []string{"internal/resp/"},
		modules:    []string{"github.com/yuin/gopher-lua"}, // the scripts' Lua
		says:       "imports no TideKV package but itself (no SDK, API or node code), and of other modules only gopher-lua",
	},
	{
		pkgs:       []string{"internal/txn"},
		transitive: true,
		forbid:     []string{"client/", "internal/server/", "internal/txnclient/", "internal/redisgw/"},
		says:       "imports no SDK or server code (client, internal/server, internal/txnclient, internal/redisgw)",
	},
	{
		pkgs:   []string{"internal/placement", "internal/elastic", "internal/control", "internal/admission", "internal/retry", "internal/queue", "internal/settings"},
		forbid: []string{"net", "os", "os/exec", "net/http"},
		says:   "imports no I/O package (net, os, os/exec, net/http)",
	},
	{
		// The concerns moved out of the node reach the network, the
		// engine and the clock through interfaces they own, so that they
		// run without a whole server.
		pkgs:   []string{"internal/metrics", "internal/rangeload", "internal/meta", "internal/clockwatch", "internal/keyspaces", "internal/sizewatch", "internal/kvstream", "internal/metarange", "internal/nodereport", "internal/loops", "internal/ctlloop"},
		forbid: []string{"internal/server/", "client/", "internal/transport/", "net", "net/http"},
		says:   "imports no server, SDK or network code (internal/server, client, internal/transport, net, net/http)",
	},
	{
		// The gateway reaches the node's KV through redisgw.Local, which
		// it owns, and other nodes through the routing client.
		pkgs:   []string{"internal/redisgw"},
		forbid: []string{"internal/server/", "internal/raftstore/"},
		says:   "imports no server or store code (internal/server, internal/raftstore)",
	},
	{
		// Admin routing, the range operations, the side transport and
		// the GC queue call peers (network code by nature); they reach
		// the node through the Node interfaces they own.
		pkgs:   []string{"internal/adminroute", "internal/rangeops", "internal/closedpush", "internal/gcqueue"},
		forbid: []string{"internal/server/", "client/"},
		says:   "imports no server or SDK code (internal/server, client)",
	},
	{
		pkgs:   []string{"internal/georpc"},
		forbid: []string{"internal/server/", "internal/raftstore/", "internal/transport/"},
		says:   "imports no server, store or transport code (internal/server, internal/raftstore, internal/transport)",
	},
}

// pkg is what `go list -deps -json` says of one package.
type pkg struct {
	ImportPath string
	Dir        string
	Imports    []string
	Deps       []string
	DepOnly    bool
}

// governed lists the packages the rules name (not their dependencies),
// keyed by module-relative path, and where the module lives.
func governed(t *testing.T) (map[string]pkg, string) {
	t.Helper()
	args := []string{"list", "-deps", "-json"}
	for _, r := range rules {
		for _, p := range r.pkgs {
			args = append(args, module+p)
		}
	}
	out, err := exec.Command("go", args...).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("go list: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("go list: %v", err)
	}
	pkgs, root := map[string]pkg{}, ""
	for d := json.NewDecoder(bytes.NewReader(out)); ; {
		var p pkg
		if err := d.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		rel, ok := strings.CutPrefix(p.ImportPath, module)
		if !ok || p.DepOnly {
			continue
		}
		pkgs[rel] = p
		root = strings.TrimSuffix(filepath.ToSlash(p.Dir), "/"+rel)
	}
	if root == "" {
		t.Fatal("go list named no package of the module")
	}
	return pkgs, filepath.FromSlash(root)
}

// covers reports whether pattern names package rel.
func covers(pattern, rel string) bool {
	if base, ok := strings.CutSuffix(pattern, "/..."); ok {
		return rel == base || strings.HasPrefix(rel, base+"/")
	}
	return rel == pattern
}

// breaks reports whether importing path imp breaks r.
func (r rule) breaks(imp string) bool {
	rel, inModule := strings.CutPrefix(imp, module)
	matches := func(list []string) bool {
		for _, f := range list {
			if prefix, ok := strings.CutSuffix(f, "/"); ok {
				if inModule && (rel == prefix || strings.HasPrefix(rel, prefix+"/")) {
					return true
				}
			} else if !inModule && imp == f {
				return true
			}
		}
		return false
	}
	if r.modules != nil && !inModule && !stdlib(imp) && !slices.ContainsFunc(r.modules, func(m string) bool {
		return imp == m || strings.HasPrefix(imp, m+"/")
	}) {
		return true
	}
	return matches(r.forbid) && !matches(r.allow)
}

// stdlib reports whether imp is a standard-library path: its first
// element has no dot (vendored ones included).
func stdlib(imp string) bool {
	first, _, _ := strings.Cut(imp, "/")
	return !strings.Contains(first, ".")
}

func (r rule) governs(rel string) bool {
	return slices.ContainsFunc(r.pkgs, func(p string) bool { return covers(p, rel) })
}

func TestImportRules(t *testing.T) {
	pkgs, _ := governed(t)
	for _, r := range rules {
		n := 0
		for rel, p := range pkgs {
			if !r.governs(rel) {
				continue
			}
			n++
			imports := p.Imports
			if r.transitive {
				imports = p.Deps
			}
			for _, imp := range imports {
				if r.breaks(imp) {
					t.Errorf("%s imports %s, but it %s (internal/lint; go list -deps %s shows the path)", rel, strings.TrimPrefix(imp, module), r.says, module+rel)
				}
			}
		}
		if n == 0 {
			t.Errorf("no package is governed by %q: a rule that checks nothing", r.says)
		}
	}
}

// comment is a doc.go's comment text with its lines joined, so that a
// sentence wrapped over lines still matches.
func comment(src []byte) string {
	var words []string
	for _, l := range strings.Split(string(src), "\n") {
		if c, ok := strings.CutPrefix(strings.TrimSpace(l), "//"); ok {
			words = append(words, strings.Fields(c)...)
		}
	}
	return strings.Join(words, " ")
}

var importRulesSection = regexp.MustCompile(`(?ms)^## Import rules\n(.*?)(^## |\z)`)

// The rules are written where a reader looks for them, and only the rules
// checked here are written: docs/architecture.md's "Import rules" section
// has one item per rule naming its packages and saying it, each governed
// package's doc.go says its rule followed by "(internal/lint)", and no
// other doc.go claims a rule.
func TestImportRulesDocumented(t *testing.T) {
	pkgs, root := governed(t)
	arch, err := os.ReadFile(filepath.Join(root, "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := importRulesSection.FindSubmatch(arch)
	if m == nil {
		t.Fatal(`docs/architecture.md has no "## Import rules" section`)
	}
	var items []string
	for _, item := range regexp.MustCompile(`(?m)^- `).Split(string(m[1]), -1)[1:] {
		items = append(items, strings.Join(strings.Fields(item), " "))
	}
	if len(items) != len(rules) {
		t.Errorf("docs/architecture.md lists %d import rules, the test checks %d", len(items), len(rules))
	}
	for _, r := range rules {
		found := false
		for _, item := range items {
			named := !slices.ContainsFunc(r.pkgs, func(p string) bool { return !strings.Contains(item, "`"+p+"`") })
			found = found || (named && strings.Contains(item, r.says))
		}
		if !found {
			t.Errorf("docs/architecture.md's Import rules have no item naming %s that says %q", strings.Join(r.pkgs, ", "), r.says)
		}
	}

	claims := map[string]string{}
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != "doc.go" {
			return err
		}
		src, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if c := comment(src); strings.Contains(c, "(internal/lint)") {
			rel, _ := filepath.Rel(root, filepath.Dir(p))
			claims[path.Clean(filepath.ToSlash(rel))] = c
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for rel := range pkgs {
		for _, r := range rules {
			if r.governs(rel) && !strings.Contains(claims[rel], r.says+" (internal/lint)") {
				t.Errorf("%s/doc.go does not say %q", rel, r.says+" (internal/lint)")
			}
		}
	}
	for rel, c := range claims {
		for _, said := range regexp.MustCompile(`([^.;:]*?) \(internal/lint\)`).FindAllStringSubmatch(c, -1) {
			if !slices.ContainsFunc(rules, func(r rule) bool { return r.governs(rel) && strings.HasSuffix(said[1], r.says) }) {
				t.Errorf("%s/doc.go says %q, which internal/lint does not check for it", rel, strings.TrimSpace(said[0]))
			}
		}
	}
}

// A rule with modules takes the standard library, what it allows and those
// modules, nothing else: not another third-party package, not another of
// TideKV's.
func TestModulesRule(t *testing.T) {
	r := rule{forbid: []string{"client/", "api/", "internal/"}, allow: []string{"internal/resp/"}, modules: []string{"github.com/yuin/gopher-lua"}}
	for imp, want := range map[string]bool{
		"net":                                    false,
		"crypto/tls":                             false,
		"vendor/golang.org/x/net/dns/dnsmessage": false,
		"github.com/yuin/gopher-lua/parse":       false,
		module + "internal/resp":                 false,
		module + "internal/server":               true,
		module + "client":                        true,
		"github.com/tidwall/redcon":              true,
		"golang.org/x/sys/unix":                  true,
	} {
		if got := r.breaks(imp); got != want {
			t.Errorf("importing %s breaks the rule: %v, want %v", imp, got, want)
		}
	}
}
