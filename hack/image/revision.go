package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// revisionVar is what -X sets to the source digest (kubefledged_build_info's
// revision label).
const revisionVar = "github.com/kubefledged/kube-fledged/internal/commands.Revision"

// sourceRevision names what our image is built from by the content of its
// inputs: every Go file (any platform's, tests excluded) and embedded file
// of this module's packages that the binary links, go.mod and go.sum, and
// the files copied beside the binary. A commit hash cannot be stamped into
// the image, since the bundle pins the image's digest in a committed file;
// this digest changes exactly when the image's content can, so two replicas
// reporting the same revision run the same code, and a build of any commit
// reports it again. `go run ./hack/image revision` prints it for a checkout.
func sourceRevision(ctx context.Context, pkg string, copied []sourceFile) (string, error) {
	files, err := linkedFiles(ctx, pkg)
	if err != nil {
		return "", err
	}
	files = append(files, "go.mod", "go.sum")
	for _, f := range copied {
		files = append(files, filepath.FromSlash(f.path))
	}
	return digestFiles(files)
}

// digestFiles is the revision of a set of files, by their paths (relative
// to the working directory) and contents, whatever their order.
func digestFiles(files []string) (string, error) {
	files = slices.Clone(files)
	slices.Sort(files)
	files = slices.Compact(files)
	h := sha256.New()
	for _, f := range files {
		if err := hashFile(h, f); err != nil {
			return "", err
		}
	}
	return "src-" + hex.EncodeToString(h.Sum(nil))[:12], nil
}

// hashFile adds a file's slash-separated path and its content, each
// length-prefixed so that no two file sets hash alike.
func hashFile(h io.Writer, name string) error {
	b, err := os.ReadFile(name)
	if err != nil {
		return err
	}
	p := filepath.ToSlash(name)
	fmt.Fprintf(h, "%d:%s%d:", len(p), p, len(b))
	_, err = h.Write(b)
	return err
}

// linkedFiles lists, relative to the module root, the source files of the
// main module's packages that pkg depends on. Files left out by build
// constraints count too: the index holds a binary per platform.
func linkedFiles(ctx context.Context, pkg string) ([]string, error) {
	root, err := os.Getwd()
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, "go", "list", "-deps", "-json=Dir,Module,GoFiles,CgoFiles,IgnoredGoFiles,EmbedFiles", pkg)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list -deps %s: %w", pkg, err)
	}
	type listed struct {
		Dir                                           string
		Module                                        *struct{ Main bool }
		GoFiles, CgoFiles, IgnoredGoFiles, EmbedFiles []string
	}
	var files []string
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p listed
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("go list -deps %s: %w", pkg, err)
		}
		if p.Module == nil || !p.Module.Main {
			continue
		}
		rel, err := filepath.Rel(root, p.Dir)
		if err != nil {
			return nil, err
		}
		for _, group := range [][]string{p.GoFiles, p.CgoFiles, p.IgnoredGoFiles, p.EmbedFiles} {
			for _, f := range group {
				if !strings.HasSuffix(f, "_test.go") {
					files = append(files, filepath.Join(rel, f))
				}
			}
		}
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("go list -deps %s: no file of this module", pkg)
	}
	return files, nil
}
