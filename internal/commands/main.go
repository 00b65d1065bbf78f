// Package commands holds the subcommands of the one kubefledged binary: the
// operator, the controller, and the small helpers its Jobs run.
package commands

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/kubefledged/kube-fledged/internal/cli"
)

type command struct {
	summary string
	run     func(args []string, stdout, stderr io.Writer) error
}

var commands = map[string]command{
	"controller": {"run the ImageCache controller and its validating webhook", runController},
	"operator":   {"run the Helm operator that reconciles KubeFledged CRs (watches.yaml)", runOperator},
	"copy-self":  {"pull-Job helper: copy this binary into a shared volume", runCopySelf},
	"exit":       {"pull-Job helper: exit 0 at once (runs inside the image being pulled)", runExit},
	"cri-rmi":    {"delete-Job helper: remove an image through the node's CRI socket", runCRIRemove},
	"pin":        {"pin-Job helper: pin images on the node for a cache (containerd >= 1.7)", runPin},
	"unpin":      {"pin-Job helper: drop a cache's pins of images on the node", runUnpin},
	"version":    {"print the version", runVersion},
	"check":      {"helm test: the controller pods answer their health checks and the webhook refuses an invalid ImageCache", runCheck},
}

// Version is set at build time with -ldflags -X.
var Version = "v0.11.0-dev"

// Revision is the VCS revision, set at build time with -ldflags -X; empty
// means the one Go stamped into the binary, if any (kubefledged_build_info).
var Revision = ""

// Main runs the subcommand named by args[0] and returns the exit code. Errors
// are one line on stderr, naming the flag and what it accepts.
func Main(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "kubefledged: unknown command %q: use one of %s\n", args[0], strings.Join(names(), ", "))
		return 2
	}
	if err := cmd.run(args[1:], stdout, stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "kubefledged %s: %v\n", args[0], err)
		return 1
	}
	return 0
}

func names() []string {
	var out []string
	for n := range commands {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "Usage: kubefledged <command> [flags]")
	fmt.Fprintln(w, "\nCommands:")
	for _, n := range names() {
		fmt.Fprintf(w, "  %-11s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w, "\nRun 'kubefledged <command> --help' for a command's flags.")
}

func runVersion(args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("version")
	if err := parseOrHelp(fs, args, stderr); err != nil {
		return err
	}
	fmt.Fprintln(stdout, Version)
	return nil
}
