package bridge

import (
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stackflow/stackflow/api/lifecycle"
)

// Observed is what the bridge knows of an object from its cache: only metadata matters.
type Observed struct {
	Generation   int64
	Deleting     bool
	HasFinalizer bool
}

// Observe reads the metadata the plan needs. The generation is lifecycle.EffectiveGeneration: the API
// server's, else the one the bridge derives (kinds without metadata.generation), else 1, so the workflow
// always sees a positive generation and records the same one as observed.
func Observe(m metav1.Object) Observed {
	return Observed{
		Generation:   lifecycle.EffectiveGeneration(m.GetGeneration(), m.GetAnnotations()),
		Deleting:     m.GetDeletionTimestamp() != nil,
		HasFinalizer: slices.Contains(m.GetFinalizers(), lifecycle.Finalizer),
	}
}

// Signalled is what this bridge process already told an object's workflow successfully.
type Signalled struct {
	// Generation is the last generation sent with a spec signal (0: none).
	Generation int64
	// DeleteAt is when the delete signal was last sent (zero: never).
	DeleteAt time.Time
}

// Plan is what to do for one object.
type Plan struct {
	// AddFinalizer adds lifecycle.Finalizer to the object before anything else.
	AddFinalizer bool
	// Signal is lifecycle.SignalSpec, lifecycle.SignalDelete or empty for none.
	Signal string
	// Generation is the generation a spec signal carries.
	Generation int64
}

// PlanFor decides what to do for an object. It is pure: the caller executes the plan.
//
// An object being deleted gets the delete signal only while our finalizer holds it (so a workflow that never
// started still starts, tears down and drops the finalizer); the signal is repeated after redeliver in case
// the workflow that received it has since failed. A live object gets the finalizer, then one spec signal
// per generation: resyncs and duplicate events cost nothing.
func PlanFor(o Observed, s Signalled, now time.Time, redeliver time.Duration) Plan {
	if o.Deleting {
		if !o.HasFinalizer {
			return Plan{}
		}
		if !s.DeleteAt.IsZero() && now.Sub(s.DeleteAt) < redeliver {
			return Plan{}
		}
		return Plan{Signal: lifecycle.SignalDelete}
	}
	p := Plan{AddFinalizer: !o.HasFinalizer}
	if s.Generation < o.Generation {
		p.Signal = lifecycle.SignalSpec
		p.Generation = o.Generation
	}
	return p
}

// Empty reports whether the plan does nothing.
func (p Plan) Empty() bool { return !p.AddFinalizer && p.Signal == "" }
