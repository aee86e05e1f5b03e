package outcome

import (
	"errors"
	"fmt"
	"testing"

	"go.temporal.io/sdk/temporal"
)

// recorder is a testing.TB that records a failure instead of failing the test.
type recorder struct {
	testing.TB
	failed bool
}

func (r *recorder) Name() string          { return "recorder" }
func (r *recorder) Helper()               {}
func (r *recorder) Errorf(string, ...any) { r.failed = true }
func (r *recorder) Fatalf(string, ...any) { r.failed = true; panic(r) }
func (r *recorder) FailNow()              { r.failed = true; panic(r) }
func (r *recorder) Fatal(...any)          { r.failed = true; panic(r) }

// fails says whether Require failed the test for err, outcome and errType.
func fails(err error, outcome, errType string) (failed bool) {
	r := &recorder{}
	defer func() {
		if p := recover(); p != nil && p != r {
			panic(p)
		}
		failed = r.failed
	}()
	Require(r, err, outcome, errType)
	return r.failed
}

// Require passes what it names and fails anything else: a check that cannot fail checks nothing.
func TestRequire(t *testing.T) {
	permanent := temporal.NewNonRetryableApplicationError("no", "Refused", nil)
	retryable := temporal.NewApplicationError("later", "Busy")
	wrapped := fmt.Errorf("op: %w", errors.New("connection refused"))
	for _, tc := range []struct {
		name         string
		err          error
		outcome, typ string
		wantFail     bool
	}{
		{"ok", nil, "ok", "", false},
		{"ok, but an error", wrapped, "ok", "", true},
		{"retryable application error", retryable, "retryable", "", false},
		{"retryable plain error", wrapped, "retryable", "", false},
		{"retryable, but none", nil, "retryable", "", true},
		{"retryable, but permanent", permanent, "retryable", "", true},
		{"permanent of its type", permanent, "permanent", "Refused", false},
		{"permanent, another type", permanent, "permanent", "Other", true},
		{"permanent, but retryable", retryable, "permanent", "Busy", true},
		{"permanent, but a plain error", wrapped, "permanent", "", true},
		{"an outcome it does not know", nil, "maybe", "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := fails(tc.err, tc.outcome, tc.typ); got != tc.wantFail {
				t.Errorf("Require(%v, %q, %q) failed=%v, want %v", tc.err, tc.outcome, tc.typ, got, tc.wantFail)
			}
		})
	}
}
