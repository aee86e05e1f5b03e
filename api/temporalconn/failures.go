package temporalconn

import (
	"errors"
	"reflect"
	"strings"

	failurepb "go.temporal.io/api/failure/v1"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
)

// Classified wraps base (Temporal's default failure converter when nil) so that an error wrapping an
// application error with plain Go wrappers (fmt.Errorf's %w, or any Unwrap) keeps that error's
// classification: its type, retryability, details, next retry delay and category. The SDK classifies
// the outermost error only, so without this an activity that returns
// fmt.Errorf("step: %w", temporal.NewNonRetryableApplicationError(...)) reports a retryable failure of
// type wrapError, which the server retries until the activity's timeout. The message and the cause chain
// stay the outer error's. The walk stops at errors of the SDK's own (cancels, timeouts, activity and
// child workflow failures), which keep their conversion.
func Classified(base converter.FailureConverter) converter.FailureConverter {
	if base == nil {
		base = temporal.GetDefaultFailureConverter()
	}
	return classified{base: base}
}

type classified struct{ base converter.FailureConverter }

// ErrorToFailure converts err with the base converter, then classifies it as its wrapped application error.
func (c classified) ErrorToFailure(err error) *failurepb.Failure {
	f := c.base.ErrorToFailure(err)
	info := f.GetApplicationFailureInfo()
	if info == nil || fromSDK(err) {
		return f
	}
	app := wrappedApplicationError(err)
	if app == nil {
		return f
	}
	inner := c.base.ErrorToFailure(app).GetApplicationFailureInfo()
	if inner == nil {
		return f
	}
	info.Type = inner.GetType()
	info.NonRetryable = inner.GetNonRetryable()
	info.Details = inner.GetDetails()
	info.NextRetryDelay = inner.GetNextRetryDelay()
	info.Category = inner.GetCategory()
	return f
}

// FailureToError is the base converter's.
func (c classified) FailureToError(f *failurepb.Failure) error { return c.base.FailureToError(f) }

// wrappedApplicationError is the first application error under err's plain wrappers, or nil when there is
// none or an error of the SDK's own comes first.
func wrappedApplicationError(err error) *temporal.ApplicationError {
	for e := errors.Unwrap(err); e != nil; e = errors.Unwrap(e) {
		if app, ok := e.(*temporal.ApplicationError); ok {
			return app
		}
		if fromSDK(e) {
			return nil
		}
	}
	return nil
}

// fromSDK reports whether err's type is one of the Temporal SDK's (or API's) own.
func fromSDK(err error) bool {
	t := reflect.TypeOf(err)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	p := t.PkgPath()
	return strings.HasPrefix(p, "go.temporal.io/")
}
