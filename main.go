// Command kubefledged is the one binary of kube-fledged: the operator, the
// ImageCache controller and webhook, and the helpers its Jobs run.
package main

import (
	"os"

	"github.com/kubefledged/kube-fledged/internal/commands"
)

func main() {
	os.Exit(commands.Main(os.Args[1:], os.Stdout, os.Stderr))
}
