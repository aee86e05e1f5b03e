package kube

import (
	"testing"

	"github.com/gophercloud/gophercloud/v2/openstack/config/clouds"
	"github.com/stretchr/testify/require"
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
