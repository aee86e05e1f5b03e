package temporalconn_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"github.com/stackflow/stackflow/api/temporalconn"
)

// A wrapped application error keeps its classification through the failure converter; the SDK's own
// errors and unclassified ones convert as the SDK converts them.
func TestClassifiedKeepsTheWrappedClassification(t *testing.T) {
	permanent := temporal.NewNonRetryableApplicationError("no such flavor", "FlavorMissing", nil, "m1.tiny")
	later := temporal.NewApplicationErrorWithOptions("busy", "Busy", temporal.ApplicationErrorOptions{NextRetryDelay: 7 * time.Second})
	cases := []struct {
		name         string
		err          error
		typ          string
		nonRetryable bool
		delay        time.Duration
		details      bool
	}{
		{name: "unwrapped permanent error", err: permanent, typ: "FlavorMissing", nonRetryable: true, details: true},
		{name: "wrapped once", err: fmt.Errorf("create server: %w", permanent), typ: "FlavorMissing", nonRetryable: true, details: true},
		{name: "wrapped twice", err: fmt.Errorf("reconcile: %w", fmt.Errorf("create server: %w", permanent)), typ: "FlavorMissing", nonRetryable: true, details: true},
		{name: "wrapped retry delay", err: fmt.Errorf("quota: %w", later), typ: "Busy", delay: 7 * time.Second},
		{name: "plain error", err: errors.New("connection refused"), typ: ""},
		{name: "wrapped plain error", err: fmt.Errorf("dial: %w", errors.New("connection refused")), typ: "wrapError"},
		{name: "a cancel keeps its own conversion", err: fmt.Errorf("wait: %w", temporal.NewCanceledError()), typ: "wrapError"},
	}
	for _, conv := range []struct {
		name string
		fc   converter.FailureConverter
	}{
		{"plain", temporalconn.Classified(nil)},
		{"codec", temporalconn.Classified(temporalconn.FailureConverter(
			temporalconn.DataConverter(temporalconn.NewCodec(ring(t, map[string][]byte{"2025-01": key(1)})))))},
	} {
		for _, tc := range cases {
			t.Run(conv.name+"/"+tc.name, func(t *testing.T) {
				f := conv.fc.ErrorToFailure(tc.err)
				info := f.GetApplicationFailureInfo()
				require.NotNil(t, info)
				require.Equal(t, tc.typ, info.GetType())
				require.Equal(t, tc.nonRetryable, info.GetNonRetryable())
				require.Equal(t, tc.delay, info.GetNextRetryDelay().AsDuration())
				require.Equal(t, tc.details, info.GetDetails() != nil)

				// Back to an error: the outer message is kept, and errors.As finds the classification.
				back := conv.fc.FailureToError(f)
				require.Contains(t, back.Error(), tc.err.Error())
				var app *temporal.ApplicationError
				require.True(t, errors.As(back, &app))
				require.Equal(t, tc.typ, app.Type())
				require.Equal(t, tc.nonRetryable, app.NonRetryable())
				if tc.details {
					var flavor string
					require.NoError(t, app.Details(&flavor))
					require.Equal(t, "m1.tiny", flavor)
				}
			})
		}
	}
}
