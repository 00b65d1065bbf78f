package main

import (
	"archive/tar"
	"compress/gzip"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// entry is one file or directory of a layer. Owner and mode are given for
// each, never taken from the build machine, so that the tar is the same
// wherever it is written.
type entry struct {
	name     string // absolute path in the image
	dir      bool
	mode     int64 // permission bits, with 01000 for sticky
	uid, gid int
	data     []byte // the content, or
	src      string // a file to take it from
}

// layer writes entries, and the parent directories they leave out (root's,
// 0755), as a tar into file in name order, every timestamp at epoch; and
// returns it as an OCI layer, gzipped once and kept in memory for the digest
// and the write that follow.
func layer(file string, epoch time.Time, entries ...entry) (v1.Layer, error) {
	byName := map[string]entry{}
	for _, e := range entries {
		e.name = strings.TrimPrefix(path.Clean("/"+e.name), "/")
		if e.name == "" {
			return nil, fmt.Errorf("layer %s: an entry names the root", file)
		}
		if _, dup := byName[e.name]; dup {
			return nil, fmt.Errorf("layer %s: %s given twice", file, e.name)
		}
		byName[e.name] = e
	}
	names := make([]string, 0, len(byName))
	for n := range byName {
		names = append(names, n)
	}
	for _, n := range names {
		for d := path.Dir(n); d != "."; d = path.Dir(d) {
			if _, ok := byName[d]; !ok {
				byName[d] = entry{name: d, dir: true, mode: 0o755}
				names = append(names, d)
			}
		}
	}
	sort.Strings(names)

	f, err := os.Create(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	for _, n := range names {
		if err := writeEntry(tw, byName[n], epoch); err != nil {
			return nil, fmt.Errorf("layer %s: %s: %w", file, n, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := f.Close(); err != nil {
		return nil, err
	}
	return tarball.LayerFromFile(file,
		tarball.WithMediaType(types.OCILayer),
		tarball.WithCompressionLevel(gzip.DefaultCompression),
		tarball.WithCompressedCaching)
}

func writeEntry(tw *tar.Writer, e entry, epoch time.Time) error {
	h := &tar.Header{
		Name:    e.name,
		Mode:    e.mode,
		Uid:     e.uid,
		Gid:     e.gid,
		ModTime: epoch,
	}
	if e.dir {
		h.Typeflag = tar.TypeDir
		h.Name += "/"
		return tw.WriteHeader(h)
	}
	h.Typeflag = tar.TypeReg
	if e.src == "" {
		h.Size = int64(len(e.data))
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		_, err := tw.Write(e.data)
		return err
	}
	in, err := os.Open(e.src)
	if err != nil {
		return err
	}
	defer in.Close()
	info, err := in.Stat()
	if err != nil {
		return err
	}
	h.Size = info.Size()
	if err := tw.WriteHeader(h); err != nil {
		return err
	}
	_, err = io.Copy(tw, in)
	return err
}

// regularFiles calls fn with each file under root and the mode a layer gives
// it: 0755 when anyone may run it, else 0644, so that an image does not carry
// the umask of the machine that built it. Anything under root that is neither
// a directory nor a regular file is an error: a layer would copy a symlink or
// a device differently from the Dockerfile's COPY.
func regularFiles(root string, fn func(p string, mode int64) error) error {
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if !info.Mode().IsRegular() {
			return fmt.Errorf("%s: not a regular file", p)
		}
		mode := int64(0o644)
		if info.Mode()&0o111 != 0 {
			mode = 0o755
		}
		return fn(p, mode)
	})
}
