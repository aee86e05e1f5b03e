// Command stackflow-pod-runner runs the pods scheduled to one node of the local stack as processes of this
// machine (see package podrunner). The local stack starts it; it is not meant to be run by hand.
//
//	stackflow-pod-runner -node NAME -dir DIR -log-dir DIR -image-bin DIR -host-ip IP   (KUBECONFIG from the environment)
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/stackflow/stackflow/deploy/local/podrunner"
)

func main() {
	if len(os.Args) == 3 && os.Args[1] == podrunner.ExecSubcommand {
		// A container's first process: make its mounts and become its command.
		err := podrunner.ExecContainer(os.Args[2])
		fmt.Fprintln(os.Stderr, "pod runner:", err)
		os.Exit(127)
	}
	node := flag.String("node", "", "node whose pods to run")
	dir := flag.String("dir", "", "state directory (volumes, process specs, PID files)")
	logDir := flag.String("log-dir", "", "directory of the container logs")
	imageBin := flag.String("image-bin", "", "directory of the host image's console scripts")
	hostIP := flag.String("host-ip", "", "address the pods report (they share this machine's network)")
	flag.Parse()
	if *node == "" || *dir == "" || *logDir == "" || *imageBin == "" || *hostIP == "" {
		flag.Usage()
		os.Exit(2)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	cfg, err := clientcmd.BuildConfigFromFlags("", os.Getenv("KUBECONFIG"))
	if err != nil {
		fail(log, err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		fail(log, err)
	}
	self, err := os.Executable()
	if err != nil {
		fail(log, err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	r := podrunner.New(podrunner.Config{Kube: cs, Node: *node, Dir: *dir, LogDir: *logDir, ImageBin: *imageBin, HostIP: *hostIP, Self: self, Log: log})
	if err := r.Run(ctx); err != nil {
		fail(log, err)
	}
}

func fail(log *slog.Logger, err error) {
	log.Error("pod runner", "err", err)
	os.Exit(1)
}
