package main

import (
	"context"
	"debug/elf"
	"fmt"
	"os"
	"path/filepath"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The images OLM's catalog operator starts pods from, as upstream builds
// them (operator-registry's release/goreleaser.opm.Dockerfile, OLM's
// Dockerfile), but from the static binaries hack/olm.mk builds into bin/,
// with nothing pulled:
//
//   - the opm image (--opmImage): /bin/opm, and /bin/grpc_health_probe,
//     which a catalog's registry pod is probed with; also the base of the
//     catalog image;
//   - the util image (--util-image): /bin/cpb, which the bundle unpack Job
//     copies into the bundle's own container to copy the bundle out of it,
//     and the /bin/cp it is copied with (upstream's is busybox's; ours is
//     hack/image/cp, since nothing here can pull busybox).
//
// Upstream's run as user 1001, and so do these. They are built for the one
// platform of the binaries given (read from their ELF headers): they exist
// for the OLM e2e, on this machine's node, and a cross-built opm would cost
// another cold build of it.
const (
	olmUser      = "1001"
	opmPath      = "/bin/opm"
	probePath    = "/bin/grpc_health_probe"
	cpbPath      = "/bin/cpb"
	cpPath       = "/bin/cp"
	cpPackage    = "./hack/image/cp"
	nsswitch     = "hosts: files dns\n"
	pathVariable = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
)

var elfArch = map[elf.Machine]string{elf.EM_X86_64: "amd64", elf.EM_AARCH64: "arm64"}

// binaryPlatform is the platform a static Linux binary runs on. A binary
// that needs a dynamic loader is refused: the images have no C library.
func binaryPlatform(bin string) (platform, error) {
	f, err := elf.Open(bin)
	if err != nil {
		return platform{}, fmt.Errorf("%s: %w (build it with hack/olm.mk)", bin, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return platform{}, fmt.Errorf("%s is dynamically linked; the image has no C library (build it with CGO_ENABLED=0, as hack/olm.mk does)", bin)
		}
	}
	arch, ok := elfArch[f.Machine]
	if !ok || f.OSABI != elf.ELFOSABI_NONE && f.OSABI != elf.ELFOSABI_LINUX {
		return platform{}, fmt.Errorf("%s: ELF machine %s is not one of linux/amd64, linux/arm64", bin, f.Machine)
	}
	return platform{OS: "linux", Arch: arch}, nil
}

// samePlatform is the one platform of bins, or an error naming the odd one.
func samePlatform(bins ...string) (platform, error) {
	var first platform
	for i, b := range bins {
		p, err := binaryPlatform(b)
		if err != nil {
			return platform{}, err
		}
		if i == 0 {
			first = p
		} else if p != first {
			return platform{}, fmt.Errorf("%s is for %s, %s for %s: an image has one platform", bins[0], first, b, p)
		}
	}
	return first, nil
}

// opmLayer is the content of the opm image, and the first layer of every
// catalog image: one blob for both in a registry.
func opmLayer(work string, epoch time.Time, opm, probe string) (v1.Layer, error) {
	return layer(filepath.Join(work, "opm.tar"), epoch,
		entry{name: opmPath, mode: 0o755, src: opm},
		entry{name: probePath, mode: 0o755, src: probe},
		entry{name: "/etc/nsswitch.conf", mode: 0o644, data: []byte(nsswitch)},
		// opm serve writes its cache under /tmp unless told otherwise.
		entry{name: "/tmp", dir: true, mode: 0o1777},
	)
}

func opmConfig(labels map[string]string, cmd ...string) v1.Config {
	return v1.Config{User: olmUser, Entrypoint: []string{opmPath}, Cmd: cmd, Env: []string{pathVariable}, Labels: labels}
}

// singleIndex wraps the one image of p in an index, the shape `image push`
// and the product's images have.
func singleIndex(p platform, img v1.Image) v1.ImageIndex {
	index := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	return mutate.AppendManifests(index, mutate.IndexAddendum{
		Add:        img,
		Descriptor: v1.Descriptor{Platform: ociPlatform(p)},
	})
}

func buildOPMImage(out, ref, opm, probe string) (string, error) {
	p, err := samePlatform(opm, probe)
	if err != nil {
		return "", err
	}
	return oneLayerImage(out, ref, "opm image", p, opmConfig(nil), "COPY opm grpc_health_probe /bin/",
		func(work string, epoch time.Time) (v1.Layer, error) {
			return opmLayer(work, epoch, opm, probe)
		})
}

func buildUtilImage(ctx context.Context, out, ref, cpb string) (string, error) {
	p, err := binaryPlatform(cpb)
	if err != nil {
		return "", err
	}
	return oneLayerImage(out, ref, "util image", p, v1.Config{User: olmUser, Env: []string{pathVariable}}, "COPY cp cpb /bin/",
		func(work string, epoch time.Time) (v1.Layer, error) {
			cp := filepath.Join(work, "cp")
			if err := goBuild(ctx, p, cpPackage, "-s -w", cp); err != nil {
				return nil, err
			}
			return layer(filepath.Join(work, "util.tar"), epoch,
				entry{name: cpPath, mode: 0o755, src: cp},
				entry{name: cpbPath, mode: 0o755, src: cpb},
				entry{name: "/tmp", dir: true, mode: 0o1777},
			)
		})
}

// oneLayerImage writes to out the image of platform p that a Dockerfile of
// FROM scratch and one COPY (named by copied, for the image's history) would
// build: config c and the layer that content makes in a scratch directory
// beside out, stamped with the source's revision and time.
func oneLayerImage(out, ref, what string, p platform, c v1.Config, copied string,
	content func(work string, epoch time.Time) (v1.Layer, error)) (string, error) {
	var src source
	if _, err := src.readRevision(); err != nil {
		return "", err
	}
	work, err := workDirBeside(out)
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(work)
	l, err := content(work, src.epoch)
	if err != nil {
		return "", err
	}
	img, err := configured(p, src.epoch, c)
	if err != nil {
		return "", err
	}
	img, err = mutate.Append(img, mutate.Addendum{Layer: l, History: history(src.epoch, copied)})
	if err != nil {
		return "", err
	}
	return finish(work, out, singleIndex(p, img), ref, src, what)
}

func opmCommand(_ context.Context, args []string) error {
	fs := newFlags("opm")
	out := fs.String("out", "", "the OCI layout directory to write (replaced if it exists)")
	ref := fs.String("ref", "", "the image reference, named in the layout's index.json")
	opm := fs.String("opm", "", "the static opm binary (bin/opm)")
	probe := fs.String("probe", "", "the static grpc_health_probe binary (bin/grpc_health_probe)")
	digestFile := fs.String("digest-file", "", "a file to write the index digest to (optional)")
	_ = fs.Parse(args)
	if *out == "" || *ref == "" || *opm == "" || *probe == "" || fs.NArg() != 0 {
		usage()
	}
	digest, err := buildOPMImage(*out, *ref, *opm, *probe)
	if err != nil {
		return err
	}
	return report(digest, *digestFile)
}

func utilCommand(ctx context.Context, args []string) error {
	fs := newFlags("util")
	out := fs.String("out", "", "the OCI layout directory to write (replaced if it exists)")
	ref := fs.String("ref", "", "the image reference, named in the layout's index.json")
	cpb := fs.String("cpb", "", "the static cpb binary (bin/cpb)")
	digestFile := fs.String("digest-file", "", "a file to write the index digest to (optional)")
	_ = fs.Parse(args)
	if *out == "" || *ref == "" || *cpb == "" || fs.NArg() != 0 {
		usage()
	}
	digest, err := buildUtilImage(ctx, *out, *ref, *cpb)
	if err != nil {
		return err
	}
	return report(digest, *digestFile)
}
