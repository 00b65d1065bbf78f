package commands

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/kubefledged/kube-fledged/internal/cli"
	"github.com/kubefledged/kube-fledged/internal/cri"
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

// runCRIRemove removes an image through the node's CRI socket and writes the
// runtime's answer to the termination log, from where the controller copies
// it into the cache's status on failure.
func runCRIRemove(args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("cri-rmi")
	endpoint := fs.String("endpoint", "", "CRI endpoint, unix:///path/to/socket (required)")
	image := fs.String("image", "", "image to remove (required)")
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
	res, err := cri.RemoveImage(ctx, *endpoint, *image)
	msg := res.Message
	if err != nil {
		msg = err.Error()
	}
	fmt.Fprintln(stdout, msg)
	if werr := os.WriteFile(*termLog, []byte(msg), 0o644); werr != nil {
		fmt.Fprintf(stderr, "cannot write the termination log %s: %v\n", *termLog, werr)
	}
	return err
}
