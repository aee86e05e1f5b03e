package kube

import (
	"context"
	"testing"

	"github.com/gophercloud/gophercloud/v2/openstack/config/clouds"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	"sigs.k8s.io/yaml"
)

func TestCloudsYAML(t *testing.T) {
	env := map[string]string{"OS_USERNAME": "admin", "OS_PASSWORD": "s3cret", "OS_PROJECT_NAME": "admin",
		"OS_USER_DOMAIN_NAME": "Default", "OS_PROJECT_DOMAIN_NAME": "Default", "OS_REGION_NAME": "RegionOne"}
	b, err := CloudsYAML("kupenstack", "http://10.96.0.10:5000/v3", env)
	require.NoError(t, err)
	// What gophercloud reads back from it is the administrator's login at that address.
	var file clouds.Clouds
	require.NoError(t, yaml.Unmarshal(b, &file))
	c, ok := file.Clouds["kupenstack"]
	require.True(t, ok, string(b))
	require.Equal(t, "http://10.96.0.10:5000/v3", c.AuthInfo.AuthURL)
	require.Equal(t, "admin", c.AuthInfo.Username)
	require.Equal(t, "s3cret", c.AuthInfo.Password)
	require.Equal(t, "admin", c.AuthInfo.ProjectName)
	require.Equal(t, "Default", c.AuthInfo.UserDomainName)
	require.Equal(t, "RegionOne", c.RegionName)

	for _, missing := range []string{"OS_USERNAME", "OS_PASSWORD", "OS_PROJECT_NAME"} {
		partial := map[string]string{}
		for k, v := range env {
			if k != missing {
				partial[k] = v
			}
		}
		_, err := CloudsYAML("kupenstack", "http://10.96.0.10:5000/v3", partial)
		require.ErrorContains(t, err, missing)
	}
}

// A service user's clouds.yaml is written beside its password, in project service of domain Default,
// and a missing password is said, not written as empty.
func TestWriteServiceCloudsYAML(t *testing.T) {
	ctx := context.Background()
	core := fake.NewSimpleClientset(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "nova-secret"},
		Data: map[string][]byte{"NovaPassword": []byte("pw"), "MetadataSecret": []byte("m")}})
	k := &Kube{Core: core}
	in := ServiceCloudsInput{Password: SecretKeyRef{Namespace: "ns", Name: "nova-secret", Key: "NovaPassword"}, Cloud: "nova",
		AuthURL: "http://10.96.0.10:5000/v3", User: "nova-two"}
	require.NoError(t, k.WriteServiceCloudsYAML(ctx, in))
	sec, err := core.CoreV1().Secrets("ns").Get(ctx, "nova-secret", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "nova", string(sec.Data["cloud"]))
	require.Equal(t, "m", string(sec.Data["MetadataSecret"]), "the other keys stay")
	var file clouds.Clouds
	require.NoError(t, yaml.Unmarshal(sec.Data["clouds.yaml"], &file))
	c := file.Clouds["nova"]
	require.Equal(t, clouds.AuthInfo{AuthURL: in.AuthURL, Username: "nova-two", Password: "pw", ProjectName: "service",
		UserDomainName: "Default", ProjectDomainName: "Default"}, *c.AuthInfo)
	require.Empty(t, c.RegionName, "the services are found in any region; compute in the cell's")
	require.Equal(t, "internal", c.Interface, "the internal endpoints, as the services use")

	in.Password.Key = "Missing"
	require.Error(t, k.WriteServiceCloudsYAML(ctx, in))
}

// A deployed Keystone's clouds.yaml logs in as its administrator at its Service's ClusterIP; an
// administrator's Secret that is not there yet, or a Service with no address, is said.
func TestWriteCloudsYAML(t *testing.T) {
	admin := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "cp", Name: "keystone-admin"},
		Data: map[string][]byte{"OS_USERNAME": []byte("admin"), "OS_PASSWORD": []byte("pw"), "OS_PROJECT_NAME": []byte("admin"),
			"OS_REGION_NAME": []byte("RegionOne")}}
	service := func(ip string) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "cp", Name: "keystone-api"},
			Spec: corev1.ServiceSpec{ClusterIP: ip, Ports: []corev1.ServicePort{{Port: 5000}}}}
	}
	in := CloudsYAMLInput{Namespace: "cp", AdminSecret: "keystone-admin", Service: "keystone-api", Secret: "keystone-clouds", Cloud: "kupenstack"}
	tests := []struct {
		name    string
		objects []runtime.Object
		wantErr string
	}{
		{name: "written", objects: []runtime.Object{admin, service("10.96.0.20")}},
		{name: "no administrator's Secret yet", objects: []runtime.Object{service("10.96.0.20")}, wantErr: "cp/keystone-admin not found"},
		{name: "a headless Service", objects: []runtime.Object{admin, service("None")}, wantErr: "no ClusterIP"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			core := fake.NewSimpleClientset(tt.objects...)
			err := (&Kube{Core: core}).WriteCloudsYAML(ctx, in)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			sec, err := core.CoreV1().Secrets("cp").Get(ctx, "keystone-clouds", metav1.GetOptions{})
			require.NoError(t, err)
			require.Equal(t, "kupenstack", string(sec.Data["cloud"]))
			var file clouds.Clouds
			require.NoError(t, yaml.Unmarshal(sec.Data["clouds.yaml"], &file))
			c := file.Clouds["kupenstack"]
			require.Equal(t, "http://10.96.0.20:5000/v3", c.AuthInfo.AuthURL)
			require.Equal(t, []string{"admin", "pw", "RegionOne"}, []string{c.AuthInfo.Username, c.AuthInfo.Password, c.RegionName})
		})
	}
}
