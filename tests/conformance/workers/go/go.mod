module github.com/baton-dev/baton/tests/conformance/workers/go

go 1.24

require github.com/baton-dev/baton/sdk/go v0.0.0

require google.golang.org/protobuf v1.36.12 // indirect

replace github.com/baton-dev/baton/sdk/go => ../../../../sdk/go
