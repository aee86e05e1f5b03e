package local

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"

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
// the instance), read through the compute API of the cloud the samples deployed, as the administrator
// whose clouds.yaml the sample configuration wrote (Secret SampleCloudsSecret in ns).
func ServerHypervisor(ctx context.Context, dyn dynamic.Interface, ns, name string) (string, error) {
	u, err := dyn.Resource(gvrOpenStackServer).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	id, _, _ := unstructured.NestedString(u.Object, "status", "instanceID")
	if id == "" {
		return "", fmt.Errorf("OpenStackServer %s/%s names no instance yet", ns, name)
	}
	yml, err := SampleCloudsYAML(ctx, dyn, ns)
	if err != nil {
		return "", err
	}
	ao, eo, _, err := clouds.Parse(clouds.WithCloudsYAML(bytes.NewReader(yml)), clouds.WithCloudName(SampleCloud))
	if err != nil {
		return "", fmt.Errorf("clouds.yaml of Secret %s/%s: %w", ns, SampleCloudsSecret, err)
	}
	provider, err := config.NewProviderClient(ctx, ao)
	if err != nil {
		return "", fmt.Errorf("authenticate: %w", err)
	}
	c, err := openstack.NewComputeV2(provider, eo)
	if err != nil {
		return "", fmt.Errorf("compute API of cloud %s: %w", SampleCloud, err)
	}
	c.Microversion = "2.53"
	srv, err := servers.Get(ctx, c, id).Extract()
	if err != nil {
		return "", fmt.Errorf("server %s in cloud %s: %w", id, SampleCloud, err)
	}
	return srv.HypervisorHostname, nil
}

// SampleCloudsYAML is the clouds.yaml the sample configuration wrote into Secret SampleCloudsSecret of ns.
func SampleCloudsYAML(ctx context.Context, dyn dynamic.Interface, ns string) ([]byte, error) {
	u, err := dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "secrets"}).Namespace(ns).Get(ctx, SampleCloudsSecret, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("the sample cloud's clouds.yaml: %w", err)
	}
	enc, _, _ := unstructured.NestedString(u.Object, "data", "clouds.yaml")
	yml, err := base64.StdEncoding.DecodeString(enc)
	if err != nil || len(yml) == 0 {
		return nil, fmt.Errorf("Secret %s/%s has no clouds.yaml", ns, SampleCloudsSecret)
	}
	return yml, nil
}
