package apitest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/yaml"
)

// change is one object the API server must refuse: the kind's sample with a patch applied, either
// created as is, or (update) created valid (with before applied) and then updated with the patch.
type change struct {
	name   string
	kind   string
	before string // YAML merge patch applied before the object is created (update cases)
	patch  string // YAML merge patch that makes the object (or its update) invalid
	update bool
	// want are substrings of the refusal; the first names the field.
	want []string
}

var refused = []change{
	// Data plane.
	{name: "data plane without roles or nodes", kind: "OpenStackDataPlane", patch: `spec: {roles: null}`,
		want: []string{"spec", "at least one role or node"}},
	{name: "data plane with both failure budgets", kind: "OpenStackDataPlane", patch: `spec: {maxFailedNodes: 1, maxFailedPercentage: 10}`,
		want: []string{"spec", "maxFailedNodes and maxFailedPercentage are mutually exclusive"}},
	{name: "data plane concurrency zero", kind: "OpenStackDataPlane", patch: `spec: {maxConcurrency: 0}`,
		want: []string{"spec.maxConcurrency", "greater than or equal to 1"}},
	{name: "data plane failure percentage over 100", kind: "OpenStackDataPlane", patch: `spec: {maxFailedPercentage: 150}`,
		want: []string{"spec.maxFailedPercentage", "less than or equal to 100"}},
	{name: "data plane role name not DNS-1123", kind: "OpenStackDataPlane", patch: `spec: {roles: [Compute_Role]}`,
		want: []string{"spec.roles[0]", "should match"}},
	{name: "role SSH port out of range", kind: "OpenStackDataPlaneRole", patch: `spec: {nodeTemplate: {ansiblePort: 70000}}`,
		want: []string{"spec.nodeTemplate.ansiblePort", "less than or equal to 65535"}},
	{name: "role SSH key secret name invalid", kind: "OpenStackDataPlaneRole", patch: `spec: {nodeTemplate: {ansibleSSHPrivateKeySecret: Bad_Secret}}`,
		want: []string{"spec.nodeTemplate.ansibleSSHPrivateKeySecret", "should match"}},
	{name: "pre-provisioned role with bare-metal template", kind: "OpenStackDataPlaneRole", patch: `spec: {baremetalSetTemplate: {image: cirros-tiny, driver: fake-hardware}}`,
		want: []string{"spec.baremetalSetTemplate", "must not be set when preProvisioned is true"}},
	{name: "bare-metal driver not supported", kind: "OpenStackDataPlaneRole", patch: `spec: {preProvisioned: false, baremetalSetTemplate: {image: cirros-tiny, driver: pxe_ipmitool}}`,
		want: []string{"spec.baremetalSetTemplate.driver", "Unsupported value"}},
	{name: "bare-metal template without image", kind: "OpenStackDataPlaneRole", patch: `spec: {preProvisioned: false, baremetalSetTemplate: {driver: fake-hardware}}`,
		want: []string{"spec.baremetalSetTemplate.image", "Required value"}},
	{name: "bare-metal template without driver (no default: fake-hardware provisions nothing)", kind: "OpenStackDataPlaneRole", patch: `spec: {preProvisioned: false, baremetalSetTemplate: {image: cirros-tiny}}`,
		want: []string{"spec.baremetalSetTemplate.driver", "Required value"}},
	{name: "node without hostName", kind: "OpenStackDataPlaneNode", patch: `spec: {hostName: null}`,
		want: []string{"spec.hostName", "Required value"}},
	{name: "node hostName not RFC 1123", kind: "OpenStackDataPlaneNode", patch: `spec: {hostName: Compute_0}`,
		want: []string{"spec.hostName", "should match"}},
	{name: "node ansibleHost neither IP nor DNS name", kind: "OpenStackDataPlaneNode", patch: `spec: {ansibleHost: "not a host!"}`,
		want: []string{"spec.ansibleHost", "must be an IP address or a DNS name"}},
	{name: "node bare metal without Ironic node name", kind: "OpenStackDataPlaneNode", patch: `spec: {preProvisioned: false, bareMetal: {driver: fake-hardware}}`,
		want: []string{"spec.bareMetal.ironicNodeName", "Required value"}},
	{name: "node in cell0", kind: "OpenStackDataPlaneNode", patch: `metadata: {annotations: {nova.openstack.org/cell: cell0}}`,
		want: []string{"metadata.annotations[nova.openstack.org/cell]", "cell0 has no computes"}},
	{name: "node cell annotation not a cell name", kind: "OpenStackDataPlaneNode", patch: `metadata: {annotations: {nova.openstack.org/cell: "Cell One"}}`,
		want: []string{"metadata.annotations[nova.openstack.org/cell]", "is not a cell name"}},
	{name: "role cell annotation changed", kind: "OpenStackDataPlaneRole", update: true, patch: `metadata: {annotations: {nova.openstack.org/cell: cell2}}`,
		want: []string{"metadata.annotations[nova.openstack.org/cell]", "cannot change from cell1 to cell2"}},
	{name: "role cell annotation removed", kind: "OpenStackDataPlaneRole", update: true, patch: `metadata: {annotations: {nova.openstack.org/cell: null}}`,
		want: []string{"metadata.annotations[nova.openstack.org/cell]", "cannot be removed"}},
	{name: "node cell annotation changed", kind: "OpenStackDataPlaneNode", update: true,
		before: `metadata: {annotations: {nova.openstack.org/cell: cell1}}`, patch: `metadata: {annotations: {nova.openstack.org/cell: cell3}}`,
		want: []string{"metadata.annotations[nova.openstack.org/cell]", "cannot change from cell1 to cell3"}},
	{name: "node cell annotation removed", kind: "OpenStackDataPlaneNode", update: true,
		before: `metadata: {annotations: {nova.openstack.org/cell: cell1}}`, patch: `metadata: {annotations: null}`,
		want: []string{"metadata.annotations[nova.openstack.org/cell]", "cannot be removed"}},

	// The watch filter label (deploy/admission/watch-filter-label.yaml), on a namespaced and a
	// cluster-scoped kind.
	{name: "watch filter empty", kind: "NovaAPI", patch: `metadata: {labels: {stackflow.io/watch-filter: ""}}`,
		want: []string{"metadata.labels[stackflow.io/watch-filter]", "empty"}},
	{name: "watch filter added", kind: "OpenStackServer", update: true, patch: `metadata: {labels: {stackflow.io/watch-filter: run-a}}`,
		want: []string{"metadata.labels[stackflow.io/watch-filter]", "cannot be added"}},
	{name: "watch filter changed", kind: "KupenstackConfiguration", update: true,
		before: `metadata: {labels: {stackflow.io/watch-filter: run-a}}`, patch: `metadata: {labels: {stackflow.io/watch-filter: run-b}}`,
		want: []string{"metadata.labels[stackflow.io/watch-filter]", "cannot change from run-a to run-b"}},
	{name: "watch filter removed", kind: "OpenStackDataPlaneNode", update: true,
		before: `metadata: {labels: {stackflow.io/watch-filter: run-a}}`, patch: `metadata: {labels: {stackflow.io/watch-filter: null}}`,
		want: []string{"metadata.labels[stackflow.io/watch-filter]", "cannot be removed"}},

	// Nova.
	{name: "external compute changes cell", kind: "NovaExternalCompute", update: true, patch: `spec: {cellName: cell2}`,
		want: []string{"spec.cellName", "cellName is immutable once set"}},
	{name: "external compute in cell0", kind: "NovaExternalCompute", patch: `spec: {cellName: cell0}`,
		want: []string{"spec.cellName", "cell0 has no computes"}},
	{name: "external compute without SSH key secret", kind: "NovaExternalCompute", patch: `spec: {sshKeySecretName: null}`,
		want: []string{"spec.sshKeySecretName", "Required value"}},
	{name: "external compute config is JSON", kind: "NovaExternalCompute", patch: `spec: {customServiceConfig: "{\"DEFAULT\": {\"debug\": true}}"}`,
		want: []string{"spec.customServiceConfig", "must be a [section] header"}},
	{name: "external compute image reference invalid", kind: "NovaExternalCompute", patch: `spec: {novaComputeImage: "Quay.io/Bad Image"}`,
		want: []string{"spec.novaComputeImage", "should match"}},
	{name: "API without keystone URL", kind: "NovaAPI", patch: `spec: {keystoneAuthURL: null}`,
		want: []string{"spec.keystoneAuthURL", "keystoneAuthURL is required"}},
	{name: "Nova naming no keystone", kind: "Nova", patch: `spec: {keystoneAuthURL: null, keystoneAdminSecret: null}`,
		want: []string{"spec.keystoneAuthURL", "keystoneAuthURL or keystoneAdminSecret is required"}},
	{name: "Nova keystone admin secret not a name", kind: "Nova", patch: `spec: {keystoneAdminSecret: "Keystone Clouds"}`,
		want: []string{"spec.keystoneAdminSecret", "should match"}},
	{name: "API keystone URL not http", kind: "NovaAPI", patch: `spec: {keystoneAuthURL: "ftp://127.0.0.1/v3"}`,
		want: []string{"spec.keystoneAuthURL", "must be an http or https URL"}},
	{name: "API too many replicas", kind: "NovaAPI", patch: `spec: {replicas: 100}`,
		want: []string{"spec.replicas", "less than or equal to 32"}},
	{name: "API config line neither option nor section", kind: "NovaAPI", patch: "spec: {customServiceConfig: \"[DEFAULT]\\ndebug true\\n\"}",
		want: []string{"spec.customServiceConfig", "every line must be a [section] header"}},
	{name: "API config carries a password", kind: "NovaAPI", patch: "spec: {customServiceConfig: \"[keystone_authtoken]\\npassword = s3cret\\n\"}",
		want: []string{"spec.customServiceConfig", "must not carry credentials"}},
	{name: "API config too long", kind: "NovaAPI", patch: "spec: {customServiceConfig: \"[DEFAULT]\\n" + strings.Repeat("# padding padding padding padding\\n", 1000) + "\"}",
		want: []string{"spec.customServiceConfig", "Too long"}},
	{name: "API without password secret", kind: "NovaAPI", patch: `spec: {secret: null}`,
		want: []string{"spec.secret", "Required value"}},
	{name: "API database hostname invalid", kind: "NovaAPI", patch: `spec: {apiDatabaseHostname: "db_host!"}`,
		want: []string{"spec.apiDatabaseHostname", "must be an IP address or a DNS name"}},
	{name: "scheduler without message bus", kind: "NovaScheduler", patch: `spec: {transportURLSecret: null}`,
		want: []string{"spec.transportURLSecret", "Required value"}},
	{name: "superconductor without API database", kind: "NovaConductor", patch: `spec: {cellName: cell0}`,
		want: []string{"spec.apiDatabaseHostname", "superconductor"}},
	{name: "conductor changes cell", kind: "NovaConductor", update: true, patch: `spec: {cellName: cell3}`,
		want: []string{"spec.cellName", "cellName is immutable"}},
	{name: "global metadata without API database", kind: "NovaMetadata", patch: `spec: {cellName: null}`,
		want: []string{"spec.apiDatabaseHostname", "global metadata service"}},
	{name: "console proxy in cell0", kind: "NovaNoVNCProxy", patch: `spec: {cellName: cell0}`,
		want: []string{"spec.cellName", "cell0 has no console proxy"}},
	{name: "cell0 with console proxy", kind: "NovaCell", patch: `spec: {cellName: cell0, apiDatabaseHostname: 127.0.0.1, noVNCProxyServiceTemplate: {enabled: true}}`,
		want: []string{"spec.noVNCProxyServiceTemplate.enabled", "cell0 has no console proxy"}},
	{name: "cell name not DNS-1123", kind: "NovaCell", patch: `spec: {cellName: Cell_2}`,
		want: []string{"spec.cellName", "should match"}},
	{name: "Nova without cell0", kind: "Nova", patch: `spec: {cellTemplates: {cell0: null}}`,
		want: []string{"spec.cellTemplates", "cellTemplates must contain cell0"}},
	{name: "Nova metadata both global and per cell", kind: "Nova", patch: `spec: {metadataServiceTemplate: {enabled: true}, cellTemplates: {cell1: {metadataServiceTemplate: {enabled: true}}}}`,
		want: []string{"spec.metadataServiceTemplate", "metadata is either global or per cell"}},
	{name: "Nova cell without message bus", kind: "Nova", patch: `spec: {cellTemplates: {cell1: {cellMessageBus: null}}}`,
		want: []string{"spec.cellTemplates", "every cell but cell0 needs cellMessageBus"}},
	{name: "Nova cell template key not a cell name", kind: "Nova", patch: `spec: {cellTemplates: {Cell_2: {cellDatabase: {hostname: 127.0.0.1}, cellMessageBus: {transportURLSecret: cell1-transport}}}}`,
		want: []string{"spec.cellTemplates", "cellTemplates keys are cell names"}},
	{name: "Nova without API database", kind: "Nova", patch: `spec: {apiDatabase: null}`,
		want: []string{"spec.apiDatabase", "Required value"}},
	{name: "Nova cell template config not INI", kind: "Nova", patch: `spec: {cellTemplates: {cell1: {conductorServiceTemplate: {customServiceConfig: "debug: true"}}}}`,
		want: []string{"spec.cellTemplates[cell1].conductorServiceTemplate.customServiceConfig", "[section] header"}},

	// Limited runs.
	{name: "limited run of an unknown service", kind: "OpenStackDataPlaneDeployment", patch: `spec: {services: [nova-api]}`,
		want: []string{"spec.services[0]", "Unsupported value"}},
	{name: "limited run tag with a comma", kind: "OpenStackDataPlaneDeployment", patch: `spec: {tags: ["config,restart"]}`,
		want: []string{"spec.tags[0]", "should match"}},
	{name: "limited run with no parallelism", kind: "OpenStackDataPlaneDeployment", patch: `spec: {maxParallel: 0}`,
		want: []string{"spec.maxParallel", "greater than or equal to 1"}},
	{name: "limited run changed after creation", kind: "OpenStackDataPlaneDeployment", update: true, patch: `spec: {nodes: [edpm-compute-1]}`,
		want: []string{"spec", "immutable"}},

	// Neutron.
	{name: "metadata agent without node", kind: "OVNMetadataAgent", patch: `spec: {dataplaneNodeName: null}`,
		want: []string{"spec.dataplaneNodeName", "Required value"}},
	{name: "metadata agent SSH port zero", kind: "OVNMetadataAgent", patch: `spec: {ansiblePort: 0}`,
		want: []string{"spec.ansiblePort", "greater than or equal to 1"}},
	{name: "metadata agent config carries a transport URL", kind: "OVNMetadataAgent", patch: "spec: {customServiceConfig: \"[DEFAULT]\\ntransport_url = rabbit://u:p@127.0.0.1/\\n\"}",
		want: []string{"spec.customServiceConfig", "must not carry credentials"}},

	// KupenStack.
	{name: "OpenStack node of unknown type", kind: "OpenstackNode", patch: `spec: {type: storage}`,
		want: []string{"spec.type", "Unsupported value"}},
	{name: "profile chart version not semantic", kind: "OpenStackCloudConfigurationProfile", patch: `spec: {components: {keystone: {chart: {repository: "https://charts.example.test/openstack", name: keystone, version: latest}}}}`,
		want: []string{"spec.components.keystone.chart.version", "should match"}},
	{name: "profile chart repository not a URL", kind: "OpenStackCloudConfigurationProfile", patch: `spec: {components: {keystone: {chart: {repository: "not a url", name: keystone, version: 0.3.1}}}}`,
		want: []string{"spec.components[keystone].chart.repository", "repository must be an http, https, oci or file URL"}},
	{name: "profile of unknown component", kind: "OpenStackCloudConfigurationProfile", patch: `spec: {components: {swift: {enabled: true}}}`,
		want: []string{"spec.components", "components keys must be known components"}},
	{name: "profile derived from itself", kind: "OpenStackCloudConfigurationProfile", patch: `spec: {from: $NAME}`,
		want: []string{"spec.from must name another profile"}},
	{name: "profile image override not an image", kind: "OpenStackCloudConfigurationProfile", patch: `spec: {components: {nova: {images: {nova_api: "not an image!"}}}}`,
		want: []string{"spec.components.nova.images.nova_api", "should match"}},
	{name: "configuration without default profile", kind: "KupenstackConfiguration", patch: `spec: {defaultProfile: null}`,
		want: []string{"spec.defaultProfile", "Required value"}},
	{name: "configuration node of unknown type", kind: "KupenstackConfiguration", patch: `spec: {nodes: [{name: control-0, type: worker}]}`,
		want: []string{"spec.nodes[0].type", "Unsupported value"}},
	{name: "configuration lists a node twice", kind: "KupenstackConfiguration", patch: `spec: {nodes: [{name: control-0, type: control}, {name: control-0, type: compute}]}`,
		want: []string{"spec.nodes[1]", "Duplicate value"}},

	// Servers and bastions.
	{name: "server with flavor and flavorID", kind: "OpenStackServer", patch: `spec: {flavorID: "1"}`,
		want: []string{"spec", "exactly one of flavor or flavorID"}},
	{name: "server image ID not a UUID", kind: "OpenStackServer", patch: `spec: {image: {filter: null, id: not-a-uuid}}`,
		want: []string{"spec.image.id", "uuid"}},
	{name: "server image by ID and filter", kind: "OpenStackServer", patch: `spec: {image: {id: 0b6a5b3c-2c39-4b1e-9a1e-4c6f1f0b9a11}}`,
		want: []string{"spec.image", "exactly one of image id or image filter"}},
	{name: "server without ports", kind: "OpenStackServer", patch: `spec: {ports: null}`,
		want: []string{"spec.ports", "Required value"}},
	{name: "server fixed IP not an address", kind: "OpenStackServer", patch: `spec: {ports: [{fixedIPs: [{ipAddress: 999.1.1.1}]}]}`,
		want: []string{"spec.ports[0].fixedIPs[0].ipAddress", "must be an IPv4 or IPv6 address"}},
	{name: "server port tag with a comma", kind: "OpenStackServer", patch: `spec: {ports: [{network: {filter: {name: private}}, tags: ["a,b"]}]}`,
		want: []string{"spec.ports[0].tags[0]", "should match"}},
	{name: "server identity without cloud name", kind: "OpenStackServer", patch: `spec: {identityRef: {cloudName: null}}`,
		want: []string{"spec.identityRef.cloudName", "Required value"}},
	{name: "server spec changed", kind: "OpenStackServer", update: true, patch: `spec: {flavor: m1.small}`,
		want: []string{"spec", "OpenStackServer spec is immutable"}},
	{name: "machine flavor changed", kind: "OpenStackMachine", update: true, patch: `spec: {flavor: m1.small}`,
		want: []string{"spec", "OpenStackMachine spec is immutable"}},
	{name: "machine tags added", kind: "OpenStackMachine", update: true, patch: `spec: {tags: [late]}`,
		want: []string{"spec", "OpenStackMachine spec is immutable"}},
	{name: "machine providerID changed once set", kind: "OpenStackMachine", update: true,
		before: `spec: {providerID: "openstack:///0b6a5b3c-2c39-4b1e-9a1e-4c6f1f0b9a11"}`, patch: `spec: {providerID: "openstack:///1c7b6c4d-3d4a-4c2f-8b2f-5d7a2a1c8b22"}`,
		want: []string{"spec", "spec.providerID is immutable once set"}},
	{name: "machine block device named root", kind: "OpenStackMachine", patch: `spec: {additionalBlockDevices: [{name: root, sizeGiB: 1, storage: {type: Local}}]}`,
		want: []string{"spec.additionalBlockDevices[0].name", "reserved"}},
	{name: "machine block device storage type unknown", kind: "OpenStackMachine", patch: `spec: {additionalBlockDevices: [{name: data, sizeGiB: 1, storage: {type: Tape}}]}`,
		want: []string{"spec.additionalBlockDevices[0].storage.type", "Unsupported value"}},
	{name: "bastion enabled without spec", kind: "OpenStackCluster", patch: `spec: {bastion: {spec: null}}`,
		want: []string{"spec.bastion.spec", "bastion.spec is required when the bastion is enabled"}},
	{name: "bastion floating IP not an address", kind: "OpenStackCluster", patch: `spec: {bastion: {floatingIP: not-an-ip}}`,
		want: []string{"spec.bastion.floatingIP", "floatingIP must be an IP address"}},
	{name: "cluster without identity", kind: "OpenStackCluster", patch: `spec: {identityRef: null}`,
		want: []string{"spec.identityRef", "Required value"}},
}

// TestRefusesMalformedObjects creates (or updates) each malformed object against the real API server and
// expects a refusal naming the field.
func TestRefusesMalformedObjects(t *testing.T) {
	kinds := map[string]bool{}
	for i, c := range refused {
		kinds[c.kind] = true
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			obj := sample(t, c.kind, fmt.Sprintf("bad-%d", i))
			res := resource(t, c.kind)
			var err error
			if c.update {
				applyPatch(t, obj, c.before)
				created, cerr := res.Create(ctx, obj, metav1.CreateOptions{})
				if cerr != nil {
					t.Fatalf("create the valid %s first: %v", c.kind, cerr)
				}
				defer res.Delete(context.Background(), created.GetName(), metav1.DeleteOptions{})
				err = updateWithPatch(ctx, t, res, created.GetName(), c.patch)
			} else {
				applyPatch(t, obj, c.before)
				applyPatch(t, obj, c.patch)
				var created *unstructured.Unstructured
				created, err = res.Create(ctx, obj, metav1.CreateOptions{})
				if err == nil {
					_ = res.Delete(context.Background(), created.GetName(), metav1.DeleteOptions{})
				}
			}
			if err == nil {
				t.Fatalf("the API server accepted the malformed %s; want a refusal containing %q", c.kind, c.want)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("refusal does not contain %q:\n%v", w, err)
				}
			}
		})
	}
	if len(refused) < 30 || len(kinds) < 18 {
		t.Errorf("the table covers %d cases over %d kinds; want at least 30 cases over all 18 kinds", len(refused), len(kinds))
	}
}

// accepted are legitimate updates the immutability rules must not refuse.
var accepted = []change{
	{name: "role gets its cell annotation", kind: "OpenStackDataPlaneRole", update: true,
		before: `metadata: {annotations: null}`, patch: `metadata: {annotations: {nova.openstack.org/cell: cell1}}`},
	{name: "role gets another annotation", kind: "OpenStackDataPlaneRole", update: true, patch: `metadata: {annotations: {example.com/owner: team-a}}`},
	{name: "node keeps its cell and changes spec", kind: "OpenStackDataPlaneNode", update: true,
		before: `metadata: {annotations: {nova.openstack.org/cell: cell1}}`, patch: `spec: {deploy: false}`},
	{name: "labelled object changes spec and other labels", kind: "OpenStackServer", update: true,
		before: `metadata: {labels: {stackflow.io/watch-filter: run-a}}`, patch: `metadata: {labels: {example.com/pool: a}}`},
	{name: "external compute changes its config", kind: "NovaExternalCompute", update: true, patch: "spec: {customServiceConfig: \"[DEFAULT]\\ndebug = true\\n\"}"},
	{name: "machine providerID set once", kind: "OpenStackMachine", update: true, patch: `spec: {providerID: "openstack:///0b6a5b3c-2c39-4b1e-9a1e-4c6f1f0b9a11"}`},
	{name: "machine labels change", kind: "OpenStackMachine", update: true, patch: `metadata: {labels: {example.com/pool: a}}`},
	{name: "bastion spec changes", kind: "OpenStackCluster", update: true, patch: `spec: {bastion: {spec: {flavor: m1.small}}}`},
	{name: "config with comments, continuation and colon options", kind: "NovaAPI", update: true,
		patch: "spec: {customServiceConfig: \"\\n# a comment\\n; another\\n[DEFAULT]\\ndebug: true\\nenabled_apis = osapi_compute,\\n  metadata\\n\\n[api]\\nmax_limit=5\\n\"}"},
}

// TestAcceptsLegitimateUpdates proves the immutability and format rules refuse only what they should.
func TestAcceptsLegitimateUpdates(t *testing.T) {
	for i, c := range accepted {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			obj := sample(t, c.kind, fmt.Sprintf("good-%d", i))
			res := resource(t, c.kind)
			applyPatch(t, obj, c.before)
			created, err := res.Create(ctx, obj, metav1.CreateOptions{})
			if err != nil {
				t.Fatalf("create %s: %v", c.kind, err)
			}
			defer res.Delete(context.Background(), created.GetName(), metav1.DeleteOptions{})
			if err := updateWithPatch(ctx, t, res, created.GetName(), c.patch); err != nil {
				t.Fatalf("legitimate update of %s refused: %v", c.kind, err)
			}
		})
	}
}

// updateWithPatch reads the object, merges patch into it and updates it; it reads again on a conflict,
// because a running bridge may add its finalizer meanwhile, which is no refusal.
func updateWithPatch(ctx context.Context, t *testing.T, res dynamic.ResourceInterface, name, patch string) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := res.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		applyPatch(t, cur, patch)
		_, err = res.Update(ctx, cur, metav1.UpdateOptions{})
		return err
	})
}

// applyPatch merges a YAML merge patch into obj; $NAME stands for the object's name.
func applyPatch(t *testing.T, obj *unstructured.Unstructured, patch string) {
	t.Helper()
	if patch == "" {
		return
	}
	var p map[string]any
	if err := yaml.Unmarshal([]byte(strings.ReplaceAll(patch, "$NAME", obj.GetName())), &p); err != nil {
		t.Fatalf("patch %q: %v", patch, err)
	}
	mergePatch(obj.Object, p)
}
