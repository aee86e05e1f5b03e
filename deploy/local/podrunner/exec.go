package podrunner

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
)

// ExecSubcommand is the argument with which the runner's binary re-executes itself as a container's
// first process: in a new mount namespace, it makes the container's mounts and then executes the
// container's command in place (so the PID the runner records is the command's own).
const ExecSubcommand = "exec-container"

// Mount is one bind mount of a container: a materialised volume (or a file of it) at its mount path.
type Mount struct {
	Source   string `json:"source"`
	Target   string `json:"target"`
	ReadOnly bool   `json:"readOnly,omitempty"`
}

// ProcessSpec is what a container's first process is made of.
type ProcessSpec struct {
	Argv   []string `json:"argv"`
	Env    []string `json:"env"`
	Dir    string   `json:"dir,omitempty"`
	Mounts []Mount  `json:"mounts,omitempty"`
}

// ExecContainer is the body of ExecSubcommand: it runs in a fresh mount namespace (the runner starts it
// with CLONE_NEWNS), detaches that namespace from the machine's (so nothing mounted here is seen outside),
// bind-mounts the container's volumes at their paths and replaces itself with the container's command.
// It returns only on failure.
func ExecContainer(specFile string) error {
	b, err := os.ReadFile(specFile)
	if err != nil {
		return err
	}
	var spec ProcessSpec
	if err := json.Unmarshal(b, &spec); err != nil {
		return fmt.Errorf("process spec %s: %w", specFile, err)
	}
	if len(spec.Argv) == 0 {
		return errors.New("container has no command (the pod runner has no image entrypoint to fall back on)")
	}
	if err := syscall.Mount("", "/", "", syscall.MS_REC|syscall.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make mounts private: %w", err)
	}
	for _, m := range spec.Mounts {
		if err := bindMount(m); err != nil {
			return err
		}
	}
	dir := spec.Dir
	if dir == "" {
		dir = "/"
	}
	if err := os.Chdir(dir); err != nil {
		return fmt.Errorf("working directory %s: %w", dir, err)
	}
	path, err := lookPath(spec.Argv[0], envValue(spec.Env, "PATH"))
	if err != nil {
		return err
	}
	return syscall.Exec(path, spec.Argv, spec.Env)
}

// bindMount mounts m.Source over m.Target, creating the mount point (a directory, or an empty file for a
// file) on the machine when it is missing, as a container runtime creates it in the image.
func bindMount(m Mount) error {
	fi, err := os.Stat(m.Source)
	if err != nil {
		return fmt.Errorf("mount source %s: %w", m.Source, err)
	}
	if fi.IsDir() {
		if err := os.MkdirAll(m.Target, 0o755); err != nil {
			return fmt.Errorf("mount point %s: %w", m.Target, err)
		}
	} else if _, err := os.Stat(m.Target); errors.Is(err, os.ErrNotExist) {
		if err := os.MkdirAll(filepath.Dir(m.Target), 0o755); err != nil {
			return fmt.Errorf("mount point %s: %w", m.Target, err)
		}
		f, err := os.OpenFile(m.Target, os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			return fmt.Errorf("mount point %s: %w", m.Target, err)
		}
		f.Close()
	}
	if err := syscall.Mount(m.Source, m.Target, "", syscall.MS_BIND|syscall.MS_REC, ""); err != nil {
		return fmt.Errorf("mount %s at %s: %w", m.Source, m.Target, err)
	}
	if m.ReadOnly {
		if err := syscall.Mount("", m.Target, "", syscall.MS_BIND|syscall.MS_REMOUNT|syscall.MS_RDONLY, ""); err != nil {
			return fmt.Errorf("remount %s read-only: %w", m.Target, err)
		}
	}
	return nil
}

// lookPath resolves a command as the container's shell would, against the container's own PATH.
func lookPath(name, path string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	for _, dir := range filepath.SplitList(path) {
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s: not found on the container's PATH %s (the pod runner replaces the image by this machine's packages)", name, path)
}

func envValue(env []string, key string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(env[i], "="); ok && k == key {
			return v
		}
	}
	return ""
}

// startProcess starts the container's first process through the runner's own binary in a new mount
// namespace and session, with output appended to logFile. The spec (which may hold Secret values in its
// environment) is written to specFile, readable by root only.
func startProcess(self, specFile, logFile string, spec ProcessSpec) (*exec.Cmd, error) {
	b, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(specFile, b, 0o600); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(logFile), 0o755); err != nil {
		return nil, err
	}
	logf, err := os.OpenFile(logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := exec.Command(self, ExecSubcommand, specFile)
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNS, Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", spec.Argv[0], err)
	}
	return cmd, nil
}
