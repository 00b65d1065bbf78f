// Command tar is the /bin/tar of the scorecard image that hack/image builds.
// `operator-sdk scorecard` starts every test pod with an init container
// that runs `tar xvzf /scorecard/bundle.tar.gz -C /scorecard-bundle`, to
// unpack the bundle the tests read; upstream's untar image takes tar from
// UBI, which nothing here can pull. This is the part of tar that call
// uses: extracting (x) a gzipped (z) archive file (f) into a directory
// (-C), listing each entry (v). Only directories and regular files are
// extracted, as only those are in a bundle; any other entry, any other
// flag, and any name that would land outside the directory are refused
// rather than skipped.
package main

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "tar: %v\n", err)
		os.Exit(1)
	}
}

const usage = "usage: tar x[v][z]f ARCHIVE [-C DIR]"

type options struct {
	verbose, gzipped bool
	archive, dir     string
}

// parse reads tar's traditional form: the first argument is a cluster of
// function letters, with or without a dash, and f takes the next argument.
func parse(args []string) (options, error) {
	o := options{dir: "."}
	if len(args) == 0 {
		return o, errors.New(usage)
	}
	var extract, file bool
	for _, c := range strings.TrimPrefix(args[0], "-") {
		switch c {
		case 'x':
			extract = true
		case 'v':
			o.verbose = true
		case 'z':
			o.gzipped = true
		case 'f':
			file = true
		default:
			return o, fmt.Errorf("unsupported function letter %q (this tar knows x, v, z and f)", c)
		}
	}
	if !extract || !file {
		return o, fmt.Errorf("%s: this tar only extracts from a file", usage)
	}
	rest := args[1:]
	if len(rest) == 0 {
		return o, errors.New(usage)
	}
	o.archive, rest = rest[0], rest[1:]
	for len(rest) > 0 {
		switch {
		case rest[0] == "-C" && len(rest) > 1:
			o.dir, rest = rest[1], rest[2:]
		default:
			return o, fmt.Errorf("unsupported argument %q (%s)", rest[0], usage)
		}
	}
	return o, nil
}

func run(args []string, stdout io.Writer) error {
	o, err := parse(args)
	if err != nil {
		return err
	}
	f, err := os.Open(o.archive)
	if err != nil {
		return err
	}
	defer f.Close()
	var r io.Reader = f
	if o.gzipped {
		gz, err := gzip.NewReader(f)
		if err != nil {
			return fmt.Errorf("%s: %w", o.archive, err)
		}
		defer gz.Close()
		r = gz
	}
	return extract(tar.NewReader(r), o.dir, o.verbose, stdout)
}

func extract(tr *tar.Reader, dir string, verbose bool, stdout io.Writer) error {
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		to, err := target(dir, h.Name)
		if err != nil {
			return err
		}
		if verbose {
			fmt.Fprintln(stdout, h.Name)
		}
		mode := os.FileMode(h.Mode).Perm()
		switch h.Typeflag {
		case tar.TypeDir:
			// The owner keeps the right to fill it, as GNU tar does while
			// extracting as a user.
			if err := os.MkdirAll(to, mode|0o700); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
				return err
			}
			if err := writeFile(to, tr, mode); err != nil {
				return err
			}
		default:
			return fmt.Errorf("%s: entry type %q is not a directory or a regular file", h.Name, h.Typeflag)
		}
	}
}

// target is where name lands under dir; a name that would land outside it
// (absolute, or climbing with ..) is an error.
func target(dir, name string) (string, error) {
	clean := path.Clean(name)
	if path.IsAbs(clean) || clean == ".." || strings.HasPrefix(clean, "../") {
		return "", fmt.Errorf("%s: the name leaves the target directory", name)
	}
	return filepath.Join(dir, filepath.FromSlash(clean)), nil
}

func writeFile(to string, r io.Reader, mode os.FileMode) error {
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, r); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	return os.Chmod(to, mode)
}
