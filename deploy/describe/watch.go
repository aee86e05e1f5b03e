package describe

import (
	"context"
	"fmt"
	"io"
	"time"
)

// Watch redraws what view returns in place (the screen cleared, the cursor home) whenever it changes,
// looking every interval, until ctx ends. A failed look is shown in place of the view and tried again.
func Watch(ctx context.Context, w io.Writer, interval time.Duration, view func(context.Context) (string, error)) error {
	last := ""
	for {
		s, err := view(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			s = "error: " + err.Error() + "\n"
		}
		if s != last {
			// ANSI: cursor home, clear the screen, then the view.
			if _, err := fmt.Fprintf(w, "\x1b[H\x1b[2J%s\n(%s; Ctrl-C ends)\n", s, time.Now().Format("15:04:05")); err != nil {
				return err
			}
			last = s
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(interval):
		}
	}
}
