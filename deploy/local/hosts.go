package local

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"
)

// HostPrivatePaths are the directories every EDPM test host gets its own writable copy of: sshd runs in a
// private mount namespace where each is bind-mounted from <state>/hosts/<name>/root/<path>. These are the
// paths the product's playbooks write (service configuration, state, logs); the rest of the machine's
// filesystem (python3, Ansible's needs, Debian's OpenStack libraries) stays shared. A missing mount point
// is created as an empty directory on the machine. root's home is private too: Ansible's remote temporary
// files land there, and the machine's own shell setup (pyenv) would add a second to every SSH session.
var HostPrivatePaths = []string{
	"/root",
	"/etc/nova", "/var/lib/nova", "/var/log/nova",
	"/etc/neutron", "/var/lib/neutron", "/var/log/neutron",
	"/etc/stackflow", "/var/lib/stackflow", "/var/log/stackflow",
	"/etc/edpm", "/var/lib/edpm",
	"/run/stackflow",
	// Open vSwitch and ovn-controller of the ovn step, at Debian's default paths.
	"/etc/openvswitch", "/var/lib/openvswitch", "/var/log/openvswitch", "/run/openvswitch",
	"/var/lib/ovn", "/var/log/ovn", "/run/ovn",
}

// Naming of the EDPM test hosts and their plumbing; index i is 0-based.
const (
	hostNamePrefix  = "edpm-compute-"
	hostNetnsPrefix = "sf-edpm-"
	// hostVethPrefix names the machine's end of each host's veth (interface names have at most 15 bytes).
	hostVethPrefix = "sfve"
	// hostIface is the host's end of its veth, inside its namespace.
	hostIface = "eth0"
	// hostFirstOctet is the last octet of host 0's address (see HostAddress).
	hostFirstOctet = 10
	hostSSHPort    = 22
	hostUser       = "root"
	// HostsSSHKeySecretName is the Secret in SystemNamespace holding the hosts' SSH key pair.
	HostsSSHKeySecretName = "edpm-ssh-key"
)

// maxHosts keeps every address inside HostCIDR below the broadcast address.
const maxHosts = 254 - hostFirstOctet

// hostSpec is everything that identifies test host i.
type hostSpec struct {
	index   int
	name    string
	netns   string
	veth    string
	address string
	dir     string
}

func (s *Stack) hostSpec(i int) hostSpec {
	name := fmt.Sprintf("%s%d", hostNamePrefix, i)
	return hostSpec{
		index:   i,
		name:    name,
		netns:   fmt.Sprintf("%s%d", hostNetnsPrefix, i),
		veth:    fmt.Sprintf("%s%d", hostVethPrefix, i),
		address: HostAddress(i),
		dir:     s.Path("hosts", name),
	}
}

// proc is the name of the host's sshd process in the stack's PID files.
func (h hostSpec) proc() string { return "sshd-" + h.name }

// root is the host's private directory tree.
func (h hostSpec) root() string { return h.dir + "/root" }

func (h hostSpec) testHost() TestHost {
	return TestHost{
		Name: h.name, Namespace: h.netns, Address: h.address, Gateway: HostGateway,
		SSHPort: hostSSHPort, User: hostUser, Root: h.root(),
	}
}

// upHosts creates the EDPM test hosts: network namespaces, veths and sshd in private mount namespaces.
// It reuses hosts that are already right, repairs the others and removes hosts beyond HostCount (with
// KeepHosts, brings those up too).
func (s *Stack) upHosts(ctx context.Context) error {
	start := time.Now()
	n := s.HostCount()
	if n < 0 || n > maxHosts {
		return fmt.Errorf("test hosts: count %d outside 0..%d", n, maxHosts)
	}
	if s.opts.KeepHosts {
		found, err := findHosts(ctx, s.Path("run"))
		if err != nil {
			return err
		}
		n = hostsKept(found, n)
	}
	// sshd refuses to start without its privilege separation directory.
	if err := mkdirs(s.Path("hosts", "ssh"), "/run/sshd"); err != nil {
		return fmt.Errorf("test hosts: %w", err)
	}
	key, err := s.ensureHostsClientKey(ctx)
	if err != nil {
		return err
	}
	if err := s.removeHostsFrom(ctx, n); err != nil {
		return err
	}
	hosts := make([]hostSpec, n)
	for i := range hosts {
		hosts[i] = s.hostSpec(i)
	}
	// Most of the per-host work is exec'ing ip and ssh-keygen: a few at a time keeps two cores busy
	// without starving the rest of the stack.
	started := make([]bool, n)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for i, h := range hosts {
		g.Go(func() (err error) {
			started[i], err = s.upHost(gctx, h, key)
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	built := time.Since(start)
	if err := s.writeHostsAccess(hosts, key); err != nil {
		return err
	}
	g, gctx = errgroup.WithContext(ctx)
	g.SetLimit(8)
	for i, h := range hosts {
		g.Go(func() error { return s.waitHostSSH(gctx, h, started[i]) })
	}
	if err := g.Wait(); err != nil {
		return err
	}
	s.TestHosts = nil
	for _, h := range hosts {
		s.TestHosts = append(s.TestHosts, h.testHost())
	}
	s.publishHostsKey(ctx, key)
	fresh := 0
	for _, st := range started {
		if st {
			fresh++
		}
	}
	s.Logf("test hosts: %d up (%d sshd started) in %s (namespaces and sshd %s, SSH checks %s)", n, fresh,
		time.Since(start).Round(time.Millisecond), built.Round(time.Millisecond), (time.Since(start) - built).Round(time.Millisecond))
	return nil
}

// upHost brings one host to its desired state and reports whether it (re)started the host's sshd.
func (s *Stack) upHost(ctx context.Context, h hostSpec, key hostsKey) (bool, error) {
	changed, err := s.writeHostFiles(ctx, h, key)
	if err != nil {
		return false, fmt.Errorf("test host %s: %w", h.name, err)
	}
	if !hostNetworkReady(ctx, h) {
		// Whatever runs in a half-built namespace is stale: start from scratch.
		if err := s.removeHost(ctx, h); err != nil {
			return false, err
		}
		if err := createHostNetwork(ctx, h); err != nil {
			return false, fmt.Errorf("test host %s: %w", h.name, err)
		}
	}
	if err := routeToHost(ctx, h); err != nil {
		return false, fmt.Errorf("test host %s: %w", h.name, err)
	}
	if pid, ok := s.Running(h.proc()); ok && (changed || !inNetns(pid, h.netns)) {
		if err := s.Stop(h.proc(), 5*time.Second); err != nil {
			return false, fmt.Errorf("test host %s: restart sshd: %w", h.name, err)
		}
	}
	// ip netns exec and unshare both exec in place, so the PID recorded is sshd's own.
	started, err := s.Start(Proc{
		Name: h.proc(),
		Argv: []string{"ip", "netns", "exec", h.netns, "unshare", "--mount", "--uts", "--propagation", "private",
			"/bin/sh", h.dir + "/start.sh"},
		Dir: h.dir,
	})
	if err != nil {
		return false, fmt.Errorf("test host %s: %w", h.name, err)
	}
	return started, nil
}

// downHosts removes every test host: its sshd, anything else running in its namespace, its veth and its
// namespace. The hosts' directories (keys, private roots) are kept.
func (s *Stack) downHosts(ctx context.Context) error {
	return s.removeHostsFrom(ctx, 0)
}

// removeHostsFrom removes the hosts with an index of n or more, found by their namespaces, veths and PID
// files, so leftovers of an interrupted run are found too.
func (s *Stack) removeHostsFrom(ctx context.Context, n int) error {
	found, err := findHosts(ctx, s.Path("run"))
	if err != nil {
		return err
	}
	var doomed []int
	for i := range found {
		if i >= n {
			doomed = append(doomed, i)
		}
	}
	if len(doomed) == 0 {
		return nil
	}
	slices.Sort(doomed)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for _, i := range doomed {
		g.Go(func() error { return s.removeHost(gctx, s.hostSpec(i)) })
	}
	if err := g.Wait(); err != nil {
		return err
	}
	s.Logf("test hosts: removed %d (indices %d..%d)", len(doomed), doomed[0], doomed[len(doomed)-1])
	return nil
}

// hostsKept is the number of hosts an Up with KeepHosts brings up: count, or more to keep every host
// found (indices are dense, so a host beyond count keeps those below it too).
func hostsKept(found map[int]bool, count int) int {
	for i := range found {
		count = max(count, i+1)
	}
	return min(count, maxHosts)
}

// findHosts lists the indices of the hosts that exist, by their namespaces, veths and the PID files in
// runDir, so leftovers of an interrupted run are found too.
func findHosts(ctx context.Context, runDir string) (map[int]bool, error) {
	found := map[int]bool{}
	out, err := exec.CommandContext(ctx, "ip", "netns", "list").CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("list network namespaces: %w: %s", err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			addHostIndex(found, f[0], hostNetnsPrefix)
		}
	}
	out, err = exec.CommandContext(ctx, "ip", "-o", "link", "show").CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("list links: %w: %s", err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		// "12: sfve0@if2: <...> ..."
		if f := strings.Fields(line); len(f) > 1 {
			name, _, _ := strings.Cut(strings.TrimSuffix(f[1], ":"), "@")
			addHostIndex(found, name, hostVethPrefix)
		}
	}
	entries, _ := os.ReadDir(runDir)
	for _, e := range entries {
		addHostIndex(found, strings.TrimSuffix(e.Name(), ".pid"), "sshd-"+hostNamePrefix)
	}
	return found, nil
}

func addHostIndex(found map[int]bool, name, prefix string) {
	rest, ok := strings.CutPrefix(name, prefix)
	if !ok {
		return
	}
	if i, err := strconv.Atoi(rest); err == nil && i >= 0 && strconv.Itoa(i) == rest {
		found[i] = true
	}
}

// removeHost stops the host's sshd, kills what else runs in its namespace (services playbooks started)
// and deletes its veth and namespace. Removing a host that does not exist is not an error.
func (s *Stack) removeHost(ctx context.Context, h hostSpec) error {
	if err := s.Stop(h.proc(), 5*time.Second); err != nil {
		return fmt.Errorf("test host %s: %w", h.name, err)
	}
	if err := killNetnsProcesses(ctx, h.netns, 5*time.Second); err != nil {
		return fmt.Errorf("test host %s: %w", h.name, err)
	}
	if out, err := exec.CommandContext(ctx, "ip", "route", "show", h.address+"/32", "dev", HostBridge).Output(); err == nil && len(out) > 0 {
		if out, err := exec.CommandContext(ctx, "ip", "route", "del", h.address+"/32", "dev", HostBridge).CombinedOutput(); err != nil {
			return fmt.Errorf("test host %s: delete route: %w: %s", h.name, err, out)
		}
	}
	if err := forgetHostMAC(ctx, h); err != nil {
		return fmt.Errorf("test host %s: %w", h.name, err)
	}
	if linkExists(ctx, h.veth) {
		if out, err := exec.CommandContext(ctx, "ip", "link", "del", h.veth).CombinedOutput(); err != nil && linkExists(ctx, h.veth) {
			return fmt.Errorf("test host %s: delete veth %s: %w: %s", h.name, h.veth, err, out)
		}
	}
	if netnsExists(h.netns) {
		if out, err := exec.CommandContext(ctx, "ip", "netns", "del", h.netns).CombinedOutput(); err != nil && netnsExists(h.netns) {
			return fmt.Errorf("test host %s: delete namespace %s: %w: %s", h.name, h.netns, err, out)
		}
	}
	return nil
}

// killNetnsProcesses terminates every process in the namespace: SIGTERM, then SIGKILL after grace.
// It loops because a dying process may still fork.
func killNetnsProcesses(ctx context.Context, netns string, grace time.Duration) error {
	if !netnsExists(netns) {
		return nil
	}
	deadline := time.Now().Add(grace)
	for {
		out, err := exec.CommandContext(ctx, "ip", "netns", "pids", netns).CombinedOutput()
		if err != nil {
			return fmt.Errorf("list processes in %s: %w: %s", netns, err, out)
		}
		pids := strings.Fields(string(out))
		if len(pids) == 0 {
			return nil
		}
		sig := syscall.SIGTERM
		if time.Now().After(deadline) {
			sig = syscall.SIGKILL
		}
		if time.Now().After(deadline.Add(5 * time.Second)) {
			return fmt.Errorf("processes %v in %s survive SIGKILL", pids, netns)
		}
		for _, p := range pids {
			if pid, err := strconv.Atoi(p); err == nil {
				_ = syscall.Kill(pid, sig)
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// hostNetworkReady reports whether the host's namespace, veth, address and route are all in place.
func hostNetworkReady(ctx context.Context, h hostSpec) bool {
	if !netnsExists(h.netns) {
		return false
	}
	out, err := exec.CommandContext(ctx, "ip", "-o", "link", "show", "dev", h.veth).Output()
	if err != nil || !strings.Contains(string(out), " master "+HostBridge+" ") || !strings.Contains(string(out), ",UP") {
		return false
	}
	out, err = exec.CommandContext(ctx, "ip", "-n", h.netns, "-o", "link", "show", "dev", "lo").Output()
	if err != nil || !strings.Contains(string(out), ",UP") {
		return false
	}
	out, err = exec.CommandContext(ctx, "ip", "-n", h.netns, "-o", "addr", "show", "dev", hostIface).Output()
	if err != nil || !strings.Contains(string(out), " inet "+h.address+"/"+hostPrefixLen()+" ") {
		return false
	}
	out, err = exec.CommandContext(ctx, "ip", "-n", h.netns, "route", "show", "default").Output()
	return err == nil && strings.Contains(string(out), "default via "+HostGateway+" dev "+hostIface)
}

// netnsMu serializes namespace creation: the first `ip netns add` turns /run/netns into a shared mount,
// which concurrent invocations can do twice.
var netnsMu sync.Mutex

// createHostNetwork builds the host's namespace and its veth to the bridge.
func createHostNetwork(ctx context.Context, h hostSpec) error {
	netnsMu.Lock()
	out, err := exec.CommandContext(ctx, "ip", "netns", "add", h.netns).CombinedOutput()
	netnsMu.Unlock()
	if err != nil {
		return fmt.Errorf("add namespace %s: %w: %s", h.netns, err, out)
	}
	prefix := hostPrefixLen()
	steps := [][]string{
		{"link", "add", h.veth, "type", "veth", "peer", "name", hostIface, "netns", h.netns},
		{"link", "set", h.veth, "master", HostBridge, "up"},
		{"-n", h.netns, "link", "set", "lo", "up"},
		{"-n", h.netns, "addr", "add", h.address + "/" + prefix, "dev", hostIface},
		{"-n", h.netns, "link", "set", hostIface, "up"},
		{"-n", h.netns, "route", "add", "default", "via", HostGateway, "dev", hostIface},
	}
	for _, args := range steps {
		if out, err := exec.CommandContext(ctx, "ip", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, out)
		}
	}
	return forgetHostMAC(ctx, h)
}

// forgetHostMAC drops the machine's neighbour entry for the host's address. A new veth has a new MAC
// address; an entry left from an earlier host with this address would blackhole the first seconds of
// traffic (until the kernel re-probes, about nine seconds).
func forgetHostMAC(ctx context.Context, h hostSpec) error {
	if out, err := exec.CommandContext(ctx, "ip", "neigh", "flush", "to", h.address, "dev", HostBridge).CombinedOutput(); err != nil {
		return fmt.Errorf("forget neighbour %s: %w: %s", h.address, err, out)
	}
	return nil
}

// routeToHost routes the host's address from the machine into the bridge. The machine's own uplink may
// sit in the same range (checkRangeFree refuses that, but a route added later could still shadow ours), and
// without a more specific route the hosts' addresses would be looked for on the uplink.
func routeToHost(ctx context.Context, h hostSpec) error {
	args := []string{"route", "replace", h.address + "/32", "dev", HostBridge, "src", HostGateway}
	if out, err := exec.CommandContext(ctx, "ip", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return nil
}

func hostPrefixLen() string { return strings.SplitN(HostCIDR, "/", 2)[1] }

func netnsExists(name string) bool {
	_, err := os.Stat("/run/netns/" + name)
	return err == nil
}

func linkExists(ctx context.Context, name string) bool {
	return exec.CommandContext(ctx, "ip", "link", "show", "dev", name).Run() == nil
}

// inNetns reports whether the process runs in the named network namespace.
func inNetns(pid int, netns string) bool {
	var a, b syscall.Stat_t
	if syscall.Stat(fmt.Sprintf("/proc/%d/ns/net", pid), &a) != nil || syscall.Stat("/run/netns/"+netns, &b) != nil {
		return false
	}
	return a.Ino == b.Ino && a.Dev == b.Dev
}

// ensureHostNetwork creates the hosts' bridge with the gateway address (idempotent).
func (s *Stack) ensureHostNetwork(ctx context.Context) error {
	if err := exec.CommandContext(ctx, "ip", "link", "show", HostBridge).Run(); err != nil {
		if out, err := exec.CommandContext(ctx, "ip", "link", "add", HostBridge, "type", "bridge").CombinedOutput(); err != nil {
			return fmt.Errorf("create bridge %s: %w: %s", HostBridge, err, out)
		}
	}
	// A bridge whose MAC address was never set takes the lowest of its ports' addresses, so adding a host
	// could change the gateway's MAC under the other hosts' ARP caches. Pinning it keeps it stable.
	if b, err := os.ReadFile("/sys/class/net/" + HostBridge + "/addr_assign_type"); err == nil && strings.TrimSpace(string(b)) != "3" {
		mac, err := os.ReadFile("/sys/class/net/" + HostBridge + "/address")
		if err != nil {
			return fmt.Errorf("read bridge %s address: %w", HostBridge, err)
		}
		if out, err := exec.CommandContext(ctx, "ip", "link", "set", HostBridge, "address", strings.TrimSpace(string(mac))).CombinedOutput(); err != nil {
			return fmt.Errorf("pin bridge %s address: %w: %s", HostBridge, err, out)
		}
	}
	if err := checkRangeFree(); err != nil {
		return err
	}
	out, err := exec.CommandContext(ctx, "ip", "-o", "addr", "show", "dev", HostBridge).CombinedOutput()
	if err != nil {
		return fmt.Errorf("show bridge %s: %w: %s", HostBridge, err, out)
	}
	if !strings.Contains(string(out), " "+HostGateway+"/") {
		if out, err := exec.CommandContext(ctx, "ip", "addr", "add", HostGateway+"/"+hostPrefixLen(), "dev", HostBridge).CombinedOutput(); err != nil {
			return fmt.Errorf("address bridge %s: %w: %s", HostBridge, err, out)
		}
	}
	if out, err := exec.CommandContext(ctx, "ip", "link", "set", HostBridge, "up").CombinedOutput(); err != nil {
		return fmt.Errorf("bridge %s up: %w: %s", HostBridge, err, out)
	}
	return nil
}

// removeHostNetwork deletes the hosts' bridge.
func (s *Stack) removeHostNetwork(ctx context.Context) error {
	if exec.CommandContext(ctx, "ip", "link", "show", HostBridge).Run() != nil {
		return nil
	}
	if out, err := exec.CommandContext(ctx, "ip", "link", "del", HostBridge).CombinedOutput(); err != nil {
		return fmt.Errorf("delete bridge %s: %w: %s", HostBridge, err, out)
	}
	return nil
}

// checkRangeFree refuses a hosts' range that any other interface of the machine already uses: the test
// hosts' traffic would then leave through that interface.
func checkRangeFree() error {
	_, hostNet, err := net.ParseCIDR(HostCIDR)
	if err != nil {
		return err
	}
	ifaces, err := net.Interfaces()
	if err != nil {
		return fmt.Errorf("list interfaces: %w", err)
	}
	for _, ifc := range ifaces {
		if ifc.Name == HostBridge {
			continue
		}
		addrs, _ := ifc.Addrs()
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && (hostNet.Contains(ipn.IP) || ipn.Contains(hostNet.IP)) {
				return fmt.Errorf("interface %s has %s, inside the test hosts' range %s: refusing to overlap a real network", ifc.Name, ipn, HostCIDR)
			}
		}
	}
	return nil
}
