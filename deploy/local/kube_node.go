package local

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	cri "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// The real node: a kubelet built from the pinned Kubernetes source with containerd, runc and the CNI
// plugins from Debian's packages, joined to the local cluster as RealNode. Its pods are real containers
// (probes, limits, restarts, `kubectl logs` and `kubectl exec`). Images come from OCI layouts imported
// into containerd (ImportImage): there is no registry. The node carries RealNodeTaint, so only pods that
// tolerate it land there; kwok's nodes stay where fake capacity is the point.
const (
	// RealNode is the real node's name.
	RealNode = "node-0"
	// RealNodeLabel (value "true") marks the real node, and is the key of its NoSchedule taint.
	RealNodeLabel = "stackflow.io/real-node"
	// RealNodePodCIDR is the real node's pod network, a CNI bridge (RealNodeBridge) on this machine.
	RealNodePodCIDR = "10.245.0.0/24"
	RealNodeBridge  = "sfcni0"
	// ImageRepository prefixes the names of the images the stack imports; with a domain part the kubelet
	// and containerd use the name as it is (a bare NAME:TAG would become docker.io/library/NAME:TAG).
	ImageRepository = "stackflow.local"
	// KubeletPort is the kubelet's API (logs, exec), served on HostGateway to the API server only.
	KubeletPort        = 10250
	kubeletHealthzPort = 10248
	pauseImageName     = "stackflow-pause"

	procContainerd = "containerd"
	procKubelet    = "kubelet"
)

// RealNodeTaint keeps pods that do not ask for the real node away from it.
var RealNodeTaint = corev1.Taint{Key: RealNodeLabel, Value: "true", Effect: corev1.TaintEffectNoSchedule}

// ImageRef is the name under which the stack imports an image of this checkout (tag dev).
func ImageRef(name string) string { return ImageRepository + "/" + name + ":dev" }

// ContainerdSocket is the real node's containerd (CRI) socket.
func (s *Stack) ContainerdSocket() string { return s.Path("containerd", "containerd.sock") }

func (s *Stack) nodeDir(parts ...string) string { return s.Path(append([]string{"node"}, parts...)...) }

// upRealNode starts containerd and the kubelet (when they are not running), imports the pause image and
// waits until the node is Ready.
func (s *Stack) upRealNode(ctx context.Context, kubelet string, nodeToken string) (bool, error) {
	for _, b := range []string{"containerd", "runc", "ctr", "/usr/lib/cni/bridge", "/usr/lib/cni/host-local"} {
		if _, err := exec.LookPath(b); err != nil {
			return false, fmt.Errorf("real node: %s missing (make packages installs containerd, runc and containernetworking-plugins): %w", b, err)
		}
	}
	if err := mkdirs(s.Path("containerd", "root"), s.Path("containerd", "state"), s.nodeDir("cni", "net.d"),
		s.nodeDir("cni", "ipam"), s.nodeDir("kubelet"), s.nodeDir("pki")); err != nil {
		return false, err
	}
	if err := writeIfChanged(s.nodeDir("containerd.toml"), []byte(s.containerdConfig()), 0o644); err != nil {
		return false, err
	}
	if err := writeIfChanged(s.nodeDir("cni", "net.d", "10-stackflow.conflist"), []byte(s.cniConfig()), 0o644); err != nil {
		return false, err
	}
	started, err := s.Start(Proc{Name: procContainerd, Argv: []string{"containerd", "--config", s.nodeDir("containerd.toml")}})
	if err != nil {
		return false, err
	}
	if started {
		s.Logf("kubernetes: started containerd (%s)", s.ContainerdSocket())
	}
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := s.WaitFor(wctx, "containerd serving", procContainerd, 200*time.Millisecond, func(ctx context.Context) error {
		return exec.CommandContext(ctx, "ctr", "-a", s.ContainerdSocket(), "version").Run()
	}); err != nil {
		return started, err
	}
	if err := s.importPauseImage(ctx); err != nil {
		return started, err
	}
	if err := s.importCheckoutImages(ctx); err != nil {
		return started, err
	}
	if err := s.writeKubeletFiles(nodeToken); err != nil {
		return started, err
	}
	k, err := s.Start(Proc{Name: procKubelet, Argv: []string{kubelet,
		"--config", s.nodeDir("kubelet.yaml"),
		"--kubeconfig", s.nodeDir("kubelet.kubeconfig"),
		"--root-dir", s.nodeDir("kubelet"),
		"--cert-dir", s.nodeDir("pki"),
		"--hostname-override", RealNode,
		"--node-ip", HostGateway,
		"--node-labels", RealNodeLabel + "=true",
		"--v", "1",
	}})
	if err != nil {
		return started, err
	}
	if k {
		s.Logf("kubernetes: started the kubelet of %s (containerd, runc, CNI bridge %s on %s)", RealNode, RealNodeBridge, RealNodePodCIDR)
	}
	started = started || k
	cs, err := s.KubeClient()
	if err != nil {
		return started, err
	}
	wctx2, cancel2 := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel2()
	return started, s.WaitFor(wctx2, "node "+RealNode+" Ready", procKubelet, 500*time.Millisecond, func(ctx context.Context) error {
		n, err := cs.CoreV1().Nodes().Get(ctx, RealNode, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !NodeReady(n) {
			return fmt.Errorf("node %s not Ready", RealNode)
		}
		return nil
	})
}

// containerdConfig is containerd's configuration: its own root, state and sockets, the CRI plugin with
// runc (cgroupfs, as the kubelet), the stack's pause image and CNI. restrict_oom_score_adj because this
// machine refuses to lower a process's oom_score_adj (every sandbox fails to start without it).
func (s *Stack) containerdConfig() string {
	sock := s.ContainerdSocket()
	return fmt.Sprintf(`# Written by the local stack.
version = 2
root = %q
state = %q
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.internal.v1.opt", "io.containerd.tracing.processor.v1.otlp"]

[grpc]
  address = %q

[ttrpc]
  address = %q

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %q
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    default_runtime_name = "runc"
    snapshotter = "overlayfs"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = %q
`, s.Path("containerd", "root"), s.Path("containerd", "state"), sock, sock+".ttrpc", ImageRef(pauseImageName), s.nodeDir("cni", "net.d"))
}

// cniConfig is the pod network: a bridge whose gateway routes to this machine, so pods reach the stack's
// services on HostGateway and the test hosts.
func (s *Stack) cniConfig() string {
	return fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": "stackflow",
  "plugins": [
    {
      "type": "bridge",
      "bridge": %q,
      "isGateway": true,
      "hairpinMode": true,
      "ipam": {"type": "host-local", "ranges": [[{"subnet": %q}]], "routes": [{"dst": "0.0.0.0/0"}], "dataDir": %q}
    }
  ]
}
`, RealNodeBridge, RealNodePodCIDR, s.nodeDir("cni", "ipam"))
}

// importPauseImage builds the pause image (once) and imports it into containerd.
func (s *Stack) importPauseImage(ctx context.Context) error {
	layout := s.nodeDir("images", pauseImageName)
	if !fileExists(filepath.Join(layout, "index.json")) {
		cmd := exec.CommandContext(ctx, "go", "run", "-trimpath", ".", "-repo", s.RepoRoot, "-out", s.nodeDir("images"), pauseImageName)
		cmd.Dir = filepath.Join(s.RepoRoot, "deploy", "images")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("build the pause image: %w\n%s", err, out)
		}
	}
	return s.ImportImage(ctx, layout, pauseImageName)
}

// CheckoutImages is where make images writes this checkout's image layouts.
func (s *Stack) CheckoutImages() string { return filepath.Join(s.RepoRoot, "bin", "images") }

// importCheckoutImages imports the images make images built (when it did) whose digest containerd does
// not hold under their name yet, so `make images && make up` puts this checkout's images on the node.
func (s *Stack) importCheckoutImages(ctx context.Context) error {
	dirs, _ := filepath.Glob(filepath.Join(s.CheckoutImages(), "*", "index.json"))
	if len(dirs) == 0 {
		return nil
	}
	out, err := exec.CommandContext(ctx, "ctr", "-a", s.ContainerdSocket(), "-n", "k8s.io", "images", "ls").Output()
	if err != nil {
		return fmt.Errorf("list the node's images: %w", err)
	}
	have := map[string]string{} // ref -> digest
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) >= 3 {
			have[f[0]] = f[2]
		}
	}
	for _, idx := range dirs {
		dir := filepath.Dir(idx)
		name := filepath.Base(dir)
		digest, err := layoutDigest(idx)
		if err != nil {
			return err
		}
		if have[ImageRef(name)] == digest {
			continue
		}
		t0 := time.Now()
		if err := s.ImportImage(ctx, dir, name); err != nil {
			return err
		}
		s.Logf("kubernetes: imported %s (%s) into %s's containerd in %s", ImageRef(name), digest, RealNode, time.Since(t0).Round(100*time.Millisecond))
	}
	return nil
}

// layoutDigest is the digest of the one manifest an image layout's index.json names.
func layoutDigest(index string) (string, error) {
	b, err := os.ReadFile(index)
	if err != nil {
		return "", err
	}
	var idx struct {
		Manifests []struct {
			Digest string `json:"digest"`
		} `json:"manifests"`
	}
	if err := json.Unmarshal(b, &idx); err != nil || len(idx.Manifests) != 1 {
		return "", fmt.Errorf("image layout %s: want one manifest (%v)", index, err)
	}
	return idx.Manifests[0].Digest, nil
}

// ImportImage imports the OCI image layout dir (tagged dev, as make images writes it) into the real
// node's containerd as ImageRef(name), unpacked; importing the same layout again changes nothing.
func (s *Stack) ImportImage(ctx context.Context, dir, name string) error {
	ref := ImageRef(name)
	tar := exec.CommandContext(ctx, "tar", "-C", dir, "-cf", "-", ".")
	imp := exec.CommandContext(ctx, "ctr", "-a", s.ContainerdSocket(), "-n", "k8s.io", "images", "import", "--base-name", ImageRepository+"/"+name, "-")
	pipe, err := tar.StdoutPipe()
	if err != nil {
		return err
	}
	imp.Stdin = pipe
	var out strings.Builder
	imp.Stdout, imp.Stderr = &out, &out
	if err := tar.Start(); err != nil {
		return fmt.Errorf("import %s: %w", ref, err)
	}
	ierr := imp.Run()
	terr := tar.Wait()
	if ierr != nil || terr != nil {
		return fmt.Errorf("import %s from %s: %v %v\n%s", ref, dir, ierr, terr, out.String())
	}
	return nil
}

// writeKubeletFiles writes the kubelet's configuration and kubeconfig (a node token in group
// system:nodes, so the Node authorizer and NodeRestriction confine it to its own node and pods).
func (s *Stack) writeKubeletFiles(token string) error {
	cfg := fmt.Sprintf(`# Written by the local stack. cgroupfs and failCgroupV1: false because this machine is cgroup v1;
# no QoS cgroups or allocatable enforcement (the node shares the machine with the rest of the stack).
# maxPods: two test packages' clouds at once (make run's samples beside another package's Nova).
# Image GC off (thresholds 100/99): the node's images are imported from the checkout, there is no
# registry to pull them back from, so an image the kubelet removed under disk pressure is lost.
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: %s
port: %d
healthzBindAddress: 127.0.0.1
healthzPort: %d
readOnlyPort: 0
containerRuntimeEndpoint: unix://%s
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
cgroupsPerQOS: false
enforceNodeAllocatable: []
podCIDR: %s
maxPods: 110
resolvConf: /etc/resolv.conf
serializeImagePulls: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
registerWithTaints:
- key: %s
  value: "true"
  effect: NoSchedule
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: false
  x509:
    clientCAFile: %s
authorization:
  mode: AlwaysAllow
evictionHard:
  memory.available: 100Mi
  nodefs.available: 5%%
  imagefs.available: 5%%
`, HostGateway, KubeletPort, kubeletHealthzPort, s.ContainerdSocket(), RealNodePodCIDR, RealNodeLabel, s.kubeletClientCA())
	if err := writeIfChanged(s.nodeDir("kubelet.yaml"), []byte(cfg), 0o644); err != nil {
		return err
	}
	kc := clientcmdapi.NewConfig()
	cluster := &clientcmdapi.Cluster{Server: s.KubeAPI}
	if ca, err := apiServerCA(s.apiServerCert(), HostGateway); err == nil {
		cluster.CertificateAuthorityData = ca
	} else {
		cluster.InsecureSkipTLSVerify = true
	}
	kc.Clusters["stackflow"] = cluster
	kc.AuthInfos[nodeUser] = &clientcmdapi.AuthInfo{Token: token}
	kc.Contexts["stackflow"] = &clientcmdapi.Context{Cluster: "stackflow", AuthInfo: nodeUser}
	kc.CurrentContext = "stackflow"
	b, err := clientcmd.Write(*kc)
	if err != nil {
		return err
	}
	return writeFileAtomic(s.nodeDir("kubelet.kubeconfig"), b, 0o600)
}

// nodeUser is the real node's identity for the Node authorizer.
const nodeUser = "system:node:" + RealNode

// kubeletClientCA, kubeletClientCert and kubeletClientKey: the API server's client certificate for the
// kubelet API (logs, exec, port-forward) and the CA the kubelet trusts for it. Nothing else holds a
// certificate of that CA.
func (s *Stack) kubeletClientCA() string { return s.Path("kubernetes", "pki", "kubelet-client-ca.crt") }
func (s *Stack) kubeletClientCert() string {
	return s.Path("kubernetes", "pki", "apiserver-kubelet-client.crt")
}
func (s *Stack) kubeletClientKey() string {
	return s.Path("kubernetes", "pki", "apiserver-kubelet-client.key")
}

// ensureKubeletClientPKI writes the CA and the API server's kubelet-client certificate once.
func (s *Stack) ensureKubeletClientPKI() error {
	if fileExists(s.kubeletClientCA()) && fileExists(s.kubeletClientCert()) && fileExists(s.kubeletClientKey()) {
		return nil
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "stackflow kubelet-client CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.AddDate(10, 0, 0),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "kube-apiserver-kubelet-client", Organization: []string{"system:masters"}},
		NotBefore: now.Add(-time.Hour), NotAfter: now.AddDate(10, 0, 0),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return err
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		return err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	if err := writeFileAtomic(s.kubeletClientKey(), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return err
	}
	if err := writeFileAtomic(s.kubeletClientCert(), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return err
	}
	return writeFileAtomic(s.kubeletClientCA(), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o644)
}

// downRealNode stops the kubelet, then the node's pods through CRI (which tears their networks down and
// releases their addresses), then containerd, and unmounts what the kubelet and containerd left mounted
// in the state directory. Pods come back on the next Up: the kubelet starts them again from the API.
func (s *Stack) downRealNode(ctx context.Context) error {
	if err := s.Stop(procKubelet, 30*time.Second); err != nil {
		return err
	}
	var errs []string
	if _, ok := s.Running(procContainerd); ok {
		if err := s.stopSandboxes(ctx); err != nil {
			errs = append(errs, err.Error())
		}
	}
	if err := s.Stop(procContainerd, 30*time.Second); err != nil {
		errs = append(errs, err.Error())
	}
	// A shim outlives containerd by design; with its sandbox removed it has nothing left to run.
	killShims(s.ContainerdSocket())
	if err := unmountUnder(s.Path("containerd"), s.nodeDir("kubelet")); err != nil {
		errs = append(errs, err.Error())
	}
	if len(errs) > 0 {
		return fmt.Errorf("real node down: %s", strings.Join(errs, "; "))
	}
	return nil
}

// stopSandboxes stops and removes every pod sandbox of the node through containerd's CRI API.
func (s *Stack) stopSandboxes(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	conn, err := grpc.NewClient("unix://"+s.ContainerdSocket(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	rt := cri.NewRuntimeServiceClient(conn)
	resp, err := rt.ListPodSandbox(ctx, &cri.ListPodSandboxRequest{})
	if err != nil {
		return fmt.Errorf("list pod sandboxes: %w", err)
	}
	var errs []string
	for _, p := range resp.Items {
		if _, err := rt.StopPodSandbox(ctx, &cri.StopPodSandboxRequest{PodSandboxId: p.Id}); err != nil {
			errs = append(errs, fmt.Sprintf("stop %s: %v", p.Metadata.GetName(), err))
			continue
		}
		if _, err := rt.RemovePodSandbox(ctx, &cri.RemovePodSandboxRequest{PodSandboxId: p.Id}); err != nil {
			errs = append(errs, fmt.Sprintf("remove %s: %v", p.Metadata.GetName(), err))
		}
	}
	if len(resp.Items) > 0 {
		s.Logf("kubernetes: stopped %d pod sandbox(es) of %s", len(resp.Items)-len(errs), RealNode)
	}
	if len(errs) > 0 {
		return fmt.Errorf("pod sandboxes: %s", strings.Join(errs, "; "))
	}
	return nil
}

// killShims kills the containerd shims started for the containerd listening on sock.
func killShims(sock string) {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(b), "\x00")
		if len(args) > 0 && strings.HasPrefix(filepath.Base(args[0]), "containerd-shim") && strings.Contains(string(b), sock) {
			var pid int
			if _, err := fmt.Sscan(e.Name(), &pid); err == nil {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
}

// unmountUnder unmounts every mount point below the given directories, deepest first.
func unmountUnder(dirs ...string) error {
	b, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		return err
	}
	var points []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		p := strings.ReplaceAll(f[1], `\040`, " ")
		for _, d := range dirs {
			// The kubelet bind-mounts its root directory onto itself: d is a mount point too.
			if p == d || strings.HasPrefix(p, d+"/") {
				points = append(points, p)
			}
		}
	}
	sort.Sort(sort.Reverse(sort.StringSlice(points)))
	var errs []string
	for _, p := range points {
		if err := syscall.Unmount(p, syscall.MNT_DETACH); err != nil && err != syscall.EINVAL && err != syscall.ENOENT {
			errs = append(errs, fmt.Sprintf("unmount %s: %v", p, err))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}
