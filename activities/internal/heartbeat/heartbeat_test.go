package heartbeat

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"
)

// beats runs fn as an activity and counts the heartbeats it records, with their last detail.
func beats(t *testing.T, fn func(ctx context.Context) error) (n int64, last string) {
	t.Helper()
	env := (&testsuite.WorkflowTestSuite{}).NewTestActivityEnvironment()
	var count atomic.Int64
	var detail atomic.Value
	env.SetOnActivityHeartbeatListener(func(_ *activity.Info, d converter.EncodedValues) {
		count.Add(1)
		var s string
		if d != nil && d.HasValues() {
			require.NoError(t, d.Get(&s))
		}
		detail.Store(s)
	})
	env.RegisterActivityWithOptions(fn, activity.RegisterOptions{Name: "blocking"})
	_, err := env.ExecuteActivity("blocking")
	require.NoError(t, err)
	s, _ := detail.Load().(string)
	return count.Load(), s
}

func TestEveryBeatsUntilStopped(t *testing.T) {
	var calls atomic.Int64
	n, last := beats(t, func(ctx context.Context) error {
		stop := Every(ctx, 10*time.Millisecond, func() any { return "step " + string(rune('0'+calls.Add(1)%10)) })
		require.Eventually(t, func() bool { return calls.Load() >= 4 }, 5*time.Second, time.Millisecond, "one at once and one per interval")
		stop()
		// A beat under way when stop came may still land; then none.
		time.Sleep(100 * time.Millisecond)
		after := calls.Load()
		time.Sleep(100 * time.Millisecond)
		require.Equal(t, after, calls.Load(), "no heartbeat after stop")
		return nil
	})
	// The SDK sends the first heartbeat and throttles the others (the server would hear of the last one
	// later): the beats are counted by the progress they ask for.
	require.GreaterOrEqual(t, n, int64(1))
	require.Contains(t, last, "step ", "a heartbeat carries its progress")
}

func TestWhileBeatsAtOnce(t *testing.T) {
	n, _ := beats(t, func(ctx context.Context) error {
		v, err := While(ctx, func(context.Context) (int, error) {
			time.Sleep(20 * time.Millisecond)
			return 7, nil
		})
		require.Equal(t, 7, v)
		return err
	})
	require.GreaterOrEqual(t, n, int64(1), "a heartbeat at once, not only after the first second")
}

func TestEveryOutsideAnActivity(t *testing.T) {
	called := false
	stop := Every(context.Background(), time.Millisecond, func() any { called = true; return nil })
	time.Sleep(10 * time.Millisecond)
	stop()
	require.False(t, called, "no activity: nothing to heartbeat")
}

func TestSleep(t *testing.T) {
	require.NoError(t, Sleep(context.Background(), time.Millisecond))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	t0 := time.Now()
	require.ErrorIs(t, Sleep(ctx, time.Hour), context.Canceled)
	require.Less(t, time.Since(t0), time.Second, "a cancelled context ends the wait")
}
