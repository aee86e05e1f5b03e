package local

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Secrets a release of stackflow's chart reads in its namespace, as the README has a user create them:
// Temporal's client certificate and API key, and the payload codec's keys.
const (
	ReleaseTemporalClientSecret = "temporal-client"
	ReleaseTemporalAPIKeySecret = "temporal-api-key"
	ReleaseCodecSecret          = "stackflow-codec"
)

// ReleaseSecrets creates or updates, in namespace ns, the Secrets a release of the chart reads, from the
// stack's Temporal TLS front and codec keys.
func (s *Stack) ReleaseSecrets(ctx context.Context, ns string) error {
	if s.TemporalTLS == nil || s.CodecKeys == "" {
		return fmt.Errorf("the stack reports no Temporal TLS front or codec keys (stack.json): run make up")
	}
	files := map[string]map[string]string{
		ReleaseTemporalClientSecret: {"ca.crt": s.TemporalTLS.CA, "tls.crt": s.TemporalTLS.Cert, "tls.key": s.TemporalTLS.Key},
		ReleaseTemporalAPIKeySecret: {"api-key": s.TemporalTLS.APIKeyFile},
	}
	entries, err := os.ReadDir(s.CodecKeys)
	if err != nil {
		return fmt.Errorf("codec keys: %w", err)
	}
	files[ReleaseCodecSecret] = map[string]string{}
	for _, e := range entries {
		files[ReleaseCodecSecret][e.Name()] = filepath.Join(s.CodecKeys, e.Name())
	}
	for name, keys := range files {
		data := map[string][]byte{}
		for k, path := range keys {
			b, err := os.ReadFile(path)
			if err != nil {
				return fmt.Errorf("secret %s: %w", name, err)
			}
			data[k] = b
		}
		if err := s.ApplySecret(ctx, ns, name, data); err != nil {
			return err
		}
	}
	return nil
}

// ReleaseValues are the chart values that run stackflow on the real node from this checkout's images
// (make images, imported by make up), reaching Temporal through the stack's TLS front on the hosts'
// gateway in Temporal namespace temporalNS, with the Secrets of ReleaseSecrets. Requests are small (the
// node shares two cores with the whole stack); limits are the chart's. The pod templates carry the
// images' digests, so a rebuilt image (still tagged dev) rolls the pods.
func (s *Stack) ReleaseValues(temporalNS string) (map[string]any, error) {
	digests := map[string]string{}
	for _, img := range []string{"stackflow-bridge", "stackflow-worker"} {
		d, err := layoutDigest(filepath.Join(s.CheckoutImages(), img, "index.json"))
		if err != nil {
			return nil, fmt.Errorf("image %s (make images builds it, make up imports it): %w", img, err)
		}
		digests[img] = d
	}
	small := map[string]any{"requests": map[string]any{"cpu": "10m", "memory": "32Mi"}}
	onRealNode := func(m map[string]any) map[string]any {
		m["nodeSelector"] = map[string]any{RealNodeLabel: "true"}
		m["tolerations"] = []any{map[string]any{"key": RealNodeTaint.Key, "operator": "Equal", "value": RealNodeTaint.Value, "effect": string(RealNodeTaint.Effect)}}
		return m
	}
	worker := func() map[string]any { return map[string]any{"replicas": 1, "resources": small} }
	serverName := ""
	if s.TemporalTLS != nil {
		serverName = s.TemporalTLS.ServerName
	}
	return map[string]any{
		"image": map[string]any{"registry": ImageRepository, "tag": "dev", "pullPolicy": "Never"},
		"podAnnotations": map[string]any{
			"stackflow.io/bridge-image": strings.TrimPrefix(digests["stackflow-bridge"], "sha256:"),
			"stackflow.io/worker-image": strings.TrimPrefix(digests["stackflow-worker"], "sha256:"),
		},
		"temporal": map[string]any{
			"address":   fmt.Sprintf("%s:%d", HostGateway, TemporalTLSPort),
			"namespace": temporalNS,
			"ui":        s.TemporalUI,
			"tls":       map[string]any{"enabled": true, "secretName": ReleaseTemporalClientSecret, "serverName": serverName},
			"apiKey":    map[string]any{"secretName": ReleaseTemporalAPIKeySecret, "key": "api-key"},
		},
		"codec":  map[string]any{"secretName": ReleaseCodecSecret},
		"bridge": onRealNode(map[string]any{"replicas": 2, "resources": small}),
		"worker": onRealNode(map[string]any{}),
		"workers": map[string]any{"stackflow": worker(), "stackflow-kube": worker(),
			"stackflow-ansible": worker(), "stackflow-openstack": worker()},
	}, nil
}

// ServeRelease runs stackflow as the stack's own release does for `make run`: the chart's bridge (two
// replicas, leader-elected) and one worker Deployment per task queue as pods on the real node, serving
// every namespace and kind in Temporal namespace temporalNS (the stack's when empty), or, when namespaces
// are given, the objects of those namespaces only (the chart's bridge.namespaces; its RBAC stays
// cluster-wide), so that tests serving other namespaces with bridges of their own can run beside it. It
// returns once every Deployment is available. StopRelease scales it back to no pods.
func (s *Stack) ServeRelease(ctx context.Context, temporalNS string, namespaces ...string) error {
	if temporalNS == "" {
		temporalNS = s.TemporalNamespace
	}
	if err := s.ReleaseSecrets(ctx, ChartNamespace); err != nil {
		return err
	}
	values, err := s.ReleaseValues(temporalNS)
	if err != nil {
		return err
	}
	if len(namespaces) > 0 {
		ns := make([]any, len(namespaces))
		for i, n := range namespaces {
			ns[i] = n
		}
		values["bridge"].(map[string]any)["namespaces"] = ns
	}
	t0 := time.Now()
	if err := s.upgradeChart(ctx, values, true); err != nil {
		return err
	}
	served := "every namespace"
	if len(namespaces) > 0 {
		served = "namespaces " + strings.Join(namespaces, ", ")
	}
	s.Logf("stackflow: bridge and workers running as pods of release %s/%s (Temporal namespace %s, serving %s), every Deployment available in %s",
		ChartNamespace, ChartRelease, temporalNS, served, time.Since(t0).Round(100*time.Millisecond))
	return nil
}

// StopRelease scales the stack's release back to no pods (its accounts and rules stay); in-flight
// activities finish within the workers' stop timeout, and the workflows wait in Temporal.
func (s *Stack) StopRelease(ctx context.Context) error {
	return s.upgradeChart(ctx, idleReleaseValues(), true)
}
