// Package outcome checks an activity's error in unit tests the way Temporal will treat it.
package outcome

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
)

// Require checks an activity's error: "ok" (none), "retryable" (Temporal retries it) or "permanent"
// with its type.
func Require(t testing.TB, err error, outcome, errType string) {
	t.Helper()
	var app *temporal.ApplicationError
	switch outcome {
	case "ok":
		require.NoError(t, err)
	case "retryable":
		require.Error(t, err)
		require.False(t, errors.As(err, &app) && app.NonRetryable(), "retryable: %v", err)
	case "permanent":
		require.True(t, errors.As(err, &app) && app.NonRetryable(), "permanent: %v", err)
		require.Equal(t, errType, app.Type(), "%v", err)
	default:
		t.Fatalf("unknown outcome %q", outcome)
	}
}
