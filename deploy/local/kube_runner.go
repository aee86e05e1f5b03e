package local

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/stackflow/stackflow/deploy/local/podrunner"
)

// The pod runner: kwok runs no containers, so the pods scheduled to RunnerNode (a kwok node kwok keeps
// Ready but whose pods it does not play) are run as processes of this machine by stackflow-pod-runner
// (package podrunner), with the pod spec's own commands and mounted files and this machine's Debian
// packages in place of the image.

// sitePackages is where Debian's python3 finds the OpenStack libraries whose console scripts make the
// runner's host image.
const sitePackages = "/usr/lib/python3/dist-packages"

// writeKwokStages copies kwok's stage files into the state directory, adding to every pod stage a
// selector that leaves out the runner node's pods, and returns the copies' paths.
func (s *Stack) writeKwokStages(files []string) ([]string, error) {
	dir := s.Path("kubernetes", "kwok", "stages")
	if err := mkdirs(dir); err != nil {
		return nil, err
	}
	var out []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var u unstructured.Unstructured
		if err := yaml.Unmarshal(b, &u.Object); err != nil {
			return nil, fmt.Errorf("kwok stage %s: %w", f, err)
		}
		if kind, _, _ := unstructured.NestedString(u.Object, "spec", "resourceRef", "kind"); kind == "Pod" {
			exprs, _, _ := unstructured.NestedSlice(u.Object, "spec", "selector", "matchExpressions")
			exprs = append(exprs, map[string]any{"key": ".spec.nodeName", "operator": "NotIn", "values": []any{RunnerNode}})
			if err := unstructured.SetNestedSlice(u.Object, exprs, "spec", "selector", "matchExpressions"); err != nil {
				return nil, err
			}
		}
		out2, err := yaml.Marshal(u.Object)
		if err != nil {
			return nil, err
		}
		p := filepath.Join(dir, u.GetName()+".yaml")
		if err := writeIfChanged(p, out2, 0o644); err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// PodRunnerDir is the runner's state (pod volumes, process specs) under the state directory; the
// containers' logs are in logs/pods.
func (s *Stack) PodRunnerDir() string { return s.Path("pod-runner") }

// PodLogFile is the log of one container run by the pod runner.
func (s *Stack) PodLogFile(namespace, pod, container string) string {
	return s.Path("logs", "pods", fmt.Sprintf("%s_%s_%s.log", namespace, pod, container))
}

// startPodRunner builds the runner from this checkout (when it is not running), writes the host image's
// console scripts and starts the runner for RunnerNode.
func (s *Stack) startPodRunner(ctx context.Context) (bool, error) {
	if _, ok := s.Running(procPodRunner); ok {
		return false, nil
	}
	bin := s.Path("bin", "stackflow-pod-runner")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./deploy/local/cmd/stackflow-pod-runner")
	cmd.Dir = s.RepoRoot
	if out, err := cmd.CombinedOutput(); err != nil {
		return false, fmt.Errorf("build the pod runner: %w\n%s", err, out)
	}
	imageBin := filepath.Join(s.PodRunnerDir(), "image", "bin")
	n, err := podrunner.BuildHostImage(sitePackages, "/usr/bin/python3", imageBin, "/usr/bin", "/usr/sbin", "/bin", "/sbin")
	if err != nil {
		return false, fmt.Errorf("pod runner image: %w", err)
	}
	started, err := s.Start(Proc{Name: procPodRunner,
		Argv: []string{bin, "-node", RunnerNode, "-dir", s.PodRunnerDir(), "-log-dir", s.Path("logs", "pods"),
			"-image-bin", imageBin, "-host-ip", HostGateway},
		Env: []string{"KUBECONFIG=" + s.Kubeconfig},
	})
	if err != nil {
		return false, err
	}
	if started {
		s.Logf("kubernetes: started the pod runner for node %s (%d console scripts in its host image)", RunnerNode, n)
		// It lists pods at once; a second is enough for a failed start (bad kubeconfig) to show.
		time.Sleep(time.Second)
		if _, ok := s.Running(procPodRunner); !ok {
			return false, fmt.Errorf("pod runner exited:\n%s", s.LogTail(procPodRunner, 20))
		}
	}
	return started, nil
}
