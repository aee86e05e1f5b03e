package openstack

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"strings"

	"github.com/stackflow/stackflow/activities/kube"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/config"
	"github.com/gophercloud/gophercloud/v2/openstack/config/clouds"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"go.temporal.io/sdk/temporal"
)

// This file is the one place OpenStack clients are made: from an Identity (a clouds.yaml Secret, the
// cloud in it and a region), authenticated once and kept while the Secret does not change. Servers,
// bastions, Ironic provisioning and the compute registration checks all get their clients here.

// Microversions stackflow speaks.
const (
	// ComputeMicroversion: tags at boot (2.52), UUID service and hypervisor IDs and hypervisors by host
	// name (2.53), volume type in block device mappings (2.67).
	ComputeMicroversion = "2.67"
	// BaremetalMicroversion is the Ironic API microversion.
	BaremetalMicroversion = "1.78"
)

// osClients are the service clients of one identity, kept while its Secret does not change. Network and
// image are required; compute is nil in a region with no compute API (computeErr says so), and the others
// are made when the catalog has them and report why not when an activity needs one that is missing.
type osClients struct {
	version string
	compute *gophercloud.ServiceClient
	network *gophercloud.ServiceClient
	image   *gophercloud.ServiceClient

	volume, baremetal, placement    *gophercloud.ServiceClient
	volErr, baremetalErr, placemErr error
	// computeErr: the catalog has no compute endpoint in the compute region (compute is nil).
	computeErr error
}

// clientsFor reads the identity Secret and returns (cached) clients authenticated with it. The cloud is
// id.CloudName, else the Secret's key "cloud", else the only cloud of its clouds.yaml. A catalog with no
// compute endpoint in the compute region is an error wrapping errNoComputeAPI.
func (o *OpenStack) clientsFor(ctx context.Context, id Identity) (*osClients, error) {
	c, err := o.regionClients(ctx, id)
	if err != nil {
		return nil, err
	}
	if c.computeErr != nil {
		// Kept from a call that needed no Nova: a Nova registered since is found by logging in again.
		o.mu.Lock()
		if o.clients[id.clientsKey()] == c {
			delete(o.clients, id.clientsKey())
		}
		o.mu.Unlock()
		if c, err = o.regionClients(ctx, id); err != nil {
			return nil, err
		}
		if c.computeErr != nil {
			return nil, c.computeErr
		}
	}
	return c, nil
}

// clientsKey is where an identity's clients are kept.
func (id Identity) clientsKey() string {
	return id.Namespace + "/" + id.SecretName + "/" + id.CloudName + "/" + id.Region + "/" + id.ComputeRegion
}

// regionClients is clientsFor that also returns the clients of a catalog with no compute endpoint (compute
// nil, computeErr set): Glance, Ironic, Placement and Neutron serve without Nova (bare-metal provisioning,
// what stays of a compute). They are kept like the others; clientsFor logs in again before it reports
// that a compute API is missing.
func (o *OpenStack) regionClients(ctx context.Context, id Identity) (*osClients, error) {
	if id.SecretName == "" {
		return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("identity %s: a Secret name is required", id), ErrOSCredentials, nil)
	}
	key := id.clientsKey()
	o.mu.Lock()
	if o.clients == nil {
		o.clients = map[string]*osClients{}
	}
	c := o.clients[key]
	o.mu.Unlock()
	sec, err := o.Core.CoreV1().Secrets(id.Namespace).Get(ctx, id.SecretName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		// Deleting a namespace deletes the Secret while the objects in it are still being torn down:
		// clients this worker already authenticated with it finish the job.
		if c != nil {
			return c, nil
		}
		if id.Fallback != "" {
			return o.regionClients(ctx, id.fallback())
		}
		return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("identity Secret %s/%s not found", id.Namespace, id.SecretName), ErrOSCredentials, err)
	}
	if err != nil {
		return nil, kube.Classify("get identity Secret "+id.Namespace+"/"+id.SecretName, err)
	}
	if _, ok := sec.Data[CloudsYAMLKey]; !ok && id.Fallback != "" {
		return o.clientsFor(ctx, id.fallback())
	}
	version := string(sec.UID) + "/" + sec.ResourceVersion
	if c != nil && c.version == version {
		return c, nil
	}
	provider, eo, err := authenticate(ctx, id, sec.Data)
	if err != nil {
		return nil, err
	}
	nc := &osClients{version: version}
	ceo := eo
	if id.ComputeRegion != "" {
		ceo.Region = id.ComputeRegion
	}
	if nc.compute, err = openstack.NewComputeV2(provider, ceo); err != nil {
		if !errors.As(err, new(*gophercloud.ErrEndpointNotFound)) {
			return nil, classifyOS("compute endpoint of "+id.String(), err)
		}
		nc.compute, nc.computeErr = nil, classifyOS("compute endpoint of "+id.String(), fmt.Errorf("%w: %w", errNoComputeAPI, err))
	} else {
		nc.compute.Microversion = ComputeMicroversion
	}
	if nc.network, err = openstack.NewNetworkV2(provider, eo); err != nil {
		return nil, classifyOS("network endpoint of "+id.String(), err)
	}
	if nc.image, err = openstack.NewImageV2(provider, eo); err != nil {
		return nil, classifyOS("image endpoint of "+id.String(), err)
	}
	nc.volume, nc.volErr = openstack.NewBlockStorageV3(provider, eo)
	if nc.baremetal, nc.baremetalErr = openstack.NewBareMetalV1(provider, eo); nc.baremetal != nil {
		nc.baremetal.Microversion = BaremetalMicroversion
	}
	nc.placement, nc.placemErr = openstack.NewPlacementV1(provider, eo)
	o.mu.Lock()
	o.clients[key] = nc
	o.mu.Unlock()
	return nc, nil
}

// fallback is the identity of id's Fallback Secret: its own cloud, in the same regions.
func (id Identity) fallback() Identity {
	return Identity{Namespace: id.Namespace, SecretName: id.Fallback, Region: id.Region, ComputeRegion: id.ComputeRegion}
}

// authenticate logs in with the cloud of an identity Secret's data, returning the provider and the
// cloud's endpoint options.
func authenticate(ctx context.Context, id Identity, data map[string][]byte) (*gophercloud.ProviderClient, gophercloud.EndpointOpts, error) {
	var eo gophercloud.EndpointOpts
	yml, ok := data[CloudsYAMLKey]
	if !ok {
		return nil, eo, temporal.NewNonRetryableApplicationError(fmt.Sprintf("identity Secret %s/%s has no key %s", id.Namespace, id.SecretName, CloudsYAMLKey), ErrOSCredentials, nil)
	}
	cloud, err := cloudName(id, data, yml)
	if err != nil {
		return nil, eo, err
	}
	// Only the Secret's content counts: no file on this machine and no OS_* variable may leak in.
	opts := []clouds.ParseOption{clouds.WithCloudsYAML(bytes.NewReader(yml)), clouds.WithCloudName(cloud),
		clouds.WithLocations(), clouds.WithSecureYAML(bytes.NewReader([]byte("clouds: {}\n")))}
	if id.Region != "" {
		opts = append(opts, clouds.WithRegion(id.Region))
	}
	ao, eo, tlsCfg, err := clouds.Parse(opts...)
	if err != nil {
		return nil, eo, temporal.NewNonRetryableApplicationError(fmt.Sprintf("identity %s: %v", id, err), ErrOSCredentials, err)
	}
	if ca, ok := data[CACertKey]; ok {
		// The Secret's CA bundle, as CAPO's identity Secrets carry it next to clouds.yaml.
		if tlsCfg == nil {
			tlsCfg = &tls.Config{MinVersion: tls.VersionTLS12}
		}
		if tlsCfg.RootCAs == nil {
			if tlsCfg.RootCAs, err = x509.SystemCertPool(); err != nil {
				tlsCfg.RootCAs = x509.NewCertPool()
			}
		}
		tlsCfg.RootCAs.AppendCertsFromPEM(ca)
	}
	ao.AllowReauth = true
	var provider *gophercloud.ProviderClient
	if tlsCfg != nil {
		provider, err = config.NewProviderClient(ctx, ao, config.WithTLSConfig(tlsCfg))
	} else {
		provider, err = config.NewProviderClient(ctx, ao)
	}
	if err != nil {
		return nil, eo, classifyOS("authenticate with "+id.String(), err)
	}
	return provider, eo, nil
}

// cloudName is the identity's cloud: its CloudName, else the Secret's "cloud" key, else the only cloud of
// clouds.yaml.
func cloudName(id Identity, data map[string][]byte, yml []byte) (string, error) {
	if id.CloudName != "" {
		return id.CloudName, nil
	}
	if c := strings.TrimSpace(string(data["cloud"])); c != "" {
		return c, nil
	}
	var f struct {
		Clouds map[string]any `json:"clouds"`
	}
	if err := yaml.Unmarshal(yml, &f); err != nil || len(f.Clouds) != 1 {
		return "", temporal.NewNonRetryableApplicationError(fmt.Sprintf("identity %s: no cloud named, no key cloud in the Secret and not exactly one cloud in clouds.yaml", id), ErrOSCredentials, err)
	}
	for name := range f.Clouds {
		return name, nil
	}
	return "", nil
}

// blockStorage returns the Cinder client or a permanent error naming why there is none.
func (c *osClients) blockStorage() (*gophercloud.ServiceClient, error) {
	return optionalService("block-storage", c.volume, c.volErr)
}

// bareMetal returns the Ironic client or a permanent error naming why there is none.
func (c *osClients) bareMetal() (*gophercloud.ServiceClient, error) {
	return optionalService("bare-metal", c.baremetal, c.baremetalErr)
}

// BaremetalServiceClient is the Ironic service client of an identity (at BaremetalMicroversion), or a
// permanent error naming why its cloud has none: activities/baremetal makes its client of it. Ironic
// needs no Nova: a cloud with no compute API serves it.
func (o *OpenStack) BaremetalServiceClient(ctx context.Context, id Identity) (*gophercloud.ServiceClient, error) {
	c, err := o.regionClients(ctx, id)
	if err != nil {
		return nil, err
	}
	return c.bareMetal()
}

// placementAPI returns the Placement client or a permanent error naming why there is none.
func (c *osClients) placementAPI() (*gophercloud.ServiceClient, error) {
	return optionalService("placement", c.placement, c.placemErr)
}

func optionalService(what string, sc *gophercloud.ServiceClient, err error) (*gophercloud.ServiceClient, error) {
	if sc == nil {
		return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("no %s service in this cloud: %v", what, err), ErrOSNotFound, err)
	}
	return sc, nil
}
