package local

import (
	"context"
	"fmt"
	"os/exec"
	"time"
)

const (
	procKubeProxy = "kube-proxy"
	// kubeProxyHealthzPort and kubeProxyMetricsPort are kube-proxy's own endpoints, on loopback.
	kubeProxyHealthzPort = 10256
	kubeProxyMetricsPort = 10249
)

// upKubeProxy starts kube-proxy (iptables mode) for the real node, so a Service's ClusterIP reaches its
// pods from this machine, from the test hosts (routed through it) and from the pods: what a workflow
// registers in a catalog is a Service's stable address, not a pod's, which changes when the pod is
// replaced.
func (s *Stack) upKubeProxy(ctx context.Context, bin string) (bool, error) {
	if err := writeIfChanged(s.nodeDir("kube-proxy.yaml"), []byte(s.kubeProxyConfig()), 0o644); err != nil {
		return false, err
	}
	started, err := s.Start(Proc{Name: procKubeProxy, Argv: []string{bin, "--config", s.nodeDir("kube-proxy.yaml"), "--v", "1"}})
	if err != nil {
		return false, err
	}
	if started {
		s.Logf("kubernetes: started kube-proxy (iptables, Services %s)", ServiceClusterIPRange)
	}
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	return started, s.WaitFor(wctx, "kube-proxy synced", procKubeProxy, 300*time.Millisecond, func(ctx context.Context) error {
		_, err := httpGet(ctx, fmt.Sprintf("http://127.0.0.1:%d/healthz", kubeProxyHealthzPort), "")
		return err
	})
}

// kubeProxyConfig is kube-proxy's configuration. masqueradeAll: a pod calling a Service whose endpoint
// is a pod on the same bridge gets its reply through this machine (no br_netfilter here). The conntrack
// settings keep kube-proxy from writing the machine's conntrack sysctls, which are not the stack's.
func (s *Stack) kubeProxyConfig() string {
	return fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: %q
hostnameOverride: %s
mode: iptables
clusterCIDR: %s
healthzBindAddress: 127.0.0.1:%d
metricsBindAddress: 127.0.0.1:%d
iptables:
  masqueradeAll: true
  localhostNodePorts: false
  minSyncPeriod: 1s
  syncPeriod: 30s
conntrack:
  maxPerCore: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
`, s.Kubeconfig, RealNode, RealNodePodCIDR, kubeProxyHealthzPort, kubeProxyMetricsPort)
}

// downKubeProxy stops kube-proxy and removes the iptables rules it wrote, so a stopped stack leaves the
// machine's firewall as it found it.
func (s *Stack) downKubeProxy(ctx context.Context) error {
	if err := s.Stop(procKubeProxy, 10*time.Second); err != nil {
		return err
	}
	bin, err := s.Tool(procKubeProxy, "KUBERNETES_VERSION")
	if err != nil {
		return nil // never built, so never ran
	}
	if out, err := exec.CommandContext(ctx, bin, "--cleanup").CombinedOutput(); err != nil {
		return fmt.Errorf("kube-proxy --cleanup: %w: %s", err, out)
	}
	return nil
}
