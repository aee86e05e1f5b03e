// Command stackflow-local brings stackflow's local real stack up, reports it and tears it down.
//
//	stackflow-local up [-components kubernetes,temporal,openstack,hosts] [-hosts N]
//	stackflow-local status
//	stackflow-local env      # shell exports: KUBECONFIG, OS_CLIENT_CONFIG_FILE, OS_CLOUD, Temporal's address, TLS, API key and
//	                         # codec for stackflow and the temporal CLI, tctl's TEMPORAL_CLI_*, and PATH with .stackflow/bin
//	stackflow-local stop NAME…  # stop single processes of the stack (names as in `status`); `up` restarts them
//	stackflow-local samples [-timeout 30m]  # apply deploy/samples, show their state live until all are Ready
//	stackflow-local samples -present        # list the objects of deploy/samples (and day2) that exist; exit 3 when none
//	stackflow-local samples -delete         # delete them all at once and wait until their workflows tore them down
//	stackflow-local release -serve [-namespace NS] [-serve-namespaces A,B]  # run stackflow as pods of the stack's release (make run)
//	stackflow-local release -stop                   # scale the stack's release back to no pods
//	stackflow-local down
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"golang.org/x/term"
	"k8s.io/client-go/dynamic"

	"github.com/stackflow/stackflow/bridge"
	"github.com/stackflow/stackflow/deploy/describe"
	"github.com/stackflow/stackflow/deploy/local"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	components := fs.String("components", strings.Join(local.AllComponents, ","), "components to bring up")
	hosts := fs.Int("hosts", 0, "number of EDPM test hosts (default 2 or $STACKFLOW_HOSTS)")
	state := fs.String("state", "", "state directory (default $STACKFLOW_STATE or .stackflow in the checkout)")
	timeout := fs.Duration("timeout", 30*time.Minute, "samples: how long to wait for every sample to be Ready (or gone, with -delete)")
	present := fs.Bool("present", false, "samples: list the samples that exist on the stack; exit 3 when none does")
	del := fs.Bool("delete", false, "samples: delete every sample (deploy/samples and day2) and wait until each is torn down")
	serve := fs.Bool("serve", false, "release: run the bridge and the workers as pods of the stack's release, from this checkout's images")
	stopRelease := fs.Bool("stop", false, "release: scale the stack's release back to no pods")
	namespace := fs.String("namespace", "", "release -serve: the Temporal namespace (default the stack's)")
	serveNamespaces := fs.String("serve-namespaces", "", "release -serve: comma-separated Kubernetes namespaces whose objects the bridge serves (default every namespace)")
	_ = fs.Parse(os.Args[2:])
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	opts := local.Options{StateDir: *state, HostCount: *hosts, Components: strings.Split(*components, ",")}

	switch os.Args[1] {
	case "up":
		s, err := local.Up(ctx, opts)
		if err != nil {
			fail(err)
		}
		s.Status(os.Stdout)
	case "down":
		if err := local.Down(ctx, opts); err != nil {
			fail(err)
		}
		fmt.Println("stack stopped")
	case "status":
		s, err := local.Load(*state)
		if err != nil {
			fail(err)
		}
		s.Status(os.Stdout)
	case "stop":
		s, err := local.Load(*state)
		if err != nil {
			fail(err)
		}
		for _, name := range fs.Args() {
			if err := s.Stop(name, 15*time.Second); err != nil {
				fail(err)
			}
			fmt.Println("stopped", name)
		}
	case "env":
		s, err := local.Load(*state)
		if err != nil {
			fail(err)
		}
		fmt.Printf("export KUBECONFIG=%s\nexport OS_CLIENT_CONFIG_FILE=%s\nexport OS_CLOUD=%s\n", s.Kubeconfig, s.CloudsYAML, s.CloudName)
		// Temporal through its TLS front with the payload codec, for stackflow's commands and the temporal
		// CLI alike (same variable names).
		for _, kv := range s.TemporalEnv(s.TemporalNamespace) {
			if k, v, _ := strings.Cut(kv, "="); v != "" {
				fmt.Printf("export %s=%s\n", k, v)
			}
		}
		if s.TemporalTLS != nil {
			key, err := os.ReadFile(s.TemporalTLS.APIKeyFile)
			if err != nil {
				fail(err)
			}
			fmt.Printf("export TEMPORAL_API_KEY=%s\nexport TEMPORAL_CODEC_ENDPOINT=%s\n", strings.TrimSpace(string(key)), s.CodecEndpoint)
			// tctl reads its own variables (TEMPORAL_CLI_*).
			tctl, err := s.TctlEnv(s.TemporalNamespace)
			if err != nil {
				fail(err)
			}
			for _, kv := range tctl {
				k, v, _ := strings.Cut(kv, "=")
				fmt.Printf("export %s=%q\n", k, v)
			}
		}
		// kubectl, temporal, tctl and kubectl-stackflow of the pinned versions, first on the PATH.
		fmt.Printf("export PATH=%q:\"$PATH\"\n", s.Path("bin"))
	case "release":
		s, err := local.Load(*state)
		if err != nil {
			fail(err)
		}
		switch {
		case *serve:
			var only []string
			if *serveNamespaces != "" {
				only = strings.Split(*serveNamespaces, ",")
			}
			err = s.ServeRelease(ctx, *namespace, only...)
		case *stopRelease:
			err = s.StopRelease(ctx)
		default:
			usage()
		}
		if err != nil {
			fail(err)
		}
	case "samples":
		var err error
		switch {
		case *present:
			var n int
			if n, err = presentSamples(ctx, *state); err == nil && n == 0 {
				os.Exit(3)
			}
		case *del:
			err = deleteSamples(ctx, *state, *timeout)
		default:
			err = samples(ctx, *state, *timeout)
		}
		if err != nil {
			fail(err)
		}
	default:
		usage()
	}
}

// samples applies deploy/samples and shows their state until every one is Ready.
func samples(ctx context.Context, state string, timeout time.Duration) error {
	s, dyn, err := sampleClient(state)
	if err != nil {
		return err
	}
	objs, err := s.ApplySamples(ctx)
	if err != nil {
		return err
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if !term.IsTerminal(int(os.Stdout.Fd())) {
		// A log (CI, a test): each change appended as a table.
		if _, err := local.WaitSamples(ctx, dyn, objs, bridge.IsServed, os.Stdout, 2*time.Second); err != nil {
			return err
		}
		fmt.Printf("\nall %d samples Ready in %s\n", len(objs), time.Since(start).Round(time.Second))
		printServerHost(ctx, dyn)
		return nil
	}
	// A terminal: the cloud's tree (kubectl stackflow describe -A) redrawn in place until every sample is
	// Ready, then once more as it ended.
	view := func(ctx context.Context) (string, error) {
		roots, err := describe.Read(ctx, dyn, describe.Scope{All: true}, time.Now())
		if err != nil {
			return "", err
		}
		var b strings.Builder
		err = describe.Render(&b, roots, describe.RenderOptions{})
		return b.String(), err
	}
	wctx, stopWatch := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = describe.Watch(wctx, os.Stdout, 2*time.Second, view) }()
	_, err = local.WaitSamples(ctx, dyn, objs, bridge.IsServed, nil, 2*time.Second)
	stopWatch()
	<-done
	if s, verr := view(context.Background()); verr == nil {
		fmt.Printf("\x1b[H\x1b[2J%s", s)
	}
	if err != nil {
		return err
	}
	fmt.Printf("\nall %d samples Ready in %s (kubectl stackflow describe -A shows this tree again)\n", len(objs), time.Since(start).Round(time.Second))
	printServerHost(ctx, dyn)
	return nil
}

// printServerHost says where the sample server runs: on a compute the samples deployed, in the region
// of the Nova they deployed.
func printServerHost(ctx context.Context, dyn dynamic.Interface) {
	hv, err := local.ServerHypervisor(ctx, dyn, local.SampleNamespace, local.SampleServerName)
	if err != nil {
		fmt.Printf("%s: where it runs is unknown: %v\n", local.SampleServerName, err)
		return
	}
	fmt.Printf("%s runs on hypervisor %s of the cloud the samples deployed (cloud %s of Secret %s/%s, region %s)\n",
		local.SampleServerName, hv, local.SampleCloud, local.SampleNamespace, local.SampleCloudsSecret, local.SampleRegion)
}

// sampleClient is the stack and a dynamic client of its API server.
func sampleClient(state string) (*local.Stack, dynamic.Interface, error) {
	s, err := local.Load(state)
	if err != nil {
		return nil, nil, err
	}
	cfg, err := s.KubeREST()
	if err != nil {
		return nil, nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	return s, dyn, err
}

// presentSamples prints and counts the samples that exist on the stack.
func presentSamples(ctx context.Context, state string) (int, error) {
	s, dyn, err := sampleClient(state)
	if err != nil {
		return 0, err
	}
	objs, err := s.AllSampleObjects(ctx)
	if err != nil {
		return 0, err
	}
	found, err := local.PresentSamples(ctx, dyn, objs)
	for _, o := range found {
		fmt.Printf("%s %s/%s\n", o.Kind, o.Namespace, o.Name)
	}
	return len(found), err
}

// deleteSamples deletes every sample that exists and waits until their workflows tore them down.
func deleteSamples(ctx context.Context, state string, timeout time.Duration) error {
	s, dyn, err := sampleClient(state)
	if err != nil {
		return err
	}
	objs, err := s.AllSampleObjects(ctx)
	if err != nil {
		return err
	}
	found, err := local.PresentSamples(ctx, dyn, objs)
	if err != nil || len(found) == 0 {
		return err
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := local.DeleteSamples(ctx, dyn, found, os.Stdout, 2*time.Second); err != nil {
		return err
	}
	fmt.Printf("\nall %d samples deleted and torn down in %s\n", len(found), time.Since(start).Round(time.Second))
	return nil
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: stackflow-local up|down|status|env|stop|samples|release [flags] [names]")
	os.Exit(2)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "stackflow-local:", err)
	os.Exit(1)
}
