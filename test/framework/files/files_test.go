package files

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
)

func TestCopyTree(t *testing.T) {
	g := NewWithT(t)
	src, dst := t.TempDir(), t.TempDir()
	g.Expect(os.MkdirAll(filepath.Join(src, "a", "b"), 0o755)).To(Succeed())
	g.Expect(os.WriteFile(filepath.Join(src, "a", "b", "run.sh"), []byte("echo old"), 0o755)).To(Succeed())
	g.Expect(os.WriteFile(filepath.Join(src, "top.txt"), []byte("old top"), 0o644)).To(Succeed())
	g.Expect(os.WriteFile(filepath.Join(dst, "top.txt"), []byte("there before, and longer"), 0o600)).To(Succeed())

	var seen []string
	g.Expect(CopyTree(src, dst, func(rel string, data []byte) []byte {
		seen = append(seen, rel)
		return bytes.ReplaceAll(data, []byte("old"), []byte("new"))
	})).To(Succeed())
	g.Expect(seen).To(ConsistOf(filepath.Join("a", "b", "run.sh"), "top.txt"))
	g.Expect(os.ReadFile(filepath.Join(dst, "a", "b", "run.sh"))).To(BeEquivalentTo("echo new"))
	g.Expect(os.ReadFile(filepath.Join(dst, "top.txt"))).To(BeEquivalentTo("new top"), "an existing file is overwritten whole")
	for name, mode := range map[string]os.FileMode{filepath.Join("a", "b", "run.sh"): 0o755, "top.txt": 0o644} {
		info, err := os.Stat(filepath.Join(dst, name))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(info.Mode().Perm()).To(Equal(mode), name)
	}

	// A file as src lands at dst itself, unedited without edit.
	one := filepath.Join(t.TempDir(), "copy.txt")
	g.Expect(CopyTree(filepath.Join(src, "top.txt"), one, nil)).To(Succeed())
	g.Expect(os.ReadFile(one)).To(BeEquivalentTo("old top"))
}
