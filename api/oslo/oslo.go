// Package oslo is oslo.config's INI format as pure code, without I/O: parsing a customServiceConfig
// snippet, merging, and rendering options deterministically (the same options always give the same bytes
// and hash). Workflows call it to render and check configuration; activities to write the files.
package oslo

import (
	"bufio"
	"fmt"
	"slices"
	"strings"
)

// INI is oslo.config options by section: section → option → value. It is the parsed form of a
// configuration file or a customServiceConfig snippet (ParseServiceConfig produces it).
type INI map[string]map[string]string

// SecretOption is an option whose value is a Secret's key. The workflow names it; the activity reads the
// Secret when it runs, so the value never enters workflow history.
type SecretOption struct {
	Section string `json:"section"`
	Option  string `json:"option"`
	// Secret is the Secret's name, in the namespace of the object being deployed.
	Secret string `json:"secret"`
	Key    string `json:"key"`
}

// ConfigFile is one oslo.config file an activity installs on a host: either generated options (with
// options from Secrets), or a verbatim snippet (a customServiceConfig, installed as written).
type ConfigFile struct {
	// Dest is the file's path on the host.
	Dest string `json:"dest"`
	// Header is a comment put on top of a generated file.
	Header string `json:"header,omitempty"`
	// Options are the generated options.
	Options INI `json:"options,omitempty"`
	// SecretOptions are filled in from Secrets when the activity runs.
	SecretOptions []SecretOption `json:"secretOptions,omitempty"`
	// Raw, when set, is the file's whole content, installed verbatim.
	Raw string `json:"raw,omitempty"`
}

// DefaultSection is oslo.config's unnamed section; it always comes first in rendered files.
const DefaultSection = "DEFAULT"

// RenderINI renders options as an oslo.config file: [DEFAULT] first, then the other sections and
// every section's options in lexical order, so the same options always give the same bytes (and the
// same hash). A value spanning lines is written with indented continuation lines, as oslo.config
// reads them back.
func RenderINI(header string, ini INI) string {
	var b strings.Builder
	for _, line := range strings.Split(strings.TrimRight(header, "\n"), "\n") {
		if line != "" {
			b.WriteString("# " + line + "\n")
		}
	}
	for i, section := range SectionOrder(ini) {
		if i > 0 || header != "" {
			b.WriteString("\n")
		}
		b.WriteString("[" + section + "]\n")
		opts := ini[section]
		keys := make([]string, 0, len(opts))
		//workflowcheck:ignore -- reviewed: the result does not depend on the map's order
		for k := range opts {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			v := strings.ReplaceAll(opts[k], "\n", "\n    ")
			if v == "" {
				b.WriteString(k + " =\n")
				continue
			}
			b.WriteString(k + " = " + v + "\n")
		}
	}
	return b.String()
}

// SectionOrder lists ini's sections as RenderINI writes them: DEFAULT first, then lexical order.
func SectionOrder(ini INI) []string {
	out := make([]string, 0, len(ini))
	//workflowcheck:ignore -- reviewed: the result does not depend on the map's order
	for s := range ini {
		if s != DefaultSection {
			out = append(out, s)
		}
	}
	slices.Sort(out)
	if _, ok := ini[DefaultSection]; ok {
		out = append([]string{DefaultSection}, out...)
	}
	return out
}

// MergeINI is the configuration oslo.config ends up with when it reads the layers in order (several
// --config-file arguments, or the sorted files of a --config-dir): an option set in a later layer wins,
// every other option keeps its earlier value. Option names are compared as written, like oslo.config
// does for files. The layers are not modified.
func MergeINI(layers ...INI) INI {
	out := INI{}
	for _, l := range layers {
		for section, opts := range l {
			if out[section] == nil {
				out[section] = map[string]string{}
			}
			for k, v := range opts {
				out[section][k] = v
			}
		}
	}
	return out
}

// Set sets one option, creating its section.
func (ini INI) Set(section, option, value string) {
	if ini[section] == nil {
		ini[section] = map[string]string{}
	}
	ini[section][option] = value
}

// Get returns one option and whether it is set.
func (ini INI) Get(section, option string) (string, bool) {
	v, ok := ini[section][option]
	return v, ok
}

// RenderConfigFile renders f with the Secret values in secrets ("name/key" → value). A missing value is
// an error naming the Secret and key, never a silently empty option.
func RenderConfigFile(f ConfigFile, secrets map[string]string) (string, error) {
	if f.Raw != "" {
		if !strings.HasSuffix(f.Raw, "\n") {
			return f.Raw + "\n", nil
		}
		return f.Raw, nil
	}
	ini := MergeINI(f.Options)
	for _, so := range f.SecretOptions {
		v, ok := secrets[so.Secret+"/"+so.Key]
		if !ok {
			return "", fmt.Errorf("%s: option [%s] %s: Secret %s has no key %s", f.Dest, so.Section, so.Option, so.Secret, so.Key)
		}
		ini.Set(so.Section, so.Option, v)
	}
	return RenderINI(f.Header, ini), nil
}

// ParseServiceConfig parses an oslo.config INI snippet into sections of options. Lines starting with #
// or ; are comments; an indented line continues the previous value; a repeated option keeps its last
// value. Options before any section header are an error, as oslo.config refuses them.
func ParseServiceConfig(snippet string) (INI, error) {
	out := INI{}
	var section, lastKey string
	sc := bufio.NewScanner(strings.NewReader(snippet))
	for n := 1; sc.Scan(); n++ {
		raw := sc.Text()
		line := strings.TrimSpace(raw)
		switch {
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";"):
			continue
		case raw[0] == ' ' || raw[0] == '\t':
			if lastKey == "" {
				return nil, fmt.Errorf("line %d: continuation without an option", n)
			}
			out[section][lastKey] += "\n" + line
			continue
		case strings.HasPrefix(line, "["):
			if !strings.HasSuffix(line, "]") || len(line) < 3 {
				return nil, fmt.Errorf("line %d: malformed section header %q", n, line)
			}
			section, lastKey = strings.TrimSpace(line[1:len(line)-1]), ""
			if out[section] == nil {
				out[section] = map[string]string{}
			}
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			k, v, ok = strings.Cut(line, ":")
		}
		if !ok {
			return nil, fmt.Errorf("line %d: expected option = value, got %q", n, line)
		}
		if section == "" {
			return nil, fmt.Errorf("line %d: option %q before any [section]", n, strings.TrimSpace(k))
		}
		lastKey = strings.TrimSpace(k)
		out[section][lastKey] = strings.TrimSpace(v)
	}
	return out, sc.Err()
}
