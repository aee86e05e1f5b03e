package openstack

import (
	"context"
	"fmt"
	"slices"

	"github.com/stackflow/stackflow/activities/kube"

	"github.com/gophercloud/gophercloud/v2"
	"go.temporal.io/sdk/temporal"
)

// The Keystone activities of services stackflow deploys: their endpoints in the catalog, registered
// with the service's own Keystone user (a service user holds the admin role in project service).

// ServiceUser is a service's Keystone user in project "service" of domain Default; its password is a key
// of a Secret, read when the activity runs.
type ServiceUser struct {
	AuthURL  string            `json:"authURL"`
	User     string            `json:"user"`
	Password kube.SecretKeyRef `json:"password"`
}

// EndpointsInput is a service's endpoints in one region of the catalog.
type EndpointsInput struct {
	Auth ServiceUser `json:"auth"`
	// ServiceType and ServiceName find the catalog's service (created when the catalog has none of the
	// type).
	ServiceType string `json:"serviceType"`
	ServiceName string `json:"serviceName"`
	// Region holds the endpoints; created when missing.
	Region string `json:"region"`
	// URLs are the endpoints by interface (public, internal, admin).
	URLs map[string]string `json:"urls"`
	// Owned are endpoint IDs this owner registered before: they may be moved to new URLs. Any other
	// endpoint of the service, region and interface with another URL is a conflict.
	Owned []string `json:"owned,omitempty"`
}

// EndpointsResult is the endpoints in place, by interface.
type EndpointsResult struct {
	IDs map[string]string `json:"ids"`
}

// ErrEndpointConflict is the non-retryable error of a region where another endpoint already serves the
// service.
const ErrEndpointConflict = "EndpointConflict"

// EnsureEndpoints registers the service's endpoints in the region: an endpoint with the wanted URL is
// adopted, one this owner registered is moved to the URL, any other is a conflict (the region is served
// by another deployment). Idempotent.
func (o *OpenStack) EnsureEndpoints(ctx context.Context, in EndpointsInput) (*EndpointsResult, error) {
	c, err := o.serviceIdentity(ctx, in.Auth)
	if err != nil {
		return nil, err
	}
	return ensureEndpoints(ctx, c, in)
}

// ensureEndpoints is EnsureEndpoints against a service user's Keystone.
func ensureEndpoints(ctx context.Context, c IdentityClient, in EndpointsInput) (*EndpointsResult, error) {
	svc, err := ensureCatalogService(ctx, c, in.ServiceType, in.ServiceName)
	if err != nil {
		return nil, err
	}
	if err := c.GetRegion(ctx, in.Region); err != nil {
		if !isNotFound(err) {
			return nil, classifyOS("get region "+in.Region, err)
		}
		if err := c.CreateRegion(ctx, RegionCreateOpts{ID: in.Region, Description: "created by stackflow"}); err != nil && !isConflict(err) {
			return nil, classifyOS("create region "+in.Region, err)
		}
	}
	existing, err := c.ListEndpoints(ctx, EndpointListOpts{ServiceID: svc, RegionID: in.Region})
	if err != nil {
		return nil, classifyOS("list endpoints of "+in.ServiceType+" in "+in.Region, err)
	}
	out := &EndpointsResult{IDs: map[string]string{}}
	ifaces := make([]string, 0, len(in.URLs))
	for i := range in.URLs {
		ifaces = append(ifaces, i)
	}
	slices.Sort(ifaces)
	for _, iface := range ifaces {
		url := in.URLs[iface]
		var found *Endpoint
		for i := range existing {
			e := &existing[i]
			if string(e.Availability) != iface {
				continue
			}
			if e.URL == url || slices.Contains(in.Owned, e.ID) {
				found = e
				break
			}
			return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("region %s already has a %s %s endpoint %s that this deployment did not register: name another region",
				in.Region, iface, in.ServiceType, e.URL), ErrEndpointConflict, nil)
		}
		switch {
		case found == nil:
			e, err := c.CreateEndpoint(ctx, EndpointCreateOpts{Availability: gophercloud.Availability(iface), Region: in.Region, ServiceID: svc, URL: url})
			if err != nil {
				return nil, classifyOS(fmt.Sprintf("create %s endpoint %s", iface, url), err)
			}
			out.IDs[iface] = e.ID
		case found.URL != url:
			if err := c.MoveEndpoint(ctx, found.ID, url); err != nil {
				return nil, classifyOS(fmt.Sprintf("move %s endpoint %s to %s", iface, found.ID, url), err)
			}
			out.IDs[iface] = found.ID
		default:
			out.IDs[iface] = found.ID
		}
	}
	return out, nil
}

// ensureCatalogService returns the ID of the catalog's service of the type (by name when several),
// creating it when there is none.
func ensureCatalogService(ctx context.Context, c IdentityClient, typ, name string) (string, error) {
	all, err := c.CatalogServices(ctx, typ)
	if err != nil {
		return "", classifyOS("list "+typ+" services", err)
	}
	for _, s := range all {
		if s.Name == name || len(all) == 1 {
			return s.ID, nil
		}
	}
	s, err := c.CreateCatalogService(ctx, CatalogServiceCreateOpts{Type: typ, Name: name, Description: "created by stackflow"})
	if err != nil {
		return "", classifyOS("create "+typ+" service "+name, err)
	}
	return s.ID, nil
}

// DeleteEndpointsInput names endpoints to remove.
type DeleteEndpointsInput struct {
	Auth ServiceUser `json:"auth"`
	IDs  []string    `json:"ids"`
}

// DeleteEndpoints removes the endpoints; those already gone are not an error.
func (o *OpenStack) DeleteEndpoints(ctx context.Context, in DeleteEndpointsInput) error {
	if len(in.IDs) == 0 {
		return nil
	}
	c, err := o.serviceIdentity(ctx, in.Auth)
	if err != nil {
		return err
	}
	for _, id := range in.IDs {
		if err := c.DeleteEndpoint(ctx, id); err != nil && !isNotFound(err) {
			return classifyOS("delete endpoint "+id, err)
		}
	}
	return nil
}
