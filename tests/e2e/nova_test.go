package e2e

import (
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/stackflow/stackflow/deploy/local"
)

// TestComputeManifests: a Nova's computes are a role in cell1 with the cloud's OVN southbound database,
// and per host a NovaExternalCompute with the fake driver and a node whose Nova host name is the run's own.
func TestComputeManifests(t *testing.T) {
	hosts := []local.TestHost{{Name: "edpm-compute-0", Address: "198.51.100.10"}, {Name: "edpm-compute-1", Address: "198.51.100.11"}}
	var got []string
	var objs []*unstructured.Unstructured
	for _, m := range computeManifests(NovaOptions{Computes: hosts}, "srv1") {
		u := &unstructured.Unstructured{}
		require.NoError(t, yaml.Unmarshal([]byte(m), &u.Object), m)
		got = append(got, u.GetKind()+"/"+u.GetName())
		objs = append(objs, u)
	}
	require.Equal(t, []string{"OpenStackDataPlaneRole/compute", "NovaExternalCompute/edpm-compute-0", "OpenStackDataPlaneNode/edpm-compute-0",
		"NovaExternalCompute/edpm-compute-1", "OpenStackDataPlaneNode/edpm-compute-1"}, got)
	require.Equal(t, "cell1", objs[0].GetAnnotations()["nova.openstack.org/cell"])
	sb, _, _ := unstructured.NestedString(objs[0].Object, "spec", "nodeTemplate", "ansibleVars", "edpm_ovn_sb_connection")
	require.Equal(t, local.OVNSouthbound, sb)
	conf, _, _ := unstructured.NestedString(objs[1].Object, "spec", "customServiceConfig")
	require.Contains(t, conf, "compute_driver = fake.FakeDriver")
	host, _, _ := unstructured.NestedString(objs[4].Object, "spec", "hostName")
	addr, _, _ := unstructured.NestedString(objs[4].Object, "spec", "ansibleHost")
	require.Equal(t, []string{"srv1-edpm-compute-1", "198.51.100.11"}, []string{host, addr})
}
