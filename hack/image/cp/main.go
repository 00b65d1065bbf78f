// Command cp is the /bin/cp of the OLM util image that hack/image builds.
// OLM's catalog operator runs `/bin/cp -Rv /bin/cpb /util/cpb` in the first
// container of every bundle unpack Job, and `cp /bin/copy-content ...` in a
// catalog pod that extracts its content; upstream's util image takes cp from
// busybox, which nothing here can pull. This is the part of cp those calls
// use: files and, with -R, directories, with their permission bits; -v
// prints each copy; other flags are refused rather than ignored.
package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "cp: %v\n", err)
		os.Exit(1)
	}
}

func run(args []string, stdout io.Writer) error {
	var recursive, verbose bool
	var paths []string
	for i, a := range args {
		if a == "--" {
			paths = append(paths, args[i+1:]...)
			break
		}
		if len(a) < 2 || a[0] != '-' {
			paths = append(paths, a)
			continue
		}
		for _, c := range a[1:] {
			switch c {
			case 'R', 'r':
				recursive = true
			case 'v':
				verbose = true
			case 'f':
				// Overwriting is what cp does anyway.
			default:
				return fmt.Errorf("unsupported flag -%c (this cp knows -R, -r, -v and -f)", c)
			}
		}
	}
	if len(paths) < 2 {
		return errors.New("usage: cp [-Rv] SOURCE... DEST")
	}
	srcs, dst := paths[:len(paths)-1], paths[len(paths)-1]
	info, err := os.Stat(dst)
	intoDir := err == nil && info.IsDir()
	if len(srcs) > 1 && !intoDir {
		return fmt.Errorf("target %q is not a directory", dst)
	}
	for _, src := range srcs {
		to := dst
		if intoDir {
			to = filepath.Join(dst, filepath.Base(strings.TrimRight(src, "/")))
		}
		if err := copyPath(src, to, recursive, verbose, stdout); err != nil {
			return err
		}
	}
	return nil
}

func copyPath(src, dst string, recursive, verbose bool, stdout io.Writer) error {
	info, err := os.Stat(src)
	if err != nil {
		return err
	}
	if !info.IsDir() {
		return copyFile(src, dst, info.Mode(), verbose, stdout)
	}
	if !recursive {
		return fmt.Errorf("-R not specified; omitting directory %q", src)
	}
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		i, err := d.Info()
		if err != nil {
			return err
		}
		if d.IsDir() {
			if verbose {
				fmt.Fprintf(stdout, "'%s' -> '%s'\n", p, to)
			}
			return os.MkdirAll(to, i.Mode().Perm()|0o700)
		}
		return copyFile(p, to, i.Mode(), verbose, stdout)
	})
}

func copyFile(src, dst string, mode fs.FileMode, verbose bool, stdout io.Writer) error {
	if !mode.IsRegular() {
		return fmt.Errorf("%s: only regular files and directories are copied", src)
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, mode.Perm())
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	// A file that existed keeps its mode through O_TRUNC; cp gives it the
	// source's.
	if err := os.Chmod(dst, mode.Perm()); err != nil {
		return err
	}
	if verbose {
		fmt.Fprintf(stdout, "'%s' -> '%s'\n", src, dst)
	}
	return nil
}
