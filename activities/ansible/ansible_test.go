package ansible

import (
	"errors"
	"strings"
	"testing"

	ansiblejson "github.com/apenella/go-ansible/v2/pkg/execute/result/json"
	"go.temporal.io/sdk/temporal"
)

func TestClassifyPlaybook(t *testing.T) {
	tests := []struct {
		name          string
		results       string
		wantType      string // "" means success
		wantRetryable bool
		wantMsg       []string
	}{
		{
			name:    "every task ran",
			results: `{"plays":[],"stats":{"h1":{"ok":5,"changed":2}}}`,
		},
		{
			name: "unreachable host is retryable and carries Ansible's message",
			results: `{"plays":[{"play":{"name":"p"},"tasks":[{"task":{"name":"Check that the host answers"},"hosts":{"h1":{"unreachable":true,
				"msg":"Failed to connect to the host via ssh: ssh: connect to host 198.51.100.250 port 22: No route to host"}}}]}],
				"stats":{"h1":{"unreachable":1}}}`,
			wantType: ErrHostUnreachable, wantRetryable: true,
			wantMsg: []string{"host h1 unreachable", "No route to host"},
		},
		{
			name: "a failed task is permanent and names host, task and message",
			results: `{"plays":[{"play":{"name":"p"},"tasks":[
				{"task":{"name":"ok task"},"hosts":{"h1":{"changed":false}}},
				{"task":{"name":"Create the network configuration directory"},"hosts":{"h1":{"failed":true,"msg":"There was an issue creating /etc/edpm/network as requested: [Errno 17] File exists"}}}]}],
				"stats":{"h1":{"ok":1,"failures":1}}}`,
			wantType: ErrPlaybookFailed,
			wantMsg:  []string{"host h1", `task "Create the network configuration directory" failed`, "File exists"},
		},
		{
			name: "stderr is added to the message",
			results: `{"plays":[{"play":{"name":"p"},"tasks":[{"task":{"name":"run"},"hosts":{"h1":{"failed":true,"msg":"non-zero return code","stderr":"nova-compute exited"}}}]}],
				"stats":{"h1":{"failures":1}}}`,
			wantType: ErrPlaybookFailed,
			wantMsg:  []string{"non-zero return code: nova-compute exited"},
		},
		{
			name:     "the host is not in the results",
			results:  `{"plays":[],"stats":{"other":{"ok":1}}}`,
			wantType: ErrAnsible,
			wantMsg:  []string{"did not run on host h1"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := ansiblejson.JSONParse([]byte(tt.results))
			if err != nil {
				t.Fatal(err)
			}
			err = ClassifyPlaybook("h1", "configure-network.yml", r)
			if tt.wantType == "" {
				if err != nil {
					t.Fatalf("unexpected error %v", err)
				}
				return
			}
			var app *temporal.ApplicationError
			if !errors.As(err, &app) {
				t.Fatalf("error %v is not an application error", err)
			}
			if app.Type() != tt.wantType || app.NonRetryable() == tt.wantRetryable {
				t.Errorf("type %s non-retryable %v, want %s retryable %v", app.Type(), app.NonRetryable(), tt.wantType, tt.wantRetryable)
			}
			for _, m := range tt.wantMsg {
				if !strings.Contains(app.Message(), m) {
					t.Errorf("message %q lacks %q", app.Message(), m)
				}
			}
		})
	}
}

func TestInventoryHostVars(t *testing.T) {
	inv := []byte(`all:
  vars:
    ansible_user: root
    edpm_debug: true
  hosts:
    edpm-compute-0:
      ansible_host: 198.51.100.10
      ansible_user: cloud-admin
`)
	got, err := InventoryHostVars(inv, "edpm-compute-0")
	if err != nil {
		t.Fatal(err)
	}
	if got["ansible_user"] != "cloud-admin" || got["ansible_host"] != "198.51.100.10" || got["edpm_debug"] != true {
		t.Errorf("host vars = %v: the host's own variables must win over all.vars", got)
	}
	if _, err := InventoryHostVars(inv, "edpm-compute-9"); err == nil || !strings.Contains(err.Error(), "no host edpm-compute-9") {
		t.Errorf("missing host: err = %v", err)
	}
}

func TestPlaybookOutputs(t *testing.T) {
	r, err := ansiblejson.JSONParse([]byte(`{"plays":[{"play":{"name":"p"},"tasks":[
		{"task":{"name":"read"},"hosts":{"h1":{"stdout":"2.0"}}},
		{"task":{"name":"report"},"hosts":{"h1":{"ansible_facts":{"stackflow_out_version":"2.0","other":"x"}}, "h2":{"ansible_facts":{"stackflow_out_version":"9"}}}},
		{"task":{"name":"report again"},"hosts":{"h1":{"ansible_facts":{"stackflow_out_version":"2.1"}}}}]}],
		"stats":{"h1":{"ok":3}}}`))
	if err != nil {
		t.Fatal(err)
	}
	got := PlaybookOutputs("h1", r)
	if len(got) != 1 || got["version"] != "2.1" {
		t.Fatalf("outputs of h1: got %v, want only version=2.1 (the host's own, last set)", got)
	}
	if out := PlaybookOutputs("h3", r); out != nil {
		t.Fatalf("a host that set nothing reports nothing, got %v", out)
	}
}
