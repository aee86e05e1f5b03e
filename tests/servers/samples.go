package servers

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servers"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/services"
	"github.com/gophercloud/gophercloud/v2/openstack/config"
	"github.com/gophercloud/gophercloud/v2/openstack/config/clouds"
	"github.com/gophercloud/gophercloud/v2/openstack/identity/v3/projects"
	"github.com/gophercloud/gophercloud/v2/openstack/identity/v3/roles"
	"github.com/gophercloud/gophercloud/v2/openstack/identity/v3/tokens"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/layer3/floatingips"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/security/groups"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/ports"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/stackflow/stackflow/deploy/local"
	"github.com/stackflow/stackflow/tests/e2e"
)

// The samples' Nova and its metadata service (deploy/samples), on which SetupOnSamples' runs boot.
const (
	sampleNova         = "nova"
	sampleNovaMetadata = "nova-metadata"
)

// SetupOnSamples is Setup on the run's one cloud: the cloud of `make run`'s samples, which tests/samples
// builds and leaves up. The run gets an OpenStack project of its own there (named after the run, the
// cloud's administrator given the admin role in it, its compute quotas lifted), so that what one run
// leaves cannot fill another's quota and Leftovers can tell what is the run's; the identity Secret of its
// namespace is the cloud's clouds.yaml scoped to that project, and its servers boot on the samples' Nova
// and computes. Close removes the project.
func SetupOnSamples(ctx context.Context, temporalNS, prefix string) (_ *Env, err error) {
	base, err := e2e.Setup(ctx, e2e.Config{Components: []string{local.Kubernetes, local.Temporal, local.Hosts},
		HostCount: HostCount, TemporalNamespace: temporalNS, RunPrefix: prefix, QPS: 200, Burst: 400})
	if err != nil {
		return nil, err
	}
	e := &Env{Env: base, cloud: local.SampleCloud}
	defer func() {
		if err != nil {
			e.Close()
		}
	}()
	admin, err := local.SampleCloudsYAML(ctx, e.Dyn, local.SampleNamespace)
	if err != nil {
		return nil, fmt.Errorf("the run's cloud, which tests/samples builds and leaves up (make e2e runs it first): %w", err)
	}
	nova, err := e.Dyn.Resource(e2e.GVRNova).Namespace(local.SampleNamespace).Get(ctx, sampleNova, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("the samples' Nova: %w", err)
	}
	if c := e2e.Condition(nova, "Ready"); c == nil || c.Status != metav1.ConditionTrue {
		return nil, fmt.Errorf("the samples' Nova is not Ready: %s", e2e.CondString(c))
	}
	region, _, _ := unstructured.NestedString(nova.Object, "spec", "region")
	e.novaAPIDB, _, _ = unstructured.NestedString(nova.Object, "spec", "apiDatabase", "database")
	e.novaCell1DB, _, _ = unstructured.NestedString(nova.Object, "spec", "cellTemplates", "cell1", "cellDatabase", "database")
	e.Nova, e.sharedNova = e.ExistingNova(local.SampleNamespace, sampleNova, region), true
	e.Metadata = sampleNovaMetadata

	if err := e.adminLogin(ctx, admin); err != nil {
		return nil, err
	}
	yml, err := e.newProject(ctx, admin, e.Run)
	if err != nil {
		return nil, err
	}
	if err := e.useIdentity(ctx, yml); err != nil {
		return nil, err
	}
	// No history may hold the password, nor (with the payload codec on) the names of the cloud's image
	// and networks the specs name.
	e.Forbid(e.auth.Password, local.ImageName, local.TenantNetwork, local.ExternalNetwork)
	if err := e.connect(ctx, region); err != nil {
		return nil, err
	}
	if err := e.UnlimitCompute(ctx); err != nil {
		return nil, err
	}
	return e, nil
}

// ExistingNova names a Nova that another package deployed and keeps (the samples'); the Env's CloseNova
// leaves it alone.
func (e *Env) ExistingNova(namespace, name, region string) *e2e.Nova {
	return &e2e.Nova{NovaOptions: e2e.NovaOptions{Namespace: namespace, Region: region}, Name: name}
}

// adminLogin logs in with the cloud administrator's clouds.yaml and keeps the identity, network and
// compute clients of that login (for the project's creation, its removal and the leftover checks).
func (e *Env) adminLogin(ctx context.Context, yml []byte) error {
	ao, eo, _, err := clouds.Parse(clouds.WithCloudsYAML(bytes.NewReader(yml)), clouds.WithCloudName(e.cloud))
	if err != nil {
		return fmt.Errorf("the cloud's clouds.yaml: %w", err)
	}
	ao.AllowReauth = true
	p, err := config.NewProviderClient(ctx, ao)
	if err != nil {
		return fmt.Errorf("log in as the cloud's administrator: %w", err)
	}
	if e.adminIdentity, err = openstack.NewIdentityV3(p, eo); err != nil {
		return err
	}
	if e.adminNetwork, err = openstack.NewNetworkV2(p, eo); err != nil {
		return err
	}
	res, ok := p.GetAuthResult().(tokens.CreateResult)
	if !ok {
		return errors.New("no Keystone v3 token for the cloud's administrator")
	}
	if e.adminUser, err = res.ExtractUser(); err != nil {
		return fmt.Errorf("the administrator's user: %w", err)
	}
	proj, err := res.ExtractProject()
	if err != nil || proj == nil {
		return fmt.Errorf("the administrator's project: %v", err)
	}
	e.adminDomain = proj.Domain.ID
	return nil
}

// newProject creates the run's project in the administrator's domain, gives the administrator the admin
// role in it and returns the clouds.yaml scoped to it.
func (e *Env) newProject(ctx context.Context, admin []byte, name string) ([]byte, error) {
	p, err := projects.Create(ctx, e.adminIdentity, projects.CreateOpts{Name: name, DomainID: e.adminDomain,
		Description: "stackflow e2e run " + name + ": removed when the run ends"}).Extract()
	if err != nil {
		return nil, fmt.Errorf("create project %s: %w", name, err)
	}
	e.project = p
	pages, err := roles.List(e.adminIdentity, roles.ListOpts{Name: "admin"}).AllPages(ctx)
	if err != nil {
		return nil, fmt.Errorf("find the admin role: %w", err)
	}
	rs, err := roles.ExtractRoles(pages)
	if err != nil || len(rs) == 0 {
		return nil, fmt.Errorf("find the admin role: %v", err)
	}
	if err := roles.Assign(ctx, e.adminIdentity, rs[0].ID, roles.AssignOpts{UserID: e.adminUser.ID, ProjectID: p.ID}).ExtractErr(); err != nil {
		return nil, fmt.Errorf("give %s the admin role in project %s: %w", e.adminUser.Name, name, err)
	}
	var doc map[string]any
	if err := yaml.Unmarshal(admin, &doc); err != nil {
		return nil, fmt.Errorf("the cloud's clouds.yaml: %w", err)
	}
	cl, _ := doc["clouds"].(map[string]any)
	c, _ := cl[e.cloud].(map[string]any)
	auth, _ := c["auth"].(map[string]any)
	if auth == nil {
		return nil, fmt.Errorf("the cloud's clouds.yaml has no cloud %s with auth", e.cloud)
	}
	delete(auth, "project_id")
	auth["project_name"] = name
	return yaml.Marshal(doc)
}

// Leftovers lists what the run's project still holds in OpenStack: servers, ports, floating IPs and
// security groups but Neutron's default one. Every object's teardown must have removed its part.
func (e *Env) Leftovers(ctx context.Context) ([]string, error) {
	if e.project == nil {
		return nil, nil
	}
	var out []string
	if e.Compute != nil {
		pages, err := servers.List(e.Compute, servers.ListOpts{AllTenants: true, TenantID: e.project.ID}).AllPages(ctx)
		if err != nil {
			return nil, fmt.Errorf("list the project's servers: %w", err)
		}
		ss, err := servers.ExtractServers(pages)
		if err != nil {
			return nil, err
		}
		for _, s := range ss {
			out = append(out, "server "+s.Name+" "+s.ID+" "+s.Status)
		}
	}
	pages, err := ports.List(e.adminNetwork, ports.ListOpts{ProjectID: e.project.ID}).AllPages(ctx)
	if err != nil {
		return nil, fmt.Errorf("list the project's ports: %w", err)
	}
	ps, err := ports.ExtractPorts(pages)
	if err != nil {
		return nil, err
	}
	for _, p := range ps {
		out = append(out, "port "+p.Name+" "+p.ID)
	}
	pages, err = floatingips.List(e.adminNetwork, floatingips.ListOpts{ProjectID: e.project.ID}).AllPages(ctx)
	if err != nil {
		return nil, fmt.Errorf("list the project's floating IPs: %w", err)
	}
	fs, err := floatingips.ExtractFloatingIPs(pages)
	if err != nil {
		return nil, err
	}
	for _, f := range fs {
		out = append(out, "floating IP "+f.FloatingIP+" "+f.ID)
	}
	sgs, err := e.securityGroups(ctx)
	if err != nil {
		return nil, err
	}
	for _, g := range sgs {
		if g.Name != "default" {
			out = append(out, "security group "+g.Name+" "+g.ID)
		}
	}
	return out, nil
}

func (e *Env) securityGroups(ctx context.Context) ([]groups.SecGroup, error) {
	pages, err := groups.List(e.adminNetwork, groups.ListOpts{ProjectID: e.project.ID}).AllPages(ctx)
	if err != nil {
		return nil, fmt.Errorf("list the project's security groups: %w", err)
	}
	return groups.ExtractGroups(pages)
}

// closeProject removes the run's project: what a failed run left in it first (named on stderr), then
// Neutron's default security group, then the project.
func (e *Env) closeProject() {
	if e.project == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if left, err := e.Leftovers(ctx); err == nil && len(left) > 0 {
		fmt.Fprintf(os.Stderr, "project %s: removing what the run left: %s\n", e.project.Name, strings.Join(left, "; "))
		e.removeProjectResources(ctx)
	}
	if sgs, err := e.securityGroups(ctx); err == nil {
		for _, g := range sgs {
			_ = groups.Delete(ctx, e.adminNetwork, g.ID).ExtractErr()
		}
	}
	if err := projects.Delete(ctx, e.adminIdentity, e.project.ID).ExtractErr(); err != nil && !gophercloud.ResponseCodeIs(err, 404) {
		fmt.Fprintf(os.Stderr, "delete project %s: %v\n", e.project.Name, err)
	}
	e.project = nil
}

// removeProjectResources deletes the project's servers (waiting for them to go), floating IPs and ports.
func (e *Env) removeProjectResources(ctx context.Context) {
	if e.Compute != nil {
		if pages, err := servers.List(e.Compute, servers.ListOpts{AllTenants: true, TenantID: e.project.ID}).AllPages(ctx); err == nil {
			ss, _ := servers.ExtractServers(pages)
			for _, s := range ss {
				_ = servers.Delete(ctx, e.Compute, s.ID).ExtractErr()
			}
			for _, s := range ss {
				for ctx.Err() == nil {
					if _, err := servers.Get(ctx, e.Compute, s.ID).Extract(); gophercloud.ResponseCodeIs(err, 404) {
						break
					}
					time.Sleep(time.Second)
				}
			}
		}
	}
	if pages, err := floatingips.List(e.adminNetwork, floatingips.ListOpts{ProjectID: e.project.ID}).AllPages(ctx); err == nil {
		fs, _ := floatingips.ExtractFloatingIPs(pages)
		for _, f := range fs {
			_ = floatingips.Delete(ctx, e.adminNetwork, f.ID).ExtractErr()
		}
	}
	if pages, err := ports.List(e.adminNetwork, ports.ListOpts{ProjectID: e.project.ID}).AllPages(ctx); err == nil {
		ps, _ := ports.ExtractPorts(pages)
		for _, p := range ps {
			_ = ports.Delete(ctx, e.adminNetwork, p.ID).ExtractErr()
		}
	}
}

// Computes are the cloud's nova-compute services that are up, by host name.
func (e *Env) Computes(ctx context.Context) ([]services.Service, error) {
	if e.Compute == nil {
		return nil, errNoNova
	}
	pages, err := services.List(e.Compute, services.ListOpts{Binary: "nova-compute"}).AllPages(ctx)
	if err != nil {
		return nil, err
	}
	svcs, err := services.ExtractServices(pages)
	if err != nil {
		return nil, err
	}
	var up []services.Service
	for _, s := range svcs {
		if s.State == "up" {
			up = append(up, s)
		}
	}
	slices.SortFunc(up, func(a, b services.Service) int { return strings.Compare(a.Host, b.Host) })
	return up, nil
}

// unmapHosts takes the cell mappings of hosts away, as `nova-manage cell_v2 delete_host` does (which
// refuses hosts with instances, and the samples' computes run the samples' servers): the API database
// forgets the hosts, and their compute nodes are marked unmapped, so the scheduler's periodic discovery
// maps them again.
func (e *Env) unmapHosts(t *testing.T, hosts []string) {
	t.Helper()
	db := e.novaDB(t)
	for _, h := range hosts {
		_, err := db.ExecContext(context.Background(), "DELETE FROM "+e.novaAPIDB+".host_mappings WHERE host = ?", h)
		require.NoError(t, err, "unmap host %s", h)
		_, err = db.ExecContext(context.Background(), "UPDATE "+e.novaCell1DB+".compute_nodes SET mapped = 0 WHERE host = ? AND deleted = 0", h)
		require.NoError(t, err, "mark host %s's compute node unmapped", h)
	}
}

// mappedHosts are the hosts the Nova's API database maps to a cell.
func (e *Env) mappedHosts(t *testing.T) []string {
	t.Helper()
	return e2e.QueryStrings(t, e.novaDB(t), "SELECT host FROM "+e.novaAPIDB+".host_mappings")
}

// novaDB is the stack's database server, where the Nova's databases are; it fails the test unless the
// run knows their names (SetupOnSamples reads them from the Nova).
func (e *Env) novaDB(t *testing.T) *sql.DB {
	t.Helper()
	for _, n := range []string{e.novaAPIDB, e.novaCell1DB} {
		require.Regexp(t, `^[a-z0-9_]+$`, n, "the Nova's database names (SetupOnSamples reads them)")
	}
	return e.StackDB(t)
}
