package ansible

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/stackflow/stackflow/api/oslo"
)

// fakePlaybook stands in for ansible-playbook behind Ansible.Binary: it keeps what it was handed (the
// inventory, the variables, the key and the rendered files) beside itself and prints the results the test
// put there, exiting with the code put there. What ansible-playbook does with them is the end-to-end
// suite's; what RunPlaybook hands it and makes of its answer is this test's.
const fakePlaybook = `#!/bin/sh
here=$(dirname "$0")
printf '%s\n' "$@" > "$here/args"
for arg in "$@"; do
  case "$arg" in
    --inventory=*) cp "${arg#--inventory=}" "$here/inventory.json" ;;
    --extra-vars=@*) cp "${arg#--extra-vars=@}" "$here/vars.json" ;;
    --private-key=*) cp "${arg#--private-key=}" "$here/key" ;;
    --limit=*) echo "${arg#--limit=}" > "$here/limit" ;;
  esac
done
for f in file-*; do [ -e "$f" ] && cp "$f" "$here/$f"; done
[ -e "$here/hold" ] && { echo $$ > "$here/pid"; sleep 60 & echo $! > "$here/child"; wait; }
[ -e "$here/slow" ] && sleep 0.3
cat "$here/results.json"
exit $(cat "$here/rc")
`

// playbookRun is a RunPlaybook against the fake, answering results with exit code rc.
func playbookRun(t *testing.T, results string, rc int) (*Ansible, string) {
	bin := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(bin, "ansible-playbook"), []byte(fakePlaybook), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(bin, "results.json"), []byte(results), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(bin, "rc"), []byte{byte('0' + rc)}, 0o644))
	books := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(books, "nova-compute.yml"), []byte("- hosts: all\n"), 0o644))
	core := fake.NewClientset(
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "openstack", Name: "edpm-ssh"}, Data: map[string][]byte{SSHKeySecretKey: []byte("-----BEGIN KEY-----")}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "openstack", Name: "nova-cell1-mq"}, Data: map[string][]byte{"transport_url": []byte("rabbit://u:s3cret@h:5672/v")}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "openstack", Name: "edpm-compute-0-inventory"}, Data: map[string]string{InventoryConfigMapKey: `
all:
  vars: {ansible_user: cloud-admin, edpm_role: compute}
  hosts:
    edpm-compute-0: {ansible_host: 192.0.2.10, edpm_role: compute-hci}
    edpm-compute-1: {ansible_host: 192.0.2.11}
`}})
	return &Ansible{Core: core, PlaybookDir: books, Binary: filepath.Join(bin, "ansible-playbook"), Version: "v1", KnownHostsFile: filepath.Join(bin, "known_hosts")}, bin
}

func runInput() PlaybookInput {
	port, _ := json.Marshal(2222)
	return PlaybookInput{Namespace: "openstack", Host: "edpm-compute-0", Step: "nova-compute", Playbook: "nova-compute.yml", SSHKeySecret: "edpm-ssh",
		InventoryConfigMap: "edpm-compute-0-inventory", HostVars: map[string]json.RawMessage{"ansible_port": port},
		Files: []oslo.ConfigFile{{Dest: "/etc/nova/nova.conf.d/01-cell.conf", Options: oslo.INI{"DEFAULT": {"debug": "true"}},
			SecretOptions: []oslo.SecretOption{{Section: "DEFAULT", Option: "transport_url", Secret: "nova-cell1-mq", Key: "transport_url"}}}}}
}

func TestRunPlaybook(t *testing.T) {
	a, bin := playbookRun(t, `{"plays":[{"play":{"name":"p"},"tasks":[
		{"task":{"name":"report"},"hosts":{"edpm-compute-0":{"changed":false,"ansible_facts":{"stackflow_out_nova_version":"31.0.0"}}}}]}],
		"stats":{"edpm-compute-0":{"ok":3,"changed":1,"skipped":2}}}`, 0)
	res, err := a.RunPlaybook(context.Background(), runInput())
	require.NoError(t, err)
	require.Equal(t, []int{3, 1, 2}, []int{res.Ok, res.Changed, res.Skipped})
	require.Equal(t, map[string]string{"nova_version": "31.0.0"}, res.Outputs)
	require.Equal(t, "v1", res.PlaybooksVersion)

	// What ansible-playbook was handed: the host alone, its inventory variables with the node's on top,
	// the key with its final newline, the step's variables and the file rendered with the Secret's value.
	limit, _ := os.ReadFile(filepath.Join(bin, "limit"))
	require.Equal(t, "edpm-compute-0\n", string(limit))
	var inv struct {
		All struct {
			Hosts map[string]map[string]any `json:"hosts"`
		} `json:"all"`
	}
	raw, err := os.ReadFile(filepath.Join(bin, "inventory.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(raw, &inv))
	require.Equal(t, map[string]any{"ansible_host": "192.0.2.10", "ansible_user": "cloud-admin", "edpm_role": "compute-hci", "ansible_port": 2222.0,
		"ansible_python_interpreter": "/usr/bin/python3"}, inv.All.Hosts["edpm-compute-0"])
	key, _ := os.ReadFile(filepath.Join(bin, "key"))
	require.Equal(t, "-----BEGIN KEY-----\n", string(key))
	var vars map[string]any
	raw, err = os.ReadFile(filepath.Join(bin, "vars.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(raw, &vars))
	require.Equal(t, "nova-compute", vars["stackflow_step"])
	files := vars["stackflow_files"].([]any)
	require.Len(t, files, 1)
	require.Equal(t, "/etc/nova/nova.conf.d/01-cell.conf", files[0].(map[string]any)["dest"])
	conf, err := os.ReadFile(filepath.Join(bin, "file-0"))
	require.NoError(t, err)
	require.Contains(t, string(conf), "transport_url = rabbit://u:s3cret@h:5672/v")
	require.NotContains(t, string(raw), "s3cret", "the Secret's value is in the file, not in the variables")
}

func TestRunPlaybookOutcomes(t *testing.T) {
	for _, tc := range []struct {
		name      string
		results   string
		rc        int
		in        func(*PlaybookInput)
		errType   string
		retryable bool
	}{
		{"host unreachable: retried", `{"plays":[{"play":{"name":"p"},"tasks":[{"task":{"name":"Gathering Facts"},"hosts":{"edpm-compute-0":{"unreachable":true,
			"msg":"Failed to connect to the host via ssh: Connection timed out"}}}]}],"stats":{"edpm-compute-0":{"unreachable":1}}}`, 4, nil, ErrHostUnreachable, true},
		{"a task failed: permanent", `{"plays":[{"play":{"name":"p"},"tasks":[{"task":{"name":"Start nova-compute"},"hosts":{"edpm-compute-0":{"failed":true,
			"msg":"Unable to start service nova-compute"}}}]}],"stats":{"edpm-compute-0":{"failures":1}}}`, 2, nil, ErrPlaybookFailed, false},
		{"ansible-playbook did not run: permanent", `ERROR! the playbook could not be found`, 1, nil, ErrAnsible, false},
		{"no SSH key Secret: permanent", "", 0, func(in *PlaybookInput) { in.SSHKeySecret = "gone" }, ErrSecretMissing, false},
		{"a file's Secret missing: permanent", "", 0, func(in *PlaybookInput) { in.Files[0].SecretOptions[0].Key = "nope" }, ErrSecretMissing, false},
		{"another version of the playbooks: refused", "", 0, func(in *PlaybookInput) { in.PlaybooksVersion = "v0" }, ErrPlaybooksVersion, false},
		{"no such playbook: permanent", "", 0, func(in *PlaybookInput) { in.Playbook = "nope.yml" }, ErrAnsible, false},
		{"no host: permanent", "", 0, func(in *PlaybookInput) { in.Host = "" }, ErrAnsible, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, _ := playbookRun(t, tc.results, tc.rc)
			in := runInput()
			if tc.in != nil {
				tc.in(&in)
			}
			_, err := a.RunPlaybook(context.Background(), in)
			var app *temporal.ApplicationError
			require.True(t, errors.As(err, &app), "%v", err)
			require.Equal(t, tc.errType, app.Type(), "%v", err)
			require.Equal(t, tc.retryable, !app.NonRetryable(), "%v", err)
		})
	}
}

// A check-mode run asks ansible-playbook for --check --diff with the step's tags, and reports what would
// change with the values of the Secrets it rendered redacted.
func TestRunPlaybookCheckMode(t *testing.T) {
	results, err := os.ReadFile("testdata/check-mode.json")
	require.NoError(t, err)
	a, bin := playbookRun(t, string(results), 0)
	sec, err := a.Core.CoreV1().Secrets("openstack").Get(context.Background(), "nova-cell1-mq", metav1.GetOptions{})
	require.NoError(t, err)
	sec.Data["transport_url"] = []byte("S3cr3t/pw")
	_, err = a.Core.CoreV1().Secrets("openstack").Update(context.Background(), sec, metav1.UpdateOptions{})
	require.NoError(t, err)

	in := runInput()
	in.Host, in.InventoryConfigMap = "localhost", ""
	in.Check, in.Tags, in.SkipTags = true, []string{"config", "restart"}, []string{"packages"}
	res, err := a.RunPlaybook(context.Background(), in)
	require.NoError(t, err)
	args, _ := os.ReadFile(filepath.Join(bin, "args"))
	for _, want := range []string{"--check", "--diff", "--tags=config,restart", "--skip-tags=packages", "--limit=localhost"} {
		require.Contains(t, strings.Split(string(args), "\n"), want)
	}
	require.True(t, res.Check)
	var names []string
	for _, c := range res.Changes {
		names = append(names, c.Task)
		require.NotContains(t, c.Diff, "S3cr3t")
	}
	require.Equal(t, []string{"Create dirs", "Install files", "Would restart"}, names)

	// A real run asks for neither.
	in.Check, in.Tags, in.SkipTags = false, nil, nil
	res, err = a.RunPlaybook(context.Background(), in)
	require.NoError(t, err)
	require.Empty(t, res.Changes)
	args, _ = os.ReadFile(filepath.Join(bin, "args"))
	require.NotContains(t, string(args), "--check")
	require.NotContains(t, string(args), "--tags")
}

// A cancelled run (the workflow cancelled, the activity's deadline) kills ansible-playbook with the
// processes it started, and is retryable: the playbooks are idempotent.
func TestRunPlaybookCancelledKillsTheGroup(t *testing.T) {
	a, bin := playbookRun(t, "", 0)
	require.NoError(t, os.WriteFile(filepath.Join(bin, "hold"), nil, 0o644))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := a.RunPlaybook(ctx, runInput())
		done <- err
	}()
	child := 0
	require.Eventually(t, func() bool {
		b, err := os.ReadFile(filepath.Join(bin, "child"))
		if err != nil {
			return false
		}
		child, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil
	}, 10*time.Second, 10*time.Millisecond, "the stand-in started its child")
	require.NoError(t, syscall.Kill(child, 0), "the child runs")
	cancel()
	err := <-done
	require.ErrorIs(t, err, context.Canceled)
	var app *temporal.ApplicationError
	require.False(t, errors.As(err, &app) && app.NonRetryable(), "retryable: %v", err)
	require.Eventually(t, func() bool { return syscall.Kill(child, 0) != nil }, 5*time.Second, 10*time.Millisecond,
		"the playbook's children die with it")
}

// Run as an activity, a playbook heartbeats its progress while it runs and names the attempt on the
// host's record.
func TestRunPlaybookHeartbeats(t *testing.T) {
	a, bin := playbookRun(t, `{"plays":[],"stats":{"edpm-compute-0":{"ok":1}}}`, 0)
	require.NoError(t, os.WriteFile(filepath.Join(bin, "slow"), nil, 0o644))
	a.HeartbeatInterval = 20 * time.Millisecond
	env := (&testsuite.WorkflowTestSuite{}).NewTestActivityEnvironment()
	var beats []PlaybookProgress
	var mu sync.Mutex
	env.SetOnActivityHeartbeatListener(func(_ *activity.Info, details converter.EncodedValues) {
		var p PlaybookProgress
		require.NoError(t, details.Get(&p))
		mu.Lock()
		beats = append(beats, p)
		mu.Unlock()
	})
	env.RegisterActivity(a)
	val, err := env.ExecuteActivity(a.RunPlaybook, runInput())
	require.NoError(t, err)
	var res PlaybookResult
	require.NoError(t, val.Get(&res))
	require.Equal(t, int32(1), res.Attempt)
	mu.Lock()
	defer mu.Unlock()
	require.NotEmpty(t, beats, "heartbeats while the playbook ran")
	require.Equal(t, "edpm-compute-0", beats[0].Host)
	require.Equal(t, "nova-compute", beats[0].Step)
	var vars map[string]any
	raw, err := os.ReadFile(filepath.Join(bin, "vars.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(raw, &vars))
	require.Equal(t, "default-test-workflow-id#1", vars["stackflow_run"], "the host's record names the workflow and attempt")
}

func TestExtractPlaybooks(t *testing.T) {
	dir := t.TempDir()
	got, err := ExtractPlaybooks(dir)
	require.NoError(t, err)
	require.Equal(t, dir, got)
	v1, err := PlaybooksVersion(os.DirFS(dir))
	require.NoError(t, err)
	require.Len(t, v1, 12)
	// The version is the content's: the same playbooks, the same version; one byte more, another.
	shared, err := ExtractPlaybooks("")
	require.NoError(t, err)
	require.Equal(t, filepath.Join(os.TempDir(), "stackflow-playbooks-"+v1), shared)
	again, err := ExtractPlaybooks("")
	require.NoError(t, err)
	require.Equal(t, shared, again)
	books, err := filepath.Glob(filepath.Join(dir, "*.yml"))
	require.NoError(t, err)
	require.NotEmpty(t, books)
	f, err := os.OpenFile(books[0], os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteString("\n")
	require.NoError(t, err)
	require.NoError(t, f.Close())
	v2, err := PlaybooksVersion(os.DirFS(dir))
	require.NoError(t, err)
	require.NotEqual(t, v1, v2)
}

// What ansible-playbook is handed of the host, the step and the files, case by case; and a run that
// cannot start for want of what it names.
func TestRunPlaybookInputs(t *testing.T) {
	raw := func(v string) json.RawMessage { return json.RawMessage(v) }
	for _, tc := range []struct {
		name    string
		in      func(in *PlaybookInput)
		host    map[string]any
		vars    map[string]any
		errType string
		errText string
	}{
		{"no inventory ConfigMap: the node's variables alone", func(in *PlaybookInput) {
			in.InventoryConfigMap = ""
			in.HostVars = map[string]json.RawMessage{"ansible_host": raw(`"192.0.2.10"`), "ansible_user": raw(`"root"`)}
		}, map[string]any{"ansible_host": "192.0.2.10", "ansible_user": "root", "ansible_python_interpreter": "/usr/bin/python3"}, nil, "", ""},
		{"the node's interpreter wins over the default", func(in *PlaybookInput) {
			in.HostVars = map[string]json.RawMessage{"ansible_python_interpreter": raw(`"/usr/libexec/platform-python"`)}
		}, map[string]any{"ansible_host": "192.0.2.10", "ansible_user": "cloud-admin", "edpm_role": "compute-hci",
			"ansible_python_interpreter": "/usr/libexec/platform-python"}, nil, "", ""},
		{"the step's variables, a Secret read once for two files", func(in *PlaybookInput) {
			in.ExtraVars = map[string]json.RawMessage{"edpm_nova_compute_image": raw(`"nova-compute:1"`), "stackflow_step": raw(`"not this"`)}
			in.Files = append(in.Files, oslo.ConfigFile{Dest: "/etc/nova/nova.conf.d/02-more.conf",
				SecretOptions: []oslo.SecretOption{{Section: "oslo_messaging_notifications", Option: "transport_url", Secret: "nova-cell1-mq", Key: "transport_url"}}})
		}, nil, map[string]any{"edpm_nova_compute_image": "nova-compute:1", "stackflow_step": "nova-compute", "stackflow_run": "manual"}, "", ""},
		{"the inventory ConfigMap gone: permanent", func(in *PlaybookInput) { in.InventoryConfigMap = "gone" }, nil, nil,
			ErrSecretMissing, "inventory ConfigMap openstack/gone not found"},
		{"the host not in the inventory: permanent", func(in *PlaybookInput) { in.Host = "edpm-compute-9" }, nil, nil,
			ErrAnsible, "inventory has no host edpm-compute-9"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, bin := playbookRun(t, `{"plays":[],"stats":{"edpm-compute-0":{"ok":1}}}`, 0)
			in := runInput()
			tc.in(&in)
			_, err := a.RunPlaybook(context.Background(), in)
			if tc.errType != "" {
				var app *temporal.ApplicationError
				require.True(t, errors.As(err, &app) && app.NonRetryable(), "permanent: %v", err)
				require.Equal(t, tc.errType, app.Type())
				require.ErrorContains(t, err, tc.errText)
				_, statErr := os.Stat(filepath.Join(bin, "args"))
				require.True(t, os.IsNotExist(statErr), "ansible-playbook never started")
				return
			}
			require.NoError(t, err)
			if tc.host != nil {
				var inv struct {
					All struct {
						Hosts map[string]map[string]any `json:"hosts"`
					} `json:"all"`
				}
				b, err := os.ReadFile(filepath.Join(bin, "inventory.json"))
				require.NoError(t, err)
				require.NoError(t, json.Unmarshal(b, &inv))
				require.Equal(t, tc.host, inv.All.Hosts[in.Host])
			}
			if tc.vars != nil {
				var vars map[string]any
				b, err := os.ReadFile(filepath.Join(bin, "vars.json"))
				require.NoError(t, err)
				require.NoError(t, json.Unmarshal(b, &vars))
				for k, v := range tc.vars {
					require.Equal(t, v, vars[k], k)
				}
				require.Len(t, vars["stackflow_files"], 2)
				for i := range 2 {
					conf, err := os.ReadFile(filepath.Join(bin, fmt.Sprintf("file-%d", i)))
					require.NoError(t, err)
					require.Contains(t, string(conf), "transport_url = rabbit://u:s3cret@h:5672/v")
				}
			}
		})
	}
}
