package openstack

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
)

// ComputeHostInput names a compute host of the cloud behind a clouds Secret.
type ComputeHostInput struct {
	Cloud CloudSecret `json:"cloud"`
	Host  string      `json:"host"`
}

// ComputeRegistration is what Nova knows of a compute host.
type ComputeRegistration struct {
	ServiceID          string `json:"serviceID"`
	State              string `json:"state"`
	Status             string `json:"status"`
	HypervisorID       string `json:"hypervisorID,omitempty"`
	HypervisorHostname string `json:"hypervisorHostname,omitempty"`
}

// ErrComputeNotRegistered is the retryable error of WaitComputeRegistered; the retry policy paces it.
const ErrComputeNotRegistered = "ComputeNotRegistered"

// WaitComputeRegistered succeeds once Nova lists an up nova-compute service on the host and its
// hypervisor, the host is mapped to its cell and its resource provider exists, and fails retryably before
// (saying which is missing).
func (o *OpenStack) WaitComputeRegistered(ctx context.Context, in ComputeHostInput) (*ComputeRegistration, error) {
	nova, err := o.computeFor(ctx, in.Cloud.Identity())
	if err != nil {
		return nil, err
	}
	svcs, err := nova.ComputeServices(ctx, in.Host)
	if err != nil {
		return nil, classifyOS("list compute services of "+in.Host, err)
	}
	if len(svcs) == 0 {
		return nil, temporal.NewApplicationError(fmt.Sprintf("no nova-compute service on host %s yet", in.Host), ErrComputeNotRegistered)
	}
	reg := &ComputeRegistration{ServiceID: svcs[0].ID, State: svcs[0].State, Status: svcs[0].Status}
	if reg.State != "up" {
		return nil, temporal.NewApplicationError(fmt.Sprintf("nova-compute service on host %s is %s", in.Host, reg.State), ErrComputeNotRegistered)
	}
	hvs, err := nova.Hypervisors(ctx, in.Host)
	if err != nil && !isNotFound(err) {
		return nil, classifyOS("list hypervisors of "+in.Host, err)
	}
	if err == nil {
		for _, h := range hvs {
			if h.HypervisorHostname == in.Host || h.Service.Host == in.Host {
				reg.HypervisorID, reg.HypervisorHostname = h.ID, h.HypervisorHostname
				if err := mappingCheck(ctx, nova, reg, in.Host); err != nil {
					return nil, err
				}
				placement, err := o.placementFor(ctx, in.Cloud.Identity())
				if err != nil {
					return nil, err
				}
				return reg, providerCheck(ctx, placement, reg)
			}
		}
	}
	return nil, temporal.NewApplicationError(fmt.Sprintf("nova-compute on host %s is up but Nova lists no hypervisor for it yet", in.Host), ErrComputeNotRegistered)
}

// mappingCheck makes sure the host is mapped to its cell (host discovery ran since it registered):
// until then the scheduler may pick it from Placement and the boot fails with "Host … is not mapped to
// any cell". The compute API says so only through a hypervisor shown with its servers (2.53+), which
// looks the host's mapping up and answers 404 without one.
func mappingCheck(ctx context.Context, nova ComputeClient, reg *ComputeRegistration, host string) error {
	err := nova.ShowHypervisorServers(ctx, reg.HypervisorID)
	if isNotFound(err) {
		return temporal.NewApplicationError(fmt.Sprintf("nova-compute on host %s is up but not mapped to a cell yet (waiting for host discovery)", host), ErrComputeNotRegistered)
	}
	if err != nil {
		return classifyOS("show hypervisor "+reg.HypervisorID+" of "+host, err)
	}
	return nil
}

// providerCheck makes sure the hypervisor's resource provider (same UUID as the compute node) exists in
// placement: without it the scheduler can never use the host. A provider of the same name with another
// UUID (a stale record of an earlier compute of that name) keeps nova-compute from creating its own; the
// error says so.
func providerCheck(ctx context.Context, placement PlacementClient, reg *ComputeRegistration) error {
	rps, err := placement.Providers(ctx, reg.HypervisorHostname)
	if err != nil {
		return classifyOS("list resource providers named "+reg.HypervisorHostname, err)
	}
	for _, rp := range rps {
		if rp == reg.HypervisorID {
			return nil
		}
		return temporal.NewApplicationError(fmt.Sprintf("placement holds a resource provider named %s with UUID %s, not the compute node's %s: a stale record of an earlier compute of that name blocks this one (delete it)",
			reg.HypervisorHostname, rp, reg.HypervisorID), ErrComputeNotRegistered)
	}
	return temporal.NewApplicationError(fmt.Sprintf("nova-compute on %s has no resource provider in placement yet", reg.HypervisorHostname), ErrComputeNotRegistered)
}

// errNoComputeAPI marks a catalog with no compute endpoint in the region asked for: no Nova API is
// deployed there (yet, or any more).
var errNoComputeAPI = errors.New("no compute API in the catalog")

// ErrComputeAPIMissing is the retryable error of WaitComputeAPI.
const ErrComputeAPIMissing = "ComputeAPIMissing"

// WaitComputeAPI succeeds once the catalog has a compute endpoint in the cloud's compute region, and
// fails retryably before: a data plane deployed before its control plane waits for it.
func (o *OpenStack) WaitComputeAPI(ctx context.Context, cloud CloudSecret) error {
	_, err := o.computeFor(ctx, cloud.Identity())
	if errors.Is(err, errNoComputeAPI) {
		region := cloud.ComputeRegion
		if region == "" {
			region = "of the cloud"
		}
		return temporal.NewApplicationError(fmt.Sprintf("no compute API (Nova) in region %s of the catalog yet", region), ErrComputeAPIMissing)
	}
	return err
}

// DeleteComputeService removes the host's nova-compute service record (with its compute node and
// resource provider) from Nova; a host Nova does not know is not an error, nor is a region with no
// compute API (its Nova, and with it every service record, is gone or never was): there only the host's
// resource provider is removed from Placement, unless allocations remain on it.
func (o *OpenStack) DeleteComputeService(ctx context.Context, in ComputeHostInput) error {
	id := in.Cloud.Identity()
	nova, err := o.computeFor(ctx, id)
	if errors.Is(err, errNoComputeAPI) {
		// nova-compute registers its resource provider in Placement without the API: one left behind
		// would refuse the next compute of this name (409 on its provider).
		logInfo(ctx, "no compute API in the catalog: no compute service to delete, only its resource provider", "host", in.Host, "region", in.Cloud.ComputeRegion)
		placement, err := o.placementFor(ctx, id)
		if err != nil {
			return nil // no Placement either: nothing of the compute can be left
		}
		return removeProvider(ctx, placement, nil, in.Host)
	}
	if err != nil {
		return err
	}
	svcs, err := nova.ComputeServices(ctx, in.Host)
	if err != nil {
		return classifyOS("list compute services of "+in.Host, err)
	}
	for _, s := range svcs {
		if err := nova.DeleteService(ctx, s.ID); err != nil && !isNotFound(err) {
			return classifyOS("delete compute service of "+in.Host, err)
		}
	}
	// Nova deletes the provider with the service unless allocations remain; one left behind would block
	// a later compute of the same name (see providerCheck).
	placement, err := o.placementFor(ctx, id)
	if err != nil {
		return err
	}
	return removeProvider(ctx, placement, nova, in.Host)
}

// removeProvider deletes the providers named name. Once the host's compute service is gone and no
// instance is on it, allocations still held against its provider are stale (an instance deleted, or a
// migration that ended, while its allocations stayed): those of consumers Nova knows no instance of are
// deleted first. An existing instance's are not touched: the error names it and a retry decides later.
func removeProvider(ctx context.Context, placement PlacementClient, nova ComputeClient, name string) error {
	rps, err := placement.Providers(ctx, name)
	if err != nil {
		return classifyOS("list resource providers named "+name, err)
	}
	for _, rp := range rps {
		consumers, err := placement.Consumers(ctx, rp)
		if err != nil && !isNotFound(err) {
			return classifyOS("allocations of resource provider "+name, err)
		}
		var live []string
		for _, c := range consumers {
			exists, err := serverExists(ctx, nova, c)
			if err != nil {
				return classifyOS("instance "+c, err)
			}
			if exists {
				live = append(live, c)
				continue
			}
			if err := placement.DeleteAllocations(ctx, c); err != nil && !isNotFound(err) {
				return classifyOS("delete stale allocations of consumer "+c, err)
			}
			logInfo(ctx, "deleted stale allocations on a removed compute's provider", "provider", name, "consumer", c)
		}
		if len(live) > 0 {
			sort.Strings(live)
			return temporal.NewApplicationError(fmt.Sprintf("resource provider %s (%s) still holds allocations of instances %s", name, rp, strings.Join(live, ", ")), ErrInstancesOnHost)
		}
		if err := placement.DeleteProvider(ctx, rp); err != nil && !isNotFound(err) {
			return classifyOS("delete resource provider "+name, err)
		}
		logInfo(ctx, "deleted the resource provider Nova left", "provider", name, "uuid", rp)
	}
	return nil
}

// serverExists says whether Nova has an instance of that ID. With no Nova (a region with no compute
// API) no instance can be asked about, so each consumer counts as one: its allocations stay, and
// removeProvider names it.
func serverExists(ctx context.Context, nova ComputeClient, id string) (bool, error) {
	if nova == nil {
		return true, nil
	}
	_, err := nova.GetServer(ctx, id)
	if isNotFound(err) {
		return false, nil
	}
	return err == nil, err
}

// logInfo logs through the activity's logger when called in an activity (not in a unit test).
func logInfo(ctx context.Context, msg string, kv ...any) {
	if activity.IsActivity(ctx) {
		activity.GetLogger(ctx).Info(msg, kv...)
	}
}

// logWarn is logInfo at warning level.
func logWarn(ctx context.Context, msg string, kv ...any) {
	if activity.IsActivity(ctx) {
		activity.GetLogger(ctx).Warn(msg, kv...)
	}
}

// DeleteServersOnHost deletes every instance Nova lists on the host (every project) and returns their
// IDs, sorted; instances already gone are not an error. A compute being removed under an approved (or
// Skip) drain failure uses it: its instances go with it. It does not wait: WaitHostEmpty does.
func (o *OpenStack) DeleteServersOnHost(ctx context.Context, in ComputeHostInput) ([]string, error) {
	nova, err := o.computeFor(ctx, in.Cloud.Identity())
	if errors.Is(err, errNoComputeAPI) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return deleteServersOn(ctx, nova, in.Host)
}

func deleteServersOn(ctx context.Context, nova ComputeClient, host string) ([]string, error) {
	list, err := serversOn(ctx, nova, host)
	if err != nil {
		return nil, err
	}
	ids := make([]string, 0, len(list))
	for _, s := range list {
		if err := nova.DeleteServer(ctx, s.ID); err != nil && !isNotFound(err) {
			return nil, classifyOS("delete server "+s.ID+" on "+host, err)
		}
		ids = append(ids, s.ID)
	}
	sort.Strings(ids)
	return ids, nil
}

// ErrInstancesOnHost is the retryable error of WaitHostEmpty while instances remain on the host.
const ErrInstancesOnHost = "InstancesOnHost"

// WaitHostEmpty succeeds once Nova lists no instance on the host (any project), and fails retryably
// before, naming them: a compute being removed keeps nova-compute running until its instances are
// deleted or moved (an instance deleted after nova-compute stopped waits in "deleting" for a process
// that never comes back, and Nova refuses to delete a compute service that hosts instances). A region
// with no compute API has no instance anywhere.
func (o *OpenStack) WaitHostEmpty(ctx context.Context, in ComputeHostInput) error {
	nova, err := o.computeFor(ctx, in.Cloud.Identity())
	if errors.Is(err, errNoComputeAPI) {
		return nil
	}
	if err != nil {
		return err
	}
	list, err := serversOn(ctx, nova, in.Host)
	if err != nil {
		return err
	}
	if len(list) == 0 {
		return nil
	}
	names := make([]string, 0, len(list))
	for _, s := range list {
		names = append(names, fmt.Sprintf("%s (%s, %s)", s.Name, s.ID, s.Status))
	}
	sort.Strings(names)
	return temporal.NewApplicationError(fmt.Sprintf("%d instance(s) still on %s, waiting for them to be deleted or moved: %s",
		len(list), in.Host, strings.Join(names, ", ")), ErrInstancesOnHost)
}
