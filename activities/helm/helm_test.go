package helm

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/release"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// What one list of a namespace's releases says of each, in whatever order the list gave its revisions.
func TestInfoOfAReleaseHistory(t *testing.T) {
	rev := func(v int, st release.Status, ready bool) *release.Release {
		r := &release.Release{Name: "nova", Version: v, Info: &release.Info{Status: st, Description: "rev"},
			Chart: &chart.Chart{Metadata: &chart.Metadata{Version: "0.1.0"}}, Labels: map[string]string{ReleaseLabelValuesHash: "h"}}
		if ready {
			r.Labels[ReleaseLabelReady] = "true"
		}
		return r
	}
	tests := []struct {
		name           string
		hist           []*release.Release
		exists         bool
		revision, good int
		status         string
	}{
		{"no history: no release", nil, false, 0, 0, ""},
		{"one ready revision", []*release.Release{rev(1, release.StatusDeployed, true)}, true, 1, 1, "deployed"},
		{"failed upgrade after a ready one, listed out of order",
			[]*release.Release{rev(3, release.StatusFailed, false), rev(1, release.StatusSuperseded, true), rev(2, release.StatusSuperseded, false)}, true, 3, 1, "failed"},
		{"never seen Ready: the newest deployed stands in",
			[]*release.Release{rev(2, release.StatusDeployed, false), rev(1, release.StatusSuperseded, false)}, true, 2, 2, "deployed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			info := infoOf("nova", tt.hist)
			require.Equal(t, "nova", info.Name)
			require.Equal(t, tt.exists, info.Exists)
			require.Equal(t, tt.revision, info.Revision)
			require.Equal(t, tt.good, info.LastGood)
			require.Equal(t, tt.status, info.Status)
			if tt.exists {
				require.Equal(t, "0.1.0", info.ChartVersion)
				require.Equal(t, "h", info.ValuesHash)
			}
		})
	}
}

func TestRedactSecrets(t *testing.T) {
	secret := "---\n# Source: keystone/templates/secret-db.yaml\napiVersion: v1\nkind: Secret\nmetadata:\n  name: keystone-db\ndata:\n  password: c2VjcmV0LXZhbHVl\nstringData:\n  connection: mysql+pymysql://keystone:secret-value@db/keystone\n"
	cm := "---\n# Source: keystone/templates/configmap-etc.yaml\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: keystone-etc\ndata:\n  keystone.conf: |\n    [DEFAULT]\n    debug = true\n"
	tests := []struct {
		name, in      string
		want, wantNot []string
	}{
		{name: "secret values become digests", in: secret,
			want:    []string{"# Source: keystone/templates/secret-db.yaml", "name: keystone-db", "password: (redacted, sha256 ", "connection: (redacted, sha256 "},
			wantNot: []string{"c2VjcmV0LXZhbHVl", "secret-value"}},
		{name: "other kinds unchanged", in: cm, want: []string{"debug = true", "kind: ConfigMap"}},
		{name: "a Secret that does not parse is left out", in: "---\n# Source: x/secret.yaml\nkind: Secret\ndata: [unclosed: c2VjcmV0\n",
			want: []string{"does not parse"}, wantNot: []string{"c2VjcmV0"}},
		{name: "empty manifest", in: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := redactSecrets(tt.in)
			for _, w := range tt.want {
				require.Contains(t, got, w)
			}
			for _, w := range tt.wantNot {
				require.NotContains(t, got, w)
			}
		})
	}
	// The same value gives the same digest, another value another: a diff shows that a secret changed.
	other := strings.Replace(secret, "c2VjcmV0LXZhbHVl", "b3RoZXI=", 1)
	require.Equal(t, redactSecrets(secret), redactSecrets(secret))
	require.NotEqual(t, redactSecrets(secret), redactSecrets(other))
}

// What the readiness deadline's message says of a pod that is not Ready.
func TestPodNotReadySaysWhy(t *testing.T) {
	unready := corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionFalse, Message: "containers with unready status: [api]"}
	pod := func(conds []corev1.PodCondition, init, containers []corev1.ContainerStatus) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "api-1"}, Status: corev1.PodStatus{
			Conditions: conds, InitContainerStatuses: init, ContainerStatuses: containers}}
	}
	waiting := func(name, reason, msg string, last *corev1.ContainerStateTerminated) corev1.ContainerStatus {
		return corev1.ContainerStatus{Name: name, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}},
			LastTerminationState: corev1.ContainerState{Terminated: last}}
	}
	tests := []struct {
		name string
		pod  corev1.Pod
		want string
	}{
		{"ready: nothing to say", pod([]corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}, nil, nil), ""},
		{"unschedulable", pod([]corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Message: "0/3 nodes are available"}}, nil, nil),
			"pod api-1 PodScheduled: 0/3 nodes are available"},
		{"crash loop: the last exit's last lines, not the back-off message", pod([]corev1.PodCondition{unready}, nil, []corev1.ContainerStatus{
			waiting("api", "CrashLoopBackOff", "back-off 40s restarting failed container", &corev1.ContainerStateTerminated{ExitCode: 1, Message: "starting\nunrecognized option '--x'\ngetopt_long() error\n"}),
		}), "pod api-1 Ready: containers with unready status: [api]; container api CrashLoopBackOff, last exited 1: starting | unrecognized option '--x' | getopt_long() error"},
		{"a missing Secret in an init container", pod([]corev1.PodCondition{unready}, []corev1.ContainerStatus{
			waiting("db-wait", "CreateContainerConfigError", `secret "keystone-admin" not found`, nil),
		}, []corev1.ContainerStatus{waiting("api", "PodInitializing", "", nil)}),
			`pod api-1 Ready: containers with unready status: [api]; container db-wait CreateContainerConfigError: secret "keystone-admin" not found`},
		{"still starting: no reason", pod([]corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}, nil, []corev1.ContainerStatus{
			waiting("api", "ContainerCreating", "", nil),
		}), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, podNotReady(tt.pod))
		})
	}
}
