package local

import "context"

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
	return nil // TODO(hosts helper)
}

// removeHostNetwork deletes the hosts' bridge.
func (s *Stack) removeHostNetwork(ctx context.Context) error {
	return nil // TODO(hosts helper)
}
