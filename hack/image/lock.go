package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/kubefledged/kube-fledged/hack/image/lock"
	kfplatform "github.com/kubefledged/kube-fledged/internal/platform"
)

// make bundle records the digest of the image this tree builds in a lock
// file, with a key of every input of the build (package lock says why);
// these are the key and the command that reads or writes the lock.

// imageKey digests every input of `image build` that can change the image:
// the sources the binary links and the files copied beside it (the
// revision, which go.mod and go.sum pin the dependencies in), the release
// version, the platforms, the Go release that compiles (goBuild sets every
// other Go setting itself), SOURCE_DATE_EPOCH, and this program's own code,
// which lays out the layers.
func imageKey(ctx context.Context, version string, platforms []platform) (string, error) {
	src, err := readSource()
	if err != nil {
		return "", err
	}
	revision, err := sourceRevision(ctx, ".", src.files)
	if err != nil {
		return "", err
	}
	goEnv, err := exec.CommandContext(ctx, "go", "env", "GOVERSION").Output()
	if err != nil {
		return "", fmt.Errorf("go env: %w", err)
	}
	builder, err := filepath.Glob(filepath.Join("hack", "image", "*.go"))
	if err != nil {
		return "", err
	}
	var own []string
	for _, f := range builder {
		if !strings.HasSuffix(f, "_test.go") {
			own = append(own, f)
		}
	}
	ownDigest, err := digestFiles(own)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	for _, part := range []string{revision, version, platformList(platforms), string(goEnv),
		os.Getenv("SOURCE_DATE_EPOCH"), ownDigest} {
		fmt.Fprintf(h, "%d:%s", len(part), part)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

// digestCommand prints the digest of the image `image build` would write
// for every platform, from the lock file while its key matches the tree.
// Otherwise it builds (and records the new digest), or with -check fails.
func digestCommand(ctx context.Context, args []string) error {
	flags := newFlags("digest")
	version := flags.String("version", "", "the release version, as for image build (v0.11.0)")
	lockFile := flags.String("lock", "", "the lock file recording the digest and the key of its inputs")
	out := flags.String("out", "", "where to write the OCI layout when it must build (replaced if it exists)")
	check := flags.Bool("check", false, "fail instead of building when the key differs")
	_ = flags.Parse(args)
	if *version == "" || *lockFile == "" || *out == "" || flags.NArg() != 0 {
		usage()
	}
	digest, err := lockedDigest(ctx, *version, *lockFile, *out, *check)
	if err != nil {
		return err
	}
	return report(digest, "")
}

func lockedDigest(ctx context.Context, version, lockFile, out string, check bool) (string, error) {
	plats := kfplatform.Image()
	key, err := imageKey(ctx, version, plats)
	if err != nil {
		return "", err
	}
	recorded, err := lock.Read(lockFile)
	if err != nil {
		return "", err
	}
	if recorded.Key == key {
		return recorded.Digest, nil
	}
	if check {
		return "", fmt.Errorf("%s records the digest of other inputs than this tree's (key %q, the tree's %s): "+
			"the code, the chart, go.mod, the version or IMAGE_GO changed since; run `make bundle` and commit", lockFile, recorded.Key, key)
	}
	if _, err := build(ctx, buildOptions{out: out, version: version, platforms: plats}); err != nil {
		return "", err
	}
	// The key again: an edit during the long build would otherwise be
	// recorded against a digest of the files before it.
	if again, err := imageKey(ctx, version, plats); err != nil {
		return "", err
	} else if again != key {
		return "", errors.New("the inputs changed during the build; run it again")
	}
	idx, _, err := layoutIndex(out, "image build")
	if err != nil {
		return "", err
	}
	l, err := lock.FromIndex(key, idx)
	if err != nil {
		return "", err
	}
	return l.Digest, lock.Write(lockFile, l)
}
