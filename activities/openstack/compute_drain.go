package openstack

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/stackflow/stackflow/activities/internal/heartbeat"

	"github.com/gophercloud/gophercloud/v2"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
)

// Nova side of a data-plane update (OpenStack queue): a compute node's state, disabling and enabling
// its service, live-migrating instances off and back, and checking the version nova-compute reports.
//
// nova-compute reports its version through Placement: the update installs a provider config file
// (/etc/nova/provider_config) that gives the compute node's resource provider one reserved unit of the
// custom resource class VersionClassPrefix+VERSION. nova-compute sets its provider's inventory from
// scratch at every start and periodic update, so the class of an older version disappears by itself:
// the classes present are exactly what the running process read.

// VersionClassPrefix starts the custom resource class through which nova-compute reports its version.
const VersionClassPrefix = "CUSTOM_STACKFLOW_NOVA_COMPUTE_"

// Error types of the update activities.
const (
	// ErrDrainFailed is permanent: instances could not be moved off a host in time (or cannot move).
	ErrDrainFailed = "DrainFailed"
	// ErrVersionNotReported is retryable: nova-compute does not report the expected state yet; the
	// activity's schedule-to-close timeout bounds the wait.
	ErrVersionNotReported = "VersionNotReported"
)

// ComputeNodeState is what Nova says of one compute host.
type ComputeNodeState struct {
	ServiceID      string    `json:"serviceID"`
	Status         string    `json:"status"`
	DisabledReason string    `json:"disabledReason,omitempty"`
	State          string    `json:"state"`
	UpdatedAt      time.Time `json:"updatedAt"`
	HypervisorID   string    `json:"hypervisorID,omitempty"`
	// VersionClasses are the version resource classes of the host's provider (normally zero or one).
	VersionClasses []string `json:"versionClasses,omitempty"`
	// Servers are the instances on the host (every project), sorted.
	Servers []string `json:"servers,omitempty"`
}

// ComputeNodeState reads the host's compute service, hypervisor, version class and instances.
func (o *OpenStack) ComputeNodeState(ctx context.Context, in ComputeHostInput) (*ComputeNodeState, error) {
	st, err := o.readComputeNode(ctx, in.Cloud.Identity(), in.Host)
	if err != nil {
		return nil, err
	}
	nova, err := o.computeFor(ctx, in.Cloud.Identity())
	if err != nil {
		return nil, err
	}
	list, err := serversOn(ctx, nova, in.Host)
	if err != nil {
		return nil, err
	}
	for _, s := range list {
		st.Servers = append(st.Servers, s.ID)
	}
	sort.Strings(st.Servers)
	return st, nil
}

// ServiceStateInput enables or disables a host's compute service.
type ServiceStateInput struct {
	Cloud   CloudSecret `json:"cloud"`
	Host    string      `json:"host"`
	Enabled bool        `json:"enabled"`
	// Reason is the disabled reason Nova shows (disabling only).
	Reason string `json:"reason,omitempty"`
	// IfRegistered makes a host Nova does not know (or a region with no compute API) no error when
	// disabling: a compute being removed may never have registered.
	IfRegistered bool `json:"ifRegistered,omitempty"`
}

// SetComputeService enables or disables the host's nova-compute service (a service already in that
// state is left alone) and returns the instances on the host afterwards, sorted: once it is disabled,
// the ones a drain must move.
func (o *OpenStack) SetComputeService(ctx context.Context, in ServiceStateInput) ([]string, error) {
	nova, err := o.computeFor(ctx, in.Cloud.Identity())
	if in.IfRegistered && errors.Is(err, errNoComputeAPI) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	svc, err := computeService(ctx, nova, in.Host)
	if (in.Enabled || in.IfRegistered) && isPermanentNotFound(err) {
		// A host Nova does not know (any more) is not disabled, and has no instance to move.
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	want := ServiceDisabled
	if in.Enabled {
		want = ServiceEnabled
	}
	if svc.Status != string(want) {
		opts := NovaServiceUpdateOpts{Status: want}
		if !in.Enabled {
			opts.DisabledReason = in.Reason
		}
		if err := nova.UpdateService(ctx, svc.ID, opts); err != nil {
			return nil, classifyOS(fmt.Sprintf("set compute service of %s %s", in.Host, want), err)
		}
	}
	list, err := serversOn(ctx, nova, in.Host)
	if err != nil {
		return nil, err
	}
	ids := make([]string, 0, len(list))
	for _, s := range list {
		ids = append(ids, s.ID)
	}
	sort.Strings(ids)
	return ids, nil
}

// MigrateInput moves instances by live migration.
type MigrateInput struct {
	Cloud CloudSecret `json:"cloud"`
	// From, when set, is drained: every instance on it moves (Servers and any other found there).
	// When empty, Servers move to Targets[0] (migrate back), those gone or already there skipped.
	From    string   `json:"from,omitempty"`
	Servers []string `json:"servers,omitempty"`
	// Targets are the hosts to move to, taken in turn; the scheduler chooses when empty.
	Targets []string `json:"targets,omitempty"`
	// Deadline bounds the whole move, retries of the activity included.
	Deadline time.Time `json:"deadline"`
}

// MigrateResult says where each instance went.
type MigrateResult struct {
	// Moved maps each instance moved by this activity (any attempt) to its host now.
	Moved map[string]string `json:"moved,omitempty"`
	// Skipped are listed instances that no longer exist or were already in place.
	Skipped []string `json:"skipped,omitempty"`
}

// MigrateServers live-migrates instances and waits until each is ACTIVE on its new host. It is safe to
// retry: instances already moved are skipped and a migration in progress is waited for, not restarted.
// An instance that cannot be live-migrated (not ACTIVE), a migration that fails twice, or the deadline
// passing fail permanently with ErrDrainFailed, naming the instances and why.
func (o *OpenStack) MigrateServers(ctx context.Context, in MigrateInput) (*MigrateResult, error) {
	nova, err := o.computeFor(ctx, in.Cloud.Identity())
	if err != nil {
		return nil, err
	}
	return heartbeat.While(ctx, func(ctx context.Context) (*MigrateResult, error) {
		return o.migrate(ctx, nova, in)
	})
}

// migration is one instance's move in progress.
type migration struct {
	to       string
	started  bool
	attempts int
}

// migrate moves in's instances through nova and decides, round after round, what each needs next (see
// MigrateServers); it is the drain's logic, written against the narrow ComputeClient.
func (o *OpenStack) migrate(ctx context.Context, nova ComputeClient, in MigrateInput) (*MigrateResult, error) {
	res := &MigrateResult{Moved: map[string]string{}}
	moves := map[string]*migration{}
	next := 0
	pick := func() string {
		if len(in.Targets) == 0 {
			return ""
		}
		t := in.Targets[next%len(in.Targets)]
		next++
		return t
	}
	if in.From == "" && len(in.Targets) == 0 {
		return nil, temporal.NewNonRetryableApplicationError("migrate back needs a target host", ErrOSInvalid, nil)
	}
	for _, id := range in.Servers {
		moves[id] = &migration{}
	}
	for {
		var pending []string
		if in.From != "" {
			on, err := serversOn(ctx, nova, in.From)
			if err != nil {
				return nil, err
			}
			for _, s := range on {
				if moves[s.ID] == nil && !slices.Contains(res.Skipped, s.ID) {
					moves[s.ID] = &migration{}
				}
			}
		}
		ids := make([]string, 0, len(moves))
		for id := range moves {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		var stuck []string
		for _, id := range ids {
			m := moves[id]
			s, err := nova.GetServer(ctx, id)
			if isNotFound(err) {
				delete(moves, id)
				res.Skipped = append(res.Skipped, id)
				continue
			}
			if err != nil {
				return nil, classifyOS("get server "+id, err)
			}
			// An instance being deleted leaves the host by itself: Nova shows it DELETED (or with task
			// state deleting) until its row is gone, and it cannot (and need not) move.
			if leaving(s.Status, s.TaskState) {
				delete(moves, id)
				res.Skipped = append(res.Skipped, id)
				continue
			}
			// Where it must not be (drain) or where it must go (back).
			done := (in.From != "" && s.Host != in.From) || (in.From == "" && s.Host == in.Targets[0])
			if done && s.Status == "ACTIVE" && s.TaskState == "" {
				if m.started || in.From != "" {
					res.Moved[id] = s.Host
				} else {
					res.Skipped = append(res.Skipped, id)
				}
				delete(moves, id)
				continue
			}
			switch {
			case s.TaskState != "":
				// A migration (ours, maybe from an attempt of this activity that died) is under way.
				m.started = true
			case s.Status != "ACTIVE":
				stuck = append(stuck, fmt.Sprintf("%s is %s (only ACTIVE instances live-migrate)", id, s.Status))
				continue
			case m.started && m.attempts >= 2:
				stuck = append(stuck, fmt.Sprintf("%s: live migration failed twice (%s)", id, lastMigrationStatus(ctx, nova, id)))
				continue
			default:
				if m.to == "" || m.started {
					m.to = pick()
					if in.From == "" {
						m.to = in.Targets[0]
					}
				}
				if err := nova.LiveMigrate(ctx, id, m.to); err != nil {
					if !gophercloud.ResponseCodeIs(err, 409) {
						return nil, classifyOS("live-migrate server "+id, err)
					}
					// 409: a task is running on the instance already; wait for it.
				}
				m.started = true
				m.attempts++
			}
			pending = append(pending, id)
		}
		// Instances still moving settle first: the failure then names every instance that could not
		// move, not those that failed before the others finished.
		if len(pending) == 0 {
			if len(stuck) > 0 {
				return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("%s: %s", drainWhat(in), strings.Join(stuck, "; ")), ErrDrainFailed, nil)
			}
			return res, nil
		}
		if activity.IsActivity(ctx) {
			activity.RecordHeartbeat(ctx, fmt.Sprintf("%d instance(s) moving: %s", len(pending), strings.Join(pending, ", ")))
		}
		if !in.Deadline.IsZero() && time.Now().After(in.Deadline) {
			msg := fmt.Sprintf("%s: %d instance(s) not moved by the deadline: %s", drainWhat(in), len(pending), strings.Join(pending, ", "))
			if len(stuck) > 0 {
				msg += "; " + strings.Join(stuck, "; ")
			}
			return nil, temporal.NewNonRetryableApplicationError(msg, ErrDrainFailed, nil)
		}
		if err := sleep(ctx, o.poll()); err != nil {
			return nil, err
		}
	}
}

// leaving says whether an instance's deletion is under way, so a drain has nothing to move.
func leaving(status, taskState string) bool {
	return status == "DELETED" || taskState == "deleting"
}

func drainWhat(in MigrateInput) string {
	if in.From != "" {
		return "drain of host " + in.From
	}
	return "migration back to host " + in.Targets[0]
}

// lastMigrationStatus is the status of the server's latest migration, for messages.
func lastMigrationStatus(ctx context.Context, nova ComputeClient, id string) string {
	m, err := nova.LastMigration(ctx, id)
	switch {
	case err != nil:
		return "migration status unknown"
	case m == nil:
		return "no migration recorded"
	}
	return fmt.Sprintf("last migration %s → %s: %s", m.SourceCompute, m.DestCompute, m.Status)
}

// VersionCheckInput is what a host's nova-compute must report.
type VersionCheckInput struct {
	Cloud CloudSecret `json:"cloud"`
	Host  string      `json:"host"`
	// Class is the version resource class the host must report; "" means none.
	Class string `json:"class,omitempty"`
	// Since: the service must have reported at or after this time (it was restarted then; Nova records
	// reports to the second).
	Since time.Time `json:"since"`
}

// WaitComputeVersion succeeds once the host's nova-compute service is up and reported since Since,
// its hypervisor is listed, and its provider reports exactly the expected version class. Before, it
// fails retryably (ErrVersionNotReported) saying which is missing; the retry policy paces it.
func (o *OpenStack) WaitComputeVersion(ctx context.Context, in VersionCheckInput) (*ComputeNodeState, error) {
	st, err := o.readComputeNode(ctx, in.Cloud.Identity(), in.Host)
	if err != nil {
		return nil, err
	}
	notYet := func(format string, args ...any) (*ComputeNodeState, error) {
		return nil, temporal.NewApplicationError(fmt.Sprintf(format, args...), ErrVersionNotReported)
	}
	if st.UpdatedAt.Before(in.Since) {
		return notYet("nova-compute on %s has not reported since its restart at %s (last report %s)", in.Host, in.Since.UTC().Format(time.RFC3339), st.UpdatedAt.UTC().Format(time.RFC3339))
	}
	if st.State != "up" {
		return notYet("nova-compute on %s is %s", in.Host, st.State)
	}
	if st.HypervisorID == "" {
		return notYet("nova-compute on %s is up but Nova lists no hypervisor for it", in.Host)
	}
	want := []string{}
	if in.Class != "" {
		want = []string{in.Class}
	}
	if !slices.Equal(st.VersionClasses, want) {
		return notYet("nova-compute on %s reports version %v, not %v", in.Host, orNoneList(st.VersionClasses), orNoneList(want))
	}
	return st, nil
}

func orNoneList(l []string) string {
	if len(l) == 0 {
		return "none"
	}
	return strings.Join(l, ", ")
}

// isPermanentNotFound reports whether err is a permanent OpenStackNotFound error (an activity's own).
func isPermanentNotFound(err error) bool {
	var app *temporal.ApplicationError
	return errors.As(err, &app) && app.Type() == ErrOSNotFound
}

// stateOf is what a compute service record says.
// readComputeNode reads what Nova and Placement say of a host's compute: its service, its hypervisor
// and, once it has one, the version classes its provider reports.
func (o *OpenStack) readComputeNode(ctx context.Context, id Identity, host string) (*ComputeNodeState, error) {
	nova, err := o.computeFor(ctx, id)
	if err != nil {
		return nil, err
	}
	svc, err := computeService(ctx, nova, host)
	if err != nil {
		return nil, err
	}
	st := stateOf(svc)
	if st.HypervisorID, err = hypervisorOf(ctx, nova, host); err != nil || st.HypervisorID == "" {
		return st, err
	}
	placement, err := o.placementFor(ctx, id)
	if err != nil {
		return nil, err
	}
	if st.VersionClasses, err = versionClasses(ctx, placement, st.HypervisorID); err != nil {
		return nil, err
	}
	return st, nil
}

func stateOf(svc *NovaService) *ComputeNodeState {
	return &ComputeNodeState{ServiceID: svc.ID, Status: svc.Status, DisabledReason: svc.DisabledReason, State: svc.State, UpdatedAt: svc.UpdatedAt}
}

// computeService is the host's nova-compute service record.
func computeService(ctx context.Context, nova ComputeClient, host string) (*NovaService, error) {
	svcs, err := nova.ComputeServices(ctx, host)
	if err != nil {
		return nil, classifyOS("list compute services of "+host, err)
	}
	if len(svcs) == 0 {
		return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("Nova has no nova-compute service on host %s", host), ErrOSNotFound, nil)
	}
	return &svcs[0], nil
}

// hypervisorOf is the ID of the host's hypervisor ("" when Nova lists none).
func hypervisorOf(ctx context.Context, nova ComputeClient, host string) (string, error) {
	hvs, err := nova.Hypervisors(ctx, host)
	if isNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", classifyOS("list hypervisors of "+host, err)
	}
	for _, h := range hvs {
		if h.HypervisorHostname == host || h.Service.Host == host {
			return h.ID, nil
		}
	}
	return "", nil
}

// versionClasses lists the version resource classes in the provider's inventory, sorted.
func versionClasses(ctx context.Context, placement PlacementClient, provider string) ([]string, error) {
	classes, err := placement.ResourceClasses(ctx, provider)
	if err != nil {
		return nil, classifyOS("inventory of resource provider "+provider, err)
	}
	var out []string
	for _, rc := range classes {
		if strings.HasPrefix(rc, VersionClassPrefix) {
			out = append(out, rc)
		}
	}
	sort.Strings(out)
	return out, nil
}

// serversOn lists the instances on host, of every project.
func serversOn(ctx context.Context, nova ComputeClient, host string) ([]Server, error) {
	list, err := nova.ListServers(ctx, ServerListOpts{AllTenants: true, Host: host})
	if err != nil {
		return nil, classifyOS("list instances on "+host, err)
	}
	return list, nil
}
