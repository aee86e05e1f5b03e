// Package api holds stackflow's Kubernetes API: one package per group and version, with the Go types of
// every custom resource, their CEL validation markers and the generated deepcopy code. The CRD manifests
// in deploy/crds are generated from these types:
//
//	go generate ./api/...
//
// runs controller-gen from the local tool cache, $STACKFLOW_CACHE or ~/.cache/stackflow
// (deploy/local/tools/build.sh builds it).
package api

//go:generate sh -c "exec $DOLLAR{STACKFLOW_CACHE:-$DOLLAR{HOME}/.cache/stackflow}/bin/controller-gen-v0.19.0 object:headerFile=header.go.txt paths=./... crd:crdVersions=v1 output:crd:artifacts:config=../deploy/crds"
