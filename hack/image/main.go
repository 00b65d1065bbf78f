// Command image builds kube-fledged's multi-platform container image, its
// OLM bundle and catalog images, and the OLM tool images the OLM e2e runs,
// and pushes any of them, without a Docker engine:
//
//	go run ./hack/image build -out DIR -version v0.11.0 [-ref IMG] [-platforms linux/amd64,linux/arm/v7] [-digest-file FILE]
//	go run ./hack/image digest -version v0.11.0 -lock hack/image/digest.lock -out DIR [-check]
//	go run ./hack/image bundle -out DIR -ref BUNDLE_IMG [-dir bundle]
//	go run ./hack/image catalog -out DIR -ref CATALOG_IMG -opm bin/opm -probe bin/grpc_health_probe -bundle LAYOUT...
//	go run ./hack/image opm -out DIR -ref IMG -opm bin/opm -probe bin/grpc_health_probe
//	go run ./hack/image util -out DIR -ref IMG -cpb bin/cpb
//	go run ./hack/image scorecard -out DIR -ref IMG -test bin/scorecard-test
//	go run ./hack/image push -layout DIR [-insecure] IMG
//
// `make image`, `make bundle-image`, `make catalog-image` and their -push
// targets (hack/image.mk) run it; bundle.go, catalog.go and olmtools.go say
// what the OLM images hold and why, scorecard.go what the scorecard's does.
//
// The dev machines and CI have no Docker engine and cannot pull gcr.io's
// distroless base, so our image is put together from scratch with
// go-containerregistry, to the same shape as the Dockerfile's
// (test/dockerfile holds the two together): the static binary at
// /kubefledged, watches.yaml and the chart in the working directory
// /opt/kubefledged, user 65532, and, standing in for the distroless base,
// the few files of it the product relies on.
//
// Why not ko, which does much of this: ko would be one more pinned tool to
// build from the module proxy, while go-containerregistry (on which ko itself
// is built) is already in go.mod; and ko's image shape is its own (the binary
// under /ko-app/, data under /var/run/ko/, its own base image to pull), not
// this one, where the Jobs call /kubefledged by absolute path and the
// operator finds watches.yaml in its working directory.
//
// Two builds of the same files give one index digest: tar entries are sorted
// with fixed owners and modes, the chart files and their modes come from git
// rather than from the checkout's umask, and every timestamp is fixed. For
// the bundle, catalog and tool images that time is the commit's; our own
// image holds no trace of the commit (neither its time nor a revision
// label), because `make bundle` pins its digest in the checked-in CSV,
// which a commit cannot do with an image that names that very commit.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strings"

	kfplatform "github.com/kubefledged/kube-fledged/internal/platform"
)

func usage() {
	fmt.Fprint(os.Stderr, `usage:
  image build -out DIR -version VERSION [-ref IMG] [-platforms LIST] [-digest-file FILE]
  image digest -version VERSION -lock FILE -out DIR [-check]
  image bundle -out DIR -ref BUNDLE_IMG [-dir bundle] [-platforms LIST] [-digest-file FILE]
  image catalog -out DIR -ref CATALOG_IMG -opm BIN -probe BIN -bundle LAYOUT... [-configs DIR] [-digest-file FILE]
  image opm -out DIR -ref IMG -opm BIN -probe BIN [-digest-file FILE]
  image util -out DIR -ref IMG -cpb BIN [-digest-file FILE]
  image scorecard -out DIR -ref IMG -test BIN [-digest-file FILE]
  image push -layout DIR [-insecure] IMG
  image revision
`)
	os.Exit(2)
}

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	// The first interrupt stops the go builds and cleans up; a second one,
	// with the default handling back, stops the program outright.
	go func() { <-ctx.Done(); stop() }()
	var err error
	switch os.Args[1] {
	case "build":
		err = buildCommand(ctx, os.Args[2:])
	case "digest":
		err = digestCommand(ctx, os.Args[2:])
	case "bundle":
		err = bundleCommand(ctx, os.Args[2:])
	case "catalog":
		err = catalogCommand(ctx, os.Args[2:])
	case "opm":
		err = opmCommand(ctx, os.Args[2:])
	case "util":
		err = utilCommand(ctx, os.Args[2:])
	case "scorecard":
		err = scorecardCommand(ctx, os.Args[2:])
	case "push":
		err = pushCommand(ctx, os.Args[2:])
	case "revision":
		err = revisionCommand(ctx, os.Args[2:])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "image: %v\n", err)
		os.Exit(1)
	}
}

func newFlags(name string) *flag.FlagSet { return flag.NewFlagSet(name, flag.ExitOnError) }

// report prints the digest alone on stdout, so that a script can take it
// with $(...), and writes it to file when one is named.
func report(digest, file string) error {
	if file != "" {
		if err := os.WriteFile(file, []byte(digest+"\n"), 0o644); err != nil {
			return err
		}
	}
	fmt.Println(digest)
	return nil
}

func buildCommand(ctx context.Context, args []string) error {
	fs := newFlags("build")
	out := fs.String("out", "", "the OCI layout directory to write (replaced if it exists)")
	version := fs.String("version", "", "the release version, as `kubefledged version` reports it (v0.11.0)")
	ref := fs.String("ref", "", "the image reference to name the index by in the layout's index.json (optional)")
	platforms := fs.String("platforms", kfplatform.List(), "comma-separated platforms, os/arch or linux/arm/v7 (default: every one internal/platform lists)")
	digestFile := fs.String("digest-file", "", "a file to write the index digest to (optional)")
	_ = fs.Parse(args)
	if *out == "" || *version == "" || fs.NArg() != 0 {
		usage()
	}
	plats, err := parsePlatforms(*platforms)
	if err != nil {
		return err
	}
	digest, err := build(ctx, buildOptions{
		out: *out, version: *version, ref: *ref, platforms: plats,
	})
	if err != nil {
		return err
	}
	return report(digest, *digestFile)
}

func pushCommand(ctx context.Context, args []string) error {
	fs := newFlags("push")
	dir := fs.String("layout", "", "the OCI layout `image build` wrote")
	insecure := fs.Bool("insecure", false, "allow plain HTTP to the registry (always allowed for localhost and loopback addresses)")
	_ = fs.Parse(args)
	if *dir == "" || fs.NArg() != 1 {
		usage()
	}
	pushed, err := push(ctx, *dir, fs.Arg(0), *insecure)
	if err != nil {
		return err
	}
	fmt.Println(pushed)
	return nil
}

// parsePlatforms reads -platforms. A subset of internal/platform's list is
// what a quicker build for one node takes (IMAGE_PLATFORMS=linux/amd64);
// a platform outside it is refused, since the controller would skip its
// nodes as UnsupportedArch whatever the image holds.
func parsePlatforms(list string) ([]platform, error) {
	var out []platform
	seen := map[platform]bool{}
	for _, s := range strings.Split(list, ",") {
		p, err := kfplatform.Parse(s)
		if err != nil {
			return nil, err
		}
		if !slices.Contains(kfplatform.Image(), p) {
			return nil, fmt.Errorf("platform %s is not one internal/platform lists (%s): the controller would skip its nodes", p, kfplatform.List())
		}
		if seen[p] {
			return nil, fmt.Errorf("platform %s given twice", p)
		}
		seen[p] = true
		out = append(out, p)
	}
	return out, nil
}

// revisionCommand prints the revision an image built from this checkout
// reports in kubefledged_build_info, to match a running replica with a
// checkout.
func revisionCommand(ctx context.Context, args []string) error {
	_ = newFlags("revision").Parse(args)
	src, err := readSource()
	if err != nil {
		return err
	}
	rev, err := sourceRevision(ctx, ".", src.files)
	if err != nil {
		return err
	}
	fmt.Println(rev)
	return nil
}
