package commands

import (
	"errors"
	"flag"
	"io"

	"github.com/kubefledged/kube-fledged/internal/cli"
)

// parseOrHelp parses strictly; --help prints the flags and returns ErrHelp.
func parseOrHelp(fs *flag.FlagSet, args []string, stderr io.Writer) error {
	err := cli.Parse(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		cli.Usage(fs, stderr)
	}
	return err
}
