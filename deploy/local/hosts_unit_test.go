package local

import (
	"strings"
	"testing"
)

func TestAddHostIndex(t *testing.T) {
	tests := []struct {
		name, prefix string
		want         int // -1: not a host
	}{
		{"sf-edpm-0", hostNetnsPrefix, 0},
		{"sf-edpm-19", hostNetnsPrefix, 19},
		{"sf-edpm-", hostNetnsPrefix, -1},
		{"sf-edpm-01", hostNetnsPrefix, -1}, // not a name this package makes
		{"sf-edpm-x", hostNetnsPrefix, -1},
		{"sf-edpm--1", hostNetnsPrefix, -1},
		{"other-3", hostNetnsPrefix, -1},
		{"sfve7", hostVethPrefix, 7},
		{"sshd-edpm-compute-4", "sshd-" + hostNamePrefix, 4},
	}
	for _, tt := range tests {
		found := map[int]bool{}
		addHostIndex(found, tt.name, tt.prefix)
		switch {
		case tt.want < 0 && len(found) != 0:
			t.Errorf("%s: found %v, want none", tt.name, found)
		case tt.want >= 0 && (len(found) != 1 || !found[tt.want]):
			t.Errorf("%s: found %v, want %d", tt.name, found, tt.want)
		}
	}
}

func TestHostStartScriptMountsBeforeSSHD(t *testing.T) {
	s := &Stack{StateDir: "/state"}
	h := s.hostSpec(3)
	if h.name != "edpm-compute-3" || h.netns != "sf-edpm-3" || h.address != "198.51.100.13" || h.veth != "sfve3" {
		t.Fatalf("host 3 is %+v", h)
	}
	script := hostStartScript(h)
	exec := strings.Index(script, "exec /usr/sbin/sshd")
	if exec < 0 {
		t.Fatalf("script does not become sshd:\n%s", script)
	}
	for _, p := range append(HostPrivatePaths, "/etc/hosts") {
		src := "/state/hosts/edpm-compute-3/root" + p
		if p == "/etc/hosts" {
			src = "/state/hosts/edpm-compute-3/hosts"
		}
		line := "mount --bind " + shellQuote(src) + " "
		i := strings.Index(script, line)
		if i < 0 || i > exec {
			t.Errorf("%s is not mounted from %s before sshd starts:\n%s", p, src, script)
		}
	}
	if !strings.Contains(script, "hostname 'edpm-compute-3'") {
		t.Errorf("script does not name the host:\n%s", script)
	}
}

func TestShellQuote(t *testing.T) {
	tests := map[string]string{
		"/a b":  `'/a b'`,
		"it's":  `'it'\''s'`,
		"plain": `'plain'`,
	}
	for in, want := range tests {
		if got := shellQuote(in); got != want {
			t.Errorf("shellQuote(%q) = %s, want %s", in, got, want)
		}
	}
}

// An Up with KeepHosts never brings up fewer hosts than exist: a package sharing the hosts keeps another's.
func TestHostsKept(t *testing.T) {
	tests := []struct {
		name  string
		found []int
		count int
		want  int
	}{
		{"none found", nil, 2, 2},
		{"fewer found", []int{0}, 2, 2},
		{"as many found", []int{0, 1}, 2, 2},
		{"more found", []int{0, 1, 2, 3}, 2, 4},
		{"a gap keeps those below", []int{0, 5}, 2, 6},
		{"no hosts asked, some found", []int{0, 1}, 0, 2},
		{"capped", []int{maxHosts + 3}, 2, maxHosts},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			found := map[int]bool{}
			for _, i := range tt.found {
				found[i] = true
			}
			if got := hostsKept(found, tt.count); got != tt.want {
				t.Errorf("hostsKept(%v, %d) = %d, want %d", tt.found, tt.count, got, tt.want)
			}
		})
	}
}
