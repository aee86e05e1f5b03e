package local

// The local cloud: OpenStack Zed from Debian bookworm's library packages, every service a process of the
// stack (PID file, log under logs/), all state under <state>/openstack:
//
//	etc/<service>/      rendered configuration (mode 0600: it holds passwords)
//	data/               MariaDB datadir, RabbitMQ mnesia, Glance images, Keystone keys, lock paths
//	lib/python/         WSGI entry point, bootstrap script
//	ovn/                OVN's databases, northd and the gateway chassis (openstack_ovn.go)
//	markers/            one file per one-time step (schema migrations, Keystone bootstrap)
//	passwords.json      generated passwords, kept across down/up (0600)
//	clouds.yaml         the admin cloud (CloudName) for clients on this machine
//
// Every API runs under uwsgi and listens on 127.0.0.1 and on the EDPM hosts' gateway HostGateway; the
// catalog's public and admin endpoints are on 127.0.0.1, its internal endpoints on the gateway, so a
// service on a test host needs nothing but the catalog. RabbitMQ and MariaDB listen on both as well (the
// Nova control planes' pods on the real node reach them on the gateway).
//
// The stack runs no Nova: every Nova is deployed by stackflow's Nova family (make run's samples, the
// end-to-end packages' own), which creates its databases and vhosts with the administrators' Secrets
// below and registers its compute API in a region of its own; the nova service user is the stack's.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sync/errgroup"
)

// Standard ports of the local cloud's services.
const (
	MariaDBPort  = 3306
	RabbitMQPort = 5672
	// RabbitMQManagementPort serves RabbitMQ's management HTTP API (on HostGateway only).
	RabbitMQManagementPort = 15672
	KeystonePort           = 5000
	PlacementPort          = 8778
	GlancePort             = 9292
	NeutronPort            = 9696
	IronicPort             = 6385
)

// Names of what the local cloud is set up with.
const (
	OpenStackRegion = "RegionOne"
	// SampleRegion is the region of the cloud deploy/samples deploys (its keystone release's, the
	// chart's default), where the samples' Nova registers its compute API.
	SampleRegion = "RegionOne"
	// SampleCloudsSecret is the Secret (namespace SampleNamespace) where the sample configuration writes
	// its Keystone administrator's clouds.yaml, the cloud named SampleCloud after the configuration.
	SampleCloudsSecret = "keystone-clouds"
	SampleCloud        = "kupenstack"
	CloudName          = "stackflow"
	// GatewayChassis is the stack's own OVN chassis (Open vSwitch and ovn-controller on this machine), the
	// gateway of the cloud's routers. It hosts no compute; the name is the one it had when it hosted the
	// stack's own Nova compute, kept because Neutron does not move a router's gateway to a renamed chassis.
	GatewayChassis  = "stackflow-compute-0"
	ExternalNetwork = "public"
	ExternalSubnet  = "public-subnet"
	TenantNetwork   = "private"
	TenantSubnet    = "private-subnet"
	RouterName      = "router1"
	ImageName       = "cirros-tiny"
	// Secrets (namespace SystemNamespace) published once Kubernetes is up.
	CloudsSecretName = "openstack-clouds"
	// DatabaseAdminSecretName holds MariaDB's administrator (keys username, password, host, port) and
	// MessageBusAdminSecretName RabbitMQ's (management_url, username, password, amqp_host, amqp_port):
	// what a Nova CR names to create its databases, users and vhosts.
	DatabaseAdminSecretName   = "mariadb-admin"
	MessageBusAdminSecretName = "rabbitmq-admin"
	// DatabaseAdminUser is MariaDB's administrator over TCP (root logs in through the socket only).
	DatabaseAdminUser = "stackflow_admin"
	// ServiceSecretName holds the nova service user's password under NovaPassword, as a NovaCell's
	// spec.secret expects it.
	ServiceSecretName = "osp-secret"
)

// retiredProcs are processes an earlier stack ran and this one does not: the Nova it ran before every
// Nova was stackflow's, and the block storage no family used.
var retiredProcs = []string{"os-nova-api", "os-nova-conductor", "os-nova-scheduler", "os-nova-compute",
	"os-cinder-api", "os-cinder-scheduler", "os-cinder-volume"}

// upOpenStack starts MariaDB, RabbitMQ and the OpenStack services from Debian's packages on loopback
// (APIs and RabbitMQ also on the hosts' gateway), creates the cloud's initial resources and publishes
// clouds.yaml and the administrators' Secrets. Idempotent: running processes are reused and one-time steps
// are skipped by their markers.
func (s *Stack) upOpenStack(ctx context.Context) error {
	start := time.Now()
	o, err := s.newOSEnv()
	if err != nil {
		return err
	}
	if err := o.writeConfigs(); err != nil {
		return err
	}

	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return o.upMariaDB(gctx) })
	g.Go(func() error { return o.upRabbitMQ(gctx) })
	if err := g.Wait(); err != nil {
		return fmt.Errorf("openstack infrastructure: %w", err)
	}
	if err := o.createDatabases(ctx); err != nil {
		return err
	}

	// A state directory of an earlier stack may still run the processes this one retired.
	for _, name := range retiredProcs {
		if err := s.Stop(name, 15*time.Second); err != nil {
			return fmt.Errorf("stop the retired %s: %w", name, err)
		}
	}

	// Services migrate and start in parallel.
	var started [5]bool
	sctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	g, gctx = errgroup.WithContext(sctx)
	g.Go(func() (err error) {
		if started[0], err = o.upKeystone(gctx); err != nil {
			return err
		}
		return o.registerIdentity(gctx, started[0])
	})
	g.Go(func() (err error) { started[1], err = o.upPlacement(gctx); return err })
	g.Go(func() (err error) { started[2], err = o.upGlance(gctx); return err })
	g.Go(func() (err error) { started[3], err = o.upNeutron(gctx); return err })
	g.Go(func() (err error) { started[4], err = o.upIronic(gctx); return err })
	if err := g.Wait(); err != nil {
		return fmt.Errorf("openstack services: %w", err)
	}
	anyStarted := false
	for _, st := range started {
		anyStarted = anyStarted || st
	}
	if err := o.createResources(sctx, anyStarted); err != nil {
		return err
	}

	clouds := o.cloudsYAML()
	s.CloudsYAML = filepath.Join(o.Dir, "clouds.yaml")
	s.CloudName = CloudName
	if err := writeIfChanged(s.CloudsYAML, clouds, 0o600); err != nil {
		return err
	}
	s.OpenStack = &OpenStackInfo{
		AuthURL:         o.Keystone + "/v3",
		Region:          o.Region,
		ExternalNetwork: ExternalNetwork,
		TenantNetwork:   TenantNetwork,
		TenantSubnet:    TenantSubnet,
		Router:          RouterName,
		Image:           ImageName,
		CloudsSecret:    SystemNamespace + "/" + CloudsSecretName,
		ServiceSecret:   SystemNamespace + "/" + ServiceSecretName,
	}
	s.QueueSecret(SystemNamespace, CloudsSecretName, map[string][]byte{"clouds.yaml": o.cloudsSecretYAML(), "cloud": []byte(CloudName)})
	s.QueueSecret(SystemNamespace, DatabaseAdminSecretName, map[string][]byte{
		"username": []byte(DatabaseAdminUser), "password": []byte(o.Pw["db-admin"]),
		"host": []byte(HostGateway), "port": []byte(fmt.Sprint(MariaDBPort))})
	// The administrators' Secrets name the hosts' gateway: stackflow's workers run in the real node's
	// pods (make run) or on this machine (tests), and both reach it there; so do the EDPM test hosts.
	s.QueueSecret(SystemNamespace, MessageBusAdminSecretName, map[string][]byte{
		"management_url": []byte(fmt.Sprintf("http://%s:%d", HostGateway, RabbitMQManagementPort)),
		"username":       []byte("openstack"), "password": []byte(o.Pw["rabbit"]),
		"amqp_host": []byte(HostGateway), "amqp_port": []byte(fmt.Sprint(RabbitMQPort))})
	s.QueueSecret(SystemNamespace, ServiceSecretName, map[string][]byte{"NovaPassword": []byte(o.Pw["nova"])})
	s.Logf("openstack: ready in %s (keystone %s, cloud %q in %s)", time.Since(start).Round(100*time.Millisecond), s.OpenStack.AuthURL, CloudName, s.CloudsYAML)
	return nil
}

// ServersRegions are regions of the site for Novas that end-to-end packages deploy and boot servers on
// (tests/servers, whose upgrade test shares its Nova): an OpenStackServer's identityRef.region is the
// region of every service it uses, so the site's shared services are listed there as in the samples'
// region.
var ServersRegions = []string{"RegionThree"}

// SharedRegions are the regions besides OpenStackRegion where the site's shared services are listed.
var SharedRegions = ServersRegions

// bootstrapInput is what bootstrap.py reads on stdin.
func (o *osEnv) bootstrapInput() []byte {
	users := map[string]string{}
	for _, u := range osServiceUsers {
		users[u] = o.Pw[u]
	}
	// Public and admin endpoints are on loopback, for clients on this machine; internal endpoints are on
	// the hosts' gateway, which this machine and every EDPM test host reach, so services deployed onto
	// the hosts (nova-compute with valid_interfaces = internal) work from the catalog alone.
	svc := func(name, typ string, port int, path string) map[string]string {
		return map[string]string{"name": name, "type": typ,
			"url":      fmt.Sprintf("http://127.0.0.1:%d%s", port, path),
			"internal": fmt.Sprintf("http://%s:%d%s", HostGateway, port, path)}
	}
	gatewayOnly := func(m map[string]string) map[string]string { m["url"] = m["internal"]; return m }
	// shared marks a service of the whole site, listed in SharedRegions too.
	shared := func(m map[string]string) map[string]string { m["shared"] = "true"; return m }
	in := map[string]any{
		"auth_url":       o.Keystone + "/v3",
		"admin_password": o.Pw["admin"],
		"region":         o.Region,
		"service_users":  users,
		"services": []map[string]string{
			svc("keystone", "identity", KeystonePort, "/v3"),
			shared(svc("placement", "placement", PlacementPort, "")),
			shared(svc("glance", "image", GlancePort, "")),
			// neutron-server listens on the gateway only (one bind address, see apiNeutron).
			shared(gatewayOnly(svc("neutron", "network", NeutronPort, ""))),
			svc("ironic", "baremetal", IronicPort, ""),
		},
		"shared_regions": SharedRegions,
		"image":          ImageName,
		"external": map[string]string{
			"name": ExternalNetwork, "subnet": ExternalSubnet, "physnet": o.Physnet,
			"cidr": "203.0.113.0/24", "gateway": "203.0.113.1", "pool_start": "203.0.113.10", "pool_end": "203.0.113.250",
		},
		"tenant": map[string]string{
			"name": TenantNetwork, "subnet": TenantSubnet, "cidr": "198.51.100.0/24", "gateway": "198.51.100.1",
		},
		"router": RouterName,
		// What an earlier stack registered and this one no longer runs: removed from its Keystone.
		"retired_services": []string{"cinderv3"},
		"retired_users":    []string{"cinder"},
	}
	b, _ := json.Marshal(in)
	return b
}

// bootstrap runs one phase of bootstrap.py unless the same input already succeeded and no process was
// (re)started since: a warm Up does not pay for a Python interpreter and a dozen API calls.
func (o *osEnv) bootstrap(ctx context.Context, phase string, force bool) error {
	in := o.bootstrapInput()
	marker := filepath.Join(o.Dir, "markers", "bootstrap-"+phase)
	if !force {
		if b, err := os.ReadFile(marker); err == nil && string(b) == string(in) {
			return nil
		}
	}
	out, err := o.output(ctx, "bootstrap "+phase, in, nil, "/usr/bin/python3", filepath.Join(o.Lib, "python", "bootstrap.py"), phase)
	if err != nil {
		return err
	}
	o.s.Logf("openstack: %s bootstrapped %s", phase, out)
	// The marker holds the input (passwords included), so it is private like the rest.
	return os.WriteFile(marker, in, 0o600)
}

func (o *osEnv) registerIdentity(ctx context.Context, force bool) error {
	return o.bootstrap(ctx, "identity", force)
}

func (o *osEnv) createResources(ctx context.Context, force bool) error {
	return o.bootstrap(ctx, "resources", force)
}
