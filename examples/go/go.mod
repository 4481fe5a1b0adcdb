module github.com/baton-dev/baton/examples/go

go 1.24

require (
	github.com/baton-dev/baton/sdk/go v0.0.0
	google.golang.org/protobuf v1.36.12
)

replace github.com/baton-dev/baton/sdk/go => ../../sdk/go
