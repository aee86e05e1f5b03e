package local

import (
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// A descriptor this process inherited without close-on-exec (as from `flock LOCK stackflow-local up`)
// does not reach the processes the stack starts.
func TestInheritedFilesDoNotReachChildren(t *testing.T) {
	fd, err := syscall.Open(filepath.Join(t.TempDir(), "lock"), syscall.O_CREAT|syscall.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	listFDs := func() []string {
		out, err := exec.Command("/bin/ls", "/proc/self/fd").Output()
		if err != nil {
			t.Fatal(err)
		}
		return strings.Fields(string(out))
	}
	if !contains(listFDs(), strconv.Itoa(fd)) {
		t.Skip("this Go runtime already closes inherited descriptors")
	}
	closeInheritedFiles()
	if contains(listFDs(), strconv.Itoa(fd)) {
		t.Fatalf("descriptor %d reached the child", fd)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
