// Package repo finds this repository's files from a test, whose working directory is its
// own package's directory, wherever that lies in the tree, and builds its binaries.
package repo

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// Root is the first directory above the working directory holding go.mod: the repository
// root for every package of the main module.
func Root() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no go.mod above %s", wd)
		}
	}
}

// Path is a file of the repository, elem joined below Root.
func Path(elem ...string) (string, error) {
	root, err := Root()
	if err != nil {
		return "", err
	}
	return filepath.Join(append([]string{root}, elem...)...), nil
}

// BinDir is where the built tools are: dir when set, else $KUBEFLEDGED_BIN_DIR, else bin/
// under Root. It is absolute, and need not exist.
func BinDir(dir string) (string, error) {
	if dir == "" {
		dir = os.Getenv("KUBEFLEDGED_BIN_DIR")
	}
	if dir == "" {
		root, err := Root()
		if err != nil {
			return "", fmt.Errorf("%w: set KUBEFLEDGED_BIN_DIR", err)
		}
		dir = filepath.Join(root, "bin")
	}
	return filepath.Abs(dir)
}

// Build builds the Go package pkg (a path inside this module, "." for the controller) into
// out as the image and `make build` build it: static, with trimmed paths, stripped. Every
// test that builds a binary then shares one set of compiled packages in the build cache,
// which matters on a cold CI machine, and a binary put into an image built on an empty base
// has no C library to miss.
func Build(ctx context.Context, pkg, out string) error {
	root, err := Root()
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", out, pkg)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %v\n%s", pkg, err, b)
	}
	return nil
}
