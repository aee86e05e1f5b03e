// Package heartbeat keeps an activity that blocks While, so a worker that dies is noticed within
// the activity's heartbeat timeout and a cancelled workflow reaches the activity through its context.
package heartbeat

import (
	"context"
	"time"

	"go.temporal.io/sdk/activity"
)

// Every heartbeats now and every interval until the returned stop is called or ctx ends, so a worker
// that dies is noticed within the activity's heartbeat timeout and a cancelled workflow reaches the
// activity through ctx. progress, when not nil, gives each heartbeat's details. Outside an activity
// (unit tests) it does nothing. It is the one heartbeat loop of every activity that blocks.
func Every(ctx context.Context, every time.Duration, progress func() any) (stop func()) {
	if !activity.IsActivity(ctx) {
		return func() {}
	}
	beat := func() {
		if progress != nil {
			activity.RecordHeartbeat(ctx, progress())
		} else {
			activity.RecordHeartbeat(ctx)
		}
	}
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			beat()
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return func() { close(done) }
}

// While runs fn while While every second (the OpenStack activities' pace).
func While[T any](ctx context.Context, fn func(ctx context.Context) (T, error)) (T, error) {
	defer Every(ctx, time.Second, nil)()
	return fn(ctx)
}

// Sleep waits d, or less when ctx ends first (its error then).
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
