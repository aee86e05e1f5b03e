package dataplane

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"go.temporal.io/sdk/workflow"

	"github.com/stackflow/stackflow/api"
	dataplanev1beta1 "github.com/stackflow/stackflow/api/dataplane/v1beta1"
	"github.com/stackflow/stackflow/api/lifecycle"
)

// OVNMetadataAgentAnnotation on an OpenStackDataPlaneRole (inherited) or OpenStackDataPlaneNode
// (overrides) set to "true" gives the node an OVNMetadataAgent named after it, exactly like the Nova cell
// annotation gives it a NovaExternalCompute: same copied fields, same deploy, removed with the node
// (and removed when the effective value stops being "true"). Compute nodes that serve instance metadata
// through OVN set it on their role.
const OVNMetadataAgentAnnotation = "neutron.openstack.org/ovn-metadata-agent"

// NovaMetadataAnnotation on a role (inherited) or node (overrides) names the NovaMetadata the node's
// OVNMetadataAgent forwards instances' metadata requests to (its spec.novaMetadata): the computes of a
// cell name their Nova's metadata service (<nova>-metadata for a Nova's global one).
const NovaMetadataAnnotation = "neutron.openstack.org/nova-metadata"

// LabelDataPlaneNode marks the objects derived from a data-plane node (its service CRs, its inventory).
const LabelDataPlaneNode = "dataplane.openstack.org/node"

// EDPMNodeConfig is a node's effective configuration: its role's nodeTemplate with the node's own fields
// on top, field by field (ansibleVars key by key), and the effective annotations (node over role).
type EDPMNodeConfig struct {
	Name               string                     `json:"name"`
	Namespace          string                     `json:"namespace"`
	Role               string                     `json:"role"`
	HostName           string                     `json:"hostName"`
	AnsibleHost        string                     `json:"ansibleHost"`
	AnsibleUser        string                     `json:"ansibleUser,omitempty"`
	AnsiblePort        int32                      `json:"ansiblePort"`
	AnsibleVars        map[string]json.RawMessage `json:"ansibleVars,omitempty"`
	NetworkAttachments []string                   `json:"networkAttachments,omitempty"`
	ManagementNetwork  string                     `json:"managementNetwork,omitempty"`
	SSHKeySecret       string                     `json:"sshKeySecret"`
	PreProvisioned     bool                       `json:"preProvisioned"`
	// BareMetal is how phase -1 provisions the host (nil when pre-provisioned).
	BareMetal *dataplanev1beta1.NodeBareMetal `json:"bareMetal,omitempty"`
	// Cell is the effective nova.openstack.org/cell ("" when the node is no compute).
	Cell string `json:"cell,omitempty"`
	// OVNMetadataAgent is the effective neutron.openstack.org/ovn-metadata-agent.
	OVNMetadataAgent bool `json:"ovnMetadataAgent,omitempty"`
	// NovaMetadata is the effective neutron.openstack.org/nova-metadata.
	NovaMetadata string `json:"novaMetadata,omitempty"`
	// OVNController: the node's variables name an OVN southbound database (OVNSouthboundVar), so its
	// pipeline has the ovn step, which makes the host a chassis of that database.
	OVNController bool `json:"ovnController,omitempty"`
	// Deploy is the node's deploy field; DataPlane the role's data plane.
	Deploy    bool   `json:"deploy"`
	DataPlane string `json:"dataPlane,omitempty"`
}

// EDPMSpecError is a node or role that cannot be deployed as written.
type EDPMSpecError struct{ Msg string }

func (e *EDPMSpecError) Error() string { return e.Msg }

// ResolveEDPMNode computes a node's effective configuration from the node and its role.
func ResolveEDPMNode(node *dataplanev1beta1.OpenStackDataPlaneNode, role *dataplanev1beta1.OpenStackDataPlaneRole) (EDPMNodeConfig, error) {
	tpl := role.Spec.NodeTemplate
	own := node.Spec.Node
	cfg := EDPMNodeConfig{
		Name:               node.Name,
		Namespace:          node.Namespace,
		Role:               role.Name,
		HostName:           node.Spec.HostName,
		AnsibleHost:        firstNonEmpty(node.Spec.AnsibleHost, node.Spec.HostName),
		AnsibleUser:        firstNonEmpty(own.AnsibleUser, tpl.AnsibleUser),
		AnsiblePort:        firstNonZero(own.AnsiblePort, tpl.AnsiblePort, 22),
		NetworkAttachments: own.NetworkAttachments,
		ManagementNetwork:  firstNonEmpty(own.ManagementNetwork, tpl.ManagementNetwork),
		SSHKeySecret:       firstNonEmpty(own.AnsibleSSHPrivateKeySecret, tpl.AnsibleSSHPrivateKeySecret),
		PreProvisioned:     role.Spec.PreProvisioned,
		Deploy:             node.Spec.Deploy,
		DataPlane:          role.Spec.DataPlane,
	}
	if cfg.NetworkAttachments == nil {
		cfg.NetworkAttachments = tpl.NetworkAttachments
	}
	if node.Spec.PreProvisioned != nil {
		cfg.PreProvisioned = *node.Spec.PreProvisioned
	}
	vars := map[string]json.RawMessage{}
	//workflowcheck:ignore -- reviewed: the result does not depend on the map's order
	for k, v := range tpl.AnsibleVars {
		vars[k] = json.RawMessage(v.Raw)
	}
	//workflowcheck:ignore -- reviewed: the result does not depend on the map's order
	for k, v := range own.AnsibleVars {
		vars[k] = json.RawMessage(v.Raw)
	}
	if len(vars) > 0 {
		cfg.AnsibleVars = vars
	}
	cfg.Cell = effectiveAnnotation(node.Annotations, role.Annotations, dataplanev1beta1.NovaCellAnnotation)
	cfg.OVNMetadataAgent = effectiveAnnotation(node.Annotations, role.Annotations, OVNMetadataAgentAnnotation) == "true"
	cfg.NovaMetadata = effectiveAnnotation(node.Annotations, role.Annotations, NovaMetadataAnnotation)
	var sb string
	if raw, ok := vars[OVNSouthboundVar]; ok && json.Unmarshal(raw, &sb) == nil && sb != "" {
		cfg.OVNController = true
	}

	if cfg.SSHKeySecret == "" {
		return cfg, &EDPMSpecError{fmt.Sprintf("node %s: no ansibleSSHPrivateKeySecret on the node or on role %s", node.Name, role.Name)}
	}
	if !cfg.PreProvisioned {
		bm := dataplanev1beta1.NodeBareMetal{}
		if node.Spec.BareMetal != nil {
			bm = *node.Spec.BareMetal
		}
		if t := role.Spec.BaremetalSetTemplate; t != nil {
			bm.Driver = firstNonEmpty(bm.Driver, t.Driver)
			bm.Image = firstNonEmpty(bm.Image, t.Image)
			if bm.Properties == nil {
				bm.Properties = t.Properties
			}
		}
		bm.IronicNodeName = firstNonEmpty(bm.IronicNodeName, node.Spec.HostName)
		if node.Spec.BareMetal == nil && role.Spec.BaremetalSetTemplate == nil {
			return cfg, &EDPMSpecError{fmt.Sprintf("node %s is not pre-provisioned, but neither it (bareMetal) nor role %s (baremetalSetTemplate) says how to provision it", node.Name, role.Name)}
		}
		if bm.Image == "" {
			return cfg, &EDPMSpecError{fmt.Sprintf("node %s: no image to deploy: set bareMetal.image or role %s's baremetalSetTemplate.image", node.Name, role.Name)}
		}
		cfg.BareMetal = &bm
	}
	return cfg, nil
}

// ErrNoDriver says which node has no Ironic driver: the driver is the site's hardware type and has no
// default (Ironic's fake-hardware provisions nothing).
func ErrNoDriver(node, role string) error {
	return &EDPMSpecError{fmt.Sprintf("node %s: no Ironic driver (hardware type): set bareMetal.driver or role %s's baremetalSetTemplate.driver (ipmi, redfish, idrac, ilo; fake-hardware only on a test Ironic)", node, role)}
}

// ChangeBaremetalDriverRequired marks runs that refuse a node with no Ironic driver; runs recorded
// before it took Ironic's test driver, fake-hardware, for it.
const ChangeBaremetalDriverRequired = "baremetal-driver-required"

func effectiveAnnotation(node, role map[string]string, key string) string {
	if v, ok := node[key]; ok {
		return v
	}
	return role[key]
}

func firstNonEmpty(s ...string) string {
	for _, x := range s {
		if x != "" {
			return x
		}
	}
	return ""
}

func firstNonZero(v ...int32) int32 {
	for _, x := range v {
		if x != 0 {
			return x
		}
	}
	return 0
}

// HostVars are the node's Ansible variables: connection, the role's and node's ansibleVars, and the
// network the playbooks configure.
func (c EDPMNodeConfig) HostVars() map[string]json.RawMessage {
	out := map[string]json.RawMessage{}
	//workflowcheck:ignore -- reviewed: the result does not depend on the map's order
	for k, v := range c.AnsibleVars {
		out[k] = v
	}
	set := func(k string, v any) {
		b, _ := json.Marshal(v)
		out[k] = b
	}
	set("ansible_host", c.AnsibleHost)
	set("ansible_port", c.AnsiblePort)
	if c.AnsibleUser != "" {
		set("ansible_user", c.AnsibleUser)
	}
	set("edpm_network_attachments", nonNil(c.NetworkAttachments))
	set("edpm_management_network", c.ManagementNetwork)
	return out
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// Inventory is the node's Ansible inventory (JSON, which Ansible's YAML inventory reads), stored in the
// node's inventory ConfigMap for its service CRs.
func (c EDPMNodeConfig) Inventory() string {
	vars := c.HostVars()
	//workflowcheck:ignore -- sorted: the result does not depend on the map's order
	keys := slices.Sorted(maps.Keys(vars))
	hv := make(map[string]json.RawMessage, len(keys))
	for _, k := range keys {
		hv[k] = vars[k]
	}
	b, _ := json.MarshalIndent(map[string]any{"all": map[string]any{"hosts": map[string]any{c.HostName: hv}}}, "", "  ")
	return string(b) + "\n"
}

// InfrastructureHash identifies what phase 0 deploys: a change re-runs phase 0 on the node.
func (c EDPMNodeConfig) InfrastructureHash() string {
	b, _ := json.Marshal(struct {
		Host string
		Vars map[string]json.RawMessage
	}{c.HostName, c.HostVars()})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// InventoryConfigMapName is the name of a node's inventory ConfigMap.
func InventoryConfigMapName(node string) string { return node + "-inventory" }

// EDPMStep is one step of a node's own pipeline (phases -1 and 0).
type EDPMStep struct {
	Name     string `json:"name"`
	Phase    int32  `json:"phase"`
	Playbook string `json:"playbook,omitempty"`
}

// Steps of phases -1 and 0, and the service steps of phase 1.
const (
	StepProvision        = "provision"
	StepBootstrap        = "bootstrap"
	StepConfigureNetwork = "configure-network"
	StepConfigureOS      = "configure-os"
	// StepOVN is EDPM's ovn service: Open vSwitch and ovn-controller, the host a chassis of the OVN
	// southbound database. It runs with phase 0, after configure-os, because every phase-1 service of a
	// compute needs it: Neutron binds a port only on a chassis, and the metadata agent serves one.
	StepOVN              = "ovn"
	StepNovaCompute      = "nova-compute"
	StepOVNMetadataAgent = "ovn-metadata-agent"
)

// OVNSouthboundVar is the Ansible variable naming the OVN southbound database a node joins (an OVSDB
// connection, tcp:198.51.100.1:6642): set on a role or node, it gives the node the ovn step and its
// metadata agent a database to serve.
const OVNSouthboundVar = "edpm_ovn_sb_connection"

// ChangeOVNStep is the GetVersion change after which a node whose variables name an OVN southbound
// database runs the ovn step (runs recorded before it had no such step).
const ChangeOVNStep = "edpm-ovn-step"

// gateOVNStep keeps runs recorded before the ovn step without it.
func gateOVNStep(ctx workflow.Context, cfg *EDPMNodeConfig) {
	if cfg.OVNController && workflow.GetVersion(ctx, ChangeOVNStep, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		cfg.OVNController = false
	}
}

// EDPMNodeSteps lists the node's own steps in order: provisioning unless pre-provisioned, then the
// infrastructure playbooks, then ovn when the node joins an OVN southbound database.
func EDPMNodeSteps(c EDPMNodeConfig) []EDPMStep {
	var out []EDPMStep
	if !c.PreProvisioned {
		out = append(out, EDPMStep{Name: StepProvision, Phase: dataplanev1beta1.PhaseBareMetal})
	}
	out = append(out,
		EDPMStep{Name: StepBootstrap, Phase: dataplanev1beta1.PhaseInfrastructure, Playbook: "bootstrap.yml"},
		EDPMStep{Name: StepConfigureNetwork, Phase: dataplanev1beta1.PhaseInfrastructure, Playbook: "configure-network.yml"},
		EDPMStep{Name: StepConfigureOS, Phase: dataplanev1beta1.PhaseInfrastructure, Playbook: "configure-os.yml"},
	)
	if c.OVNController {
		out = append(out, EDPMStep{Name: StepOVN, Phase: dataplanev1beta1.PhaseInfrastructure, Playbook: "ovn.yml"})
	}
	return out
}

// EDPMService is a phase-1 service CR derived from a node.
type EDPMService struct {
	// Step is the service's step name in the node's pipeline (nova-compute, ovn-metadata-agent).
	Step string              `json:"step"`
	Ref  lifecycle.ObjectRef `json:"ref"`
	// Owned are the fields the node keeps equal to its own (applied on every reconcile).
	Owned map[string]json.RawMessage `json:"owned"`
	// ImageDefaults maps a spec field to the worker environment variable giving its default image.
	ImageDefaults map[string]string `json:"imageDefaults,omitempty"`
}

// Environment variables of the worker that default the service CRs' images.
const (
	EnvNovaComputeImage      = "STACKFLOW_NOVA_COMPUTE_IMAGE"
	EnvNovaLibvirtImage      = "STACKFLOW_NOVA_LIBVIRT_IMAGE"
	EnvOVNMetadataAgentImage = "STACKFLOW_OVN_METADATA_AGENT_IMAGE"
)

// NovaExternalComputeRef names the NovaExternalCompute of a node (same name and namespace).
func NovaExternalComputeRef(namespace, node string) lifecycle.ObjectRef {
	return api.Ref("NovaExternalCompute", namespace, node)
}

// OVNMetadataAgentRef names the OVNMetadataAgent of a node (same name and namespace).
func OVNMetadataAgentRef(namespace, node string) lifecycle.ObjectRef {
	return api.Ref("OVNMetadataAgent", namespace, node)
}

// EDPMServices lists the service CRs the node's effective annotations ask for. Each copies the node's
// inventory (as its ConfigMap), network attachments, SSH key Secret and deploy; images come from the
// worker's environment at creation and are the user's to change afterwards; customServiceConfig is
// never touched.
func EDPMServices(c EDPMNodeConfig) []EDPMService {
	common := func() map[string]any {
		return map[string]any{
			"dataplaneNodeName":      c.Name,
			"sshKeySecretName":       c.SSHKeySecret,
			"inventoryConfigMapName": InventoryConfigMapName(c.Name),
			"networkAttachments":     nonNil(c.NetworkAttachments),
			"deploy":                 c.Deploy,
		}
	}
	var out []EDPMService
	if c.Cell != "" {
		spec := common()
		spec["cellName"] = c.Cell
		out = append(out, EDPMService{
			Step: StepNovaCompute, Ref: NovaExternalComputeRef(c.Namespace, c.Name), Owned: ownedSpec(spec),
			ImageDefaults: map[string]string{"novaComputeImage": EnvNovaComputeImage, "novaLibvirtImage": EnvNovaLibvirtImage},
		})
	}
	if c.OVNMetadataAgent {
		spec := common()
		if c.NovaMetadata != "" {
			spec["novaMetadata"] = c.NovaMetadata
		}
		out = append(out, EDPMService{
			Step: StepOVNMetadataAgent, Ref: OVNMetadataAgentRef(c.Namespace, c.Name), Owned: ownedSpec(spec),
			ImageDefaults: map[string]string{"containerImage": EnvOVNMetadataAgentImage},
		})
	}
	return out
}

func ownedSpec(spec map[string]any) map[string]json.RawMessage {
	b, _ := json.Marshal(spec)
	return map[string]json.RawMessage{"spec": b}
}
