package tier

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// repoRoot is the module root, three folders up from this package.
const repoRoot = "../../.."

// TestLongTierIsListed keeps docs/testing.md exact: every test that calls
// RequireLong is named there, so the long tier is what the page says it is.
func TestLongTierIsListed(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join(repoRoot, "docs", "testing.md"))
	if err != nil {
		t.Fatal(err)
	}
	long := longTests(t)
	if len(long) == 0 {
		t.Fatal("found no test that calls tier.RequireLong: the walk is broken")
	}
	for _, name := range long {
		if !strings.Contains(string(doc), "`"+name+"`") {
			t.Errorf("%s is in the long tier but docs/testing.md does not name it", name)
		}
	}
}

// longTests returns the names of the test
// functions anywhere in the module whose body calls tier.RequireLong.
func longTests(t *testing.T) []string {
	t.Helper()
	var names []string
	fset := token.NewFileSet()
	err := filepath.WalkDir(repoRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") && path != repoRoot {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil || !strings.HasPrefix(fn.Name.Name, "Test") {
				continue
			}
			if callsRequireLong(fn.Body) {
				names = append(names, fn.Name.Name)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(names)
	return names
}

func callsRequireLong(body *ast.BlockStmt) bool {
	found := false
	ast.Inspect(body, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return !found
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if ok && sel.Sel.Name == "RequireLong" {
			if id, ok := sel.X.(*ast.Ident); ok && id.Name == "tier" {
				found = true
			}
		}
		return !found
	})
	return found
}
