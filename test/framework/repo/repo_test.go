package repo

import (
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
)

func TestRootHoldsThisModule(t *testing.T) {
	g := NewWithT(t)
	root, err := Root()
	g.Expect(err).NotTo(HaveOccurred())
	mod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(mod)).To(HavePrefix("module github.com/kubefledged/kube-fledged\n"))
	p, err := Path("test", "framework", "repo", "repo.go")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(p).To(BeAnExistingFile())
}

func TestBinDir(t *testing.T) {
	g := NewWithT(t)
	root, err := Root()
	g.Expect(err).NotTo(HaveOccurred())
	t.Setenv("KUBEFLEDGED_BIN_DIR", "")
	g.Expect(BinDir("")).To(Equal(filepath.Join(root, "bin")))
	t.Setenv("KUBEFLEDGED_BIN_DIR", "/from/env")
	g.Expect(BinDir("")).To(Equal("/from/env"))
	g.Expect(BinDir("/given")).To(Equal("/given"))
}
