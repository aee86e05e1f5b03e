package local

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Node labels the product schedules OpenStack's control plane and computes by.
const (
	ControlPlaneNodeLabel = "openstack-control-plane"
	ComputeNodeLabel      = "openstack-compute-node"
	// kwokNodeAnnotation marks the nodes kwok plays (value "fake").
	kwokNodeAnnotation = "kwok.x-k8s.io/node"
	// retiredRunnerNode was the fake node of the retired pod runner.
	retiredRunnerNode = "runner-0"
)

// KwokNode is one fake node of the local cluster.
type KwokNode struct {
	Name   string
	Labels map[string]string
}

// kwokNodes are the stack's fake nodes: three control-plane nodes and two computes (the real node,
// RealNode, is a kubelet of its own).
var kwokNodes = []KwokNode{
	{"control-0", map[string]string{ControlPlaneNodeLabel: "enabled"}},
	{"control-1", map[string]string{ControlPlaneNodeLabel: "enabled"}},
	{"control-2", map[string]string{ControlPlaneNodeLabel: "enabled"}},
	{"compute-0", map[string]string{ComputeNodeLabel: "enabled"}},
	{"compute-1", map[string]string{ComputeNodeLabel: "enabled"}},
}

// KwokNodes returns the fake nodes the stack creates, with their role labels.
func KwokNodes() []KwokNode {
	out := make([]KwokNode, len(kwokNodes))
	for i, n := range kwokNodes {
		labels := make(map[string]string, len(n.Labels))
		for k, v := range n.Labels {
			labels[k] = v
		}
		out[i] = KwokNode{Name: n.Name, Labels: labels}
	}
	return out
}

// kwokNodeObject is the Node kwok takes over: kwok fills its status (addresses, capacity, conditions).
func kwokNodeObject(n KwokNode) *corev1.Node {
	labels := map[string]string{
		"kubernetes.io/hostname": n.Name,
		"kubernetes.io/os":       "linux",
		"kubernetes.io/arch":     "amd64",
		"type":                   "kwok",
	}
	for k, v := range n.Labels {
		labels[k] = v
	}
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{
		Name:        n.Name,
		Labels:      labels,
		Annotations: map[string]string{kwokNodeAnnotation: "fake", "node.alpha.kubernetes.io/ttl": "0"},
	}}
}

// ensureKwokNodes creates the missing nodes (an existing node is left as it is, so label changes made by
// others survive) and waits until every one is Ready. kwok has been seen, once in many cold starts, to
// stop after "Watch nodes" without ever starting its controllers; a kwok that has made no node Ready
// after kwokStall is restarted once (what a person did by hand with `up`) before giving up.
func (s *Stack) ensureKwokNodes(ctx context.Context, cs kubernetes.Interface, bin string) error {
	created := 0
	for _, n := range kwokNodes {
		_, err := cs.CoreV1().Nodes().Create(ctx, kwokNodeObject(n), metav1.CreateOptions{FieldManager: FieldManager})
		switch {
		case err == nil:
			created++
		case apierrors.IsAlreadyExists(err):
		default:
			return fmt.Errorf("create node %s: %w", n.Name, err)
		}
	}
	if created > 0 {
		s.Logf("kubernetes: created %d kwok nodes", created)
	}
	// A state directory from before the real node ran the Nova pods holds the retired pod runner's fake
	// node; nothing runs the pods placed there any more.
	if n, err := cs.CoreV1().Nodes().Get(ctx, retiredRunnerNode, metav1.GetOptions{}); err == nil && n.Annotations[kwokNodeAnnotation] == "fake" {
		if err := cs.CoreV1().Nodes().Delete(ctx, retiredRunnerNode, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete the retired node %s: %w", retiredRunnerNode, err)
		}
		s.Logf("kubernetes: deleted the retired fake node %s (its pods now run on %s)", retiredRunnerNode, RealNode)
	}
	err := s.waitKwokNodes(ctx, cs, kwokStall)
	if err == nil || ctx.Err() != nil {
		return err
	}
	s.Logf("kubernetes: kwok left nodes NotReady for %s (%v); restarting it once", kwokStall, err)
	if err := s.Stop(procKwok, 5*time.Second); err != nil {
		return err
	}
	if _, err := s.startKwok(ctx, bin); err != nil {
		return err
	}
	return s.waitKwokNodes(ctx, cs, 2*time.Minute)
}

// kwokStall is how long a started kwok may take to make its nodes Ready before it counts as stuck; it
// takes under a second when it works.
const kwokStall = 45 * time.Second

func (s *Stack) waitKwokNodes(ctx context.Context, cs kubernetes.Interface, timeout time.Duration) error {
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return s.WaitFor(wctx, "kwok nodes Ready", procKwok, 300*time.Millisecond, func(ctx context.Context) error {
		var notReady []string
		for _, n := range kwokNodes {
			node, err := cs.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if !NodeReady(node) {
				notReady = append(notReady, n.Name)
			}
		}
		if len(notReady) > 0 {
			return fmt.Errorf("not Ready: %s", strings.Join(notReady, ", "))
		}
		return nil
	})
}

// NodeReady reports whether the node's Ready condition is True.
func NodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
