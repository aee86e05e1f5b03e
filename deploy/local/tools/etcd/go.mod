// Module etcd pins the etcd server the local stack builds.
module github.com/stackflow/stackflow/deploy/local/tools/etcd

go 1.24.0

require go.etcd.io/etcd/v3 v3.6.8

require go.etcd.io/etcd/server/v3 v3.6.8 // indirect

replace (
	go.etcd.io/etcd/api/v3 => go.etcd.io/etcd/api/v3 v3.6.8
	go.etcd.io/etcd/client/pkg/v3 => go.etcd.io/etcd/client/pkg/v3 v3.6.8
	go.etcd.io/etcd/client/v3 => go.etcd.io/etcd/client/v3 v3.6.8
	go.etcd.io/etcd/pkg/v3 => go.etcd.io/etcd/pkg/v3 v3.6.8
	go.etcd.io/etcd/server/v3 => go.etcd.io/etcd/server/v3 v3.6.8
)
