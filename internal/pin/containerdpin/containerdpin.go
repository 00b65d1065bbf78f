// Package containerdpin pins and unpins images on a node through containerd's
// own images API, on the socket that also serves CRI. CRI has no call to pin
// an image: containerd's CRI plugin derives Image.pinned from a label on its
// image records, so we set that label where the CRI plugin reads it.
//
// One CRI image is several containerd records: its tag references, its
// repository digests and its id (sha256:<config digest>), and the CRI plugin
// reports the image pinned when any of them carries the label. So a pin labels
// every record, and an unpin must clear every one, or the image stays pinned
// through a record nobody looks at. Which records make up the image is asked
// of the CRI plugin itself (ImageStatus), which resolves a reference exactly
// as the kubelet's requests are resolved.
package containerdpin

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	imagesapi "github.com/containerd/containerd/api/services/images/v1"
	versionapi "github.com/containerd/containerd/api/services/version/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/fieldmaskpb"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubefledged/kube-fledged/internal/pin"
)

// Namespace is the containerd namespace the CRI plugin keeps its images in.
const Namespace = "k8s.io"

// namespaceKey is the gRPC metadata key containerd reads the namespace from.
const namespaceKey = "containerd-namespace"

// rounds bounds how often one record is read, planned and written until the
// plan is empty: another helper (another cache) may change the same record
// between our read and our write, and the next round sees and fixes that.
const rounds = 4

// Pin pins each image for owner (a cache's UID) on the runtime at endpoint.
func Pin(ctx context.Context, endpoint, owner string, images []string) pin.Report {
	return apply(ctx, endpoint, owner, images, true)
}

// Unpin drops owner's pin of each image, and the runtime's pin with the last
// owner when we set it.
func Unpin(ctx context.Context, endpoint, owner string, images []string) pin.Report {
	return apply(ctx, endpoint, owner, images, false)
}

type client struct {
	cri     runtimeapi.ImageServiceClient
	images  imagesapi.ImagesClient
	version versionapi.VersionClient
}

func apply(ctx context.Context, endpoint, owner string, images []string, pinIt bool) pin.Report {
	if owner == "" {
		return failAll(images, "no owner given")
	}
	if !strings.HasPrefix(endpoint, "unix://") {
		return failAll(images, fmt.Sprintf("endpoint %q: only unix:// sockets are supported", endpoint))
	}
	conn, err := grpc.NewClient(endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return failAll(images, fmt.Sprintf("connecting to the runtime at %s: %v", endpoint, err))
	}
	defer conn.Close()
	c := client{
		cri:     runtimeapi.NewImageServiceClient(conn),
		images:  imagesapi.NewImagesClient(conn),
		version: versionapi.NewVersionClient(conn),
	}
	ctx = metadata.AppendToOutgoingContext(ctx, namespaceKey, Namespace)
	var r pin.Report
	if r.Unsupported, err = c.unsupported(ctx, pinIt); err != nil {
		return failAll(images, err.Error())
	}
	if r.Unsupported != "" {
		return r
	}
	for _, img := range images {
		absent, err := c.image(ctx, img, owner, pinIt)
		switch {
		case err != nil:
			if r.Failed == nil {
				r.Failed = map[string]string{}
			}
			r.Failed[img] = err.Error()
		case absent:
			r.Absent = append(r.Absent, img)
		}
	}
	return r
}

func failAll(images []string, msg string) pin.Report {
	r := pin.Report{Failed: map[string]string{}}
	for _, img := range images {
		r.Failed[img] = msg
	}
	return r
}

// unsupported says why this runtime cannot pin, or "" when it can. A runtime
// without containerd's API (CRI-O, cri-dockerd) cannot; neither can a
// containerd before 1.7, whose CRI plugin ignores the label: a pin there would
// look done and protect nothing. An unpin goes ahead on any containerd, since
// removing labels is harmless wherever they are.
func (c client) unsupported(ctx context.Context, pinIt bool) (string, error) {
	v, err := c.version.Version(ctx, &emptypb.Empty{})
	if status.Code(err) == codes.Unimplemented {
		return fmt.Sprintf("the runtime serves no containerd API on this socket (%v): only containerd 1.7 or newer can pin", status.Convert(err).Message()), nil
	}
	if err != nil {
		return "", fmt.Errorf("asking the runtime its containerd version: %w", err)
	}
	if pinIt && !atLeast17(v.GetVersion()) {
		return fmt.Sprintf("containerd %s does not report pinned images to the kubelet: pinning needs containerd 1.7 or newer", v.GetVersion()), nil
	}
	return "", nil
}

// atLeast17 reads containerd's version ("v1.7.32", "1.6.20~ds1",
// "2.1.0+unknown"). A version it cannot read is taken as new enough: a fork
// with its own numbering is more likely recent than not, and refusing it
// would leave no way to pin there.
func atLeast17(v string) bool {
	parts := strings.SplitN(strings.TrimPrefix(v, "v"), ".", 3)
	if len(parts) < 2 {
		return true
	}
	major, err1 := strconv.Atoi(parts[0])
	minor, err2 := strconv.Atoi(strings.TrimRightFunc(parts[1], func(r rune) bool { return r < '0' || r > '9' }))
	if err1 != nil || err2 != nil {
		return true
	}
	return major > 1 || (major == 1 && minor >= 7)
}

// image pins or unpins every containerd record of one CRI image. absent is
// true when the runtime does not have the image.
func (c client) image(ctx context.Context, ref, owner string, pinIt bool) (absent bool, err error) {
	st, err := c.cri.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
	if err != nil {
		return false, fmt.Errorf("image status: %w", err)
	}
	img := st.GetImage()
	if img == nil {
		return true, nil
	}
	found := 0
	for _, name := range records(img) {
		ok, err := c.record(ctx, name, owner, pinIt)
		if err != nil {
			return false, fmt.Errorf("image record %s: %w", name, err)
		}
		if ok {
			found++
		}
	}
	return found == 0, nil
}

// records lists the names of the containerd records that make up img: the
// CRI plugin builds RepoTags and RepoDigests from them, and keeps one more
// under the image's id.
func records(img *runtimeapi.Image) []string {
	seen := map[string]bool{}
	var out []string
	for _, n := range append(append([]string{img.GetId()}, img.GetRepoTags()...), img.GetRepoDigests()...) {
		if n != "" && !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	return out
}

// record brings one record's labels to what pin.Plan wants, touching only
// the labels it names (a field mask per label): the CRI plugin's own labels
// and anybody else's stay as they are. found is false when the record is gone.
func (c client) record(ctx context.Context, name, owner string, pinIt bool) (found bool, err error) {
	for range rounds {
		got, err := c.images.Get(ctx, &imagesapi.GetImageRequest{Name: name})
		if status.Code(err) == codes.NotFound {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		set, remove := pin.Plan(got.GetImage().GetLabels(), owner, pinIt)
		if len(set) == 0 && len(remove) == 0 {
			return true, nil
		}
		paths := make([]string, 0, len(set)+len(remove))
		for k := range set {
			paths = append(paths, "labels."+k)
		}
		for _, k := range remove {
			paths = append(paths, "labels."+k)
		}
		// The target is not in the mask, so containerd keeps its own; but containerd 1.7
		// reads the request's target before it looks at the mask, and a nil one crashes it.
		_, err = c.images.Update(ctx, &imagesapi.UpdateImageRequest{
			Image:      &imagesapi.Image{Name: name, Labels: set, Target: got.GetImage().GetTarget()},
			UpdateMask: &fieldmaskpb.FieldMask{Paths: paths},
		})
		if status.Code(err) == codes.NotFound {
			return false, nil
		}
		if err != nil {
			return false, err
		}
	}
	return true, fmt.Errorf("its labels kept changing under us for %d rounds", rounds)
}
