package bench

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/flavors"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servers"
	"github.com/gophercloud/gophercloud/v2/openstack/image/v2/images"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/networks"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/ports"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/stackflow/stackflow/deploy/local"
	"github.com/stackflow/stackflow/tests/e2e"
	serverstest "github.com/stackflow/stackflow/tests/servers"
)

// benchServers is how many servers both sides create at once.
const benchServers = 20

// The benchmark's servers boot on a Nova that stackflow deploys for it, in the region and on the test
// host tests/servers uses (benchmarks run one package at a time, never beside make test), its compute
// API on a port of its own.
var benchRegion = local.ServersRegions[0]

const (
	benchComputeHost = "edpm-compute-2"
	benchNovaAPIPort = 19274
)

// benchZone pins both sides' servers to the benchmark's one compute host (an admin-only zone:host form),
// so that neither side's builds are scheduled elsewhere.
var benchZone = "nova:" + benchComputeHost

// BenchmarkTwentyServers creates 20 OpenStackServers at once through stackflow (bridge, workflows,
// worker) and the same 20 servers with a plain gophercloud program (resolve, port, server, wait for
// ACTIVE, all concurrent, polling as often as the worker does), and prints the wall-time ratio. The goal
// is a ratio of at most 1.2; nothing is asserted on timing.
//
// Neither side may profit from the other: both are warmed first (one server each, untimed: Nova's image
// cache, Keystone's tokens, the worker's clients), then each iteration runs them in both orders, plain
// then stackflow and stackflow then plain, and reports each order's ratio and their mean.
func BenchmarkTwentyServers(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Minute)
	defer cancel()
	env, err := serverstest.Setup(ctx, "stackflow-bench-servers", "bsv", local.Hosts)
	if err != nil {
		b.Fatal(err)
	}
	defer env.Close()
	defer env.CloseNova()
	if err := env.DeployNova(ctx, e2e.NovaOptions{Region: benchRegion, APIPort: benchNovaAPIPort}, benchComputeHost); err != nil {
		b.Fatal(err)
	}
	if err := env.UnlimitCompute(ctx); err != nil {
		b.Fatal(err)
	}
	// Both stop before the deferred Close deletes the run's namespace.
	worker := env.StartWorker(b)
	defer worker.Stop()
	bridge := env.StartBridge(b)
	defer bridge.Stop()

	plain := func(prefix string, n int) (time.Duration, error) { return plainGophercloud(ctx, env, prefix, n) }
	flow := func(prefix string, n int) (time.Duration, error) { return viaStackflow(ctx, env, prefix, n) }
	if _, err := plain("warm-plain-"+env.Run, 1); err != nil {
		b.Fatal(err)
	}
	if _, err := flow("warm-sf-"+env.Run, 1); err != nil {
		b.Fatalf("%v\n--- worker log ---\n%s", err, worker.Tail(40))
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var ratios []float64
		for _, order := range []string{"plain first", "stackflow first"} {
			var p, f time.Duration
			var perr, ferr error
			if order == "plain first" {
				p, perr = plain(fmt.Sprintf("plain%da-%s", i, env.Run), benchServers)
				f, ferr = flow(fmt.Sprintf("sf%da-%s", i, env.Run), benchServers)
			} else {
				f, ferr = flow(fmt.Sprintf("sf%db-%s", i, env.Run), benchServers)
				p, perr = plain(fmt.Sprintf("plain%db-%s", i, env.Run), benchServers)
			}
			if perr != nil {
				b.Fatal(perr)
			}
			if ferr != nil {
				b.Fatalf("%v\n--- worker log ---\n%s", ferr, worker.Tail(40))
			}
			ratio := f.Seconds() / p.Seconds()
			ratios = append(ratios, ratio)
			fmt.Fprintf(os.Stdout, "servers: %d at once, %s: stackflow %s, plain gophercloud %s, ratio %.2f\n",
				benchServers, order, f.Round(time.Millisecond), p.Round(time.Millisecond), ratio)
		}
		mean := (ratios[0] + ratios[1]) / 2
		fmt.Fprintf(os.Stdout, "servers: ratio stackflow/plain, mean of both orders %.2f (goal ≤ 1.2)\n", mean)
		b.ReportMetric(ratios[0], "ratio-plain-first")
		b.ReportMetric(ratios[1], "ratio-stackflow-first")
		b.ReportMetric(mean, "ratio")
	}
}

// viaStackflow creates n servers as OpenStackServers and returns the time until all are Ready; then
// it deletes them (not timed).
func viaStackflow(ctx context.Context, env *serverstest.Env, prefix string, n int) (time.Duration, error) {
	var names []string
	for i := 0; i < n; i++ {
		names = append(names, fmt.Sprintf("%s-%d", prefix, i))
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		if err := env.DeleteAndWait(dctx, serverstest.ServersGVR, names...); err != nil {
			env.ForceDelete(serverstest.ServersGVR, names...)
		}
	}()
	start := time.Now()
	for _, n := range names {
		spec := env.ServerSpec(env.Flavor(), 1)
		spec["availabilityZone"] = benchZone
		u := env.Object("infrastructure.cluster.x-k8s.io/v1alpha1", "OpenStackServer", n, spec)
		if _, err := env.Create(ctx, serverstest.ServersGVR, u); err != nil {
			return 0, err
		}
	}
	for _, n := range names {
		if _, err := env.WaitFor(ctx, serverstest.ServersGVR, n, func(u *unstructured.Unstructured) error {
			if r, _ := u.Object["status"].(map[string]any); r != nil && r["ready"] == true {
				return nil
			}
			return fmt.Errorf("not ready")
		}); err != nil {
			return 0, err
		}
	}
	return time.Since(start), nil
}

// plainGophercloud does what the workflow does for each of n servers, directly: resolve flavor, image and
// network, create a port, boot the server, poll until ACTIVE; all servers at once. It deletes them after
// (not timed).
func plainGophercloud(ctx context.Context, env *serverstest.Env, prefix string, n int) (time.Duration, error) {
	image, err := openstack.NewImageV2(env.Provider, env.Endpoint)
	if err != nil {
		return 0, err
	}
	var mu sync.Mutex
	var created []string
	var createdPorts []string
	defer func() {
		for _, id := range created {
			_ = servers.Delete(context.Background(), env.Compute, id).ExtractErr()
		}
		for _, id := range created {
			for i := 0; i < 120; i++ {
				if _, err := servers.Get(context.Background(), env.Compute, id).Extract(); err != nil {
					break
				}
				time.Sleep(500 * time.Millisecond)
			}
		}
		for _, id := range createdPorts {
			_ = ports.Delete(context.Background(), env.Network, id).ExtractErr()
		}
	}()
	start := time.Now()
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			errs <- func() error {
				name := fmt.Sprintf("%s-%d", prefix, i)
				fpages, err := flavors.ListDetail(env.Compute, flavors.ListOpts{}).AllPages(ctx)
				if err != nil {
					return err
				}
				fl, _ := flavors.ExtractFlavors(fpages)
				var flavorID string
				for _, f := range fl {
					if f.Name == env.Flavor() {
						flavorID = f.ID
					}
				}
				ipages, err := images.List(image, images.ListOpts{Name: env.Stack.OpenStack.Image}).AllPages(ctx)
				if err != nil {
					return err
				}
				imgs, _ := images.ExtractImages(ipages)
				npages, err := networks.List(env.Network, networks.ListOpts{Name: env.Stack.OpenStack.TenantNetwork}).AllPages(ctx)
				if err != nil {
					return err
				}
				nets, _ := networks.ExtractNetworks(npages)
				if flavorID == "" || len(imgs) != 1 || len(nets) != 1 {
					return fmt.Errorf("resolve: flavor %q, %d images, %d networks", flavorID, len(imgs), len(nets))
				}
				port, err := ports.Create(ctx, env.Network, ports.CreateOpts{NetworkID: nets[0].ID, Name: name + "-0"}).Extract()
				if err != nil {
					return err
				}
				mu.Lock()
				createdPorts = append(createdPorts, port.ID)
				mu.Unlock()
				s, err := servers.Create(ctx, env.Compute, servers.CreateOpts{Name: name, FlavorRef: flavorID, ImageRef: imgs[0].ID, AvailabilityZone: benchZone,
					Networks: []servers.Network{{Port: port.ID}}, Tags: []string{"bench-" + env.Run}}, nil).Extract()
				if err != nil {
					return err
				}
				mu.Lock()
				created = append(created, s.ID)
				mu.Unlock()
				for {
					cur, err := servers.Get(ctx, env.Compute, s.ID).Extract()
					if err != nil {
						return err
					}
					switch cur.Status {
					case "ACTIVE":
						return nil
					case "ERROR":
						return fmt.Errorf("server %s: ERROR: %s", name, cur.Fault.Message)
					}
					time.Sleep(time.Second)
				}
			}()
		}(i)
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(errs)
	for err := range errs {
		if err != nil {
			return 0, err
		}
	}
	return elapsed, nil
}
