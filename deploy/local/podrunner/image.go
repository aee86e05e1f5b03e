package podrunner

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// The runner has no container images: a pod's image is replaced by the machine's Debian packages. Those
// are the OpenStack *libraries* (python3-nova, …); the console scripts an image has on its PATH
// (nova-manage, nova-conductor, …) come with Debian's service packages, which the stack does not install.
// BuildHostImage writes them the way pip or Debian would, from the entry points the installed
// distributions declare, so a pod's own command line runs unchanged.

// ConsoleScript is one console_scripts entry point: Name runs Module's Func (an attribute path).
type ConsoleScript struct {
	Name   string
	Module string
	Func   string
}

var entryPointLine = regexp.MustCompile(`^\s*([A-Za-z0-9_.+-]+)\s*=\s*([A-Za-z0-9_.]+)\s*:\s*([A-Za-z0-9_.]+)\s*(\[.*\])?\s*$`)

// ParseConsoleScripts reads the [console_scripts] section of an entry_points.txt.
func ParseConsoleScripts(text string) []ConsoleScript {
	var out []ConsoleScript
	in := false
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]") {
			in = line == "[console_scripts]"
			continue
		}
		if !in || line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if m := entryPointLine.FindStringSubmatch(line); m != nil {
			out = append(out, ConsoleScript{Name: m[1], Module: m[2], Func: m[3]})
		}
	}
	return out
}

// Script is the file pip writes for a console script, bound to python.
func (c ConsoleScript) Script(python string) string {
	head, _, _ := strings.Cut(c.Func, ".")
	return fmt.Sprintf(`#!%s
# Console script %s, written by stackflow's pod runner from the entry points of the installed package.
import re
import sys
from %s import %s
if __name__ == "__main__":
    sys.argv[0] = re.sub(r"(-script\.pyw|\.exe)?$", "", sys.argv[0])
    sys.exit(%s())
`, python, c.Name, c.Module, head, c.Func)
}

// BuildHostImage writes a console script into binDir for every entry point of the distributions under
// sitePackages (*.egg-info and *.dist-info), run by python. Names that already exist as executables in
// skipDirs (the machine's own /usr/bin) are left out: the packaged program wins. It returns how many
// scripts it wrote.
func BuildHostImage(sitePackages, python, binDir string, skipDirs ...string) (int, error) {
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		return 0, err
	}
	var files []string
	for _, pattern := range []string{"*.egg-info/entry_points.txt", "*.dist-info/entry_points.txt"} {
		m, _ := filepath.Glob(filepath.Join(sitePackages, pattern))
		files = append(files, m...)
	}
	sort.Strings(files)
	written := 0
	seen := map[string]bool{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return written, err
		}
		for _, cs := range ParseConsoleScripts(string(b)) {
			if seen[cs.Name] || existsIn(cs.Name, skipDirs) {
				continue
			}
			seen[cs.Name] = true
			path := filepath.Join(binDir, cs.Name)
			content := cs.Script(python)
			if old, err := os.ReadFile(path); err == nil && string(old) == content {
				written++
				continue
			}
			if err := os.WriteFile(path, []byte(content), 0o755); err != nil {
				return written, err
			}
			written++
		}
	}
	return written, nil
}

func existsIn(name string, dirs []string) bool {
	for _, d := range dirs {
		if fi, err := os.Stat(filepath.Join(d, name)); err == nil && !fi.IsDir() {
			return true
		}
	}
	return false
}
