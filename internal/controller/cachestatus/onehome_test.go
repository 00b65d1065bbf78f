package cachestatus

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

// home is the one file that may send a status write.
const home = "cachestatus/write.go"

// TestStatusHasOneHome fails when a status write bypasses write.go: a
// Status() or SubResource(...) call anywhere else in the controllers'
// source (tests aside, which play the other writers of a cluster). A write
// sent from elsewhere would escape the three kinds and their concurrency
// rules.
func TestStatusHasOneHome(t *testing.T) {
	g := NewWithT(t)
	calls := statusCalls(t, "..")
	g.Expect(calls[home]).To(BeNumerically(">=", 3), "write.go's own writes must be found, or this test could not fail")
	delete(calls, home)
	g.Expect(calls).To(BeEmpty(), "status written outside %s", home)
}

// statusCalls counts, per file under root, the calls that reach a
// subresource: x.Status() and x.SubResource(name).
func statusCalls(t *testing.T, root string) map[string]int {
	out := map[string]int{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		ast.Inspect(f, func(n ast.Node) bool {
			if call, ok := n.(*ast.CallExpr); ok && subresource(call) {
				out[filepath.ToSlash(rel)]++
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func subresource(call *ast.CallExpr) bool {
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	return (sel.Sel.Name == "Status" && len(call.Args) == 0) || sel.Sel.Name == "SubResource"
}
