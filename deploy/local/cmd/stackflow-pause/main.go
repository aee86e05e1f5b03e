// Command stackflow-pause is the sandbox ("pause") image of the local stack's real node: it holds a pod's
// namespaces and does nothing else until SIGTERM or SIGINT. It exists because the node has no registry to
// pull Kubernetes' own pause image from; containerd's sandbox_image names it.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGTERM, syscall.SIGINT)
	// As PID 1 of the sandbox it also reaps orphans: children re-parented to it are waited for.
	signal.Notify(c, syscall.SIGCHLD)
	for s := range c {
		if s == syscall.SIGCHLD {
			for {
				var ws syscall.WaitStatus
				if pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil); pid <= 0 || err != nil {
					break
				}
			}
			continue
		}
		return
	}
}
