package podrunner

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// WaitingError is a pod input that is not there yet (a missing ConfigMap or Secret): the kubelet waits
// for it too, reporting CreateContainerConfigError, so the runner tries again later.
type WaitingError struct{ Msg string }

func (e *WaitingError) Error() string { return e.Msg }

// file is one file of a materialised volume.
type file struct {
	path string // relative to the volume's directory
	data []byte
	mode os.FileMode
}

// sources reads what the pod's volumes are made of.
type sources struct {
	kube      kubernetes.Interface
	pod       *corev1.Pod
	podIP     string
	hostIP    string
	configMap map[string]*corev1.ConfigMap
	secret    map[string]*corev1.Secret
}

func (s *sources) getConfigMap(ctx context.Context, name string, optional bool) (*corev1.ConfigMap, error) {
	if cm, ok := s.configMap[name]; ok {
		return cm, nil
	}
	cm, err := s.kube.CoreV1().ConfigMaps(s.pod.Namespace).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err) && optional:
		cm = &corev1.ConfigMap{}
	case apierrors.IsNotFound(err):
		return nil, &WaitingError{fmt.Sprintf("configmap %q not found", name)}
	case err != nil:
		return nil, err
	}
	s.configMap[name] = cm
	return cm, nil
}

func (s *sources) getSecret(ctx context.Context, name string, optional bool) (*corev1.Secret, error) {
	if sec, ok := s.secret[name]; ok {
		return sec, nil
	}
	sec, err := s.kube.CoreV1().Secrets(s.pod.Namespace).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err) && optional:
		sec = &corev1.Secret{}
	case apierrors.IsNotFound(err):
		return nil, &WaitingError{fmt.Sprintf("secret %q not found", name)}
	case err != nil:
		return nil, err
	}
	s.secret[name] = sec
	return sec, nil
}

// keyFiles projects data (ConfigMap or Secret) as the kubelet does: every key, or only items (each at its
// path) when given; a missing item key is an error unless optional.
func keyFiles(what string, data map[string][]byte, items []corev1.KeyToPath, mode *int32, optional bool) ([]file, error) {
	m := os.FileMode(0o644)
	if mode != nil {
		m = os.FileMode(*mode)
	}
	var out []file
	if len(items) == 0 {
		keys := make([]string, 0, len(data))
		for k := range data {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			out = append(out, file{path: k, data: data[k], mode: m})
		}
		return out, nil
	}
	for _, it := range items {
		v, ok := data[it.Key]
		if !ok {
			if optional {
				continue
			}
			return nil, &WaitingError{fmt.Sprintf("%s has no key %q", what, it.Key)}
		}
		fm := m
		if it.Mode != nil {
			fm = os.FileMode(*it.Mode)
		}
		out = append(out, file{path: it.Path, data: v, mode: fm})
	}
	return out, nil
}

func stringData(m map[string]string, b map[string][]byte) map[string][]byte {
	out := make(map[string][]byte, len(m)+len(b))
	for k, v := range m {
		out[k] = []byte(v)
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

// fieldValue resolves a downward-API field reference of the pod.
func (s *sources) fieldValue(ref *corev1.ObjectFieldSelector) (string, error) {
	p := s.pod
	switch ref.FieldPath {
	case "metadata.name":
		return p.Name, nil
	case "metadata.namespace":
		return p.Namespace, nil
	case "metadata.uid":
		return string(p.UID), nil
	case "spec.nodeName":
		return p.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return p.Spec.ServiceAccountName, nil
	case "status.podIP":
		return s.podIP, nil
	case "status.hostIP":
		return s.hostIP, nil
	}
	if k, ok := strings.CutPrefix(ref.FieldPath, "metadata.labels['"); ok {
		return p.Labels[strings.TrimSuffix(k, "']")], nil
	}
	if k, ok := strings.CutPrefix(ref.FieldPath, "metadata.annotations['"); ok {
		return p.Annotations[strings.TrimSuffix(k, "']")], nil
	}
	return "", fmt.Errorf("field %s is not supported by the pod runner", ref.FieldPath)
}

// volumeFiles returns the files of one volume, or ok=false for volumes that are plain directories
// (emptyDir) or host paths.
func (s *sources) volumeFiles(ctx context.Context, v corev1.Volume) ([]file, error) {
	switch {
	case v.ConfigMap != nil:
		optional := v.ConfigMap.Optional != nil && *v.ConfigMap.Optional
		cm, err := s.getConfigMap(ctx, v.ConfigMap.Name, optional)
		if err != nil {
			return nil, err
		}
		return keyFiles("configmap "+v.ConfigMap.Name, stringData(cm.Data, cm.BinaryData), v.ConfigMap.Items, v.ConfigMap.DefaultMode, optional)
	case v.Secret != nil:
		optional := v.Secret.Optional != nil && *v.Secret.Optional
		sec, err := s.getSecret(ctx, v.Secret.SecretName, optional)
		if err != nil {
			return nil, err
		}
		return keyFiles("secret "+v.Secret.SecretName, stringData(sec.StringData, sec.Data), v.Secret.Items, v.Secret.DefaultMode, optional)
	case v.DownwardAPI != nil:
		return s.downwardFiles(v.DownwardAPI.Items, v.DownwardAPI.DefaultMode)
	case v.Projected != nil:
		var out []file
		for _, src := range v.Projected.Sources {
			var fs []file
			var err error
			switch {
			case src.ConfigMap != nil:
				optional := src.ConfigMap.Optional != nil && *src.ConfigMap.Optional
				var cm *corev1.ConfigMap
				if cm, err = s.getConfigMap(ctx, src.ConfigMap.Name, optional); err == nil {
					fs, err = keyFiles("configmap "+src.ConfigMap.Name, stringData(cm.Data, cm.BinaryData), src.ConfigMap.Items, v.Projected.DefaultMode, optional)
				}
			case src.Secret != nil:
				optional := src.Secret.Optional != nil && *src.Secret.Optional
				var sec *corev1.Secret
				if sec, err = s.getSecret(ctx, src.Secret.Name, optional); err == nil {
					fs, err = keyFiles("secret "+src.Secret.Name, stringData(sec.StringData, sec.Data), src.Secret.Items, v.Projected.DefaultMode, optional)
				}
			case src.DownwardAPI != nil:
				fs, err = s.downwardFiles(src.DownwardAPI.Items, v.Projected.DefaultMode)
			case src.ServiceAccountToken != nil:
				fs, err = s.tokenFile(ctx, src.ServiceAccountToken)
			default:
				err = fmt.Errorf("volume %s: a projected source the pod runner does not support", v.Name)
			}
			if err != nil {
				return nil, err
			}
			out = append(out, fs...)
		}
		return out, nil
	}
	return nil, fmt.Errorf("volume %s: only configMap, secret, downwardAPI, projected, emptyDir and hostPath volumes are supported by the pod runner", v.Name)
}

func (s *sources) downwardFiles(items []corev1.DownwardAPIVolumeFile, mode *int32) ([]file, error) {
	var out []file
	for _, it := range items {
		if it.FieldRef == nil {
			return nil, fmt.Errorf("downward API file %s: only fieldRef is supported by the pod runner", it.Path)
		}
		v, err := s.fieldValue(it.FieldRef)
		if err != nil {
			return nil, err
		}
		m := os.FileMode(0o644)
		if mode != nil {
			m = os.FileMode(*mode)
		}
		if it.Mode != nil {
			m = os.FileMode(*it.Mode)
		}
		out = append(out, file{path: it.Path, data: []byte(v), mode: m})
	}
	return out, nil
}

// tokenFile asks the API server for the pod's service-account token, as the kubelet does.
func (s *sources) tokenFile(ctx context.Context, src *corev1.ServiceAccountTokenProjection) ([]file, error) {
	sa := s.pod.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	req := &authv1.TokenRequest{Spec: authv1.TokenRequestSpec{
		Audiences:         nil,
		ExpirationSeconds: src.ExpirationSeconds,
		BoundObjectRef:    &authv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: s.pod.Name, UID: s.pod.UID},
	}}
	if src.Audience != "" {
		req.Spec.Audiences = []string{src.Audience}
	}
	tr, err := s.kube.CoreV1().ServiceAccounts(s.pod.Namespace).CreateToken(ctx, sa, req, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("service account token of %s: %w", sa, err)
	}
	return []file{{path: src.Path, data: []byte(tr.Status.Token), mode: 0o600}}, nil
}

// materialize writes every volume of the pod under dir/<volume> and returns the directory (or host
// path) of each volume by name.
func (s *sources) materialize(ctx context.Context, dir string) (map[string]string, error) {
	out := map[string]string{}
	for _, v := range s.pod.Spec.Volumes {
		vdir := filepath.Join(dir, v.Name)
		switch {
		case v.HostPath != nil:
			out[v.Name] = v.HostPath.Path
			continue
		case v.EmptyDir != nil:
			if err := os.MkdirAll(vdir, 0o777); err != nil {
				return nil, err
			}
			out[v.Name] = vdir
			continue
		}
		files, err := s.volumeFiles(ctx, v)
		if err != nil {
			return nil, err
		}
		// Written afresh into a new directory that then replaces the old one, so a restarted container
		// never sees half a volume.
		tmp := vdir + ".new"
		if err := os.RemoveAll(tmp); err != nil {
			return nil, err
		}
		if err := os.MkdirAll(tmp, 0o755); err != nil {
			return nil, err
		}
		for _, f := range files {
			p := filepath.Join(tmp, filepath.Clean("/"+f.path))
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return nil, err
			}
			if err := os.WriteFile(p, f.data, f.mode.Perm()); err != nil {
				return nil, err
			}
			if err := os.Chmod(p, f.mode.Perm()); err != nil {
				return nil, err
			}
		}
		if err := os.RemoveAll(vdir); err != nil {
			return nil, err
		}
		if err := os.Rename(tmp, vdir); err != nil {
			return nil, err
		}
		out[v.Name] = vdir
	}
	return out, nil
}

// mounts are the bind mounts of container c, from the materialised volumes.
func mounts(c corev1.Container, volumes map[string]string) ([]Mount, error) {
	var out []Mount
	for _, vm := range c.VolumeMounts {
		src, ok := volumes[vm.Name]
		if !ok {
			return nil, fmt.Errorf("container %s mounts unknown volume %s", c.Name, vm.Name)
		}
		if vm.SubPath != "" {
			src = filepath.Join(src, filepath.Clean("/"+vm.SubPath))
		}
		out = append(out, Mount{Source: src, Target: vm.MountPath, ReadOnly: vm.ReadOnly})
	}
	return out, nil
}

// containerEnv is the container's environment: the runner's base (PATH with the host image, HOME,
// HOSTNAME), then envFrom, then env, with $(VAR) references expanded as the kubelet does.
func (s *sources) containerEnv(ctx context.Context, c corev1.Container, base []string) ([]string, error) {
	vals := map[string]string{}
	var order []string
	set := func(k, v string) {
		if _, ok := vals[k]; !ok {
			order = append(order, k)
		}
		vals[k] = v
	}
	for _, kv := range base {
		k, v, _ := strings.Cut(kv, "=")
		set(k, v)
	}
	for _, ef := range c.EnvFrom {
		var data map[string][]byte
		switch {
		case ef.ConfigMapRef != nil:
			cm, err := s.getConfigMap(ctx, ef.ConfigMapRef.Name, ef.ConfigMapRef.Optional != nil && *ef.ConfigMapRef.Optional)
			if err != nil {
				return nil, err
			}
			data = stringData(cm.Data, cm.BinaryData)
		case ef.SecretRef != nil:
			sec, err := s.getSecret(ctx, ef.SecretRef.Name, ef.SecretRef.Optional != nil && *ef.SecretRef.Optional)
			if err != nil {
				return nil, err
			}
			data = stringData(sec.StringData, sec.Data)
		}
		keys := make([]string, 0, len(data))
		for k := range data {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			set(ef.Prefix+k, string(data[k]))
		}
	}
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			set(e.Name, expand(e.Value, vals))
			continue
		}
		var v string
		switch src := e.ValueFrom; {
		case src.FieldRef != nil:
			fv, err := s.fieldValue(src.FieldRef)
			if err != nil {
				return nil, err
			}
			v = fv
		case src.ConfigMapKeyRef != nil:
			optional := src.ConfigMapKeyRef.Optional != nil && *src.ConfigMapKeyRef.Optional
			cm, err := s.getConfigMap(ctx, src.ConfigMapKeyRef.Name, optional)
			if err != nil {
				return nil, err
			}
			data := stringData(cm.Data, cm.BinaryData)
			b, ok := data[src.ConfigMapKeyRef.Key]
			if !ok && !optional {
				return nil, &WaitingError{fmt.Sprintf("configmap %q has no key %q", src.ConfigMapKeyRef.Name, src.ConfigMapKeyRef.Key)}
			}
			v = string(b)
		case src.SecretKeyRef != nil:
			optional := src.SecretKeyRef.Optional != nil && *src.SecretKeyRef.Optional
			sec, err := s.getSecret(ctx, src.SecretKeyRef.Name, optional)
			if err != nil {
				return nil, err
			}
			data := stringData(sec.StringData, sec.Data)
			b, ok := data[src.SecretKeyRef.Key]
			if !ok && !optional {
				return nil, &WaitingError{fmt.Sprintf("secret %q has no key %q", src.SecretKeyRef.Name, src.SecretKeyRef.Key)}
			}
			v = string(b)
		default:
			return nil, fmt.Errorf("env %s: a value source the pod runner does not support", e.Name)
		}
		set(e.Name, v)
	}
	out := make([]string, 0, len(order))
	for _, k := range order {
		out = append(out, k+"="+vals[k])
	}
	return out, nil
}

// expand replaces $(VAR) with VAR's value when it is defined, $$ with $, and leaves the rest alone: the
// kubelet's rules for env values, command and args.
func expand(s string, vals map[string]string) string {
	if !strings.Contains(s, "$") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 >= len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteString(s[i:])
				return b.String()
			}
			name := s[i+2 : i+2+end]
			if v, ok := vals[name]; ok {
				b.WriteString(v)
			} else {
				b.WriteString(s[i : i+3+end])
			}
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}

// argv is the container's command line with $(VAR) expanded from its environment.
func argv(c corev1.Container, env []string) []string {
	vals := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		vals[k] = v
	}
	var out []string
	for _, a := range append(append([]string{}, c.Command...), c.Args...) {
		out = append(out, expand(a, vals))
	}
	return out
}
