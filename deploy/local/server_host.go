package local

import (
	"bytes"
	"context"
	"fmt"
	"os"

	"github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servers"
	"github.com/gophercloud/gophercloud/v2/openstack/config"
	"github.com/gophercloud/gophercloud/v2/openstack/config/clouds"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// The sample server of deploy/samples: make run prints where it runs.
const (
	SampleNamespace  = "openstack"
	SampleServerName = "sample-server"
)

var gvrOpenStackServer = schema.GroupVersionResource{Group: "infrastructure.cluster.x-k8s.io", Version: "v1alpha1", Resource: "openstackservers"}

// ServerHypervisor is the hypervisor Nova placed an OpenStackServer's instance on (its status names
// the instance), read as the stack's administrator through the compute API of region.
func (s *Stack) ServerHypervisor(ctx context.Context, dyn dynamic.Interface, ns, name, region string) (string, error) {
	u, err := dyn.Resource(gvrOpenStackServer).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	id, _, _ := unstructured.NestedString(u.Object, "status", "instanceID")
	if id == "" {
		return "", fmt.Errorf("OpenStackServer %s/%s names no instance yet", ns, name)
	}
	yml, err := os.ReadFile(s.CloudsYAML)
	if err != nil {
		return "", err
	}
	ao, eo, _, err := clouds.Parse(clouds.WithCloudsYAML(bytes.NewReader(yml)), clouds.WithCloudName(s.CloudName), clouds.WithRegion(region))
	if err != nil {
		return "", fmt.Errorf("clouds.yaml: %w", err)
	}
	provider, err := config.NewProviderClient(ctx, ao)
	if err != nil {
		return "", fmt.Errorf("authenticate: %w", err)
	}
	c, err := openstack.NewComputeV2(provider, eo)
	if err != nil {
		return "", fmt.Errorf("compute API of region %s: %w", region, err)
	}
	c.Microversion = "2.53"
	srv, err := servers.Get(ctx, c, id).Extract()
	if err != nil {
		return "", fmt.Errorf("server %s in region %s: %w", id, region, err)
	}
	return srv.HypervisorHostname, nil
}
