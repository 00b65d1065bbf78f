package commands

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/kubefledged/kube-fledged/internal/cli"
)

// logged parses a command line's logging flags and returns what a debug and
// an info line come out as.
func logged(t *testing.T, withV bool, args ...string) string {
	t.Helper()
	l := newLogging()
	fs := cli.NewFlagSet("test")
	l.BindFlags(fs)
	if withV {
		l.bindVerbosity(fs)
	}
	if err := cli.Parse(fs, args); err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	l.parsed(fs)
	var buf bytes.Buffer
	log := zap.New(l.options(&buf)...)
	log.V(1).Info("debug line")
	log.Info("info line")
	return buf.String()
}

func isJSONLines(s string) bool {
	for _, line := range strings.Split(strings.TrimSpace(s), "\n") {
		if !json.Valid([]byte(line)) {
			return false
		}
	}
	return s != ""
}

// A debug level is more lines in the same format: JSON unless
// --zap-encoder (or --zap-devel) asks otherwise. Our own flags used to
// switch to the development console encoder with debug.
func TestLogLevelDoesNotSwitchTheFormat(t *testing.T) {
	g := NewWithT(t)
	out := logged(t, false)
	g.Expect(isJSONLines(out)).To(BeTrue(), out)
	g.Expect(out).NotTo(ContainSubstring("debug line"))

	for _, args := range [][]string{{"--zap-log-level=debug"}, {"--zap-log-level=DEBUG"}} {
		out = logged(t, false, args...)
		g.Expect(isJSONLines(out)).To(BeTrue(), "%v: %s", args, out)
		g.Expect(out).To(ContainSubstring("debug line"), "%v", args)
	}

	out = logged(t, false, "--zap-log-level=debug", "--zap-encoder=console")
	g.Expect(isJSONLines(out)).To(BeFalse(), out)
	g.Expect(out).To(ContainSubstring("debug line"))

	out = logged(t, false, "--zap-log-level=error")
	g.Expect(out).To(BeEmpty())
}

// The original's -v 4 still means debug, and an explicit level wins.
func TestVerbosityMapsToDebug(t *testing.T) {
	g := NewWithT(t)
	g.Expect(logged(t, true, "-v", "4")).To(ContainSubstring("debug line"))
	g.Expect(logged(t, true, "-v", "3")).NotTo(ContainSubstring("debug line"))
	g.Expect(logged(t, true, "-v", "4", "--zap-log-level=info")).NotTo(ContainSubstring("debug line"))
	g.Expect(isJSONLines(logged(t, true, "-v", "4"))).To(BeTrue())
}

// Both commands take controller-runtime's whole zap set.
func TestCommandsTakeZapFlags(t *testing.T) {
	g := NewWithT(t)
	o, err := controllerOptions([]string{"--enable-webhook=false", "--zap-encoder=console", "--zap-stacktrace-level=panic", "--zap-time-encoding=iso8601", "--zap-devel=false", "--zap-log-level=2"}, &bytes.Buffer{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(o.Logging.Zap.Development).To(BeFalse())
	_, err = controllerOptions([]string{"--enable-webhook=false", "--zap-log-level=loud"}, &bytes.Buffer{})
	g.Expect(err).To(MatchError(ContainSubstring("zap-log-level")))
}
