package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/stackflow/stackflow/deploy/local/procfs"
)

// Proc describes one long-running process of the stack. Every process runs detached in its own session,
// so it outlives the command or test that started it, and is identified by a PID file that also records
// the process start time (guards against PID reuse).
type Proc struct {
	// Name is unique in the stack; it names the PID file and the log file.
	Name string
	// Argv is the command line; Argv[0] must be an absolute path or found on PATH.
	Argv []string
	// Env is added to a minimal environment (PATH, HOME, LANG).
	Env []string
	// Dir is the working directory; the state directory when empty.
	Dir string
}

// pidInfo is what a PID file holds.
type pidInfo struct {
	PID   int
	Start uint64
}

func (s *Stack) pidFile(name string) string { return filepath.Join(s.StateDir, "run", name+".pid") }

// LogFile returns the path of a process's log file.
func (s *Stack) LogFile(name string) string { return filepath.Join(s.StateDir, "logs", name+".log") }

// Running reports whether the named process that the stack started is still alive.
func (s *Stack) Running(name string) (int, bool) {
	info, err := readPID(s.pidFile(name))
	if err != nil {
		return 0, false
	}
	return info.PID, alive(info)
}

// Start starts p unless a process of that name started by the stack is still alive (then it is reused).
// It returns true when it started a new process.
func (s *Stack) Start(p Proc) (bool, error) {
	if _, ok := s.Running(p.Name); ok {
		return false, nil
	}
	if err := os.MkdirAll(filepath.Join(s.StateDir, "run"), 0o755); err != nil {
		return false, err
	}
	if err := os.MkdirAll(filepath.Join(s.StateDir, "logs"), 0o755); err != nil {
		return false, err
	}
	logf, err := os.OpenFile(s.LogFile(p.Name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return false, err
	}
	defer logf.Close()
	fmt.Fprintf(logf, "\n=== %s starting: %s\n", time.Now().Format(time.RFC3339), strings.Join(p.Argv, " "))
	closeInheritedFiles()
	cmd := exec.Command(p.Argv[0], p.Argv[1:]...)
	cmd.Env = append([]string{
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"HOME=" + os.Getenv("HOME"),
		"LANG=C.UTF-8",
	}, p.Env...)
	cmd.Dir = p.Dir
	if cmd.Dir == "" {
		cmd.Dir = s.StateDir
	}
	cmd.Stdout = logf
	cmd.Stderr = logf
	// Own session: no signal from the starting terminal or test reaches it, and Down can signal the
	// whole group (workers forked by uwsgi, Erlang's children) at once.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return false, fmt.Errorf("start %s: %w", p.Name, err)
	}
	start, err := procfs.Start(cmd.Process.Pid)
	if err != nil {
		return false, fmt.Errorf("start %s: %w", p.Name, err)
	}
	if err := os.WriteFile(s.pidFile(p.Name), fmt.Appendf(nil, "%d %d\n", cmd.Process.Pid, start), 0o644); err != nil {
		return false, err
	}
	// Reap the child if it exits while this process lives, so it never lingers as a zombie that looks alive.
	go func() { _ = cmd.Wait() }()
	return true, nil
}

// closeInheritedFiles marks every file descriptor above stderr close-on-exec. Go opens its own files that
// way, but descriptors this process inherited do not close by themselves: a lock file held by the
// command that runs `up` (flock /work/e2e.lock …) would otherwise pass to every daemon the stack starts,
// which would then hold the lock for as long as they run.
func closeInheritedFiles() {
	entries, _ := os.ReadDir("/proc/self/fd")
	for _, e := range entries {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			syscall.CloseOnExec(fd)
		}
	}
}

// Stop terminates the named process group (SIGTERM, then SIGKILL after the grace period) and removes its
// PID file. Stopping a process that is not running is not an error.
func (s *Stack) Stop(name string, grace time.Duration) error {
	file := s.pidFile(name)
	info, err := readPID(file)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if alive(info) {
		_ = syscall.Kill(-info.PID, syscall.SIGTERM)
		_ = syscall.Kill(info.PID, syscall.SIGTERM)
		deadline := time.Now().Add(grace)
		for alive(info) && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
		}
		if alive(info) {
			_ = syscall.Kill(-info.PID, syscall.SIGKILL)
			_ = syscall.Kill(info.PID, syscall.SIGKILL)
			for i := 0; alive(info) && i < 50; i++ {
				time.Sleep(100 * time.Millisecond)
			}
		}
		if alive(info) {
			return fmt.Errorf("stop %s: pid %d survived SIGKILL", name, info.PID)
		}
	}
	// Children that left the group keep the session ID; kill what remains of the session too.
	procfs.KillSession(info.PID)
	return os.Remove(file)
}

// StartedPIDs lists the processes the stack started and that are still alive, by name.
func (s *Stack) StartedPIDs() map[string]int {
	out := map[string]int{}
	entries, _ := os.ReadDir(filepath.Join(s.StateDir, "run"))
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".pid")
		if !ok {
			continue
		}
		if pid, ok := s.Running(name); ok {
			out[name] = pid
		}
	}
	return out
}

func readPID(file string) (pidInfo, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return pidInfo{}, err
	}
	var info pidInfo
	if _, err := fmt.Sscanf(string(b), "%d %d", &info.PID, &info.Start); err != nil {
		return pidInfo{}, fmt.Errorf("pid file %s: %w", file, err)
	}
	return info, nil
}

// alive is true when the process exists, is not a zombie, and is the one the PID file recorded.
func alive(info pidInfo) bool { return procfs.Alive(info.PID, info.Start) }

// WaitFor polls check every interval until it returns nil, the context ends, or the named process dies
// (then the tail of its log is in the error, so a failed start explains itself).
func (s *Stack) WaitFor(ctx context.Context, what, proc string, interval time.Duration, check func(context.Context) error) error {
	var last error
	for {
		if last = check(ctx); last == nil {
			return nil
		}
		if proc != "" {
			if _, ok := s.Running(proc); !ok {
				return fmt.Errorf("%s: process %s exited: %w\n%s", what, proc, last, s.LogTail(proc, 30))
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w (last error: %v)", what, ctx.Err(), last)
		case <-time.After(interval):
		}
	}
}

// LogTail returns the last n lines of a process's log.
func (s *Stack) LogTail(name string, n int) string {
	b, _ := os.ReadFile(s.LogFile(name))
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// mkdirs creates each directory with its parents.
func mkdirs(dirs ...string) error {
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	return nil
}

// symlink points link at target, replacing an older link.
func symlink(target, link string) error {
	if cur, err := os.Readlink(link); err == nil && cur == target {
		return nil
	}
	_ = os.Remove(link)
	if err := os.Symlink(target, link); err != nil {
		return fmt.Errorf("link %s: %w", link, err)
	}
	return nil
}
