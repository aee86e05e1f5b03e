package dataplane

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stackflow/stackflow/activities/kube"
	"github.com/stackflow/stackflow/activities/openstack"
	"github.com/stackflow/stackflow/api"
	neutronv1beta1 "github.com/stackflow/stackflow/api/neutron/v1beta1"
	novav1beta1 "github.com/stackflow/stackflow/api/nova/v1beta1"
	"github.com/stackflow/stackflow/api/oslo"
	"github.com/stackflow/stackflow/workflows/object"
)

// OVNMetadataAgentWorkflow serves an OVNMetadataAgent: the OVN metadata agent on a data-plane node,
// created for nodes whose effective neutron.openstack.org/ovn-metadata-agent annotation is "true" (see
// OVNMetadataAgentAnnotation). It installs the agent's generated configuration and its
// customServiceConfig (a later file, which wins), starts the agent against the OVN southbound database
// the node's variables name (OVNSouthboundVar; the playbook refuses a node without one) and is deployed
// once Neutron lists the agent alive on the host. Deleting it stops the agent, removes its files and
// deletes its Neutron agent record.
func OVNMetadataAgentWorkflow(ctx workflow.Context, in object.Input) error {
	return object.Run(ctx, in, &edpmServiceReconciler{kind: &ovnMetadataKind{}}, object.Options{})
}

// Where the agent reads its configuration: the files of the directory in sorted order.
const (
	OVNMetadataConfigDir     = "/etc/neutron/neutron_ovn_metadata_agent.conf.d"
	OVNMetadataGeneratedFile = OVNMetadataConfigDir + "/01-neutron-ovn-metadata-agent.conf"
	OVNMetadataCustomFile    = OVNMetadataConfigDir + "/99-custom.conf"
)

type ovnMetadataKind struct {
	spec neutronv1beta1.OVNMetadataAgentSpec
	// nova is where the agent forwards metadata requests (nil: nowhere), resolved by waitDependencies.
	nova *NovaMetadataTarget
}

// NovaMetadataTarget is a Nova metadata API as an OVN metadata agent's configuration names it: its
// address, and the Secret key (of the agent's namespace) holding the shared secret both sign requests with.
type NovaMetadataTarget struct {
	Host   string `json:"host"`
	Port   string `json:"port"`
	Secret string `json:"secret"`
	Key    string `json:"key"`
}

// ChangeNovaMetadata is the GetVersion change after which an agent naming a NovaMetadata waits for it and
// forwards to it (runs recorded before it configured no Nova).
const ChangeNovaMetadata = "ovn-metadata-agent-nova-metadata"

// ReasonWaitingForNovaMetadata is the agent's condition while its NovaMetadata reports no endpoint yet.
const ReasonWaitingForNovaMetadata = "WaitingForNovaMetadata"

// NovaMetadataTargetOf reads a NovaMetadata's spec and status.endpoint into the agent's target; ok is
// false (with what is missing) while it reports no endpoint. Pure.
func NovaMetadataTargetOf(spec json.RawMessage, endpoint string) (t NovaMetadataTarget, missing string, ok bool) {
	var s novav1beta1.NovaMetadataSpec
	if err := json.Unmarshal(spec, &s); err != nil {
		return t, "a readable spec", false
	}
	u, err := url.Parse(endpoint)
	if endpoint == "" || err != nil || u.Hostname() == "" {
		return t, "an endpoint (status.endpoint: it has no ready pod yet)", false
	}
	port := u.Port()
	if port == "" {
		port = "80"
	}
	if s.Secret == "" {
		return t, "a Secret (spec.secret)", false
	}
	return NovaMetadataTarget{Host: u.Hostname(), Port: port, Secret: s.Secret, Key: firstNonEmpty(s.PasswordSelectors.MetadataSecret, "MetadataSecret")}, "", true
}

// cloudSecret is the Secret of the agent's NovaMetadata (its Nova's services' Secret, which holds a
// clouds.yaml of that Nova's service user, openstack.ServiceCloud): the agent reaches the Neutron of that
// Nova's cloud. Empty, for the namespace's clouds Secret, when it names no NovaMetadata.
func (k *ovnMetadataKind) cloudSecret() string {
	if k.nova == nil {
		return ""
	}
	return k.nova.Secret
}

func (k *ovnMetadataKind) fresh() edpmServiceKind { return &ovnMetadataKind{} }
func (k *ovnMetadataKind) step() string           { return StepOVNMetadataAgent }
func (k *ovnMetadataKind) playbook() string       { return "ovn-metadata-agent.yml" }
func (k *ovnMetadataKind) removePlaybook() string { return "ovn-metadata-agent-remove.yml" }
func (k *ovnMetadataKind) condition() string      { return ConditionAgentDeployed }

func (k *ovnMetadataKind) decode(raw json.RawMessage) error {
	k.spec, k.nova = neutronv1beta1.OVNMetadataAgentSpec{}, nil
	return json.Unmarshal(raw, &k.spec)
}

func (k *ovnMetadataKind) common() edpmServiceSpec {
	s := k.spec
	return edpmServiceSpec{DataplaneNodeName: s.DataplaneNodeName, CustomServiceConfig: s.CustomServiceConfig, SSHKeySecretName: s.SSHKeySecretName,
		InventoryConfigMapName: s.InventoryConfigMapName, AnsibleUser: s.AnsibleUser, AnsiblePort: s.AnsiblePort, AnsibleHost: s.AnsibleHost, Deploy: s.Deploy}
}

func (k *ovnMetadataKind) validate() error { return nil }

// waitDependencies waits for the NovaMetadata the agent names to report where it answers, and for the
// shared secret in its Secret.
func (k *ovnMetadataKind) waitDependencies(ctx workflow.Context, lc *object.Lifecycle, gen int64) error {
	name := k.spec.NovaMetadata
	if name == "" || workflow.GetVersion(ctx, ChangeNovaMetadata, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return nil
	}
	ns := lc.Ref.Namespace
	return waitUntil(ctx, lc, gen, k.condition(), func(ctx workflow.Context) (bool, string, string, error) {
		ref := api.Ref("NovaMetadata", ns, name)
		var obj kube.Object
		if err := workflow.ExecuteActivity(object.KubeActivity(ctx), kubeActs.GetObject, ref).Get(ctx, &obj); err != nil {
			return false, "", "", fmt.Errorf("read NovaMetadata %s: %w", name, err)
		}
		if !obj.Exists || obj.Deleting {
			return false, ReasonWaitingForNovaMetadata, fmt.Sprintf("waiting for NovaMetadata %s/%s (novaMetadata), where instances' metadata requests go", ns, name), nil
		}
		var st kube.ObjectStatus
		if err := workflow.ExecuteActivity(object.KubeActivity(ctx), kubeActs.GetObjectStatus, kube.StatusInput{Ref: ref, Fields: []string{"endpoint"}}).Get(ctx, &st); err != nil {
			return false, "", "", fmt.Errorf("read NovaMetadata %s: %w", name, err)
		}
		var endpoint string
		_ = json.Unmarshal(st.Fields["endpoint"], &endpoint)
		t, missing, ok := NovaMetadataTargetOf(obj.Spec, endpoint)
		if !ok {
			return false, ReasonWaitingForNovaMetadata, fmt.Sprintf("waiting for NovaMetadata %s/%s to report %s", ns, name, missing), nil
		}
		var p kube.SecretPresence
		if err := workflow.ExecuteActivity(object.KubeActivity(ctx), kubeActs.CheckSecret, kube.SecretCheck{Namespace: ns, Name: t.Secret, Keys: []string{t.Key}}).Get(ctx, &p); err != nil {
			return false, "", "", fmt.Errorf("check Secret %s: %w", t.Secret, err)
		}
		if !p.Ready() {
			return false, ReasonWaitingForNovaMetadata, fmt.Sprintf("waiting for NovaMetadata %s's shared secret: Secret %s/%s with key %s", name, ns, t.Secret, t.Key), nil
		}
		k.nova = &t
		return true, "", "", nil
	})
}

func (k *ovnMetadataKind) files(host string) ([]oslo.ConfigFile, error) {
	ini := oslo.INI{}
	ini.Set("DEFAULT", "host", host)
	ini.Set("DEFAULT", "debug", "False")
	ini.Set("DEFAULT", "state_path", "/var/lib/neutron")
	// The agent runs as root: namespaces and haproxy need no rootwrap (privsep-helper runs directly).
	ini.Set("agent", "root_helper", "")
	gen := oslo.ConfigFile{Dest: OVNMetadataGeneratedFile, Header: fmt.Sprintf("OVN metadata agent of %s, generated by stackflow.", host), Options: ini}
	if t := k.nova; t != nil {
		// nova_metadata_host takes a name or an address, never a URL: an IPv6 address goes bare.
		ini.Set("DEFAULT", "nova_metadata_host", t.Host)
		ini.Set("DEFAULT", "nova_metadata_port", t.Port)
		ini.Set("DEFAULT", "nova_metadata_protocol", "http")
		gen.SecretOptions = []oslo.SecretOption{{Section: "DEFAULT", Option: "metadata_proxy_shared_secret", Secret: t.Secret, Key: t.Key}}
	}
	files := []oslo.ConfigFile{gen}
	if c := k.spec.CustomServiceConfig; c != "" {
		if _, err := oslo.ParseServiceConfig(c); err != nil {
			return nil, &EDPMSpecError{fmt.Sprintf("customServiceConfig is not an oslo.config INI snippet: %v", err)}
		}
		files = append(files, oslo.ConfigFile{Dest: OVNMetadataCustomFile, Raw: c})
	}
	return files, nil
}

// ChangeAgentAlive is the GetVersion change after which the agent is deployed only once Neutron lists it
// alive, and its removal deletes its Neutron agent record (runs recorded before it only configured it).
const ChangeAgentAlive = "ovn-metadata-agent-alive"

// AgentAliveTimeout bounds the wait for Neutron to list a started agent alive.
const AgentAliveTimeout = 3 * time.Minute

// ReasonWaitingForAgent is the agent's condition while Neutron does not list it alive.
const ReasonWaitingForAgent = "WaitingForAgent"

func (k *ovnMetadataKind) verify(ctx workflow.Context, lc *object.Lifecycle, host string) error {
	if workflow.GetVersion(ctx, ChangeAgentAlive, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		lc.SetCondition(ctx, metav1.Condition{Type: k.condition(), Status: metav1.ConditionTrue, Reason: "Installed",
			Message: fmt.Sprintf("OVN metadata agent configured on %s", host)})
		return nil
	}
	msg := fmt.Sprintf("waiting for Neutron to list the OVN metadata agent on %s alive", host)
	lc.SetCondition(ctx, metav1.Condition{Type: k.condition(), Status: metav1.ConditionFalse, Reason: ReasonWaitingForAgent, Message: msg})
	if err := lc.Step(ctx, "phase 1 · ovn-metadata-agent · "+msg); err != nil {
		return err
	}
	var agent openstack.NetworkAgent
	err := workflow.ExecuteActivity(registrationActivity(ctx, AgentAliveTimeout), osActs.WaitNetworkAgentAlive, openstack.NetworkAgentInput{
		Cloud: openstack.ServiceCloud(lc.Ref.Namespace, k.cloudSecret(), ""), Host: host, Binary: openstack.AgentBinaryOVNMetadata,
	}).Get(ctx, &agent)
	if err != nil {
		m := fmt.Sprintf("Neutron did not list the OVN metadata agent on %s alive within %s: %s", host, AgentAliveTimeout, object.FailureMessage(err))
		lc.SetCondition(ctx, metav1.Condition{Type: k.condition(), Status: metav1.ConditionFalse, Reason: ReasonWaitingForAgent, Message: m})
		return temporal.NewNonRetryableApplicationError(m, ReasonWaitingForAgent, err)
	}
	_ = lc.SetField(ctx, "agentID", agent.ID)
	lc.SetCondition(ctx, metav1.Condition{Type: k.condition(), Status: metav1.ConditionTrue, Reason: "Alive",
		Message: fmt.Sprintf("Neutron lists the OVN metadata agent on %s alive (agent %s)", host, agent.ID)})
	return nil
}

// cleanup deletes the agent's Neutron record once the removal playbook stopped it.
func (k *ovnMetadataKind) cleanup(ctx workflow.Context, lc *object.Lifecycle, rec *edpmServiceRecord) error {
	if workflow.GetVersion(ctx, ChangeAgentAlive, workflow.DefaultVersion, 1) == workflow.DefaultVersion || rec.Host == "" {
		return nil
	}
	lc.ShowStep(ctx, "delete the OVN metadata agent of "+rec.Host+" from Neutron")
	return deleteNetworkAgents(ctx, lc, rec.Host, openstack.AgentBinaryOVNMetadata, openstack.ServiceCloud(lc.Ref.Namespace, rec.CloudSecret, ""))
}

// deleteNetworkAgents deletes the host's Neutron agents of binary (all of them when empty) from the first
// of clouds that accepts its credentials. A cloud that refuses them (its Secret gone, its user deleted)
// cannot have had an agent listed through it (verifying an agent needs it), so the next is asked; when
// none accepts, there is nothing to delete.
func deleteNetworkAgents(ctx workflow.Context, lc *object.Lifecycle, host, binary string, clouds ...openstack.CloudSecret) error {
	for _, cloud := range clouds {
		err := workflow.ExecuteActivity(registrationActivity(ctx, AgentAliveTimeout), osActs.DeleteNetworkAgents, openstack.NetworkAgentInput{
			Cloud: cloud, Host: host, Binary: binary,
		}).Get(ctx, nil)
		var app *temporal.ApplicationError
		if err != nil && errors.As(err, &app) && app.Type() == openstack.ErrOSCredentials {
			workflow.GetLogger(ctx).Warn("credentials refused: no Neutron agent record to delete there", "object", lc.Ref.String(), "host", host, "cloud", cloud.String(), "error", err)
			continue
		}
		if err != nil {
			return fmt.Errorf("delete the Neutron agents of host %s: %w", host, err)
		}
		return nil
	}
	return nil
}
