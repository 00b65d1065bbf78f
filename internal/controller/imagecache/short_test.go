package imagecache

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

// maxLines is the longest a function of the reconciler may be. Issue 32
// found the package hard to learn through its 100-line functions; each
// phase reads as a few named steps (docs/architecture.md names them) only
// while none grows back.
const maxLines = 60

func TestFunctionsAreShort(t *testing.T) {
	g := NewWithT(t)
	entries, err := os.ReadDir(".")
	g.Expect(err).NotTo(HaveOccurred())
	fset := token.NewFileSet()
	long := map[string]int{}
	seen := 0
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, e.Name(), nil, parser.SkipObjectResolution)
		g.Expect(err).NotTo(HaveOccurred())
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			seen++
			if n := fset.Position(fn.End()).Line - fset.Position(fn.Pos()).Line + 1; n >= maxLines {
				long[e.Name()+": "+fn.Name.Name] = n
			}
		}
	}
	g.Expect(seen).To(BeNumerically(">", 50), "the package's functions must be found, or this test could not fail")
	g.Expect(long).To(BeEmpty(), "split these into named steps")
}
