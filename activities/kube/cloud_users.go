package kube

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"go.temporal.io/sdk/temporal"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/stackflow/stackflow/api"
)

// CloudInput names a clouds.yaml Secret of a namespace.
type CloudInput struct {
	Namespace string `json:"namespace"`
	Secret    string `json:"secret"`
}

// ErrCloudInUse is the retryable error of WaitCloudUnused.
const ErrCloudInUse = "CloudInUse"

// cloudUserFields are where the kinds that log in to a cloud name its Secret.
var cloudUserFields = []struct {
	kind  string
	field []string
}{
	{"Nova", []string{"spec", "keystoneAdminSecret"}},
	{"OpenStackCluster", []string{"spec", "identityRef", "name"}},
	{"OpenStackMachine", []string{"spec", "identityRef", "name"}},
	{"OpenStackServer", []string{"spec", "identityRef", "name"}},
}

// CloudUsers lists, as Kind/name sorted, the objects of the namespace that log in with the Secret: they
// need the cloud for their own teardown.
func (k *Kube) CloudUsers(ctx context.Context, in CloudInput) ([]string, error) {
	var users []string
	for _, c := range cloudUserFields {
		list, err := k.resource(api.Ref(c.kind, in.Namespace, "")).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, Classify("list "+c.kind+" in "+in.Namespace, err)
		}
		for _, u := range list.Items {
			if name, _, _ := unstructured.NestedString(u.Object, c.field...); name == in.Secret {
				users = append(users, c.kind+"/"+u.GetName())
			}
		}
	}
	slices.Sort(users)
	return users, nil
}

// CloudInUseMessage says which objects still use the cloud of a Secret.
func CloudInUseMessage(in CloudInput, users []string) string {
	return fmt.Sprintf("the cloud of Secret %s/%s is still in use by %s", in.Namespace, in.Secret, strings.Join(users, ", "))
}

// WaitCloudUnused succeeds once no object of the namespace logs in with the Secret, and fails retryably
// before, naming them.
func (k *Kube) WaitCloudUnused(ctx context.Context, in CloudInput) error {
	users, err := k.CloudUsers(ctx, in)
	if err != nil {
		return err
	}
	if len(users) == 0 {
		return nil
	}
	return temporal.NewApplicationError(CloudInUseMessage(in, users), ErrCloudInUse)
}
