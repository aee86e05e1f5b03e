package nova

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	rabbithole "github.com/michaelklishin/rabbit-hole/v2"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/stackflow/stackflow/tests/e2e"
)

// Resources of the kinds the test creates.
var (
	gvrNova      = schema.GroupVersionResource{Group: "nova.openstack.org", Version: "v1beta1", Resource: "novas"}
	gvrCell      = schema.GroupVersionResource{Group: "nova.openstack.org", Version: "v1beta1", Resource: "novacells"}
	gvrAPI       = schema.GroupVersionResource{Group: "nova.openstack.org", Version: "v1beta1", Resource: "novaapis"}
	gvrScheduler = schema.GroupVersionResource{Group: "nova.openstack.org", Version: "v1beta1", Resource: "novaschedulers"}
	gvrConductor = schema.GroupVersionResource{Group: "nova.openstack.org", Version: "v1beta1", Resource: "novaconductors"}
	gvrMetadata  = schema.GroupVersionResource{Group: "nova.openstack.org", Version: "v1beta1", Resource: "novametadata"}
	gvrNEC       = schema.GroupVersionResource{Group: "nova.openstack.org", Version: "v1beta1", Resource: "novaexternalcomputes"}
	gvrRole      = schema.GroupVersionResource{Group: "dataplane.openstack.org", Version: "v1beta1", Resource: "openstackdataplaneroles"}
	gvrNode      = schema.GroupVersionResource{Group: "dataplane.openstack.org", Version: "v1beta1", Resource: "openstackdataplanenodes"}
)

// servedKinds are the kinds the test's bridge serves: the Nova control plane and the data plane's
// computes.
const servedKinds = "Nova,NovaCell,NovaAPI,NovaScheduler,NovaConductor,NovaMetadata,NovaNoVNCProxy," +
	"OpenStackDataPlane,OpenStackDataPlaneRole,OpenStackDataPlaneNode,NovaExternalCompute"

// create creates an object from YAML in the run's namespace; unless the test deleted it, it is deleted
// (waiting until it is gone) when the test ends.
func create(t *testing.T, gvr schema.GroupVersionResource, manifest string) *unstructured.Unstructured {
	t.Helper()
	return env.Create(t, gvr, ns, manifest)
}

func deleteAndWait(t *testing.T, gvr schema.GroupVersionResource, name string) {
	t.Helper()
	env.DeleteAndWaitT(t, gvr, ns, name)
}

func get(t *testing.T, gvr schema.GroupVersionResource, name string) *unstructured.Unstructured {
	t.Helper()
	return env.Get(t, gvr, ns, name)
}

// waitReady waits until the object acted on its newest generation and is Ready.
func waitReady(t *testing.T, gvr schema.GroupVersionResource, name string, timeout time.Duration) {
	t.Helper()
	e2e.WaitFor(t, gvr.Resource+" "+name+" Ready", timeout, func() (bool, string) {
		u := get(t, gvr, name)
		return e2e.Ready(u), e2e.Summary(u)
	})
}

// waitCondition waits until the object's condition typ has the reason.
func waitCondition(t *testing.T, gvr schema.GroupVersionResource, name, typ, reason string, timeout time.Duration) *metav1.Condition {
	t.Helper()
	var c *metav1.Condition
	e2e.WaitFor(t, fmt.Sprintf("%s %s %s=%s", gvr.Resource, name, typ, reason), timeout, func() (bool, string) {
		c = e2e.Condition(get(t, gvr, name), typ)
		return c != nil && c.Reason == reason, e2e.CondString(c)
	})
	return c
}

func patch(t *testing.T, gvr schema.GroupVersionResource, name, mergePatch string) {
	t.Helper()
	_, err := env.Dyn.Resource(gvr).Namespace(ns).Patch(context.Background(), name, "application/merge-patch+json", []byte(mergePatch), metav1.PatchOptions{})
	require.NoError(t, err, "patch %s %s", gvr.Resource, name)
}

// service is the main process of a service instance's running pod: a container on the real node, whose
// root /proc/PID/root shows as its process sees it.
type service struct {
	pod  string
	uid  string
	node string
	ip   string
	pid  int
}

// runningService finds the running pod of a Deployment (by its instance label) and its main process.
func runningService(t *testing.T, instance string) (service, bool) {
	t.Helper()
	ctx := context.Background()
	pods, err := env.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=" + instance})
	require.NoError(t, err)
	for _, p := range pods.Items {
		if p.Labels["stackflow.io/job"] != "" {
			continue
		}
		if pid := e2e.RunningContainerPID(ctx, env.Stack, p); pid != 0 {
			return service{pod: p.Name, uid: string(p.UID), node: p.Spec.NodeName, ip: p.Status.PodIP, pid: pid}, true
		}
	}
	return service{}, false
}

func mustService(t *testing.T, instance string) service {
	t.Helper()
	s, ok := runningService(t, instance)
	require.True(t, ok, "no running pod of %s", instance)
	return s
}

// mergedConfig is the path, seen from this machine, of the nova.conf the service's process loaded.
func (s service) mergedConfig() string {
	return fmt.Sprintf("/proc/%d/root/var/lib/openstack/config/nova.conf", s.pid)
}

// mappedCells is the path, seen from this machine, of the list of cells the API or the scheduler found
// mapped when it started.
func (s service) mappedCells() string {
	return fmt.Sprintf("/proc/%d/root/var/lib/openstack/config/mapped-cells", s.pid)
}

// log is the service's container log, as kubectl logs shows it.
func (s service) log(t *testing.T, container string) string {
	b, err := env.Kube.CoreV1().Pods(ns).GetLogs(s.pod, &corev1.PodLogOptions{Container: container}).DoRaw(context.Background())
	require.NoError(t, err)
	return string(b)
}

// cellRow is a line of nova-manage cell_v2 list_cells (passwords masked by nova-manage).
type cellRow struct{ uuid, transport, database string }

// listCells runs nova-manage cell_v2 list_cells with a service's configuration: the cells of this Nova's
// API database, as an operator sees them.
func listCells(t *testing.T, conf string) (map[string]cellRow, []string) {
	t.Helper()
	out := e2e.NovaManage(t, conf, "cell_v2", "list_cells")
	rows := map[string]cellRow{}
	var names []string
	for _, line := range strings.Split(out, "\n") {
		cols := strings.Split(strings.Trim(strings.TrimSpace(line), "|"), "|")
		if len(cols) < 4 || !strings.HasPrefix(strings.TrimSpace(line), "|") {
			continue
		}
		for i := range cols {
			cols[i] = strings.TrimSpace(cols[i])
		}
		if cols[0] == "Name" {
			continue
		}
		names = append(names, cols[0])
		rows[cols[0]] = cellRow{uuid: cols[1], transport: cols[2], database: cols[3]}
	}
	slices.Sort(names)
	return rows, names
}

// listHosts maps the hosts of nova-manage cell_v2 list_hosts to their cells.
func listHosts(t *testing.T, conf string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, line := range strings.Split(e2e.NovaManage(t, conf, "cell_v2", "list_hosts"), "\n") {
		cols := strings.Split(strings.Trim(strings.TrimSpace(line), "|"), "|")
		if len(cols) >= 3 {
			out[strings.TrimSpace(cols[2])] = strings.TrimSpace(cols[0])
		}
	}
	return out
}

// secretValue reads one key of a Secret of the run's namespace.
func secretValue(t *testing.T, name, key string) string {
	t.Helper()
	sec, err := env.Kube.CoreV1().Secrets(ns).Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(t, err)
	require.NotEmpty(t, sec.Data[key], "Secret %s key %s", name, key)
	return string(sec.Data[key])
}

// databases and users of the run on the stack's MariaDB (their names start with the run).
func databases(t *testing.T, db *sql.DB) []string {
	return e2e.QueryStrings(t, db, "SELECT SCHEMA_NAME FROM information_schema.SCHEMATA WHERE SCHEMA_NAME LIKE ?", env.Run+`\_%`)
}

func users(t *testing.T, db *sql.DB) []string {
	return e2e.QueryStrings(t, db, "SELECT User FROM mysql.user WHERE User LIKE ?", env.Run+`\_%`)
}

// vhosts of the run's namespace on the stack's RabbitMQ (their names start with the namespace).
func vhosts(t *testing.T, c *rabbithole.Client) []string {
	t.Helper()
	all, err := c.ListVhosts()
	require.NoError(t, err)
	var out []string
	for _, v := range all {
		if strings.HasPrefix(v.Name, ns+"-") {
			out = append(out, v.Name)
		}
	}
	slices.Sort(out)
	return out
}

// forbidSecrets adds every credential of every Secret of the run's namespace (passwords, transport URLs,
// keys: every value of 8 characters or more but addresses and user names), as it is and URL-escaped, to
// the values no workflow history may hold in clear (env.RunTests scans them).
func forbidSecrets(t *testing.T) {
	t.Helper()
	require.NoError(t, env.ForbidSecrets(context.Background(), ns))
}
