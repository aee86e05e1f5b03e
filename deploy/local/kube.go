package local

import "context"

// upKubernetes starts etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok, writes the
// admin kubeconfig, creates the kwok nodes and applies the project's CRDs and admission policies.
func (s *Stack) upKubernetes(ctx context.Context) error {
	return nil // TODO(kube helper)
}
