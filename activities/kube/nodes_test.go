package kube

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestNodeLabelPatch(t *testing.T) {
	const cp, comp = "openstack-control-plane", "openstack-compute-node"
	managed := []string{comp, cp}
	for _, tc := range []struct {
		name        string
		labels      map[string]string
		annotations map[string]string
		in          NodeLabelsInput
		want        map[string]any
	}{
		{
			name:   "first change records what the site had",
			labels: map[string]string{comp: "enabled", "type": "kwok"},
			in:     NodeLabelsInput{Set: map[string]string{cp: "enabled"}, Remove: []string{comp}, Manage: true},
			want: map[string]any{"metadata": map[string]any{
				"labels":      map[string]any{cp: "enabled", comp: nil},
				"annotations": map[string]any{AnnotationSiteRoleLabels: `{"openstack-compute-node":"enabled"}`},
			}},
		},
		{
			name:   "labels as wanted: nothing written, nothing recorded",
			labels: map[string]string{cp: "enabled"},
			in:     NodeLabelsInput{Set: map[string]string{cp: "enabled"}, Remove: []string{comp}, Manage: true},
		},
		{
			name:        "a later change keeps the first record",
			labels:      map[string]string{cp: "enabled"},
			annotations: map[string]string{AnnotationSiteRoleLabels: `{}`},
			in:          NodeLabelsInput{Remove: managed, Manage: true},
			want:        map[string]any{"metadata": map[string]any{"labels": map[string]any{cp: nil}}},
		},
		{
			name:        "restore puts the site's labels back and forgets",
			labels:      map[string]string{cp: "enabled"},
			annotations: map[string]string{AnnotationSiteRoleLabels: `{"openstack-compute-node":"enabled"}`},
			in:          NodeLabelsInput{Remove: managed, Restore: true},
			want: map[string]any{"metadata": map[string]any{
				"labels":      map[string]any{cp: nil, comp: "enabled"},
				"annotations": map[string]any{AnnotationSiteRoleLabels: nil},
			}},
		},
		{
			name:   "restore on a node stackflow never changed leaves it",
			labels: map[string]string{cp: "enabled"},
			in:     NodeLabelsInput{Remove: managed, Restore: true},
		},
		{
			name:   "without Manage nothing is recorded",
			labels: map[string]string{},
			in:     NodeLabelsInput{Set: map[string]string{comp: "enabled"}},
			want:   map[string]any{"metadata": map[string]any{"labels": map[string]any{comp: "enabled"}}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := NodeLabelPatch(tc.labels, tc.annotations, tc.in)
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
	_, err := NodeLabelPatch(nil, map[string]string{AnnotationSiteRoleLabels: "not json"}, NodeLabelsInput{Restore: true})
	require.Error(t, err, "a damaged record is refused, not guessed at")
}
