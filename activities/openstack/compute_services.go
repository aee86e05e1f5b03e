package openstack

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/hypervisors"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/services"
	"github.com/gophercloud/gophercloud/v2/openstack/placement/v1/resourceproviders"
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
// hypervisor, and fails retryably before (saying which of the two is missing).
func (o *OpenStack) WaitComputeRegistered(ctx context.Context, in ComputeHostInput) (*ComputeRegistration, error) {
	c, err := o.clientsFor(ctx, in.Cloud.Identity())
	if err != nil {
		return nil, err
	}
	pages, err := services.List(c.compute, services.ListOpts{Binary: "nova-compute", Host: in.Host}).AllPages(ctx)
	if err != nil {
		return nil, classifyOS("list compute services of "+in.Host, err)
	}
	svcs, err := services.ExtractServices(pages)
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
	pattern := in.Host
	hpages, err := hypervisors.List(c.compute, hypervisors.ListOpts{HypervisorHostnamePattern: &pattern}).AllPages(ctx)
	if err != nil && !isNotFound(err) {
		return nil, classifyOS("list hypervisors of "+in.Host, err)
	}
	if err == nil {
		hvs, err := hypervisors.ExtractHypervisors(hpages)
		if err != nil {
			return nil, classifyOS("list hypervisors of "+in.Host, err)
		}
		for _, h := range hvs {
			if h.HypervisorHostname == in.Host || h.Service.Host == in.Host {
				reg.HypervisorID, reg.HypervisorHostname = h.ID, h.HypervisorHostname
				return reg, providerCheck(ctx, c, reg)
			}
		}
	}
	return nil, temporal.NewApplicationError(fmt.Sprintf("nova-compute on host %s is up but Nova lists no hypervisor for it yet", in.Host), ErrComputeNotRegistered)
}

// providerCheck makes sure the hypervisor's resource provider (same UUID as the compute node) exists in
// placement: without it the scheduler can never use the host. A provider of the same name with another
// UUID (a stale record of an earlier compute of that name) keeps nova-compute from creating its own; the
// error says so.
func providerCheck(ctx context.Context, c *osClients, reg *ComputeRegistration) error {
	pl, err := c.placementAPI()
	if err != nil {
		return err
	}
	pages, err := resourceproviders.List(pl, resourceproviders.ListOpts{Name: reg.HypervisorHostname}).AllPages(ctx)
	if err != nil {
		return classifyOS("list resource providers named "+reg.HypervisorHostname, err)
	}
	rps, err := resourceproviders.ExtractResourceProviders(pages)
	if err != nil {
		return classifyOS("list resource providers named "+reg.HypervisorHostname, err)
	}
	for _, rp := range rps {
		if rp.UUID == reg.HypervisorID {
			return nil
		}
		return temporal.NewApplicationError(fmt.Sprintf("placement holds a resource provider named %s with UUID %s, not the compute node's %s: a stale record of an earlier compute of that name blocks this one (delete it)",
			reg.HypervisorHostname, rp.UUID, reg.HypervisorID), ErrComputeNotRegistered)
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
	_, err := o.clientsFor(ctx, cloud.Identity())
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
// compute API (its Nova, and with it every service record, is gone or never was).
func (o *OpenStack) DeleteComputeService(ctx context.Context, in ComputeHostInput) error {
	c, err := o.clientsFor(ctx, in.Cloud.Identity())
	if errors.Is(err, errNoComputeAPI) {
		activity.GetLogger(ctx).Info("no compute API in the catalog: no compute service to delete", "host", in.Host, "region", in.Cloud.ComputeRegion)
		return nil
	}
	if err != nil {
		return err
	}
	pages, err := services.List(c.compute, services.ListOpts{Binary: "nova-compute", Host: in.Host}).AllPages(ctx)
	if err != nil {
		return classifyOS("list compute services of "+in.Host, err)
	}
	svcs, err := services.ExtractServices(pages)
	if err != nil {
		return classifyOS("list compute services of "+in.Host, err)
	}
	for _, s := range svcs {
		if err := services.Delete(ctx, c.compute, s.ID).ExtractErr(); err != nil && !isNotFound(err) {
			return classifyOS("delete compute service of "+in.Host, err)
		}
	}
	return nil
}

// ErrInstancesOnHost is the retryable error of WaitHostEmpty while instances remain on the host.
const ErrInstancesOnHost = "InstancesOnHost"

// WaitHostEmpty succeeds once Nova lists no instance on the host (any project), and fails retryably
// before, naming them: a compute being removed keeps nova-compute running until its instances are
// deleted or moved (an instance deleted after nova-compute stopped waits in "deleting" for a process
// that never comes back, and Nova refuses to delete a compute service that hosts instances). A region
// with no compute API has no instance anywhere.
func (o *OpenStack) WaitHostEmpty(ctx context.Context, in ComputeHostInput) error {
	c, err := o.clientsFor(ctx, in.Cloud.Identity())
	if errors.Is(err, errNoComputeAPI) {
		return nil
	}
	if err != nil {
		return err
	}
	list, err := serversOn(ctx, gopherCompute{c.compute}, in.Host)
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
