package local

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Kubernetes control-plane endpoints, all on loopback. etcd uses non-default ports so that it never
// collides with an etcd someone runs for another purpose on the same machine.
const (
	EtcdClientPort        = 12379
	EtcdPeerPort          = 12380
	KubeAPIPort           = 6443
	ControllerManagerPort = 10257
	SchedulerPort         = 10259
	KwokPort              = 10247
	// ServiceClusterIPRange is where Services take their ClusterIPs; kube-proxy (iptables) on this machine
	// routes them to the real node's pods.
	ServiceClusterIPRange = "10.96.0.0/16"
	// KwokPodCIDR is where kwok takes the (status-only) Pod IPs of pods on its nodes.
	KwokPodCIDR = "10.244.0.0/16"
)

// Names of the control-plane processes, as Stack.Start knows them.
const (
	procEtcd       = "etcd"
	procAPIServer  = "kube-apiserver"
	procController = "kube-controller-manager"
	procScheduler  = "kube-scheduler"
	procKwok       = "kwok"
)

// kwokStages are the Stage objects kwok plays: nodes become Ready and keep heartbeating, pods become
// Ready, Job pods complete, deleted pods go away. Paths are relative to the kwok share directory.
var kwokStages = []string{
	"stage/node/fast/node-initialize.yaml",
	"stage/node/heartbeat/node-heartbeat.yaml",
	"stage/pod/fast/pod-ready.yaml",
	"stage/pod/fast/pod-complete.yaml",
	"stage/pod/fast/pod-delete.yaml",
}

// upKubernetes starts etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok and the real
// node (containerd and a kubelet), writes the admin kubeconfig, creates the kwok nodes and applies the
// project's CRDs and admission policies.
func (s *Stack) upKubernetes(ctx context.Context) error {
	start := time.Now()
	bins := map[string]string{}
	for _, t := range []struct{ name, key string }{
		{"etcd", "ETCD_VERSION"},
		{procAPIServer, "KUBERNETES_VERSION"},
		{procController, "KUBERNETES_VERSION"},
		{procScheduler, "KUBERNETES_VERSION"},
		{"kubectl", "KUBERNETES_VERSION"},
		{procKubelet, "KUBERNETES_VERSION"},
		{procKubeProxy, "KUBERNETES_VERSION"},
		{procKwok, "KWOK_VERSION"},
	} {
		p, err := s.Tool(t.name, t.key)
		if err != nil {
			return err
		}
		bins[t.name] = p
	}
	if err := mkdirs(s.Path("kubernetes", "etcd"), s.Path("kubernetes", "pki"), s.Path("kubernetes", "kwok"), s.Path("bin")); err != nil {
		return err
	}
	if err := s.linkKubectl(bins["kubectl"]); err != nil {
		return err
	}
	// kubectl finds its plugins on the PATH: `kubectl stackflow describe` once make build built it.
	if plugin := filepath.Join(s.RepoRoot, "bin", "kubectl-stackflow"); fileExists(plugin) {
		if err := symlink(plugin, s.Path("bin", "kubectl-stackflow")); err != nil {
			return err
		}
	}
	creds, err := s.ensureKubeCredentials()
	if err != nil {
		return err
	}
	// On the hosts' gateway, not loopback: the kubernetes Service's endpoint is this address, so pods on
	// the real node (stackflow's own among them) reach the API server through in-cluster config.
	s.KubeAPI = fmt.Sprintf("https://%s:%d", HostGateway, KubeAPIPort)
	if err := s.retireLoopbackAPICert(); err != nil {
		return err
	}

	// cold is true when any part of the control plane had to be started by this call.
	cold := false
	started, err := s.startEtcd(ctx, bins["etcd"])
	if err != nil {
		return err
	}
	cold = cold || started
	started, err = s.startAPIServer(ctx, bins[procAPIServer], creds)
	if err != nil {
		return err
	}
	cold = cold || started
	if err := s.writeKubeconfig(creds.token); err != nil {
		return err
	}
	s.Logf("kubernetes: API server ready at %s (%s)", s.KubeAPI, time.Since(start).Round(100*time.Millisecond))

	started, err = s.startControllers(ctx, bins[procController], bins[procScheduler], creds)
	if err != nil {
		return err
	}
	cold = cold || started
	cs, err := s.KubeClient()
	if err != nil {
		return err
	}
	if err := ensureNamespace(ctx, cs, SystemNamespace); err != nil {
		return err
	}
	started, err = s.startKwok(ctx, bins[procKwok])
	if err != nil {
		return err
	}
	cold = cold || started
	if err := s.ensureKwokNodes(ctx, cs, bins[procKwok]); err != nil {
		return err
	}
	started, err = s.upRealNode(ctx, bins[procKubelet], creds.nodeToken)
	if err != nil {
		return err
	}
	cold = cold || started
	started, err = s.upKubeProxy(ctx, bins[procKubeProxy])
	if err != nil {
		return err
	}
	cold = cold || started
	var manifests []string
	for _, dir := range []string{"crds", "admission"} {
		if d := filepath.Join(s.RepoRoot, "deploy", dir); isDir(d) {
			manifests = append(manifests, d)
		}
	}
	if len(manifests) > 0 {
		if err := s.ApplyManifests(ctx, manifests...); err != nil {
			return err
		}
	}
	if err := s.upChartRepo(ctx); err != nil {
		return fmt.Errorf("chart repository: %w", err)
	}
	if err := s.installChart(ctx); err != nil {
		return err
	}
	kind := "warm"
	if cold {
		kind = "cold"
	}
	s.Logf("kubernetes: ready in %s (%s start), %d kwok nodes and the real node %s, KUBECONFIG=%s",
		time.Since(start).Round(100*time.Millisecond), kind, len(kwokNodes), RealNode, s.Kubeconfig)
	return nil
}

// Kubectl returns the path of the cached kubectl matching the API server's version.
func (s *Stack) Kubectl() (string, error) { return s.Tool("kubectl", "KUBERNETES_VERSION") }

// linkKubectl points <state>/bin/kubectl at the cached kubectl, so people can put that directory on PATH.
func (s *Stack) linkKubectl(target string) error {
	link := s.Path("bin", "kubectl")
	if cur, err := os.Readlink(link); err == nil && cur == target {
		return nil
	}
	_ = os.Remove(link)
	if err := os.Symlink(target, link); err != nil {
		return fmt.Errorf("link kubectl %s: %w", link, err)
	}
	return nil
}

func (s *Stack) startEtcd(ctx context.Context, bin string) (bool, error) {
	client := fmt.Sprintf("http://127.0.0.1:%d", EtcdClientPort)
	peer := fmt.Sprintf("http://127.0.0.1:%d", EtcdPeerPort)
	// On an existing data directory etcd ignores the initial-cluster flags and resumes its data.
	started, err := s.Start(Proc{Name: procEtcd, Argv: []string{bin,
		"--name", "stackflow",
		"--data-dir", s.Path("kubernetes", "etcd"),
		"--listen-client-urls", client,
		"--advertise-client-urls", client,
		"--listen-peer-urls", peer,
		"--initial-advertise-peer-urls", peer,
		"--initial-cluster", "stackflow=" + peer,
		"--log-level", "warn",
	}})
	if err != nil {
		return false, err
	}
	if started {
		s.Logf("kubernetes: started etcd on %s", client)
	}
	wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	return started, s.WaitFor(wctx, "etcd healthy", procEtcd, 200*time.Millisecond, func(ctx context.Context) error {
		body, err := httpGet(ctx, client+"/health", "")
		if err != nil {
			return err
		}
		if !strings.Contains(body, `"health":"true"`) {
			return fmt.Errorf("etcd health: %s", body)
		}
		return nil
	})
}

func (s *Stack) startAPIServer(ctx context.Context, bin string, creds kubeCredentials) (bool, error) {
	started, err := s.Start(Proc{Name: procAPIServer, Argv: []string{bin,
		"--etcd-servers", fmt.Sprintf("http://127.0.0.1:%d", EtcdClientPort),
		// Bound to (and so advertising) the gateway: the kubernetes Service points pods here.
		"--bind-address", HostGateway,
		"--secure-port", fmt.Sprint(KubeAPIPort),
		// The API server writes a self-signed serving certificate here once, valid for the advertised
		// address, the kubernetes Service's ClusterIP and kubernetes.default.svc.
		"--cert-dir", s.Path("kubernetes", "pki", "apiserver"),
		"--service-account-key-file", creds.saPublic,
		"--service-account-signing-key-file", creds.saPrivate,
		"--service-account-issuer", "https://kubernetes.default.svc.cluster.local",
		// Node + NodeRestriction confine the real node's kubelet to its own Node and pods.
		"--authorization-mode", "Node,RBAC",
		"--enable-admission-plugins", "NodeRestriction",
		"--token-auth-file", creds.tokenFile,
		// The API server reaches kubelets (logs, exec) at their InternalIP with a client certificate.
		"--kubelet-client-certificate", s.kubeletClientCert(),
		"--kubelet-client-key", s.kubeletClientKey(),
		"--kubelet-preferred-address-types", "InternalIP",
		"--service-cluster-ip-range", ServiceClusterIPRange,
		"--allow-privileged=true",
		"--profiling=false",
	}})
	if err != nil {
		return false, err
	}
	if started {
		s.Logf("kubernetes: started kube-apiserver on %s", s.KubeAPI)
	}
	wctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	url := s.KubeAPI + "/readyz"
	return started, s.WaitFor(wctx, "kube-apiserver ready", procAPIServer, 300*time.Millisecond, func(ctx context.Context) error {
		body, err := httpGet(ctx, url, creds.token)
		if err != nil {
			return err
		}
		if strings.TrimSpace(body) != "ok" {
			return fmt.Errorf("readyz: %s", body)
		}
		return nil
	})
}

// startControllers starts the controller manager and the scheduler (which make Deployments, ReplicaSets,
// Jobs and scheduling behave as in any cluster) and waits for their health endpoints.
func (s *Stack) startControllers(ctx context.Context, kcm, scheduler string, creds kubeCredentials) (bool, error) {
	kc := s.Kubeconfig
	procs := []struct {
		proc Proc
		port int
	}{
		{Proc{Name: procController, Argv: []string{kcm,
			"--kubeconfig", kc,
			"--authentication-kubeconfig", kc,
			"--authorization-kubeconfig", kc,
			// Client certificates are not used; the API server publishes no client CA to look up.
			"--authentication-skip-lookup",
			// Pods get projected tokens from the API server; legacy token Secrets are not wanted.
			"--controllers", "*,-serviceaccount-token",
			"--leader-elect=false",
			"--bind-address", "127.0.0.1",
			"--secure-port", fmt.Sprint(ControllerManagerPort),
			"--use-service-account-credentials=false",
			"--service-account-private-key-file", creds.saPrivate,
			"--cert-dir", s.Path("kubernetes", "pki", "controller-manager"),
			"--profiling=false",
		}}, ControllerManagerPort},
		{Proc{Name: procScheduler, Argv: []string{scheduler,
			"--kubeconfig", kc,
			"--authentication-kubeconfig", kc,
			"--authorization-kubeconfig", kc,
			// Client certificates are not used; the API server publishes no client CA to look up.
			"--authentication-skip-lookup",
			"--leader-elect=false",
			"--bind-address", "127.0.0.1",
			"--secure-port", fmt.Sprint(SchedulerPort),
			"--cert-dir", s.Path("kubernetes", "pki", "scheduler"),
			"--profiling=false",
		}}, SchedulerPort},
	}
	startedAny := false
	for _, p := range procs {
		started, err := s.Start(p.proc)
		if err != nil {
			return startedAny, err
		}
		if started {
			startedAny = true
			s.Logf("kubernetes: started %s", p.proc.Name)
		}
	}
	for _, p := range procs {
		wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		url := fmt.Sprintf("https://127.0.0.1:%d/healthz", p.port)
		err := s.WaitFor(wctx, p.proc.Name+" healthy", p.proc.Name, 300*time.Millisecond, func(ctx context.Context) error {
			body, err := httpGet(ctx, url, "")
			if err != nil {
				return err
			}
			if strings.TrimSpace(body) != "ok" {
				return fmt.Errorf("healthz: %s", body)
			}
			return nil
		})
		cancel()
		if err != nil {
			return startedAny, err
		}
	}
	return startedAny, nil
}

// startKwok installs kwok's Stage API and the stages it plays, then starts kwok for the nodes annotated
// kwok.x-k8s.io/node=fake. Stages live in the cluster (not in a config file), so tests can add a chaos
// stage at run time.
func (s *Stack) startKwok(ctx context.Context, bin string) (bool, error) {
	share := filepath.Join(s.CacheDir, "share", "kwok-"+Versions["KWOK_VERSION"])
	paths := []string{filepath.Join(share, "crd", "kwok.x-k8s.io_stages.yaml")}
	for _, p := range kwokStages {
		paths = append(paths, filepath.Join(share, p))
	}
	for _, p := range paths {
		if _, err := os.Stat(p); err != nil {
			return false, fmt.Errorf("kwok stage files missing (run deploy/local/tools/build.sh kwok): %w", err)
		}
	}
	if err := s.ApplyManifests(ctx, paths...); err != nil {
		return false, fmt.Errorf("apply kwok stages: %w", err)
	}
	started, err := s.Start(Proc{Name: procKwok,
		Argv: []string{bin,
			"--kubeconfig", s.Kubeconfig,
			"--manage-all-nodes=false",
			"--manage-nodes-with-annotation-selector", kwokNodeAnnotation + "=fake",
			"--enable-crds", "Stage",
			"--server-address", fmt.Sprintf("127.0.0.1:%d", KwokPort),
			"--node-lease-duration-seconds", "40",
			"--cidr", KwokPodCIDR,
		},
		// kwok also reads ~/.kwok/kwok.yaml; its own HOME keeps a user's file from changing the stack.
		Env: []string{"HOME=" + s.Path("kubernetes", "kwok")},
	})
	if err != nil {
		return false, err
	}
	if started {
		s.Logf("kubernetes: started kwok")
	}
	return started, nil
}

// httpGet fetches a loopback URL (optionally with a bearer token) and returns the body; any status but
// 200 is an error. Certificates are not verified: the endpoints are the stack's own, on loopback, and
// this only probes readiness.
func httpGet(ctx context.Context, url, token string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := probeClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s: %s", url, resp.Status, strings.TrimSpace(string(b)))
	}
	return string(b), nil
}

var probeClient = &http.Client{
	Timeout:   5 * time.Second,
	Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}},
}

func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}
