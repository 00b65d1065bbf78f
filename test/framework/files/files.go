// Package files copies trees of files for tests that build something from the repository's
// own files in a directory of their own.
package files

import (
	"os"
	"path/filepath"
)

// CopyTree copies src, a file or a directory, to dst, keeping each file's permissions and
// overwriting what dst holds already, as `cp -R` and a Dockerfile's COPY do. edit, unless
// nil, rewrites each file's content on the way; rel is the file's path below src ("." when
// src is a file).
func CopyTree(src, dst string, edit func(rel string, data []byte) []byte) error {
	return filepath.Walk(src, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		if info.IsDir() {
			return os.MkdirAll(to, 0o755)
		}
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if edit != nil {
			data = edit(rel, data)
		}
		// WriteFile sets the mode only on a file it creates.
		if err := os.WriteFile(to, data, info.Mode().Perm()); err != nil {
			return err
		}
		return os.Chmod(to, info.Mode().Perm())
	})
}
