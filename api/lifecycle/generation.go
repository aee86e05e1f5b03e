package lifecycle

import "strconv"

// Kinds whose API server keeps no metadata.generation (core Nodes) get one of stackflow's own: the
// bridge fingerprints what their workflows read (for a Node: labels, taints, schedulability and
// readiness) and, when the fingerprint changes, increments the generation in an annotation. Heartbeats
// change nothing a workflow reads, so they change no generation and wake no workflow.
const (
	// AnnotationGeneration holds the derived generation (a decimal integer, starting at 1).
	AnnotationGeneration = "stackflow.io/generation"
	// AnnotationFingerprint holds the fingerprint the derived generation was last incremented for.
	AnnotationFingerprint = "stackflow.io/fingerprint"
)

// EffectiveGeneration is the generation the bridge signals and a workflow records as observed:
// metadata.generation when the API server keeps one, else the derived generation of the annotation,
// else 1 (an object always exists at a positive generation).
func EffectiveGeneration(generation int64, annotations map[string]string) int64 {
	if generation > 0 {
		return generation
	}
	if g, err := strconv.ParseInt(annotations[AnnotationGeneration], 10, 64); err == nil && g > 0 {
		return g
	}
	return 1
}

// NextDerivedGeneration says whether a derived generation must move for the fingerprint live, and to
// what: it moves when the recorded fingerprint differs (or none is recorded), by one.
func NextDerivedGeneration(annotations map[string]string, live string) (next int64, bump bool) {
	if annotations[AnnotationFingerprint] == live && annotations[AnnotationGeneration] != "" {
		return EffectiveGeneration(0, annotations), false
	}
	cur, err := strconv.ParseInt(annotations[AnnotationGeneration], 10, 64)
	if err != nil || cur < 0 {
		cur = 0
	}
	return cur + 1, true
}
