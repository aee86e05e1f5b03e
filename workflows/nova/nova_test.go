package nova

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/stackflow/stackflow/activities/kube"
	"github.com/stackflow/stackflow/activities/openstack"
	"github.com/stackflow/stackflow/api/lifecycle"
	novav1beta1 "github.com/stackflow/stackflow/api/nova/v1beta1"
)

func TestNovaPlan(t *testing.T) {
	ref := lifecycle.ObjectRef{Group: "nova.openstack.org", Version: "v1beta1", Kind: KindNova, Namespace: "ns", Name: "nova", UID: "u"}
	managed := func(db string) novav1beta1.DatabaseAccess {
		return novav1beta1.DatabaseAccess{Hostname: "127.0.0.1", Database: db, AdminSecret: "mariadb-admin"}
	}
	spec := novav1beta1.NovaSpec{
		NovaServiceAuth: novav1beta1.NovaServiceAuth{Secret: "osp-secret", KeystoneAuthURL: "http://198.51.100.1:5000/v3"},
		NodeSelector:    map[string]string{"stackflow.io/pod-runner": "host"},
		APIDatabase:     managed("r1_api"),
		APIMessageBus:   novav1beta1.MessageBusAccess{AdminSecret: "rabbitmq-admin", TransportURLSecret: "nova-api-transport"},
		CellTemplates: map[string]novav1beta1.NovaCellTemplate{
			"cell0": {CellDatabase: managed("r1_cell0")},
			"cell1": {CellDatabase: managed("r1_cell1"), CellMessageBus: &novav1beta1.MessageBusAccess{AdminSecret: "rabbitmq-admin", TransportURLSecret: "nova-cell1-transport"}},
			// An existing database and bus: passwords come from spec.secret.
			"cell2": {CellDatabase: novav1beta1.DatabaseAccess{Hostname: "127.0.0.1", Database: "legacy"}, CellMessageBus: &novav1beta1.MessageBusAccess{TransportURLSecret: "cell2-transport"}},
		},
	}
	p, err := NovaPlanFor(ref, spec)
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"api", "cell-cell0", "cell-cell1"}, keysOf(p.Databases))
	require.Equal(t, "r1_cell1", p.Databases["cell-cell1"].User, "the user defaults to the database's name")
	require.Equal(t, "nova-secret", p.Databases["api"].Password.Name)
	require.Equal(t, map[string]string{CellDatabaseKey("cell2"): "NovaCellDatabasePassword"}, p.Copied)
	require.ElementsMatch(t, []string{"api", "cell1"}, keysOf(p.Vhosts))
	require.Equal(t, "ns-nova-cell1", p.Vhosts["cell1"].Vhost)
	require.Equal(t, "nova-cell1-transport", p.Vhosts["cell1"].TransportURL.Name)

	c0, c1 := p.Cells["cell0"], p.Cells["cell1"]
	require.Equal(t, "nova-api-transport", c0.TransportURLSecret, "cell0 uses the API message bus")
	require.Equal(t, "nova-cell1-transport", c1.TransportURLSecret)
	require.Equal(t, "nova-secret", c1.Secret, "cells get the handed-down Secret")
	require.Equal(t, CellDatabaseKey("cell1"), c1.PasswordSelectors.CellDatabase)
	require.Equal(t, "r1_api", c1.APIDatabaseName)
	require.Equal(t, "127.0.0.1", c1.APIDatabaseHostname, "every cell can map itself")
	require.False(t, c1.HasAPIAccess)
	require.Equal(t, spec.NodeSelector, c1.ConductorServiceTemplate.NodeSelector)
	require.Contains(t, p.Services, KindNovaAPI+"/nova-api")
	require.Contains(t, p.Services, KindNovaScheduler+"/nova-scheduler")
	require.Contains(t, p.Services, KindNovaMetadata+"/nova-metadata", "metadata is global unless disabled")
	// The top-level services reach cell0's database too (their service records live there).
	sched := p.Services[KindNovaScheduler+"/nova-scheduler"].(novav1beta1.NovaSchedulerSpec)
	require.Equal(t, novav1beta1.Cell0Database{Cell0DatabaseHostname: "127.0.0.1", Cell0DatabaseUser: "r1_cell0"}, sched.Cell0Database)
	require.Equal(t, "r1_cell0", sched.CellDatabaseName)
	require.Equal(t, CellDatabaseKey("cell0"), sched.PasswordSelectors.CellDatabase)
	in, err := ServiceInstance(novaRef(KindNovaScheduler, "ns", "nova-scheduler"), mustJSON(t, sched))
	require.NoError(t, err)
	require.Equal(t, &DB{Host: "127.0.0.1", User: "r1_cell0", Database: "r1_cell0", PasswordKey: SecretKey(CellDatabaseKey("cell0"))}, in.CellDatabase)
	meta := p.Services[KindNovaMetadata+"/nova-metadata"].(novav1beta1.NovaMetadataSpec)
	in, err = ServiceInstance(novaRef(KindNovaMetadata, "ns", "nova-metadata"), mustJSON(t, meta))
	require.NoError(t, err)
	require.Equal(t, "r1_cell0", in.CellDatabase.Database, "the global metadata service's service record is in cell0")
	require.Equal(t, "r1_api", in.APIDatabase.Database)

	// Two managed databases of one server sharing a user are refused.
	bad := spec
	bad.CellTemplates = map[string]novav1beta1.NovaCellTemplate{"cell0": {CellDatabase: novav1beta1.DatabaseAccess{Hostname: "127.0.0.1", Database: "x", User: "r1_api", AdminSecret: "mariadb-admin"}}}
	_, err = NovaPlanFor(ref, bad)
	require.ErrorContains(t, err, "both name user r1_api")
}

// The Nova's node selector, tolerations and image fill what a template leaves unset; a template's own win.
func TestNovaDefaultsFillTemplates(t *testing.T) {
	ref := lifecycle.ObjectRef{Group: "nova.openstack.org", Version: "v1beta1", Kind: KindNova, Namespace: "ns", Name: "nova", UID: "u"}
	real := []corev1.Toleration{{Key: "stackflow.io/real-node", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
	own := []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "nova", Effect: corev1.TaintEffectNoSchedule}}
	db := novav1beta1.DatabaseAccess{Hostname: "198.51.100.1", Database: "x_cell0"}
	spec := novav1beta1.NovaSpec{
		NovaServiceAuth: novav1beta1.NovaServiceAuth{Secret: "osp-secret", KeystoneAuthURL: "http://198.51.100.1:5000/v3"},
		NodeSelector:    map[string]string{"stackflow.io/real-node": "true"}, Tolerations: real, ContainerImage: "stackflow.local/stackflow-nova:dev",
		APIDatabase:   novav1beta1.DatabaseAccess{Hostname: "198.51.100.1", Database: "x_api"},
		APIMessageBus: novav1beta1.MessageBusAccess{TransportURLSecret: "api-transport"},
		APIServiceTemplate: novav1beta1.NovaServiceBase{ContainerImage: "example.org/nova-api:1", Tolerations: own,
			NodeSelector: map[string]string{"role": "api"}},
		CellTemplates: map[string]novav1beta1.NovaCellTemplate{"cell0": {CellDatabase: db}},
	}
	p, err := NovaPlanFor(ref, spec)
	require.NoError(t, err)
	for _, tc := range []struct {
		name     string
		base     novav1beta1.NovaServiceBase
		image    string
		selector map[string]string
		tol      []corev1.Toleration
	}{
		{"the API's template sets its own", p.Services[KindNovaAPI+"/nova-api"].(novav1beta1.NovaAPISpec).NovaServiceBase, "example.org/nova-api:1", map[string]string{"role": "api"}, own},
		{"the scheduler's sets none", p.Services[KindNovaScheduler+"/nova-scheduler"].(novav1beta1.NovaSchedulerSpec).NovaServiceBase, spec.ContainerImage, spec.NodeSelector, real},
		{"a cell's conductor sets none", p.Cells["cell0"].ConductorServiceTemplate, spec.ContainerImage, spec.NodeSelector, real},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.image, tc.base.ContainerImage)
			require.Equal(t, tc.selector, tc.base.NodeSelector)
			require.Equal(t, tc.tol, tc.base.Tolerations)
		})
	}
	// What the scheduler's pods get.
	in, err := ServiceInstance(novaRef(KindNovaScheduler, "ns", "nova-scheduler"), mustJSON(t, p.Services[KindNovaScheduler+"/nova-scheduler"]))
	require.NoError(t, err)
	pod := in.Deployment("h").Spec.Template.Spec
	require.Equal(t, real, pod.Tolerations)
	require.Equal(t, spec.NodeSelector, pod.NodeSelector)
	require.Equal(t, spec.ContainerImage, pod.Containers[0].Image)
	require.Equal(t, spec.ContainerImage, pod.InitContainers[0].Image)
}

func TestCellChildren(t *testing.T) {
	on := true
	s := novav1beta1.NovaCellSpec{CellName: "cell1", MetadataServiceTemplate: novav1beta1.NovaMetadataTemplate{Enabled: &on}}
	require.ElementsMatch(t, []string{KindNovaConductor + "/c-conductor", KindNovaMetadata + "/c-metadata", KindNovaNoVNCProxy + "/c-novncproxy"}, keysOf(CellChildren("c", s)))
	s.CellName = "cell0"
	s.APIDatabaseHostname = "db"
	children := CellChildren("c", s)
	require.ElementsMatch(t, []string{KindNovaConductor + "/c-conductor"}, keysOf(children), "cell0: the superconductor alone")
	require.Equal(t, "db", children[KindNovaConductor+"/c-conductor"].(novav1beta1.NovaConductorSpec).APIDatabaseHostname)
}

func keysOf[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// A cell name is served once per API database: the oldest NovaCell claiming it keeps it.
func TestClaimedBy(t *testing.T) {
	cell := func(name, cellName, apiHost, apiDB, created string, deleting bool) kube.ListedObject {
		b, _ := json.Marshal(novav1beta1.NovaCellSpec{CellName: cellName, APIDatabaseHostname: apiHost, DatabaseNames: novav1beta1.DatabaseNames{APIDatabaseName: apiDB}})
		return kube.ListedObject{Ref: lifecycle.ObjectRef{Name: name}, Object: kube.Object{Spec: b, Deleting: deleting}, Created: created}
	}
	spec := novav1beta1.NovaCellSpec{CellName: "cell0", APIDatabaseHostname: "127.0.0.1", DatabaseNames: novav1beta1.DatabaseNames{APIDatabaseName: "r_api"}}
	for _, tc := range []struct {
		name  string
		cells []kube.ListedObject
		want  string
	}{
		{"alone", []kube.ListedObject{cell("self", "cell0", "127.0.0.1", "r_api", "2024-01-01T00:00:02Z", false)}, ""},
		{"an older claim wins", []kube.ListedObject{
			cell("nova-cell0", "cell0", "127.0.0.1", "r_api", "2024-01-01T00:00:01Z", false),
			cell("self", "cell0", "127.0.0.1", "r_api", "2024-01-01T00:00:02Z", false)}, "nova-cell0"},
		{"a younger claim loses", []kube.ListedObject{
			cell("self", "cell0", "127.0.0.1", "r_api", "2024-01-01T00:00:01Z", false),
			cell("later", "cell0", "127.0.0.1", "r_api", "2024-01-01T00:00:02Z", false)}, ""},
		{"same second: by name", []kube.ListedObject{
			cell("a", "cell0", "127.0.0.1", "r_api", "2024-01-01T00:00:01Z", false),
			cell("self", "cell0", "127.0.0.1", "r_api", "2024-01-01T00:00:01Z", false)}, "a"},
		{"another API database", []kube.ListedObject{
			cell("other", "cell0", "127.0.0.1", "other_api", "2024-01-01T00:00:01Z", false),
			cell("self", "cell0", "127.0.0.1", "r_api", "2024-01-01T00:00:02Z", false)}, ""},
		{"the default API database name", []kube.ListedObject{
			cell("other", "cell0", "127.0.0.1", "", "2024-01-01T00:00:01Z", false),
			cell("self", "cell0", "127.0.0.1", "nova_api", "2024-01-01T00:00:02Z", false)}, "other"},
		{"another cell name", []kube.ListedObject{
			cell("cell1", "cell1", "127.0.0.1", "r_api", "2024-01-01T00:00:01Z", false),
			cell("self", "cell0", "127.0.0.1", "r_api", "2024-01-01T00:00:02Z", false)}, ""},
		{"a claim being deleted", []kube.ListedObject{
			cell("going", "cell0", "127.0.0.1", "r_api", "2024-01-01T00:00:01Z", true),
			cell("self", "cell0", "127.0.0.1", "r_api", "2024-01-01T00:00:02Z", false)}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := spec
			if tc.name == "the default API database name" {
				s.APIDatabaseName = "nova_api"
			}
			require.Equal(t, tc.want, ClaimedBy("self", s, tc.cells))
		})
	}
}

func mustJSON(t *testing.T, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

// The API and the scheduler are given the cells mapped (not those being unmapped), so a cell mapped or
// unmapped restarts them; the other services are not touched.
func TestMappedCellsRestartTheAPIAndTheScheduler(t *testing.T) {
	rec := novaRecord{Cells: []string{"cell0", "cell2", "cell1"}, Unmapped: []string{"cell2"}}
	cells := mappedCells(rec)
	require.Equal(t, []string{"cell0", "cell1"}, cells)
	for _, tc := range []struct {
		spec any
		want []string
	}{
		{novav1beta1.NovaAPISpec{}, cells},
		{novav1beta1.NovaSchedulerSpec{}, cells},
		{novav1beta1.NovaMetadataSpec{}, nil},
		{novav1beta1.NovaConductorSpec{}, nil},
	} {
		raw, err := json.Marshal(withMappedCells(tc.spec, cells))
		require.NoError(t, err)
		var got struct {
			Cells []string `json:"cells"`
		}
		require.NoError(t, json.Unmarshal(raw, &got))
		require.Equal(t, tc.want, got.Cells, "%T", tc.spec)
	}
	// The list is an input of the API's configuration: a change rolls it, naming config-data.
	in := Instance{Service: API, Name: "nova-api", Cells: []string{"cell0", "cell1", "cell2"}}
	_, before := ConfigHash(in.ConfigData(), in.Scripts(), nil)
	in.Cells = cells
	require.Equal(t, "# The cells mapped when this service started: a change restarts it (it reads the mappings once).\ncell0\ncell1\n", in.ConfigData()[MappedCellsFile])
	_, after := ConfigHash(in.ConfigData(), in.Scripts(), nil)
	require.Equal(t, []string{"config-data"}, ChangedInputs(before, after))
}

// A service user the spec replaced is deleted, unless the services still log in as a user of that name.
func TestReplacedServiceUsers(t *testing.T) {
	user := func(secret, name string) openstack.ServiceUserInput {
		return openstack.ServiceUserInput{Admin: openstack.CloudSecret{Namespace: "ns", Name: secret}, User: name,
			Password: kube.SecretKeyRef{Namespace: "ns", Name: "nova-secret", Key: KeyService}}
	}
	a, b, aOther := user("keystone-clouds", "nova-a"), user("keystone-clouds", "nova-b"), user("other-clouds", "nova-a")
	for _, tc := range []struct {
		name         string
		recorded     []openstack.ServiceUserInput
		current      *openstack.ServiceUserInput
		inUse        string
		remove, keep []openstack.ServiceUserInput
	}{
		{name: "nothing recorded", inUse: "nova"},
		{name: "the current user stays", recorded: []openstack.ServiceUserInput{a}, current: &a, inUse: "nova-a", keep: []openstack.ServiceUserInput{a}},
		{name: "a renamed user goes", recorded: []openstack.ServiceUserInput{a, b}, current: &b, inUse: "nova-b",
			remove: []openstack.ServiceUserInput{a}, keep: []openstack.ServiceUserInput{b}},
		{name: "keystoneAdminSecret dropped, the user still in use stays", recorded: []openstack.ServiceUserInput{a}, inUse: "nova-a",
			keep: []openstack.ServiceUserInput{a}},
		{name: "keystoneAdminSecret dropped and the user renamed", recorded: []openstack.ServiceUserInput{a}, inUse: "nova",
			remove: []openstack.ServiceUserInput{a}},
		{name: "another administrator's Secret, same name: both stay", recorded: []openstack.ServiceUserInput{a, aOther}, current: &aOther, inUse: "nova-a",
			keep: []openstack.ServiceUserInput{a, aOther}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			remove, keep := replacedServiceUsers(tc.recorded, tc.current, tc.inUse)
			require.Equal(t, tc.remove, remove)
			require.Equal(t, tc.keep, keep)
		})
	}
}
