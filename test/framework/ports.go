package framework

import (
	"net"
	"strconv"
	"testing"

	"github.com/kubefledged/kube-fledged/test/sandbox"
)

// FreePort is a loopback port for a server the test starts in-process (webhook, probes,
// metrics); not finding one fails the test rather than letting a later bind fail obscurely.
func FreePort(t testing.TB) int {
	t.Helper()
	port, err := sandbox.FreePort()
	if err != nil {
		t.Fatalf("no free loopback port: %v", err)
	}
	return port
}

// FreeAddr is FreePort in the host:port form the bind-address flags take.
func FreeAddr(t testing.TB) string {
	t.Helper()
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(FreePort(t)))
}
