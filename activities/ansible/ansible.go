// Package ansible holds the activity that runs stackflow's playbooks on data-plane hosts with
// ansible-playbook over SSH (go-ansible), installing configuration files rendered with options read from
// Secrets at run time, and reporting per step what changed. Unreachable hosts, failed tasks and missing
// Secrets are classified beside it.
package ansible

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/stackflow/stackflow/activities/internal/heartbeat"

	"github.com/stackflow/stackflow/activities/kube"
	"github.com/stackflow/stackflow/api/oslo"

	"github.com/apenella/go-ansible/v2/pkg/execute"
	ansibleexec "github.com/apenella/go-ansible/v2/pkg/execute/exec"
	ansiblejson "github.com/apenella/go-ansible/v2/pkg/execute/result/json"
	"github.com/apenella/go-ansible/v2/pkg/playbook"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	edpmansible "github.com/stackflow/stackflow/deploy/ansible"
)

// Ansible runs stackflow's playbooks (deploy/ansible) with ansible-playbook over SSH, registered on
// lifecycle.AnsibleQueue. The SSH key and every secret configuration value are read from Secrets when
// the activity runs and only ever written to a private temporary directory (files mode 0600) that is
// removed afterwards; workflows pass Secret names only.
type Ansible struct {
	Core kubernetes.Interface
	// PlaybookDir holds the playbooks.
	PlaybookDir string
	// Binary is ansible-playbook; default "ansible-playbook" from PATH.
	Binary string
	// KnownHostsFile is where host keys are learned on first contact and checked afterwards.
	KnownHostsFile string
	// HeartbeatInterval paces heartbeats while a playbook runs; default 5s.
	HeartbeatInterval time.Duration
	// Version is the playbooks' content hash (PlaybooksVersion), reported with every run.
	Version string
}

// NewAnsible builds the Ansible activities. With playbookDir empty, the playbooks embedded in this binary
// are written to a private directory, so the worker runs the playbooks of its own version.
func NewAnsible(cfg *rest.Config, playbookDir string) (*Ansible, error) {
	core, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	if playbookDir == "" {
		if playbookDir, err = ExtractPlaybooks(""); err != nil {
			return nil, err
		}
	}
	version, err := PlaybooksVersion(os.DirFS(playbookDir))
	if err != nil {
		return nil, err
	}
	state, err := os.UserCacheDir()
	if err != nil {
		state = os.TempDir()
	}
	known := filepath.Join(state, "stackflow", "ssh", "known_hosts")
	if err := os.MkdirAll(filepath.Dir(known), 0o700); err != nil {
		return nil, fmt.Errorf("known hosts directory: %w", err)
	}
	return &Ansible{Core: core, PlaybookDir: playbookDir, KnownHostsFile: known, Version: version}, nil
}

// ExtractPlaybooks writes the embedded playbooks into dir and returns it. With dir empty it uses a
// directory under the system's temporary directory named after the playbooks' content hash, shared by
// every worker of the same version and written once (atomically, by rename).
func ExtractPlaybooks(dir string) (string, error) {
	if dir != "" {
		return dir, writePlaybooks(dir)
	}
	version, err := PlaybooksVersion(edpmansible.Playbooks)
	if err != nil {
		return "", err
	}
	dir = filepath.Join(os.TempDir(), "stackflow-playbooks-"+version)
	if _, err := os.Stat(dir); err == nil {
		return dir, nil
	}
	tmp, err := os.MkdirTemp(os.TempDir(), "stackflow-playbooks-new-")
	if err != nil {
		return "", fmt.Errorf("playbook directory: %w", err)
	}
	if err := writePlaybooks(tmp); err != nil {
		os.RemoveAll(tmp)
		return "", err
	}
	_ = os.Chmod(tmp, 0o755)
	if err := os.Rename(tmp, dir); err != nil {
		// Another worker won the race: its copy is identical.
		os.RemoveAll(tmp)
		if _, serr := os.Stat(dir); serr != nil {
			return "", fmt.Errorf("playbook directory %s: %w", dir, err)
		}
	}
	return dir, nil
}

// PlaybooksVersion is the version of a set of playbooks: the first 12 hex digits of the SHA-256 of
// every file's path, size and content, in walk order.
func PlaybooksVersion(fsys fs.FS) (string, error) {
	h := sha256.New()
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(fsys, p)
		fmt.Fprintf(h, "%s\x00%d\x00", p, len(b))
		h.Write(b)
		return err
	})
	if err != nil {
		return "", fmt.Errorf("hash playbooks: %w", err)
	}
	return hex.EncodeToString(h.Sum(nil))[:12], nil
}

func writePlaybooks(dir string) error {
	err := fs.WalkDir(edpmansible.Playbooks, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dir, p), 0o755)
		}
		b, err := edpmansible.Playbooks.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, p), b, 0o644)
	})
	if err != nil {
		return fmt.Errorf("write playbooks to %s: %w", dir, err)
	}
	return nil
}

// Error types of the Ansible activities; they become condition reasons.
const (
	// ErrHostUnreachable is retryable: SSH could not reach the host (the retry policy backs off).
	ErrHostUnreachable = "HostUnreachable"
	// ErrPlaybookFailed is permanent: a task failed on the host; retrying the same run cannot help.
	ErrPlaybookFailed = "PlaybookFailed"
	// ErrAnsible is permanent: ansible-playbook could not run the playbook at all.
	ErrAnsible = "AnsibleError"
	// ErrSecretMissing is permanent for this attempt: a Secret (or key) the run needs does not exist.
	ErrSecretMissing = kube.ErrSecretMissing
	// ErrPlaybooksVersion is permanent: the run requires playbooks this worker does not carry.
	ErrPlaybooksVersion = "PlaybooksVersionMismatch"
)

// SSHKeySecretKey is the key of the SSH private key in a node's SSH key Secret.
const SSHKeySecretKey = "ssh-privatekey"

// InventoryConfigMapKey is the key of the inventory in a node's inventory ConfigMap.
const InventoryConfigMapKey = "inventory.yaml"

// PlaybookInput is one playbook run against one host. It names Secrets and ConfigMaps; it never holds
// their values.
type PlaybookInput struct {
	// Namespace holds the Secrets and the ConfigMap named below.
	Namespace string `json:"namespace"`
	// Host is the inventory host name (the node's hostName).
	Host string `json:"host"`
	// Step names the step (bootstrap, configure-network, nova-compute, …) for logs and the host's record.
	Step string `json:"step"`
	// Playbook is the playbook's file name in the playbook directory.
	Playbook string `json:"playbook"`
	// HostVars are the host's Ansible variables (ansible_host, ansible_user, ansible_port, the role's
	// and node's variables, node over role).
	HostVars map[string]json.RawMessage `json:"hostVars,omitempty"`
	// InventoryConfigMap, when set, names a ConfigMap whose inventory gives the host's variables first;
	// HostVars override them.
	InventoryConfigMap string `json:"inventoryConfigMap,omitempty"`
	// SSHKeySecret names the Secret holding the private key under ssh-privatekey.
	SSHKeySecret string `json:"sshKeySecret"`
	// ExtraVars are the step's variables (highest precedence).
	ExtraVars map[string]json.RawMessage `json:"extraVars,omitempty"`
	// Files are configuration files to render and hand to the playbook as stackflow_files.
	Files []oslo.ConfigFile `json:"files,omitempty"`
	// PlaybooksVersion, when set, is the playbooks' version the run requires: a worker carrying other
	// playbooks refuses it (ErrPlaybooksVersion).
	PlaybooksVersion string `json:"playbooksVersion,omitempty"`
	// Check runs the playbook in check mode with diffs (--check --diff): the host is left as it is and
	// the result lists what a real run would change (PlaybookResult.Changes).
	Check bool `json:"check,omitempty"`
	// Tags runs only the playbook's tasks with these tags (--tags; tasks tagged always run anyway);
	// SkipTags skips the tasks with these (--skip-tags).
	Tags     []string `json:"tags,omitempty"`
	SkipTags []string `json:"skipTags,omitempty"`
}

// PlaybookResult summarizes a successful run.
type PlaybookResult struct {
	Host    string `json:"host"`
	Step    string `json:"step"`
	Ok      int    `json:"ok"`
	Changed int    `json:"changed"`
	Skipped int    `json:"skipped"`
	// Attempt is the activity attempt that succeeded (1 unless the host was unreachable before).
	Attempt int32 `json:"attempt"`
	// Seconds is how long ansible-playbook ran.
	Seconds float64 `json:"seconds"`
	// Finished is when ansible-playbook ended, by the worker's clock.
	Finished time.Time `json:"finished"`
	// PlaybooksVersion is the version of the playbooks that ran.
	PlaybooksVersion string `json:"playbooksVersion,omitempty"`
	// Outputs are the values the playbook reported: facts named stackflow_out_<name>, by name.
	Outputs map[string]string `json:"outputs,omitempty"`
	// Check is set for a check-mode run; Changes are then the tasks that would change the host, their
	// diffs bounded to MaxCheckBytes (ChangesTruncated says some were left out) and Secret values redacted.
	Check            bool         `json:"check,omitempty"`
	Changes          []TaskChange `json:"changes,omitempty"`
	ChangesTruncated bool         `json:"changesTruncated,omitempty"`
}

// PlaybookProgress is what a running playbook heartbeats.
type PlaybookProgress struct {
	Host    string  `json:"host"`
	Step    string  `json:"step"`
	Seconds float64 `json:"seconds"`
}

// RunPlaybook runs one playbook against one host and classifies the outcome: an unreachable host is a
// retryable HostUnreachable error carrying Ansible's message; a failed task is a permanent
// PlaybookFailed error naming the host, the task and Ansible's message. It heartbeats while the playbook
// runs, so a worker that dies is noticed and the run is retried elsewhere (the playbooks are idempotent).
func (a *Ansible) RunPlaybook(ctx context.Context, in PlaybookInput) (*PlaybookResult, error) {
	if in.Host == "" || in.Playbook == "" || in.SSHKeySecret == "" {
		return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("playbook run needs a host, a playbook and an SSH key Secret (got host %q, playbook %q, secret %q)", in.Host, in.Playbook, in.SSHKeySecret), ErrAnsible, nil)
	}
	if in.PlaybooksVersion != "" && in.PlaybooksVersion != a.Version {
		return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("playbooks version %s required, this worker carries %s", in.PlaybooksVersion, a.Version), ErrPlaybooksVersion, nil)
	}
	playbookPath := filepath.Join(a.PlaybookDir, filepath.Base(in.Playbook))
	if _, err := os.Stat(playbookPath); err != nil {
		return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("playbook %s: %v", in.Playbook, err), ErrAnsible, err)
	}
	dir, err := os.MkdirTemp("", "sf-ansible-")
	if err != nil {
		return nil, fmt.Errorf("temporary directory: %w", err)
	}
	defer os.RemoveAll(dir)

	key, err := a.secretValue(ctx, in.Namespace, in.SSHKeySecret, SSHKeySecretKey)
	if err != nil {
		return nil, err
	}
	keyFile := filepath.Join(dir, "id")
	if !strings.HasSuffix(key, "\n") {
		key += "\n" // ssh refuses a key without its final newline
	}
	if err := os.WriteFile(keyFile, []byte(key), 0o600); err != nil {
		return nil, fmt.Errorf("write SSH key: %w", err)
	}

	hostVars, err := a.hostVars(ctx, in)
	if err != nil {
		return nil, err
	}
	inventory, _ := json.Marshal(map[string]any{"all": map[string]any{"hosts": map[string]any{in.Host: hostVars}}})
	invFile := filepath.Join(dir, "inventory.json")
	if err := os.WriteFile(invFile, inventory, 0o600); err != nil {
		return nil, fmt.Errorf("write inventory: %w", err)
	}

	extra := map[string]any{}
	for k, v := range in.ExtraVars {
		extra[k] = v
	}
	info := activityInfo(ctx)
	extra["stackflow_step"] = in.Step
	extra["stackflow_run"] = info
	files, secretValues, err := a.renderFiles(ctx, in, dir)
	if err != nil {
		return nil, err
	}
	extra["stackflow_files"] = files
	varsFile := filepath.Join(dir, "vars.json")
	vb, _ := json.Marshal(extra)
	if err := os.WriteFile(varsFile, vb, 0o600); err != nil {
		return nil, fmt.Errorf("write variables: %w", err)
	}

	start := time.Now()
	stdout, stderr, runErr := a.execute(ctx, in, dir, playbookPath, invFile, keyFile, varsFile, start)
	res := &PlaybookResult{Host: in.Host, Step: in.Step, Seconds: time.Since(start).Seconds(), Finished: time.Now(), PlaybooksVersion: a.Version}
	if activity.IsActivity(ctx) {
		res.Attempt = activity.GetInfo(ctx).Attempt
	}
	if ctx.Err() != nil {
		return nil, fmt.Errorf("playbook %s on %s: %w", in.Playbook, in.Host, ctx.Err())
	}
	parsed, perr := ansiblejson.ParseJSONResultsStream(bytes.NewReader(stdout))
	if perr != nil || parsed.Stats == nil {
		msg := kube.LastLines(string(stderr), 8)
		if msg == "" {
			msg = kube.LastLines(string(stdout), 8)
		}
		if runErr == nil {
			runErr = perr
		}
		return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("ansible-playbook %s for host %s did not run: %v: %s", in.Playbook, in.Host, runErr, msg), ErrAnsible, runErr)
	}
	if err := ClassifyPlaybook(in.Host, in.Playbook, parsed); err != nil {
		return nil, err
	}
	if st := parsed.Stats[in.Host]; st != nil {
		res.Ok, res.Changed, res.Skipped = st.Ok, st.Changed, st.Skipped
	}
	res.Outputs = PlaybookOutputs(in.Host, parsed)
	if in.Check {
		res.Check = true
		if res.Changes, res.ChangesTruncated, err = CheckChanges(in.Host, stdout, secretValues, MaxCheckBytes); err != nil {
			return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("check-mode run of %s on %s: %v", in.Playbook, in.Host, err), ErrAnsible, err)
		}
	}
	return res, nil
}

// OutputFactPrefix starts the names of the facts through which a playbook reports values.
const OutputFactPrefix = "stackflow_out_"

// PlaybookOutputs collects the facts named stackflow_out_<name> the playbook set on host (the last
// value of each wins).
func PlaybookOutputs(host string, r *ansiblejson.AnsiblePlaybookJSONResults) map[string]string {
	var out map[string]string
	for _, play := range r.Plays {
		for _, t := range play.Tasks {
			h := t.Hosts[host]
			if h == nil {
				continue
			}
			for k, v := range h.AnsibleFacts {
				if name, ok := strings.CutPrefix(k, OutputFactPrefix); ok {
					if out == nil {
						out = map[string]string{}
					}
					out[name] = fmt.Sprint(v)
				}
			}
		}
	}
	return out
}

// ClassifyPlaybook turns ansible-playbook's JSON results into nil (the host ran every task), a
// retryable HostUnreachable error, or a permanent PlaybookFailed error, each naming the host and
// carrying Ansible's own message.
func ClassifyPlaybook(host, playbookName string, r *ansiblejson.AnsiblePlaybookJSONResults) error {
	st := r.Stats[host]
	if st == nil {
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("playbook %s did not run on host %s (not in its results)", playbookName, host), ErrAnsible, nil)
	}
	if st.Unreachable == 0 && st.Failures == 0 {
		return nil
	}
	task, msg := failedTask(host, r)
	if st.Unreachable > 0 {
		return temporal.NewApplicationError(fmt.Sprintf("host %s unreachable: %s", host, msg), ErrHostUnreachable)
	}
	return temporal.NewNonRetryableApplicationError(fmt.Sprintf("host %s: %s: task %q failed: %s", host, playbookName, task, msg), ErrPlaybookFailed, nil)
}

// failedTask finds the first failed or unreachable task of host and Ansible's message for it.
func failedTask(host string, r *ansiblejson.AnsiblePlaybookJSONResults) (task, msg string) {
	for _, play := range r.Plays {
		for _, t := range play.Tasks {
			h := t.Hosts[host]
			if h == nil || !(h.Failed || h.Unreachable) {
				continue
			}
			if t.Task != nil {
				task = t.Task.Name
			}
			msg = strings.TrimSpace(fmt.Sprint(valueOr(h.Msg, "")))
			if s := strings.TrimSpace(fmt.Sprint(valueOr(h.Stderr, ""))); s != "" && !strings.Contains(msg, s) {
				msg = strings.TrimSpace(msg + ": " + kube.LastLines(s, 6))
			}
			if msg == "" {
				msg = "no message"
			}
			return task, msg
		}
	}
	return "", "no failed task in the results"
}

func valueOr(v any, def string) any {
	if v == nil {
		return def
	}
	return v
}

// hostVars merges the inventory ConfigMap's variables for the host (when named) with in.HostVars on top,
// and defaults the Python interpreter.
func (a *Ansible) hostVars(ctx context.Context, in PlaybookInput) (map[string]any, error) {
	vars := map[string]any{"ansible_python_interpreter": "/usr/bin/python3"}
	if in.InventoryConfigMap != "" {
		cm, err := a.Core.CoreV1().ConfigMaps(in.Namespace).Get(ctx, in.InventoryConfigMap, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("inventory ConfigMap %s/%s not found", in.Namespace, in.InventoryConfigMap), ErrSecretMissing, err)
		}
		if err != nil {
			return nil, kube.Classify("get inventory ConfigMap "+in.Namespace+"/"+in.InventoryConfigMap, err)
		}
		hv, err := InventoryHostVars([]byte(cm.Data[InventoryConfigMapKey]), in.Host)
		if err != nil {
			return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("inventory ConfigMap %s/%s: %v", in.Namespace, in.InventoryConfigMap, err), ErrAnsible, err)
		}
		for k, v := range hv {
			vars[k] = v
		}
	}
	for k, v := range in.HostVars {
		vars[k] = v
	}
	return vars, nil
}

// InventoryHostVars returns the variables of host in an Ansible YAML/JSON inventory (all.vars, then
// all.hosts.<host>, the host's own winning).
func InventoryHostVars(inventory []byte, host string) (map[string]any, error) {
	var inv struct {
		All struct {
			Vars  map[string]any            `json:"vars"`
			Hosts map[string]map[string]any `json:"hosts"`
		} `json:"all"`
	}
	if err := yaml.Unmarshal(inventory, &inv); err != nil {
		return nil, fmt.Errorf("parse inventory: %w", err)
	}
	h, ok := inv.All.Hosts[host]
	if !ok {
		return nil, fmt.Errorf("inventory has no host %s", host)
	}
	out := map[string]any{}
	for k, v := range inv.All.Vars {
		out[k] = v
	}
	for k, v := range h {
		out[k] = v
	}
	return out, nil
}

// renderFiles renders in.Files into dir (mode 0600) with their Secret options filled in, and returns
// them as the playbooks' stackflow_files, with the Secret values it read (a check-mode diff hides them).
func (a *Ansible) renderFiles(ctx context.Context, in PlaybookInput, dir string) ([]map[string]string, []string, error) {
	secrets := map[string]string{}
	for _, f := range in.Files {
		for _, so := range f.SecretOptions {
			k := so.Secret + "/" + so.Key
			if _, ok := secrets[k]; ok {
				continue
			}
			v, err := a.secretValue(ctx, in.Namespace, so.Secret, so.Key)
			if err != nil {
				return nil, nil, err
			}
			secrets[k] = v
		}
	}
	out := make([]map[string]string, 0, len(in.Files))
	for i, f := range in.Files {
		content, err := oslo.RenderConfigFile(f, secrets)
		if err != nil {
			return nil, nil, temporal.NewNonRetryableApplicationError(err.Error(), ErrSecretMissing, err)
		}
		src := filepath.Join(dir, fmt.Sprintf("file-%d", i))
		if err := os.WriteFile(src, []byte(content), 0o600); err != nil {
			return nil, nil, fmt.Errorf("write %s: %w", f.Dest, err)
		}
		out = append(out, map[string]string{"src": src, "dest": f.Dest, "mode": "0640"})
	}
	values := make([]string, 0, len(secrets))
	for _, v := range secrets {
		values = append(values, v)
	}
	return out, values, nil
}

// secretValue reads one key of a Secret. A missing Secret or key is a permanent SecretMissing error
// naming them (workflows wait for it before they run a playbook).
func (a *Ansible) secretValue(ctx context.Context, namespace, name, key string) (string, error) {
	sec, err := a.Core.CoreV1().Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", temporal.NewNonRetryableApplicationError(fmt.Sprintf("Secret %s/%s not found", namespace, name), ErrSecretMissing, err)
	}
	if err != nil {
		return "", kube.Classify("get Secret "+namespace+"/"+name, err)
	}
	v, ok := sec.Data[key]
	if !ok {
		return "", temporal.NewNonRetryableApplicationError(fmt.Sprintf("Secret %s/%s has no key %s", namespace, name, key), ErrSecretMissing, nil)
	}
	return string(v), nil
}

// execute runs ansible-playbook with the JSON stdout callback, heartbeating, and returns its output.
func (a *Ansible) execute(ctx context.Context, in PlaybookInput, dir, playbookPath, invFile, keyFile, varsFile string, start time.Time) ([]byte, []byte, error) {
	known := a.KnownHostsFile
	if known == "" {
		known = filepath.Join(dir, "known_hosts")
	}
	opts := &playbook.AnsiblePlaybookOptions{
		Inventory:     invFile,
		Limit:         in.Host,
		PrivateKey:    keyFile,
		ExtraVarsFile: []string{"@" + varsFile},
		Timeout:       30,
		Check:         in.Check,
		Diff:          in.Check,
		Tags:          strings.Join(in.Tags, ","),
		SkipTags:      strings.Join(in.SkipTags, ","),
		SSHCommonArgs: fmt.Sprintf("-o StrictHostKeyChecking=accept-new -o UserKnownHostsFile=%s -o IdentitiesOnly=yes -o ConnectTimeout=15 -o ServerAliveInterval=15", known),
	}
	binary := a.Binary
	if binary == "" {
		binary = "ansible-playbook"
	}
	cmd := playbook.NewAnsiblePlaybookCmd(playbook.WithBinary(binary), playbook.WithPlaybooks(playbookPath), playbook.WithPlaybookOptions(opts))
	var stdout, stderr bytes.Buffer
	exe := execute.NewDefaultExecute(
		execute.WithCmd(cmd),
		execute.WithExecutable(groupExec{}),
		execute.WithCmdRunDir(dir),
		execute.WithWrite(&stdout),
		execute.WithWriteError(&stderr),
		execute.WithEnvVars(map[string]string{
			"ANSIBLE_STDOUT_CALLBACK":            "stackflow_json",
			"ANSIBLE_CALLBACK_PLUGINS":           filepath.Join(a.PlaybookDir, "callback_plugins"),
			"ANSIBLE_PIPELINING":                 "True",
			"ANSIBLE_RETRY_FILES_ENABLED":        "False",
			"ANSIBLE_NOCOLOR":                    "1",
			"ANSIBLE_LOCAL_TEMP":                 filepath.Join(dir, "tmp"),
			"ANSIBLE_SSH_CONTROL_PATH_DIR":       filepath.Join(dir, "cp"),
			"ANSIBLE_HOST_KEY_CHECKING":          "True",
			"ANSIBLE_DEPRECATION_WARNINGS":       "False",
			"ANSIBLE_COMMAND_WARNINGS":           "False",
			"ANSIBLE_LOCALHOST_WARNING":          "False",
			"ANSIBLE_INVENTORY_UNPARSED_WARNING": "False",
		}),
	)
	every := a.HeartbeatInterval
	if every <= 0 {
		every = 5 * time.Second
	}
	defer heartbeat.Every(ctx, every, func() any {
		return PlaybookProgress{Host: in.Host, Step: in.Step, Seconds: time.Since(start).Seconds()}
	})()
	err := exe.Execute(ctx)
	return stdout.Bytes(), stderr.Bytes(), err
}

// PlaybookNiceness is the scheduling niceness of ansible-playbook and everything it starts.
const PlaybookNiceness = 10

// groupExec starts ansible-playbook in its own process group, killed with the worker (so a crashed
// worker leaves no playbook running on behind the retry) and, on cancellation, together with its ssh
// children.
type groupExec struct{}

func (groupExec) Command(name string, arg ...string) ansibleexec.Cmder {
	return groupCmd(exec.Command(name, arg...))
}

func (groupExec) CommandContext(ctx context.Context, name string, arg ...string) ansibleexec.Cmder {
	// Playbooks run niced: a worker running many at once keeps the CPU it needs for its own
	// orchestration (workflow tasks, heartbeats) and leaves it to the control plane it shares a machine
	// with.
	c := exec.CommandContext(ctx, "nice", append([]string{"-n", strconv.Itoa(PlaybookNiceness), name}, arg...)...)
	c.Cancel = func() error {
		if c.Process == nil {
			return nil
		}
		return syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
	}
	return groupCmd(c)
}

func groupCmd(c *exec.Cmd) *exec.Cmd {
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	return c
}

// activityInfo names the run on the host's step record: workflow ID and attempt.
func activityInfo(ctx context.Context) string {
	if !activity.IsActivity(ctx) {
		return "manual"
	}
	info := activity.GetInfo(ctx)
	return fmt.Sprintf("%s#%d", info.WorkflowExecution.ID, info.Attempt)
}

// IsSecretMissing reports whether err is a SecretMissing activity error.
func IsSecretMissing(err error) bool {
	var app *temporal.ApplicationError
	return errors.As(err, &app) && app.Type() == ErrSecretMissing
}
