package lifecycle

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestEffectiveGeneration(t *testing.T) {
	for _, tc := range []struct {
		name string
		gen  int64
		ann  map[string]string
		want int64
	}{
		{"API server generation wins", 4, map[string]string{AnnotationGeneration: "9"}, 4},
		{"derived generation", 0, map[string]string{AnnotationGeneration: "7"}, 7},
		{"no generation at all", 0, nil, 1},
		{"unparsable annotation", 0, map[string]string{AnnotationGeneration: "x"}, 1},
		{"non-positive annotation", 0, map[string]string{AnnotationGeneration: "0"}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, EffectiveGeneration(tc.gen, tc.ann))
		})
	}
}

func TestNextDerivedGeneration(t *testing.T) {
	for _, tc := range []struct {
		name     string
		ann      map[string]string
		live     string
		want     int64
		wantBump bool
	}{
		{"first sight", nil, "a", 1, true},
		{"unchanged", map[string]string{AnnotationGeneration: "3", AnnotationFingerprint: "a"}, "a", 3, false},
		{"changed", map[string]string{AnnotationGeneration: "3", AnnotationFingerprint: "a"}, "b", 4, true},
		{"fingerprint without generation", map[string]string{AnnotationFingerprint: "a"}, "a", 1, true},
		{"garbage generation starts over", map[string]string{AnnotationGeneration: "x", AnnotationFingerprint: "a"}, "b", 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, bump := NextDerivedGeneration(tc.ann, tc.live)
			assert.Equal(t, tc.want, got)
			assert.Equal(t, tc.wantBump, bump)
		})
	}
}
