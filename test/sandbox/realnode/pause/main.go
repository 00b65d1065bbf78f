// Command pause is the real node's pod sandbox image (containerd's sandbox_image): it holds
// a pod's namespaces by doing nothing. The tests build it statically and push it to the
// node's local registry, since registry.k8s.io/pause cannot be fetched without internet.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range sigs {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		// As PID 1 of a pod sharing its process namespace, it reaps orphans.
		for {
			pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
