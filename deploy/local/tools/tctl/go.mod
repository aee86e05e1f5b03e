// Module tctl pins tctl, the Temporal CLI many operators' runbooks use: `go install` of v1.18.0 is
// refused here (the proxy will not list its versions for deprecation notices), building it from a module
// that requires it works.
module github.com/stackflow/stackflow/deploy/local/tools/tctl

go 1.24.0

require github.com/temporalio/tctl v1.18.0
