// Command benchreport renders docs/benchmarks.md from docs/benchmarks.json (and refreshes the
// targets in the JSON), as `make bench` does at the end of a run: use it after editing
// test/bench/limits.md or a target, without a run of an hour.
//
//	go run ./hack/benchreport [-root dir]
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/kubefledged/kube-fledged/hack/benchreport/report"
)

func main() {
	root := flag.String("root", ".", "the repository root")
	flag.Parse()
	if err := report.Render(*root); err != nil {
		fmt.Fprintln(os.Stderr, "benchreport:", err)
		os.Exit(1)
	}
}
