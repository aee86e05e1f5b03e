package local

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
)

// upHosts creates the EDPM test hosts: network namespaces, veths and sshd in private mount namespaces.
func (s *Stack) upHosts(ctx context.Context) error {
	return nil // TODO(hosts helper)
}

// downHosts removes the test hosts' namespaces and links.
func (s *Stack) downHosts(ctx context.Context) error {
	return nil // TODO(hosts helper)
}

// ensureHostNetwork creates the hosts' bridge with the gateway address (idempotent).
func (s *Stack) ensureHostNetwork(ctx context.Context) error {
	if err := exec.CommandContext(ctx, "ip", "link", "show", HostBridge).Run(); err != nil {
		if out, err := exec.CommandContext(ctx, "ip", "link", "add", HostBridge, "type", "bridge").CombinedOutput(); err != nil {
			return fmt.Errorf("create bridge %s: %w: %s", HostBridge, err, out)
		}
	}
	prefix := strings.SplitN(HostCIDR, "/", 2)[1]
	out, err := exec.CommandContext(ctx, "ip", "-o", "addr", "show", "dev", HostBridge).CombinedOutput()
	if err != nil {
		return fmt.Errorf("show bridge %s: %w: %s", HostBridge, err, out)
	}
	if !strings.Contains(string(out), " "+HostGateway+"/") {
		if out, err := exec.CommandContext(ctx, "ip", "addr", "add", HostGateway+"/"+prefix, "dev", HostBridge).CombinedOutput(); err != nil {
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
