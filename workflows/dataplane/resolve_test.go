package dataplane

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stackflow/stackflow/activities/kube"
	dataplanev1beta1 "github.com/stackflow/stackflow/api/dataplane/v1beta1"
	"github.com/stackflow/stackflow/api/lifecycle"
	novav1beta1 "github.com/stackflow/stackflow/api/nova/v1beta1"
)

func role(annotations map[string]string, mutate func(*dataplanev1beta1.OpenStackDataPlaneRole)) *dataplanev1beta1.OpenStackDataPlaneRole {
	r := &dataplanev1beta1.OpenStackDataPlaneRole{
		ObjectMeta: metav1.ObjectMeta{Name: "compute", Namespace: "openstack", Annotations: annotations},
		Spec: dataplanev1beta1.OpenStackDataPlaneRoleSpec{
			DataPlane:      "edpm",
			PreProvisioned: true,
			NodeTemplate: dataplanev1beta1.NodeSection{
				AnsibleUser: "root", AnsiblePort: 22, AnsibleSSHPrivateKeySecret: "edpm-ssh-key",
				NetworkAttachments: []string{"ctlplane"}, ManagementNetwork: "ctlplane",
				AnsibleVars: map[string]apiextensionsv1.JSON{"edpm_debug": {Raw: []byte("true")}, "edpm_sysctl": {Raw: []byte(`{"a":1}`)}},
			},
		},
	}
	if mutate != nil {
		mutate(r)
	}
	return r
}

func node(name string, annotations map[string]string, mutate func(*dataplanev1beta1.OpenStackDataPlaneNode)) *dataplanev1beta1.OpenStackDataPlaneNode {
	n := &dataplanev1beta1.OpenStackDataPlaneNode{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "openstack", Annotations: annotations},
		Spec:       dataplanev1beta1.OpenStackDataPlaneNodeSpec{Role: "compute", HostName: name, AnsibleHost: "198.51.100.10", Deploy: true},
	}
	if mutate != nil {
		mutate(n)
	}
	return n
}

func TestResolveEDPMNode(t *testing.T) {
	cell1 := map[string]string{dataplanev1beta1.NovaCellAnnotation: "cell1"}
	tests := []struct {
		name    string
		node    *dataplanev1beta1.OpenStackDataPlaneNode
		role    *dataplanev1beta1.OpenStackDataPlaneRole
		check   func(t *testing.T, c EDPMNodeConfig)
		wantErr string
	}{
		{
			name: "the cell comes from the role",
			node: node("n0", nil, nil), role: role(cell1, nil),
			check: func(t *testing.T, c EDPMNodeConfig) {
				if c.Cell != "cell1" || c.SSHKeySecret != "edpm-ssh-key" || c.AnsibleUser != "root" || c.DataPlane != "edpm" {
					t.Errorf("config %+v", c)
				}
				if !c.PreProvisioned || c.BareMetal != nil {
					t.Errorf("pre-provisioned role: %+v", c)
				}
			},
		},
		{
			name: "the node's annotation overrides the role's",
			node: node("n1", map[string]string{dataplanev1beta1.NovaCellAnnotation: "cell2"}, nil), role: role(cell1, nil),
			check: func(t *testing.T, c EDPMNodeConfig) {
				if c.Cell != "cell2" {
					t.Errorf("cell %q, want cell2", c.Cell)
				}
			},
		},
		{
			name: "no annotation anywhere: no compute",
			node: node("n2", nil, nil), role: role(nil, nil),
			check: func(t *testing.T, c EDPMNodeConfig) {
				if c.Cell != "" || len(EDPMServices(c)) != 0 {
					t.Errorf("cell %q services %v", c.Cell, EDPMServices(c))
				}
			},
		},
		{
			name: "node fields override the template field by field, variables key by key",
			node: node("n3", nil, func(n *dataplanev1beta1.OpenStackDataPlaneNode) {
				n.Spec.Node = dataplanev1beta1.NodeSection{AnsibleUser: "cloud-admin", AnsibleVars: map[string]apiextensionsv1.JSON{"edpm_debug": {Raw: []byte("false")}}}
			}),
			role: role(nil, nil),
			check: func(t *testing.T, c EDPMNodeConfig) {
				if c.AnsibleUser != "cloud-admin" || c.AnsiblePort != 22 || c.ManagementNetwork != "ctlplane" {
					t.Errorf("config %+v", c)
				}
				if string(c.AnsibleVars["edpm_debug"]) != "false" || string(c.AnsibleVars["edpm_sysctl"]) != `{"a":1}` {
					t.Errorf("vars %s", c.AnsibleVars)
				}
				if !slices.Equal(c.NetworkAttachments, []string{"ctlplane"}) {
					t.Errorf("network attachments %v, want the role's", c.NetworkAttachments)
				}
			},
		},
		{
			name: "a node naming an OVN southbound database (here through its role) runs the ovn step last in phase 0",
			node: node("n6", nil, nil),
			role: role(nil, func(r *dataplanev1beta1.OpenStackDataPlaneRole) {
				r.Spec.NodeTemplate.AnsibleVars = map[string]apiextensionsv1.JSON{OVNSouthboundVar: {Raw: []byte(`"tcp:198.51.100.1:6642"`)}}
			}),
			check: func(t *testing.T, c EDPMNodeConfig) {
				var names []string
				for _, st := range EDPMNodeSteps(c) {
					names = append(names, st.Name)
				}
				if !c.OVNController || !slices.Equal(names, []string{StepBootstrap, StepConfigureNetwork, StepConfigureOS, StepOVN}) {
					t.Errorf("ovn controller %v, steps %v", c.OVNController, names)
				}
			},
		},
		{
			name: "an empty southbound database is none: no ovn step",
			node: node("n7", nil, func(n *dataplanev1beta1.OpenStackDataPlaneNode) {
				n.Spec.Node = dataplanev1beta1.NodeSection{AnsibleVars: map[string]apiextensionsv1.JSON{OVNSouthboundVar: {Raw: []byte(`""`)}}}
			}),
			role: role(nil, nil),
			check: func(t *testing.T, c EDPMNodeConfig) {
				if c.OVNController || len(EDPMNodeSteps(c)) != 3 {
					t.Errorf("ovn controller %v, steps %+v", c.OVNController, EDPMNodeSteps(c))
				}
			},
		},
		{
			name: "not pre-provisioned: bare metal from the role's template, Ironic name from the host",
			node: node("n4", nil, func(n *dataplanev1beta1.OpenStackDataPlaneNode) { f := false; n.Spec.PreProvisioned = &f }),
			role: role(nil, func(r *dataplanev1beta1.OpenStackDataPlaneRole) {
				r.Spec.BaremetalSetTemplate = &dataplanev1beta1.BaremetalSetTemplate{Driver: "fake-hardware", Image: "cirros-tiny", Properties: map[string]string{"cpus": "1"}}
			}),
			check: func(t *testing.T, c EDPMNodeConfig) {
				if c.BareMetal == nil || c.BareMetal.IronicNodeName != "n4" || c.BareMetal.Image != "cirros-tiny" || c.BareMetal.Driver != "fake-hardware" {
					t.Fatalf("bare metal %+v", c.BareMetal)
				}
				if steps := EDPMNodeSteps(c); steps[0].Name != StepProvision || steps[0].Phase != -1 || len(steps) != 4 {
					t.Errorf("steps %+v", steps)
				}
			},
		},
		{
			name:    "not pre-provisioned without any bare-metal section is refused",
			node:    node("n5", nil, func(n *dataplanev1beta1.OpenStackDataPlaneNode) { f := false; n.Spec.PreProvisioned = &f }),
			role:    role(nil, nil),
			wantErr: "neither it (bareMetal) nor role compute",
		},
		{
			name: "no SSH key Secret anywhere is refused",
			node: node("n6", nil, nil),
			role: role(nil, func(r *dataplanev1beta1.OpenStackDataPlaneRole) {
				r.Spec.NodeTemplate.AnsibleSSHPrivateKeySecret = ""
			}),
			wantErr: "no ansibleSSHPrivateKeySecret",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := ResolveEDPMNode(tt.node, tt.role)
			if tt.wantErr != "" {
				var se *EDPMSpecError
				if !errors.As(err, &se) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want an EDPMSpecError with %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, c)
		})
	}
}

func TestEDPMServices(t *testing.T) {
	c, err := ResolveEDPMNode(node("edpm-compute-0", map[string]string{OVNMetadataAgentAnnotation: "true"}, nil),
		role(map[string]string{dataplanev1beta1.NovaCellAnnotation: "cell1"}, nil))
	if err != nil {
		t.Fatal(err)
	}
	svcs := EDPMServices(c)
	if len(svcs) != 2 || svcs[0].Ref.Kind != "NovaExternalCompute" || svcs[1].Ref.Kind != "OVNMetadataAgent" {
		t.Fatalf("services %+v", svcs)
	}
	var spec map[string]any
	if err := json.Unmarshal(svcs[0].Owned["spec"], &spec); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"dataplaneNodeName": "edpm-compute-0", "cellName": "cell1", "sshKeySecretName": "edpm-ssh-key",
		"inventoryConfigMapName": "edpm-compute-0-inventory", "deploy": true}
	for k, v := range want {
		if spec[k] != v {
			t.Errorf("spec.%s = %v, want %v", k, spec[k], v)
		}
	}
	if _, ok := spec["customServiceConfig"]; ok {
		t.Error("the node must never own customServiceConfig")
	}
	if _, ok := spec["novaComputeImage"]; ok {
		t.Error("images are defaults, not owned by the node")
	}
	if svcs[0].ImageDefaults["novaComputeImage"] != EnvNovaComputeImage {
		t.Errorf("image defaults %v", svcs[0].ImageDefaults)
	}
	var agent map[string]any
	if err := json.Unmarshal(svcs[1].Owned["spec"], &agent); err != nil {
		t.Fatal(err)
	}
	if _, ok := agent["novaMetadata"]; ok {
		t.Errorf("no nova-metadata annotation, yet the agent names %v", agent["novaMetadata"])
	}

	inv := c.Inventory()
	for _, s := range []string{`"edpm-compute-0"`, `"ansible_host": "198.51.100.10"`, `"edpm_debug": true`} {
		if !strings.Contains(inv, s) {
			t.Errorf("inventory lacks %s:\n%s", s, inv)
		}
	}
}

func TestNovaComputeConfigFiles(t *testing.T) {
	cell := novav1beta1.NovaCellSpec{CellName: "cell1", TransportURLSecret: "cell1-transport",
		NovaServiceAuth: novav1beta1.NovaServiceAuth{Secret: "nova-secret", KeystoneAuthURL: "http://198.51.100.1:5000/v3"}}
	tests := []struct {
		name       string
		opts       NovaComputeOptions
		custom     string
		wantDebug  string
		wantUpcall string
		wantFiles  int
		wantErr    string
	}{
		{name: "generated configuration alone: debug off", wantDebug: "False", wantFiles: 1},
		{name: "a cell without upcalls: the group policy check upcall off", opts: NovaComputeOptions{NoUpcalls: true}, wantDebug: "False", wantUpcall: "True", wantFiles: 1},
		{name: "customServiceConfig may turn the upcall back on", opts: NovaComputeOptions{NoUpcalls: true},
			custom: "[workarounds]\ndisable_group_policy_check_upcall = False\n", wantDebug: "False", wantUpcall: "False", wantFiles: 2},
		{name: "customServiceConfig in a later file wins", custom: "[DEFAULT]\ndebug = True\n", wantDebug: "True", wantFiles: 2},
		{name: "custom options elsewhere leave debug alone", custom: "[libvirt]\nvirt_type = qemu\n", wantDebug: "False", wantFiles: 2},
		{name: "an option before any section is refused", custom: "debug = True\n", wantErr: "not an oslo.config INI snippet"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			files, err := NovaComputeConfigFiles("edpm-compute-0", cell, tt.opts, tt.custom)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(files) != tt.wantFiles || files[0].Dest >= files[len(files)-1].Dest && len(files) > 1 {
				t.Fatalf("files %+v: the custom file must sort after the generated one", files)
			}
			eff, err := EffectiveNovaComputeConfig(files)
			if err != nil {
				t.Fatal(err)
			}
			if v, _ := eff.Get("DEFAULT", "debug"); v != tt.wantDebug {
				t.Errorf("effective debug = %q, want %q", v, tt.wantDebug)
			}
			if v, _ := eff.Get("workarounds", "disable_group_policy_check_upcall"); v != tt.wantUpcall {
				t.Errorf("effective disable_group_policy_check_upcall = %q, want %q", v, tt.wantUpcall)
			}
			if v, _ := eff.Get("DEFAULT", "host"); v != "edpm-compute-0" {
				t.Errorf("host = %q", v)
			}
			gen := files[0]
			secretKeys := map[string]bool{}
			for _, so := range gen.SecretOptions {
				secretKeys[so.Secret+"/"+so.Key] = true
				if _, inline := gen.Options.Get(so.Section, so.Option); inline {
					t.Errorf("[%s] %s must come from a Secret only", so.Section, so.Option)
				}
			}
			if !secretKeys["cell1-transport/transport_url"] || !secretKeys["nova-secret/NovaPassword"] {
				t.Errorf("secret options %v", gen.SecretOptions)
			}
		})
	}
}

func TestGoverningDataPlane(t *testing.T) {
	dp := func(name string, roles, nodes []string, deleting bool) kube.ListedObject {
		b, _ := json.Marshal(dataplanev1beta1.OpenStackDataPlaneSpec{Roles: roles, Nodes: nodes})
		return kube.ListedObject{Ref: lifecycle.ObjectRef{Name: name}, Object: kube.Object{Exists: true, Spec: b, Deleting: deleting}}
	}
	dps := []kube.ListedObject{
		dp("a-lists-node", nil, []string{"n1"}, false),
		dp("b-lists-role", []string{"compute"}, nil, false),
		dp("c-named-by-role", nil, nil, false),
		dp("d-deleting", []string{"other"}, nil, true),
	}
	tests := []struct {
		name, roleDP, role, node, want string
	}{
		{"the role's data plane wins", "c-named-by-role", "compute", "n1", "c-named-by-role"},
		{"else the first listing the node or its role", "", "compute", "n1", "a-lists-node"},
		{"by role", "", "compute", "n9", "b-lists-role"},
		{"none", "", "storage", "n9", ""},
		{"a data plane being deleted governs nothing", "", "other", "n9", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := GoverningDataPlane(dps, tt.roleDP, tt.role, tt.node)
			name := ""
			if got != nil {
				name = got.Ref.Name
			}
			if name != tt.want {
				t.Errorf("GoverningDataPlane = %q, want %q", name, tt.want)
			}
		})
	}
}

func TestFindNovaCell(t *testing.T) {
	cell := func(name, cellName string, deleting bool) kube.ListedObject {
		b, _ := json.Marshal(novav1beta1.NovaCellSpec{CellName: cellName, TransportURLSecret: name + "-transport"})
		return kube.ListedObject{Ref: lifecycle.ObjectRef{Name: name}, Object: kube.Object{Exists: true, Deleting: deleting, Spec: b}}
	}
	for _, tt := range []struct {
		name       string
		cells      []kube.ListedObject
		cell       string
		want       string // "" for none
		wantOthers []string
	}{
		{name: "by object name before spec.cellName", cells: []kube.ListedObject{cell("other", "cell1", false), cell("cell1", "cell1", false)}, cell: "cell1", want: "cell1"},
		{name: "by spec.cellName", cells: []kube.ListedObject{cell("nova-cell2", "cell2", false), cell("nova-cell1", "cell1", false)}, cell: "cell2", want: "nova-cell2"},
		{name: "none", cells: []kube.ListedObject{cell("nova-cell1", "cell1", false)}, cell: "cell3"},
		{name: "two Novas' cell1: ambiguous", cells: []kube.ListedObject{cell("a-cell1", "cell1", false), cell("b-cell1", "cell1", false), cell("c-cell1", "cell1", false)},
			cell: "cell1", want: "a-cell1", wantOthers: []string{"b-cell1", "c-cell1"}},
		{name: "one of them being deleted: not ambiguous", cells: []kube.ListedObject{cell("a-cell1", "cell1", true), cell("b-cell1", "cell1", false)}, cell: "cell1", want: "b-cell1"},
		{name: "the one being deleted is not found by name", cells: []kube.ListedObject{cell("cell1", "cell1", true)}, cell: "cell1"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			spec, name, others := FindNovaCell(tt.cells, tt.cell)
			require.Equal(t, tt.want, name)
			require.Equal(t, tt.want == "", spec == nil)
			if spec != nil {
				require.Equal(t, name+"-transport", spec.TransportURLSecret)
			}
			require.Equal(t, tt.wantOthers, others)
		})
	}
}

// The agent names the NovaMetadata of the effective neutron.openstack.org/nova-metadata (node over role).
func TestEDPMServicesAgentNamesItsNovaMetadata(t *testing.T) {
	tests := []struct {
		name       string
		node, role map[string]string
		want       any
	}{
		{"from the role", nil, map[string]string{NovaMetadataAnnotation: "nova-metadata"}, "nova-metadata"},
		{"the node's wins", map[string]string{NovaMetadataAnnotation: "other-metadata"}, map[string]string{NovaMetadataAnnotation: "nova-metadata"}, "other-metadata"},
		{"none", nil, nil, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			roleAnn := map[string]string{OVNMetadataAgentAnnotation: "true"}
			for k, v := range tc.role {
				roleAnn[k] = v
			}
			c, err := ResolveEDPMNode(node("edpm-compute-0", tc.node, nil), role(roleAnn, nil))
			if err != nil {
				t.Fatal(err)
			}
			svcs := EDPMServices(c)
			if len(svcs) != 1 || svcs[0].Ref.Kind != "OVNMetadataAgent" {
				t.Fatalf("services %+v", svcs)
			}
			var spec map[string]any
			if err := json.Unmarshal(svcs[0].Owned["spec"], &spec); err != nil {
				t.Fatal(err)
			}
			if spec["novaMetadata"] != tc.want {
				t.Errorf("spec.novaMetadata = %v, want %v", spec["novaMetadata"], tc.want)
			}
		})
	}
}

// A NovaMetadata is a target once it reports an endpoint; the port defaults to HTTP's.
func TestNovaMetadataTargetOf(t *testing.T) {
	spec := json.RawMessage(`{"secret":"nova-secret","passwordSelectors":{"metadataSecret":"Shared"}}`)
	tests := []struct {
		name     string
		spec     json.RawMessage
		endpoint string
		want     NovaMetadataTarget
		missing  string
	}{
		{"ready", spec, "http://198.51.100.1:28775", NovaMetadataTarget{Host: "198.51.100.1", Port: "28775", Secret: "nova-secret", Key: "Shared"}, ""},
		{"IPv6, default port and key", json.RawMessage(`{"secret":"s"}`), "http://[fd00::1]", NovaMetadataTarget{Host: "fd00::1", Port: "80", Secret: "s", Key: "MetadataSecret"}, ""},
		{"no endpoint yet", spec, "", NovaMetadataTarget{}, "an endpoint (status.endpoint: it has no ready pod yet)"},
		{"no secret", json.RawMessage(`{}`), "http://h:1", NovaMetadataTarget{}, "a Secret (spec.secret)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, missing, ok := NovaMetadataTargetOf(tc.spec, tc.endpoint)
			if ok != (tc.missing == "") || missing != tc.missing || got != tc.want {
				t.Errorf("got %+v, %q, %v; want %+v, %q", got, missing, ok, tc.want, tc.missing)
			}
		})
	}
}
