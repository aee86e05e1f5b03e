// Package nova holds the Nova control-plane family: one top-level Nova creating NovaCells and the
// service CRs (NovaAPI, NovaScheduler, NovaConductor, NovaMetadata, NovaNoVNCProxy), each service CR
// deployable on its own from Secrets.
//
// This file renders what a service instance runs, as pure functions: its two ConfigMaps
// (<name>-config-data: generated defaults, the credential template and the customServiceConfig, never a
// credential; <name>-scripts: the init merge and the commands), its Deployment and its Jobs, and the hash
// of every input that rolls the Deployment when it changes.
//
// How the configuration is put together in a pod: the init container mounts config-data, scripts and
// every Secret the credential template names, and runs merge_config.py, which fills the template from
// the Secrets and merges, in file-name order (later wins), 01-nova.conf (defaults), 02-credentials.conf
// and 99-custom.conf (customServiceConfig) into one nova.conf in config-data-merged (an emptyDir). The
// main container mounts only scripts and config-data-merged.
package nova

import (
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/stackflow/stackflow/activities/kube"
	"github.com/stackflow/stackflow/api/oslo"
)

// Service is the Nova program a service instance runs.
type Service string

// The Nova services.
const (
	API        Service = "nova-api"
	Scheduler  Service = "nova-scheduler"
	Conductor  Service = "nova-conductor"
	Metadata   Service = "nova-metadata"
	NoVNCProxy Service = "nova-novncproxy"
	// Cell is a NovaCell's own Jobs (cell mapping, host discovery, unmapping); it runs no Deployment.
	Cell Service = "nova-cell"
)

// Where things are inside the pods.
const (
	ConfigDataDir   = "/var/lib/config-data/default"
	MergedDir       = "/var/lib/openstack/config"
	ScriptsDir      = "/var/lib/openstack/bin"
	SecretsDir      = "/var/lib/openstack/secrets"
	StateDir        = "/var/lib/nova"
	TerminationLog  = "/var/lib/openstack/termination-log"
	MergedConfig    = MergedDir + "/nova.conf"
	DefaultsFile    = "01-nova.conf"
	CredentialsFile = "02-credentials.conf.tmpl"
	CustomFile      = "99-custom.conf"
)

// Default listen ports; customServiceConfig may change them (the workflow reads them back).
const (
	DefaultAPIPort        = 8774
	DefaultMetadataPort   = 8775
	DefaultNoVNCProxyPort = 6080
)

// DefaultImages are the images used when neither a template nor its Nova names one (the local stack's
// samples name the image `make images` builds of Debian's Nova packages).
var DefaultImages = map[Service]string{
	API:        "quay.io/podified-antelope-centos9/openstack-nova-api:current-podified",
	Scheduler:  "quay.io/podified-antelope-centos9/openstack-nova-scheduler:current-podified",
	Conductor:  "quay.io/podified-antelope-centos9/openstack-nova-conductor:current-podified",
	Metadata:   "quay.io/podified-antelope-centos9/openstack-nova-api:current-podified",
	NoVNCProxy: "quay.io/podified-antelope-centos9/openstack-nova-novncproxy:current-podified",
	Cell:       "quay.io/podified-antelope-centos9/openstack-nova-conductor:current-podified",
}

//go:embed files/api-paste.ini
var apiPaste string

//go:embed files/merge_config.py
var mergeConfigPy string

// DB is a database a service reaches: server, user, name, and the Secret key of the user's password.
type DB struct {
	Host     string
	Port     int32
	User     string
	Database string
	// PasswordKey is the key of the password in the instance's Secret.
	PasswordKey SecretKey
}

// SecretKey names a key of the instance's Secret: a reference the pod's init container resolves, never
// the value.
type SecretKey string

// Instance is one service instance, resolved from its CR: what its ConfigMaps, Deployment and Jobs are
// rendered from. It holds names of Secrets and keys, never values.
type Instance struct {
	Service   Service
	Name      string
	Namespace string
	Owner     kube.Owner
	Image     string
	Replicas  int32
	// NodeSelector places the pods.
	NodeSelector map[string]string
	// Tolerations let the pods onto tainted nodes.
	Tolerations []corev1.Toleration
	// CustomServiceConfig always wins over what is generated.
	CustomServiceConfig string
	// Secret holds the passwords (PasswordKey of each DB, ServicePasswordKey, MetadataSecretKey).
	Secret             string
	ServicePasswordKey SecretKey
	MetadataSecretKey  SecretKey
	ServiceUser        string
	KeystoneAuthURL    string
	// Region is the Keystone region of the compute API (the API registers its endpoints there).
	Region string
	// TransportURLSecret holds transport_url; empty for services without a message bus.
	TransportURLSecret string
	APIDatabase        *DB
	CellDatabase       *DB
	// CellName is the cell a conductor, per-cell metadata service, console proxy or NovaCell serves.
	CellName string
	// Port is where the API, metadata service or console proxy listens.
	Port int32
	// Cells are the cells mapped when the API or the scheduler starts (see MappedCellsFile).
	Cells []string
}

// host is the Nova host name of the instance's services: its CR's name, stable across rollouts, so a
// rolled pod takes over its predecessor's service record.
func (in Instance) host() string { return in.Name }

// ConfigDataName and ScriptsName are the instance's ConfigMaps.
func ConfigDataName(name string) string { return name + "-config-data" }

// ScriptsName is the instance's scripts ConfigMap.
func ScriptsName(name string) string { return name + "-scripts" }

// secretRef is the credential template's reference to a Secret key: ${raw:SECRET/KEY} is the value as
// is, ${url:SECRET/KEY} the value escaped for a URL's user-info.
func secretRef(mode, secret string, key SecretKey) string {
	return "${" + mode + ":" + secret + "/" + string(key) + "}"
}

func (in Instance) dbURL(db *DB) string {
	port := db.Port
	if port == 0 {
		port = 3306
	}
	return fmt.Sprintf("mysql+pymysql://%s:%s@%s:%d/%s?charset=utf8", db.User, secretRef("url", in.Secret, db.PasswordKey), db.Host, port, db.Database)
}

// keystoneClient sets the options of a keystoneauth client section that logs in as the service user.
func (in Instance) keystoneClient(ini oslo.INI, creds oslo.INI, section string) {
	ini.Set(section, "auth_type", "password")
	ini.Set(section, "auth_url", in.KeystoneAuthURL)
	ini.Set(section, "project_domain_name", "Default")
	ini.Set(section, "user_domain_name", "Default")
	ini.Set(section, "project_name", "service")
	ini.Set(section, "username", in.ServiceUser)
	// Pods reach the catalog's internal endpoints (a public one may be an address only outside the
	// cluster reaches: the local stack's are on loopback), as the computes do.
	ini.Set(section, "valid_interfaces", "internal")
	creds.Set(section, "password", secretRef("raw", in.Secret, in.ServicePasswordKey))
}

// Config is the instance's generated configuration: defaults (no credential) and the credential
// template (references to Secret keys only).
func (in Instance) Config() (defaults, creds oslo.INI) {
	d, c := oslo.INI{}, oslo.INI{}
	d.Set("DEFAULT", "host", in.host())
	d.Set("DEFAULT", "use_stderr", "true")
	d.Set("DEFAULT", "state_path", StateDir)
	d.Set("oslo_concurrency", "lock_path", StateDir+"/tmp")
	d.Set("oslo_messaging_notifications", "driver", "noop")
	d.Set("upgrade_levels", "compute", "auto")
	d.Set("vnc", "enabled", "false")
	if in.TransportURLSecret != "" {
		c.Set("DEFAULT", "transport_url", secretRef("raw", in.TransportURLSecret, "transport_url"))
	}
	if in.APIDatabase != nil {
		c.Set("api_database", "connection", in.dbURL(in.APIDatabase))
	}
	if in.CellDatabase != nil {
		c.Set("database", "connection", in.dbURL(in.CellDatabase))
	}
	client := func() {
		for _, s := range []string{"placement", "neutron", "service_user"} {
			in.keystoneClient(d, c, s)
		}
		d.Set("service_user", "send_service_user_token", "true")
	}
	authtoken := func() {
		d.Set("keystone_authtoken", "www_authenticate_uri", in.KeystoneAuthURL)
		in.keystoneClient(d, c, "keystone_authtoken")
		d.Set("keystone_authtoken", "service_token_roles_required", "true")
	}
	switch in.Service {
	case API:
		d.Set("DEFAULT", "enabled_apis", "osapi_compute")
		d.Set("DEFAULT", "osapi_compute_listen", "0.0.0.0")
		d.Set("DEFAULT", "osapi_compute_listen_port", strconv.Itoa(int(in.Port)))
		d.Set("DEFAULT", "osapi_compute_workers", "1")
		d.Set("api", "auth_strategy", "keystone")
		d.Set("wsgi", "api_paste_config", MergedDir+"/api-paste.ini")
		authtoken()
		client()
	case Scheduler:
		d.Set("scheduler", "workers", "1")
		// New computes are mapped into their cells by the scheduler, every 30 s.
		d.Set("scheduler", "discover_hosts_in_cells_interval", "30")
		client()
	case Conductor:
		d.Set("conductor", "workers", "1")
		client()
	case Metadata:
		d.Set("DEFAULT", "enabled_apis", "metadata")
		d.Set("DEFAULT", "metadata_listen", "0.0.0.0")
		d.Set("DEFAULT", "metadata_listen_port", strconv.Itoa(int(in.Port)))
		d.Set("DEFAULT", "metadata_workers", "1")
		d.Set("wsgi", "api_paste_config", MergedDir+"/api-paste.ini")
		d.Set("api", "local_metadata_per_cell", strconv.FormatBool(in.CellName != ""))
		d.Set("neutron", "service_metadata_proxy", "true")
		if in.MetadataSecretKey != "" {
			c.Set("neutron", "metadata_proxy_shared_secret", secretRef("raw", in.Secret, in.MetadataSecretKey))
		}
		authtoken()
		client()
	case NoVNCProxy:
		d.Set("vnc", "enabled", "true")
		d.Set("vnc", "novncproxy_host", "0.0.0.0")
		d.Set("vnc", "novncproxy_port", strconv.Itoa(int(in.Port)))
	}
	return d, c
}

// ConfigData is the <name>-config-data ConfigMap's data.
func (in Instance) ConfigData() map[string]string {
	d, c := in.Config()
	out := map[string]string{
		DefaultsFile:    oslo.RenderINI(fmt.Sprintf("%s %s, generated by stackflow. Override options with customServiceConfig, not here.", in.Service, in.Name), d),
		CredentialsFile: oslo.RenderINI("Credentials, filled from Secrets by the init container (merge_config.py).", c),
	}
	if in.Service == API || in.Service == Metadata {
		out["api-paste.ini"] = apiPaste
	}
	if in.CustomServiceConfig != "" {
		out[CustomFile] = in.CustomServiceConfig
	}
	if len(in.Cells) > 0 {
		out[MappedCellsFile] = "# The cells mapped when this service started: a change restarts it (it reads the mappings once).\n" +
			strings.Join(in.Cells, "\n") + "\n"
	}
	return out
}

// MappedCellsFile lists, in the API's and the scheduler's config-data, the cells mapped when they
// start: nova-api and nova-scheduler read the cell mappings once, so a cell mapped or unmapped later
// must restart them, which this input's change does. The init container copies it beside nova.conf.
const MappedCellsFile = "mapped-cells"

// Secrets are the Secrets the credential template names, sorted: the init container mounts each.
func (in Instance) Secrets() []string {
	_, c := in.Config()
	seen := map[string]bool{}
	//workflowcheck:ignore -- reviewed: the result does not depend on the map's order
	for _, opts := range c {
		for _, v := range opts {
			for _, ref := range templateRefs(v) {
				seen[ref[0]] = true
			}
		}
	}
	out := make([]string, 0, len(seen))
	//workflowcheck:ignore -- reviewed: the result does not depend on the map's order
	for s := range seen {
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

// templateRefs are the Secret names and keys a template value refers to.
func templateRefs(v string) [][2]string {
	var out [][2]string
	for {
		i := strings.Index(v, "${")
		if i < 0 {
			return out
		}
		j := strings.Index(v[i:], "}")
		if j < 0 {
			return out
		}
		ref := v[i+2 : i+j]
		if _, rest, ok := strings.Cut(ref, ":"); ok {
			if secret, key, ok := strings.Cut(rest, "/"); ok {
				out = append(out, [2]string{secret, key})
			}
		}
		v = v[i+j+1:]
	}
}

// Scripts is the <name>-scripts ConfigMap's data: the merge run by every init container, the service's
// command, and the Jobs' scripts.
func (in Instance) Scripts() map[string]string {
	out := map[string]string{"merge_config.py": mergeConfigPy}
	manage := `nova-manage --config-file ` + MergedConfig
	header := "#!/bin/bash\n# " + string(in.Service) + " " + in.Name + ", generated by stackflow.\nset -euo pipefail\n"
	switch in.Service {
	case API:
		out["run.sh"] = header + underUWSGI(in.Port, apiProcesses)
		out[WSGIFile] = wsgiApp("nova.api.openstack.compute.wsgi")
	case Scheduler:
		out["run.sh"] = header + "exec nova-scheduler --config-file " + MergedConfig + "\n"
	case Conductor:
		out["run.sh"] = header + "exec nova-conductor --config-file " + MergedConfig + "\n"
		sync := manage + " db sync --local_cell\n"
		if in.APIDatabase != nil && in.CellName == "cell0" {
			// The superconductor's Job migrates the API database first: cell mappings live there.
			sync = manage + " api_db sync\n" + sync
		}
		out["db-sync.sh"] = header + sync
	case Metadata:
		// nova-api serving enabled_apis=metadata, not nova-api-metadata: the latter reads instances
		// through the conductor of its message bus, and a global service's is the superconductor, which
		// sees cell0 only (404 for every instance of a cell). nova-api reads them from the cell the
		// instance mapping names, as the compute API does. Under uwsgi, its WSGI application does the same.
		out["run.sh"] = header + underUWSGI(in.Port, metadataProcesses)
		out[WSGIFile] = wsgiApp("nova.api.metadata.wsgi")
	case NoVNCProxy:
		out["run.sh"] = header + "exec nova-novncproxy --config-file " + MergedConfig + " --web " + StateDir + "\n"
	case Cell:
		out["cell-mapping.sh"] = header + cellMappingScript
		out["host-discovery.sh"] = header + manage + ` cell_v2 discover_hosts --cell_uuid "$CELL_UUID" --verbose` + "\n"
		out["cell-delete.sh"] = header + cellDeleteScript
	}
	return out
}

// The uwsgi processes of a compute API pod and of a metadata pod. Nova's WSGI application is patched
// by eventlet and uwsgi runs no hub, so a process serves one request at a time; each process loads the
// application itself (seconds of CPU), so no more than a test cloud's load needs.
const (
	apiProcesses      = 2
	metadataProcesses = 1
)

// WSGIFile is the scripts' WSGI application module of the compute API and the metadata service.
const WSGIFile = "wsgi.py"

// underUWSGI serves ScriptsDir/WSGIFile on port with uwsgi, as Debian's nova-api package does (its
// nova-api-uwsgi.ini): idle, nova-api's own launcher polls its worker 100 times a second (1.2 CPU-s a
// minute per pod), uwsgi sleeps. An image without uwsgi runs nova-api as before. Nova's WSGI loader reads
// the paste pipeline from the first of OS_NOVA_CONFIG_FILES, so api-paste.ini comes first. Connection:
// close, because uwsgi's HTTP socket resets a connection a client tries to reuse.
func underUWSGI(port int32, processes int) string {
	return `uwsgi=/usr/bin/uwsgi-core
plugin=$(ls /usr/lib/uwsgi/plugins/python3*_plugin.so 2>/dev/null | head -n 1 || true)
if [ ! -x "$uwsgi" ] || [ -z "$plugin" ]; then
  exec nova-api --config-file ` + MergedConfig + `
fi
export OS_NOVA_CONFIG_DIR=` + MergedDir + ` OS_NOVA_CONFIG_FILES="api-paste.ini;nova.conf"
exec "$uwsgi" --plugin "$plugin" --master --die-on-term --need-app --lazy-apps \
  --processes ` + strconv.Itoa(processes) + ` --threads 1 --http-socket :` + strconv.Itoa(int(port)) + ` \
  --add-header "Connection: close" --buffer-size 65535 --disable-logging \
  --wsgi-file ` + ScriptsDir + "/" + WSGIFile + "\n"
}

// wsgiApp is the WSGI application module uwsgi loads: module's init_application, as the packaged
// nova-api-wsgi and nova-metadata-wsgi scripts call it.
func wsgiApp(module string) string {
	return "# Generated by stackflow: the WSGI application uwsgi serves.\nfrom " + module + " import init_application\n\napplication = init_application()\n"
}

// cellMappingScript maps the cell in the API database once: an existing mapping of the same name and
// database is updated (transport URL or password changes), one of the same name on another database is a
// conflict (exit 3), and the cell's UUID ends in the termination message: cell0's is fixed, create_cell
// --verbose prints a new cell's last, list_cells an existing one's (no second listing: each nova-manage
// run costs seconds of start-up).
const cellMappingScript = `CONF=` + MergedConfig + `
manage() { nova-manage --config-file "$CONF" "$@"; }
want=$(python3 ` + ScriptsDir + `/merge_config.py get "$CONF" database connection)
found=$(manage cell_v2 list_cells --verbose | python3 ` + ScriptsDir + `/merge_config.py cell "$CELL_NAME" "$want")
case "$found" in
  missing)
    if [ "$CELL_NAME" = cell0 ]; then
      manage cell_v2 map_cell0 --database_connection "$want"
      uuid=` + Cell0UUID + `
    else
      uuid=$(manage cell_v2 create_cell --name "$CELL_NAME" --verbose | tail -n 1)
    fi ;;
  same\ *)
    uuid=${found#same }
    if [ "$CELL_NAME" != cell0 ]; then manage cell_v2 update_cell --cell_uuid "$uuid"; fi ;;
  *)
    echo "cell $CELL_NAME is already mapped to another database (${found#other }): refusing to map it twice" | tee ` + TerminationLog + ` >&2
    exit 3 ;;
esac
echo "cell_uuid=$uuid" > ` + TerminationLog + `
`

// Cell0UUID is the UUID Nova gives cell0's mapping, always.
const Cell0UUID = "00000000-0000-0000-0000-000000000000"

// cellDeleteScript unmaps the cell; Nova refuses while hosts or instances remain (exit 2 or 3). Mappings
// of instances that were deleted (exit 4: their rows await archiving) do not hold a cell that is going
// away, nor do host mappings (exit 2) once the Nova's computes are gone (its teardown waits for them:
// a host left mapped is one whose compute never reached the API to deregister): --force removes them
// with the mapping, and still refuses while a live instance remains.
const cellDeleteScript = `CONF=` + MergedConfig + `
set +e
delete() { nova-manage --config-file "$CONF" cell_v2 delete_cell --cell_uuid "$CELL_UUID" "$@" 2>&1; }
out=$(delete)
rc=$?
if [ $rc -eq 2 ] || [ $rc -eq 4 ]; then
  out=$(delete --force)
  rc=$?
fi
echo "$out" | tee ` + TerminationLog + `
# 1: no such cell (already unmapped).
if [ $rc -eq 1 ]; then exit 0; fi
exit $rc
`

// labels select the instance's pods.
func (in Instance) labels() map[string]string {
	return map[string]string{"app.kubernetes.io/name": string(in.Service), "app.kubernetes.io/instance": in.Name, "app.kubernetes.io/managed-by": "stackflow"}
}

func (in Instance) ownerRefs() []metav1.OwnerReference {
	return []metav1.OwnerReference{{APIVersion: in.Owner.APIVersion, Kind: in.Owner.Kind, Name: in.Owner.Name, UID: types.UID(in.Owner.UID)}}
}

// podSpec is the pod every Deployment and Job of the instance runs: the init container merges the
// configuration, the main container runs script.
func (in Instance) podSpec(container, script string, env []corev1.EnvVar, restart corev1.RestartPolicy) corev1.PodSpec {
	scriptsMode := int32(0o755)
	no := false
	vols := []corev1.Volume{
		{Name: "config-data", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: ConfigDataName(in.Name)}}}},
		{Name: "scripts", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: ScriptsName(in.Name)}, DefaultMode: &scriptsMode}}},
		{Name: "config-data-merged", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: "state", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
	}
	initMounts := []corev1.VolumeMount{
		{Name: "config-data", MountPath: ConfigDataDir, ReadOnly: true},
		{Name: "scripts", MountPath: ScriptsDir, ReadOnly: true},
		{Name: "config-data-merged", MountPath: MergedDir},
	}
	secretMode := int32(0o400)
	fsGroup := PodFSGroup
	for i, s := range in.Secrets() {
		v := fmt.Sprintf("secret-%d", i)
		vols = append(vols, corev1.Volume{Name: v, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: s, DefaultMode: &secretMode}}})
		initMounts = append(initMounts, corev1.VolumeMount{Name: v, MountPath: SecretsDir + "/" + s, ReadOnly: true})
	}
	return corev1.PodSpec{
		RestartPolicy:                restart,
		NodeSelector:                 in.NodeSelector,
		Tolerations:                  in.Tolerations,
		AutomountServiceAccountToken: &no,
		// The volumes' group: an image that runs as a user of its own reads the Secrets (mode 0400,
		// owned by root otherwise) through it.
		SecurityContext: &corev1.PodSecurityContext{FSGroup: &fsGroup},
		Volumes:         vols,
		InitContainers: []corev1.Container{{
			Name: "config-merge", Image: in.Image,
			Command:      []string{"python3", ScriptsDir + "/merge_config.py", "merge", ConfigDataDir, SecretsDir, MergedConfig},
			VolumeMounts: initMounts,
		}},
		Containers: []corev1.Container{{
			Name: container, Image: in.Image,
			Command: []string{"/bin/bash", ScriptsDir + "/" + script},
			Env:     env,
			VolumeMounts: []corev1.VolumeMount{
				{Name: "scripts", MountPath: ScriptsDir, ReadOnly: true},
				{Name: "config-data-merged", MountPath: MergedDir, ReadOnly: true},
				{Name: "state", MountPath: StateDir},
			},
			TerminationMessagePath:   TerminationLog,
			TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		}},
	}
}

// PodFSGroup owns the pods' volumes: stackflow's images run as 65532:65532.
const PodFSGroup int64 = 65532

// MinReadySeconds is how long a service without a readiness probe must stay up to count as available.
const MinReadySeconds = 10

// HashAnnotation carries the hash of every input on a Deployment's pod template and on Jobs.
const HashAnnotation = "stackflow.io/config-hash"

// Deployment runs the service with replicas; hash (ConfigHash of its inputs) is on its pod template, so
// a change of any input rolls it.
func (in Instance) Deployment(hash string) *appsv1.Deployment {
	replicas := in.Replicas
	spec := in.podSpec(string(in.Service), "run.sh", nil, corev1.RestartPolicyAlways)
	c := &spec.Containers[0]
	switch in.Service {
	case API, Metadata, NoVNCProxy:
		c.Ports = []corev1.ContainerPort{{Name: "service", ContainerPort: in.Port}}
		probe := corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromString("service")}}
		if in.Service == API {
			probe = corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromString("service")}}
		}
		c.ReadinessProbe = &corev1.Probe{ProbeHandler: probe, PeriodSeconds: 5, TimeoutSeconds: 5}
	}
	// A service without a readiness probe counts as available once it stayed up for a while: a service
	// that crashes at start (a database it cannot reach) is never taken for rolled out.
	var minReady int32
	if c.ReadinessProbe == nil {
		minReady = MinReadySeconds
	}
	return &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: in.Name, Namespace: in.Namespace, Labels: in.labels(), OwnerReferences: in.ownerRefs()},
		Spec: appsv1.DeploymentSpec{
			Replicas:        &replicas,
			MinReadySeconds: minReady,
			Selector:        &metav1.LabelSelector{MatchLabels: in.labels()},
			// One at a time and never two of a service at once: the pods may share the host's ports.
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: in.labels(), Annotations: map[string]string{HashAnnotation: hash}},
				Spec:       spec,
			},
		},
	}
}

// Listens reports whether the instance serves a port (the API, metadata service, console proxy): those
// get a Service, whose address is what the catalog and the hosts are given.
func (in Instance) Listens() bool {
	switch in.Service {
	case API, Metadata, NoVNCProxy:
		return true
	}
	return false
}

// KubeService is the ClusterIP Service in front of the instance's pods, named as the instance. Its
// address stays when a pod is replaced (a rollout, an eviction), unlike the pod's.
func (in Instance) KubeService() *corev1.Service {
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Name: in.Name, Namespace: in.Namespace, Labels: in.labels(), OwnerReferences: in.ownerRefs()},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeClusterIP,
			Selector: in.labels(),
			Ports: []corev1.ServicePort{{Name: "service", Protocol: corev1.ProtocolTCP, Port: in.Port,
				TargetPort: intstr.FromString("service")}},
		},
	}
}

// Job runs one of the instance's scripts to completion (retried up to 3 times), with env. Its name is
// <name>-<job>; hash says which inputs it ran with.
func (in Instance) Job(job, script, hash string, env map[string]string) *batchv1.Job {
	var ev []corev1.EnvVar
	keys := make([]string, 0, len(env))
	//workflowcheck:ignore -- reviewed: the result does not depend on the map's order
	for k := range env {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		ev = append(ev, corev1.EnvVar{Name: k, Value: env[k]})
	}
	backoff := int32(3)
	labels := in.labels()
	labels["stackflow.io/job"] = job
	return &batchv1.Job{
		TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{Name: in.Name + "-" + job, Namespace: in.Namespace, Labels: labels, OwnerReferences: in.ownerRefs(), Annotations: map[string]string{HashAnnotation: hash}},
		Spec: batchv1.JobSpec{
			BackoffLimit: &backoff,
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       in.podSpec(job, script, ev, corev1.RestartPolicyNever),
			},
		},
	}
}

// ConfigHash is the hash of every input of an instance: its two ConfigMaps' data and the hashes of the
// Secrets they reference (computed by an activity from the values, which never leave it), by name.
// Inputs lists the hash of each input on its own, so the status can say which one changed.
func ConfigHash(configData, scripts map[string]string, secrets map[string]string) (string, map[string]string) {
	inputs := map[string]string{"config-data": hashMap(configData), "scripts": hashMap(scripts)}
	//workflowcheck:ignore -- reviewed: the result does not depend on the map's order
	for name, h := range secrets {
		inputs["secret/"+name] = h
	}
	return hashMap(inputs), inputs
}

// ChangedInputs names the inputs whose hashes differ between two ConfigHash results, sorted.
func ChangedInputs(before, after map[string]string) []string {
	var out []string
	//workflowcheck:ignore -- reviewed: the result does not depend on the map's order
	for k, v := range after {
		if before[k] != v {
			out = append(out, k)
		}
	}
	//workflowcheck:ignore -- reviewed: the result does not depend on the map's order
	for k := range before {
		if _, ok := after[k]; !ok {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

func hashMap(m map[string]string) string {
	keys := make([]string, 0, len(m))
	//workflowcheck:ignore -- reviewed: the result does not depend on the map's order
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	h := sha256.New()
	for _, k := range keys {
		fmt.Fprintf(h, "%d:%s%d:%s", len(k), k, len(m[k]), m[k])
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}
