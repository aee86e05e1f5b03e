// Package procfs reads what the local stack needs of /proc to manage the processes it starts: a
// process's start time (which tells a reused PID apart), whether the process recorded by PID and start
// time still lives, and the members of a session (daemons that left their process group stay in it).
package procfs

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// statFields returns the fields of /proc/PID/stat after the command name (which may hold spaces), so
// fields[0] is the state, fields[3] the session and fields[19] the start time.
func statFields(pid int) []string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil
	}
	stat := string(b)
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(stat[i+1:])
}

// Start is the process's start time (field 22 of /proc/PID/stat, in clock ticks since boot).
func Start(pid int) (uint64, error) {
	f := statFields(pid)
	if len(f) < 20 {
		return 0, fmt.Errorf("no or short /proc/%d/stat", pid)
	}
	return strconv.ParseUint(f[19], 10, 64)
}

// Alive reports whether the process exists, is not a zombie, and started at start.
func Alive(pid int, start uint64) bool {
	f := statFields(pid)
	if len(f) < 20 || f[0] == "Z" || f[0] == "X" {
		return false
	}
	s, _ := strconv.ParseUint(f[19], 10, 64)
	return s == start
}

// SessionMembers lists the live processes whose session ID is sid.
func SessionMembers(sid int) []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		f := statFields(pid)
		if len(f) > 4 && f[0] != "Z" && f[4] == strconv.Itoa(sid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// KillSession kills every process of session sid with SIGKILL.
func KillSession(sid int) {
	for _, pid := range SessionMembers(sid) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}
