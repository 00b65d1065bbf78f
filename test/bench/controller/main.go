// Command controller is the kubefledged binary with a pprof listener added,
// so that the benchmark can profile the controller in a process of its own:
// in-process, the profile and the RSS would mix the controller with the
// benchmark's watches and proxy. The product has no pprof flag, and the
// benchmark must not change the product to measure it.
package main

import (
	"fmt"
	"net/http"
	_ "net/http/pprof"
	"os"

	"github.com/kubefledged/kube-fledged/internal/commands"
)

// pprofEnv names the address of the pprof listener; unset, none is opened
// and the binary behaves exactly as kubefledged.
const pprofEnv = "KUBEFLEDGED_PPROF_ADDR"

func main() {
	if addr := os.Getenv(pprofEnv); addr != "" {
		go func() {
			if err := http.ListenAndServe(addr, nil); err != nil {
				fmt.Fprintf(os.Stderr, "pprof listener on %s: %v\n", addr, err)
			}
		}()
	}
	os.Exit(commands.Main(os.Args[1:], os.Stdout, os.Stderr))
}
