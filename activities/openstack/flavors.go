package openstack

import (
	"context"
	"fmt"

	"go.temporal.io/sdk/temporal"
)

// Flavor is a flavor to have in a Nova: a name and a size.
type Flavor struct {
	Name  string `json:"name"`
	ID    string `json:"id,omitempty"`
	VCPUs int    `json:"vcpus"`
	RAM   int    `json:"ram"`
	Disk  int    `json:"disk"`
}

// FlavorsInput is the flavors to have in the Nova whose compute API is in Region, created as Auth (a
// service user with the admin role).
type FlavorsInput struct {
	Auth    ServiceUser `json:"auth"`
	Region  string      `json:"region"`
	Flavors []Flavor    `json:"flavors"`
}

// FlavorsResult says which flavors were created by this call and which were there already.
type FlavorsResult struct {
	Created []string `json:"created,omitempty"`
	Adopted []string `json:"adopted,omitempty"`
}

// ErrFlavorMismatch is the non-retryable error of a flavor that exists with another size: Nova flavors
// cannot change.
const ErrFlavorMismatch = "FlavorMismatch"

// EnsureFlavors creates the flavors a Nova lacks, through its own compute API; a flavor of the same name
// and size is adopted, one of another size is refused. Idempotent.
func (o *OpenStack) EnsureFlavors(ctx context.Context, in FlavorsInput) (*FlavorsResult, error) {
	nova, err := o.serviceCompute(ctx, in.Auth, in.Region)
	if err != nil {
		return nil, err
	}
	return ensureFlavors(ctx, nova, in)
}

// ensureFlavors is EnsureFlavors against the Nova of in.Region.
func ensureFlavors(ctx context.Context, nova ComputeClient, in FlavorsInput) (*FlavorsResult, error) {
	have, err := nova.ListFlavors(ctx)
	if err != nil {
		return nil, classifyOS("list flavors in "+in.Region, err)
	}
	out := &FlavorsResult{}
	for _, want := range in.Flavors {
		if f := flavorNamed(have, want.Name); f != nil {
			if msg := FlavorMismatch(*f, want); msg != "" {
				return nil, temporal.NewNonRetryableApplicationError(msg, ErrFlavorMismatch, nil)
			}
			out.Adopted = append(out.Adopted, want.Name)
			continue
		}
		id := want.ID
		if id == "" {
			id = want.Name
		}
		public := true
		disk := want.Disk
		_, err := nova.CreateFlavor(ctx, FlavorCreateOpts{Name: want.Name, ID: id, VCPUs: want.VCPUs, RAM: want.RAM, Disk: &disk, IsPublic: &public})
		if err != nil && !isConflict(err) {
			return nil, classifyOS(fmt.Sprintf("create flavor %s in %s", want.Name, in.Region), err)
		}
		// A conflict is this call's earlier attempt, which created it before its reply was lost: the next
		// attempt lists it and compares.
		if err != nil {
			return nil, fmt.Errorf("create flavor %s in %s: %w", want.Name, in.Region, err)
		}
		out.Created = append(out.Created, want.Name)
	}
	return out, nil
}

func flavorNamed(all []NovaFlavor, name string) *NovaFlavor {
	for i := range all {
		if all[i].Name == name {
			return &all[i]
		}
	}
	return nil
}

// FlavorMismatch says how an existing flavor differs from the one wanted, or "" when it has the wanted
// ID (when set) and size.
func FlavorMismatch(have NovaFlavor, want Flavor) string {
	if want.ID != "" && have.ID != want.ID {
		return fmt.Sprintf("flavor %s exists with ID %s, not %s: Nova flavors cannot change (delete it, or name another)", want.Name, have.ID, want.ID)
	}
	if have.VCPUs != want.VCPUs || have.RAM != want.RAM || have.Disk != want.Disk {
		return fmt.Sprintf("flavor %s exists with %d vCPU, %d MiB RAM, %d GiB disk, not %d, %d, %d: Nova flavors cannot change (delete it, or name another)",
			want.Name, have.VCPUs, have.RAM, have.Disk, want.VCPUs, want.RAM, want.Disk)
	}
	return ""
}
