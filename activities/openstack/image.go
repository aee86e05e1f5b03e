package openstack

import (
	"context"

	infrav1 "github.com/stackflow/stackflow/api/infrastructure/v1beta1"
)

// resolveImage finds exactly one Glance image by ID or by name and tags.
func resolveImage(ctx context.Context, glance ImageClient, p infrav1.ImageParam) (string, error) {
	if p.ID != nil {
		img, err := glance.GetImage(ctx, *p.ID)
		if err != nil {
			return "", classifyOS("image "+*p.ID, err)
		}
		return img.ID, nil
	}
	if p.Filter == nil || (p.Filter.Name == nil && len(p.Filter.Tags) == 0) {
		return "", notFound("image reference has neither id nor filter")
	}
	opts := ImageListOpts{Tags: p.Filter.Tags}
	name := "<any>"
	if p.Filter.Name != nil {
		opts.Name, name = *p.Filter.Name, *p.Filter.Name
	}
	all, err := glance.ListImages(ctx, opts)
	if err != nil {
		return "", classifyOS("list images", err)
	}
	switch len(all) {
	case 0:
		return "", notFound("no image named %s with tags %v", name, p.Filter.Tags)
	case 1:
		return all[0].ID, nil
	}
	return "", ambiguous("%d images named %s with tags %v", len(all), name, p.Filter.Tags)
}
