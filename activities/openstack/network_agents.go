package openstack

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"go.temporal.io/sdk/temporal"
)

// Binaries of the Neutron agents of an OVN chassis, as Neutron's agent API names them.
const (
	AgentBinaryOVNController = "ovn-controller"
	AgentBinaryOVNMetadata   = "neutron-ovn-metadata-agent"
)

// NetworkAgentInput names a host's Neutron agents in the cloud behind a clouds Secret.
type NetworkAgentInput struct {
	Cloud CloudSecret `json:"cloud"`
	Host  string      `json:"host"`
	// Binary limits the call to one agent binary (AgentBinaryOVNMetadata, …); every agent of the host
	// when empty.
	Binary string `json:"binary,omitempty"`
}

// NetworkAgent is what Neutron lists of an agent (its API's field names).
type NetworkAgent struct {
	ID     string `json:"id"`
	Type   string `json:"agent_type"`
	Binary string `json:"binary"`
	Host   string `json:"host"`
	Alive  bool   `json:"alive"`
}

func (a NetworkAgent) String() string {
	state := "dead"
	if a.Alive {
		state = "alive"
	}
	return fmt.Sprintf("%s %s (%s)", a.Type, a.ID, state)
}

// ErrNetworkAgentNotAlive is the retryable error of WaitNetworkAgentAlive and of DeleteNetworkAgents
// when agents reappear; the retry policy paces it.
const ErrNetworkAgentNotAlive = "NetworkAgentNotAlive"

// hostAgents returns the network client of the input's cloud and the host's agents of in.Binary.
func (o *OpenStack) hostAgents(ctx context.Context, in NetworkAgentInput) (NetworkClient, []NetworkAgent, error) {
	neutron, err := o.networkFor(ctx, in.Cloud.Identity())
	if err != nil {
		return nil, nil, err
	}
	list, err := listAgents(ctx, neutron, in)
	return neutron, list, err
}

// listAgents lists the host's agents of in.Binary (all when empty), sorted by ID.
func listAgents(ctx context.Context, neutron NetworkClient, in NetworkAgentInput) ([]NetworkAgent, error) {
	all, err := neutron.ListAgents(ctx, AgentListOpts{Host: in.Host, Binary: in.Binary})
	if err != nil {
		return nil, classifyOS("list network agents of "+in.Host, err)
	}
	var out []NetworkAgent
	for _, a := range all {
		// The API's filters are exact, but a server that ignores one must not widen what is deleted.
		if a.Host != in.Host || (in.Binary != "" && a.Binary != in.Binary) {
			continue
		}
		out = append(out, NetworkAgent{ID: a.ID, Type: a.AgentType, Binary: a.Binary, Host: a.Host, Alive: a.Alive})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// WaitNetworkAgentAlive succeeds once Neutron lists an alive agent of in.Binary on the host, and fails
// retryably before, saying what it lists instead.
func (o *OpenStack) WaitNetworkAgentAlive(ctx context.Context, in NetworkAgentInput) (*NetworkAgent, error) {
	_, list, err := o.hostAgents(ctx, in)
	if err != nil {
		return nil, err
	}
	for _, a := range list {
		if a.Alive {
			return &a, nil
		}
	}
	if len(list) == 0 {
		return nil, temporal.NewApplicationError(fmt.Sprintf("Neutron lists no %s on host %s yet", in.Binary, in.Host), ErrNetworkAgentNotAlive)
	}
	return nil, temporal.NewApplicationError(fmt.Sprintf("Neutron lists %s on host %s, not alive", agentList(list), in.Host), ErrNetworkAgentNotAlive)
}

// DeleteNetworkAgents deletes the host's agents of in.Binary (every agent of the host when empty) from
// Neutron and returns what it deleted. An agent whose process still runs comes back: that fails
// retryably, naming it. With ML2/OVN, deleting an agent deletes its host's chassis from the southbound
// database; an ovn-controller still running there registers the chassis again at once, without the
// agents that were stopped.
func (o *OpenStack) DeleteNetworkAgents(ctx context.Context, in NetworkAgentInput) ([]NetworkAgent, error) {
	network, list, err := o.hostAgents(ctx, in)
	if err != nil {
		return nil, err
	}
	for _, a := range list {
		if err := network.DeleteAgent(ctx, a.ID); err != nil && !isNotFound(err) {
			return nil, classifyOS("delete network agent "+a.String()+" of "+in.Host, err)
		}
	}
	left, err := listAgents(ctx, network, in)
	if err != nil {
		return nil, err
	}
	if len(left) > 0 {
		return nil, temporal.NewApplicationError(fmt.Sprintf("Neutron still lists %s on host %s after deleting it: does it still run there?", agentList(left), in.Host), ErrNetworkAgentNotAlive)
	}
	return list, nil
}

func agentList(list []NetworkAgent) string {
	s := make([]string, len(list))
	for i, a := range list {
		s[i] = a.String()
	}
	return strings.Join(s, ", ")
}
