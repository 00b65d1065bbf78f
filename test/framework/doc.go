// Package framework is what the suites under test/ (and internal/webhook/e2e) share to drive
// kube-fledged against the sandbox: our CRDs installed, the controller run in-process, a
// namespace per test, an ImageCache's operations triggered and waited for, the metrics
// endpoint read. A helper two suites need lives here, once; what only one suite needs stays
// in it.
//
// The two leaf packages below it have no Kubernetes dependency, so that the sandbox itself
// can use them: repo finds the repository's files and builds its binaries, proc starts
// child processes that die with the test binary.
package framework
