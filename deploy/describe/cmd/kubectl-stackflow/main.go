// Command kubectl-stackflow is a kubectl plugin (`kubectl stackflow …` once it is on the PATH):
//
//	kubectl stackflow describe [KIND/NAME] [-n NAMESPACE | -A] [--show-workflows] [--watch] [-o text|json]
//
// describe prints every stackflow object of a cloud as one tree, in the order things depend on each
// other, each line with Ready, phase, age and the current step or the reason it is not Ready, and what
// fails marked ✗ with its message in full (see package describe). It reads only the API server. --watch
// redraws the tree in place whenever it changes (Ctrl-C ends it).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/stackflow/stackflow/deploy/describe"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "kubectl stackflow:", err)
		os.Exit(1)
	}
}

const usage = `usage: kubectl stackflow describe [KIND/NAME] [-n NAMESPACE | -A] [--show-workflows] [--watch] [-o text|json]`

func run(args []string, out io.Writer) error {
	if len(args) == 0 || args[0] != "describe" {
		return errors.New(usage)
	}
	fs := flag.NewFlagSet("describe", flag.ContinueOnError)
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
	namespace := fs.String("n", "", "namespace (default: the kubeconfig context's)")
	fs.StringVar(namespace, "namespace", "", "namespace (default: the kubeconfig context's)")
	all := fs.Bool("A", false, "every namespace")
	fs.BoolVar(all, "all", false, "every namespace")
	fs.BoolVar(all, "all-namespaces", false, "every namespace")
	workflows := fs.Bool("show-workflows", false, "show each object's workflow ID and Temporal UI link")
	watch := fs.Bool("watch", false, "redraw the tree in place whenever it changes")
	output := fs.String("o", "text", "output: text or json")
	// Flags may follow the object, as kubectl's do.
	var rest []string
	argv := args[1:]
	for len(argv) > 0 {
		if err := fs.Parse(argv); err != nil {
			return err
		}
		if fs.NArg() == 0 {
			break
		}
		rest = append(rest, fs.Arg(0))
		argv = fs.Args()[1:]
	}
	if len(rest) > 1 {
		return errors.New(usage)
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = *kubeconfig
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{})
	cfg, err := cc.ClientConfig()
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	if *namespace == "" {
		if *namespace, _, err = cc.Namespace(); err != nil {
			return err
		}
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	scope := describe.Scope{Namespace: *namespace, All: *all}
	if len(rest) == 1 {
		scope.Object = rest[0]
	}
	print := func(ctx context.Context) (string, error) {
		roots, err := describe.Read(ctx, dyn, scope, time.Now())
		if err != nil {
			return "", err
		}
		var b strings.Builder
		switch *output {
		case "json":
			enc := json.NewEncoder(&b)
			enc.SetIndent("", "  ")
			err = enc.Encode(roots)
		case "text":
			err = describe.Render(&b, roots, describe.RenderOptions{Workflows: *workflows})
		default:
			err = fmt.Errorf("-o %s: text or json", *output)
		}
		return b.String(), err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if !*watch {
		s, err := print(ctx)
		if err != nil {
			return err
		}
		_, err = io.WriteString(out, s)
		return err
	}
	return describe.Watch(ctx, out, 2*time.Second, print)
}
