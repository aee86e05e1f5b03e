package kube

import (
	"context"
	"fmt"
	"net"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"go.temporal.io/sdk/temporal"
)

// CloudsYAMLInput names what a clouds.yaml for a deployed Keystone is made of: its administrator's
// Secret (OS_* keys, as the keystone chart writes it) and its API's Service, and the Secret to write
// (key clouds.yaml, and key cloud naming the cloud). It carries no secret value.
type CloudsYAMLInput struct {
	Namespace   string `json:"namespace"`
	AdminSecret string `json:"adminSecret"`
	Service     string `json:"service"`
	Secret      string `json:"secret"`
	Cloud       string `json:"cloud"`
	Owner       *Owner `json:"owner,omitempty"`
}

// WriteCloudsYAML writes the clouds.yaml of a Keystone a release deployed into in.Secret: the
// administrator of in.AdminSecret at the Service's address (its ClusterIP, which the worker, the hosts
// and the pods reach alike; there is no cluster DNS to name it by). It writes only what differs.
func (k *Kube) WriteCloudsYAML(ctx context.Context, in CloudsYAMLInput) error {
	admin, err := k.Core.CoreV1().Secrets(in.Namespace).Get(ctx, in.AdminSecret, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("Secret %s/%s not found", in.Namespace, in.AdminSecret), ErrSecretMissing, nil)
	}
	if err != nil {
		return Classify("read Secret "+in.Namespace+"/"+in.AdminSecret, err)
	}
	svc, err := k.Core.CoreV1().Services(in.Namespace).Get(ctx, in.Service, metav1.GetOptions{})
	if err != nil {
		return Classify("read Service "+in.Namespace+"/"+in.Service, err)
	}
	if svc.Spec.ClusterIP == "" || svc.Spec.ClusterIP == "None" || len(svc.Spec.Ports) == 0 {
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("Service %s/%s has no ClusterIP and port to reach Keystone at", in.Namespace, in.Service), ErrInvalid, nil)
	}
	url := "http://" + net.JoinHostPort(svc.Spec.ClusterIP, strconv.Itoa(int(svc.Spec.Ports[0].Port))) + "/v3"
	env := map[string]string{}
	for key, v := range admin.Data {
		env[key] = string(v)
	}
	clouds, err := CloudsYAML(in.Cloud, url, env)
	if err != nil {
		return err
	}
	return k.writeClouds(ctx, in.Namespace, in.Secret, in.Owner, in.Cloud, clouds)
}

// writeClouds writes a clouds.yaml and the name of its cloud into the Secret namespace/name (keys
// clouds.yaml and cloud), each only when it differs.
func (k *Kube) writeClouds(ctx context.Context, namespace, name string, owner *Owner, cloud string, clouds []byte) error {
	for key, v := range map[string]string{"clouds.yaml": string(clouds), "cloud": cloud} {
		if err := WriteSecretKey(ctx, k.Core, SecretKeyRef{Namespace: namespace, Name: name, Key: key}, owner, v); err != nil {
			return err
		}
	}
	return nil
}

// CloudsYAML is a clouds.yaml with one cloud: a password login at authURL as the administrator the
// OS_* variables of env describe.
func CloudsYAML(cloud, authURL string, env map[string]string) ([]byte, error) {
	for _, key := range []string{"OS_USERNAME", "OS_PASSWORD", "OS_PROJECT_NAME"} {
		if env[key] == "" {
			return nil, temporal.NewNonRetryableApplicationError("the administrator's Secret has no "+key, ErrSecretMissing, nil)
		}
	}
	auth := map[string]string{"auth_url": authURL, "username": env["OS_USERNAME"], "password": env["OS_PASSWORD"], "project_name": env["OS_PROJECT_NAME"]}
	for key, name := range map[string]string{"OS_USER_DOMAIN_NAME": "user_domain_name", "OS_PROJECT_DOMAIN_NAME": "project_domain_name"} {
		if v := env[key]; v != "" {
			auth[name] = v
		}
	}
	c := map[string]any{"auth": auth, "identity_api_version": 3}
	if r := env["OS_REGION_NAME"]; r != "" {
		c["region_name"] = r
	}
	if i := env["OS_INTERFACE"]; i != "" {
		c["interface"] = i
	}
	return yaml.Marshal(map[string]any{"clouds": map[string]any{cloud: c}})
}

// ServiceCloudsInput names a service user's login to write as a clouds.yaml into the Secret that holds
// its password (keys clouds.yaml and cloud): Keystone's endpoint, the user, in project service of
// domain Default, the internal endpoints, as the services' own configuration logs in. It carries no
// secret value.
type ServiceCloudsInput struct {
	// Password is the Secret key of the user's password; the clouds.yaml is written beside it.
	Password SecretKeyRef `json:"password"`
	Cloud    string       `json:"cloud"`
	AuthURL  string       `json:"authURL"`
	User     string       `json:"user"`
	Owner    *Owner       `json:"owner,omitempty"`
}

// WriteServiceCloudsYAML writes the clouds.yaml of a service user beside its password. It writes only
// what differs.
func (k *Kube) WriteServiceCloudsYAML(ctx context.Context, in ServiceCloudsInput) error {
	password, err := ReadSecretKey(ctx, k.Core, in.Password)
	if err != nil {
		return err
	}
	// The internal endpoints, as the services' own configuration asks (valid_interfaces): a public one may
	// be an address only outside the cluster reaches, and the worker may run in it.
	clouds, err := CloudsYAML(in.Cloud, in.AuthURL, map[string]string{"OS_USERNAME": in.User, "OS_PASSWORD": password,
		"OS_PROJECT_NAME": "service", "OS_USER_DOMAIN_NAME": "Default", "OS_PROJECT_DOMAIN_NAME": "Default", "OS_INTERFACE": "internal"})
	if err != nil {
		return err
	}
	return k.writeClouds(ctx, in.Password.Namespace, in.Password.Name, in.Owner, in.Cloud, clouds)
}
