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
