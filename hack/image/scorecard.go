package main

import (
	"context"
	"path/filepath"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// The image `operator-sdk scorecard` runs the bundle's scorecard tests in
// (bundle/tests/scorecard/config.yaml), for a cluster that cannot pull
// quay.io's: operator-sdk's scorecard-test program, built by hack/olm.mk
// from the module that pins operator-sdk, at the path its config calls
// (`scorecard-test <test>` through PATH, /usr/local/bin as upstream's
// image has it), and a /bin/tar (hack/image/tar) for the init container
// that unpacks the bundle into every test pod. One image serves both, as
// the config's image and as --untar-image: it has no entry point, since
// the untar container gives only arguments (`tar xvzf ...`), which an
// entry point would swallow, and every test of the config names its
// command. User 1001, as upstream's scorecard images run.
const (
	scorecardTestPath = "/usr/local/bin/scorecard-test"
	tarPath           = "/bin/tar"
	tarPackage        = "./hack/image/tar"
	scorecardHome     = "/opt/scorecard-test"
)

func buildScorecardImage(ctx context.Context, out, ref, scorecardTest string) (string, error) {
	p, err := binaryPlatform(scorecardTest)
	if err != nil {
		return "", err
	}
	c := v1.Config{User: olmUser, WorkingDir: scorecardHome, Env: []string{pathVariable, "HOME=" + scorecardHome}}
	return oneLayerImage(out, ref, "scorecard image", p, c, "COPY scorecard-test /usr/local/bin/, tar /bin/",
		func(work string, epoch time.Time) (v1.Layer, error) {
			tar := filepath.Join(work, "tar")
			if err := goBuild(ctx, p, tarPackage, "-s -w", tar); err != nil {
				return nil, err
			}
			return layer(filepath.Join(work, "scorecard.tar"), epoch,
				entry{name: scorecardTestPath, mode: 0o755, src: scorecardTest},
				entry{name: tarPath, mode: 0o755, src: tar},
				entry{name: scorecardHome, dir: true, mode: 0o755},
				entry{name: "/tmp", dir: true, mode: 0o1777},
			)
		})
}

func scorecardCommand(ctx context.Context, args []string) error {
	fs := newFlags("scorecard")
	out := fs.String("out", "", "the OCI layout directory to write (replaced if it exists)")
	ref := fs.String("ref", "", "the image reference, named in the layout's index.json")
	test := fs.String("test", "", "the static scorecard-test binary (bin/scorecard-test)")
	digestFile := fs.String("digest-file", "", "a file to write the index digest to (optional)")
	_ = fs.Parse(args)
	if *out == "" || *ref == "" || *test == "" || fs.NArg() != 0 {
		usage()
	}
	digest, err := buildScorecardImage(ctx, *out, *ref, *test)
	if err != nil {
		return err
	}
	return report(digest, *digestFile)
}
