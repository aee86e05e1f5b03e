// Command simansible is a benchmark-only worker for the Ansible task queue: its RunPlaybook sleeps, per
// host and step, a duration drawn from per-step times measured on real runs (given by -durations), and
// reports success. It lets BenchmarkEDPMScale drive hundreds of data-plane nodes through the real bridge,
// workflows, Temporal and API server without hundreds of hosts. With -openstack it also serves the
// OpenStack task queue's compute activities from an in-memory Nova (simnova.go): computes register
// when their nova-compute playbook ran, report the version class the update playbook installed, and
// hold no instances; BenchmarkEDPMUpdateScale updates hundreds of such computes. Never part of a
// deployment.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"hash/fnv"
	"log"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/stackflow/stackflow/activities/ansible"
	"github.com/stackflow/stackflow/api/lifecycle"
	"github.com/stackflow/stackflow/api/temporalconn"
)

func main() {
	var conn temporalconn.Options
	conn.AddFlags(flag.CommandLine, "127.0.0.1:7233", "default")
	durations := flag.String("durations", "", "measured seconds per step: step=seconds,… (required)")
	spread := flag.Float64("spread", 0.2, "each host's duration of a step is the measured one times 1±spread, fixed per host and step")
	metrics := flag.String("metrics-address", "127.0.0.1:9466", "address of /healthz")
	identity := flag.String("identity", "simansible", "worker identity")
	withNova := flag.Bool("openstack", false, "also serve the OpenStack queue's compute activities from an in-memory Nova")
	flag.String("stop-timeout", "", "accepted for the benchmark's launcher; unused")
	flag.Parse()
	steps, err := parseDurations(*durations)
	if err != nil {
		log.Fatalf("-durations: %v", err)
	}
	opts, err := conn.ClientOptions()
	if err != nil {
		log.Fatal(err)
	}
	opts.Identity = *identity
	c, err := client.Dial(opts)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	nova := newSimNova()
	sim := &simulator{steps: steps, spread: *spread, nova: nova}
	// As many pollers as the real worker has on each queue (worker.Config's default): with the SDK's two,
	// 200 playbooks started at once queued 22 s here for want of polls, which no real worker would show.
	wopts := worker.Options{MaxConcurrentActivityExecutionSize: 10000, MaxConcurrentActivityTaskPollers: 8}
	w := worker.New(c, lifecycle.AnsibleQueue, wopts)
	w.RegisterActivityWithOptions(sim.RunPlaybook, activity.RegisterOptions{Name: "RunPlaybook"})
	if err := w.Start(); err != nil {
		log.Fatal(err)
	}
	defer w.Stop()
	if *withNova {
		ow := worker.New(c, lifecycle.OpenStackQueue, wopts)
		nova.register(ow)
		if err := ow.Start(); err != nil {
			log.Fatal(err)
		}
		defer ow.Stop()
	}
	http.HandleFunc("/healthz", func(rw http.ResponseWriter, _ *http.Request) { _, _ = rw.Write([]byte("ok")) })
	go func() { log.Fatal(http.ListenAndServe(*metrics, nil)) }()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	<-ctx.Done()
}

// parseDurations reads "step=seconds,…".
func parseDurations(s string) (map[string]time.Duration, error) {
	out := map[string]time.Duration{}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok {
			return nil, fmt.Errorf("%q is not step=seconds", kv)
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f < 0 {
			return nil, fmt.Errorf("%q: seconds must be a number ≥ 0", kv)
		}
		out[k] = time.Duration(f * float64(time.Second))
	}
	if len(out) == 0 {
		return nil, errors.New("no step")
	}
	return out, nil
}

type simulator struct {
	steps  map[string]time.Duration
	spread float64
	nova   *simNova
}

// duration is the step's measured time times 1±spread, the same for a host and step every time.
func (s *simulator) duration(host, step string) time.Duration {
	h := fnv.New32a()
	_, _ = h.Write([]byte(host + "/" + step))
	u := float64(h.Sum32()) / float64(^uint32(0))
	return time.Duration(float64(s.steps[step]) * (1 - s.spread + 2*s.spread*u))
}

// RunPlaybook stands in for ansible.Ansible.RunPlaybook: it heartbeats like it and succeeds after the
// step's simulated time. A step with no measured time is refused: the benchmark would measure nothing.
func (s *simulator) RunPlaybook(ctx context.Context, in ansible.PlaybookInput) (*ansible.PlaybookResult, error) {
	if _, ok := s.steps[in.Step]; !ok {
		return nil, fmt.Errorf("simansible: no measured time for step %q", in.Step)
	}
	d := s.duration(in.Host, in.Step)
	start := time.Now()
	t := time.NewTimer(d)
	defer t.Stop()
	tick := time.NewTicker(5 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-tick.C:
			activity.RecordHeartbeat(ctx, ansible.PlaybookProgress{Host: in.Host, Step: in.Step, Seconds: time.Since(start).Seconds()})
		case <-t.C:
			s.nova.played(in)
			return &ansible.PlaybookResult{Host: in.Host, Step: in.Step, Ok: 5, Changed: 2, Attempt: activity.GetInfo(ctx).Attempt,
				Seconds: time.Since(start).Seconds(), Finished: time.Now()}, nil
		}
	}
}
