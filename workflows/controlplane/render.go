package controlplane

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/stackflow/stackflow/activities/helm"
	"github.com/stackflow/stackflow/api/oslo"
	"go.temporal.io/sdk/workflow"
)

// ProfileSpec is the workflows' decoded form of the API's OpenStackCloudConfigurationProfileSpec: the same
// JSON, with Helm values as a map (they merge deeply) and the readiness timeout as text.
// TestProfileSpecCarriesTheAPIsJSON proves that every field of the API type round-trips through it.
type ProfileSpec struct {
	// From names the parent profile this one inherits from; its own settings win.
	From string `json:"from,omitempty"`
	// Components configures each OpenStack component by name.
	Components map[string]ComponentProfile `json:"components,omitempty"`
}

// ComponentProfile is one component's settings in a profile (the decoded form of the API's
// ComponentProfile).
// Every field is optional, so a child profile overrides only what it sets.
type ComponentProfile struct {
	// Enabled deploys the component; a component a profile names is enabled unless set false.
	Enabled *bool `json:"enabled,omitempty"`
	// External: the site provides the component; no release, and its dependents do not wait for it.
	External *bool     `json:"external,omitempty"`
	Chart    *ChartRef `json:"chart,omitempty"`
	// Values are Helm values merged over the generated ones (maps merge deeply, the rest replaces).
	Values map[string]any `json:"values,omitempty"`
	// Config holds oslo.config INI snippets per configuration file (nova.conf → conf.nova). Like
	// customServiceConfig on every service CR, they always win over generated configuration and over
	// Values. A child's snippet for a file is applied after its parent's.
	Config map[string]string `json:"config,omitempty"`
	// Images sets images.tags.<key>.
	Images map[string]string `json:"images,omitempty"`
	// Replicas sets pod.replicas.<key>.
	Replicas map[string]int `json:"replicas,omitempty"`
	// ReadinessTimeout bounds how long the release may take to become Ready (Go duration, default 10m).
	ReadinessTimeout string `json:"readinessTimeout,omitempty"`
}

// ChartRef names a chart in a chart repository: the Helm activities' form of the API's ChartRef (same
// JSON, proven with ProfileSpec).
type ChartRef = helm.ChartRef

// NamedProfile is a profile as read from the API: its name and spec.
type NamedProfile struct {
	Name string      `json:"name"`
	Spec ProfileSpec `json:"spec"`
}

// Reasons a profile or configuration is refused.
const (
	ReasonProfileCycle     = "ProfileCycle"
	ReasonProfileMissing   = "ProfileMissing"
	ReasonUnknownComponent = "UnknownComponent"
	ReasonMissingChart     = "MissingChart"
	ReasonInvalidConfig    = "InvalidServiceConfig"
	ReasonDependency       = "DependencyDisabled"
)

// ProfileError is a refused profile: Reason is a condition reason, the message names the component and
// the cause.
type ProfileError struct {
	Reason string
	Msg    string
}

func (e *ProfileError) Error() string { return e.Msg }

// ProfileChain returns the names to read, from the profile itself up through its parents, given the
// profiles read so far. It stops when the next parent is not yet read (more is true) or the chain ends,
// and fails on a cycle.
func ProfileChain(name string, read map[string]ProfileSpec) (chain []string, next string, err error) {
	seen := map[string]bool{}
	for n := name; n != ""; {
		if seen[n] {
			return nil, "", &ProfileError{ReasonProfileCycle, fmt.Sprintf("profile inheritance cycle: %s → %s", strings.Join(chain, " → "), n)}
		}
		seen[n] = true
		spec, ok := read[n]
		if !ok {
			return chain, n, nil
		}
		chain = append(chain, n)
		n = spec.From
	}
	return chain, "", nil
}

// MergeProfiles merges a chain of profiles, child first (as ProfileChain returns it): a child's settings
// win over its parent's, Values merge deeply, config snippets apply parent first.
func MergeProfiles(chain []ProfileSpec) map[string]ComponentProfile {
	out := map[string]ComponentProfile{}
	for i := len(chain) - 1; i >= 0; i-- {
		//workflowcheck:ignore -- reviewed: the result does not depend on the map's order
		for name, c := range chain[i].Components {
			out[name] = mergeComponent(out[name], c)
		}
	}
	return out
}

func mergeComponent(parent, child ComponentProfile) ComponentProfile {
	m := parent
	if child.Enabled != nil {
		m.Enabled = child.Enabled
	}
	if child.External != nil {
		m.External = child.External
	}
	if child.Chart != nil {
		ch := ChartRef{}
		if parent.Chart != nil {
			ch = *parent.Chart
		}
		if child.Chart.Repository != "" {
			ch.Repository = child.Chart.Repository
		}
		if child.Chart.Name != "" {
			ch.Name = child.Chart.Name
		}
		if child.Chart.Version != "" {
			ch.Version = child.Chart.Version
		}
		m.Chart = &ch
	}
	m.Values = mergeValues(parent.Values, child.Values)
	if len(child.Config) > 0 {
		m.Config = maps.Clone(parent.Config)
		if m.Config == nil {
			m.Config = map[string]string{}
		}
		//workflowcheck:ignore -- reviewed: the result does not depend on the map's order
		for file, snippet := range child.Config {
			if prev := m.Config[file]; prev != "" {
				snippet = prev + "\n" + snippet
			}
			m.Config[file] = snippet
		}
	}
	m.Images = mergeStrings(parent.Images, child.Images)
	if len(parent.Replicas)+len(child.Replicas) > 0 {
		m.Replicas = maps.Clone(parent.Replicas)
		if m.Replicas == nil {
			m.Replicas = map[string]int{}
		}
		maps.Copy(m.Replicas, child.Replicas)
	}
	if child.ReadinessTimeout != "" {
		m.ReadinessTimeout = child.ReadinessTimeout
	}
	return m
}

func mergeStrings(a, b map[string]string) map[string]string {
	if len(a)+len(b) == 0 {
		return nil
	}
	out := maps.Clone(a)
	if out == nil {
		out = map[string]string{}
	}
	maps.Copy(out, b)
	return out
}

// mergeValues merges over into base deeply (maps merge, everything else is replaced) without changing
// either.
func mergeValues(base, over map[string]any) map[string]any {
	if len(base)+len(over) == 0 {
		return nil
	}
	out := make(map[string]any, len(base)+len(over))
	//workflowcheck:ignore -- reviewed: the result does not depend on the map's order
	for k, v := range base {
		out[k] = v
	}
	//workflowcheck:ignore -- reviewed: the result does not depend on the map's order
	for k, v := range over {
		bm, bok := out[k].(map[string]any)
		om, ook := v.(map[string]any)
		if bok && ook {
			out[k] = mergeValues(bm, om)
		} else {
			out[k] = v
		}
	}
	return out
}

// ConfService is the key under conf that a configuration file's options go to, by OpenStack-Helm's
// convention: nova.conf → nova, api-paste.ini → api-paste.
func ConfService(file string) string {
	if i := strings.LastIndex(file, "."); i > 0 {
		return file[:i]
	}
	return file
}

// RenderedComponent is one component ready to roll out: its chart, its Helm values in OpenStack-Helm's
// conventions, and the hash that identifies both.
type RenderedComponent struct {
	Name    string `json:"name"`
	Enabled bool   `json:"enabled"`
	// External is a component the site provides: not Enabled (no release), yet a dependency satisfied.
	External   bool           `json:"external,omitempty"`
	Chart      ChartRef       `json:"chart"`
	Values     map[string]any `json:"values,omitempty"`
	ValuesHash string         `json:"valuesHash,omitempty"`
	// Conf is the parsed config snippets (service → section → option → value), as they land in conf.
	Conf map[string]map[string]map[string]string `json:"conf,omitempty"`
	// ReadinessTimeout is how long the release may take to become Ready.
	ReadinessTimeout time.Duration `json:"readinessTimeout"`
}

// DefaultReadinessTimeout bounds a release's readiness when its profile says nothing.
const DefaultReadinessTimeout = 10 * time.Minute

// RestartTokenKey is the values key under which a component's RestartWith dependencies' hashes are
// rendered; charts put it on their pod templates, so a change restarts the pods.
const RestartTokenKey = "stackflowRestartToken"

// RenderComponents renders every component of the graph from the merged profile. Components the
// profile does not mention are disabled; external ones are rendered without a release. A profile naming
// a component outside the graph, an enabled component without a chart or with an unparsable config
// snippet, or one depending on a component neither enabled nor external is refused with a ProfileError
// naming it.
func RenderComponents(g Graph, merged map[string]ComponentProfile) (map[string]RenderedComponent, error) {
	for _, name := range workflow.DeterministicKeys(merged) {
		if _, ok := g.Get(name); !ok {
			return nil, &ProfileError{ReasonUnknownComponent, fmt.Sprintf("component %s: unknown component (known: %s)", name, strings.Join(g.Names(), ", "))}
		}
	}
	waves, err := g.Waves(nil)
	if err != nil {
		return nil, &ProfileError{ReasonUnknownComponent, err.Error()}
	}
	out := map[string]RenderedComponent{}
	// Graph order, so a component's restart dependencies are rendered (and hashed) before it.
	for _, wave := range waves {
		for _, name := range wave {
			c, _ := g.Get(name)
			p, ok := merged[name]
			if !ok || p.Enabled != nil && !*p.Enabled {
				out[name] = RenderedComponent{Name: name}
				continue
			}
			if p.External != nil && *p.External {
				out[name] = RenderedComponent{Name: name, External: true}
				continue
			}
			r, err := renderComponent(c, p, out)
			if err != nil {
				return nil, err
			}
			out[name] = r
		}
	}
	for _, name := range g.Names() {
		if !out[name].Enabled {
			continue
		}
		c, _ := g.Get(name)
		for _, d := range c.DependsOn {
			if !out[d].Enabled && !out[d].External {
				return nil, &ProfileError{ReasonDependency, fmt.Sprintf("component %s: depends on %s, which is disabled (enable it, or mark it external when the site provides it)", name, d)}
			}
		}
	}
	return out, nil
}

func renderComponent(c Component, p ComponentProfile, done map[string]RenderedComponent) (RenderedComponent, error) {
	if p.Chart == nil || p.Chart.Repository == "" || p.Chart.Name == "" || p.Chart.Version == "" {
		return RenderedComponent{}, &ProfileError{ReasonMissingChart, fmt.Sprintf("component %s: chart repository, name and version are required", c.Name)}
	}
	r := RenderedComponent{Name: c.Name, Enabled: true, Chart: *p.Chart, ReadinessTimeout: DefaultReadinessTimeout}
	if p.ReadinessTimeout != "" {
		d, err := time.ParseDuration(p.ReadinessTimeout)
		if err != nil || d <= 0 {
			return RenderedComponent{}, &ProfileError{ReasonInvalidConfig, fmt.Sprintf("component %s: readinessTimeout %q is not a positive duration", c.Name, p.ReadinessTimeout)}
		}
		r.ReadinessTimeout = d
	}
	conf := map[string]map[string]map[string]string{}
	for _, file := range workflow.DeterministicKeys(p.Config) {
		parsed, err := oslo.ParseServiceConfig(p.Config[file])
		if err != nil {
			return RenderedComponent{}, &ProfileError{ReasonInvalidConfig, fmt.Sprintf("component %s: config %s: %v", c.Name, file, err)}
		}
		if len(parsed) > 0 {
			conf[ConfService(file)] = parsed
		}
	}
	if len(conf) > 0 {
		r.Conf = conf
	}

	// Generated values first, then the profile's values over them, then the config snippet over all.
	gen := map[string]any{}
	labels := map[string]any{}
	for _, group := range workflow.DeterministicKeys(c.Schedule) {
		labels[group] = map[string]any{"node_selector_key": RoleLabels[c.Schedule[group]], "node_selector_value": LabelEnabled}
	}
	if len(labels) > 0 {
		gen["labels"] = labels
	}
	if len(p.Images) > 0 {
		tags := map[string]any{}
		//workflowcheck:ignore -- reviewed: the result does not depend on the map's order
		for k, v := range p.Images {
			tags[k] = v
		}
		gen["images"] = map[string]any{"tags": tags}
	}
	if len(p.Replicas) > 0 {
		reps := map[string]any{}
		//workflowcheck:ignore -- reviewed: the result does not depend on the map's order
		for k, v := range p.Replicas {
			reps[k] = v
		}
		gen["pod"] = map[string]any{"replicas": reps}
	}
	if len(c.RestartWith) > 0 {
		var token []string
		for _, d := range c.RestartWith {
			token = append(token, d+"="+done[d].ValuesHash)
		}
		gen[RestartTokenKey] = strings.Join(token, ",")
	}
	values := mergeValues(gen, p.Values)
	if len(conf) > 0 {
		services := map[string]any{}
		//workflowcheck:ignore -- reviewed: the result does not depend on the map's order
		for svc, sections := range conf {
			service := map[string]any{}
			for sec, opts := range sections {
				options := map[string]any{}
				for k, v := range opts {
					options[k] = v
				}
				service[sec] = options
			}
			services[svc] = service
		}
		values = mergeValues(values, map[string]any{"conf": services})
	}
	// A JSON round trip gives the values the exact shape they have after crossing an activity boundary,
	// so the hash computed here is the hash of what Helm receives.
	b, err := json.Marshal(values)
	if err != nil {
		return RenderedComponent{}, &ProfileError{ReasonInvalidConfig, fmt.Sprintf("component %s: values do not render: %v", c.Name, err)}
	}
	r.Values = map[string]any{}
	if err := json.Unmarshal(b, &r.Values); err != nil {
		return RenderedComponent{}, &ProfileError{ReasonInvalidConfig, fmt.Sprintf("component %s: values do not render: %v", c.Name, err)}
	}
	r.ValuesHash = ValuesHash(r.Chart, r.Values)
	return r, nil
}

// ValuesHash identifies a chart and its values: equal hashes mean an upgrade would change nothing.
// encoding/json sorts map keys, so the encoding is canonical.
func ValuesHash(chart ChartRef, values map[string]any) string {
	b, _ := json.Marshal(struct {
		Chart  ChartRef       `json:"chart"`
		Values map[string]any `json:"values"`
	}{chart, values})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])[:16]
}

// NodeConfiguration is an OpenstackNode's status.desiredNodeConfiguration: what its profile wants on
// this node, per component scheduled on one of its roles.
type NodeConfiguration struct {
	Profile    string                         `json:"profile"`
	Roles      []string                       `json:"roles"`
	Labels     map[string]string              `json:"labels,omitempty"`
	Components map[string]NodeComponentConfig `json:"components,omitempty"`
}

// NodeComponentConfig is one component's desired configuration on a node.
type NodeComponentConfig struct {
	Chart      string                                  `json:"chart"`
	ValuesHash string                                  `json:"valuesHash"`
	Groups     []string                                `json:"groups"`
	Conf       map[string]map[string]map[string]string `json:"conf,omitempty"`
}

// DesiredNodeConfiguration derives a node's desired configuration from the rendered components: the
// OpenStack-Helm labels its roles need and every enabled component that schedules a group on them. A
// disabled node wants nothing.
func DesiredNodeConfiguration(g Graph, profile string, roles []string, disabled bool, rendered map[string]RenderedComponent) NodeConfiguration {
	nc := NodeConfiguration{Profile: profile, Roles: slices.Sorted(slices.Values(roles))}
	if nc.Roles == nil {
		nc.Roles = []string{}
	}
	if disabled {
		return nc
	}
	nc.Labels = NodeLabels(roles)
	for _, c := range g {
		r := rendered[c.Name]
		if !r.Enabled {
			continue
		}
		var groups []string
		//workflowcheck:ignore -- reviewed: the result does not depend on the map's order
		for group, role := range c.Schedule {
			if slices.Contains(roles, role) {
				groups = append(groups, group)
			}
		}
		if len(groups) == 0 {
			continue
		}
		slices.Sort(groups)
		if nc.Components == nil {
			nc.Components = map[string]NodeComponentConfig{}
		}
		nc.Components[c.Name] = NodeComponentConfig{Chart: r.Chart.Name + "-" + r.Chart.Version, ValuesHash: r.ValuesHash, Groups: groups, Conf: r.Conf}
	}
	return nc
}

// NodeLabels are the OpenStack-Helm scheduling labels for a node's roles.
func NodeLabels(roles []string) map[string]string {
	out := map[string]string{}
	for _, r := range roles {
		if l, ok := RoleLabels[r]; ok {
			out[l] = LabelEnabled
		}
	}
	return out
}

// ManagedNodeLabels are every label NodeLabels may set; labels of roles a node no longer has are removed.
func ManagedNodeLabels() []string {
	//workflowcheck:ignore -- sorted: the result does not depend on the map's order
	return slices.Sorted(maps.Values(RoleLabels))
}
