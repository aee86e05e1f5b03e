// Package activities holds stackflow's thin, idempotent adapters to real systems. Each capability is a
// struct holding its clients; its exported methods are the activities, registered on that capability's
// task queue (see api/lifecycle).
package activities

import (
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Kube holds the Kubernetes activities: reading objects, patching status, finalizers, child objects.
type Kube struct {
	Core    kubernetes.Interface
	Dynamic dynamic.Interface
	// UIBase is the Temporal UI's base URL, used to link objects to their workflows.
	UIBase string
	// Namespace is the Temporal namespace, part of the UI link.
	Namespace string
}

// NewKube builds the Kubernetes activities from a REST config.
func NewKube(cfg *rest.Config, uiBase, namespace string) (*Kube, error) {
	core, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &Kube{Core: core, Dynamic: dyn, UIBase: uiBase, Namespace: namespace}, nil
}
