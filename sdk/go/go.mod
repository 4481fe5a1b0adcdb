module github.com/baton-dev/baton/sdk/go

go 1.24

tool google.golang.org/protobuf/cmd/protoc-gen-go

require google.golang.org/protobuf v1.36.12
