package commands

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/kubefledged/kube-fledged/internal/cli"
	"github.com/kubefledged/kube-fledged/internal/cri"
	"github.com/kubefledged/kube-fledged/internal/jobs"
	"github.com/kubefledged/kube-fledged/internal/pin"
	"github.com/kubefledged/kube-fledged/internal/pin/containerdpin"
)

// runCopySelf copies this binary to --to, so that the image being pulled can
// run it: the image itself may hold no binary at all.
func runCopySelf(args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("copy-self")
	to := fs.String("to", "", "where to write the copy (required)")
	if err := parseOrHelp(fs, args, stderr); err != nil {
		return err
	}
	if *to == "" {
		return fmt.Errorf("--to is required: the path to copy this binary to")
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	in, err := os.Open(self)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(*to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o555)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// runExit is the whole work of a pull Job's main container: by the time it
// runs, the kubelet has pulled the image.
func runExit(args []string, stdout, _ io.Writer) error {
	fmt.Fprintln(stdout, "image present on this node")
	return nil
}

// runCRIRemove removes an image through the node's CRI socket, unless a
// container there uses it or it is pinned (cri.RemoveImage), and writes the
// runtime's answer to the termination log, from where the controller copies
// it into the cache's status: failures, or kept. With --unpin-owner it first drops
// that cache's pin: removing the image takes its labels with it, but a
// refused removal (the image in use) would otherwise leave it pinned for a
// cache that no longer wants it.
func runCRIRemove(args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("cri-rmi")
	endpoint := fs.String("endpoint", "", "CRI endpoint, unix:///path/to/socket (required)")
	image := fs.String("image", "", "image to remove (required)")
	unpinOwner := fs.String("unpin-owner", "", "the UID of a cache whose pin of the image to drop first")
	termLog := fs.String("termination-log", "/dev/termination-log", "file the result is written to")
	timeout := &cli.Duration{Value: 2 * time.Minute, Min: time.Second}
	fs.Var(timeout, "timeout", "how long to wait for the runtime")
	if err := parseOrHelp(fs, args, stderr); err != nil {
		return err
	}
	if *endpoint == "" || *image == "" {
		return fmt.Errorf("--endpoint and --image are required")
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout.Value)
	defer cancel()
	unpinned := ""
	if *unpinOwner != "" {
		unpinned = unpinNote(containerdpin.Unpin(ctx, *endpoint, *unpinOwner, []string{*image}), *image)
	}
	res, err := cri.RemoveImage(ctx, *endpoint, *image)
	msg := res.Message
	if err != nil {
		msg = err.Error()
		if unpinned != "" {
			msg += "; " + unpinned
		}
	}
	fmt.Fprintln(stdout, msg)
	if res.Kept != "" {
		// Read back into the cache's status.kept (results.Deleted).
		msg = jobs.KeptReport(res.Kept, res.Message)
	}
	writeTermLog(*termLog, msg, stderr)
	return err
}

// unpinNote says what went wrong with an unpin before a removal, or "" when
// nothing did. A runtime that cannot pin has nothing to unpin.
func unpinNote(r pin.Report, image string) string {
	if f, ok := r.Failed[image]; ok {
		return "the image's pin could not be dropped: " + f
	}
	return ""
}

func writeTermLog(path, msg string, stderr io.Writer) {
	if err := os.WriteFile(path, []byte(msg), 0o644); err != nil {
		fmt.Fprintf(stderr, "cannot write the termination log %s: %v\n", path, err)
	}
}

// runPin and runUnpin pin or unpin images for one cache through containerd's
// images API on the node's runtime socket, and write a pin.Report as one JSON
// line to the termination log, from where the controller reads which images
// are done.
func runPin(args []string, stdout, stderr io.Writer) error {
	return runPinHelper("pin", containerdpin.Pin, args, stdout, stderr)
}

func runUnpin(args []string, stdout, stderr io.Writer) error {
	return runPinHelper("unpin", containerdpin.Unpin, args, stdout, stderr)
}

type pinFunc func(ctx context.Context, endpoint, owner string, images []string) pin.Report

func runPinHelper(name string, do pinFunc, args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet(name)
	endpoint := fs.String("endpoint", "", "runtime endpoint, unix:///path/to/containerd.sock (required)")
	owner := fs.String("owner", "", "the UID of the cache the pins belong to (required)")
	var images cli.Strings
	fs.Var(&images, "image", "an image to "+name+" (required; repeat for more)")
	termLog := fs.String("termination-log", "/dev/termination-log", "file the report is written to")
	timeout := &cli.Duration{Value: 2 * time.Minute, Min: time.Second}
	fs.Var(timeout, "timeout", "how long to wait for the runtime")
	if err := parseOrHelp(fs, args, stderr); err != nil {
		return err
	}
	if *endpoint == "" || *owner == "" || len(images) == 0 {
		return fmt.Errorf("--endpoint, --owner and at least one --image are required")
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout.Value)
	defer cancel()
	report := do(ctx, *endpoint, *owner, images)
	line := report.Encode()
	fmt.Fprintln(stdout, line)
	writeTermLog(*termLog, line, stderr)
	return reportError(report, len(images))
}

// reportError is the helper's exit status: an error unless every image is
// done or absent.
func reportError(r pin.Report, n int) error {
	switch {
	case r.Unsupported != "":
		return errors.New(r.Unsupported)
	case len(r.Failed) > 0 || r.Dropped > 0:
		return fmt.Errorf("%d of %d images failed (the report lists them)", len(r.Failed)+r.Dropped, n)
	}
	return nil
}
