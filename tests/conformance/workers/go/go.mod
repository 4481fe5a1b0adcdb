module github.com/baton-dev/baton/tests/conformance/workers/go

go 1.24

require github.com/baton-dev/baton/sdk/go v0.0.0

replace github.com/baton-dev/baton/sdk/go => ../../../../sdk/go
