package object

import (
	"errors"
	"time"
)

// retryLaterError is a failure that may clear with no change to the object or to the cloud by a person:
// something the object refers to is not there yet (the flavor a new Nova still has to create, the
// compute API of a region still deploying, computes still joining their cell).
type retryLaterError struct{ err error }

func (e *retryLaterError) Error() string { return e.err.Error() }
func (e *retryLaterError) Unwrap() error { return e.err }

// RetryLater marks err as a failure that may clear by itself: the lifecycle shows it with phase Waiting
// (Ready False with its reason and message, as for any failure) and reconciles again by itself after
// AutoRetryDelay, without waiting for a retry signal or a new generation: applied together, objects
// that depend on each other converge, and none of them reads Failed on the way. A nil err stays nil.
func RetryLater(err error) error {
	if err == nil {
		return nil
	}
	return &retryLaterError{err: err}
}

// ChangeRetryLaterWaits versions phase Waiting for a RetryLater failure: runs recorded before it wrote
// phase Failed there, and replay must issue the same search-attribute upsert.
const ChangeRetryLaterWaits = "retry-later-waits"

// IsRetryLater reports whether err was marked with RetryLater.
func IsRetryLater(err error) bool {
	var r *retryLaterError
	return errors.As(err, &r)
}

// Bounds of the auto-retry back-off: a dependency that appears is seen within MaxAutoRetryDelay, and one
// that never does (a typo) costs one reconcile per MaxAutoRetryDelay.
const (
	FirstAutoRetryDelay = 10 * time.Second
	MaxAutoRetryDelay   = 2 * time.Minute
)

// AutoRetryDelay is the wait before the attempt-th automatic retry (1-based): 10 s doubling, at most
// MaxAutoRetryDelay.
func AutoRetryDelay(attempt int) time.Duration {
	d := FirstAutoRetryDelay
	for i := 1; i < attempt && d < MaxAutoRetryDelay; i++ {
		d *= 2
	}
	return min(d, MaxAutoRetryDelay)
}
