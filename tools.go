//go:build tools

// Package stackflow pins, for go mod tidy, the libraries the packages use before they import them all.
package stackflow

import (
	_ "github.com/apenella/go-ansible/v2/pkg/playbook"
	_ "github.com/gophercloud/gophercloud/v2/openstack"
	_ "github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"
	_ "github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servers"
	_ "github.com/gophercloud/gophercloud/v2/openstack/config/clouds"
	_ "github.com/gophercloud/gophercloud/v2/openstack/networking/v2/ports"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/stretchr/testify/require"
	_ "go.temporal.io/sdk/client"
	_ "go.temporal.io/sdk/testsuite"
	_ "go.temporal.io/sdk/worker"
	_ "go.temporal.io/sdk/workflow"
	_ "helm.sh/helm/v3/pkg/action"
	_ "helm.sh/helm/v3/pkg/repo"
	_ "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	_ "k8s.io/client-go/dynamic"
	_ "k8s.io/client-go/informers"
	_ "k8s.io/client-go/kubernetes"
	_ "k8s.io/client-go/tools/leaderelection"
)
