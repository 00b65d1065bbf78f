// Package heldledgertest reads a ledger's wake-ups for the tests of both
// its writer (the ImageCache reconciler) and the ledger itself.
package heldledgertest

import "github.com/kubefledged/kube-fledged/internal/heldledger"

// Woken are the nodes the ledger woke since the last call, in order. It
// does not wait: a wake-up is sent before the write that causes it returns.
func Woken(l *heldledger.Ledger) []string {
	var out []string
	for {
		select {
		case e := <-l.Settled():
			out = append(out, e.Object.GetName())
		default:
			return out
		}
	}
}
